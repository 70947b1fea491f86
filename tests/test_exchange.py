"""nbgrader's exchange, end to end, with the real nbgrader commands on a local exchange folder.

The instructor releases a section into ``<tmp>/exchange``; two students, each in a home folder of
their own with their own ``nbgrader_config.py`` (the exchange root and the course id, nothing else),
fetch it; ``alice`` pastes the reference solutions into the fetched notebooks, ``bob`` hands in the
release untouched; both submit. The instructor collects, grades through the class run, generates and
releases feedback, and each student fetches their own feedback page. One module fixture runs the
whole round once, on s04_2 (of the sections timed, the cheapest to autograde) cut down to its first
notebook: each nbgrader command costs 5-13 s on this machine (most of it starting Python and
importing nbgrader) and each further notebook about 10 s more per student.

Who a student is: each student is a real Unix account the fixture creates (``useradd``; root only, as the
grading sandbox), and runs nbgrader as that account in a home folder of their own. nbgrader 0.9.6 takes the
submitting student's id from the login name of the process's user id (``nbgrader.utils.get_username``).
Two more accounts attack the exchange as the term run of issue 46 did: ``mallory`` submits her blank
notebook with ``--student=<alice>`` after alice's honest submission (nbgrader issue #1097), and ``carol``
writes her submission folder into ``inbound/`` herself, named and stamped an hour before the due date, with
the files' modification times set back too (issue #1104). The due date is two days in the past, so every
real submission is late. The course's collector (:mod:`autograder.ops.exchange_collect`) must collect
alice's own work for alice and charge carol the lateness her files' change times show.
"""

