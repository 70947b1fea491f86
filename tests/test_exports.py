"""Grade exports for Canvas and Moodle, and the similarity export for MOSS, JPlag and Dolos.

No kernel runs: the gradebook is built with nbgrader's own ``Gradebook`` API in a scratch course, and
the similarity export reads a small ``release/`` and ``submitted/`` tree made here with nbformat,
holding the hostile cases (a corrupt notebook, a link instead of a notebook, a linked student folder,
names that are not plain folder names, bytes that are not valid UTF-8 text).
"""

import contextlib
import csv
import io
import json
import os
from pathlib import Path
from unittest import mock

import nbformat
import pytest

from autograder.ops import cli
from autograder.ops.lms_grades import grade_table, write_canvas_csv, write_moodle_csv
from autograder.ops.safe_csv import csv_text, neutral
from autograder.ops.similarity import similarity_export
from autograder.ops.nbgrader_run import gradebook_url

# nbgrader's own Gradebook.add_submission triggers these SQLAlchemy warnings (nbgrader/api.py)
pytestmark = pytest.mark.filterwarnings("ignore:Object of type:sqlalchemy.exc.SAWarning")

ZHANG, LI, AT = "2021001", "2021002", "@2021003"
EVIL_NAME = '=HYPERLINK("http://x.invalid","点我")'


def _set_grade(gb, cell, notebook, assignment, student, **values):
    grade = gb.find_grade(cell, notebook, assignment, student)
    for key, value in values.items():
        setattr(grade, key, value)
    gb.db.commit()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder whose gradebook holds two assignments and three students (nbgrader's API).

    Built once for the module (a new gradebook costs seconds: nbgrader runs its alembic setup); the
    tests only read it.
    """
    from nbgrader.api import Gradebook

    course = tmp_path_factory.mktemp("gradebook")
    with Gradebook(gradebook_url(course)) as gb:
        gb.add_assignment("s04_1")
        gb.add_notebook("s04_1_ex1", "s04_1")
        gb.add_grade_cell("test_a", "s04_1_ex1", "s04_1", max_score=3, cell_type="code")
        gb.add_grade_cell("answer", "s04_1_ex1", "s04_1", max_score=2, cell_type="markdown")
        gb.add_assignment("s04_2")
        gb.add_notebook("s04_2_ex1", "s04_2")
        gb.add_grade_cell("test_b", "s04_2_ex1", "s04_2", max_score=2, cell_type="code")

        gb.add_student(ZHANG, first_name="三", last_name="张", email="zhangsan@example.edu", lms_user_id="98765")
        gb.add_student(LI, first_name='Li, "Jr"', last_name=EVIL_NAME, email="+li@example.edu")
        gb.add_student(AT)

        # 张三: fully graded s04_1 (3 + 1.5), no s04_2 submission
        gb.add_submission("s04_1", ZHANG)
        _set_grade(gb, "test_a", "s04_1_ex1", "s04_1", ZHANG, auto_score=3.0, needs_manual_grade=False)
        _set_grade(gb, "answer", "s04_1_ex1", "s04_1", ZHANG, manual_score=1.5, needs_manual_grade=False)
        # Li: s04_1's written answer still awaits its grade; s04_2 late by a 0.5 penalty
        gb.add_submission("s04_1", LI)
        _set_grade(gb, "test_a", "s04_1_ex1", "s04_1", LI, auto_score=1.0, needs_manual_grade=False)
        gb.add_submission("s04_2", LI)
        _set_grade(gb, "test_b", "s04_2_ex1", "s04_2", LI, auto_score=2.0, needs_manual_grade=False)
        gb.find_submission_notebook("s04_2_ex1", "s04_2", LI).late_submission_penalty = 0.5
        gb.db.commit()
        # @2021003: nothing right, one point of extra credit from the grader
        gb.add_submission("s04_1", AT)
        _set_grade(gb, "test_a", "s04_1_ex1", "s04_1", AT, auto_score=0.0, needs_manual_grade=False)
        _set_grade(gb, "answer", "s04_1_ex1", "s04_1", AT, manual_score=0.0, extra_credit=1.0, needs_manual_grade=False)
    return course


def _rows(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


CANVAS = (
    "Student,ID,SIS User ID,SIS Login ID,Section,s04_1,s04_2\r\n"
    "Points Possible,,,,,5,2\r\n"
    '"张, 三",98765,2021001,2021001,,4.5,0\r\n'
    '"\'=HYPERLINK(""http://x.invalid"",""点我""), Li, ""Jr""",,2021002,2021002,,,1.5\r\n'
    "'@2021003,,'@2021003,'@2021003,,1,0\r\n"
)
MOODLE = (
    "username,email,s04_1,s04_2\r\n"
    "2021001,zhangsan@example.edu,4.5,0\r\n"
    "2021002,'+li@example.edu,-,1.5\r\n"
    "'@2021003,,1,0\r\n"
)


