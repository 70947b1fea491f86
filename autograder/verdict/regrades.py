"""Regrade requests: the record they live in, and the decision shown in the student's next feedback.

A request asks for one graded cell of one submitted notebook to be looked at again; a decision keeps its
score or overrides it, always with a reason. Both are appended (never rewritten) to
``<course>/.grading/audit/regrades.jsonl``; the instructor commands are in :mod:`autograder.ops.regrades`.

:class:`RegradeNote` (a feedback preprocessor) puts each decided request of the notebook right after the cell
it concerns, in Chinese, so the student reads the decision where the score is.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.verdict import journal
from autograder.verdict.converter import running_converter

JOURNAL = "regrades"  # .grading/audit/regrades.jsonl (autograder/verdict/journal.py)
NOTE_TAG = "regrade-note"


@dataclass(frozen=True)
class Request:
    id: str
    section: str
    student: str
    notebook: str
    cell: str
    reason: str
    received_at: str
    source: str


@dataclass(frozen=True)
class Decision:
    id: str  # the request's
    score: float | None  # the new score of the cell; None: the score stands
    old_score: float
    reason: str
    decided_at: str
    decided_by: str


def read_regrades(course_dir: Path) -> tuple[dict[str, Request], dict[str, Decision]]:
    """Every request by id, and the decision of each decided one (the newest, if a request was decided again)."""
    return parse_regrades(journal.read(course_dir, JOURNAL), journal.path(course_dir, JOURNAL))


def parse_regrades(lines, where) -> tuple[dict[str, Request], dict[str, Decision]]:
    """Requests and decisions from the journal's ``[(line number, record)]`` (``where``: the file, for errors)."""
    requests, decisions = {}, {}
    for n, record in lines:
        try:
            record = dict(record)
            kind = record.pop("kind")
            if kind == "request":
                requests[record["id"]] = Request(**record)
            elif kind == "decision":
                decisions[record["id"]] = Decision(**record)
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{where}, line {n}: not a regrade record ({exc})") from exc
    return requests, decisions


def as_record(record: Request | Decision) -> dict:
    """What the regrade journal holds for ``record``."""
    return {"kind": "request" if isinstance(record, Request) else "decision", **asdict(record)}


def _inert(text: str) -> str:
    """Free text (the student wrote the reason) as plain text inside markdown: no HTML, no markup, one line."""
    text = html.escape(" ".join(text.split()), quote=False)  # & < > as entities
    return "".join("\\" + ch if ch in "\\`*_[]!#|~$" else ch for ch in text)


def decision_note(request: Request, decision: Decision) -> str:
    """The Chinese note a student reads under the cell."""
    if decision.score is None:
        outcome = f"维持原分 {decision.old_score:g} 分"
    else:
        outcome = f"由 {decision.old_score:g} 分改为 {decision.score:g} 分"
    return (
        f"**复核结果**（申请 {request.id}，{request.received_at[:10]}）：{outcome}。\n\n"
        f"- 你的理由：{_inert(request.reason)}\n- 复核意见：{_inert(decision.reason)}"
    )


class RegradeNote(NbGraderPreprocessor):
    """Feedback: after each graded cell with a decided regrade request, the decision and its reason."""

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        converter = running_converter(self)
        if converter is None:
            return nb, resources
        requests, decisions = read_regrades(Path(converter.coursedir.root))
        notes: dict[str, list[str]] = {}
        for rid, decision in decisions.items():
            request = requests.get(rid)
            if request and (request.section, request.student, request.notebook) == (
                meta["assignment"],
                meta["student"],
                meta["notebook"],
            ):
                notes.setdefault(request.cell, []).append(decision_note(request, decision))
        if notes:
            cells = []
            for cell in nb.cells:
                cells.append(cell)
                for text in notes.get(cell.metadata.get("nbgrader", {}).get("grade_id"), []):
                    note = nbformat.v4.new_markdown_cell(text)
                    note.metadata["tags"] = [NOTE_TAG]
                    cells.append(note)
            nb.cells = cells
        return nb, resources
