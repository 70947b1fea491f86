"""The trust boundary of grading, unit-tested in milliseconds: the record decoder, the scorer and
``verdict_outputs``, without a kernel or nbgrader run.

The student's kernel controls the result record completely: any JSON under the record's MIME type, any
number of times, any size. Whatever it shows, the trusted side must decode strictly
(:func:`course_check.protocol.decode` raises :class:`~course_check.protocol.MalformedRecord`), never raise
out of :func:`~autograder.verdict.preprocessors.verdict_outputs`, never give points to values that are
not the reference's, and never print the expected values. Table-driven cases name each forgery;
property-based tests (hypothesis, derandomized so CI is reproducible) search for the ones not named.
"""

from __future__ import annotations

import json
import math
import re
import time

import nbformat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from nbformat.notebooknode import NotebookNode

from course_check.protocol import MAX_ELEMENTS, MIME, MalformedRecord, Unsupported, decode, encode
from autograder.verdict.data import load
from autograder.verdict.preprocessors import verdict_outputs
from autograder.verdict.score import score

EXERCISE = "s04_1_ex1"
FD, ANALYTIC = "fd_grad", "analytic_grad"  # two outputs (FD gradient, rollout count) / one (exact gradient)
DATA = load(EXERCISE)
OTHER_EXERCISE, OTHER_NAME = "s04_1_ex2", "sysid_grad"
assert {FD, ANALYTIC} <= set(DATA) and OTHER_NAME in load(OTHER_EXERCISE)