def test_canvas_csv_exact(course, tmp_path):
    export = write_canvas_csv(course, tmp_path / "out" / "canvas.csv")
    data = export.path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")  # UTF-8 without BOM
    assert data.decode("utf-8") == CANVAS
    assert export.pending == [(LI, "s04_1")]  # left empty: Canvas reads an empty cell as no grade
    assert sorted(export.table.unsubmitted) == [(ZHANG, "s04_2"), (AT, "s04_2")]
    assert set(export.neutralised) == {f'{EVIL_NAME}, Li, "Jr"', AT}
    assert _rows(export.path)[3][0] == f'\'{EVIL_NAME}, Li, "Jr"'  # the csv module reads the name back whole


def test_moodle_csv_exact(course, tmp_path):
    export = write_moodle_csv(course, tmp_path / "moodle.csv")
    data = export.path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")
    assert data.decode("utf-8") == MOODLE
    assert set(export.neutralised) == {"+li@example.edu", AT}


def test_totals_are_those_of_nbgrader_export(course, tmp_path):
    """nbgrader's own CsvExportPlugin on the same gradebook gives the same totals (pending ones aside)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    plugin = CsvExportPlugin(to=str(tmp_path / "nbgrader.csv"))
    with Gradebook(gradebook_url(course)) as gb:
        plugin.export(gb)
    # nbgrader writes its fields unquoted: a name with a comma shifts the middle columns, so read from the ends
    lines = (tmp_path / "nbgrader.csv").read_text(encoding="utf-8").splitlines()[1:]
    theirs = {(line.split(",")[3], line.split(",")[0]): float(line.split(",")[-2]) for line in lines}
    table = grade_table(course)
    ours = {k: v for k, v in table.scores.items() if v is not None}
    assert ours == {k: v for k, v in theirs.items() if k != (LI, "s04_1")}
    assert theirs[(LI, "s04_1")] == 1.0  # nbgrader counts the ungraded answer as 0: we leave the cell empty


def test_sections_choose_and_order_the_columns(course, tmp_path):
    table = grade_table(course, ["s04_2", "s04_9", "s04_1"])
    assert table.sections == ["s04_2", "s04_1"] and table.missing == ["s04_9"]
    assert write_moodle_csv(course, tmp_path / "m.csv", ["s04_2"]).path.read_text(encoding="utf-8").splitlines() == [
        "username,email,s04_2",
        "2021001,zhangsan@example.edu,0",
        "2021002,'+li@example.edu,1.5",
        "'@2021003,,0",
    ]


@pytest.mark.parametrize(
    "value",
    ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", 'a "quoted", value', "line\nbreak", "张三", "", "'=already"],
)
def test_every_value_round_trips_and_no_formula_starts_a_cell(value):
    seen = []
    cell = neutral(value, seen)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert cell in (value, "'" + value) and (cell != value) == bool(seen)
    rows = [["h1", "h2"], [cell, "x"]]
    assert list(csv.reader(io.StringIO(csv_text(rows), newline=""))) == rows


def test_cli_export_formats(course, tmp_path):
    out = io.StringIO()
    with mock.patch.object(cli, "COURSE", course), contextlib.redirect_stdout(out):
        cli.main(["export", "--format", "canvas", "--to", str(tmp_path / "c.csv")])
        cli.main(["export", "s04_1", "s04_3", "--format", "moodle", "--to", str(tmp_path / "m.csv")])
    printed = out.getvalue()
    assert (tmp_path / "c.csv").read_bytes().decode("utf-8") == CANVAS
    assert _rows(tmp_path / "m.csv")[0] == ["username", "email", "s04_1"]
    assert "1 份提交还有待人工评分的单元，分数留空" in printed and "分数写作 -" in printed
    assert f"  {LI} s04_1" in printed
    assert "成绩库中还没有作业 s04_3" in printed
    assert "'+li@example.edu'" in printed and "已在前面加 '" in printed
    with pytest.raises(SystemExit, match="nbgrader export"):
        cli.main(["export", "s04_1", "--format", "csv"])


# --- similarity export ----------------------------------------------------------------------------


def _cell(kind, source, **nbgrader):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


STUB = "def f(x):\n    # 在这里写你的代码\n    raise NotImplementedError()"


def _release_ex1():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("markdown", "# 练习 1", grade_id="intro", locked=True),
        _cell("code", "import math\nG = 9.81", grade_id="setup", locked=True),
        _cell("code", STUB, grade_id="f_answer", solution=True),
        _cell("code", "assert f(1) == 2", grade_id="test_f", grade=True, points=2, locked=True),
    ]
    return nb


def _release_ex2():
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("code", "def g():\n    raise NotImplementedError()", grade_id="g_answer", solution=True)]
    return nb


def _submission(release, answers: dict, added=()):
    nb = nbformat.from_dict(json.loads(nbformat.writes(release)))
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    nb.cells.extend(nbformat.v4.new_code_cell(source) for source in added)
    return nb


@pytest.fixture
def submitted(tmp_path):
    course = tmp_path / "course"
    release = course / "release" / "s04_1"
    release.mkdir(parents=True)
    nbformat.write(_release_ex1(), release / "s04_1_ex1.ipynb")
    nbformat.write(_release_ex2(), release / "s04_1_ex2.ipynb")

    def folder(student, section="s04_1"):
        path = course / "submitted" / student / section
        path.mkdir(parents=True)
        return path

    honest = folder(ZHANG)
    nb = _submission(
        _release_ex1(),
        {"f_answer": "def f(x):\n    return 2 * x", "test_f": "pass  # the test cell emptied"},
        added=["%timeit f(3)\nhelper = lambda y: y + 1"],
    )
    nbformat.write(nb, honest / "s04_1_ex1.ipynb")
    corrupt = folder(LI)
    (corrupt / "s04_1_ex1.ipynb").write_bytes(b'{"cells": [{"cell_type": "code", "sou')  # truncated upload
    nbformat.write(_submission(_release_ex2(), {"g_answer": "def g():\n    return 1"}), corrupt / "s04_1_ex2.ipynb")
    os.symlink(honest / "s04_1_ex1.ipynb", folder("2021003") / "s04_1_ex1.ipynb")  # a link instead of a notebook
    os.symlink(course / "submitted" / ZHANG, course / "submitted" / "2021004")  # a linked student folder
    (folder("2021005") / "s04_1_ex1.ipynb").mkdir()  # a folder named like the notebook
    surrogate = json.loads(nbformat.writes(_submission(_release_ex1(), {"f_answer": "x = 1"})))
    surrogate["cells"][2]["source"] = "s = '\ud800'"  # valid JSON (an escape), not encodable as UTF-8
    (folder("2021006") / "s04_1_ex1.ipynb").write_text(json.dumps(surrogate), encoding="ascii")
    for name in ("base", "a*b"):  # the layout's own name; a glob character
        nbformat.write(_release_ex1(), folder(name) / "s04_1_ex1.ipynb")
    nbformat.write(_release_ex1(), folder("2021007", "s04_2") / "s04_1_ex1.ipynb")  # another section only
    nbformat.write(_release_ex1(), folder("x?y", "s04_2") / "s04_1_ex1.ipynb")  # a bad name, another section
    (course / "submitted" / "README.txt").write_text("a stray file, not a student")
    return course


def _files(folder: Path) -> set:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def test_similarity_layout_base_and_skipped(submitted, tmp_path):
    out = tmp_path / "similarity"
    reports = {r.exercise: r for r in similarity_export(submitted, ["s04_1"], out)}
    ex1 = out / "s04_1_ex1"
    assert sorted(os.listdir(out)) == ["s04_1_ex1", "s04_1_ex2"]  # nothing else, no temporary folder left
    assert _files(ex1) == {"info.csv", "base/s04_1_ex1.py", "2021001/s04_1_ex1.py", "2021006/s04_1_ex1.py"}
    assert (ex1 / "base" / "s04_1_ex1.py").read_text(encoding="utf-8") == f"# %% f_answer\n{STUB}\n"
    assert (ex1 / ZHANG / "s04_1_ex1.py").read_text(encoding="utf-8") == (
        "# %% f_answer\ndef f(x):\n    return 2 * x\n\n# %% 新增单元\n# %timeit f(3)\nhelper = lambda y: y + 1\n"
    )  # the given cells (setup, the emptied test) are not the student's; the added cell is
    assert (ex1 / "2021006" / "s04_1_ex1.py").read_bytes() == b"# %% f_answer\ns = '?'\n"
    assert (ex1 / "info.csv").read_bytes().decode() == (
        "filename,full_name,label\r\n2021001/s04_1_ex1.py,2021001,s04_1\r\n2021006/s04_1_ex1.py,2021006,s04_1\r\n"
    )
    skipped = dict(reports["s04_1_ex1"].skipped)
    assert sorted(skipped) == ["2021002", "2021003", "2021004", "2021005", "a*b", "base"]
    assert "不是合法的 notebook JSON" in skipped[LI]
    assert "s04_1_ex1.ipynb 是符号链接" in skipped["2021003"]
    assert "学生文件夹是符号链接" in skipped["2021004"]
    assert "不是普通文件" in skipped["2021005"]
    assert "通配符" in skipped["a*b"]
    assert "保留的名字" in skipped["base"]
    ex2 = reports["s04_1_ex2"]
    assert ex2.written == [LI] and "没有交这道题" in dict(ex2.skipped)[ZHANG]
    assert (out / "s04_1_ex2" / LI / "s04_1_ex2.py").read_text(
        encoding="utf-8"
    ) == "# %% g_answer\ndef g():\n    return 1\n"


def test_similarity_cli_prints_skips_and_next_commands(submitted, tmp_path):
    out, printed = tmp_path / "sim", io.StringIO()
    with mock.patch.object(cli, "COURSE", submitted), contextlib.redirect_stdout(printed):
        cli.main(["similarity", "s04_1", "--out", str(out)])
    text, folder = printed.getvalue(), (out / "s04_1_ex1").resolve()
    assert f"s04_1 s04_1_ex1: 写入 {out / 's04_1_ex1'}：2 位学生的代码" in text
    assert "  跳过 2021002: s04_1_ex1.ipynb 不是合法的 notebook JSON" in text
    assert f"MOSS:  cd {folder} && moss.pl -l python -b base/s04_1_ex1.py -d */s04_1_ex1.py" in text
    assert f"JPlag: java -jar jplag.jar -l python3 -bc {folder / 'base'} {folder}" in text
    assert f"Dolos: dolos run -l python -i {folder / 'base' / 's04_1_ex1.py'} {folder / 'info.csv'}" in text
    assert "s04_1 s04_1_ex2: 写入" in text and "少于两位学生" in text


def test_similarity_replaces_its_own_output_and_nothing_else(submitted, tmp_path):
    out = tmp_path / "sim"
    similarity_export(submitted, ["s04_1"], out)
    (submitted / "submitted" / "2021006" / "s04_1" / "s04_1_ex1.ipynb").unlink()
    similarity_export(submitted, ["s04_1"], out)
    assert not (out / "s04_1_ex1" / "2021006").exists()  # an earlier run's student files do not linger
    foreign = tmp_path / "elsewhere" / "s04_1_ex1"
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("mine")
    report = similarity_export(submitted, ["s04_1"], foreign.parent)[0]
    assert "不是本命令导出的文件夹" in report.problem and report.folder is None
    assert _files(foreign) == {"notes.txt"}
    missing = similarity_export(submitted, ["s04_2"], out)[0]
    assert "make release" in missing.problem
