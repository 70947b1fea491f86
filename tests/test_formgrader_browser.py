"""Manual grading as a TA does it: formgrader in a real Jupyter server, driven by headless Chromium, offline.

One section is released with its due date, one student's submission is autograded, and a Jupyter server with
nbgrader's formgrader starts in the course folder (as the instructors page says). Every request that leaves
localhost is blocked and counted as a failure. The TA

* sees the section with its due date on the Manage Assignments page;
* opens the student's notebook, sees each written answer with its rubric beside it and the formulas rendered
  (MathJax from the book's own package, no CDN);
* enters a score and a comment for a written answer, which reach the gradebook and the LMS export.

The feedback page the student receives renders its formulas offline as well.
"""

import csv

import pytest
from formgrader_server import LATE_COMMENTS, formgrader_server, offline_tab, open_submission
from nbgrader.api import Gradebook

from autograder.ops.lms_grades import write_canvas_csv
from autograder.ops.nbgrader_run import gradebook_url, nbgrader
from autograder.ops.reports import score_rows
from autograder.ops.selftest import hand_in
from autograder.ops.term import apply_term

pytestmark = [pytest.mark.nbgrader, pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("formgrader")]

SECTION = "s04_3"
STUDENT = "reference"
#: the notebooks handed in, each with written answers; s04_3_ex2 (about 10 s to autograde, the others 1-2 s)
#: adds nothing a TA does differently, and the section contract grades it
NOTEBOOKS = ["s04_3_ex1", "s04_3_ex3"]


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("formgrader") / "course")
    hand_in(SECTION, course, wrong_answers=False, released=True, exercises=NOTEBOOKS)
    apply_term(course)
    nbgrader(["autograde", SECTION, "--force", f"--student={STUDENT}"], course)
    nbgrader(["generate_feedback", SECTION, "--force", f"--student={STUDENT}"], course)
    return course


@pytest.fixture(scope="module")
def formgrader(graded_course):
    with formgrader_server(graded_course) as base:
        yield base


@pytest.fixture
def page(browser):
    with offline_tab(browser) as tab:
        tab.add_init_script(LATE_COMMENTS)
        yield tab


def _rendered_formulas(tab) -> int:
    tab.wait_for_selector("mjx-container", timeout=30_000)
    return tab.locator("mjx-container").count()


def _written(course) -> dict[str, tuple[str, list[tuple[str, float]]]]:
    """``{notebook: (submission notebook id, [(grade_id, points), ...])}`` of the written answers."""
    out = {}
    with Gradebook(gradebook_url(course)) as gb:
        for nb in gb.find_submission(SECTION, STUDENT).notebooks:
            if nb.name not in NOTEBOOKS:  # nbgrader lists the section's other notebooks too, with nothing to open
                continue
            cells = [(g.cell.name, g.max_score) for g in nb.grades if g.cell.cell_type == "markdown"]
            if cells:
                out[nb.name] = (nb.id, cells)
    assert out, "no written answer in " + SECTION
    return out


def _saved(course, notebook, cell):
    with Gradebook(gradebook_url(course)) as gb:
        score = gb.find_grade(cell, notebook, SECTION, STUDENT).manual_score
        return score, gb.find_comment(cell, notebook, SECTION, STUDENT).manual_comment


def test_the_ta_sees_the_section_with_its_due_date(formgrader, page):
    page.goto(f"{formgrader}/formgrader/manage_assignments")
    row = page.locator("tr", has_text=SECTION).first
    row.wait_for(timeout=30_000)
    assert "2027-03-22" in row.inner_text()  # from assignments/term.toml, not "None"


def test_the_ta_grades_each_written_answer_beside_its_rubric_with_rendered_formulas(graded_course, formgrader, page):
    comment = "推导完整，但没有说明步长上界从哪里来。"
    given = {}
    for notebook, (submission, cells) in _written(graded_course).items():
        open_submission(page, formgrader, submission)
        assert _rendered_formulas(page) > 0
        text = page.locator("body").inner_text()
        assert text.count("只给助教看") == len(cells)  # each written answer with its rubric beside it
        assert "\\partial" not in text and "\\le " not in text  # no raw TeX left
        for cell, points in cells:
            given[(notebook, cell)] = points / 2
            page.fill(f"input.score#{cell}", f"{points / 2:g}")
            with page.expect_response(lambda r: "/api/grade/" in r.url and r.request.method == "PUT") as saved:
                page.fill(f"textarea#{cell}-comment", comment)  # leaving the score box saves the score
            assert saved.value.ok, saved.value.status
            with page.expect_response(lambda r: "/api/comment/" in r.url and r.request.method == "PUT") as saved:
                page.locator(f"textarea#{cell}-comment").blur()  # and leaving this one the comment
            assert saved.value.ok, saved.value.status
    for (notebook, cell), score in given.items():  # what the TA entered is in the gradebook
        assert _saved(graded_course, notebook, cell) == (score, comment), (notebook, cell)

    rows = [r for r in score_rows(graded_course, [SECTION]) if r["student"] == STUDENT]
    for notebook in _written(graded_course):
        row = next(r for r in rows if r["exercise"] == notebook)
        manual = sum(score for (nb, _), score in given.items() if nb == notebook)
        assert float(row["manual_score"]) == pytest.approx(manual), row  # make report's scores.csv
    out = graded_course / "canvas.csv"
    write_canvas_csv(graded_course, out, [SECTION])
    with Gradebook(gradebook_url(graded_course)) as gb:
        total = gb.find_submission(SECTION, STUDENT).score
    exported = next(r for r in csv.DictReader(out.open(encoding="utf-8", newline="")) if r["SIS User ID"] == STUDENT)
    assert float(exported[SECTION]) == pytest.approx(total)  # every written answer graded: the total is exported


def test_the_feedback_page_renders_its_formulas_offline(graded_course, page):
    feedback = sorted((graded_course / "feedback" / STUDENT / SECTION).glob("*.html"))
    assert feedback
    html = feedback[0].read_text(encoding="utf-8")
    assert "cdnjs" not in html and "MathJax" in html
    page.goto(feedback[0].as_uri())
    assert _rendered_formulas(page) > 0
