"""How a student's function is called on a test case: one convention for grading and for the public checks.

The function is called **positionally, in the order of the case's parameters** (the order of the
template's ``def`` in the notebook; the generator checks they agree), so a student who renames a
parameter is graded exactly like one who kept the template's names. Inputs arrive as stored in JSON:
lists become float64 arrays, a dict input stays a dict of arrays, integers and strings pass through.

Imports nothing but numpy and the standard library: this runs inside the (sandboxed) grading kernel
and in a student's own Jupyter.
"""

from __future__ import annotations

import inspect
import os
import traceback
import warnings

import numpy as np

from course_check.protocol import encode

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: an adapter's refusal (course_check.adapters) by exception name -> the record's status
_REFUSALS = {"AutodiffNotAllowed": "by_hand", "ReferenceNotAllowed": "own_code"}


def _from_json(value):
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float64)
    return value


def to_inputs(raw: dict) -> dict:
    """A case's JSON inputs as Python values, by name (see the module docstring)."""
    return {k: _from_json(v) for k, v in raw.items()}


def arguments(params: list[str], raw_inputs: dict) -> list:
    """The positional arguments of one case: its inputs in the order of ``params``."""
    inputs = to_inputs(raw_inputs)
    return [inputs[p] for p in params]


def _arguments_fit(fn, n: int) -> str:
    """``""`` when ``fn`` accepts ``n`` positional arguments, else Python's reason (``""`` when unknown)."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError as exc:
        return str(exc)
    except Exception:  # no signature to read (a builtin, an object whose __signature__ raises): the call will tell
        return ""
    return ""


def run_case(fn, params: list[str], raw_inputs: dict) -> dict:
    """Call ``fn`` on one case and return the record of what happened (see :mod:`course_check.protocol`).

    Statuses: ``ok`` (with the encoded value), ``not_implemented``, ``arguments`` (the function does
    not take the template's arguments), ``by_hand`` (it called a JAX differentiation transform where the
    exercise asks for the derivative by hand: :func:`course_check.adapters.by_hand`), ``own_code`` (it called a
    reference implementation the exercise asks the student to write: :func:`course_check.adapters.own_code`),
    ``error`` (anything else the student's code raised).
    """
    args = arguments(params, raw_inputs)
    mismatch = _arguments_fit(fn, len(args))
    if mismatch:
        return {"status": "arguments", "error": mismatch[:300]}
    try:
        # nbgrader gives zero to a graded cell that writes to stderr: keep warnings out of it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn(*args)
    except NotImplementedError:
        return {"status": "not_implemented"}
    except Exception as exc:  # the student's code failed: record it, the verdict reports it
        # the line is the innermost one outside this package, or the student's line an adapter's refusal names
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_HERE)]
        line = getattr(exc, "line", None)
        return {
            "status": _REFUSALS.get(type(exc).__name__, "error"),
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "line": line if isinstance(line, int) else frames[-1].lineno if frames else 0,
        }
    return {"status": "ok", "value": encode(value)}


def run_cases(fn, params: list[str], cases: list[dict]) -> list[dict]:
    """:func:`run_case` on every case (``not_callable`` records when ``fn`` is not a function)."""
    if not callable(fn):
        return [{"status": "not_callable"} for _ in cases]
    return [run_case(fn, params, raw) for raw in cases]
