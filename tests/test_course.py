"""One course folder, read once (autograder/course/course.py): nbgrader's paths, its config, its term.

* A course whose ``nbgrader_config.py`` sets its own ``CourseDirectory.directory_structure`` and step folder
  names has every path where nbgrader's own ``CourseDirectory.format_path`` puts it, and the commands that
  read submissions (the ledger, the submission check, ``python -m autograder similarity``) find them there,
  and not at nbgrader's default places.
* One whole command (``python -m autograder export --format canvas``, which once executed the config three
  times and read ``term.toml`` four times) executes ``nbgrader_config.py`` once and reads ``term.toml`` once.

No nbgrader process runs: the gradebook is made through nbgrader's API, as in tests/test_term_input.py.
"""

import contextlib
import io
import shutil
from datetime import datetime
from pathlib import Path
from unittest import mock

import nbformat
import pytest
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from autograder.course import Course
from autograder.ops import cli
from autograder.ops.ledger import Ledger
from autograder.ops.submission_files import submission_problem

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE = "s04_1", "s04_1_ex1"
#: the section before the student, and other names for two steps: nothing is where nbgrader's defaults put it
CUSTOM = """
c = get_config()
c.CourseDirectory.directory_structure = "{nbgrader_step}/{assignment_id}/by-student/{student_id}"
c.CourseDirectory.submitted_directory = "handed_in"
c.CourseDirectory.release_directory = "for_students"
"""


def _notebook(code: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["nbgrader"] = {"grade_id": "answer", "solution": True, "grade": False, "locked": False}
    return nbformat.v4.new_notebook(cells=[cell])


@pytest.fixture
def custom_course(tmp_path) -> Path:
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "nbgrader_config.py").write_text(CUSTOM)
    return folder


def test_every_path_is_where_nbgraders_course_directory_puts_it(custom_course):
    course = Course.load(custom_course)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(custom_course)).load_config()
    nbgrader = CourseDirectory(config=config, root=str(custom_course))
    d = nbgrader
    expected = {
        "source": nbgrader.format_path(d.source_directory, ".", SECTION),
        "release": nbgrader.format_path(d.release_directory, ".", SECTION),
        "submitted": nbgrader.format_path(d.submitted_directory, "2021001", SECTION),
        "autograded": nbgrader.format_path(d.autograded_directory, "2021001", SECTION),
        "feedback": nbgrader.format_path(d.feedback_directory, "2021001", SECTION),
    }
    found = {
        "source": course.source(SECTION),
        "release": course.release(SECTION),
        "submitted": course.submitted("2021001", SECTION),
        "autograded": course.autograded("2021001", SECTION),
        "feedback": course.feedback("2021001", SECTION),
    }
    assert found == {step: Path(path) for step, path in expected.items()}
    # and none of them is where the default layout would have put it
    assert course.submitted("2021001", SECTION) == custom_course / "handed_in" / SECTION / "by-student" / "2021001"
    assert course.release(SECTION) == custom_course / "for_students" / SECTION / "by-student"
    assert course.gradebook_url == f"sqlite:///{custom_course}/gradebook.db" == nbgrader.db_url