#: reproducible in CI, nothing written to disk, no per-example deadline on a shared 2-core machine
FAST = dict(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
CJK = re.compile(r"[\u4e00-\u9fff]")


# ---------------------------------------------------------------- helpers


def expected(name: str) -> list[list[np.ndarray]]:
    """The reference outputs of every hidden case of check ``name`` (float64 arrays)."""
    return [[np.asarray(v, dtype=np.float64) for v in case["expected"]] for case in DATA[name]["cases"]]


def returned(outputs: list, name: str):
    """What a student function returns for one case: the bare value for one output, a tuple for several."""
    return outputs[0] if len(DATA[name]["outputs"]) == 1 else tuple(outputs)


def ok(value) -> dict:
    return {"status": "ok", "value": encode(value)}


def record_of(transform, name: str = FD, exercise: str = EXERCISE) -> dict:
    """A record whose case ``i`` holds ``transform`` applied to each expected output of case ``i``."""
    results = [ok(returned([transform(v) for v in case], name)) for case in expected(name)]
    return {"exercise": exercise, "name": name, "results": results}


def correct(name: str = FD) -> dict:
    return record_of(lambda v: v, name)


def graded_cell(outputs: list, name: str = FD, exercise: str = EXERCISE):
    cell = nbformat.v4.new_code_cell(f'autograder.grade("{exercise}", "{name}", {name})')
    cell.outputs = list(outputs)
    return cell


def shown(rec, output_type: str = "display_data") -> NotebookNode:
    """``rec`` shown under the record's MIME type (built without nbformat.from_dict, which recurses)."""
    out = NotebookNode(output_type=output_type, metadata={}, data={MIME: rec})
    if output_type == "execute_result":
        out.execution_count = 1
    return out


def points(outputs: list) -> float:
    """The score ``verdict_outputs`` gave: zero when it ends in an error, else its final execute_result."""
    if any(o.output_type == "error" for o in outputs):
        return 0.0
    assert outputs[-1].output_type == "execute_result", outputs
    return float(outputs[-1].data["text/plain"])


def feedback(outputs: list) -> str:
    return "\n".join(o.get("text", "") + o.get("evalue", "") for o in outputs)


def expected_reprs(name: str) -> set[str]:
    return {repr(float(x)) for case in expected(name) for v in case for x in v.ravel()}


def assert_discreet(outputs: list, name: str = FD) -> None:
    """Chinese feedback, and no expected value (as ``repr`` prints it) in that feedback."""
    text = feedback(outputs)
    assert CJK.search(text), text
    leaked = {r for r in expected_reprs(name) if r in text}
    assert not leaked, leaked


def assert_zero_and_discreet(outputs: list, name: str = FD) -> None:
    assert points(outputs) == 0.0, feedback(outputs)
    assert_discreet(outputs, name)


def deep(leaf, levels: int):
    """``leaf`` wrapped in ``levels`` nested ``{"seq": [...]}`` (built without recursion)."""
    for _ in range(levels):
        leaf = {"seq": [leaf]}
    return leaf


def deep_list(levels: int):
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def assert_decoded_type(value) -> None:
    """What decode may return: numeric arrays, Unsupported, or lists of them."""
    if isinstance(value, list):
        for v in value:
            assert_decoded_type(v)
    else:
        assert isinstance(value, Unsupported) or (isinstance(value, np.ndarray) and value.dtype.kind in "biuf"), value


def arr(dtype, shape, data) -> dict:
    return {"dtype": dtype, "shape": shape, "data": data}


# ---------------------------------------------------------------- decode: table of forgeries


MALFORMED = {
    # not an encoded value at all
    "none": None,
    "true": True,
    "int": 0,
    "float": 1.5,
    "string": "float64",
    "list": [1.0],
    "empty dict": {},
    # wrong, extra or missing keys
    "two keys": {"dtype": "float64", "shape": [1]},
    "extra key": {**arr("float64", [1], [1.0]), "extra": 1},
    "unknown three keys": {"a": 1, "b": 2, "c": 3},
    "seq plus key": {"seq": [], "dtype": "float64"},
    "seq not a list": {"seq": {"0": arr("float64", [], [1.0])}},
    "seq of a string": {"seq": "abc"},
    "seq holding a bare number": {"seq": [1.0]},
    "unsupported not a string": {"unsupported": {"a": 1}},
    "unsupported none": {"unsupported": None},
    "value key": {"value": arr("float64", [1], [1.0])},
    # dtypes encode never writes
    **{
        f"dtype {d!r}": arr(d, [1], [1])
        for d in (
            "object",
            "O",
            "complex128",
            "c16",
            "U5",
            "S3",
            "V8",
            "datetime64",
            "M8[ns]",
            "timedelta64",
            "f8,f8",
            "(2,)f8",
            "not-a-dtype",
            "",
            "float",
            "f8",
            ">f8",
            "<f8",
            "double",
            "Float64",
            " float64",
        )
    },
    "dtype not a string": arr(64, [1], [1]),
    "dtype none": arr(None, [1], [1]),
    "dtype list": arr(["float64"], [1], [1]),
    "dtype bool": arr(True, [1], [1]),
    # shapes
    "shape string": arr("float64", "1", [1.0]),
    "shape int": arr("float64", 1, [1.0]),
    "shape tuple": arr("float64", (1,), [1.0]),
    "shape none": arr("float64", None, [1.0]),
    "shape negative": arr("float64", [-1], [1.0]),
    "shape negative pair": arr("float64", [-1, -1], [1.0]),
    "shape bool": arr("float64", [True], [1.0]),
    "shape float": arr("float64", [1.0], [1.0]),
    "shape string entry": arr("float64", ["1"], [1.0]),
    "shape nested": arr("float64", [[1]], [1.0]),
    "shape too long for data": arr("float64", [2], [1.0, 2.0, 3.0]),
    "shape too short for data": arr("float64", [2, 2], [1.0, 2.0, 3.0]),
    "scalar shape, no data": arr("float64", [], []),
    "empty shape, one datum": arr("float64", [0], [1.0]),
    "65 dimensions": arr("float64", [1] * 65, [1.0]),
    "huge zero-size shape": arr("float64", [0, 10**30], []),
    "huge dimension": arr("float64", [10**400], [1.0]),
    "zero-size shape over numpy's limit": arr("float64", [0] + [MAX_ELEMENTS] * 63, []),
    # data
    "data string": arr("float64", [3], "abc"),
    "data dict": arr("float64", [1], {"0": 1.0}),
    "data none": arr("float64", [0], None),
    "data null entry": arr("float64", [1], [None]),
    "data numeric string": arr("float64", [1], ["1.0"]),
    "data nested list": arr("float64", [1], [[1.0]]),
    "data dict entry": arr("float64", [1], [{}]),
    # non-finite values only as exactly "nan", "inf", "-inf"
    **{
        f"non-finite {s!r}": arr("float64", [1], [s])
        for s in (
            "NaN",
            "NAN",
            "Infinity",
            "-Infinity",
            "INF",
            "+inf",
            " nan",
            "nan ",
            "inf\x00",
            "-nan",
            "1e999",
        )
    },
    # values that do not fit the dtype
    "integer beyond float64": arr("float64", [1], [10**400]),
    "integer beyond int64": arr("int64", [1], [2**63]),
    "negative unsigned": arr("uint8", [1], [-1]),
    "uint8 overflow": arr("uint8", [1], [300]),
    "NaN as an integer": arr("int64", [1], ["nan"]),
    "inf as an integer": arr("int64", [1], ["inf"]),
}


@pytest.mark.parametrize("forged", MALFORMED.values(), ids=MALFORMED.keys())
def test_decode_rejects_what_encode_never_writes(forged):
    with pytest.raises(MalformedRecord):
        decode(forged)


def test_decode_rejects_more_than_max_elements():
    with pytest.raises(MalformedRecord):
        decode(arr("float64", [MAX_ELEMENTS + 1], [0.0] * (MAX_ELEMENTS + 1)))


def test_decode_bounds_shapes_before_multiplying_them():
    """A shape of many huge integers (2 MB of JSON) must be refused at once: multiplied out it stalls the
    trusted process (about 10 s for these 500 entries, hours for a few thousand)."""
    start = time.perf_counter()
    with pytest.raises(MalformedRecord):
        decode(arr("float64", [10**4000] * 500, [1.0]))
    assert time.perf_counter() - start < 1.0


ACCEPTED = {
    "nan inf -inf strings": (arr("float64", [3], ["nan", "inf", "-inf"]), np.array([np.nan, np.inf, -np.inf])),
    "float16 is a dtype encode writes": (arr("float16", [2], [0.5, 1.0]), np.array([0.5, 1.0], dtype=np.float16)),
    "0-d": (arr("float64", [], [2.5]), np.array(2.5)),
    "empty": (arr("float64", [0], []), np.zeros(0)),
    "2-d": (arr("float64", [2, 1], [1.0, 2.0]), np.array([[1.0], [2.0]])),
    "bool": (arr("bool", [2], [True, False]), np.array([True, False])),
    "int64 beyond 2**53": (arr("int64", [1], [2**53 + 1]), np.array([2**53 + 1], dtype=np.int64)),
    "uint64 maximum": (arr("uint64", [1], [2**64 - 1]), np.array([2**64 - 1], dtype=np.uint64)),
}


@pytest.mark.parametrize("rec, want", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_decode_accepts_what_encode_writes(rec, want):
    got = decode(rec)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_decode_returns_lists_for_seq_and_unsupported_keeps_its_description():
    got = decode({"seq": [arr("float64", [], [1.0]), {"seq": []}, {"unsupported": "str"}]})
    assert isinstance(got, list) and len(got) == 3 and got[1] == []
    assert isinstance(got[2], Unsupported) and got[2].description == "str"


# ---------------------------------------------------------------- score: the scorer on its own


def test_score_of_the_reference_values_is_full():
    for name in (FD, ANALYTIC):
        earned, possible, text = score(EXERCISE, name, correct(name))
        assert earned == possible == DATA[name]["points"] > 0, text


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param(lambda r: {**r, "exercise": OTHER_EXERCISE}, id="another exercise"),
        pytest.param(lambda r: {**r, "name": ANALYTIC}, id="another check"),
        pytest.param(lambda r: {k: v for k, v in r.items() if k != "exercise"}, id="no exercise"),
        pytest.param(lambda r: {**r, "results": r["results"][:-1]}, id="one result short"),
        pytest.param(lambda r: {**r, "results": r["results"] * 2}, id="twice the results"),
        pytest.param(lambda r: {**r, "results": []}, id="no results"),
        pytest.param(lambda r: {**r, "results": dict(enumerate(r["results"]))}, id="results a dict"),
        pytest.param(lambda r: {**r, "results": "all passed"}, id="results a string"),
        pytest.param(lambda r: {**r, "results": None}, id="results none"),
        pytest.param(
            lambda r: {**r, "results": [{**r["results"][0], "status": "passed"}] + r["results"][1:]},
            id="unknown status",
        ),
        pytest.param(
            lambda r: {**r, "results": [{"value": r["results"][0]["value"]}] + r["results"][1:]}, id="no status"
        ),
        pytest.param(lambda r: {**r, "results": [{"status": "ok"}] * 3}, id="ok without value"),
        pytest.param(lambda r: [r], id="record in a list"),
        pytest.param(lambda r: json.dumps(r), id="record as JSON text"),
    ],
)
def test_score_refuses_a_record_that_is_not_of_this_check(forged):
    """The reference values themselves, in an envelope the capture side never writes, are refused."""
    with pytest.raises(MalformedRecord):
        score(EXERCISE, FD, forged(correct(FD)))


