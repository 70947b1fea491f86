"""From an LMS download to grades, feedback and reports, through the real nbgrader.

One scratch course is graded once for the whole file (module fixture): a zip as Moodle or Canvas
produce it (one student in a Moodle folder, one as a zip inside the zip, plus files that belong to
no student, and students' zips that are unsafe: a path out of the folder, a link to the instructor's
solution notebook, a zip bomb, a corrupt zip) goes through ``python -m autograder collect``
(``nbgrader zip_collect``), the class run, ``nbgrader generate_feedback`` and the reports. Two
students are collected, one notebook each: every nbgrader autograde of a notebook costs 10-30 s
on this machine.
"""

import contextlib
import csv
import io
import json
import zipfile
from pathlib import Path
from unittest import mock

import nbformat
import pytest

from autograder.ops import cli
from autograder.ops.classrun import grade_class
from autograder.ops.collect import collect, match
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.authoring.reference import WRONG_ANSWERS
from autograder.ops.reports import (
    check_feedback,
    check_feedback_html,
    data_values,
    graded_cells,
    hidden_test_lines,
    make_reports,
    overview_figure,
    score_rows,
)
from autograder.ops.selftest import solution_sources, make_submission

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("collect"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE = "s04_1", "s04_1_ex1"
HONEST, WRONG, STRAY = "2021001", "2021002", "2021003"
STRAY_FILES = ["Untitled.ipynb", f"wangwu_{STRAY}_Untitled.ipynb", "readme.txt"]
ESCAPER, CORRUPT = "2021004", "2021005"


def _unsafe_zip(honest: str) -> bytes:
    """A student's zip with a member outside the folder, a link to the solution and a zip bomb."""
    link = zipfile.ZipInfo(f"{SECTION}/{EXERCISE}.ipynb")
    link.create_system, link.external_attr = 3, 0o120777 << 16
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"../../../../zhao_{ESCAPER}_{EXERCISE}.ipynb", honest)
        z.writestr(link, f"../../../../../source/{SECTION}/{EXERCISE}.ipynb")
        z.writestr(f"bomb_{ESCAPER}_{EXERCISE}.ipynb", b" " * 8 * 2**20)
    return inner.getvalue()


def _lms_zip(course: Path, path: Path) -> Path:
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    source_nb = nbformat.read(course / "source" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    honest = nbformat.writes(make_submission(release_nb, solution_sources(source_nb)))
    wrong = nbformat.writes(make_submission(release_nb, WRONG_ANSWERS[EXERCISE][0].cells))
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:  # a student who zipped a folder
        z.writestr(f"{SECTION}/{EXERCISE}.ipynb", wrong)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"张三_{HONEST}_assignsubmission_file_/{EXERCISE}.ipynb", honest)  # Moodle, in folders
        z.writestr(f"lisi_{WRONG}_assignsubmission_file_.zip", inner.getvalue())  # nested zip
        z.writestr(STRAY_FILES[0], honest)  # no student id anywhere
        z.writestr(STRAY_FILES[1], honest)  # a student id, but not a notebook of this assignment
        z.writestr(STRAY_FILES[2], "notes")  # not a notebook
        z.writestr(f"zhao_{ESCAPER}_assignsubmission_file_.zip", _unsafe_zip(honest))
        z.writestr(f"qian_{CORRUPT}_assignsubmission_file_.zip", b"PK\x03\x04 truncated upload")
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    tmp = tmp_path_factory.mktemp("collect")
    course = released_course(SECTION, tmp / "course")  # without an instructor's downloads or reports
    download = _lms_zip(course, tmp / "S04-作业1-download.zip")
    out = io.StringIO()
    with mock.patch.object(cli, "COURSE", course), contextlib.redirect_stdout(out):
        cli.main(["collect", SECTION, "--zip", str(download)])
    results = {r.student: r for r in grade_class(course, [SECTION], workers=1, progress=False)}
    nbgrader(["generate_feedback", SECTION, "--force"], course)
    return course, out.getvalue(), results


def test_lms_names_are_matched_to_students():
    cases = {
        f"张三_{HONEST}_assignsubmission_file_/{EXERCISE}.ipynb": (HONEST, EXERCISE),  # Moodle, folders
        f"张三_{HONEST}_assignsubmission_file_{EXERCISE}.ipynb": (HONEST, EXERCISE),  # Moodle, flat
        f"zhangsan_{HONEST}_889911_{EXERCISE}.ipynb": (HONEST, EXERCISE),  # Canvas
        f"zhangsan_LATE_{HONEST}_889911_{EXERCISE}-1.ipynb": (HONEST, EXERCISE),  # Canvas, late resubmission
        f"dl_2024/zhangsan_{HONEST}/{SECTION}/{EXERCISE} (1).ipynb": (HONEST, EXERCISE),
        f"{HONEST}/s04_end_exA.ipynb": (HONEST, "s04_end_exA"),
    }
    for path, (student, notebook) in cases.items():
        assert match(path) == {"student_id": student, "notebook": f"{notebook}.ipynb"}, path
    for path in (f"{EXERCISE}.ipynb", "s04_1_2024/x/s04_1_ex1.ipynb", f"zhangsan-{HONEST}-{EXERCISE}.ipynb"):
        assert match(path) is None, path


