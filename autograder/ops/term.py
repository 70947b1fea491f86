"""The term: each section's due date, the late policy, and the extensions granted to students.

* ``assignments/term.toml`` (the instructor edits it): the time zone, one due date per section and the late
  policy (:class:`autograder.verdict.lateness.LatePolicy`). The course's nbgrader config reads the policy
  from it, so nbgrader's own ``AssignLatePenalties`` applies it in every autograde.
* ``python -m autograder extend <section> <student> --hours H --reason "..."`` grants an extension. It is
  appended, with its reason, time and grantor, to ``.grading/audit/extensions.jsonl`` (the newest grant for
  a student and section is the one in force; a grant of 0 hours withdraws it).
* :func:`apply_term` writes due dates and extensions into nbgrader's gradebook and recomputes every late
  penalty from the scores as they are now (after manual grading too). ``release``, ``autograde``, ``extend``
  and ``export`` run it, and ``python -m autograder term`` runs it alone and prints the term.

nbgrader measures lateness from the ``timestamp.txt`` in ``submitted/<student>/<section>/`` (written by
``nbgrader collect`` and ``zip_collect``, or by the instructor from the LMS's times); no timestamp, not late.

Imported by the course's nbgrader config: the standard library and the verdict's lateness module only.
"""

from __future__ import annotations

import getpass
import math
import os
import re
import tomllib
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autograder.verdict import journal
from autograder.verdict.lateness import LatePolicy

TERM_FILE = "term.toml"
JOURNAL = "extensions"  # .grading/audit/extensions.jsonl (autograder/verdict/journal.py)
EXTENSIONS_FILE = journal.FOLDER / f"{JOURNAL}.jsonl"
#: the longest extension, hard deadline or lateness a term can mean: half a year
MAX_DAYS = 183
#: a term's salt: a short name such as "2027-spring" (empty: no salt, the hidden cases of the seeds alone)
SALT = re.compile(r"[A-Za-z0-9._-]{0,64}")
#: a student id: one path component without white space (no '/', '\\', spaces, tabs or newlines)
STUDENT_ID = re.compile(r"[^\s/\\]{1,128}")


@dataclass(frozen=True)
class Term:
    """What ``term.toml`` says: the course's UTC offset, due dates (time-zone aware) and the late policy."""

    utc_offset_hours: float
    due: dict[str, datetime]
    policy: LatePolicy
    salt: str = ""  # [grading] salt: mixed into every hidden case draw (autograder.authoring.cases)


def _aware(section: str, text) -> datetime:
    if isinstance(text, datetime):  # TOML's own date-time literal (unquoted)
        text = text.isoformat()
    if not isinstance(text, str):
        raise ValueError(f"{TERM_FILE}: due date of {section} must be a date and time, got {text!r}")
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{TERM_FILE}: due date of {section} is not an ISO 8601 time: {text!r}") from exc
    if when.tzinfo is None:
        raise ValueError(f"{TERM_FILE}: due date of {section} needs a UTC offset, e.g. 2027-03-08T23:59:00+08:00")
    return when


def _number(path: Path, key: str, value, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]``, or a ValueError that names the setting and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{path}: {key} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{path}: {key} must lie between {low:g} and {high:g}, got {value!r}")
    return float(value)


