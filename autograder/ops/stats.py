"""What the class got wrong: per graded check, the mean score, who passed, and how often each diagnosis fired.

Read from the diagnoses journal the verdict writes while grading (:mod:`autograder.verdict.diagnoses`; the newest
grading of each notebook), one submission per (student, notebook). Per check (one graded cell):

* ``submissions``, ``mean_score`` (points earned, out of ``points``) and ``passed_fully`` (every case and output);
* per catalogued mistake (the check's own, from ``autograder/data/``, zero counts included) and per generic rule
  that fired (a flipped sign, all zero, not implemented, no result record, ...): how many submissions it was
  diagnosed in at least once. A submission can match several, so these do not add up;
* the failed submissions split once: ``failed_mistake`` (at least one catalogued mistake), ``failed_rule`` (only
  generic rules) and ``undiagnosed`` (no diagnosis at all). ``passed_fully`` plus these three is ``submissions``.

:func:`write_csv` writes one ``check`` row per check followed by its ``mistake`` and ``rule`` rows;
:func:`table_lines` is the short table the command prints. The figure is :mod:`autograder.ops.stats_figure`.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autograder.ops.safe_csv import neutral
from autograder.verdict import diagnoses as journal
from autograder.verdict.diagnoses import CELL_RULES, CellDiagnosis
from course_check.compare import NONFINITE, RULES
from course_check.scoring import CALL_RULES

#: every fixed code a diagnosis can be, with its English description; any other code names a catalogued mistake
ALL_RULES = {**RULES, **CALL_RULES, **CELL_RULES}

CSV_FIELDS = [
    "section",
    "exercise",
    "cell",
    "check",
    "points",
    "submissions",
    "mean_score",
    "passed_fully",
    "failed_mistake",
    "failed_rule",
    "undiagnosed",
    "kind",
    "diagnosis",
    "matched",
    "message",
]


@dataclass
class CheckStats:
    """The class's results on one check; ``mistakes`` and ``rules`` map a name or code to its submissions."""

    section: str
    exercise: str
    cell: str
    check: str
    points: float = 0.0
    submissions: int = 0
    mean_score: float = 0.0
    passed_fully: int = 0
    failed_mistake: int = 0
    failed_rule: int = 0
    undiagnosed: int = 0
    mistakes: dict[str, int] = field(default_factory=dict)  # catalogue order, zeros included
    rules: dict[str, int] = field(default_factory=dict)  # most frequent first
    messages: dict[str, str] = field(default_factory=dict)  # mistake name -> first line of its Chinese message


def catalogue(check: str) -> dict[str, str]:
    """``{mistake name: Chinese message}`` of ``"<exercise>.<name>"`` as ``autograder/data/`` holds it ({} if none)."""
    from autograder.verdict.data import load

    exercise, _, name = check.partition(".")
    try:
        spec = load(exercise).get(name, {})
    except FileNotFoundError:
        return {}
    return {k: v for k, v in spec.get("messages", {}).items() if k != NONFINITE}


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def aggregate(
    section: str,
    graded: Mapping[tuple[str, str], list[CellDiagnosis]],
    mistakes_of: Callable[[str], Mapping[str, str]] = catalogue,
) -> list[CheckStats]:
    """Per graded cell of ``section``, by notebook and in the notebook's order: the statistics of the module docstring.

    ``graded``: ``{(student, notebook): cells}`` (:func:`autograder.verdict.diagnoses.latest`); ``mistakes_of``:
    the catalogued mistakes of a check key, with their messages (default :func:`catalogue`).
    """
    by_cell: dict[tuple[str, str], list[CellDiagnosis]] = {}
    place: dict[tuple[str, str], tuple[str, int]] = {}  # checks in the notebook's order
    for (_, notebook), cells in sorted(graded.items()):
        for i, cell in enumerate(cells):
            by_cell.setdefault((notebook, cell.cell), []).append(cell)
            place.setdefault((notebook, cell.cell), (notebook, i))
    out = []
    for (notebook, cell_id), cells in sorted(by_cell.items(), key=lambda item: place[item[0]]):
        check = cells[-1].check
        known = dict(mistakes_of(check))
        counts = Counter(code for c in cells for code in c.codes)
        stats = CheckStats(section, notebook, cell_id, check, points=max(c.points for c in cells))
        stats.submissions = len(cells)
        stats.mean_score = sum(c.earned for c in cells) / len(cells)
        stats.passed_fully = sum(c.passed for c in cells)
        for c in cells:
            if c.passed:
                continue
            if any(code in known or code not in ALL_RULES for code in c.codes):
                stats.failed_mistake += 1
            elif c.codes:
                stats.failed_rule += 1
            else:
                stats.undiagnosed += 1
        # the catalogue's mistakes first, then any other name (a mistake since removed from the catalogue)
        names = list(known) + sorted(code for code in counts if code not in known and code not in ALL_RULES)
        stats.mistakes = {name: counts[name] for name in names}
        stats.messages = {name: first_line(known.get(name, "")) for name in names}
        rules = [code for code in counts if code in ALL_RULES and code not in known]
        stats.rules = {code: counts[code] for code in sorted(rules, key=lambda code: (-counts[code], code))}
        out.append(stats)
    return out


