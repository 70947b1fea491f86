"""Grades in the import formats of Canvas and Moodle: one CSV file the LMS's gradebook import reads.

:func:`write_canvas_csv`, :func:`write_moodle_csv`: one row per student of the gradebook, one column per
nbgrader assignment (section) with the total score as ``nbgrader export`` computes it (automatic + manual +
extra credit, minus the late penalty, at least 0; a student without a submission gets 0), derived from the
gradebook (:func:`autograder.ops.gradebook.read_gradebook`). A submission nbgrader still flags for manual
grading gets NO number: its cell is empty (Canvas) or ``-`` (Moodle), the two formats' "no grade", so a
half-graded total never reaches the LMS. Both files are UTF-8 without a BOM, comma-separated, CRLF line ends
(Python's ``csv`` module, RFC 4180 quoting).

Student-controlled values that a spreadsheet would run as a formula get a leading ``'``
(:func:`autograder.ops.safe_csv.neutral`) and are reported. Such a student is then not matched by the LMS
automatically (the id changed); the import preview shows the row as unmatched.

Where the formats come from (the importers' source code, read for this module):

* Canvas, ``app/models/gradebook_importer.rb`` of instructure/canvas-lms (``GradebookImporter``): the
  header row must start with a cell containing ``Student`` and one containing ``ID``, followed by
  ``SIS User ID`` and ``SIS Login ID`` (optional), and the last student column must be ``Section``;
  a row whose first cell contains ``Points Possible`` sets each assignment's points; an assignment
  column ``Title (123)`` updates assignment 123, otherwise the assignment titled exactly like the
  header, otherwise a new assignment with that title is created; a row's student is looked up by
  the ``ID`` column as a Canvas user id first, then by ``SIS User ID``, then ``SIS Login ID``, then by
  name; an empty cell (or ``-``) is no grade. Because the ``ID`` column is read as a Canvas user id,
  it gets nbgrader's ``lms_user_id`` (added to nbgrader for the Canvas user id: nbgrader issue #1035,
  pull request #1036) and stays empty without one: a school number there could name another Canvas
  user. The nbgrader student id goes into ``SIS User ID`` and ``SIS Login ID``.
* Moodle, ``grade/import/csv/classes/load_data.php`` (``gradeimport_csv_load_data``) and
  ``lib/csvlib.class.php`` (``csv_import_reader``): the instructor maps one column to username,
  idnumber, e-mail or user id and each other column to a grade item (or a new one, or ignore); the
  encoding and separator are chosen in the form (UTF-8 and comma are the defaults; a UTF-8 BOM
  would be stripped, so none is written); ``-`` or an empty cell is "no grade"; one row whose user
  is not found aborts the whole import; grades above 100 are refused unless the site allows
  unlimited grades.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course.course import Course
from autograder.ops.gradebook import Student, read_gradebook
from autograder.ops.safe_csv import csv_text, neutral

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEADER = ["username", "email"]
CANVAS_PENDING, MOODLE_PENDING = "", "-"  # each importer's "no grade"


def score_text(x: float) -> str:
    """A score as the importers read it: at most 4 decimals, no trailing zeros (``4.5``, ``3``)."""
    return f"{float(x):.4f}".rstrip("0").rstrip(".")


@dataclass
class GradeTable:
    """Everything both formats need, read from the gradebook once."""

    sections: list  # the columns: assignments in the gradebook, in the order asked for
    missing: list  # sections asked for that the gradebook does not have (yet)
    maxima: dict  # section -> maximum score
    students: list  # Student, sorted by id
    scores: dict  # (student id, section) -> total score, or None while manual grading is pending
    unsubmitted: list = field(default_factory=list)  # (student id, section) without a submission: 0


def grade_table(course: Course | Path, sections=None) -> GradeTable:
    """The gradebook's totals per student and section (:func:`autograder.ops.gradebook.read_gradebook`).

    The total is computed as ``nbgrader export`` (``nbgrader/plugins/export.py``) does it:
    ``max(0, submission.score - submission.late_submission_penalty)``, 0 without a submission.
    """
    asked = list(dict.fromkeys(sections)) if sections else None
    book = read_gradebook(course, asked)
    chosen = list(book.assignments) if asked is None else asked
    columns = [s for s in chosen if s in book.assignments]
    scores = {}
    for section in columns:
        for student, sub in book.submissions(section).items():
            total = max(0.0, float(sub.score) - float(sub.late_submission_penalty or 0.0))
            scores[(student, section)] = None if sub.needs_manual_grade else total
    maxima = {s: float(book.assignments[s].max_score) for s in columns}
    unsubmitted = [(st.id, s) for s in columns for st in book.students if (st.id, s) not in scores]
    scores.update(dict.fromkeys(unsubmitted, 0.0))
    return GradeTable(
        columns, [s for s in chosen if s not in book.assignments], maxima, book.students, scores, unsubmitted
    )


@dataclass
class GradeExport:
    """What a grade export wrote, for the instructor's summary."""

    path: Path
    table: GradeTable
    neutralised: list  # student-controlled values written with a leading '

    @property
    def pending(self) -> list:
        return sorted(k for k, v in self.table.scores.items() if v is None)


