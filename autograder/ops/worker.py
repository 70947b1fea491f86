"""A grading worker that stays alive: nbgrader is imported once, each job runs ``nbgrader autograde`` in-process.

A fresh ``nbgrader`` process per submission spends about 5 s of CPU importing nbgrader, nbconvert and
their dependencies before the first kernel starts. A :class:`GradingWorker` is one long-lived process
(``python -m autograder.ops.worker``: a new interpreter, nothing of the parent's memory) that runs nbgrader's own
``AutogradeApp`` for each job it is sent, with exactly the arguments of ``nbgrader autograde <section>
--student=<id> --force``, so the course's config, the confined kernel (:class:`~autograder.confine.execute.SafeExecute`),
the verdict and the gradebook are the same as for any other entry point.

Why isolation is as strong as one process per submission: the student's code never runs in the worker.
Each notebook still gets a fresh kernel, confined before its first byte (own user as root, no network,
Landlock, limits), ended with every process it started (forked from the worker's untouched template
process, :mod:`autograder.confine.zygote`, which never runs student code); the worker only holds trusted code (nbgrader
and the verdict), which reads what the kernel returned through the strict protocol decoder. The kernels a
worker starts inherit none of its pipes: the job protocol runs over a ``multiprocessing`` pipe, which
kernels never see (``close_fds``), and the worker's own stdout and stderr go to its log file, so nothing a
kernel prints can forge a job result. Per-submission state of the worker (the time budget already spent,
the phase timers) is reset for every job.

Time limits: a job that runs past ``Limits.submission_timeout_s`` is ended by killing the worker and every
process below it (and, as root, every process of the kernel users found there); the next job gets a new
worker. A worker dies with the thread that started it (``PR_SET_PDEATHSIG``), so a killed class run leaves
no worker grading behind a rerun's back.
"""

from __future__ import annotations

import ctypes
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from autograder.confine import isolation, reaper
from autograder.confine.limits import Limits, require_sandbox

_PR_SET_PDEATHSIG = 1


@dataclass
class Outcome:
    """What one job in a worker gave: nbgrader's exit code and log, and seconds by phase."""

    code: int
    log: str
    phases: dict = field(default_factory=dict)


def _autograde(section: str, student: str, extra_args) -> Outcome:
    """``nbgrader autograde <section> --student=<student> --force <extra_args>``, in this process."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    from autograder.confine import execute

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("[%(name)s | %(levelname)s] %(message)s"))
    path = list(sys.path)
    start = time.perf_counter()
    app = AutogradeApp()
    app.log.addHandler(handler)
    with execute.recording_phases() as recorded:  # budgets belong to the run itself (execute.grading_run)
        try:
            app.initialize([section, f"--student={student}", "--force", *extra_args])
            app.start()
            code = 0
        except SystemExit as exc:  # nbgrader's fail() and a failed conversion exit
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # noqa: BLE001 - a bug in a preprocessor fails this job, not the worker
            logging.getLogger("autograder.worker").exception("autograde raised")
            buffer.write(f"ERROR autograde raised {type(exc).__name__}: {exc}\n")
            code = 1
        finally:
            app.log.removeHandler(handler)
            app.reset()
            sys.path[:] = path  # nbgrader puts the working folder first on sys.path each time
    total = time.perf_counter() - start
    phases = {name: round(seconds, 3) for name, seconds in recorded.items()}
    phases["nbgrader"] = round(max(0.0, total - sum(phases.values())), 3)  # verdict, conversion, gradebook
    return Outcome(code, buffer.getvalue(), phases)


def serve(conn, course_dir: str) -> None:
    """The worker process: answer each ``(section, student, extra_args)`` on ``conn`` with an :class:`Outcome`."""
    try:
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    os.chdir(course_dir)
    require_sandbox()  # fail fast, before nbgrader starts a kernel
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(_autograde(*job))


class GradingWorker:
    """One long-lived grading process; :meth:`grade` runs a job in it, within a wall-clock limit."""

    def __init__(self, course_dir: Path, limits: Limits):
        self.course, self.limits = Path(course_dir).resolve(), limits
        # one log per worker: the machine, process and thread that own it (Dask workers share the course folder)
        name = f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}.log"
        self.log_path = self.course / ".grading" / "logs" / "workers" / name
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._process = None
        self._conn = None
        self._stop_sent = False

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        bin_dir = str(Path(sys.executable).parent)  # nbgrader calls alembic by name
        env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
        with open(self.log_path, "ab") as log:  # the worker's own output, and anything a kernel writes to it
            self._process = subprocess.Popen(
                [sys.executable, "-m", "autograder.ops.worker", str(self.course), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.course,
                env=env,
                start_new_session=True,
            )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._stop_sent = False

    def grade(self, section: str, student: str, extra_args=()) -> Outcome | None:
        """The job's outcome, or ``None`` when it ran past the limit (the worker and all below it are then ended)."""
        if self._process is None or self._process.poll() is not None:
            self._start()
        self._conn.send((section, student, tuple(extra_args)))
        if self._conn.poll(self.limits.submission_timeout_s):
            try:
                return self._conn.recv()
            except (EOFError, OSError):  # the worker died (it never should: say so like a crash)
                self.kill()
                return Outcome(1, "ERROR the grading worker process died")
        self.kill()
        return None

    def kill(self) -> None:
        """End the worker, every process below it, and (as root) everything of the kernel users among them."""
        if self._process is None:
            return
        if self._process.poll() is None:  # once reaped, its pid may be another process's
            # the tree is read before the kill (its children are re-parented after); a kernel's own user
            # also names what left the tree (setsid and a double fork)
            tree = reaper.kill_tree(self._process.pid)
            kernel_users = {u for p in tree.killed for u in p.uids if isolation.UID_RANGE[0] <= u}
            for uid in sorted(kernel_users):
                reaper.kill_user(uid)
        self._process.wait(10)
        self._conn.close()
        self._process = self._conn = None

    def request_stop(self) -> None:
        """Ask the worker to exit once idle, without waiting: :meth:`stop` then waits. A worker's clean exit
        waits for its zygote to end (about a second), so a pool asks all its workers first."""
        if self._process is not None and not self._stop_sent:
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._stop_sent = True

    def stop(self) -> None:
        """Let the worker finish (no job running) and exit; kill it if it does not."""
        if self._process is None:
            return
        self.request_stop()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.kill()  # nothing left of it, or of a kernel it failed to end


if __name__ == "__main__":  # run as a module: import it by name, so that what it sends unpickles as ours
    from autograder.ops.worker import serve as _serve

    _serve(Connection(int(sys.argv[2])), sys.argv[1])
