"""The term: each section's due date, the late policy, and the extensions granted to students.

* ``assignments/term.toml`` (the instructor edits it): the time zone, one due date per section and the late
  policy (:class:`autograder.verdict.lateness.LatePolicy`), read by :mod:`autograder.course.term`. The
  course's nbgrader config reads the policy from it, so nbgrader's own ``AssignLatePenalties`` applies it in
  every autograde.
* ``python -m autograder extend <section> <student> --hours H --reason "..."`` grants an extension. It is
  appended, with its reason, time and grantor, to ``.grading/audit/extensions.jsonl`` (the newest grant for
  a student and section is the one in force; a grant of 0 hours withdraws it).
* :func:`apply_term` writes due dates and extensions into nbgrader's gradebook, then has nbgrader's own
  ``AssignLatePenalties`` charge again every late penalty from the scores as they are now (after manual grading
  too). ``release``, ``autograde``, ``extend`` and ``export`` run it, and ``python -m autograder term`` runs
  it alone and prints the term.

The late penalty has one rule and one writer: the rule is the late plugin the course's nbgrader config installs
(``c.AssignLatePenalties.plugin_class``, :class:`autograder.verdict.lateness.TermLatePolicy` with the numbers of
``term.toml``, or what the instructor's settings after ``configure`` make of them), the writer is nbgrader's
``AssignLatePenalties``, in every autograde and, through :func:`apply_term`, after it.

nbgrader measures lateness from the ``timestamp.txt`` in ``submitted/<student>/<section>/`` (written by
``nbgrader collect`` and ``zip_collect``, or by the instructor from the LMS's times); no timestamp, not late.
"""

from __future__ import annotations

import getpass
import math
import os
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autograder.course.course import Course
from autograder.course.term import MAX_DAYS, SALT, TERM_FILE, Term, load_term  # noqa: F401 (the term's API here too)
from autograder.verdict import journal
from autograder.verdict.lateness import TermLatePolicy

JOURNAL = "extensions"  # .grading/audit/extensions.jsonl (autograder/verdict/journal.py)
EXTENSIONS_FILE = journal.FOLDER / f"{JOURNAL}.jsonl"
#: a student id: one path component without white space (no '/', '\\', spaces, tabs or newlines)
STUDENT_ID = re.compile(r"[^\s/\\]{1,128}")


@dataclass(frozen=True)
class Extension:
    """One grant: ``hours`` past the due date for ``student`` on ``section``, and why."""

    section: str
    student: str
    hours: float
    reason: str
    granted_at: str
    granted_by: str


def extensions(course: Course | Path) -> dict[tuple[str, str], Extension]:
    """The extensions in force, by (section, student): the newest grant of each."""
    folder = course.folder if isinstance(course, Course) else Path(course)  # the journal only: no config read
    out = {}
    for n, record in journal.read(folder, JOURNAL):
        try:
            grant = Extension(**record)
            if not 0 <= grant.hours <= MAX_DAYS * 24:  # also refuses NaN; Infinity is valid JSON for Python
                raise ValueError(f"{grant.hours} hours is not an extension")
        except (ValueError, TypeError) as exc:
            where = journal.path(folder, JOURNAL)
            raise ValueError(
                f"{where}, line {n}: not an extension record ({exc}); correct or delete that line"
            ) from exc
        out[(grant.section, grant.student)] = grant
    return out


def _released_and_known(course: Course) -> tuple[set[str], set[str]]:
    """The released sections (in the gradebook) and the students the course knows: in the gradebook (roster
    or graded) or with a submission of any section in ``submitted/``; one gradebook read."""
    from nbgrader.api import Gradebook

    from autograder.ops.nbgrader_run import prepare_gradebook

    prepare_gradebook(course)
    with Gradebook(course.gradebook_url) as gb:
        released, known = {a.name for a in gb.assignments}, {st.id for st in gb.students}
    return released, known | set(course.submitters())