def test_score_of_negated_values_is_less_and_names_the_sign():
    earned, possible, text = score(EXERCISE, ANALYTIC, record_of(lambda v: -v, ANALYTIC))
    assert earned < possible and "负号" in text


def test_score_of_float16_zeros_is_zero():
    """Tolerances come from the reference, never from the dtype the student returns: zeros cast to
    float16 (whose eps makes any relative error look small) are still zeros."""
    for name in (FD, ANALYTIC):
        earned, _, text = score(EXERCISE, name, record_of(lambda v: np.zeros(v.shape, np.float16), name))
        assert earned == 0.0, text


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_narrow_float_dtype_buys_no_tolerance_on_an_exact_check(dtype):
    """A float32 (float16) copy of the expected values scores what the same numbers score as float64."""
    narrow = score(EXERCISE, ANALYTIC, record_of(lambda v: v.astype(dtype), ANALYTIC))[0]
    wide = score(EXERCISE, ANALYTIC, record_of(lambda v: v.astype(dtype).astype(np.float64), ANALYTIC))[0]
    assert narrow == wide


def test_integer_and_bool_arrays_in_place_of_float_gradients_score_zero():
    for dtype in (np.int64, np.int8, bool):
        for name in (FD, ANALYTIC):
            earned, _, text = score(EXERCISE, name, record_of(lambda v, d=dtype: np.rint(v * 1e3).astype(d), name))
            assert earned == 0.0, (dtype, text)