def test_the_commands_find_the_submissions_where_nbgrader_put_them(custom_course, tmp_path):
    course = Course.load(custom_course)
    release = course.release(SECTION)
    release.mkdir(parents=True)
    nbformat.write(_notebook("def f(x):\n    raise NotImplementedError()\n"), release / f"{EXERCISE}.ipynb")
    students = ["2021001", "2021002", ".hidden"]
    for student in students:
        folder = course.submitted(student, SECTION)
        folder.mkdir(parents=True)
        nbformat.write(_notebook(f"def f(x):\n    return x + {len(student)}\n"), folder / f"{EXERCISE}.ipynb")
    decoy = custom_course / "submitted" / "2029999" / SECTION  # the default layout: not this course's
    decoy.mkdir(parents=True)
    nbformat.write(_notebook("def f(x):\n    return 0\n"), decoy / f"{EXERCISE}.ipynb")

    assert course.submitters(SECTION) == sorted(students)
    assert course.submitters() == sorted(students)
    assert {job.student for job in Ledger(course, [SECTION]).pending} == set(students)
    assert submission_problem(course, SECTION, "2021001") == ""

    out, printed = tmp_path / "similarity", io.StringIO()
    with mock.patch.object(cli, "COURSE", custom_course), contextlib.redirect_stdout(printed):
        cli.main(["similarity", SECTION, "--out", str(out)])
    assert sorted(p.name for p in (out / EXERCISE).iterdir() if p.is_dir()) == ["2021001", "2021002", "base"]
    assert "2029999" not in printed.getvalue() and "跳过 .hidden" in printed.getvalue()  # hidden: reported, not read


def test_a_link_on_the_way_to_a_submission_is_refused_in_any_layout(custom_course, tmp_path):
    course = Course.load(custom_course)
    elsewhere = tmp_path / "elsewhere" / "by-student" / "2021001"
    elsewhere.mkdir(parents=True)
    nbformat.write(_notebook("x = 1\n"), elsewhere / f"{EXERCISE}.ipynb")
    (custom_course / "handed_in").mkdir()
    (custom_course / "handed_in" / SECTION).symlink_to(tmp_path / "elsewhere")  # the section folder is a link
    assert course.named_folders(course.directory.submitted_directory, "2021001", SECTION) == [
        custom_course / "handed_in" / SECTION,
        custom_course / "handed_in" / SECTION / "by-student",
        custom_course / "handed_in" / SECTION / "by-student" / "2021001",
    ]
    assert "符号链接" in submission_problem(course, SECTION, "2021001")


def test_a_folder_without_config_or_term_is_nbgraders_defaults(tmp_path):
    course = Course.load(tmp_path)
    assert course.submitted("a", SECTION) == tmp_path / "submitted" / "a" / SECTION
    assert course.source(SECTION) == tmp_path / "source" / SECTION
    assert course.gradebook_url == f"sqlite:///{tmp_path}/gradebook.db"
    assert course.term.due == {} and course.term.policy.percent_per_day == 0


@pytest.fixture
def counted_course(tmp_path) -> Path:
    """The real config and term, with a config that counts its own executions, and a gradebook with one
    released section and one student."""
    from nbgrader.api import Gradebook

    folder = tmp_path / "course"
    folder.mkdir()
    shutil.copy(ROOT / "assignments" / "term.toml", folder / "term.toml")
    config = (ROOT / "assignments" / "nbgrader_config.py").read_text(encoding="utf-8")
    config += "\nwith open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'executed'), 'a') as f:\n"
    config += "    f.write('x')\n"
    (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    course = Course.load(folder)
    with Gradebook(course.gradebook_url) as gb:
        gb.add_assignment(SECTION, duedate=datetime(2027, 3, 8, 15, 59))
        gb.add_student("2021001")
    (folder / "executed").unlink()
    return folder


def test_one_command_reads_the_config_once_and_the_term_once(counted_course, tmp_path):
    term_reads = []
    read_text = Path.read_text

    def counting(path, *args, **kwargs):  # every reader of term.toml goes through Path.read_text
        if path.name == "term.toml":
            term_reads.append(path)
        return read_text(path, *args, **kwargs)

    out = tmp_path / "canvas.csv"
    with (
        mock.patch.object(cli, "COURSE", counted_course),
        mock.patch.object(Path, "read_text", counting),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        cli.main(["export", "--format", "canvas", "--to", str(out)])
    assert out.is_file()
    assert (counted_course / "executed").read_text() == "x"  # nbgrader_config.py: once (was 3 times)
    assert len(term_reads) == 1  # term.toml: once, by the config's configure(c, here) (was 4 times)