def test_zip_in_grades_and_feedback_out(graded):
    course, printed, results = graded
    for student in (HONEST, WRONG):
        assert (course / "submitted" / student / SECTION / f"{EXERCISE}.ipynb").is_file()
        assert results[student].status == "graded", results[student].error
    assert f"学号 {HONEST}: 收到 {EXERCISE}.ipynb" in printed and f"学号 {WRONG}: 收到 {EXERCISE}.ipynb" in printed
    scores = gradebook_scores(course, SECTION)
    assert set(scores) == {HONEST, WRONG}
    got, total = scores[HONEST][EXERCISE]["auto"]
    assert got == total > 0
    assert scores[WRONG][EXERCISE]["auto"][0] < total
    for student in (HONEST, WRONG):
        page = (course / "feedback" / student / SECTION / f"{EXERCISE}.html").read_text(encoding="utf-8")
        assert "通过" in page  # the graded cells' Chinese feedback reached the page
    wrong_page = (course / "feedback" / WRONG / SECTION / f"{EXERCISE}.html").read_text(encoding="utf-8")
    assert WRONG_ANSWERS[EXERCISE][0].feedback_contains in wrong_page


def test_unmatched_files_are_reported_not_lost(graded):
    course, printed, _ = graded
    for name in STRAY_FILES:
        line = next((ln for ln in printed.splitlines() if ln.startswith("未收取") and name in ln), None)
        assert line, f"{name} was dropped without a word:\n{printed}"
    assert "找不到学号" in printed and "不属于本次作业" in printed and "不是 notebook" in printed
    assert "3 个文件未能归到学生名下" in printed
    assert not (course / "submitted" / STRAY).exists()
    assert sorted(p.name for p in (course / "submitted").iterdir()) == [HONEST, WRONG]


def test_unsafe_archives_are_rejected_and_reported(graded):
    course, printed, _ = graded
    rejected = [ln for ln in printed.splitlines() if ln.startswith("拒收")]
    for fragment in (
        "路径中含有 ..",
        "符号链接",
        "压缩炸弹",
        f"qian_{CORRUPT}_assignsubmission_file_.zip: 不是有效的压缩包",
    ):
        assert any(fragment in ln for ln in rejected), f"{fragment!r} not reported:\n{printed}"
    assert "另有 4 个文件或压缩包不安全或已损坏" in printed
    # nothing was written outside nbgrader's folder, and what it unpacked holds no link
    assert not list(course.parent.rglob(f"zhao_{ESCAPER}_{EXERCISE}.ipynb"))
    extracted = course / "downloaded" / SECTION / "extracted"
    assert extracted.is_dir() and not [p for p in extracted.rglob("*") if p.is_symlink()]
    assert not (course / "submitted" / ESCAPER).exists() and not (course / "submitted" / CORRUPT).exists()


def test_collect_refuses_to_overwrite_or_guess(graded, tmp_path):
    course, _, _ = graded
    with pytest.raises(SystemExit, match="已有提交"):  # a second download would replace graded work
        collect(course, SECTION, None)
    # two copies of one student's notebook: nbgrader could not choose, so nothing is collected
    fake = tmp_path / "course"
    (fake / "release" / SECTION).mkdir(parents=True)
    (fake / "release" / SECTION / f"{EXERCISE}.ipynb").write_text("{}")
    dup = tmp_path / "dup.zip"
    with zipfile.ZipFile(dup, "w") as z:
        z.writestr(f"a_{HONEST}_1_{EXERCISE}.ipynb", "{}")
        z.writestr(f"a_{HONEST}_2_{EXERCISE}.ipynb", "{}")
    with pytest.raises(SystemExit, match="重复出现"):
        collect(fake, SECTION, dup)
    assert not (fake / "submitted").exists()


