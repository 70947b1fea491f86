"""The regrade audit trail: for every cell whose score a regrade changes, the old score, the new one and why.

The class run (:func:`autograder.ops.classrun.grade_class`, the one writer of the ledger) snapshots each
student's per-cell scores before grading and reads them again afterwards. Every change is appended to
``<course>/.grading/audit/<section>.jsonl``, one JSON object per cell, with the reasons that explain it:

* ``resubmission``: the submitted files differ from those the ledger recorded (their SHA-256);
* ``data``: the section's reference data (expected values, hidden cases) were regenerated;
* ``tolerance``: a tolerance of one of its checks changed (a part of the data, named apart because
  it changes scores without changing any expected value);
* none of these: a byte-identical submission graded against the same data changed its score. Such a
  change is **flagged**: grading should be deterministic, so it points at a machine difference, a
  grader bug, or a score edited by hand in between; the instructor should look at it.

The first grading of a submission is not an audit event (there is no old score).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from autograder.course.course import Course
from autograder.ops.gradebook import read_gradebook
from autograder.verdict import journal
from autograder.verdict.data import DATA_DIR


def cell_scores(course: Course | Path, section: str, students=None) -> dict[str, dict[str, list]]:
    """``{student: {"<notebook>/<cell>": [auto_score, manual_score]}}`` from the gradebook
    (:func:`autograder.ops.gradebook.read_gradebook`)."""
    return {
        student: {
            f"{nb.name}/{g.name}": [g.auto_score, g.manual_score] for nb in sub.notebooks.values() for g in nb.grades
        }
        for student, sub in read_gradebook(course, [section], students).submissions(section).items()
    }


def _tolerances(node, path=""):
    """Every ``*tol*`` entry of a data file, with where it sits."""
    if isinstance(node, dict):
        for key, value in sorted(node.items()):
            if "tol" in key and not isinstance(value, (dict, list)):
                yield f"{path}/{key}", value
            else:
                yield from _tolerances(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _tolerances(value, f"{path}/{i}")


def grading_inputs(section: str, data_dir: Path = DATA_DIR) -> dict[str, str]:
    """Digests of what a score depends on besides the submission: the section's data and its tolerances."""
    data, tolerances = hashlib.sha256(), hashlib.sha256()
    for path in sorted(Path(data_dir).glob(f"{section}_*.json")):
        raw = path.read_bytes()
        data.update(path.name.encode() + b"\0" + raw)
        tolerances.update(json.dumps([path.name, *_tolerances(json.loads(raw))]).encode())
    return {"data": data.hexdigest(), "tolerance": tolerances.hexdigest()}


def reasons(previous: dict | None, fingerprint: str, inputs: dict) -> list[str]:
    """Why a regrade of a submission may score differently from the grading the ledger ``previous`` recorded."""
    if not previous:
        return []
    why = []
    if previous.get("fingerprint") != fingerprint:
        why.append("resubmission")
    old_inputs = previous.get("inputs") or {}
    if old_inputs.get("tolerance") != inputs["tolerance"]:
        why.append("tolerance")
    if old_inputs.get("data") != inputs["data"] and "tolerance" not in why:
        why.append("data")
    return why


def record_changes(
    course_dir: Path, section: str, student: str, before: dict, after: dict, why: list[str]
) -> list[dict]:
    """Append one audit line per cell whose score changed; returns those lines."""
    lines = []
    for cell in sorted(set(before) | set(after)):
        old, new = before.get(cell), after.get(cell)
        if old == new or old is None:  # unchanged, or graded for the first time
            continue
        lines.append(
            {
                "time": journal.now(),
                "student": student,
                "cell": cell,
                "old": old,
                "new": new,
                "why": why,
                "flagged": not why,
            }
        )
    journal.append(course_dir, section, *lines)
    return lines
