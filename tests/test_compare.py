"""The autograder's comparison and feedback, without nbgrader: tolerances and named diagnoses."""

import numpy as np
import pytest

from course_check.compare import compare, tolerance
from course_check.calling import to_inputs


def test_tolerance_follows_the_reference_dtype_and_kind():
    eps = np.finfo(np.float64).eps
    assert tolerance("exact") == pytest.approx(1e4 * eps)
    assert tolerance("finite_difference") == pytest.approx(1e3 * np.sqrt(eps))
    assert tolerance("integer") == 0.0
    with pytest.raises(ValueError, match="valid: exact"):
        tolerance("approximately")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_narrow_result_is_compared_as_the_numbers_it_holds(dtype):
    ref = np.array([1.0 / 3.0, -2.0, 7.0])
    narrow = ref.astype(dtype)
    verdict = compare(narrow, ref)
    # the same numbers as float64 get the same verdict: the dtype buys no tolerance
    assert not verdict.passed and not compare(narrow.astype(np.float64), ref).passed
    assert np.dtype(dtype).name in verdict.message and "精度太低" in verdict.message and "float64" in verdict.message
    assert "0.333" not in verdict.message and "0.3333" not in verdict.message  # no expected values
    assert "精度太低" not in compare(narrow.astype(np.float64), ref).message  # the dtype note is for narrow dtypes


def test_float16_zeros_fail_like_float64_zeros():
    ref = np.array([0.25, -1.5])
    for zeros in (np.zeros(2, np.float16), np.zeros(2)):
        verdict = compare(zeros, ref)
        assert not verdict.passed and "全为零" in verdict.message


def test_exactly_representable_narrow_result_passes():
    ref = np.array([0.5, -2.0, 0.0])
    assert compare(ref.astype(np.float16), ref).passed


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix, on purpose
def test_subclasses_and_int_results_are_plain_numbers():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert compare(np.matrix(ref), ref).passed
    assert not compare(np.matrix(ref * (1 + 1e-9)), ref).passed
    assert compare(ref.astype(np.int64), ref).passed
    assert not compare(ref.astype(np.complex128) + 1e-3j, ref).passed  # no silent drop of an imaginary part


def test_atol_adds_to_the_relative_band():
    ref = np.array([0.0, 0.0])
    got = np.array([1e-13, -1e-13])
    assert not compare(got, ref).passed  # a zero reference has no scale: exact equality
    assert compare(got, ref, atol=1e-12).passed
    assert not compare(got, ref, atol=1e-14).passed


def test_exact_result_passes_and_a_small_error_fails():
    ref = np.array([1.0, -2.0, 3.0])
    assert compare(ref * (1 + 1e-14), ref).passed
    verdict = compare(ref + 1e-6, ref)
    assert not verdict.passed and "相对误差" in verdict.message


def test_rtol_replaces_the_kind_tolerance():
    ref = np.array([1.0, 2.0])
    got = np.array([1.0, 2.05])
    assert not compare(got, ref).passed
    assert compare(got, ref, rtol=0.05).passed
    assert not compare(got, ref, rtol=0.01).passed


@pytest.mark.parametrize(
    "student, fragment",
    [
        (-np.array([[1.0, 2.0], [3.0, 4.0]]), "负号"),
        (np.array([[1.0, 3.0], [2.0, 4.0]]), "转置"),
        (np.zeros((2, 2)), "全为零"),
        (np.array([[1.0, np.nan], [3.0, 4.0]]), "NaN"),
        (0.5 * np.array([[1.0, 2.0], [3.0, 4.0]]), "0.5 倍"),
        (np.ones((3, 2)), "形状"),
        ("not a number", "数值数组"),
    ],
)
def test_typical_mistakes_are_named_without_revealing_the_reference(student, fragment):
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    verdict = compare(student, ref)
    assert not verdict.passed
    assert fragment in verdict.message
    assert "1.0, 2.0" not in verdict.message and "[[1" not in verdict.message  # no expected values


def test_named_alternative_is_recognised():
    ref = np.array([1.0, 2.0, 4.0])
    alt = np.array([1.0, 2.0, 5.0])
    verdict = compare(alt, ref, mistakes={"horizon_plus_one": alt}, messages={"horizon_plus_one": "多算一步了。"})
    assert "多算一步了。" in verdict.message
    # the data carries each mistake's message; without one the feedback still says a known mistake matched
    assert "已知的错误做法" in compare(alt, ref, mistakes={"horizon_plus_one": alt}).message


