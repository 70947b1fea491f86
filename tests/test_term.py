"""The term file and the late policy's arithmetic (autograder/ops/term.py, autograder/verdict/lateness.py).

Grading with real timestamps through nbgrader: tests/test_late_submissions.py.
"""

import json
from datetime import timedelta
from pathlib import Path

import pytest

from autograder.authoring.reference import SECTIONS
from autograder.ops.term import EXTENSIONS_FILE, extensions, load_term
from autograder.verdict.lateness import DAY_S, LatePolicy

ROOT = Path(__file__).resolve().parents[1]
POLICY = LatePolicy(percent_per_day=10, cap_percent=50, hard_deadline_days=7)


@pytest.mark.parametrize(
    "seconds_late, percent",
    [
        (0, 0),
        (-3600, 0),
        (1, 10),  # a started day counts as a day
        (DAY_S, 10),
        (DAY_S + 1, 20),
        (4 * DAY_S + 1, 50),  # the cap
        (7 * DAY_S, 50),  # the hard deadline itself still counts as late, not as missed
        (7 * DAY_S + 1, 100),
    ],
)
def test_the_policy_takes_a_share_per_started_day_up_to_the_cap_then_all(seconds_late, percent):
    assert POLICY.percent(seconds_late) == percent
    assert POLICY.penalty(8.0, seconds_late) == pytest.approx(8.0 * percent / 100)


def test_no_hard_deadline_and_no_penalty_are_policies_too():
    assert LatePolicy(10, 50, None).percent(100 * DAY_S) == 50
    assert LatePolicy().penalty(5.0, 30 * DAY_S) == 0.0
    assert "计 0 分" in POLICY.describe() and "计 0 分" not in LatePolicy(10, 50).describe()
    with pytest.raises(ValueError, match="percentages"):
        LatePolicy(percent_per_day=120)


def test_the_course_term_dates_every_section_in_order():
    term = load_term(ROOT / "assignments")
    assert set(term.due) == set(SECTIONS)
    dates = [term.due[s] for s in SECTIONS if s != "mini_diffsim"]
    assert dates == sorted(dates) and term.due["mini_diffsim"] > dates[-1]
    assert term.policy == POLICY


@pytest.mark.parametrize(
    "text, message",
    [
        ('[due]\ns04_1 = "2027-03-08T23:59:00"\n', "needs a UTC offset"),
        ('[due]\ns04_1 = "next monday"\n', "not an ISO 8601 time"),
        ("[late_policy]\npercent_per_week = 10\n", "unknown late_policy"),
        ("[due\n", "term.toml"),
    ],
)
def test_a_broken_term_file_is_refused_with_its_reason(tmp_path, text, message):
    (tmp_path / "term.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_term(tmp_path)


def test_no_term_file_means_no_due_dates_and_no_penalty(tmp_path):
    term = load_term(tmp_path)
    assert term.due == {} and term.policy.penalty(5.0, 10 * DAY_S) == 0.0


def test_the_newest_grant_is_in_force(tmp_path):
    path = tmp_path / EXTENSIONS_FILE
    path.parent.mkdir(parents=True)
    grants = [
        ("s04_1", "2021001", 24, "病假"),
        ("s04_1", "2021002", 48, "比赛"),
        ("s04_1", "2021001", 0, "撤销：证明无效"),
    ]
    path.write_text(
        "".join(
            json.dumps({"section": s, "student": st, "hours": h, "reason": r, "granted_at": "t", "granted_by": "ta"})
            + "\n"
            for s, st, h, r in grants
        ),
        encoding="utf-8",
    )
    now = extensions(tmp_path)
    assert now[("s04_1", "2021001")].hours == 0 and now[("s04_1", "2021002")].reason == "比赛"
    assert timedelta(hours=now[("s04_1", "2021002")].hours) == timedelta(days=2)
    path.write_text(path.read_text(encoding="utf-8") + "not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 4"):
        extensions(tmp_path)


def test_the_term_charges_late_penalties_through_nbgraders_configured_plugin(tmp_path):
    """One rule, one writer: ``apply_term`` has nbgrader's ``AssignLatePenalties`` (with the plugin the config
    installs) charge again, so an instructor's setting after ``configure`` is what is charged, a grade given
    by hand after autograding is charged too, and an extension granted later clears the charge."""
    import shutil
    from datetime import timezone

    from nbgrader.api import Gradebook

    from autograder.course import Course
    from autograder.ops.term import apply_term, grant_extension

    folder = tmp_path / "course"
    folder.mkdir()
    shutil.copy(ROOT / "assignments" / "term.toml", folder / "term.toml")  # 10 % per started day, at most 50 %
    config = (ROOT / "assignments" / "nbgrader_config.py").read_text(encoding="utf-8")
    (folder / "nbgrader_config.py").write_text(config + "\nc.TermLatePolicy.percent_per_day = 25\n", encoding="utf-8")
    course = Course.load(folder)
    handed_in = (course.term.due["s04_1"] + timedelta(hours=30)).astimezone(timezone.utc).replace(tzinfo=None)
    with Gradebook(course.gradebook_url) as gb:
        gb.add_assignment("s04_1")
        gb.add_notebook("s04_1_ex1", "s04_1")
        gb.add_grade_cell("test_a", "s04_1_ex1", "s04_1", max_score=4, cell_type="code")
        gb.add_grade_cell("answer", "s04_1_ex1", "s04_1", max_score=4, cell_type="markdown")
        gb.add_student("late")
        gb.add_submission("s04_1", "late", timestamp=handed_in)
        for cell, score in (("test_a", {"auto_score": 4.0}), ("answer", {"manual_score": 4.0})):  # graded by hand too
            grade = gb.find_grade(cell, "s04_1_ex1", "s04_1", "late")
            for key, value in {**score, "needs_manual_grade": False}.items():
                setattr(grade, key, value)
        gb.db.commit()

    def penalty():
        with Gradebook(course.gradebook_url) as gb:
            return gb.find_submission_notebook("s04_1_ex1", "s04_1", "late").late_submission_penalty

    # 30 hours: two started days at the configured 25 % (term.toml alone would say 20 %) of all 8 points
    assert apply_term(course) == ["s04_1 late：迟交 30.0 小时，扣 50%（共 4 分）"]
    assert penalty() == pytest.approx(4.0)
    grant_extension(course, "s04_1", "late", 48, "病假")  # applies the term again: no longer late
    assert penalty() is None
