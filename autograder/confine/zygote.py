"""Grading kernels forked from a warm process (a "zygote") instead of each starting from nothing.

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
  the next kernel is forked from the same clean zygote;
* the child closes every inherited descriptor but 0-2 before anything else runs (it cannot ask the zygote
  for more), and the zygote is not dumpable: a kernel can neither trace it nor read its memory, and as
  root a kernel has a user of its own that cannot signal it;
* the zygote sends the grader a pidfd of each kernel (``SCM_RIGHTS``), so the grader waits for and kills
  exactly that process; a kernel dies with the zygote (``PR_SET_PDEATHSIG``), and the zygote ends when the
  grading process that started it closes its socket, or dies;
* a class run's workers share one zygote (started by their worker zygote, :mod:`autograder.ops.worker`), each
  through a connection of its own. The zygote then ends when the last connection closes, and a kernel whose
  grading process died (a worker killed past its time limit) is ended with everything below it and its
  user's processes, as that worker's own zygote would have been ended with it.

The fork loop and the requesting side are :mod:`autograder.confine.fork_server` (the class run's worker
zygote uses them too); which zygote a grading process forks from is :mod:`autograder.confine.zygote_registry`.
Linux only (pidfds, ``SOCK_SEQPACKET``). Where it is unavailable, or the zygote does not start, kernels
are started the old way, each by its own interpreter, and the reason is logged.
"""

from __future__ import annotations

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
from pathlib import Path

from autograder.confine import fork_server, landlock, launcher, reaper

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


def _become_kernel(conns: list[socket.socket], started: int, argv: list[str]) -> None:
    os.setsid()  # its own process group and session, as a launched kernel has
    os.write(started, b"1")
    fork_server.detach_all(conns)
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


def _kernel_child(conns: list[socket.socket], started: int, request: dict, fds: list[int]) -> None:
    """In the forked child: drop everything of the zygote, then become a confined kernel. Never returns."""
    fork_server.exit_child(lambda: _become_kernel(conns, started, request["argv"]))


def _remove_folder(path, prefix: str) -> None:
    """Remove a grading folder this module's callers made (``tempfile.mkdtemp(prefix=prefix)``), nothing else."""
    path = Path(path)
    if path.name.startswith(prefix) and path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


def _end_kernel(pid: int, request: dict) -> None:
    """A kernel whose grading process is gone: end it, everything below it and, as root, every process of its
    own user (what :meth:`autograder.ops.worker.GradingWorker.kill` does for the processes it can see), and remove
    its scratch folder, which that grading process would have removed (student files must not pile up in /tmp)."""
    reaper.kill_tree(pid)
    argv = request.get("argv", [])
    if os.geteuid() == 0 and "--uid" in argv[:-1]:
        reaper.kill_user(int(argv[argv.index("--uid") + 1]))
    if "--scratch" in argv[:-1]:
        _remove_folder(argv[argv.index("--scratch") + 1], "s04-kernel-")


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
    fork_server.serve(conn, _kernel_child, orphaned=_end_kernel)
    _remove_folder(Path.cwd(), "s04-zygote-")  # our HOME: the grader that made it may be gone (killed)


# ----------------------------------------------------------------------------------------------- grader side


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
        reply = fork_server.receive(self._conn, READY_TIMEOUT_S, "the kernel zygote")[0]
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
        """In a child forked from the process that holds this zygote (a class run's worker zygote): a
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

    def fork(self, launcher_args: list[str]) -> fork_server.ForkedProcess:
        """A new kernel: the launcher run with ``launcher_args``, forked from this zygote."""
        with self._lock:
            self._conn.send(json.dumps({"argv": list(launcher_args)}).encode())
            reply, fds = fork_server.receive(self._conn, 60.0, "the kernel zygote")
        if "pid" not in reply or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"the kernel zygote did not fork: {reply}")
        return fork_server.ForkedProcess(reply["pid"], fds[0])

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


if __name__ == "__main__":
    main()
