"""The kernel side of grading: run a student function on the hidden inputs and record what it returned.

A graded cell calls ``autograder.grade(exercise, name, fn)``. Inside the student's kernel this
only *records* results: it calls ``fn`` on each hidden input (``autograder/kernel/inputs``; the
expected values are not readable there), turns every return value into plain numbers
(:mod:`course_check.protocol`) and shows them as one output of type :data:`~course_check.protocol.MIME`.
The verdict (score and Chinese feedback) is computed afterwards in the nbgrader process by
:class:`autograder.verdict.preprocessors.ExternalVerdict`, from the recorded numbers and the
reference data the kernel cannot read. So rebinding this function, patching numpy or builtins,
returning objects whose comparisons always succeed or printing a fake pass cannot raise a score:
only numbers equal to the reference can.

Imports nothing but IPython's display, the standard library and ``course_check`` (the sandboxed kernel can
read only ``autograder/kernel``, ``course_check`` and course_lib; see :mod:`autograder.confine`).
"""

from __future__ import annotations

import json
from pathlib import Path

from course_check.calling import run_cases
from course_check.protocol import MIME

INPUTS_DIR = Path(__file__).resolve().parent / "inputs"


def load_inputs(exercise: str, inputs_dir: Path = INPUTS_DIR) -> dict:
    """``{check name: {"params": [argument order], "cases": [raw inputs of each hidden case]}}`` for ``exercise``."""
    return json.loads((inputs_dir / f"{exercise}.json").read_text(encoding="utf-8"))


def grade(exercise: str, name: str, student_fn) -> None:
    """Record ``student_fn``'s results on the hidden cases of check ``exercise.name`` (scored outside the kernel).

    The function is called positionally in the template's order (:mod:`course_check.calling`).
    """
    from IPython.display import display

    check = load_inputs(exercise)[name]
    results = run_cases(student_fn, check["params"], check["cases"])
    display(
        {
            MIME: {"exercise": exercise, "name": name, "results": results},
            "text/plain": f"已记录 `{name}` 在 {len(results)} 个隐藏测试上的结果，评分在内核之外进行。",
        },
        raw=True,
    )
