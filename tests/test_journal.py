"""The course's journals (autograder/verdict/journal.py): one format, and ids handed out under the lock."""

import json
import multiprocessing
from datetime import datetime

import pytest

from autograder.verdict import journal


def _take_ids(course_dir, n):
    """What a regrade import does: read the journal, derive the next id from it, append, all under the lock."""
    for _ in range(n):
        with journal.locked(course_dir, "regrades") as held:
            held.append({"id": f"r{len(held.read()) + 1}"})


def test_two_writers_at_once_never_hand_out_the_same_id(tmp_path):
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each: the lock is between processes
    workers = [ctx.Process(target=_take_ids, args=(tmp_path, 40)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    ids = [record["id"] for _, record in journal.read(tmp_path, "regrades")]
    assert len(ids) == 120 and len(set(ids)) == 120


def test_one_format_any_text_and_a_clear_error_for_a_broken_line(tmp_path):
    odd = "学生\udcff\n名"  # a lone surrogate (an undecodable byte in a file name) and a newline
    journal.append(tmp_path, "extensions", {"student": odd, "at": journal.now()})
    raw = journal.path(tmp_path, "extensions").read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 1  # one line, valid UTF-8 whatever the text
    [(n, record)] = journal.read(tmp_path, "extensions")
    assert n == 1 and record["student"] == odd
    assert datetime.fromisoformat(record["at"]).utcoffset().total_seconds() == 0  # UTC, to the second
    with journal.path(tmp_path, "extensions").open("a") as f:
        f.write('{"student": \n')
    with pytest.raises(ValueError, match=r"extensions\.jsonl, line 2: not a JSON record"):
        journal.read(tmp_path, "extensions")
    assert json.loads(raw) == {"student": odd, "at": record["at"]}
