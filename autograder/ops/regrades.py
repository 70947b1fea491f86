"""Regrade requests, from the student's form to the decision in their feedback.

The channel: students fill in a form (an LMS survey or quiz, any online form) with four fields, their
student id, the assignment (section), the graded cell's name as the feedback page shows it ("Grade cell:
``fd_grad_test``", or ``notebook/cell`` when two notebooks share it) and their reason. The form's CSV export
(headers ``student,section,cell,reason`` or ``学号,作业,单元,理由``) is read by
``python -m autograder regrade import FILE.csv``: every valid row becomes a request; every other row is
reported with its line and why, and nothing of it is kept. ``regrade list`` shows the open requests with the
cell's current score; ``regrade decide ID --keep | --score X --reason TEXT`` closes one. A new score is
written as the cell's manual score (nbgrader's override, kept by later autogrades) and its change is
appended to the section's audit trail (:mod:`autograder.ops.audit`). Requests and decisions are kept in
``.grading/audit/regrades.jsonl`` (:mod:`autograder.verdict.regrades`); the next ``make feedback`` puts the
decision and its reason under the cell.
"""

from __future__ import annotations

import csv
import getpass
import os
from dataclasses import dataclass
from pathlib import Path

from autograder.course.course import Course
from autograder.ops import audit
from autograder.verdict import journal
from autograder.verdict.regrades import JOURNAL, Decision, Request, as_record, parse_regrades, read_regrades

HEADERS = {
    "student": ("student", "学号"),
    "section": ("section", "作业"),
    "cell": ("cell", "单元"),
    "reason": ("reason", "理由"),
}


def _grader() -> str:
    return os.environ.get("SUDO_USER") or getpass.getuser()


def _locate(gb, section: str, student: str, cell: str) -> tuple[str, str]:
    """``(notebook, grade cell)`` of ``cell`` ("name" or "notebook/name") in the student's submission."""
    from nbgrader.api import MissingEntry

    try:
        submission = gb.find_submission(section, student)
    except MissingEntry:
        raise ValueError(f"没有 {student} 在 {section} 的提交") from None
    notebook, _, name = cell.rpartition("/")
    found = [
        (nb.name, grade.cell.name)
        for nb in submission.notebooks
        for grade in nb.grades
        if grade.cell.name == name and (not notebook or nb.name == notebook)
    ]
    if not found:
        raise ValueError(f"{section} 里没有评分单元 {cell!r}（名字见反馈页的 Grade cell）")
    if len(found) > 1:
        raise ValueError(f"{cell!r} 在 {section} 的几个 notebook 里都有：写成 notebook/{name}")
    return found[0]


@dataclass
class Imported:
    added: list[Request]
    problems: list[str]  # "line N: why", one per row not kept


def import_requests(course: Course | Path, path: Path, source: str | None = None) -> Imported:
    """Read a form's CSV export; keep every valid, new row as a request."""
    from nbgrader.api import Gradebook

    course = Course.of(course)

    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # an LMS may write a BOM
            reader = csv.DictReader(f)
            columns = {}
            for key, names in HEADERS.items():
                match = [h for h in reader.fieldnames or [] if h and h.strip().lower() in names]
                if not match:
                    raise ValueError(f"{path}: no column {' or '.join(names)} (columns: {reader.fieldnames})")
                columns[key] = match[0]
            rows = [(n, {k: (row.get(c) or "").strip() for k, c in columns.items()}) for n, row in enumerate(reader, 2)]
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f'{path} is not UTF-8 text: export the form as "CSV UTF-8" and import that') from None
    except csv.Error as exc:
        raise ValueError(f"{path} is not a CSV file ({exc})") from None
    read_regrades(course.folder)  # a broken journal is refused before anything is looked up
    located, problems = [], []
    with Gradebook(course.gradebook_url) as gb:
        for n, row in rows:
            if not all(row.values()):
                problems.append((n, "学号、作业、单元、理由都要填"))
                continue
            try:
                notebook, cell = _locate(gb, row["section"], row["student"], row["cell"])
            except ValueError as exc:
                problems.append((n, str(exc)))
                continue
            located.append((n, (row["section"], row["student"], notebook, cell, row["reason"])))
    added = []
    if located:  # ids are handed out under the journal's lock: two imports at once never give one id twice
        with journal.locked(course.folder, JOURNAL) as held:
            requests, _ = parse_regrades(held.read(), journal.path(course.folder, JOURNAL))
            seen = {(r.section, r.student, r.notebook, r.cell, r.reason) for r in requests.values()}
            for n, key in located:
                if key in seen:
                    problems.append((n, "与已有的申请重复"))
                    continue
                seen.add(key)
                rid = f"r{len(requests) + len(added) + 1}"
                added.append(Request(rid, *key[:4], key[4], journal.now(), source or Path(path).name))
            held.append(*map(as_record, added))
    problems = [f"第 {n} 行：{why}" for n, why in sorted(problems)]
    return Imported(added, problems)


@dataclass
class OpenRequest:
    request: Request
    score: float  # the cell's score now
    max_score: float


def open_requests(course: Course | Path, sections=None) -> list[OpenRequest]:
    """Requests without a decision (of ``sections``, all by default), oldest first, with the cell's score now."""
    from nbgrader.api import Gradebook

    course = Course.of(course)
    requests, decisions = read_regrades(course.folder)
    out = []
    with Gradebook(course.gradebook_url) as gb:
        for rid, r in requests.items():
            if rid not in decisions and (sections is None or r.section in sections):
                grade = gb.find_grade(r.cell, r.notebook, r.section, r.student)
                out.append(OpenRequest(r, float(grade.score), float(grade.max_score)))
    return out


def decide(course: Course | Path, request_id: str, score: float | None, reason: str) -> Decision:
    """Close a request: keep the score (``score`` None) or override it, with a reason; recorded and audited."""
    from nbgrader.api import Gradebook

    course = Course.of(course)
    requests, _ = read_regrades(course.folder)
    if request_id not in requests:
        raise ValueError(f"no regrade request {request_id!r}")
    if not reason.strip():
        raise ValueError("a decision needs a reason (the student reads it)")
    r = requests[request_id]
    with Gradebook(course.gradebook_url) as gb:
        grade = gb.find_grade(r.cell, r.notebook, r.section, r.student)
        old, before = float(grade.score), [grade.auto_score, grade.manual_score]
        if score is not None:
            if not 0 <= score <= grade.max_score:
                raise ValueError(f"{score} is outside 0..{grade.max_score:g}, the points of {r.notebook}/{r.cell}")
            grade.manual_score, grade.needs_manual_grade = float(score), False
            gb.db.commit()
        after = [grade.auto_score, grade.manual_score]
    decision = Decision(request_id, score, old, reason.strip(), journal.now(), _grader())
    journal.append(course.folder, JOURNAL, as_record(decision))
    cell = f"{r.notebook}/{r.cell}"
    audit.record_changes(
        course.folder, r.section, r.student, {cell: before}, {cell: after}, [f"regrade-request {request_id}"]
    )
    return decision
