"""Shared files that parallel workers open are created once, before the workers start.

The book's execution cache (book/_ext/execution_cache.py): Sphinx's parallel read (book/build.py) runs several processes that each open the jupyter-cache folder.
jupyter-cache creates its SQLite tables when ``global.db`` does not exist yet, and two processes that open
an empty folder at the same moment both create them: one fails with ``table settings already exists``.
Here several processes released by one barrier open the cache on an empty folder, many times over, each
as a parallel reader does after the build's main process has prepared it. Without :func:`prepare` (the
readers opening the empty folder themselves) this test fails within a few rounds.

The real parallel build into an empty output folder is the ``built_book`` fixture (tests/conftest.py),
checked in tests/test_book.py.

The gradebook (autograder.ops.nbgrader_run.prepare_gradebook): nbgrader's ``Gradebook`` creates its tables
and course row when it finds them missing, with the same check-then-create; a class run's parallel
``nbgrader autograde`` jobs on a new gradebook (a deleted ``gradebook.db``, a new PostgreSQL database)
would race on it. The class run prepares it first; the jobs then only open it.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from nbgrader.api import Gradebook

from autograder.ops.nbgrader_run import gradebook_url, prepare_gradebook

from at_once import failures_at_once

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import execution_cache  # noqa: E402

PROCESSES = 4
ROUNDS = 8  # without prepare() the race shows in round 0 or 1 (5 trials measured, 2026-12-06)


def _reader(folder: str, index: int) -> None:
    """What one of Sphinx's reader processes does with the cache: prepare (a no-op once the main process
    has), then look a notebook up and add it to the project, as myst-nb's cache client does."""
    execution_cache.prepare(folder)
    cache = get_cache(folder)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {index}")])
    try:
        cache.match_cache_notebook(notebook)
    except KeyError:
        pass
    path = Path(folder).parent / f"page{index}.ipynb"
    nbformat.write(notebook, path)
    cache.add_nb_to_project(str(path))


def test_parallel_readers_open_an_empty_cache_without_a_race(tmp_path):
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}" / ".jupyter_cache"
        failures = failures_at_once(_reader, [(str(folder), i) for i in range(PROCESSES)])
        assert not failures, f"round {round_}:\n" + "\n".join(failures)
        assert len(get_cache(folder).list_project_records()) == PROCESSES


def test_prepare_completes_a_cache_left_half_made(tmp_path):
    """A build killed while creating the tables leaves ``global.db`` with some of them: the next build's
    prepare adds the missing ones instead of every reader failing on ``no such table``."""
    folder = tmp_path / ".jupyter_cache"
    folder.mkdir()
    with sqlite3.connect(folder / "global.db") as db:
        db.execute("CREATE TABLE settings (pk INTEGER PRIMARY KEY, key VARCHAR(36) UNIQUE, value JSON)")
    execution_cache.prepare(folder)
    assert get_cache(folder).list_cache_records() == []
    assert (folder / "__version__.txt").read_text().strip()
    execution_cache.prepare(folder)  # and again: nothing changes
    assert get_cache(folder).list_project_records() == []


def _grading_job(course: str) -> None:
    """What each parallel ``nbgrader autograde`` job of a class run does first: open the gradebook."""
    with Gradebook(gradebook_url(Path(course)), course_id="s04_diffsim") as gradebook:
        assert [student.id for student in gradebook.students] == []


def test_parallel_grading_jobs_open_a_prepared_gradebook_without_a_race(tmp_path):
    for round_ in range(3):  # each round costs seconds (nbgrader's Gradebook); without the fix round 0 fails
        course = tmp_path / f"course{round_}"
        course.mkdir()
        (course / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "s04_diffsim"\n')
        prepare_gradebook(course)
        failures = failures_at_once(_grading_job, [(str(course),)] * PROCESSES)
        assert not failures, f"round {round_}:\n" + "\n".join(failures)