def canvas_name(st: Student) -> str:
    """Canvas's "Last, First" (its ``sortable_name``); one name alone, or the id when there is none."""
    if st.last_name and st.first_name:
        return f"{st.last_name}, {st.first_name}"
    return st.last_name or st.first_name or st.id


def canvas_rows(table: GradeTable, neutralised: list) -> list[list[str]]:
    """Header, ``Points Possible`` and one row per student (see the module docstring for the mapping)."""
    rows = [CANVAS_HEADER + [neutral(s) for s in table.sections]]
    rows.append(["Points Possible", "", "", "", ""] + [score_text(table.maxima[s]) for s in table.sections])
    for st in table.students:
        cells = [canvas_name(st), st.lms_user_id, st.id, st.id, ""]
        row = [neutral(c, neutralised) for c in cells]
        for section in table.sections:
            score = table.scores[(st.id, section)]
            row.append(CANVAS_PENDING if score is None else score_text(score))
        rows.append(row)
    return rows


def moodle_rows(table: GradeTable, neutralised: list) -> list[list[str]]:
    """Header ``username, email, <section>...`` and one row per student."""
    rows = [MOODLE_HEADER + [neutral(s) for s in table.sections]]
    for st in table.students:
        row = [neutral(st.id, neutralised), neutral(st.email, neutralised)]
        for section in table.sections:
            score = table.scores[(st.id, section)]
            row.append(MOODLE_PENDING if score is None else score_text(score))
        rows.append(row)
    return rows


def _write_text(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(text.encode("utf-8"))  # no BOM (see the module docstring)
    os.replace(tmp, path)
    return path


def write_canvas_csv(course: Course | Path, path: Path, sections=None) -> GradeExport:
    table, neutralised = grade_table(course, sections), []
    return GradeExport(_write_text(path, csv_text(canvas_rows(table, neutralised))), table, neutralised)


def write_moodle_csv(course: Course | Path, path: Path, sections=None) -> GradeExport:
    table, neutralised = grade_table(course, sections), []
    return GradeExport(_write_text(path, csv_text(moodle_rows(table, neutralised))), table, neutralised)


def export_lines(export: GradeExport, fmt: str) -> list[str]:
    """The outcome of a Canvas or Moodle export for the instructor, in Chinese."""
    t = export.table
    lines = [
        f"写入 {export.path}：{len(t.students)} 位学生 × {len(t.sections)} 份作业（{', '.join(t.sections) or '无'}）"
    ]
    for section in t.missing:
        lines.append(f"成绩库中还没有作业 {section}（尚未评分？），没有写这一列")
    pending = export.pending
    if pending:
        blank = "留空" if fmt == "canvas" else "写作 -"
        lines.append(f"{len(pending)} 份提交还有待人工评分的单元，分数{blank}（不导入成绩），评完后重新导出：")
        lines.extend(f"  {student} {section}" for student, section in pending)
    if t.unsubmitted:
        lines.append(f"{len(t.unsubmitted)} 处没有提交（或提交没能评分），按 nbgrader export 记 0 分：")
        lines.extend(f"  {student} {section}" for student, section in t.unsubmitted)
    for value in dict.fromkeys(export.neutralised):
        lines.append(
            f"注意：{value!r} 以 = + - @ 或控制字符开头，已在前面加 ' 以免表格软件把它当公式执行；该学生需在导入时手工对应"
        )
    return lines
