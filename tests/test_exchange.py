"""nbgrader's exchange, end to end, with the real nbgrader commands on a local exchange folder.

The instructor releases a section into ``<tmp>/exchange``; two students, each in a home folder of
their own with their own ``nbgrader_config.py`` (the exchange root and the course id, nothing else),
fetch it; ``alice`` pastes the reference solutions into the fetched notebooks, ``bob`` hands in the
release untouched; both submit. The instructor collects, grades through the class run, generates and
releases feedback, and each student fetches their own feedback page. One module fixture runs the
whole round once, on s04_2 (of the sections timed, the cheapest to autograde) cut down to its first
notebook: each nbgrader command costs 5-13 s on this machine (most of it starting Python and
importing nbgrader) and each further notebook about 10 s more per student.

Who a student is: nbgrader 0.9.6 takes the submitting student's id from the login name of the
process's user id (``nbgrader.utils.get_username``: ``pwd.getpwuid(os.getuid())``; ``USER`` and
``LOGNAME`` are not read, ``JUPYTERHUB_USER`` only when that name is ``jovyan``). Both students here
run as the test's own user, so they name themselves with nbgrader's ``--student`` option of
``nbgrader submit``, which takes the place of a hub login.
"""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.sources import build_all
from autograder.ops.classrun import grade_class
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.ops.reports import graded_cells
from autograder.ops.selftest import make_submission, reference_solutions, scratch_course

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("exchange"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE = "s04_2", "s04_2_ex1"
COURSE_ID = "s04_diffsim"  # assignments/nbgrader_config.py
HONEST, BLANK = "alice", "bob"
TEST_CELL_SCORE = re.compile(r'<li><a href="#([^"]+)">Test cell</a> \(Score: ([0-9.]+) / ([0-9.]+)\)</li>')


def _student(args, home: Path) -> subprocess.CompletedProcess:
    """``nbgrader <args>`` as a student: in their home folder, which holds their only nbgrader config
    (no Jupyter paths of the machine's user: ``HOME`` is theirs, so is nbgrader's submission cache)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "XDG_"))}
    env.update(HOME=str(home), PATH=bin_dir + os.pathsep + env.get("PATH", ""))
    proc = subprocess.run(
        [os.path.join(bin_dir, "nbgrader"), *args], cwd=home, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exchange")
    exchange = tmp / "exchange"  # made by release_assignment (world-writable, as nbgrader wants it)
    course = scratch_course(tmp / "course", ROOT / "assignments")
    for md in (course / "source" / SECTION).glob("*.md"):  # the section's other notebooks: time only
        if md.stem != EXERCISE:
            md.unlink()
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    build_all(course, sections=[SECTION])
    nbgrader(["generate_assignment", SECTION, "--force"], course)
    nbgrader(["release_assignment", SECTION], course)

    homes = {}
    for student in (HONEST, BLANK):
        home = homes[student] = tmp / "home" / student
        home.mkdir(parents=True)
        (home / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n",
            encoding="utf-8",
        )
        _student(["fetch_assignment", SECTION], home)
    fetched = {s: {p.name: p.read_bytes() for p in (home / SECTION).glob("*.ipynb")} for s, home in homes.items()}
    for exercise, cells in reference_solutions(course, SECTION).items():
        path = homes[HONEST] / SECTION / f"{exercise}.ipynb"
        nbformat.write(make_submission(nbformat.read(path, as_version=4), cells), path)
    for student, home in homes.items():
        _student(["submit", SECTION, f"--student={student}"], home)
    inbound = sorted(p.name for p in (exchange / COURSE_ID / "inbound").iterdir())

    nbgrader(["collect", SECTION], course)
    results = {r.student: r for r in grade_class(course, [SECTION], workers=1, progress=False)}
    nbgrader(["generate_feedback", SECTION], course)
    nbgrader(["release_feedback", SECTION], course)
    for home in homes.values():
        _student(["fetch_feedback", SECTION], home)
    return dict(course=course, exchange=exchange, homes=homes, fetched=fetched, inbound=inbound, results=results)


def test_release_and_fetch(round_trip):
    course, exchange = round_trip["course"], round_trip["exchange"]
    release = {p.name: p.read_bytes() for p in sorted((course / "release" / SECTION).glob("*.ipynb"))}
    assert list(release) == [f"{EXERCISE}.ipynb"]
    outbound = exchange / COURSE_ID / "outbound" / SECTION
    assert {p.name: p.read_bytes() for p in outbound.glob("*.ipynb")} == release
    assert round_trip["fetched"] == {HONEST: release, BLANK: release}  # what a student fetches: the release
    # students may drop submissions into inbound but not list it (nor read one another's work)
    assert stat.S_IMODE((exchange / COURSE_ID / "inbound").stat().st_mode) & 0o007 == 0o003
    assert stat.S_IMODE(exchange.stat().st_mode) & 0o777 == 0o777


def test_submit_and_collect(round_trip):
    course, homes = round_trip["course"], round_trip["homes"]
    # one submission per student, named <student>+<assignment>+<timestamp>+<random> by nbgrader submit
    assert [name.split("+")[:2] for name in round_trip["inbound"]] == [[HONEST, SECTION], [BLANK, SECTION]]
    for student, home in homes.items():
        submitted = course / "submitted" / student / SECTION
        for notebook in (home / SECTION).glob("*.ipynb"):
            assert (submitted / notebook.name).read_bytes() == notebook.read_bytes()
        assert (submitted / "timestamp.txt").is_file()  # what nbgrader matches the feedback with later
        assert round_trip["results"][student].status == "graded", round_trip["results"][student].error


def test_scores_in_the_gradebook(round_trip):
    scores = gradebook_scores(round_trip["course"], SECTION)
    assert set(scores) == {HONEST, BLANK}
    assert set(scores[HONEST]) == set(scores[BLANK]) == {EXERCISE}
    for exercise, s in scores[HONEST].items():
        got, total = s["auto"]
        assert got == total > 0, exercise
        assert scores[BLANK][exercise]["auto"] == (0, total), exercise


def test_students_fetch_their_own_feedback(round_trip):
    course, homes = round_trip["course"], round_trip["homes"]
    scores = gradebook_scores(course, SECTION)
    released = sorted((round_trip["exchange"] / COURSE_ID / "feedback").glob("*.html"))
    assert len(released) == 2  # one page per student and notebook
    pages = {}
    for student, home in homes.items():
        timestamp = (course / "submitted" / student / SECTION / "timestamp.txt").read_text()
        # nbgrader fetch_feedback puts it beside the student's work, one folder per submission time
        assert [p.name for p in (home / SECTION / "feedback").iterdir()] == [timestamp]
        for exercise, s in scores[student].items():
            page = (home / SECTION / "feedback" / timestamp / f"{exercise}.html").read_text(encoding="utf-8")
            assert page == (course / "feedback" / student / SECTION / f"{exercise}.html").read_text(encoding="utf-8")
            pages[student, exercise] = page
            # the page's table of contents scores each test cell: full for the reference, zero for the blank
            cells = {gid: (float(a), float(b)) for gid, a, b in TEST_CELL_SCORE.findall(page)}
            assert set(cells) == {gid for gid, _ in graded_cells(page)} != set()
            got, total = s["auto"]
            assert sum(b for _, b in cells.values()) == total
            assert sum(a for a, _ in cells.values()) == got
            assert all(a == (b if student == HONEST else 0) for a, b in cells.values()), (student, exercise, cells)
    for exercise in scores[HONEST]:
        assert pages[HONEST, exercise] != pages[BLANK, exercise]