def test_an_integer_count_is_a_valid_return_for_an_integer_valued_output():
    """The rollout count returned as an int (Python or numpy) is right, not a dtype game."""
    for as_int in (int, np.int64, np.int32):
        rec = {"exercise": EXERCISE, "name": FD, "results": [ok((g, as_int(round(float(c))))) for g, c in expected(FD)]}
        earned, possible, text = score(EXERCISE, FD, rec)
        assert earned == possible, text


ARITY = {
    "one value for two outputs": lambda g, c: (g,),
    "three values for two outputs": lambda g, c: (g, c, c),
    "the pair nested in a one-tuple": lambda g, c: ((g, c),),
    "the pair doubly nested": lambda g, c: (((g, c),),),
    "the gradient alone": lambda g, c: g,
    "the pair reversed": lambda g, c: (c, g),
}


@pytest.mark.parametrize("wrong", ARITY.values(), ids=ARITY.keys())
def test_expected_values_in_a_sequence_of_the_wrong_arity_score_zero(wrong):
    rec = {"exercise": EXERCISE, "name": FD, "results": [ok(wrong(g, c)) for g, c in expected(FD)]}
    assert score(EXERCISE, FD, rec)[0] == 0.0


def test_a_one_output_check_refuses_its_value_wrapped_in_a_sequence():
    for wrap in (lambda g: (g,), lambda g: [[g]], lambda g: (g, g)):
        rec = record_of(lambda v, w=wrap: w(v), ANALYTIC)
        assert score(EXERCISE, ANALYTIC, rec)[0] == 0.0


