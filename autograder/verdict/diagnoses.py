"""What grading diagnosed in each graded cell: the record ``python -m autograder stats`` counts.

The verdict (:class:`~autograder.verdict.preprocessors.ExternalVerdict`) appends one record per graded notebook
to the journal ``<course>/.grading/audit/diagnoses-<section>.jsonl`` (:mod:`autograder.verdict.journal`: one
write under its lock, so the parallel workers of a class run or of Dask never interleave)::

    {"time": "...", "student": "...", "notebook": "s04_1_ex1",
     "cells": [{"cell": "test_fd_grad", "check": "s04_1_ex1.fd_grad", "earned": 2.0, "points": 3.0,
                "diagnoses": [[null, "rollouts_n"], ...], "problem": ""}, ...]}

``diagnoses[case][output]`` are :class:`course_check.scoring.Scored`'s: ``null`` passed, a catalogued
mistake's name or a rule's code, ``""`` failed with no diagnosis. ``problem`` is a code of :data:`CELL_RULES`
when the cell left nothing to score (``diagnoses`` is then empty). Regrading a notebook appends a new record;
:func:`latest` keeps the newest of each (student, notebook), so a regrade replaces what the earlier grading
diagnosed and never adds to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from autograder.verdict import journal

#: codes of a graded cell that left nothing to score, in English for reports
CELL_RULES = {
    "no_record": "no result record (error, timeout or crash before grading)",
    "malformed": "malformed result record",
    "misconfigured": "graded cell misconfigured",
}


@dataclass(frozen=True)
class CellDiagnosis:
    """One graded cell of one graded notebook: its check, its points and what was diagnosed."""

    cell: str  # the nbgrader grade_id
    check: str  # "<exercise>.<name>"
    earned: float
    points: float
    diagnoses: tuple[tuple[str | None, ...], ...] = ()
    problem: str = ""

    @property
    def passed(self) -> bool:
        """Every output of every case passed."""
        return not self.problem and bool(self.diagnoses) and all(c is None for case in self.diagnoses for c in case)

    @property
    def codes(self) -> set[str]:
        """Every diagnosis made in this cell (mistake names and rule codes), without repeats."""
        found = {c for case in self.diagnoses for c in case if c}
        return (found | {self.problem}) if self.problem else found


def journal_name(section: str) -> str:
    return f"diagnoses-{section}"


def record(course_dir: Path, section: str, student: str, notebook: str, cells: list[CellDiagnosis]) -> None:
    """Append what grading ``student``'s ``notebook`` of ``section`` diagnosed (one record, one write)."""
    entry = {"time": journal.now(), "student": student, "notebook": notebook, "cells": [asdict(c) for c in cells]}
    journal.append(course_dir, journal_name(section), entry)


def _cell(data: dict) -> CellDiagnosis:
    cases = tuple(tuple(None if c is None else str(c) for c in case) for case in data.get("diagnoses", ()))
    return CellDiagnosis(
        str(data["cell"]),
        str(data["check"]),
        float(data["earned"]),
        float(data["points"]),
        cases,
        str(data.get("problem", "")),
    )


def latest(course_dir: Path, section: str) -> dict[tuple[str, str], list[CellDiagnosis]]:
    """``{(student, notebook): cells}`` of ``section``'s newest grading of each notebook (empty when none)."""
    name = journal_name(section)
    out = {}
    for n, entry in journal.read(course_dir, name):
        try:
            out[str(entry["student"]), str(entry["notebook"])] = [_cell(c) for c in entry["cells"]]
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"{journal.path(course_dir, name)}, line {n}: not a diagnoses record ({exc!r})") from exc
    return out
