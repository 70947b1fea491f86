"""One grading at a time per submission (:mod:`autograder.ops.submission_lock`), across threads and processes."""

import signal
import subprocess
import sys
import threading
import time

import pytest

from autograder.ops.submission_lock import SubmissionBusy, graded_alone, lock_path


def test_a_second_grading_waits_for_the_first(tmp_path):
    order = []
    held = threading.Event()

    def first():
        with graded_alone(tmp_path, "s04_1", "alice", wait_s=10):
            held.set()
            time.sleep(0.6)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    held.wait(5)
    with graded_alone(tmp_path, "s04_1", "alice", wait_s=10, poll_s=0.05):
        order.append("second in")
    thread.join()
    assert order == ["first done", "second in"]


def test_other_submissions_do_not_wait(tmp_path):
    with graded_alone(tmp_path, "s04_1", "alice", wait_s=0):
        with graded_alone(tmp_path, "s04_1", "bob", wait_s=0):
            pass
        with graded_alone(tmp_path, "s04_2", "alice", wait_s=0):
            pass


def test_a_holder_that_never_lets_go_fails_the_waiter_with_a_reason(tmp_path):
    with graded_alone(tmp_path, "s04_1", "alice", wait_s=0):
        with pytest.raises(SubmissionBusy):
            with graded_alone(tmp_path, "s04_1", "alice", wait_s=0.3, poll_s=0.05):
                pass


def test_a_killed_holder_releases_the_lock(tmp_path):
    """A grading process killed with SIGKILL (a Dask worker, a class run) leaves no stale lock behind."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from autograder.ops.submission_lock import graded_alone\n"
            f"with graded_alone({str(tmp_path)!r}, 's04_1', 'alice', wait_s=5):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SubmissionBusy):
            with graded_alone(tmp_path, "s04_1", "alice", wait_s=0.2, poll_s=0.05):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        with graded_alone(tmp_path, "s04_1", "alice", wait_s=5, poll_s=0.05):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_file_is_never_followed_through_a_link(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    path = lock_path(tmp_path, "s04_1", "alice")
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(OSError):
        with graded_alone(tmp_path, "s04_1", "alice", wait_s=0):
            pass
    assert target.read_text() == "keep"