def test_boolean_masks_compare_exactly():
    ref = np.array([True, False, True])
    assert compare(ref.copy(), ref).passed
    assert not compare(~ref, ref).passed


def test_to_inputs_turns_json_lists_into_float64_arrays_recursively():
    inputs = to_inputs({"x": [1, 2], "params": {"mass": [1.5], "n": 3}, "name": "ball", "steps": 4})
    assert inputs["x"].dtype == np.float64 and inputs["x"].shape == (2,)
    assert inputs["params"]["mass"].dtype == np.float64 and inputs["params"]["n"] == 3
    assert inputs["name"] == "ball" and inputs["steps"] == 4


def test_integer_kind_counts_mismatches_without_float_diagnoses():
    ref = np.array([1, 0, 2])
    assert compare(np.array([1, 0, 2]), ref, kind="integer").passed
    verdict = compare(np.array([0, 0, 0]), ref, kind="integer")
    assert not verdict.passed and "2/3" in verdict.message and "全为零" not in verdict.message
    assert not compare(np.array([-1, 0, -2]), ref, kind="integer").message.count("负号")


def test_integer_kind_names_every_catalogued_mistake_it_matches():
    ref = np.array([2])
    mistakes = {"no_threshold": np.array([3]), "default_tol": np.array([3]), "terminal": np.array([1])}
    messages = {"no_threshold": "阈值为零。", "default_tol": "默认阈值。", "terminal": "只看终点。"}
    verdict = compare(np.array([3]), ref, kind="integer", mistakes=mistakes, messages=messages)
    assert not verdict.passed
    assert "阈值为零。也可能是：默认阈值。" in verdict.message and "只看终点" not in verdict.message
    assert "只看终点。" in compare(np.array([1]), ref, kind="integer", mistakes=mistakes, messages=messages).message
    assert compare(np.array([7]), ref, kind="integer", mistakes=mistakes, messages=messages).message.endswith("(0,)。")
    # a plateau's edges: one entry of the mistake's own indices moved (rounding), the other three match
    starts, stops = np.array([3, 4, 6, 8]), np.array([9, 11, 12, 14])
    near = compare(np.array([9, 11, 13, 14]), starts, "integer", {"stop": stops}, messages={"stop": "取成了终点。"})
    assert near.message.endswith("取成了终点。")
    # two moved by one each (another machine's rounding): still four times nearer the stops than the starts
    moved = compare(np.array([9, 11, 13, 15]), starts, "integer", {"stop": stops}, messages={"stop": "取成了终点。"})
    assert moved.message.endswith("取成了终点。") and moved.diagnosis == "stop"
    far = compare(np.array([5, 6, 8, 10]), starts, "integer", {"stop": stops}, messages={"stop": "取成了终点。"})
    assert "终点" not in far.message and far.diagnosis == ""


def test_precheck_explains_malformed_notebooks_without_raising(tmp_path):
    import json

    from autograder.ops.classrun import precheck

    cases = {
        "{not json": "不是合法的",
        json.dumps([1, 2]): "不是合法的",
        json.dumps({"cells": 5}): "不是合法的",
        json.dumps({"cells": ["oops"]}): "已损坏",
        json.dumps({"cells": [{"metadata": {"nbgrader": {"grade_id": "a"}}}] * 2}): "复制",
    }
    for text, fragment in cases.items():
        (tmp_path / "nb.ipynb").write_text(text)
        assert fragment in precheck(tmp_path), text
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [{"metadata": {}}]}))
    assert precheck(tmp_path) == ""


def test_a_trajectory_names_the_first_step_that_leaves_the_band_and_no_value():
    ref = np.linspace(1.0, 2.0, 10)[:, None] * np.array([1.0, -3.0])  # a (10, 2) state trajectory
    got = ref.copy()
    got[6:, 1] += 0.1 * (1.0 + np.arange(4))  # drifts from step 6 on, second state only
    verdict = compare(got, ref)
    assert not verdict.passed
    assert "4/20 个元素超出容差，第一个在下标 (6, 1)" in verdict.message
    assert "-3" not in verdict.message and "-6" not in verdict.message  # the index, never the expected value


def test_a_constant_offset_on_a_log_scale_is_read_as_a_missing_factor():
    log10_norms = np.log10(np.array([3.0, 30.0, 700.0, 9000.0]))  # e.g. log10 of gradient norms over a horizon
    verdict = compare(log10_norms + np.log10(0.5), log10_norms)  # every norm off by a factor 1/2
    assert not verdict.passed
    assert "同一个常数 -0.301" in verdict.message and "10^-0.301 ≈ 0.5" in verdict.message
    # one offset entry alone is just a wrong number: no constant-offset story from a single value
    assert "同一个常数" not in compare(np.array([1.3]), np.array([1.0])).message