def test_a_list_of_the_expected_floats_is_a_legitimate_return():
    """encode writes a Python list as a seq of scalars; the numbers, not the container, are scored."""
    rec = record_of(lambda v: [float(x) for x in v], ANALYTIC)
    assert score(EXERCISE, ANALYTIC, rec)[0] == DATA[ANALYTIC]["points"]


# ---------------------------------------------------------------- verdict_outputs: the graded cell


def test_verdict_of_the_reference_record_is_full_marks():
    """The positive control: the harness below can award points, so its zeros mean something."""
    out = verdict_outputs(graded_cell([shown(correct())]))
    assert points(out) == DATA[FD]["points"] and CJK.search(feedback(out))


def _error_output():
    return NotebookNode(output_type="error", ename="TimeoutError", evalue="timed out", traceback=[])


def _stream(text):
    return NotebookNode(output_type="stream", name="stdout", text=text)


GOOD = correct()
ZERO = record_of(np.zeros_like)
HUGE = {
    **ZERO,
    "results": [
        {
            "status": "ok",
            "value": {"seq": [arr("float64", [MAX_ELEMENTS], [0.0] * MAX_ELEMENTS), arr("int64", [], [13])]},
        }
    ]
    + ZERO["results"][1:],
}
CELLS = {
    "no output": [],
    "a printed pass only": [_stream("[s04_1_ex1] fd_grad: 通过 3/3 个隐藏测试，得分 3/3\n3.0")],
    "display without the MIME type": [
        NotebookNode(output_type="display_data", metadata={}, data={"text/plain": "3.0"})
    ],
    "two correct records": [shown(GOOD), shown(GOOD)],
    "a correct and a forged record": [shown(GOOD), shown(ZERO)],
    "a correct record plus an error": [shown(GOOD), _error_output()],
    "an error before a correct record": [_error_output(), shown(GOOD)],
    "a forged record as execute_result": [shown(ZERO, "execute_result")],
    "a forged record as display_data": [shown(ZERO)],
    "a correct record and a second one as execute_result": [shown(GOOD), shown(ZERO, "execute_result")],
    "MIME data a list": [shown([GOOD])],
    "MIME data the record as JSON text": [shown(json.dumps(GOOD))],
    "MIME data none": [shown(None)],
    "MIME data a number": [shown(3.0)],
    "a record for another exercise": [shown({**GOOD, "exercise": OTHER_EXERCISE})],
    "a record for another check": [shown(correct(ANALYTIC))],
    "another check's record renamed": [shown({**correct(ANALYTIC), "name": FD})],
    "a huge record": [shown(HUGE)],
    "a million results": [shown({**GOOD, "results": GOOD["results"][:1] * 10**6})],
    "a huge unsupported description": [
        shown({**GOOD, "results": [{"status": "ok", "value": {"unsupported": "x" * 10**7}}] * 3})
    ],
    "a huge error text and line": [
        shown({**GOOD, "results": [{"status": "error", "error": "e" * 10**7, "line": "1" * 10**6}] * 3})
    ],
    "integer beyond float64": [
        shown(
            {
                **GOOD,
                "results": [
                    {"status": "ok", "value": {"seq": [arr("float64", [1], [10**400]), arr("int64", [], [14])]}}
                ]
                * 3,
            }
        )
    ],
    "deep seq, 10000 levels": [
        shown({**GOOD, "results": [{"status": "ok", "value": deep(arr("float64", [], [1.0]), 10_000)}] * 3})
    ],
    "deep error text": [shown({**GOOD, "results": [{"status": "error", "error": deep_list(10_000), "line": 1}] * 3})],
    "deep line number": [
        shown({**GOOD, "results": [{"status": "error", "error": "x", "line": deep_list(10_000)}] * 3})
    ],
    "deep exercise field": [shown({**GOOD, "exercise": deep_list(10_000)})],
    "deep results": [shown({**GOOD, "results": deep_list(10_000)})],
}


