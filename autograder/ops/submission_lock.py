"""One grading at a time per submission, across processes and machines that share the course folder.

A job is ``nbgrader autograde <section> --student=<id> --force``: run twice at once for the same student,
the two copy into the same ``autograded/<id>/<section>`` folder and rewrite the same gradebook rows. That
can happen without anybody doing anything wrong: a Dask driver is killed and restarted while a worker still
runs the job the dead driver handed out (Dask cannot stop a running task, it only drops the result), the
scheduler takes a slow worker for dead and retries its job elsewhere, or two instructors start a class run
on the same course. Each job therefore holds an exclusive ``flock`` on
``<course>/.grading/locks/<section>/<student>.lock`` while it grades; the second waits for the first and
then grades again, so the last grading wins whole and nothing is mixed. The kernel releases a dead
holder's lock (on NFS: lockd), so a killed job never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path


class SubmissionBusy(TimeoutError):
    """Another process kept grading the same submission for longer than the wait allowed."""


def lock_path(course_dir: Path, section: str, student: str) -> Path:
    return Path(course_dir) / ".grading" / "locks" / section / f"{student}.lock"


@contextmanager
def graded_alone(course_dir: Path, section: str, student: str, wait_s: float, poll_s: float = 0.2):
    """Hold the submission's lock for the ``with`` block, waiting at most ``wait_s`` for another holder."""
    path = lock_path(course_dir, section, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SubmissionBusy(str(path)) from None
                time.sleep(poll_s)
        yield
    finally:
        os.close(fd)  # releases the lock


def being_graded(course_dir: Path, section: str, student: str) -> bool:
    """Whether some process holds this submission's lock now (it is grading that submission)."""
    try:
        with graded_alone(course_dir, section, student, wait_s=0):
            return False
    except SubmissionBusy:
        return True
