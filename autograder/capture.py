"""The kernel side of grading: run a student function on the hidden inputs and record what it returned.

A graded cell calls ``autograder.grade(exercise, name, fn)``. Inside the student's kernel this
only *records* results: it calls ``fn`` on each hidden input (``autograder/inputs``; the
expected values are not readable there), turns every return value into plain numbers and
shows them as one output of type :data:`MIME`. The verdict (score and Chinese feedback) is
computed afterwards in the nbgrader process by :class:`autograder.nbgrader_ext.ExternalVerdict`,
from the recorded numbers and the reference data the kernel cannot read. So rebinding this
function, patching numpy or builtins, returning objects whose comparisons always succeed or
printing a fake pass cannot raise a score: only numbers equal to the reference can.

This module imports nothing but numpy and the standard library (the sandboxed kernel can read
only a few files of the repository; see :mod:`autograder.sandbox`).
"""

from __future__ import annotations

import json
import math
import traceback
import warnings
from pathlib import Path

import numpy as np

MIME = "application/vnd.s04diffsim.results+json"
INPUTS_DIR = Path(__file__).resolve().parent / "inputs"
MAX_ELEMENTS = 1_000_000  # per returned array; reference results are far smaller
_DTYPES = {"b", "i", "u", "f"}  # bool, signed, unsigned, float
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class MalformedRecord(ValueError):
    """A recorded result that is not what :func:`encode` writes (a tampered or truncated record)."""


def _from_json(value):
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float64)
    return value


def to_inputs(raw: dict) -> dict:
    """JSON inputs back to what student functions receive.

    Lists become float64 arrays; a dict input (e.g. named parameters) stays a dict whose
    lists become arrays. Integers and strings pass through.
    """
    return {k: _from_json(v) for k, v in raw.items()}


def load_inputs(exercise: str, inputs_dir: Path = INPUTS_DIR) -> dict:
    """``{function name: [raw inputs of each hidden case]}`` for ``exercise``."""
    return json.loads((inputs_dir / f"{exercise}.json").read_text(encoding="utf-8"))


def _number(x) -> float | int | bool | str:
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def encode(value):
    """A student's return value as plain JSON: nested sequences and numeric arrays only."""
    if isinstance(value, (tuple, list)):
        return {"seq": [encode(v) for v in value]}
    try:
        arr = np.array(value)  # a copy: the student's object cannot change it afterwards
    except Exception as exc:  # student objects may refuse conversion
        return {"unsupported": f"{type(value).__name__} ({type(exc).__name__})"}
    if arr.dtype.kind not in _DTYPES:
        return {"unsupported": type(value).__name__}
    if arr.size > MAX_ELEMENTS:
        return {"unsupported": f"array with {arr.size} elements"}
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": [_number(x) for x in arr.ravel().tolist()]}


def decode(record):
    """Inverse of :func:`encode`, validating everything (a record comes from an untrusted kernel)."""
    if not isinstance(record, dict) or len(record) not in (1, 3):
        raise MalformedRecord("not an encoded value")
    if set(record) == {"seq"} and isinstance(record["seq"], list):
        return [decode(v) for v in record["seq"]]
    if set(record) == {"unsupported"}:
        return Unsupported(str(record["unsupported"]))
    if set(record) != {"dtype", "shape", "data"}:
        raise MalformedRecord("unknown fields")
    dtype, shape, data = record["dtype"], record["shape"], record["data"]
    if not isinstance(dtype, str) or np.dtype(dtype).kind not in _DTYPES:
        raise MalformedRecord(f"dtype {dtype!r}")
    if (not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape)
            or not isinstance(data, list) or len(data) != math.prod(shape) or len(data) > MAX_ELEMENTS):
        raise MalformedRecord("shape and data disagree")
    values = []
    for x in data:
        if isinstance(x, str) and x in _NONFINITE:
            x = _NONFINITE[x]
        elif not isinstance(x, (int, float, bool)):
            raise MalformedRecord("non-numeric data")
        values.append(x)
    return np.array(values, dtype=np.float64).astype(dtype).reshape(shape)


class Unsupported:
    """Stands for a returned object that was not a number, array or sequence of them."""

    def __init__(self, description: str):
        self.description = description

    def __repr__(self):
        return self.description


def _run_case(fn, raw_inputs) -> dict:
    try:
        # nbgrader gives zero to a graded cell that writes to stderr: keep warnings out of it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn(**to_inputs(raw_inputs))
    except NotImplementedError:
        return {"status": "not_implemented"}
    except Exception as exc:  # the student's code failed: record it, the verdict reports it
        frames = traceback.extract_tb(exc.__traceback__)
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:500], "line": frames[-1].lineno if frames else 0}
    return {"status": "ok", "value": encode(value)}


def grade(exercise: str, name: str, student_fn) -> None:
    """Record ``student_fn``'s results on the hidden cases of check ``exercise.name`` (scored outside the kernel)."""
    from IPython.display import display

    cases = load_inputs(exercise)[name]
    if callable(student_fn):
        results = [_run_case(student_fn, raw) for raw in cases]
    else:
        results = [{"status": "not_callable"} for _ in cases]
    display({MIME: {"exercise": exercise, "name": name, "results": results},
             "text/plain": f"已记录 `{name}` 在 {len(cases)} 个隐藏测试上的结果，评分在内核之外进行。"}, raw=True)
