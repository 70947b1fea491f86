"""The class run on a real Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on localhost.

The same jobs as the local class run (:func:`autograder.ops.classrun.grade_class` with ``scheduler=``),
each in a long-lived grading worker on a Dask worker.

* One Dask worker is SIGKILLed once the first result is in: Dask gives its job to the other worker, and
  the run still ends with every submission graded exactly once, the ledger written by the driver alone,
  and no grading process left behind.
* The driver is SIGKILLed once the first result is in, and started again at once, while a Dask worker
  still grades the job the dead driver handed out (Dask cannot stop a running task): the rerun grades
  exactly what has no ledger entry, waits for the orphaned grading of the same submission
  (:mod:`autograder.ops.submission_lock`) instead of mixing with it, and every score is right.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from process_tree import tree, wait_until_ended

from autograder.ops.classrun import grade_class, read_ledger
from autograder.ops.nbgrader_run import gradebook_scores
from autograder.ops.selftest import hand_in
from autograder.ops.submission_lock import being_graded

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SECTION = "s04_6"  # among the cheapest sections to grade
#: the notebooks each student hands in: each has automatic points and grades in 1-2 s (s04_6_ex4 takes about
#: 7 s and adds nothing a killed worker or driver needs; the section contract grades it)
NOTEBOOKS = ["s04_6_ex1", "s04_6_ex2", "s04_6_ex3"]


def _spawn(args, log: Path):
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    with open(log, "ab") as out:
        return subprocess.Popen([str(bin_dir / "dask"), *args], stdout=out, stderr=out, env=env, start_new_session=True)


@pytest.fixture
def cluster(tmp_path):
    """``(scheduler file, [worker processes])``: a real scheduler and two single-threaded workers, no nanny."""
    scheduler_file = tmp_path / "scheduler.json"
    procs = [
        _spawn(
            [
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            tmp_path / "scheduler.log",
        )
    ]
    deadline = time.monotonic() + 60
    while not scheduler_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert scheduler_file.exists(), (tmp_path / "scheduler.log").read_text()[-3000:]
    workers = [
        _spawn(
            ["worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1", "--no-nanny", "--no-dashboard"],
            tmp_path / f"worker{i}.log",
        )
        for i in range(2)
    ]
    procs += workers
    from distributed import Client

    with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
        client.wait_for_workers(2, timeout=120)
    yield scheduler_file, workers
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _four_students(course: Path) -> None:
    """reference, blank and a copy of each: four jobs for two workers, so that one runs when something dies."""
    hand_in(SECTION, course, wrong_answers=False, released=True, exercises=NOTEBOOKS)
    for copy in ("reference-2", "blank-2"):
        src = course / "submitted" / copy.split("-")[0] / SECTION
        dst = course / "submitted" / copy / SECTION
        dst.mkdir(parents=True)
        for nb in src.iterdir():
            (dst / nb.name).write_bytes(nb.read_bytes())


def _assert_graded_right(course: Path) -> None:
    scores = gradebook_scores(course, SECTION)
    assert sorted(scores) == ["blank", "blank-2", "reference", "reference-2"]
    for student in ("reference", "reference-2"):
        for exercise in NOTEBOOKS:
            assert scores[student][exercise]["auto"][0] == scores[student][exercise]["auto"][1] > 0, (student, exercise)
    for student in ("blank", "blank-2"):
        assert all(v["auto"][0] == 0 for v in scores[student].values())
    for student in scores:
        entry = read_ledger(course, SECTION, student)
        assert entry["status"] == "graded" and {"queue", "kernel", "execute", "nbgrader"} <= set(entry["phases"])


def _first_ledger_entry(course: Path, timeout: float = 600) -> None:
    """Wait until the driver has recorded its first result."""
    ledger = course / ".grading" / "ledger" / SECTION
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ledger.is_dir() and any(ledger.glob("*.json")):
            return
        time.sleep(0.2)
    raise AssertionError("no result ever arrived")


def test_a_class_graded_on_dask_survives_a_killed_worker(cluster, tmp_path, released_course):
    scheduler_file, workers = cluster
    course = released_course(SECTION, tmp_path / "course")
    _four_students(course)

    killed = []

    def kill_one_worker_after_the_first_result():
        _first_ledger_entry(course)
        killed.extend(tree([workers[0].pid]))  # the worker and its grading process, zygote and kernel
        os.kill(workers[0].pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_one_worker_after_the_first_result, daemon=True)
    killer.start()
    results = grade_class(course, [SECTION], workers=2, progress=False, scheduler=str(scheduler_file))
    killer.join(5)
    assert killed, "no result ever arrived"

    assert {r.student: r.status for r in results} == dict.fromkeys(
        ["blank", "blank-2", "reference", "reference-2"], "graded"
    )
    _assert_graded_right(course)
    # the killed worker's grading process followed it (PR_SET_PDEATHSIG), and so did the kernel it was running
    # (ipykernel polls its parent); the other worker's grading process stays warm for the next run
    assert len(killed) >= 2, killed  # the Dask worker and at least its grading process
    wait_until_ended(killed, "what the killed Dask worker had started", timeout=30)


def test_a_killed_driver_rerun_grades_exactly_what_is_missing(cluster, tmp_path, released_course):
    scheduler_file, _ = cluster
    course = released_course(SECTION, tmp_path / "course")
    _four_students(course)
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from autograder.ops.classrun import grade_class\n"
            "grade_class(Path(sys.argv[1]), [sys.argv[2]], workers=2, progress=False, scheduler=sys.argv[3])\n",
            str(course),
            SECTION,
            str(scheduler_file),
        ],
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        _first_ledger_entry(course)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and anything it started; the Dask workers go on
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    done_before = sorted(p.stem for p in (course / ".grading" / "ledger" / SECTION).glob("*.json"))
    assert 1 <= len(done_before) < 4, done_before
    # a Dask worker still grades a job of the dead driver: the rerun hands that submission out again
    orphans = [s for s in ("blank", "blank-2", "reference", "reference-2") if being_graded(course, SECTION, s)]
    assert orphans and not set(orphans) & set(done_before), orphans
    results = grade_class(course, [SECTION], workers=2, progress=False, scheduler=str(scheduler_file))

    status = {r.student: r.status for r in results}
    assert {s for s, v in status.items() if v == "skipped"} == set(done_before)
    assert {s for s, v in status.items() if v == "graded"} == {"blank", "blank-2", "reference", "reference-2"} - set(
        done_before
    )
    _assert_graded_right(course)
    # every notebook of every student graded once, in one piece: nbgrader's autograded copy is complete
    for student in status:
        graded = sorted(p.name for p in (course / "autograded" / student / SECTION).glob("*.ipynb"))
        submitted = sorted(p.name for p in (course / "submitted" / student / SECTION).glob("*.ipynb"))
        assert graded == submitted, student
        assert not being_graded(course, SECTION, student)
