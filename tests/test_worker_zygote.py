"""A class run's grading workers are forked from one worker zygote (autograder/ops/worker.py).

The worker zygote imports nbgrader and the verdict once; each worker is its child, in a session of its own, and
a worker killed past its limit is replaced by a new fork. Closing the worker zygote (the run's end, or the death
of the run's process, which closes its socket) ends every worker forked from it. No job runs here: seconds.
"""

import os
import sys
import threading
import time

import pytest

from autograder.confine import reaper
from autograder.confine.limits import Limits
from autograder.ops.worker import GradingWorker, WorkerZygote

pytestmark = [
    pytest.mark.nbgrader,  # starts grading workers
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def _running(pid: int) -> bool:
    found = reaper.process(pid)
    return found is not None and reaper.alive(found)


def test_workers_are_forked_from_the_runs_worker_zygote_and_end_with_it(tmp_path):
    worker_zygote = WorkerZygote(tmp_path)
    worker_zygote.start()
    workers = [GradingWorker(tmp_path, Limits(), worker_zygote) for _ in range(2)]
    try:
        for worker in workers:
            worker._start()
        pids = [worker._process.pid for worker in workers]
        assert [_parent(pid) for pid in pids] == [worker_zygote.process.pid] * 2
        assert [os.getsid(pid) for pid in pids] == pids  # sessions of their own, as launched workers have
        workers[0].kill()  # as past its limit: the next job gets a new worker, forked again
        assert not _running(pids[0]) and _running(pids[1])
        workers[0]._start()
        assert workers[0]._process.pid not in pids and _parent(workers[0]._process.pid) == worker_zygote.process.pid
        pids.append(workers[0]._process.pid)
    finally:
        worker_zygote.close()
    deadline = time.monotonic() + 10
    while any(map(_running, pids)):
        assert time.monotonic() < deadline, "a worker outlived its worker zygote"
        time.sleep(0.05)


def test_a_worker_dies_with_a_killed_worker_zygote(tmp_path):
    worker_zygote = WorkerZygote(tmp_path)
    worker_zygote.start()
    worker = GradingWorker(tmp_path, Limits(), worker_zygote)
    try:
        worker._start()
        pid = worker._process.pid
        worker_zygote.process.kill()  # what follows the class run's own death (PR_SET_PDEATHSIG on the worker zygote too)
        deadline = time.monotonic() + 10
        while _running(pid):
            assert time.monotonic() < deadline, "the worker outlived its worker zygote"
            time.sleep(0.05)
    finally:
        worker_zygote.close()


def test_when_the_worker_zygote_fails_workers_are_launched_instead(tmp_path):
    worker_zygote = WorkerZygote(tmp_path)
    worker_zygote.start()
    first, second = (GradingWorker(tmp_path, Limits(), worker_zygote) for _ in range(2))
    try:
        first._start()
        worker_zygote.process.kill()
        worker_zygote.process.wait()
        second._start()  # the worker zygote is gone: this worker starts as its own interpreter, and grades as one
        assert _parent(second._process.pid) == os.getpid()
        assert "failed" in worker_zygote._failed
    finally:
        for worker in (first, second):
            worker.kill()
        worker_zygote.close()


def test_the_worker_zygote_outlives_the_pool_thread_that_forked_a_worker(tmp_path):
    """The run's own thread starts the worker zygote (ThreadExecutor.run): a pool thread that forks a worker and ends,
    as every pool thread does when the pool shuts down, takes neither the worker zygote nor the worker with it."""
    worker_zygote = WorkerZygote(tmp_path)
    worker_zygote.start()
    worker = GradingWorker(tmp_path, Limits(), worker_zygote)
    try:
        thread = threading.Thread(target=worker._start)
        thread.start()
        thread.join()
        time.sleep(0.5)  # PR_SET_PDEATHSIG would have fired at the thread's end
        assert _running(worker_zygote.process.pid) and _running(worker._process.pid)
        assert _parent(worker._process.pid) == worker_zygote.process.pid
    finally:
        worker.kill()
        worker_zygote.close()


def test_an_unstarted_worker_zygote_forks_nothing_and_the_worker_launches(tmp_path):
    worker_zygote = WorkerZygote(tmp_path)
    worker = GradingWorker(tmp_path, Limits(), worker_zygote)
    try:
        with pytest.raises(RuntimeError, match="not started"):
            worker_zygote.fork(tmp_path / "log")
        worker._start()
        assert worker_zygote.process is None and _parent(worker._process.pid) == os.getpid()
    finally:
        worker.kill()