def class_stats(course_dir: Path, sections) -> list[CheckStats]:
    """:func:`aggregate` of every section of ``sections`` graded in ``course_dir``."""
    return [s for section in sections for s in aggregate(section, journal.latest(Path(course_dir), section))]


def csv_rows(stats: list[CheckStats]) -> list[dict]:
    """The CSV's rows: per check one ``check`` row, then one per catalogued mistake and per rule that fired."""
    rows = []
    for s in stats:
        where = {"section": s.section, "exercise": s.exercise, "cell": s.cell, "check": s.check}
        rows.append(
            {
                **dict.fromkeys(CSV_FIELDS, ""),
                **where,
                "points": _num(s.points),
                "submissions": s.submissions,
                "mean_score": _num(s.mean_score),
                "passed_fully": s.passed_fully,
                "failed_mistake": s.failed_mistake,
                "failed_rule": s.failed_rule,
                "undiagnosed": s.undiagnosed,
                "kind": "check",
            }
        )
        for kind, counts, describe in (
            ("mistake", s.mistakes, s.messages.get),
            ("rule", s.rules, ALL_RULES.get),
        ):
            for name, n in counts.items():
                row = {**dict.fromkeys(CSV_FIELDS, ""), **where, "kind": kind, "diagnosis": name, "matched": n}
                rows.append({**row, "message": describe(name) or ""})
    return rows


def _num(x: float) -> float:
    return round(float(x), 4)


def write_csv(stats: list[CheckStats], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8-sig") as f:  # BOM: Excel then reads the Chinese right
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows({k: neutral(v) for k, v in row.items()} for row in csv_rows(stats))
    return path


def table_lines(stats: list[CheckStats], width: int = 48) -> list[str]:
    """The short table: per check its numbers, then each diagnosis that fired, most frequent first, with its
    count and (a mistake's) Chinese message or (a rule's) English description, cut to ``width`` characters."""
    lines = [f"{'check':40s} {'n':>4s} {'mean':>9s} {'passed':>7s} {'undiagnosed':>12s}"]
    for s in stats:
        mean = f"{s.mean_score:.2f}/{s.points:g}"
        lines.append(f"{s.check:40s} {s.submissions:4d} {mean:>9s} {s.passed_fully:7d} {s.undiagnosed:12d}")
        fired = [(n, name, s.messages.get(name, "")) for name, n in s.mistakes.items() if n]
        fired += [(n, name, ALL_RULES[name]) for name, n in s.rules.items()]
        for n, name, text in sorted(fired, key=lambda x: -x[0]):
            short = text if len(text) <= width else text[: width - 1] + "…"
            lines.append(f"  {n:4d} x {name:26s} {short}")
    return lines
