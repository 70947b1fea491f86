"""What ``term.toml`` says: the course's time zone, each section's due date, the late policy and the salt.

``assignments/term.toml`` is the instructor's file (``autograder/ops/term.py`` writes what it says into the
gradebook). :func:`load_term` reads and checks it; a course reads it once, through
:class:`autograder.course.Course` (or the ``configure(c, here)`` call of its ``nbgrader_config.py``, which
the Course reuses).

Imported by the course's nbgrader config: the standard library and the verdict's lateness module only.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autograder.verdict.lateness import LatePolicy

TERM_FILE = "term.toml"
#: the longest extension, hard deadline or lateness a term can mean: half a year
MAX_DAYS = 183
#: a term's salt: a short name such as "2027-spring" (empty: no salt, the hidden cases of the seeds alone)
SALT = re.compile(r"[A-Za-z0-9._-]{0,64}")


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
