"""A grading worker that stays alive: nbgrader is imported once, each job runs ``nbgrader autograde`` in-process.

A fresh ``nbgrader`` process per submission spends about 5 s of CPU importing nbgrader, nbconvert and
their dependencies before the first kernel starts. A :class:`GradingWorker` is one long-lived process
(``python -m autograder.ops.worker``: a new interpreter, nothing of the parent's memory) that runs nbgrader's own
``AutogradeApp`` for each job it is sent, with exactly the arguments of ``nbgrader autograde <section>
--student=<id> --force``, so the course's config, the confined kernel (:class:`~autograder.confine.execute.SafeExecute`),
the verdict and the gradebook are the same as for any other entry point.

Why isolation is as strong as one process per submission: the student's code never runs in the worker.
Each notebook still gets a fresh kernel, confined before its first byte (own user as root, no network,
Landlock, limits), ended with every process it started (forked from the untouched kernel
zygote, :mod:`autograder.confine.zygote`, which never runs student code); the worker only holds trusted code (nbgrader
and the verdict), which reads what the kernel returned through the strict protocol decoder. The kernels a
worker starts inherit none of its pipes: the job protocol runs over a ``multiprocessing`` pipe, which
kernels never see (``close_fds``), and the worker's own stdout and stderr go to its log file, so nothing a
kernel prints can forge a job result. Per-submission state of the worker (the time budget already spent,
the phase timers) is reset for every job.

Start-up: importing nbgrader and the course's verdict costs a worker about 2.5 CPU s. A class run with
several workers in one process pays it once: its workers are forked from one :class:`WorkerZygote` (a
fresh interpreter, ``python -m autograder.ops.worker --zygote``, which imports :data:`WORKER_PRELOAD` and
then only forks, with the kernel zygote's fork loop, :func:`autograder.confine.fork_server.serve`), and a worker that
replaces one killed past its limit starts in milliseconds. The worker zygote also starts the run's one kernel
zygote (JAX and ``course_lib`` imported once per run, not per worker); each worker it forks gets a connection
of its own to it. A Dask worker process grades with one worker, which starts as its own interpreter and zygote.

Time limits: a job that runs past ``Limits.submission_timeout_s`` is ended by killing the worker and every
process below it (and, as root, every process of the kernel users found there); the next job gets a new
worker. A worker dies with its parent (``PR_SET_PDEATHSIG``): the thread that started it, or the worker zygote, which
ends with the class run (its socket closes when the run's process ends); so a killed class run leaves no
worker grading behind a rerun's back.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import io
import json
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

from autograder.confine import fork_server, isolation, reaper, zygote
from autograder.confine.zygote_registry import KERNEL_ZYGOTES
from autograder.confine.limits import Limits, require_sandbox

_PR_SET_PDEATHSIG = 1
#: what the worker zygote imports once for all the workers forked from it: a job's imports and the course config's
WORKER_PRELOAD = (
    "nbgrader.apps.autogradeapp",
    "autograder.confine.execute",
    "autograder.verdict.pipeline",
    "autograder.verdict.lateness",
    "autograder.ops.term",
    "autograder.ops.collect",
    "autograder.ops.nbgrader_patches",
    "autograder.ops.exchange_collect",
    "autograder.course.configure",
)


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


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def serve(conn, course_dir: str) -> None:
    """The worker process: answer each ``(section, student, extra_args)`` on ``conn`` with an :class:`Outcome`."""
    _die_with_parent()
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


def _forked_worker(
    worker_zygote: int, kernels, conns: list[socket.socket], started: int, request: dict, fds: list[int]
) -> None:
    """In a child of the worker zygote (pid ``worker_zygote``): become a worker as :meth:`GradingWorker._start` launches
    one, its kernels forked from the run's zygote ``kernels`` (if any). Never returns."""
    fork_server.exit_child(lambda: _become_worker(worker_zygote, kernels, conns, started, request, fds))


def _become_worker(worker_zygote: int, kernels, conns: list[socket.socket], started: int, request: dict, fds) -> None:
    _die_with_parent()  # before the grader learns our pid: it may end the worker zygote at once
    if os.getppid() != worker_zygote:
        raise SystemExit(1)
    os.setsid()  # a session of its own, as ``start_new_session`` gives a launched worker
    os.write(started, b"1")
    os.close(started)
    fork_server.detach_all(conns)
    if kernels is not None:
        KERNEL_ZYGOTES.adopt(kernels.handed_over())
    job, log = fds
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (log, 1), (log, 2)):
        os.dup2(fd, target)
    os.close(null)
    os.close(log)
    serve(Connection(job), request["course"])
    KERNEL_ZYGOTES.close()  # what atexit does for a launched worker: wait for its kernel zygote


def _run_zygote(course: str, extra_args: list[str]):
    """The kernel zygote every worker of the run shares, for the run's settings; None where kernels are
    launched, or it did not start (each worker then starts its own, as a launched worker does)."""
    from autograder.confine.execute import kernel_settings
    from autograder.course.course import Course

    try:
        fork, cache = kernel_settings(Course.load(course).config, extra_args)
        return zygote.Zygote(cache) if fork and fork_server.available() else None
    except Exception:  # noqa: BLE001 - the workers start zygotes of their own (and log why, if it fails again)
        logging.getLogger("autograder.worker").exception("no shared kernel zygote")
        return None


