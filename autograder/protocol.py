"""The result record both sides of grading share: its MIME type, encoder and strict decoder.

The grading kernel (:mod:`autograder.kernel.capture`) encodes what a student's function returned as
plain JSON numbers; the trusted nbgrader process (:mod:`autograder.verdict`) decodes it, validating
everything, since the record comes from a kernel that runs the student's code. Imports nothing but
numpy and the standard library (the sandboxed kernel reads this file).
"""

from __future__ import annotations

import math

import numpy as np

MIME = "application/vnd.s04diffsim.results+json"
MAX_ELEMENTS = 1_000_000  # per returned array; reference results are far smaller
_DTYPES = {"b", "i", "u", "f"}  # bool, signed, unsigned, float
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class MalformedRecord(ValueError):
    """A recorded result that is not what :func:`encode` writes (a tampered or truncated record)."""


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
