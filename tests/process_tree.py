"""The processes one test started, for tests that check nothing of theirs is left running.

A scan of every process on the machine would also see the grading processes of tests running beside this one
(pytest-xdist runs two at a time), so a test names its own processes instead: the trees below the roots it
knows (a Dask worker it started, the workers of its own scheduler), each process named with its start time
(:mod:`autograder.confine.reaper`), so a pid reused later is not mistaken for one of them.
"""

from __future__ import annotations

import os
import time

from autograder.confine import reaper


def command_pids(text: str) -> list[int]:
    """Processes whose command line holds ``text`` (e.g. a scheduler's address)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command:
            found.append(int(entry.name))
    return found


def tree(roots) -> list[reaper.Process]:
    """``roots`` and every process below them now."""
    found = []
    for pid in roots:
        root = reaper.process(pid)
        if root is not None:
            found += [root, *reaper.descendants(pid)]
    return found


def wait_until_ended(processes, what: str, timeout: float = 60.0) -> None:
    """Fail unless every one of ``processes`` has ended within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := [p.pid for p in processes if reaper.alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"{what}: still running after {timeout:g} s: pids {left}"
