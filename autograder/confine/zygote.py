"""Grading kernels forked from a warm template process (a "zygote") instead of each starting from nothing.

Every grading kernel used to start a fresh interpreter, import ipykernel, and then, in the notebook's
setup cell, import JAX, numpy, matplotlib and ``course_lib``: one to two CPU seconds per notebook, the same
for every student. A zygote does that work once per grading process: ``python -m autograder.confine.zygote``
imports :data:`PRELOAD` and then only waits. For each kernel the trusted side sends it the launcher's
arguments; it forks, and the child runs exactly the launcher's steps (:func:`autograder.confine.launcher.main`:
limits, namespaces, its own user, the allow-listed environment, Landlock) before ipykernel starts. The
setup cell's imports then find their modules already loaded.

Why a forked kernel is confined as tightly as one started from nothing (the instructors page says it too):

* the zygote never runs student code and never receives a student byte. A request carries only the
  launcher's arguments (scratch folder, user id, exercise name, limits), and the zygote's environment is a
  grading kernel's allow-list, so it holds no password or token;
* it holds only code every kernel may read anyway: after the imports it checks that each loaded module's
  file lies in what Landlock lets every kernel read (no exercise's support module, no reference data)
  or is the confine code that a launched kernel also runs, and refuses to serve otherwise;
* each kernel is a fork of that untouched state. What a student changes (a patched ``course_lib``
  function, a global, a module attribute) lives in that kernel's copy-on-write memory and dies with it;
  the next kernel is forked from the same clean template;
* the child closes every inherited descriptor but 0-2 before anything else runs (it cannot ask the zygote
  for more), and the zygote is not dumpable: a kernel can neither trace it nor read its memory, and as
  root a kernel has a user of its own that cannot signal it;
* the zygote sends the grader a pidfd of each kernel (``SCM_RIGHTS``), so the grader waits for and kills
  exactly that process; a kernel dies with the zygote (``PR_SET_PDEATHSIG``), and the zygote ends when the
  grading process that started it closes its socket, or dies;
* a class run's workers share one zygote (started by their template, :mod:`autograder.ops.worker`), each
  through a connection of its own. The zygote then ends when the last connection closes, and a kernel whose
  grading process died (a worker killed past its time limit) is ended with everything below it and its
  user's processes, as that worker's own zygote would have been ended with it.

Linux only (pidfds, ``SOCK_SEQPACKET``). Where it is unavailable, or the zygote does not start, kernels
are started the old way, each by its own interpreter, and the reason is logged.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.confine import landlock, launcher, reaper

#: modules every grading kernel may read (venv, course_lib, the capture side of autograder), loaded once
PRELOAD = (
    "numpy",
    "jax",
    "jax.numpy",
    "jax.scipy.linalg",
    "optax",
    "matplotlib",
    "matplotlib.pyplot",
    "course_lib",
    "course_check",
    "autograder",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    # what IPKernelApp.initialize imports: 0.07 CPU s of every kernel's start (not debugpy: it sets an
    # environment variable when imported, which the kernel's clean environment would then lack)
    "psutil",
    "IPython.core.history",
)
#: the command a launched kernel starts with; a forked kernel gets the arguments after it
LAUNCHER_PREFIX = ("-m", "autograder.confine.launcher")
READY_TIMEOUT_S = 180.0  # the imports take 2-4 s on an idle machine, far longer on a loaded one
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
_libc = ctypes.CDLL(None, use_errno=True)


def code_fingerprint() -> tuple:
    """Paths and modification times of the course's own code a kernel reads (``landlock.KERNEL_READABLE``).

    When any of it changes on disk (an instructor edits course_lib while formgrader runs), the next kernel
    gets a new zygote, as a launched kernel would import the new code.
    """
    files = []
    for name in landlock.KERNEL_READABLE:
        path = landlock.ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_mtime_ns) for f in files if f.is_file())


def available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


# ----------------------------------------------------------------------------------------------- zygote side


def foreign_modules() -> list[str]:
    """Loaded modules whose file a grading kernel could not read itself (should be none)."""
    allowed = [p.resolve() for p in landlock.readable_paths()] + [landlock.ROOT / "autograder" / "confine"]
    foreign = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        resolved = Path(path).resolve()
        if not any(resolved.is_relative_to(a) for a in allowed):
            foreign.append(f"{name} ({resolved})")
    return sorted(foreign)


def _reap() -> list[int]:
    """Collect every child that has ended; their pids."""
    ended = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append(pid)


def detach_all(conns: list[socket.socket]) -> None:
    """In a forked child: close the server's connections, detached, so that no stale Python object closes a
    reused descriptor number later."""
    for conn in conns:
        os.close(conn.detach())


def exit_child(body) -> None:
    """In a child forked by a fork server (:func:`serve`): run ``body()``, then end the process, never returning
    into the server's loop. Exit code 0 when it returns, a ``SystemExit``'s code, 1 after any other exception
    (its traceback on stderr)."""
    code = 1
    try:
        body()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - a child must never return into the server's loop
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _become_kernel(conns: list[socket.socket], started: int, argv: list[str]) -> None:
    os.setsid()  # its own process group and session, as a launched kernel has
    os.write(started, b"1")
    detach_all(conns)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # `started` included: nothing leads back to the zygote
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # as a fresh process (changing user clears it again)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in any new interpreter (the zygote ignores it)
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # the zygote's legacy numpy stream would otherwise repeat in every kernel
        numpy.random.seed()
    tempfile.tempdir = None  # TMPDIR is the kernel's own scratch folder, not the zygote's
    zygote = os.getppid()

    def die_with_zygote() -> None:  # after the user change, which clears PDEATHSIG
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != zygote:
            os._exit(1)

    launcher.main(argv, before_kernel=die_with_zygote)


def serve(conn: socket.socket, child=None, max_fds: int = 1, orphaned=None) -> None:
    """Answer fork requests on ``conn``, and on every connection added through it, until all are closed.

    A request is a JSON message (with up to ``max_fds`` descriptors); the forked child runs
    ``child(conns, started, request, fds)``, which never returns and first writes a byte to ``started``; the
    requester gets the child's pid and a pidfd of it. ``{"connect": true}`` with one descriptor (a socket)
    adds a connection instead: another grading process of the same class run (:meth:`Zygote.connect`). When
    a connection closes while children it asked for still run (its grading process was killed past its time
    limit), ``orphaned(pid, request)`` ends each. The defaults are a confined kernel and
    :func:`_end_kernel`; the class run's worker template (:mod:`autograder.ops.worker`) forks grading workers
    with the same loop.
    """
    child, orphaned = child or _kernel_child, orphaned or _end_kernel
    running: dict[socket.socket, dict[int, dict]] = {conn: {}}  # connection -> {pid: request} of its children
    while running:
        ended = _reap()
        for children in running.values():
            for pid in ended:
                children.pop(pid, None)
        for ready in select.select(list(running), [], [], 0.5)[0]:
            message, fds, _, _ = socket.recv_fds(ready, 1 << 16, max_fds)
            if not message:  # that grading process closed its end, or died
                for pid, request in running.pop(ready).items():
                    orphaned(pid, request)
                ready.close()
                continue
            request = json.loads(message)
            if request.get("connect") and len(fds) == 1:
                running[socket.socket(fileno=fds[0])] = {}
                continue
            started_r, started_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(started_r)
                child(list(running), started_w, request, fds)
            running[ready][pid] = request
            os.close(started_w)
            for fd in fds:
                os.close(fd)
            os.read(started_r, 1)  # the child is in its own process group before the grader learns its pid
            os.close(started_r)
            pidfd = os.pidfd_open(pid)
            try:
                socket.send_fds(ready, [json.dumps({"pid": pid}).encode()], [pidfd])
            finally:
                os.close(pidfd)


def _kernel_child(conns: list[socket.socket], started: int, request: dict, fds: list[int]) -> None:
    """In the forked child: drop everything of the zygote, then become a confined kernel. Never returns."""
    exit_child(lambda: _become_kernel(conns, started, request["argv"]))


def _end_kernel(pid: int, request: dict) -> None:
    """A kernel whose grading process is gone: end it, everything below it and, as root, every process of its
    own user (what :meth:`autograder.ops.worker.GradingWorker.kill` does for the processes it can see)."""
    reaper.kill_tree(pid)
    argv = request.get("argv", [])
    if os.geteuid() == 0 and "--uid" in argv[:-1]:
        reaper.kill_user(int(argv[argv.index("--uid") + 1]))


def main(argv=None) -> None:
    """``python -m autograder.confine.zygote FD [MODULE ...]``: preload :data:`PRELOAD` and MODULEs, then serve FD."""
    fd, *extra = sys.argv[1:] if argv is None else argv
    fd = int(fd)
    conn = socket.socket(fileno=fd)
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/<pid>/mem, even for the same user
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the instructor's terminal ends the grader, which ends us
    # ipykernel's parent poller reads JPY_PARENT_PID when it is imported: the kernel's parent is this process
    os.environ["JPY_PARENT_PID"] = str(os.getpid())
    try:
        for name in (*PRELOAD, *extra):
            importlib.import_module(name)
        foreign = foreign_modules()
        if foreign:
            raise RuntimeError(f"the zygote would hold modules a kernel may not read: {foreign[:5]}")
    except BaseException as exc:  # noqa: BLE001 - reported to the grader, which then launches kernels itself
        conn.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        return
    conn.send(json.dumps({"ready": os.getpid()}).encode())
    serve(conn)


# ----------------------------------------------------------------------------------------------- grader side


def receive(conn: socket.socket, timeout: float, what: str = "the kernel zygote") -> tuple[dict, list[int]]:
    """One reply of a fork server (:func:`serve`): the JSON message and the descriptors that came with it."""
    if not select.select([conn], [], [], timeout)[0]:
        raise TimeoutError(f"no answer from {what} in {timeout:.0f} s")
    message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 1)
    if not message:
        raise ConnectionError(f"{what} has ended")
    return json.loads(message), fds


class ForkedProcess:
    """The part of ``subprocess.Popen`` that jupyter_client's ``LocalProvisioner`` (and a grading worker's
    owner) uses, for a process forked by a fork server (:func:`serve`): a kernel, or a grading worker.

    The process is the server's child, not ours: it is held by a pidfd, which names exactly that process
    (a pid could be reused). Its exit status stays with its parent; :attr:`returncode` is 0 once it ended.
    """

    stdin = stdout = stderr = None

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd, self.returncode = pid, pidfd, None

    def _ended(self, timeout: float | None) -> bool:
        if self.returncode is None and select.select([self._pidfd], [], [], timeout)[0]:
            self.returncode = 0
            os.close(self._pidfd)
        return self.returncode is not None

    def poll(self):
        self._ended(0)
        return self.returncode

    def wait(self, timeout: float | None = None):
        if not self._ended(timeout):
            raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if not self._ended(0):
            signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def __del__(self):
        if self.returncode is None:
            os.close(self._pidfd)


class Zygote:
    """A running zygote for kernels that read the compilation cache ``compile_cache`` (or none).

    Several grading processes may share one zygote: :meth:`connect` gives another process a connection of its
    own, which it wraps with :meth:`attached`.
    """

    def __init__(self, compile_cache: Path | None, extra_preload: tuple = ()):
        self.compile_cache = compile_cache
        self.code = code_fingerprint()
        self._lock = threading.Lock()
        self.home = Path(tempfile.mkdtemp(prefix="s04-zygote-"))  # its HOME, matplotlib's font cache; 0700
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conn = ours
        env = launcher.kernel_environment(self.home, compile_cache)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "autograder.confine.zygote", str(theirs.fileno()), *extra_preload],
                pass_fds=[theirs.fileno()],
                env=env,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a process group of its own: ending a kernel's group never reaches it
            )
        finally:
            theirs.close()
        reply = receive(self._conn, READY_TIMEOUT_S)[0]
        if "ready" not in reply:
            self.close()
            raise RuntimeError(f"the kernel zygote did not start: {reply.get('error', reply)}")

    @classmethod
    def attached(cls, conn: socket.socket, compile_cache: Path | None, code: tuple) -> Zygote:
        """A zygote another process started, reached through ``conn`` (from :meth:`connect`); ``code`` is the
        :func:`code_fingerprint` it was started with."""
        self = cls.__new__(cls)
        self.compile_cache, self.code, self._lock, self._conn = compile_cache, code, threading.Lock(), conn
        self.process = self.home = None
        return self

    def connect(self) -> socket.socket:
        """A new connection to this zygote, for another grading process (which wraps it with :meth:`attached`)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                socket.send_fds(self._conn, [json.dumps({"connect": True}).encode()], [theirs.fileno()])
        finally:
            theirs.close()
        return ours

    def handed_over(self) -> Zygote:
        """In a child forked from the process that holds this zygote (a class run's worker template): a
        connection of the child's own, :meth:`attached`; the inherited one, which the parent goes on using, is
        dropped here without a word to the zygote."""
        own = self.connect()
        os.close(self._conn.detach())
        return Zygote.attached(own, self.compile_cache, self.code)

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        with self._lock:  # attached: alive while its end of the connection has not seen the end
            if not select.select([self._conn], [], [], 0)[0]:
                return True
            try:
                return self._conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except OSError:
                return False

    def fork(self, launcher_args: list[str]) -> ForkedProcess:
        """A new kernel: the launcher run with ``launcher_args``, forked from the warm template."""
        with self._lock:
            self._conn.send(json.dumps({"argv": list(launcher_args)}).encode())
            reply, fds = receive(self._conn, 60.0)
        if "pid" not in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"the kernel zygote did not fork: {reply}")
        return ForkedProcess(reply["pid"], fds[0])

    def close(self) -> None:
        self._conn.close()  # once every connection is closed the zygote exits; its kernels die with it
        if self.process is None:
            return  # attached: the process that started it waits for it
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


