"""A class graded through a real Slurm cluster, as the instructors page says to do it.

A one-node cluster (munge, slurmctld, slurmd from Debian: :mod:`slurm_cluster`) runs the page's own
``SLURMCluster(...)`` configuration from dask-jobqueue, only with this venv's interpreter: two Slurm jobs,
each a single-threaded Dask worker. The driver runs what the page's command line ``python -m autograder
autograde SECTION --scheduler ADDRESS`` runs, in its own process.

* The driver is killed once the first result is in, then started again; at the same moment one of the two
  Slurm jobs is cancelled (``scancel``) while it grades. The rerun grades exactly what has no ledger entry,
  on the job that is left, and leaves what was graded before untouched.
* Every submission ends graded once, with the right scores.
* The sandbox holds inside a Slurm job: a submission that tries to read the hidden data, write to the
  gradebook, talk to munge or submit a Slurm job of its own is stopped and scores no more than a blank one.
* When the cluster is gone, no grading process or kernel is left on the node.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from process_tree import command_pids, tree, wait_until_ended
from slurm_cluster import documented_slurm_kwargs, slurm_cluster

from autograder.ops.classrun import read_ledger
from autograder.ops.nbgrader_run import gradebook_scores
from autograder.ops.selftest import hand_in, make_submission
from autograder.ops.submission_lock import being_graded

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE, CELL = "s04_1", "s04_1_ex1", "fd_grad_answer"
STUDENTS = ("blank", "escape", "reference", "reference-2")
#: the notebooks handed in: s04_1_ex2 (about 9 s to grade, the others 1-2 s) adds nothing a cluster needs, and
#: the section contract grades it
NOTEBOOKS = ["s04_1_ex1", "s04_1_ex3"]
JOB_MARKER = "s04-slurm-escaped"  # the file a job submitted from a grading kernel would create


def _escape_attempts(course: Path, slurm_conf: Path, munge_socket: Path) -> str:
    """A solution cell that tries the ways out of the sandbox a Slurm node adds, one printed line each."""
    targets = {
        "read-data": f"open({str(ROOT / 'autograder' / 'data' / (EXERCISE + '.json'))!r}).read()",
        "write-gradebook": f"open({str(course / 'gradebook.db')!r}, 'ab').write(b'x')",
        "munge-socket": f"socket.socket(socket.AF_UNIX).connect({str(munge_socket)!r})",
        "slurm-submit": (
            "subprocess.run(['sbatch', '--wrap', 'touch " + str(course / JOB_MARKER) + "'], check=True, "
            f"capture_output=True, timeout=20, env={{'SLURM_CONF': {str(slurm_conf)!r}, 'PATH': '/usr/bin:/bin'}})"
        ),
    }
    lines = [
        "import socket, subprocess",
        f"for label, attempt in {{{', '.join(f'{k!r}: lambda: {v}' for k, v in targets.items())}}}.items():",
        "    try:",
        "        attempt()",
        "        print('ESCAPED', label)",
        "    except Exception as exc:",
        "        print('BLOCKED', label, type(exc).__name__)",
        "def fd_grad(u, dt, eps=1e-6):",
        "    return u, 0",
    ]
    return "\n".join(lines) + "\n"


def _hand_in(course: Path, slurm_conf: Path, munge_socket: Path) -> None:
    hand_in(SECTION, course, wrong_answers=False, released=True, exercises=NOTEBOOKS)
    src, dst = course / "submitted" / "reference" / SECTION, course / "submitted" / "reference-2" / SECTION
    dst.mkdir(parents=True)
    for nb in src.iterdir():
        (dst / nb.name).write_bytes(nb.read_bytes())
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    folder = course / "submitted" / "escape" / SECTION
    folder.mkdir(parents=True)
    code = _escape_attempts(course, slurm_conf, munge_socket)
    nbformat.write(make_submission(release_nb, {CELL: code}), folder / f"{EXERCISE}.ipynb")


def _driver(course: Path, scheduler: str) -> subprocess.Popen:
    """What ``python -m autograder autograde SECTION --scheduler ADDRESS`` runs (that command grades the
    repository's own assignments/), on the test's course, as its own process and process group."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    code = (
        "import sys; from pathlib import Path\n"
        "from autograder.ops.classrun import grade_class, summary_lines\n"
        "results = grade_class(Path(sys.argv[1]), [sys.argv[2]], progress=False, scheduler=sys.argv[3])\n"
        "print('\\n'.join(summary_lines(Path(sys.argv[1]), results)))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(course), SECTION, scheduler],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _ledger(course: Path) -> dict[str, bytes]:
    folder = course / ".grading" / "ledger" / SECTION
    return {p.stem: p.read_bytes() for p in folder.glob("*.json")} if folder.is_dir() else {}


def _wait(condition, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def slurm():
    with slurm_cluster() as cluster:
        yield cluster


def test_a_class_graded_on_slurm_survives_a_killed_driver_and_a_cancelled_job(slurm, tmp_path, released_course):
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    course = released_course(SECTION, tmp_path / "course")
    munge_socket = slurm.folder / "munge.socket"
    _hand_in(course, slurm.conf, munge_socket)

    kwargs = {**documented_slurm_kwargs(), "python": sys.executable, "log_directory": str(tmp_path / "jobs")}
    with SLURMCluster(**kwargs) as cluster:
        cluster.scale(jobs=2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=300)
        jobs = sorted(slurm.jobs())
        assert len(jobs) == 2 and set(slurm.jobs().values()) == {"RUNNING"}, (slurm.jobs(), slurm.log())

        first = _driver(course, cluster.scheduler_address)
        try:
            _wait(lambda: _ledger(course) or first.poll() is not None, "the first result")
            os.killpg(first.pid, signal.SIGKILL)  # the driver and what it started; the Slurm jobs go on
            first.wait(30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
        done_before = _ledger(course)
        assert 1 <= len(done_before) < len(STUDENTS), (sorted(done_before), first.stdout.read())

        rerun = _driver(course, cluster.scheduler_address)
        # one job dies while the rerun runs: cancelled as it grades a submission of the dead driver or of the rerun
        _wait(
            lambda: rerun.poll() is not None
            or any(being_graded(course, SECTION, s) for s in STUDENTS if s not in _ledger(course)),
            "a submission being graded",
        )
        started = tree(command_pids(cluster.scheduler_address))  # both jobs' workers and what they started
        slurm.cancel(jobs[0])
        output, _ = rerun.communicate(timeout=900)
        assert rerun.returncode == 0, output[-3000:]
        assert jobs[0] not in slurm.jobs() and slurm.jobs().get(jobs[1]) == "RUNNING", (slurm.jobs(), output[-2000:])
        started += tree(command_pids(cluster.scheduler_address))
        assert len(started) >= 3, started  # a Dask worker, its grading worker, the zygote at least

    after = _ledger(course)
    assert sorted(after) == sorted(STUDENTS), output[-3000:]
    for student, entry in done_before.items():  # graded before the driver died: not graded again
        assert after[student] == entry, student
    for student in STUDENTS:
        entry = read_ledger(course, SECTION, student)
        assert entry["status"] == "graded", (student, entry)
        assert not being_graded(course, SECTION, student)
        graded = sorted(p.name for p in (course / "autograded" / student / SECTION).glob("*.ipynb"))
        submitted = sorted(p.name for p in (course / "submitted" / student / SECTION).glob("*.ipynb"))
        assert graded == submitted, student  # every notebook graded, in one piece

    scores = gradebook_scores(course, SECTION)
    for student in ("reference", "reference-2"):  # full automatic marks (s04_1_ex3 has written answers only)
        assert all(scores[student][e]["auto"][0] == scores[student][e]["auto"][1] for e in NOTEBOOKS), scores[student]
        assert sum(scores[student][e]["auto"][0] for e in NOTEBOOKS) > 0
    assert all(v["auto"][0] == 0 for v in scores["blank"].values())
    assert scores["escape"][EXERCISE]["auto"][0] <= scores["blank"][EXERCISE]["auto"][0]

    nb = nbformat.read(course / "autograded" / "escape" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.output_type == "stream")
    assert "ESCAPED" not in text, text[-2000:]
    for label in ("read-data", "write-gradebook", "munge-socket", "slurm-submit"):
        assert f"BLOCKED {label}" in text, text[-2000:]
    assert not (course / JOB_MARKER).exists()

    # the cluster is closed: its jobs ended, and with them every grading process and kernel they started
    _wait(lambda: not slurm.jobs(), "the Slurm jobs to end", timeout=120)
    wait_until_ended(started, "the grading processes of the Slurm jobs")