def grant_extension(
    course: Course | Path, section: str, student: str, hours: float, reason: str, new_student: bool = False
) -> Extension:
    """Record an extension (0 hours withdraws one) and write it into the gradebook.

    Everything is checked first (the hours, the student, the section, the term and the extensions already
    recorded); a refused grant writes nothing. ``new_student``: grant to an id the course does not know yet.
    """
    if not reason.strip():
        raise ValueError("an extension needs a reason (it is kept in the audit trail): --reason TEXT")
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours):
        raise ValueError(f"--hours must be a finite number of hours, got {hours!r}")
    if not 0 <= hours <= MAX_DAYS * 24:
        raise ValueError(f"--hours must lie between 0 (withdraw) and {MAX_DAYS * 24} ({MAX_DAYS} days), got {hours:g}")
    if not STUDENT_ID.fullmatch(student):
        raise ValueError(f"{student!r} is not a student id (no spaces, '/' or '\\')")
    course = Course.of(course)  # reads the term: a broken term.toml would fail the grant after it was written
    extensions(course)  # so would a broken extensions record
    released, known = _released_and_known(course)
    if section not in released:
        raise ValueError(f"{section} is not released (not in the gradebook): release it before granting extensions")
    if not new_student and student not in known:
        raise ValueError(
            f"unknown student {student!r}: not in the gradebook and nothing in submitted/; check the id, or grant "
            "to a student who has not handed anything in yet with --new-student"
        )
    grant = Extension(
        section,
        student,
        float(hours),
        reason.strip(),
        journal.now(),
        os.environ.get("SUDO_USER") or getpass.getuser(),
    )
    journal.append(course.folder, JOURNAL, asdict(grant))
    apply_term(course)
    return grant


def _utc_naive(when: datetime) -> datetime:
    """What nbgrader's gradebook stores: UTC without a time zone."""
    return when.astimezone(timezone.utc).replace(tzinfo=None)


def apply_term(course: Course | Path) -> list[str]:
    """Write the term's due dates (of released sections) and extensions into the gradebook, then have nbgrader
    charge again every late penalty that may have changed since grading (when the course has a term file).

    Returns one Chinese line per late submission (section, student, lateness, penalty), for the instructor.
    """
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.ops.nbgrader_run import prepare_gradebook

    course = Course.of(course)
    prepare_gradebook(course)
    lines = []
    with Gradebook(course.gradebook_url) as gb:
        for section, due in sorted(course.term.due.items()):
            try:  # released sections only: an assignment in the gradebook is one the exports grade
                gb.find_assignment(section).duedate = _utc_naive(due)
            except MissingEntry:
                pass
        for (section, student), grant in sorted(extensions(course).items()):
            try:
                gb.find_assignment(section)
            except MissingEntry:  # recorded for a section this gradebook does not hold (a new gradebook)
                lines.append(f"{section} {student}：成绩库里没有这份作业，延期暂不生效（发布后再运行 term）")
                continue
            gb.update_or_create_student(student)
            gb.update_or_create_submission(section, student, extension=timedelta(hours=grant.hours) or None)
        gb.db.commit()
        # without a term file the course has no policy of its own: penalties stay as nbgrader set them
        graded = gb.assignments if (course.folder / TERM_FILE).is_file() else []
        # late now, or charged before (an extension or a due date may have changed since): charged again
        stale = [
            (assignment.name, submission.student.id, notebook.name)
            for assignment in graded
            for submission in assignment.submissions
            for notebook in submission.notebooks
            if submission.total_seconds_late > 0 or notebook.late_submission_penalty is not None
        ]
    _charge_late_penalties(course, stale)
    policy = TermLatePolicy(config=course.config).policy  # the configured policy, the one nbgrader applies
    with Gradebook(course.gradebook_url) as gb:
        for section, student in sorted({(section, student) for section, student, _ in stale}):
            submission = gb.find_submission(section, student)
            late = submission.total_seconds_late
            if late > 0:
                penalty = sum(nb.late_submission_penalty or 0.0 for nb in submission.notebooks)
                lines.append(
                    f"{section} {student}：迟交 {late / 3600:.1f} 小时，扣 {policy.percent(late):g}%（共 {penalty:g} 分）"
                )
    return lines


def _charge_late_penalties(course: Course, notebooks: list[tuple[str, str, str]]) -> None:
    """Have nbgrader's own ``AssignLatePenalties``, the step every autograde runs with the course's late plugin
    (:class:`autograder.verdict.lateness.TermLatePolicy`), charge each ``(section, student, notebook)`` again
    from its score now: the one writer of a late penalty, so a grade given by hand after autograding, an
    extension or a moved due date is charged exactly as grading charges."""
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties

    charge = AssignLatePenalties(config=course.config)
    for section, student, notebook in notebooks:
        ids = {"assignment": section, "student": student, "notebook": notebook, "db_url": course.gradebook_url}
        charge.preprocess(nbformat.v4.new_notebook(), {"nbgrader": ids})  # reads and writes the gradebook only