@pytest.mark.parametrize("outputs", CELLS.values(), ids=CELLS.keys())
def test_verdict_of_a_forged_cell_is_zero_and_reveals_nothing(outputs):
    """Never raises, scores zero, explains in Chinese, and prints none of the expected values."""
    assert_zero_and_discreet(verdict_outputs(graded_cell(outputs)))


@pytest.mark.parametrize(
    "source",
    [
        "fd_grad(u, dt)",
        'autograder.grade("s04_1_ex1", "fd_grad", fd_grad)\nautograder.grade("s04_1_ex1", "fd_grad", fd_grad)',
    ],
)
def test_verdict_of_a_misconfigured_cell_is_zero_even_with_a_correct_record(source):
    cell = graded_cell([shown(GOOD)])
    cell.source = source
    assert_zero_and_discreet(verdict_outputs(cell))


def test_the_exercise_comes_from_the_cell_source_not_the_record():
    """A correct record relabelled for another exercise's cell is scored against that exercise's data."""
    cell = graded_cell(
        [shown({**GOOD, "exercise": OTHER_EXERCISE, "name": OTHER_NAME})], name=OTHER_NAME, exercise=OTHER_EXERCISE
    )
    assert points(verdict_outputs(cell)) == 0.0


# ---------------------------------------------------------------- property-based: what the tables miss

SPECIAL_STRINGS = [
    "nan",
    "inf",
    "-inf",
    "NaN",
    "seq",
    "dtype",
    "shape",
    "data",
    "unsupported",
    "ok",
    "error",
    "status",
    "value",
    "float64",
    "float16",
    "int64",
    "bool",
    "object",
    "complex128",
    "U5",
    "f8",
    EXERCISE,
    FD,
    ANALYTIC,
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**63, 2**64, -1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(SPECIAL_STRINGS)
)
JSON = st.recursive(
    SCALARS,
    lambda c: st.lists(c, max_size=4)
    | st.dictionaries(st.sampled_from(SPECIAL_STRINGS) | st.text(max_size=4), c, max_size=4),
    max_leaves=24,
)
DTYPE_NAMES = st.sampled_from(
    [
        "float64",
        "float32",
        "float16",
        "int64",
        "int8",
        "uint8",
        "uint64",
        "bool",
        "object",
        "complex128",
        "U5",
        "f8",
        "datetime64",
    ]
) | st.text(max_size=6)
SHAPES = st.lists(st.integers(-2, 4) | st.booleans() | st.sampled_from([1.0, "2", None, 10**30]), max_size=3)
DATA_ITEMS = st.lists(SCALARS, max_size=8)
CONSISTENT_ARRAY = st.lists(st.integers(0, 3), max_size=2).flatmap(  # shape and data agree: reaches the cast
    lambda s: st.builds(
        lambda data, dtype: arr(dtype, list(s), data),
        st.lists(SCALARS, min_size=math.prod(s), max_size=math.prod(s)),
        DTYPE_NAMES,
    )
)
ENCODED_ARRAY = st.fixed_dictionaries({"dtype": DTYPE_NAMES, "shape": SHAPES, "data": DATA_ITEMS}) | CONSISTENT_ARRAY
ENCODED = st.recursive(
    ENCODED_ARRAY | st.fixed_dictionaries({"unsupported": SCALARS}) | JSON,
    lambda c: st.lists(c, max_size=3).map(lambda v: {"seq": v}),
    max_leaves=12,
)