import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.sources import build_all
from autograder.ops.classrun import grade_class
from autograder.ops.exchange_collect import BACKDATED, IMPERSONATION, OK, collect_lines, read_journal
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.ops.reports import graded_cells
from autograder.ops.selftest import make_submission, reference_solutions, scratch_course
from autograder.ops.term import apply_term

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("exchange"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE = "s04_2", "s04_2_ex1"
COURSE_ID = "s04_diffsim"  # assignments/nbgrader_config.py
_TOKEN = secrets.token_hex(3)  # accounts of this run only: a leftover of a killed run cannot collide
HONEST, BLANK, IMPOSTOR, BACKDATER = (f"s4{name}{_TOKEN}" for name in ("alice", "bob", "mallory", "carol"))
TEST_CELL_SCORE = re.compile(r'<li><a href="#([^"]+)">Test cell</a> \(Score: ([0-9.]+) / ([0-9.]+)\)</li>')


def _student(args, home: Path, user: str) -> subprocess.CompletedProcess:
    """``<args>`` (an nbgrader command, or ``python -c``) as the student account ``user``, in their home folder,
    which holds their only nbgrader config (``HOME`` is theirs, so is nbgrader's submission cache)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "XDG_"))}
    env.update(HOME=str(home), PATH=bin_dir + os.pathsep + env.get("PATH", ""), USER=user, LOGNAME=user)
    command = [os.path.join(bin_dir, "nbgrader"), *args] if args[0] != "-c" else [sys.executable, *args]
    uid = pwd.getpwnam(user).pw_uid
    # a fresh root process drops to the account (no fork of this multithreaded one); the interpreter may sit
    # below a folder only root enters (/root/.pyenv), which the mount namespace binds back
    reach = os.pathsep.join(map(str, (sys.base_prefix, sys.prefix, ROOT)))
    proc = subprocess.run(
        [sys.executable, "-c", _AS_STUDENT, str(uid), reach, *command],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{' '.join(args)} as {user} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


_AS_STUDENT = """
import os, sys
from autograder.confine import isolation
uid, reach, command = int(sys.argv[1]), sys.argv[2].split(os.pathsep), sys.argv[3:]
isolation.enter_namespaces()
isolation.make_traversable(reach, uid)
isolation.become(uid)
os.execv(command[0], command)
"""


@pytest.fixture(scope="module")
def accounts():
    """Four Unix accounts, removed afterwards."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the exchange test creates Unix accounts: run it as root (CI does)")
        pytest.skip("the exchange test creates Unix accounts (useradd): root only")
    made = []
    try:
        for user in (HONEST, BLANK, IMPOSTOR, BACKDATER):
            subprocess.run(
                ["useradd", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True
            )
            made.append(user)
        yield made
    finally:
        for user in made:
            subprocess.run(["userdel", user], check=False)


# carol's own submission folder, written into inbound/ by her account with a claim of her choosing
_FORGE = """
import os, shutil, sys
src, inbound, name, stamp, backdated = sys.argv[1:6]
dest = os.path.join(inbound, name)
shutil.copytree(src, dest)
with open(os.path.join(dest, "timestamp.txt"), "w") as f:
    f.write(stamp)
for folder, _, files in os.walk(dest):  # modification times set back too: only change times stay true
    for path in [folder] + [os.path.join(folder, f) for f in files]:
        os.utime(path, (float(backdated), float(backdated)))
"""


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory, accounts):
    tmp = tmp_path_factory.mktemp("exchange")
    # the students' side lives where their accounts can reach it (pytest's own folder is root's only)
    shared = Path(tempfile.mkdtemp(prefix="s04-exchange-"))
    shared.chmod(0o755)
    exchange = shared / "exchange"  # made by release_assignment (world-writable, as nbgrader wants it)
    course = scratch_course(tmp / "course", ROOT / "assignments")
    for md in (course / "source" / SECTION).glob("*.md"):  # the section's other notebooks: time only
        if md.stem != EXERCISE:
            md.unlink()
    due = datetime.now(timezone.utc) - timedelta(days=2)
    (course / "term.toml").write_text(
        f'utc_offset_hours = 8\n[due]\n{SECTION} = "{due.isoformat(timespec="seconds")}"\n'
        "[late_policy]\npercent_per_day = 10\ncap_percent = 50\n",
        encoding="utf-8",
    )
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    build_all(course, sections=[SECTION])
    nbgrader(["generate_assignment", SECTION, "--force"], course)
    nbgrader(["release_assignment", SECTION], course)
    apply_term(course)  # the due date into the gradebook

    homes = {}
    for student in accounts:
        home = homes[student] = shared / "home" / student
        home.mkdir(parents=True)
        (home / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n",
            encoding="utf-8",
        )
        shutil.chown(home, student, student)
        (home / "nbgrader_config.py").chmod(0o644)
        _student(["fetch_assignment", SECTION], home, student)
    fetched = {s: {p.name: p.read_bytes() for p in (home / SECTION).glob("*.ipynb")} for s, home in homes.items()}
    for student in (HONEST, BACKDATER):
        for exercise, cells in reference_solutions(course, SECTION).items():
            path = homes[student] / SECTION / f"{exercise}.ipynb"
            nbformat.write(make_submission(nbformat.read(path, as_version=4), cells), path)
    for student in (HONEST, BLANK):
        _student(["submit", SECTION], homes[student], student)
    _student(["submit", SECTION, f"--student={HONEST}"], homes[IMPOSTOR], IMPOSTOR)  # after alice's own
    claim = due - timedelta(hours=1)
    forged = f"{BACKDATER}+{SECTION}+{claim.strftime('%Y-%m-%d %H:%M:%S.%f UTC')}+forged"
    _student(
        [
            "-c",
            _FORGE,
            str(homes[BACKDATER] / SECTION),
            str(exchange / COURSE_ID / "inbound"),
            forged,
            claim.strftime("%Y-%m-%d %H:%M:%S.%f UTC"),
            str(claim.timestamp()),
        ],
        homes[BACKDATER],
        BACKDATER,
    )
    inbound = sorted(p.name for p in (exchange / COURSE_ID / "inbound").iterdir())

    lines = collect_lines(course, SECTION)
    results = {r.student: r for r in grade_class(course, [SECTION], workers=1, progress=False)}
    apply_term(course)  # penalties recomputed from the scores, as `make grade` and `export` do
    nbgrader(["generate_feedback", SECTION], course)
    nbgrader(["release_feedback", SECTION], course)
    for student in (HONEST, BLANK):
        _student(["fetch_feedback", SECTION], homes[student], student)
    yield dict(
        course=course,
        exchange=exchange,
        homes={s: homes[s] for s in (HONEST, BLANK)},
        fetched=fetched,
        inbound=inbound,
        results=results,
        lines=lines,
        due=due,
        claim=claim,
    )
    shutil.rmtree(shared, ignore_errors=True)


def test_release_and_fetch(round_trip):
    course, exchange = round_trip["course"], round_trip["exchange"]
    release = {p.name: p.read_bytes() for p in sorted((course / "release" / SECTION).glob("*.ipynb"))}
    assert list(release) == [f"{EXERCISE}.ipynb"]
    outbound = exchange / COURSE_ID / "outbound" / SECTION
    assert {p.name: p.read_bytes() for p in outbound.glob("*.ipynb")} == release
    assert set(round_trip["fetched"]) == {HONEST, BLANK, IMPOSTOR, BACKDATER}
    assert all(f == release for f in round_trip["fetched"].values())  # what a student fetches: the release
    # students may drop submissions into inbound but not list it (nor read one another's work)
    assert stat.S_IMODE((exchange / COURSE_ID / "inbound").stat().st_mode) & 0o007 == 0o003
    assert stat.S_IMODE(exchange.stat().st_mode) & 0o777 == 0o777


