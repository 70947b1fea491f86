"""Each written answer's rubric beside the answer in formgrader, and never in the feedback.

The rubric of a written answer is the reference version of its cell in the source notebook (the reference
answer and the marking scheme; the release has an empty answer area there). :class:`RubricForGraders`
(autograde) puts a copy of it right after the student's answer in the autograded notebook, which is what
formgrader shows a grader, so nobody grades without it or has to open another file. :class:`StripRubrics`
(feedback, first) removes those copies again, since the feedback page is made from the same notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.verdict.converter import running_converter

RUBRIC_TAG = "rubric-for-graders"
HEADING = "**评分细则（只给助教看：学生的反馈里没有这一格）**"


def _written_answer(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and bool(meta.get("grade")) and bool(meta.get("solution"))


class RubricForGraders(NbGraderPreprocessor):
    """Autograde: after every written answer, its source cell (reference answer and rubric), tagged :data:`RUBRIC_TAG`."""

    def preprocess(self, nb, resources):
        converter = running_converter(self)
        if converter is None:
            return nb, resources
        meta = resources["nbgrader"]
        source = Path(converter.coursedir.format_path(converter.coursedir.source_directory, ".", meta["assignment"]))
        path = source / f"{meta['notebook']}.ipynb"
        if not path.is_file():
            return nb, resources
        rubrics = {
            cell.metadata["nbgrader"]["grade_id"]: cell.source
            for cell in nbformat.read(path, as_version=4).cells
            if _written_answer(cell)
        }
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if _written_answer(cell) and grade_id in rubrics:
                rubric = nbformat.v4.new_markdown_cell(f"{HEADING}\n\n{rubrics[grade_id]}")
                rubric.metadata["tags"] = [RUBRIC_TAG]
                cells.append(rubric)
        nb.cells = cells
        return nb, resources


class StripRubrics(NbGraderPreprocessor):
    """Feedback: remove every cell :class:`RubricForGraders` added."""

    def preprocess(self, nb, resources):
        nb.cells = [c for c in nb.cells if RUBRIC_TAG not in c.metadata.get("tags", [])]
        return nb, resources
