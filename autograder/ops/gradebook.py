"""Where nbgrader's gradebook is and what it holds about the course's scores, read in one place.

:func:`read_gradebook` copies the students, the assignments with their grade cells, and every submission with
its notebooks and grades out of the gradebook nbgrader is configured with (the course's
:attr:`~autograder.course.course.Course.gradebook_url`: SQLite or PostgreSQL) into plain dataclasses, through nbgrader's ``Gradebook`` API. The score table (:func:`autograder.ops.reports.score_rows`), the LMS grade files
(:func:`autograder.ops.lms_grades.grade_table`), the regrade audit (:func:`autograder.ops.audit.cell_scores`)
and the class run's summary (:func:`autograder.ops.nbgrader_run.gradebook_scores`) all derive from it.

nbgrader's own totals (a notebook's and a submission's score, maximum, late penalty, "needs manual grade")
are copied as nbgrader computes them, never recomputed here: they include extra credit, and the LMS files must
agree with ``nbgrader export``.

A written answer (:func:`is_written`) is a markdown grade cell: the course's manually graded answers are the
markdown cells marked ``solution`` and ``grade``, its code grade cells are the automatic tests.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.course.course import Course


def gradebook_url(course: Course | Path) -> str:
    """The gradebook nbgrader uses for this course (:attr:`autograder.course.course.Course.gradebook_url`):
    ``CourseDirectory.db_url`` from the course's ``nbgrader_config.py`` (e.g. a PostgreSQL server), else
    nbgrader's default ``gradebook.db``."""
    return Course.of(course).gradebook_url


def is_written(cell) -> bool:
    """True for a written answer, graded by hand: a markdown grade cell (an nbgrader task cell is one too).

    ``cell``: anything with nbgrader's ``cell_type`` (its ``GradeCell``, ``TaskCell``). A code grade cell is
    automatic even when a grader overrides its score.
    """
    return cell.cell_type == "markdown"


@dataclass(frozen=True)
class Student:
    id: str
    first_name: str  # "" where the gradebook has none, as for the other names
    last_name: str
    email: str
    lms_user_id: str


@dataclass(frozen=True)
class GradeCell:
    """A grade cell of an assignment's notebook, as released."""

    name: str
    written: bool  # is_written
    max_score: float


@dataclass(frozen=True)
class Grade:
    """One grade cell of one submitted notebook."""

    name: str
    written: bool  # is_written
    max_score: float
    auto_score: float | None
    manual_score: float | None
    score: float  # nbgrader's: the manual score where there is one, else the automatic one, plus extra credit
    needs_manual_grade: bool


@dataclass(frozen=True)
class SubmittedNotebook:
    name: str
    grades: tuple[Grade, ...]  # in nbgrader's order
    score: float  # nbgrader's total, extra credit included
    max_score: float

    @property
    def automatic(self) -> list[Grade]:
        return [g for g in self.grades if not g.written]

    @property
    def written(self) -> list[Grade]:
        return [g for g in self.grades if g.written]


@dataclass(frozen=True)
class Submission:
    student: str
    notebooks: dict[str, SubmittedNotebook]  # by notebook name, in nbgrader's order
    score: float  # nbgrader's totals, before the late penalty
    late_submission_penalty: float | None
    needs_manual_grade: bool


@dataclass(frozen=True)
class Assignment:
    name: str
    max_score: float
    notebooks: dict[str, tuple[GradeCell, ...]]  # notebook name -> its grade cells, by notebook name
    submissions: dict[str, Submission]  # student id -> submission, in nbgrader's order


@dataclass(frozen=True)
class Snapshot:
    students: list[Student]  # every student of the gradebook, sorted by id
    assignments: dict[str, Assignment]  # in nbgrader's order (due date, then name)

    def submissions(self, section: str) -> dict[str, Submission]:
        """The submissions of ``section`` by student id; none where the gradebook has no such assignment."""
        assignment = self.assignments.get(section)
        return assignment.submissions if assignment else {}


def read_gradebook(
    course: Course | Path, sections: Iterable[str] | None = None, students: Collection[str] | None = None
) -> Snapshot:
    """The gradebook of ``course`` (or of the course in that folder), read through nbgrader's API.

    ``sections``: the assignments to read (default: all); one the gradebook lacks is left out.
    ``students``: read only these students' submissions (default: everyone's); the student list stays whole.
    """
    from nbgrader.api import Gradebook

    wanted = None if sections is None else set(sections)
    with Gradebook(gradebook_url(course)) as gb:
        people = sorted(
            (
                Student(s.id, s.first_name or "", s.last_name or "", s.email or "", s.lms_user_id or "")
                for s in gb.students
            ),
            key=lambda s: s.id,
        )
        assignments = {
            a.name: _assignment(gb, a, students) for a in gb.assignments if wanted is None or a.name in wanted
        }
    return Snapshot(people, assignments)


def _assignment(gb, assignment, students) -> Assignment:
    notebooks = {  # grade cells only: the score table never counted task cells here (the course has none)
        nb.name: tuple(GradeCell(c.name, is_written(c), c.max_score) for c in nb.grade_cells)
        for nb in assignment.notebooks
    }
    submissions = {}
    for sub in gb.assignment_submissions(assignment.name):
        student = sub.student.id
        if students is not None and student not in students:
            continue
        submissions[student] = Submission(
            student,
            {nb.name: _notebook(nb) for nb in sub.notebooks},
            sub.score,
            sub.late_submission_penalty,
            sub.needs_manual_grade,
        )
    return Assignment(assignment.name, assignment.max_score, notebooks, submissions)


def _notebook(nb) -> SubmittedNotebook:
    grades = tuple(
        Grade(
            g.cell.name,
            is_written(g.cell),
            g.cell.max_score,  # what Grade.max_score gives too, without one more query per grade
            g.auto_score,
            g.manual_score,
            g.score,
            g.needs_manual_grade,
        )
        for g in nb.grades
    )
    return SubmittedNotebook(nb.name, grades, nb.score, nb.max_score)
