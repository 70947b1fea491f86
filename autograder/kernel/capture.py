"""The kernel side of grading: run a student function on the hidden inputs and record what it returned.

A graded cell calls ``autograder.grade(exercise, name, fn)``. Inside the student's kernel this
only *records* results: it calls ``fn`` on each hidden input (``autograder/kernel/inputs``; the
expected values are not readable there), turns every return value into plain numbers
(:mod:`autograder.protocol`) and shows them as one output of type :data:`~autograder.protocol.MIME`.
The verdict (score and Chinese feedback) is computed afterwards in the nbgrader process by
:class:`autograder.verdict.preprocessors.ExternalVerdict`, from the recorded numbers and the
reference data the kernel cannot read. So rebinding this function, patching numpy or builtins,
returning objects whose comparisons always succeed or printing a fake pass cannot raise a score:
only numbers equal to the reference can.

Imports nothing but numpy, IPython's display, the standard library and the protocol (the sandboxed
kernel can read only ``autograder/kernel``, the protocol and course_lib; see :mod:`autograder.confine`).
"""

from __future__ import annotations

import json
import traceback
import warnings
from pathlib import Path

import numpy as np

from autograder.protocol import MIME, encode

INPUTS_DIR = Path(__file__).resolve().parent / "inputs"


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
        return {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "line": frames[-1].lineno if frames else 0,
        }
    return {"status": "ok", "value": encode(value)}


def grade(exercise: str, name: str, student_fn) -> None:
    """Record ``student_fn``'s results on the hidden cases of check ``exercise.name`` (scored outside the kernel)."""
    from IPython.display import display

    cases = load_inputs(exercise)[name]
    if callable(student_fn):
        results = [_run_case(student_fn, raw) for raw in cases]
    else:
        results = [{"status": "not_callable"} for _ in cases]
    display(
        {
            MIME: {"exercise": exercise, "name": name, "results": results},
            "text/plain": f"已记录 `{name}` 在 {len(cases)} 个隐藏测试上的结果，评分在内核之外进行。",
        },
        raw=True,
    )
