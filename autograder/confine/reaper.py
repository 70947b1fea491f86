"""Ending processes for good: the one place that finds, kills and waits for what grading started.

Three ways to name what must end, each read from ``/proc`` (Linux; the standard library only):

* a process and everything below it (:func:`kill_tree`: a grading worker past its time limit). The tree is
  read before anything is killed: a killed parent's children are re-parented and no longer look like its;
* a process group (:func:`kill_group`: a kernel's own group, when grading without root);
* a user (:func:`kill_user`: a kernel's own user, as root), which also reaches what left the session or the
  tree (``setsid`` and a double fork).

Each sends SIGKILL, waits until what it killed has ended (a zombie counts as ended: only its parent can
remove it), at most ``timeout_s``, and says what it killed and what was still alive then (:class:`Reaped`).
A process found is named by its pid and its start time, so a pid reused meanwhile is neither killed by
:func:`kill_tree` nor waited for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

#: seconds a kill waits for its processes to end
TIMEOUT_S = 10.0
_POLL_S = 0.02  # between two looks at /proc while killed processes end


@dataclass(frozen=True)
class Process:
    pid: int
    start: int  # clock ticks from boot to its start: with the pid, names one process (pids are reused)
    uids: frozenset[int]  # real, effective, saved and filesystem user ids


@dataclass(frozen=True)
class Reaped:
    """What one kill did: the processes it sent SIGKILL, and the pids still alive when it stopped waiting."""

    killed: tuple[Process, ...]  # a zombie among them too: its user ids still say whose it was
    left: tuple[int, ...]  # empty: everything killed has ended


def _stat(pid: int) -> list[bytes] | None:
    """``/proc/<pid>/stat`` from the state on (field 3), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # the command name may hold spaces and ")"
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _state(fields: list[bytes]) -> bytes:
    return fields[0]


def _ppid(fields: list[bytes]) -> int:
    return int(fields[1])


def _pgrp(fields: list[bytes]) -> int:
    return int(fields[2])


def _start(fields: list[bytes]) -> int:
    return int(fields[19])


def _uids(pid: int) -> frozenset[int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Uid:"):
                    return frozenset(int(u) for u in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()  # unreadable: still killed, just not counted as any user's


def _table() -> dict[int, list[bytes]]:
    """The ``/proc/<pid>/stat`` fields of every process now."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                table[int(entry.name)] = fields
    return table


def _process(pid: int, fields: list[bytes]) -> Process:
    return Process(pid, _start(fields), _uids(pid))


def alive(process: Process) -> bool:
    """Whether that very process (pid and start time) still runs; a zombie has ended."""
    fields = _stat(process.pid)
    return fields is not None and _state(fields) not in (b"Z", b"X") and _start(fields) == process.start


def _wait(processes, deadline: float) -> tuple[int, ...]:
    """Wait until none of ``processes`` is alive or ``deadline`` passes; the pids still alive then."""
    while True:
        left = tuple(p.pid for p in processes if alive(p))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(_POLL_S)


def _of_user(uid: int) -> dict[int, frozenset[int]]:
    """Live (not zombie) processes whose real, effective, saved or filesystem user id is ``uid``: pid -> uids."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:  # the process ended while we looked
            continue
        zombie = fields.get("State", "").split()[:1] in (["Z"], ["X"])
        uids = fields.get("Uid", "").split()
        if not zombie and str(uid) in uids:
            found[int(entry.name)] = frozenset(int(u) for u in uids if u.isdigit())
    return found


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) process ids whose real, effective, saved or filesystem user id is ``uid``."""
    return list(_of_user(uid))


def process(pid: int) -> Process | None:
    """``pid`` named with its start time, or None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else _process(pid, fields)


def descendants(pid: int) -> list[Process]:
    """Every process below ``pid`` now (children, their children, ...)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for child, fields in table.items():
        children.setdefault(_ppid(fields), []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(_process(child, table[child]))
            todo.append(child)
    return found


def kill_tree(pid: int, timeout_s: float = TIMEOUT_S) -> Reaped:
    """Kill ``pid`` and every process below it (collected first), and wait until they have ended.

    The caller must know that ``pid`` is still the process it means (for a child: not yet reaped).
    """
    deadline = time.monotonic() + timeout_s
    root = process(pid)
    tree = ([root] if root is not None else []) + descendants(pid)
    killed = []
    for member in tree:
        now = _stat(member.pid)
        if now is None or _start(now) != member.start:  # ended since, and its pid may be another's by now
            continue
        try:
            os.kill(member.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(member)
    return Reaped(tuple(killed), _wait(killed, deadline))


def kill_group(pgid: int, timeout_s: float = TIMEOUT_S) -> Reaped:
    """Kill process group ``pgid`` (one signal reaches the whole group at once) and wait until it has ended."""
    deadline = time.monotonic() + timeout_s
    members = [_process(pid, fields) for pid, fields in _table().items() if _pgrp(fields) == pgid]
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return Reaped((), tuple(p.pid for p in members if alive(p)))
    return Reaped(tuple(members), _wait(members, deadline))


# kill(-1, SIGKILL) as the kernel's user reaches every process of that user in one pass, which a loop of
# forks cannot outrun; the helper is a fresh interpreter because fork() in a threaded grader is unsafe.
_KILL_AS = (
    "import os, signal, sys\n"
    "uid = int(sys.argv[1])\n"
    "os.setgroups([]); os.setgid(uid); os.setuid(uid)\n"
    "for _ in range(100):\n"
    "    try:\n"
    "        os.kill(-1, signal.SIGKILL)\n"
    "    except ProcessLookupError:\n"
    "        break\n"
)


def kill_user(uid: int, timeout_s: float = TIMEOUT_S) -> Reaped:
    """Kill every process of user ``uid`` (root only), also those started while it ran, until none is left.

    Run as root on a grading kernel's own user, which nothing else on the machine uses.
    """
    deadline = time.monotonic() + timeout_s
    killed: dict[int, Process] = {}
    while True:
        alive = _of_user(uid)
        if not alive or time.monotonic() > deadline:
            return Reaped(tuple(killed.values()), tuple(alive))
        for pid, uids in alive.items():
            if pid not in killed and (fields := _stat(pid)) is not None:
                killed[pid] = Process(pid, _start(fields), uids)
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", _KILL_AS, str(uid)],
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(_POLL_S)