@settings(max_examples=150, **FAST)
@given(ENCODED)
def test_decode_of_any_json_returns_arrays_or_raises_malformed_record(rec):
    try:
        value = decode(rec)
    except MalformedRecord:
        return
    assert_decoded_type(value)


def test_decode_of_deep_nesting_never_escapes_the_verdict():
    """Nesting deeper than Python's recursion limit may raise RecursionError out of decode (the only
    exception besides MalformedRecord); the verdict must turn it into a zero (see CELLS above)."""
    with pytest.raises((MalformedRecord, RecursionError)):
        decode(deep(arr("float64", [], [1.0]), 10_000))
    rec = {**GOOD, "results": [{"status": "ok", "value": deep(arr("float64", [], [1.0]), 10_000)}] * 3}
    assert_zero_and_discreet(verdict_outputs(graded_cell([shown(rec)])))


@settings(max_examples=100, **FAST)
@given(JSON)
def test_verdict_of_any_json_record_is_zero(rec):
    assert_zero_and_discreet(verdict_outputs(graded_cell([shown(rec)])))


# near-valid records: each case's result is the real one, a transformation of it, or junk
TRANSFORMS = {
    "same": lambda v: v,
    "negated": lambda v: -v,
    "zeros": np.zeros_like,
    "float16 zeros": lambda v: np.zeros(v.shape, np.float16),
    "float16": lambda v: v.astype(np.float16),
    "float32": lambda v: v.astype(np.float32),
    "int": lambda v: np.rint(v).astype(np.int64),
    "bool": lambda v: v.astype(bool),
    "scaled 1e-12": lambda v: v * (1 + 1e-12),
    "scaled 1e-6": lambda v: v * (1 + 1e-6),
    "scaled 1e-2": lambda v: v * 1.01,
    "plus 1e-3": lambda v: v + 1e-3,
    "nan": lambda v: v * np.nan,
    "column": lambda v: v.reshape(-1, 1),
    "row": lambda v: v[None],
    "shorter": lambda v: v.ravel()[:-1],
    "list": lambda v: v.tolist(),
    "string": lambda v: "abc",
    "none": lambda v: None,
}


def _result(case: list[np.ndarray], name: str, transforms: list[str], mode: str, junk):
    if mode == "junk":
        return junk
    if mode == "status":
        return {"status": junk} if not isinstance(junk, dict) else {"status": "error", **junk}
    outputs = [TRANSFORMS[t](v) for t, v in zip(transforms, case)]
    return ok(returned(outputs, name))


def _credited_share(result, case: list[np.ndarray], name: str) -> float:
    """The weighted share of a case's outputs that decode to the expected values within 1e-3 of the
    reference scale (the loosest kind of check) or the output's own stored band if wider: the most a
    check may credit for this result (partial credit is per output)."""
    if not (isinstance(result, dict) and result.get("status") == "ok"):
        return 0.0
    try:
        value = decode(result["value"])
    except Exception:
        return 0.0
    parts = [value] if len(case) == 1 else value
    if not isinstance(parts, list) or len(parts) != len(case):
        return 0.0
    outputs = DATA[name]["outputs"]
    share = 0.0
    for got, exp, output in zip(parts, case, outputs):
        try:
            got = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        scale = max(float(np.max(np.abs(exp))) if exp.size else 0.0, 1e-300)
        band = max(1e-3, output.get("rtol") or 0.0) * scale + (output.get("atol") or 0.0)
        if got.shape == exp.shape and np.all(np.isfinite(got)) and np.max(np.abs(got - exp), initial=0) <= band:
            share += output["weight"] / sum(o["weight"] for o in outputs)
    return share


