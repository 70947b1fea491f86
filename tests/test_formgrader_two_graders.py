"""Two TAs grade written answers at the same time, each in their own formgrader, on one PostgreSQL gradebook.

The course's gradebook is a real PostgreSQL server (:mod:`postgres_server`, a database of its own for this
test), configured the way the instructors page shows (``S04_GRADEBOOK_URL`` read by ``nbgrader_config.py``).
Two pseudo-students of s04_6 are autograded. Two Jupyter servers with formgrader start in the same course
folder (two TAs, each on their own machine sharing the folder), and two headless browser tabs, one per TA,
grade every written answer: TA A the ``reference`` student, TA B the ``blank`` one, cell by cell, with both
TAs' saves in flight at the same moment. Every score and comment each TA entered is in the gradebook
afterwards, and formgrader's own API (what either TA sees on reload) reports them.
"""

import contextlib
import json
import urllib.request
from pathlib import Path

import psycopg2
import pytest
from formgrader_server import TOKEN, formgrader_server, offline_tab, open_submission
from nbgrader.api import Gradebook
from postgres_server import postgres  # noqa: F401 (the fixture)
from sqlalchemy.engine import make_url

from autograder.ops.nbgrader_run import gradebook_url, nbgrader
from autograder.ops.selftest import hand_in, scratch_course

pytestmark = [pytest.mark.nbgrader, pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("postgres")]

ROOT = Path(__file__).resolve().parents[1]
SECTION = "s04_6"
ENV = "S04_GRADEBOOK_URL"
DATABASE = "s04_two_graders"
DB_CONFIG = f"""
import os

# the gradebook is a PostgreSQL server; its URL, password included, comes from the environment
if "{ENV}" in os.environ:
    c.CourseDirectory.db_url = os.environ["{ENV}"]
"""
TAS = {"A": "reference", "B": "blank"}
#: the notebooks handed in, each with automatic points and written answers; s04_6_ex4 (about 7 s to autograde,
#: the others 1-2 s) adds nothing two TAs do differently, and the section contract grades it
NOTEBOOKS = ["s04_6_ex2", "s04_6_ex3"]


@pytest.fixture(scope="module")
def course(postgres, tmp_path_factory):  # noqa: F811
    conn = psycopg2.connect(**postgres.admin_dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DATABASE} OWNER grader")
    finally:
        conn.close()
    url = make_url(postgres.url).set(database=DATABASE).render_as_string(hide_password=False)
    course = scratch_course(tmp_path_factory.mktemp("two_graders") / "course", ROOT / "assignments")
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(DB_CONFIG)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ENV, url)
        hand_in(SECTION, course, wrong_answers=False, exercises=NOTEBOOKS)
        nbgrader(["autograde", SECTION, "--force"], course)
        assert gradebook_url(course) == url
        yield course, url


def _written(url: str, student: str) -> list[tuple[str, str, str, float]]:
    """``[(submission notebook id, notebook, grade_id, max points), ...]`` of ``student``'s written answers."""
    with Gradebook(url) as gb:
        return [
            (nb.id, nb.name, g.cell.name, g.max_score)
            for nb in gb.find_submission(SECTION, student).notebooks
            if nb.name in NOTEBOOKS  # nbgrader lists the section's other notebooks too, with nothing to open
            for g in nb.grades
            if g.cell.cell_type == "markdown"
        ]


def _api(base: str, path: str):
    request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def test_two_tas_grade_at_once_and_no_score_is_lost(course, browser):
    course_dir, url = course
    cells = {ta: _written(url, student) for ta, student in TAS.items()}
    assert len(cells["A"]) == len(cells["B"]) >= 3, cells
    given = {}
    with (
        formgrader_server(course_dir, "ta-a.log", {ENV: url}) as base_a,
        formgrader_server(course_dir, "ta-b.log", {ENV: url}) as base_b,
        offline_tab(browser) as tab_a,
        offline_tab(browser) as tab_b,
    ):
        tabs = {"A": (tab_a, base_a), "B": (tab_b, base_b)}
        for k in range(len(cells["A"])):
            for ta, (tab, base) in tabs.items():
                submission = cells[ta][k][0]
                if tab.url.rstrip("/") != f"{base}/formgrader/submissions/{submission}":
                    open_submission(tab, base, submission)
            # both TAs fill in their k-th answer, then leave its comment box at once: two saves in flight together
            for ta, (tab, _) in tabs.items():
                _, notebook, cell, points = cells[ta][k]
                score = points / 2 if ta == "A" else points
                comment = f"助教 {ta}：第 {k + 1} 题的意见"
                given[TAS[ta], notebook, cell] = (score, comment)
                tab.fill(f"input.score#{cell}", f"{score:g}")
                tab.fill(f"textarea#{cell}-comment", comment)
            with contextlib.ExitStack() as stack:
                saves = {
                    ta: stack.enter_context(
                        tab.expect_response(lambda r: "/api/comment/" in r.url and r.request.method == "PUT")
                    )
                    for ta, (tab, _) in tabs.items()
                }
                for ta, (tab, _) in tabs.items():
                    tab.locator(f"textarea#{cells[ta][k][2]}-comment").blur()
            for ta, save in saves.items():
                assert save.value.ok, (ta, save.value.status)

        # what either TA sees on reload: formgrader's own API, asked through the other TA's server
        for ta, (_, base) in tabs.items():
            other = "B" if ta == "A" else "A"
            for submission, notebook, cell, _ in cells[other]:
                grades = {g["name"]: g for g in _api(base, f"/formgrader/api/grades?submission_id={submission}")}
                comments = {c["name"]: c for c in _api(base, f"/formgrader/api/comments?submission_id={submission}")}
                assert (grades[cell]["manual_score"], comments[cell]["manual_comment"]) == given[
                    TAS[other], notebook, cell
                ]

    with Gradebook(url) as gb:  # and the gradebook itself
        for (student, notebook, cell), (score, comment) in given.items():
            assert gb.find_grade(cell, notebook, SECTION, student).manual_score == score
            assert gb.find_comment(cell, notebook, SECTION, student).manual_comment == comment
