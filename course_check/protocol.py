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
_MAX_NDIM = 64  # numpy's limit on the number of dimensions
_DTYPES = {"b", "i", "u", "f"}  # bool, signed, unsigned, float
#: the dtype names :func:`encode` can write (``arr.dtype.name`` of those kinds); nothing else decodes
_DTYPE_NAMES = frozenset(np.dtype(c).name for c in "?" + np.typecodes["AllInteger"] + np.typecodes["Float"])
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
    if set(record) == {"unsupported"} and isinstance(record["unsupported"], str):
        return Unsupported(record["unsupported"])
    if set(record) != {"dtype", "shape", "data"}:
        raise MalformedRecord("unknown fields")
    dtype, shape, data = record["dtype"], record["shape"], record["data"]
    if not isinstance(dtype, str) or dtype not in _DTYPE_NAMES:  # np.dtype() of any string could raise
        raise MalformedRecord("dtype")
    # bounded before math.prod: a product of many huge integers would stall the verdict (no bools either)
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_NDIM
        or not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape)
        or not isinstance(data, list)
        or len(data) > MAX_ELEMENTS
        or len(data) != math.prod(shape)
    ):
        raise MalformedRecord("shape and data disagree")
    values = []
    for x in data:
        if isinstance(x, str) and x in _NONFINITE:
            x = _NONFINITE[x]
        elif not isinstance(x, (int, float, bool)):
            raise MalformedRecord("non-numeric data")
        values.append(x)
    try:  # integers go exactly (through float64 they lose digits past 2**53); 10**400 or a NaN
        # integer raise OverflowError or ValueError, which must not escape the verdict
        exact = np.dtype(dtype).kind in "iu"
        return np.array(values, dtype=object if exact else np.float64).astype(dtype).reshape(shape)
    except (OverflowError, ValueError, TypeError) as exc:
        raise MalformedRecord("values do not fit the dtype and shape") from exc


class Unsupported:
    """Stands for a returned object that was not a number, array or sequence of them."""

    def __init__(self, description: str):
        self.description = description

    def __repr__(self):
        return self.description
