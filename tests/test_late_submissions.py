"""Due dates, extensions and the late policy, through real nbgrader with real submission timestamps.

Four students hand in the reference solution of one section: on time, 30 hours late, 30 hours late with a
48-hour extension, and eight days late (past the hard deadline of ``assignments/term.toml``: 10 % per
started day, at most 50 %, zero after 7 days). nbgrader's own ``AssignLatePenalties`` applies the policy
during autograde; the gradebook, the feedback page and the LMS export must all show it, and a manual
grade given afterwards must be penalised too.
"""

import csv
import shutil
from datetime import timedelta, timezone

import pytest
from nbgrader.api import Gradebook

from autograder.ops.exports import write_canvas_csv
from autograder.ops.nbgrader_run import gradebook_url, nbgrader
from autograder.ops.selftest import hand_in
from autograder.ops.term import apply_term, extensions, grant_extension, load_term

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

SECTION = "s04_3"
HOUR = timedelta(hours=1)


@pytest.fixture(scope="module")
def term_course(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("late") / "course")
    hand_in(SECTION, course, wrong_answers=False, released=True)
    due = load_term(course).due[SECTION]
    handed_in = {
        "ontime": due - HOUR,
        "late": due + 30 * HOUR,
        "extended": due + 30 * HOUR,
        "toolate": due + 193 * HOUR,
    }
    reference = course / "submitted" / "reference" / SECTION
    for student, when in handed_in.items():
        folder = course / "submitted" / student / SECTION
        shutil.copytree(reference, folder)
        # what nbgrader's collect writes (nbgrader.utils.get_existing_timestamp reads it)
        (folder / "timestamp.txt").write_text(when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
    shutil.rmtree(course / "submitted" / "reference")
    shutil.rmtree(course / "submitted" / "blank")
    apply_term(course)  # the due date of the released section into the gradebook
    grant_extension(course, SECTION, "extended", 48, "病假（校医院证明）")
    nbgrader(["autograde", SECTION, "--force"], course)
    return course


def _notebooks(course, student):
    with Gradebook(gradebook_url(course)) as gb:
        sub = gb.find_submission(SECTION, student)
        return sub.total_seconds_late, {nb.name: (nb.score, nb.late_submission_penalty) for nb in sub.notebooks}


def test_nbgrader_applies_the_term_policy_while_grading(term_course):
    expected_percent = {"ontime": 0, "late": 20, "extended": 0, "toolate": 100}  # 30 h: two started days
    for student, percent in expected_percent.items():
        late, notebooks = _notebooks(term_course, student)
        assert (late > 0) == (percent > 0), (student, late)
        scored = [(score, penalty) for score, penalty in notebooks.values() if score > 0]
        assert scored, notebooks  # the reference scores on the autograded notebooks
        for score, penalty in scored:
            assert (penalty or 0.0) == pytest.approx(score * percent / 100), (student, score, penalty)


def test_the_extension_is_recorded_with_its_reason(term_course):
    grant = extensions(term_course)[(SECTION, "extended")]
    assert grant.hours == 48 and grant.reason == "病假（校医院证明）" and grant.granted_by
    with Gradebook(gradebook_url(term_course)) as gb:
        assert gb.find_submission(SECTION, "extended").extension == timedelta(hours=48)
    with pytest.raises(ValueError, match="reason"):
        grant_extension(term_course, SECTION, "late", 24, "  ")
    with pytest.raises(ValueError, match="not released"):
        grant_extension(term_course, "s04_1", "late", 24, "病假")
    assert set(extensions(term_course)) == {(SECTION, "extended")}  # a refused grant leaves no record


def test_feedback_says_how_late_and_what_it_cost(term_course):
    nbgrader(["generate_feedback", SECTION, "--force"], term_course)
    pages = {
        student: "\n".join(
            p.read_text(encoding="utf-8") for p in (term_course / "feedback" / student / SECTION).glob("*.html")
        )
        for student in ("ontime", "late", "extended", "toolate")
    }
    assert "迟交情况" not in pages["ontime"]
    assert "迟交 30.0 小时" in pages["late"] and "扣 20%" in pages["late"] and "每迟交一天" in pages["late"]
    assert "含延期 2.0 天（48 小时）" in pages["extended"] and "不扣分" in pages["extended"]
    assert "扣 100%" in pages["toolate"] and "计 0 分" in pages["toolate"]


def test_exports_subtract_the_penalty_and_a_later_manual_grade_is_penalised_too(term_course, tmp_path):
    def totals():
        out = tmp_path / "canvas.csv"
        write_canvas_csv(term_course, out, [SECTION])
        rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
        return {row["SIS User ID"]: row[SECTION] for row in rows[1:]}  # rows[0]: Points Possible

    with Gradebook(gradebook_url(term_course)) as gb:
        for student in ("ontime", "late"):  # a TA grades every written answer of both with full marks
            for nb in gb.find_submission(SECTION, student).notebooks:
                for grade in nb.grades:
                    if grade.cell.cell_type == "markdown":  # as formgrader's grade handler saves it
                        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gb.db.commit()
    apply_term(term_course)  # what `export` runs first
    _, ontime = _notebooks(term_course, "ontime")
    _, late = _notebooks(term_course, "late")
    full = sum(score for score, _ in ontime.values())
    assert sum(score for score, _ in late.values()) == pytest.approx(full)
    assert sum(p or 0.0 for _, p in late.values()) == pytest.approx(0.2 * full)  # manual points penalised too
    exported = totals()
    assert float(exported["ontime"]) == pytest.approx(full)
    assert float(exported["late"]) == pytest.approx(0.8 * full)