@settings(max_examples=100, **FAST)
@given(name=st.sampled_from([FD, ANALYTIC]), data=st.data())
def test_verdict_credits_only_outputs_whose_values_are_the_expected_ones(name, data):
    """Points never exceed the weighted share of outputs whose returned values lie within 1e-3 of the
    reference, whatever dtype, container or status the forged results use."""
    cases = expected(name)
    n_out = len(cases[0])
    results = []
    for case in cases:
        mode = data.draw(st.sampled_from(["value", "value", "value", "status", "junk"]))
        transforms = data.draw(st.lists(st.sampled_from(sorted(TRANSFORMS)), min_size=n_out, max_size=n_out))
        junk = data.draw(JSON) if mode != "value" else None
        results.append(_result(case, name, transforms, mode, junk))
    rec = {"exercise": EXERCISE, "name": name, "results": results}
    out = verdict_outputs(graded_cell([shown(rec)], name=name))
    credited = sum(_credited_share(r, c, name) for r, c in zip(results, cases))
    assert points(out) <= DATA[name]["points"] * credited / len(cases) + 1e-6, feedback(out)  # scores round to 6 places
    assert_discreet(out, name)


@settings(max_examples=60, **FAST)
@given(
    dtype=st.sampled_from([np.float16, np.float32]),
    transform=st.sampled_from(sorted(TRANSFORMS)[:13]),
    name=st.sampled_from([FD, ANALYTIC]),
)
def test_score_does_not_depend_on_the_float_dtype_of_the_same_numbers(dtype, transform, name):
    """The same numbers score the same whether the student returns them as float16/32 or float64."""

    def narrowed(v, wide):
        x = np.asarray(TRANSFORMS[transform](v)).astype(dtype)
        return x.astype(np.float64) if wide else x

    narrow = score(EXERCISE, name, record_of(lambda v: narrowed(v, False), name))[0]
    wide = score(EXERCISE, name, record_of(lambda v: narrowed(v, True), name))[0]
    assert narrow == wide


ROUND_TRIP_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.uint64, np.bool_]


def _extremes(dtype) -> list:
    """Values a float64 detour or a sloppy non-finite encoding would lose."""
    if dtype == np.bool_:
        return [True, False]
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return [info.min, info.max, info.max - 1] + ([2**53 + 1, -(2**53) - 1] if info.bits == 64 and info.min else [])
    info = np.finfo(dtype)
    return [np.nan, np.inf, -np.inf, -0.0, info.max, -info.max, info.tiny, info.smallest_subnormal]


def _round_trip_arrays(dtype):
    elements = hnp.from_dtype(np.dtype(dtype)) | st.sampled_from(_extremes(dtype))
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), elements=elements)


@settings(max_examples=150, **FAST)
@given(st.sampled_from(ROUND_TRIP_DTYPES).flatmap(_round_trip_arrays))
def test_encode_then_decode_round_trips_arrays_exactly_through_json(a):
    """Every value, NaN, Inf and the sign of zero included, and the dtype and shape, survive the trip."""
    got = decode(json.loads(json.dumps(encode(a), allow_nan=False)))
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_array_equal(got, a)
    if a.dtype.kind == "f":
        assert np.array_equal(np.signbit(got), np.signbit(a))


def test_an_error_in_a_graded_cell_does_not_show_the_hidden_source():
    # the kernel's traceback quotes the hidden cell; the verdict keeps only the error's name and message
    cell = graded_cell([])
    hidden_line = cell.source.splitlines()[0]
    cell.outputs = [
        NotebookNode(
            output_type="error",
            ename="NameError",
            evalue="name 'fd_grad' is not defined",
            traceback=[f"Cell In[7], line 1\n----> 1 {hidden_line}", "NameError: ..."],
        )
    ]
    outputs = verdict_outputs(cell)
    assert points(outputs) == 0
    text = json.dumps(outputs, ensure_ascii=False)
    assert "NameError" in text and "fd_grad" in text
    assert hidden_line not in text and "autograder.grade" not in text
