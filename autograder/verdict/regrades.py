"""Regrade requests: the record they live in, and the decision shown in the student's next feedback.

A request asks for one graded cell of one submitted notebook to be looked at again; a decision keeps its
score or overrides it, always with a reason. Both are appended (never rewritten) to
``<course>/.grading/audit/regrades.jsonl``; the instructor commands are in :mod:`autograder.ops.regrades`.

:class:`RegradeNote` (a feedback preprocessor) puts each decided request of the notebook right after the cell
it concerns, in Chinese, so the student reads the decision where the score is.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat
from nbgrader.converters.base import BaseConverter
from nbgrader.preprocessors import NbGraderPreprocessor

REGRADES_FILE = Path(".grading") / "audit" / "regrades.jsonl"
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
    path = Path(course_dir) / REGRADES_FILE
    requests, decisions = {}, {}
    if not path.is_file():
        return requests, decisions
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record.pop("kind")
            if kind == "request":
                requests[record["id"]] = Request(**record)
            elif kind == "decision":
                decisions[record["id"]] = Decision(**record)
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}, line {n}: not a regrade record ({exc})") from exc
    return requests, decisions


def append_record(course_dir: Path, record: Request | Decision) -> None:
    path = Path(course_dir) / REGRADES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = "request" if isinstance(record, Request) else "decision"
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"kind": kind, **asdict(record)}, ensure_ascii=False) + "\n")


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
        converter = self.parent
        while converter is not None and not isinstance(converter, BaseConverter):
            converter = converter.parent
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