def test_scores_csv_and_overview_figure(graded, tmp_path):
    course, _, _ = graded
    written, problems = make_reports(course, [SECTION], tmp_path / "reports")
    assert problems == []
    with open(tmp_path / "reports" / "scores.csv", encoding="utf-8-sig") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    scores = gradebook_scores(course, SECTION)
    exercises = {p.stem for p in (course / "release" / SECTION).glob("*.ipynb")}
    assert set(rows) == {(s, e) for s in (HONEST, WRONG) for e in exercises}  # every student x exercise
    for student in (HONEST, WRONG):
        row = rows[(student, EXERCISE)]
        assert row["status"] == "已评分"
        assert (float(row["auto_score"]), float(row["auto_max"])) == scores[student][EXERCISE]["auto"]
        assert float(row["manual_max"]) == scores[student][EXERCISE]["manual_max"] > 0
        assert float(row["max_score"]) == float(row["auto_max"]) + float(row["manual_max"])
    assert rows[(HONEST, EXERCISE)]["manual_score"] == ""  # a written answer awaits the instructor
    assert rows[(WRONG, EXERCISE)]["manual_score"] == "0.0"  # unchanged answer cell: nbgrader gives 0
    assert {rows[(HONEST, e)]["status"] for e in exercises - {EXERCISE}} == {"未交此题"}
    png = (tmp_path / "reports" / "overview.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # the Chinese-label branch, whatever fonts this machine has (a font without CJK glyphs just warns)
    import matplotlib

    with mock.patch(
        "autograder.ops.reports.cjk_font",
        return_value=str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"),
    ):
        with pytest.warns(UserWarning, match="missing from font"):
            overview_figure(score_rows(course, [SECTION]), tmp_path / "zh.png")
    assert (tmp_path / "zh.png").stat().st_size > 10_000


def test_cli_export_csv_is_nbgrader_export(graded, tmp_path):
    """``python -m autograder export --to`` without a format is nbgrader's own CSV export."""
    course, _, _ = graded
    with mock.patch.object(cli, "COURSE", course), contextlib.redirect_stdout(io.StringIO()):
        cli.main(["export", "--to", str(tmp_path / "grades.csv")])
    lines = (tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == (
        "assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,late_submission_penalty,score,max_score"
    )
    assert {line.split(",")[0] for line in lines[1:]} == {SECTION}


def test_feedback_hides_tests_and_data(graded, tmp_path):
    course, _, _ = graded
    assert check_feedback(course, [SECTION]) == []
    page = (course / "feedback" / WRONG / SECTION / f"{EXERCISE}.html").read_text(encoding="utf-8")
    assert [gid for gid, _ in graded_cells(page)] == ["test_fd_grad", "test_analytic_grad"]
    hidden = hidden_test_lines((course / "source" / SECTION / f"{EXERCISE}.md").read_text(encoding="utf-8"))
    assert f'autograder.grade("{EXERCISE}", "fd_grad", fd_grad)' in hidden
    # nbgrader's own feedback (without the course's ClearHiddenTests) shows the hidden tests: caught
    nbgrader(
        [
            "generate_feedback",
            SECTION,
            "--force",
            "--CourseDirectory.feedback_directory=feedback_raw",
            "--GenerateFeedback.preprocessors=['nbgrader.preprocessors.GetGrades', "
            "'nbconvert.preprocessors.CSSHTMLHeaderPreprocessor']",
        ],
        course,
    )
    raw = (course / "feedback_raw" / WRONG / SECTION / f"{EXERCISE}.html").read_text(encoding="utf-8")
    found = check_feedback_html(raw, hidden, [])
    assert any("BEGIN/END HIDDEN TESTS" in p for p in found)
    assert any("autograder.grade(" in p for p in found)
    # an expected value printed by a graded cell, and English-only feedback, are caught too
    data = json.loads((ROOT / "autograder" / "data" / f"{EXERCISE}.json").read_text())
    expected = data["analytic_grad"]["cases"][0]["expected"][0][0]
    leaky = page.replace("通过 0/3 个隐藏测试", f"通过 0/3 个隐藏测试，期望 {expected:.8f}", 1)
    assert leaky != page
    assert any(f"{expected:.8f}" in p for p in check_feedback_html(leaky, hidden, data_values(data)))
    assert check_feedback_html(page, hidden, data_values(data)) == []
    english = page.replace("[s04_1_ex1] fd_grad: 完全通过", "[s04_1_ex1] fd_grad: passed", 1)
    english = "".join(ch for ch in english if not "\u4e00" <= ch <= "\u9fff")
    assert any("没有中文" in p for p in check_feedback_html(english, hidden, []))
    assert any("不是中文" in p for p in check_feedback_html(english, hidden, []))


def test_course_config_sets_collector_and_feedback():
    # nbgrader ignores a config that fails to load, and would then collect nothing and show hidden tests
    from nbgrader.preprocessors import ClearHiddenTests
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.ops.collect import EXTRACTOR, NAMED_REGEXP

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "assignments")).load_config()
    assert config.FileNameCollectorPlugin.named_regexp == NAMED_REGEXP
    assert config.ZipCollectApp.extractor_plugin == EXTRACTOR  # plain `nbgrader zip_collect` is safe too
    assert ClearHiddenTests in config.GenerateFeedback.preprocessors


def test_reports_read_the_gradebook_nbgrader_is_configured_with(tmp_path):
    from autograder.ops.nbgrader_run import gradebook_url

    (tmp_path / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.db_url = "postgresql://grader@db.example/s04"\n'
    )
    assert gradebook_url(tmp_path) == "postgresql://grader@db.example/s04"
    assert gradebook_url(tmp_path / "elsewhere") == f"sqlite:///{(tmp_path / 'elsewhere').resolve()}/gradebook.db"
