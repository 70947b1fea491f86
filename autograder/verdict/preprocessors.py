"""The verdict preprocessor: scores graded cells from their recorded results, outside the student's kernel.

:class:`ExternalVerdict` runs after execution (:class:`autograder.confine.execute.SafeExecute`), in the
nbgrader process. For every graded code cell it takes the results the kernel recorded
(:mod:`autograder.kernel.capture`, format in :mod:`course_check.protocol`), scores them against the
reference data (:mod:`autograder.verdict.score`) and REPLACES the cell's outputs with the feedback and
the score. Nothing the student's code printed or returned in that cell counts, and a cell without
exactly one well-formed record scores zero.
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from course_check.protocol import MIME, MalformedRecord
from autograder.verdict.score import score


def _error(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


#: ``autograder.grade("<exercise>", "<name>", fn)`` in a graded cell's source (restored by nbgrader)
GRADE_CALL = re.compile(r"""autograder\.grade\(\s*["']([\w.]+)["']\s*,\s*["'](\w+)["']""")
NO_RECORD = "评分单元没有留下结果记录（单元在记录之前出错、超时或被中断，或者评分函数被替换了）。这个单元计 0 分。"
BAD_RECORD = "评分单元的结果记录不完整或格式不对（可能被篡改），这个单元计 0 分。"


def _stdout(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stdout", text=text + "\n")


def _score_output(points: float) -> NotebookNode:
    return NotebookNode(
        output_type="execute_result", execution_count=None, metadata={}, data={"text/plain": repr(float(points))}
    )


def verdict_outputs(cell) -> list:
    """The outputs a graded cell gets in place of whatever the student's kernel produced."""
    calls = GRADE_CALL.findall(cell.source)
    if len(calls) != 1:  # an instructor error (tests/test_grading_pipeline.py checks every source): zero, visibly
        text = "评分单元配置错误：应当恰好调用一次 autograder.grade。请联系教师。"
        return [_stdout(text), _error("GradingCellMisconfigured", text)]
    exercise, name = calls[0]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    records = [
        o.data[MIME]
        for o in cell.outputs
        if o.output_type in ("display_data", "execute_result") and MIME in o.get("data", {})
    ]
    # an error (timeout, dead kernel, a broken grade function), no record or several: zero. The kernel's
    # traceback quotes this hidden cell's source, so only the error's name and message are kept
    if errors or not records:
        shown = [_error(str(e.get("ename", ""))[:100], str(e.get("evalue", ""))[:300]) for e in errors[:1]]
        return [_stdout(f"[{exercise}] {name}: {NO_RECORD}"), *(shown or [_error("NoResultRecord", NO_RECORD)])]
    if len(records) > 1:
        return [_stdout(f"[{exercise}] {name}: {BAD_RECORD}"), _error("MalformedResultRecord", BAD_RECORD)]
    try:
        earned, _, feedback = score(exercise, name, records[0])
    except (MalformedRecord, RecursionError, TypeError, ValueError, KeyError, IndexError) as exc:
        # whatever a forged record makes the verdict raise costs this cell, never the grading run
        detail = "" if isinstance(exc, MalformedRecord) else f"（{type(exc).__name__}）"
        return [_stdout(f"[{exercise}] {name}: {BAD_RECORD}{detail}"), _error("MalformedResultRecord", BAD_RECORD)]
    return [_stdout(feedback), _score_output(earned)]


class ExternalVerdict(NbGraderPreprocessor):
    """Score every autograded cell from its recorded results, outside the student's kernel."""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.outputs = verdict_outputs(cell)
        return cell, resources