def test_a_catalogued_mistake_shows_its_own_message_before_the_generic_patterns():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    own = {"slope_sign": "斜率的符号取反了：接触力随穿透深度增大，斜率应为正。"}
    for catalogued in (-ref, np.zeros_like(ref), ref.T):  # each would also match a generic pattern
        verdict = compare(catalogued, ref, mistakes={"slope_sign": catalogued}, messages=own)
        assert own["slope_sign"] in verdict.message
        assert not any(generic in verdict.message for generic in ("只差一个负号", "全为零", "是参考值的转置"))


def test_a_near_miss_on_a_symmetric_reference_is_not_called_a_transpose():
    ref = np.array([[2.0, 1.0], [1.0, 3.0]])  # a finite-difference Jacobian of a symmetric map, slightly off
    verdict = compare(ref * (1 + 1e-7) + np.array([[0.0, 1e-7], [0.0, 0.0]]), ref)
    assert not verdict.passed and "转置" not in verdict.message and "离参考值很近" in verdict.message
    nonsymmetric = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert "转置" in compare(nonsymmetric.T, nonsymmetric).message  # a real transpose is still named


def test_a_float32_result_is_a_near_miss_not_a_factor_of_one():
    ref = np.array([1.0 / 3.0, 2.0 / 7.0, -5.0 / 11.0])
    verdict = compare(ref.astype(np.float32), ref)
    assert not verdict.passed and "倍" not in verdict.message
    assert "离参考值很近" in verdict.message and "float32" in verdict.message


def test_an_all_zero_reference_reports_the_absolute_error():
    verdict = compare(np.array([0.0, 2e-3]), np.zeros(2), atol=1e-9)
    assert not verdict.passed and "参考值全为零" in verdict.message and "2.00e-03" in verdict.message
    assert "e+2" not in verdict.message and "相对误差" not in verdict.message


# --- a label answer earns only what beats the best constant answer (Check(credit="above_constant")) ---------


def _label_spec(labels, credit="above_constant"):
    return {
        "points": 4.0,
        "messages": {},
        **({"credit": credit} if credit else {}),
        "outputs": [{"label": "结论", "kind": "integer", "rtol": 0.0, "atol": 0.0}],
        "cases": [{"expected": [label], "mistakes": {}} for label in labels],
    }


@pytest.mark.parametrize(
    ("answers", "earned"),
    [
        ([1, 0, 3, 0, 2, 2, 0, 1], 4.0),  # every verdict right
        ([0] * 8, 0.0),  # the most common label everywhere: 3 of 8 right, worth nothing
        ([2] * 8, 0.0),
        ([1, 0, 3, 0, 2, 2, 0, 0], 3.2),  # 7 right: 4 beyond the constant's 3, of 5 possible
        ([1, 0, 3, 0, 0, 0, 0, 0], 1.6),
    ],
)
def test_a_label_answer_earns_only_what_beats_a_constant_answer(answers, earned):
    from course_check.protocol import encode
    from course_check.scoring import constant_best, score_results

    spec = _label_spec([1, 0, 3, 0, 2, 2, 0, 1])
    assert constant_best(spec["cases"]) == 3
    results = [{"status": "ok", "value": encode(a)} for a in answers]
    scored = score_results("ex", "audit", "隐藏测试", spec, results)
    assert scored.earned == pytest.approx(earned)
    assert ("每次都给同一个结论也能对 3 个" in scored.feedback) == (earned < 4.0)
    per_case = score_results("ex", "audit", "隐藏测试", _label_spec([1, 0, 3, 0, 2, 2, 0, 1], None), results)
    assert per_case.earned == pytest.approx(4.0 * sum(a == b for a, b in zip(answers, [1, 0, 3, 0, 2, 2, 0, 1])) / 8)


def test_above_constant_credit_needs_one_label_output():
    from autograder.authoring.registry import Check, Output

    with pytest.raises(ValueError, match="one integer"):
        Check("f", lambda: [], reference=abs, outputs=(Output("x", "exact"),), credit="above_constant")
    with pytest.raises(ValueError, match="credit must be"):
        Check("f", lambda: [], reference=abs, outputs=(Output("x", "integer"),), credit="most")
