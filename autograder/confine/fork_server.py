"""A fork server: a warm process that forks children on request over a ``SOCK_SEQPACKET`` connection.

Two servers run this loop: the kernel zygote (:mod:`autograder.confine.zygote`), whose children become confined
grading kernels, and a class run's worker zygote (:mod:`autograder.ops.worker`), whose children become
grading workers. The server side is :func:`serve` and :func:`exit_child`; the requesting side reads a reply with
:func:`receive` and holds the child as a :class:`ForkedProcess` (a pidfd, not a pid).

Linux only (pidfds, ``SOCK_SEQPACKET``): see :func:`available`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys


def available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


# ----------------------------------------------------------------------------------------------- server side


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


def serve(conn: socket.socket, child, orphaned, max_fds: int = 1) -> None:
    """Answer fork requests on ``conn``, and on every connection added through it, until all are closed.

    A request is a JSON message (with up to ``max_fds`` descriptors); the forked child runs
    ``child(conns, started, request, fds)``, which never returns and first writes a byte to ``started``; the
    requester gets the child's pid and a pidfd of it. ``{"connect": true}`` with one descriptor (a socket)
    adds a connection instead: another grading process of the same class run
    (:meth:`autograder.confine.zygote.Zygote.connect`). When a connection closes while children it asked for
    still run (its grading process was killed past its time limit), ``orphaned(pid, request)`` ends each.
    """
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


# ----------------------------------------------------------------------------------------------- requester side


def receive(conn: socket.socket, timeout: float, what: str = "the fork server") -> tuple[dict, list[int]]:
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
