"""The instructor's term through real nbgrader: due dates, extensions, the late policy and regrade requests.

Four students hand in the reference solution of one section: on time, 30 hours late, 30 hours late with a
48-hour extension, and eight days late (past the hard deadline of ``assignments/term.toml``: 10 % per
started day, at most 50 %, zero after 7 days). A fifth hands in a catalogued wrong answer on time. nbgrader's
own ``AssignLatePenalties`` applies the policy during autograde; the gradebook, the feedback page and the LMS
export must all show it, and a manual grade given afterwards must be penalised too. Regrade requests arrive
as a form's CSV, are listed, decided (an override and a refusal) and audited, survive a later autograde,
and reach the student's next feedback as inert text.
"""

import csv
import json
import shutil
from datetime import timedelta, timezone

import pytest
from nbgrader.api import Gradebook

from autograder.authoring.reference import WRONG_ANSWERS
from autograder.ops.lms_grades import write_canvas_csv
from autograder.ops.nbgrader_run import gradebook_url, nbgrader
from autograder.ops.regrades import decide, import_requests, open_requests
from autograder.ops.selftest import hand_in
from autograder.ops.term import apply_term, extensions, grant_extension, load_term

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.xdist_group("term")]

SECTION = "s04_3"
WRONG = "s04_3_ex1"  # the wrong student hands in the first catalogued wrong answer of this notebook
#: the notebooks handed in: both have automatic points and written answers; s04_3_ex2 (about 10 s to grade,
#: the rest of the section about 2 s) adds nothing the term needs, and the section contract grades it
NOTEBOOKS = ["s04_3_ex1", "s04_3_ex3"]
HOUR = timedelta(hours=1)


@pytest.fixture(scope="module")
def term_course(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("term") / "course")
    assert WRONG_ANSWERS[WRONG]
    hand_in(SECTION, course, wrong_answers=True, released=True, exercises=NOTEBOOKS)
    due = load_term(course).due[SECTION]
    handed_in = {
        "ontime": ("reference", due - HOUR),
        "late": ("reference", due + 30 * HOUR),
        "extended": ("reference", due + 30 * HOUR),
        "toolate": ("reference", due + 193 * HOUR),
        "wrong": (f"wrong-{WRONG}-0", due - 2 * HOUR),
    }
    submitted = course / "submitted"
    for student, (model, when) in handed_in.items():
        shutil.copytree(submitted / model / SECTION, submitted / student / SECTION)
        # what nbgrader's collect writes (nbgrader.utils.get_existing_timestamp reads it)
        stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
        (submitted / student / SECTION / "timestamp.txt").write_text(stamp)
    for folder in submitted.iterdir():
        if folder.name not in handed_in:
            shutil.rmtree(folder)
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
    # the graders' rubric copies stay out of feedback (these students' answers are the reference's own text)
    assert all("只给助教看" not in page for page in pages.values())
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


def _lost_cell(course, student):
    """``(notebook, cell, score, max)`` of the first graded code cell where ``student`` lost points."""
    with Gradebook(gradebook_url(course)) as gb:
        for nb in gb.find_submission(SECTION, student).notebooks:
            for grade in nb.grades:
                if grade.cell.cell_type == "code" and grade.score < grade.max_score:
                    return nb.name, grade.cell.name, grade.score, grade.max_score
    raise AssertionError(f"{student} lost no points")


def _score(course, student, notebook, cell):
    with Gradebook(gradebook_url(course)) as gb:
        return gb.find_grade(cell, notebook, SECTION, student).score


def test_a_regrade_request_goes_from_the_form_to_the_next_feedback(term_course, tmp_path):
    notebook, cell, lost, points = _lost_cell(term_course, "wrong")
    assert notebook == WRONG
    form = tmp_path / "form.csv"
    rows = [
        ["学号", "作业", "单元", "理由"],
        ["wrong", SECTION, cell, "我的符号约定与题目一致，请再看一下"],
        ["late", SECTION, f"{WRONG}/{cell}", "<script>alert(1)</script> *迟交* 是网络故障"],
        ["wrong", SECTION, "no_such_cell", "看看"],
        ["wrong", SECTION, cell, ""],
        ["wrong", SECTION, cell, "我的符号约定与题目一致，请再看一下"],  # sent twice
    ]
    with form.open("w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    imported = import_requests(term_course, form)
    assert [(r.id, r.student) for r in imported.added] == [("r1", "wrong"), ("r2", "late")]
    assert [p.split("：")[0] for p in imported.problems] == ["第 4 行", "第 5 行", "第 6 行"]
    assert "no_such_cell" in imported.problems[0] and "重复" in imported.problems[2]
    assert [(o.request.id, o.score, o.max_score) for o in open_requests(term_course)] == [
        ("r1", lost, points),
        ("r2", points, points),
    ]

    for bad in (points + 1, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="outside"):
            decide(term_course, "r1", bad, "多给")
    decide(term_course, "r1", points, "复核后确认你的写法正确：评分时的常见错误判断有误。")
    decide(term_course, "r2", None, "该单元已经满分；迟交扣分按课程规则执行。")
    assert open_requests(term_course) == []
    assert _score(term_course, "wrong", notebook, cell) == points
    trail = [json.loads(line) for line in (term_course / ".grading" / "audit" / f"{SECTION}.jsonl").open()]
    assert {"student": "wrong", "cell": f"{notebook}/{cell}", "why": ["regrade-request r1"]}.items() <= trail[
        -1
    ].items()

    nbgrader(["autograde", SECTION, "--student=wrong", "--force"], term_course)  # a later regrade keeps the decision
    assert _score(term_course, "wrong", notebook, cell) == points

    nbgrader(["generate_feedback", SECTION, "--force"], term_course)
    wrong = (term_course / "feedback" / "wrong" / SECTION / f"{notebook}.html").read_text(encoding="utf-8")
    late = (term_course / "feedback" / "late" / SECTION / f"{WRONG}.html").read_text(encoding="utf-8")
    assert "复核结果" in wrong and f"由 {lost:g} 分改为 {points:g} 分" in wrong and "判断有误" in wrong
    assert "维持原分" in late and "网络故障" in late
    assert "<script>alert(1)</script>" not in late and "&lt;script&gt;" in late  # the student's text stays text


def test_formgrader_shows_each_written_answer_with_its_rubric(term_course):
    import nbformat

    from autograder.verdict.rubrics import RUBRIC_TAG

    written = 0
    for path in sorted((term_course / "autograded" / "ontime" / SECTION).glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        for cell, after in zip(cells, cells[1:]):
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "markdown" and meta.get("grade") and meta.get("solution"):
                written += 1
                assert RUBRIC_TAG in after.metadata.get("tags", []), (path.name, meta["grade_id"])
                assert "评分细则" in after.source and "参考答案" in after.source
    assert written >= 2