#: seconds before the first retry of a zygote that failed to start; each further failure doubles it
RETRY_AFTER_S = 30.0
#: the longest wait between two tries
MAX_RETRY_AFTER_S = 1800.0


@dataclass
class StartFailures:
    """Failed zygote starts in a row, and when a new try is due (exponential backoff).

    A zygote that cannot start costs each kernel up to a start timeout, so the next kernels are launched
    one by one instead; but a long-lived grader (formgrader's server) must not give up forking for good
    after one bad moment (a loaded machine, a full disk): it tries again once the backoff has passed.
    """

    count: int = 0
    last: float = 0.0
    reason: str = ""

    def due(self, now: float) -> bool:
        return self.count == 0 or now - self.last >= min(MAX_RETRY_AFTER_S, RETRY_AFTER_S * 2 ** (self.count - 1))

    def failed(self, reason: str, now: float) -> None:
        self.count, self.last, self.reason = self.count + 1, now, reason


_current: Zygote | None = None
_failures = StartFailures()
_registry_lock = threading.Lock()


def zygote_for(compile_cache: Path | None, log=None) -> Zygote | None:
    """This process's zygote for ``compile_cache`` (started on first use), or None: launch the kernel instead.

    The warm zygote is shared by every run in the process (that is what makes forking pay); a failure to
    start one only defers the next try (:class:`StartFailures`).
    """
    global _current
    if not available():
        return None
    with _registry_lock:
        stale = _current is not None and (
            _current.compile_cache != compile_cache or _current.code != code_fingerprint() or not _current.alive()
        )
        if stale:
            _current.close()
            _current = None
        if _current is None:
            start = time.monotonic()
            if not _failures.due(start):
                return None
            try:
                _current = Zygote(compile_cache)
            except (OSError, RuntimeError) as exc:
                _failures.failed(f"{type(exc).__name__}: {exc}", time.monotonic())
                if log is not None:
                    log.warning(
                        "grading kernels are launched one by one, not forked (%d failed start(s)): %s",
                        _failures.count,
                        _failures.reason,
                    )
                return None
            _failures.count = 0
            if log is not None:
                log.info("kernel zygote started in %.1f s", time.monotonic() - start)
        return _current


def adopt(shared: Zygote) -> None:
    """Make ``shared`` (:meth:`Zygote.attached`) this process's zygote: a grading worker forked for a class
    run uses the run's one zygote. :func:`zygote_for` still replaces it when it does not fit (another
    compilation cache, changed code, ended)."""
    global _current
    with _registry_lock:
        if _current is not None:
            _current.close()
        _current = shared


@atexit.register  # a grading process that exits normally waits for its zygote (and so counts its CPU time)
def close_zygote() -> None:
    global _current
    with _registry_lock:
        if _current is not None:
            _current.close()
            _current = None


if __name__ == "__main__":
    main()
