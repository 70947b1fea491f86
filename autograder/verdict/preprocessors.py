"""The verdict preprocessor: scores graded cells from their recorded results, outside the student's kernel.

:class:`ExternalVerdict` runs after execution (:class:`autograder.confine.execute.SafeExecute`), in the
nbgrader process. For every graded code cell it takes the results the kernel recorded
(:mod:`autograder.kernel.capture`, format in :mod:`course_check.protocol`), scores them against the
reference data (:mod:`autograder.verdict.score`) and REPLACES the cell's outputs with the feedback and
the score. Nothing the student's code printed or returned in that cell counts, and a cell without
exactly one well-formed record scores zero. What each graded cell scored and which mistakes were diagnosed
goes into the course's diagnoses journal (:mod:`autograder.verdict.diagnoses`), for ``python -m autograder stats``.
"""

from __future__ import annotations

import re
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from course_check.protocol import MIME, MalformedRecord
from autograder.verdict import diagnoses
from autograder.verdict.converter import running_converter
from autograder.verdict.diagnoses import CellDiagnosis
from autograder.verdict.score import scored_record


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
    return cell_verdict(cell)[0]


def cell_verdict(cell) -> tuple[list, CellDiagnosis]:
    """:func:`verdict_outputs`, and what the cell scored and was diagnosed with."""
    meta = cell.metadata.get("nbgrader", {})
    calls = GRADE_CALL.findall(cell.source)

    def failed(outputs: list, problem: str) -> tuple[list, CellDiagnosis]:
        check = ".".join(calls[0]) if len(calls) == 1 else ""
        points = float(meta.get("points") or 0)
        return outputs, CellDiagnosis(str(meta.get("grade_id", "")), check, 0.0, points, (), problem)

    if len(calls) != 1:  # an instructor error (tests/test_grading_pipeline.py checks every source): zero, visibly
        text = "评分单元配置错误：应当恰好调用一次 autograder.grade。请联系教师。"
        return failed([_stdout(text), _error("GradingCellMisconfigured", text)], "misconfigured")
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
        outputs = [_stdout(f"[{exercise}] {name}: {NO_RECORD}"), *(shown or [_error("NoResultRecord", NO_RECORD)])]
        return failed(outputs, "no_record")
    if len(records) > 1:
        return failed(
            [_stdout(f"[{exercise}] {name}: {BAD_RECORD}"), _error("MalformedResultRecord", BAD_RECORD)], "malformed"
        )
    try:
        scored = scored_record(exercise, name, records[0])
    except (MalformedRecord, RecursionError, TypeError, ValueError, KeyError, IndexError) as exc:
        # whatever a forged record makes the verdict raise costs this cell, never the grading run
        detail = "" if isinstance(exc, MalformedRecord) else f"（{type(exc).__name__}）"
        outputs = [_stdout(f"[{exercise}] {name}: {BAD_RECORD}{detail}"), _error("MalformedResultRecord", BAD_RECORD)]
        return failed(outputs, "malformed")
    diagnosis = CellDiagnosis(
        meta.get("grade_id", ""), f"{exercise}.{name}", scored.earned, scored.points, scored.diagnoses
    )
    return [_stdout(scored.feedback), _score_output(scored.earned)], diagnosis


def _course_root(preprocessor) -> Path | None:
    """The course folder of the nbgrader converter running ``preprocessor`` (None outside one)."""
    converter = running_converter(preprocessor)
    return None if converter is None else Path(converter.coursedir.root)


class ExternalVerdict(NbGraderPreprocessor):
    """Score every autograded cell from its recorded results, outside the student's kernel, and record what
    was diagnosed (:mod:`autograder.verdict.diagnoses`; one record per notebook, kept in local variables only)."""

    def preprocess(self, nb, resources):
        graded = []
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                cell.outputs, diagnosis = cell_verdict(cell)
                graded.append(diagnosis)
        course, ids = _course_root(self), resources.get("nbgrader", {})
        if course is not None and {"assignment", "student", "notebook"} <= set(ids):
            diagnoses.record(course, ids["assignment"], ids["student"], ids["notebook"], graded)
        return nb, resources