def test_submit_and_collect(round_trip):
    course, homes = round_trip["course"], round_trip["homes"]
    # named <student>+<assignment>+<timestamp>+<random> by nbgrader submit: two name alice, one of them mallory's
    names = sorted(name.split("+")[0] for name in round_trip["inbound"])
    assert names == sorted([HONEST, HONEST, BLANK, BACKDATER])
    for student, home in homes.items():
        submitted = course / "submitted" / student / SECTION
        for notebook in (home / SECTION).glob("*.ipynb"):
            assert (submitted / notebook.name).read_bytes() == notebook.read_bytes()
        assert (submitted / "timestamp.txt").is_file()  # what nbgrader matches the feedback with later
        assert round_trip["results"][student].status == "graded", round_trip["results"][student].error


def test_scores_in_the_gradebook(round_trip):
    scores = gradebook_scores(round_trip["course"], SECTION)
    assert set(scores) == {HONEST, BLANK, BACKDATER}  # mallory handed in nothing under her own name
    assert set(scores[HONEST]) == set(scores[BLANK]) == {EXERCISE}
    for exercise, s in scores[HONEST].items():
        got, total = s["auto"]
        assert got == total > 0, exercise
        assert scores[BLANK][exercise]["auto"] == (0, total), exercise


def test_students_fetch_their_own_feedback(round_trip):
    course, homes = round_trip["course"], round_trip["homes"]
    scores = gradebook_scores(course, SECTION)
    released = sorted((round_trip["exchange"] / COURSE_ID / "feedback").glob("*.html"))
    assert len(released) == 3  # one page per student and notebook: alice, bob and carol
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


def _journal(course) -> dict:
    return {v.folder: v for v in read_journal(course)}


def test_an_impostor_is_reported_and_the_victim_keeps_her_own_work(round_trip):
    course, homes = round_trip["course"], round_trip["homes"]
    seen = _journal(course)
    theirs = [v for v in seen.values() if v.owner == IMPOSTOR]
    assert len(theirs) == 1 and theirs[0].student == HONEST  # mallory's folder names alice ...
    assert theirs[0].verdict == IMPERSONATION and not theirs[0].collected  # ... and is not taken as hers
    own = [v for v in seen.values() if v.owner == HONEST]
    assert len(own) == 1 and own[0].verdict == OK and own[0].collected
    # what grading got for alice is what alice submitted, and it scores as hers: full marks
    for notebook in (homes[HONEST] / SECTION).glob("*.ipynb"):
        assert (course / "submitted" / HONEST / SECTION / notebook.name).read_bytes() == notebook.read_bytes()
    scores = gradebook_scores(course, SECTION)[HONEST]
    assert all(s["auto"][0] == s["auto"][1] > 0 for s in scores.values()), scores
    report = "\n".join(round_trip["lines"])
    assert f"以 {HONEST} 的名义提交" in report and f"属于账户 {IMPOSTOR}" in report, report


def _lateness(course, student) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    from autograder.ops.nbgrader_run import gradebook_url

    with Gradebook(gradebook_url(course)) as gb:
        sub = gb.find_submission(SECTION, student)
        return sub.total_seconds_late, sum(nb.late_submission_penalty or 0.0 for nb in sub.notebooks)


def test_a_backdated_submission_is_charged_its_real_lateness(round_trip):
    course = round_trip["course"]
    (forged,) = [v for v in _journal(course).values() if v.student == BACKDATER]
    assert forged.verdict == BACKDATED and forged.collected
    claim = round_trip["claim"].replace(tzinfo=None)
    assert abs(
        datetime.fromisoformat(forged.claimed) - claim.astimezone(timezone.utc).replace(tzinfo=None)
    ) < timedelta(seconds=1)
    # the time grading used is the files' change time (today), not the claim nor the set-back mtimes
    used = datetime.fromisoformat(forged.used)
    assert used == datetime.fromisoformat(forged.evidence)
    assert used - datetime.fromisoformat(forged.claimed) > timedelta(days=2)
    late, penalty = _lateness(course, BACKDATER)
    honest_late, honest_penalty = _lateness(course, HONEST)
    # carol handed in after alice, both two days past the due date: the same started days, the same penalty
    assert late > 2 * 86400 - 3600 and abs(late - honest_late) < 600, (late, honest_late)
    assert penalty == honest_penalty > 0
    stamp = (course / "submitted" / BACKDATER / SECTION / "timestamp.txt").read_text()
    assert stamp.startswith(used.strftime("%Y-%m-%d %H:%M:%S")) and stamp.endswith("UTC"), stamp
    report = "\n".join(round_trip["lines"])
    assert f"{BACKDATER}：声称提交于" in report and "按后者计算是否迟交" in report, report


def test_honest_timestamps_are_copied_unchanged(round_trip):
    course = round_trip["course"]
    for v in _journal(course).values():
        if v.collected and v.verdict == OK:
            inbound = round_trip["exchange"] / COURSE_ID / "inbound" / v.folder
            assert (course / "submitted" / v.student / SECTION / "timestamp.txt").read_bytes() == (
                inbound / "timestamp.txt"
            ).read_bytes()
