"""Ending what grading started (autograder/confine/reaper.py), and a grading worker past its time limit.

A worker that runs past ``Limits.submission_timeout_s`` is killed with every process below it and, as root,
every process of the kernel users found there, which reaches a daemon that left the tree too. The
processes here are shells and ``sleep``: no nbgrader, no kernel, seconds in all.
"""

import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection

import pytest

from autograder.confine import isolation, reaper
from autograder.confine.limits import Limits
from autograder.ops.worker import GradingWorker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _until(condition, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_kill_tree_ends_the_process_and_everything_below_it():
    top = subprocess.Popen(["/bin/sh", "-c", "sh -c 'sleep 600; :' & sleep 600; :"])
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        below = _until(lambda: b if len(b := [p.pid for p in reaper.descendants(top.pid)]) >= 3 else [])
        reaped = reaper.kill_tree(top.pid)
        assert reaped.left == ()
        assert {p.pid for p in reaped.killed} == {top.pid, *below}
        assert not any(map(_running, [top.pid, *below]))  # ended, not only signalled: it waited
        assert _running(bystander.pid)
    finally:
        for proc in (top, bystander):
            proc.kill()
            proc.wait()


def test_kill_group_ends_the_group_and_nothing_else():
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 600 & sleep 600; :"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        _until(lambda: len(reaper.descendants(leader.pid)) >= 2)
        members = {leader.pid, *(p.pid for p in reaper.descendants(leader.pid))}
        reaped = reaper.kill_group(leader.pid)
        assert reaped.left == () and {p.pid for p in reaped.killed} == members
        assert not any(map(_running, members)) and _running(bystander.pid)
    finally:
        for proc in (leader, bystander):
            proc.kill()
            proc.wait()


# a stand-in for a grading worker (root): it starts a "kernel" of its own user, whose daemon leaves the
# kernel's session and the worker's tree (the subshell that started it exits, so init adopts it)
FAKE_WORKER = """
import subprocess, sys, time
uid = int(sys.argv[1])
subprocess.Popen(["/bin/sh", "-c", "(setsid sleep 600 &); exec sleep 600"], user=uid, group=uid, extra_groups=[],
                 cwd="/", start_new_session=True)
time.sleep(600)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="kernel users of their own need root")
def test_a_killed_worker_leaves_nothing_of_its_kernel_users(tmp_path):
    uid = isolation.pick_uid()
    worker = GradingWorker(tmp_path, Limits())
    process = worker._process = subprocess.Popen([sys.executable, "-c", FAKE_WORKER, str(uid)])
    ours, theirs = socket.socketpair()
    worker._conn = Connection(ours.detach())
    theirs.close()
    try:

        def escaped():
            below = {p.pid for p in reaper.descendants(process.pid)}
            of_user = reaper.processes_of(uid)
            return [p for p in of_user if p not in below] if len(of_user) >= 2 else []

        daemons = _until(escaped)  # a process of the kernel's user that only its user names
        worker.kill()
        assert worker._process is None and process.returncode is not None
        assert reaper.processes_of(uid) == [] and not any(map(_running, daemons))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reaper.kill_user(uid)
