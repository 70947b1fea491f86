"""The autograder's comparison and feedback, without nbgrader: tolerances and named diagnoses."""

import numpy as np
import pytest

from autograder.verdict.compare import compare, tolerance
from autograder.kernel.capture import to_inputs


def test_tolerance_follows_dtype_and_kind():
    assert tolerance(np.float64, "exact") == pytest.approx(1e4 * np.finfo(np.float64).eps)
    assert tolerance(np.float32, "exact") == pytest.approx(1e4 * np.finfo(np.float32).eps)
    assert tolerance(np.float64, "finite_difference") == pytest.approx(1e3 * np.sqrt(np.finfo(np.float64).eps))
    with pytest.raises(ValueError, match="valid: exact"):
        tolerance(np.float64, "approximately")


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
    verdict = compare(alt, ref, mistakes={"horizon_plus_one": alt})
    assert "多算一步" in verdict.message


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