def worker_zygote_main(fd: int, course: str, extra_args: list[str]) -> None:
    """``python -m autograder.ops.worker --zygote FD COURSE [ARG ...]``: import :data:`WORKER_PRELOAD`, start
    the run's kernel zygote for the nbgrader arguments ARG, then fork workers on FD until it closes."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the instructor's terminal ends the run, which ends us
    for name in WORKER_PRELOAD:
        importlib.import_module(name)
    kernels = _run_zygote(course, extra_args)
    try:
        fork_server.serve(
            socket.socket(fileno=fd),
            child=functools.partial(_forked_worker, os.getpid(), kernels),
            max_fds=2,
            orphaned=lambda pid, request: reaper.kill_tree(pid),  # with its zygote connection: its kernels end too
        )
    finally:
        if kernels is not None:
            kernels.close()


class WorkerZygote:
    """What every grading worker of one class run shares: a process that imported what a worker needs and
    forks workers on request, and the one kernel zygote they all fork their kernels from.

    ``course``, ``extra_args``: the run's course folder and nbgrader arguments (which say whether kernels are
    forked, and from which compilation cache). Started by :meth:`start`, from the thread that owns the run (it
    dies with that thread, ``PR_SET_PDEATHSIG``); ends when :meth:`close` closes its socket, or when the run's
    process dies; the workers forked from it die with it. Its output, and
    its zygote's, goes to a log of its own beside the workers' logs."""

    def __init__(self, course: Path, extra_args=()):
        self.course, self.extra_args = Path(course).resolve(), tuple(extra_args)
        self._lock = threading.Lock()
        self._conn = self.process = None
        self._failed = ""  # why the worker zygote failed once: its workers are launched from then on

    def _start(self) -> None:
        """Start the worker zygote (on the first :meth:`fork`: a run whose jobs never need a worker starts none)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host = socket.gethostname()
        log_path = self.course / ".grading" / "logs" / "workers" / f"{host}-{os.getpid()}-zygote.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            args = ["--zygote", str(theirs.fileno()), str(self.course), *self.extra_args]
            self.process = _launch(args, theirs.fileno(), log_path, self.course)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._conn = ours

    def start(self) -> None:
        """Start the worker zygote, as a child of the calling thread: call it from the thread that owns the
        run, which outlives every worker thread. A worker zygote that cannot start is recorded as failed (its workers
        are then launched)."""
        with self._lock:
            if self.process is not None or self._failed:
                return
            try:
                self._start()
            except OSError as exc:
                self._failed = f"the grading worker zygote did not start: {type(exc).__name__}: {exc}"

    def fork(self, log_path: Path) -> tuple[fork_server.ForkedProcess, Connection]:
        """A new worker for the run's course, writing to ``log_path``, and the job connection to it. Raises
        ``RuntimeError`` when the worker zygote was not started or failed (then, and from then on, without waiting
        again)."""
        ours, theirs = socket.socketpair()
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            with self._lock:  # the first request also waits for the worker zygote's imports
                if self._failed or self.process is None:
                    raise RuntimeError(self._failed or "the grading worker zygote was not started")
                try:
                    message = json.dumps({"course": str(self.course)}).encode()
                    socket.send_fds(self._conn, [message], [theirs.fileno(), log])
                    reply, fds = fork_server.receive(self._conn, zygote.READY_TIMEOUT_S, "the grading worker zygote")
                except OSError as exc:
                    self._failed = f"the grading worker zygote failed: {type(exc).__name__}: {exc}"
                    raise RuntimeError(self._failed) from exc
        finally:
            theirs.close()
            os.close(log)
        if "pid" not in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            ours.close()
            raise RuntimeError(f"the grading worker zygote did not fork: {reply}")
        return fork_server.ForkedProcess(reply["pid"], fds[0]), Connection(ours.detach())

    def close(self) -> None:
        if self.process is None:
            return
        self._conn.close()  # the worker zygote sees the end of its socket and exits
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _launch(args: list[str], fd: int, log_path: Path, cwd: Path) -> subprocess.Popen:
    """``python -m autograder.ops.worker ARGS`` (a worker, or the worker zygote) with ``fd`` passed, its output to
    ``log_path``, in a session of its own."""
    bin_dir = str(Path(sys.executable).parent)  # nbgrader calls alembic by name
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "autograder.ops.worker", *args],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )


class GradingWorker:
    """One long-lived grading process; :meth:`grade` runs a job in it, within a wall-clock limit.

    With a ``worker_zygote`` (:class:`WorkerZygote`) the process is forked from it; without one, it starts as
    its own interpreter."""

    def __init__(self, course_dir: Path, limits: Limits, worker_zygote: WorkerZygote | None = None):
        self.course, self.limits, self.worker_zygote = Path(course_dir).resolve(), limits, worker_zygote
        # one log per worker: the machine, process and thread that own it (Dask workers share the course folder)
        name = f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}.log"
        self.log_path = self.course / ".grading" / "logs" / "workers" / name
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._process = None
        self._conn = None
        self._stop_sent = False

    def _start(self) -> None:
        self._stop_sent = False
        if self.worker_zygote is not None:
            try:
                self._process, self._conn = self.worker_zygote.fork(self.log_path)
                return
            except RuntimeError as exc:  # a dead or hung worker zygote: this worker starts on its own
                logging.getLogger("autograder.worker").warning("worker zygote failed (%s); launching a worker", exc)
        ours, theirs = socket.socketpair()
        # the worker's own output, and anything a kernel writes to it, go to its log
        self._process = _launch([str(self.course), str(theirs.fileno())], theirs.fileno(), self.log_path, self.course)
        theirs.close()
        self._conn = Connection(ours.detach())

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
    from autograder.ops import worker as _worker

    if sys.argv[1] == "--zygote":
        _worker.worker_zygote_main(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        _worker.serve(Connection(int(sys.argv[2])), sys.argv[1])