def _table(path: Path, raw: dict, key: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{path}: [{key}] must be a table (a [{key}] heading with one setting per line)")
    return value


def load_term(course_dir: Path) -> Term:
    """Read and check ``<course_dir>/term.toml``; a missing file is a term without due dates or penalties.

    Anything the term cannot mean (an unknown setting or section, a number that is not finite or out of
    range, a due date without a UTC offset) is a ValueError naming the setting, before anything is written.
    """
    from autograder.authoring.sections import SECTIONS

    path = Path(course_dir) / TERM_FILE
    if not path.is_file():
        return Term(8.0, {}, LatePolicy())
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a valid TOML file ({exc})") from exc
    unknown = set(raw) - {"utc_offset_hours", "due", "late_policy", "grading"}
    if unknown:
        raise ValueError(
            f"{path}: unknown setting(s) {sorted(unknown)}; known: utc_offset_hours, [due], [late_policy], [grading]"
        )
    late = _table(path, raw, "late_policy")
    unknown = set(late) - {"percent_per_day", "cap_percent", "hard_deadline_days"}
    if unknown:
        raise ValueError(f"{path}: unknown late_policy setting(s) {sorted(unknown)}")
    deadline = late.get("hard_deadline_days")
    policy = LatePolicy(
        _number(path, "percent_per_day", late.get("percent_per_day", 0.0), 0, 100),
        _number(path, "cap_percent", late.get("cap_percent", 100.0), 0, 100),
        None if deadline is None else _number(path, "hard_deadline_days", deadline, 0, MAX_DAYS),
    )
    due_table = _table(path, raw, "due")
    unknown = sorted(set(due_table) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{path}: [due] names unknown section(s) {unknown}; the sections: {', '.join(SECTIONS)}")
    due = {section: _aware(section, text) for section, text in due_table.items()}
    offset = _number(path, "utc_offset_hours", raw.get("utc_offset_hours", 8.0), -12, 14)
    return Term(offset, due, policy, _salt(path, _table(path, raw, "grading")))


def _salt(path: Path, grading: dict) -> str:
    unknown = set(grading) - {"salt"}
    if unknown:
        raise ValueError(f"{path}: unknown grading setting(s) {sorted(unknown)}; known: salt")
    salt = grading.get("salt", "")
    if not isinstance(salt, str) or not SALT.fullmatch(salt):
        raise ValueError(
            f"{path}: [grading] salt must be a short name of the term in letters, digits, '-', '_' or '.', "
            f'such as "2027-spring" (at most 64 characters), got {salt!r}'
        )
    return salt


@dataclass(frozen=True)
class Extension:
    """One grant: ``hours`` past the due date for ``student`` on ``section``, and why."""

    section: str
    student: str
    hours: float
    reason: str
    granted_at: str
    granted_by: str


def extensions(course_dir: Path) -> dict[tuple[str, str], Extension]:
    """The extensions in force, by (section, student): the newest grant of each."""
    out = {}
    for n, record in journal.read(course_dir, JOURNAL):
        try:
            grant = Extension(**record)
            if not 0 <= grant.hours <= MAX_DAYS * 24:  # also refuses NaN; Infinity is valid JSON for Python
                raise ValueError(f"{grant.hours} hours is not an extension")
        except (ValueError, TypeError) as exc:
            where = journal.path(course_dir, JOURNAL)
            raise ValueError(
                f"{where}, line {n}: not an extension record ({exc}); correct or delete that line"
            ) from exc
        out[(grant.section, grant.student)] = grant
    return out


def _released_and_known(course_dir: Path) -> tuple[set[str], set[str]]:
    """The released sections (in the gradebook) and the students the course knows: in the gradebook (roster
    or graded) or with a folder in ``submitted/``; one gradebook read."""
    from nbgrader.api import Gradebook

    from autograder.ops.nbgrader_run import gradebook_url, prepare_gradebook

    prepare_gradebook(course_dir)
    with Gradebook(gradebook_url(course_dir)) as gb:
        released, known = {a.name for a in gb.assignments}, {st.id for st in gb.students}
    submitted = Path(course_dir) / "submitted"
    return released, known | ({p.name for p in submitted.iterdir() if p.is_dir()} if submitted.is_dir() else set())


def grant_extension(
    course_dir: Path, section: str, student: str, hours: float, reason: str, new_student: bool = False
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
    load_term(course_dir)  # a broken term.toml would fail the grant after it was written
    extensions(course_dir)  # so would a broken extensions record
    released, known = _released_and_known(course_dir)
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
    journal.append(course_dir, JOURNAL, asdict(grant))
    apply_term(course_dir)
    return grant


def _utc_naive(when: datetime) -> datetime:
    """What nbgrader's gradebook stores: UTC without a time zone."""
    return when.astimezone(timezone.utc).replace(tzinfo=None)


def apply_term(course_dir: Path) -> list[str]:
    """Write the term's due dates (of released sections) and extensions into the gradebook, then recompute
    every late penalty (when the course has a term file).

    Returns one Chinese line per late submission (section, student, lateness, penalty), for the instructor.
    """
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.ops.nbgrader_run import gradebook_url, prepare_gradebook

    term = load_term(course_dir)
    prepare_gradebook(course_dir)
    lines = []
    with Gradebook(gradebook_url(course_dir)) as gb:
        for section, due in sorted(term.due.items()):
            try:  # released sections only: an assignment in the gradebook is one the exports grade
                gb.find_assignment(section).duedate = _utc_naive(due)
            except MissingEntry:
                pass
        for (section, student), grant in sorted(extensions(course_dir).items()):
            try:
                gb.find_assignment(section)
            except MissingEntry:  # recorded for a section this gradebook does not hold (a new gradebook)
                lines.append(f"{section} {student}：成绩库里没有这份作业，延期暂不生效（发布后再运行 term）")
                continue
            gb.update_or_create_student(student)
            gb.update_or_create_submission(section, student, extension=timedelta(hours=grant.hours) or None)
        # without a term file the course has no policy of its own: penalties stay as nbgrader set them
        graded = gb.assignments if (Path(course_dir) / TERM_FILE).is_file() else []
        for assignment in graded:
            for submission in assignment.submissions:
                late = submission.total_seconds_late
                for notebook in submission.notebooks:
                    notebook.late_submission_penalty = term.policy.penalty(notebook.score, late) if late > 0 else None
                if late > 0:
                    penalty = sum(nb.late_submission_penalty or 0.0 for nb in submission.notebooks)
                    lines.append(
                        f"{assignment.name} {submission.student.id}：迟交 {late / 3600:.1f} 小时，"
                        f"扣 {term.policy.percent(late):g}%（共 {penalty:g} 分）"
                    )
        gb.db.commit()
    return lines
