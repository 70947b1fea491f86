"""The course's append-only journals: one format, one clock, one lock for every record kept in ``.grading/audit/``.

A journal is ``<course>/.grading/audit/<name>.jsonl``: one JSON object per line, ASCII-escaped (a student id or a
reason may hold any character, even an undecodable one, and the file stays valid UTF-8), never rewritten.
Journals kept: ``extensions`` (:mod:`autograder.ops.term`), ``regrades`` (:mod:`autograder.verdict.regrades`),
``collect`` (:mod:`autograder.ops.exchange_collect`), one per section for score changes
(:mod:`autograder.ops.audit`) and one per section for what grading diagnosed, ``diagnoses-<section>``
(:mod:`autograder.verdict.diagnoses`). Separate files, because each is read alone and by different people; one
format.

Whoever appends does it through :func:`locked` (an exclusive ``flock`` on ``<name>.lock`` beside the journal):
reading the records, deriving from them (the next request id) and appending happen as one step, so two
teaching assistants importing at once never hand out the same id. Times are :func:`now`: UTC, ISO 8601, seconds.

In the verdict zone because feedback reads the regrade journal and the verdict appends its diagnoses; the standard
library only.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

FOLDER = Path(".grading") / "audit"


def now() -> str:
    """The journals' clock: UTC, ISO 8601, to the second (``2027-03-08T15:59:00+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def path(course_dir: Path, name: str) -> Path:
    return Path(course_dir) / FOLDER / f"{name}.jsonl"


def read(course_dir: Path, name: str) -> list[tuple[int, object]]:
    """``[(line number, record)]`` of journal ``name`` (empty when there is none); a line that is not JSON is a
    ValueError naming the file and the line."""
    file = path(course_dir, name)
    if not file.is_file():
        return []
    out = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{file}, line {n}: not a JSON record ({exc}); correct or delete that line") from exc
    return out


class Journal:
    """A journal held under its lock (see :func:`locked`)."""

    def __init__(self, course_dir: Path, name: str):
        self.course_dir, self.name = Path(course_dir), name

    def read(self) -> list[tuple[int, object]]:
        return read(self.course_dir, self.name)

    def append(self, *records: dict) -> None:
        """Append ``records``, in one write: whole lines even where another writer ignores the lock."""
        if records:
            text = "".join(json.dumps(record) + "\n" for record in records)
            with path(self.course_dir, self.name).open("a", encoding="utf-8") as f:
                f.write(text)


@contextmanager
def locked(course_dir: Path, name: str) -> Iterator[Journal]:
    """Hold journal ``name`` alone for the ``with`` block: read, decide and append as one step."""
    file = path(course_dir, name)
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(file.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield Journal(course_dir, name)
    finally:
        os.close(fd)  # releases the lock


def append(course_dir: Path, name: str, *records: dict) -> None:
    """Append ``records`` to journal ``name`` under its lock."""
    with locked(course_dir, name) as journal:
        journal.append(*records)
