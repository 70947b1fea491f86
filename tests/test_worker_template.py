"""A class run's grading workers are forked from one template process (autograder/ops/worker.py).

The template imports nbgrader and the verdict once; each worker is its child, in a session of its own, and
a worker killed past its limit is replaced by a new fork. Closing the template (the run's end, or the death
of the run's process, which closes its socket) ends every worker forked from it. No job runs here: seconds.
"""

import os
import sys
import threading
import time

import pytest

from autograder.confine import reaper
from autograder.confine.limits import Limits
from autograder.ops.worker import GradingWorker, WorkerTemplate

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


def test_workers_are_forked_from_the_runs_template_and_end_with_it(tmp_path):
    template = WorkerTemplate(tmp_path)
    template.start()
    workers = [GradingWorker(tmp_path, Limits(), template) for _ in range(2)]
    try:
        for worker in workers:
            worker._start()
        pids = [worker._process.pid for worker in workers]
        assert [_parent(pid) for pid in pids] == [template.process.pid] * 2
        assert [os.getsid(pid) for pid in pids] == pids  # sessions of their own, as launched workers have
        workers[0].kill()  # as past its limit: the next job gets a new worker, forked again
        assert not _running(pids[0]) and _running(pids[1])
        workers[0]._start()
        assert workers[0]._process.pid not in pids and _parent(workers[0]._process.pid) == template.process.pid
        pids.append(workers[0]._process.pid)
    finally:
        template.close()
    deadline = time.monotonic() + 10
    while any(map(_running, pids)):
        assert time.monotonic() < deadline, "a worker outlived its template"
        time.sleep(0.05)


def test_a_worker_dies_with_a_killed_template(tmp_path):
    template = WorkerTemplate(tmp_path)
    template.start()
    worker = GradingWorker(tmp_path, Limits(), template)
    try:
        worker._start()
        pid = worker._process.pid
        template.process.kill()  # what follows the class run's own death (PR_SET_PDEATHSIG on the template too)
        deadline = time.monotonic() + 10
        while _running(pid):
            assert time.monotonic() < deadline, "the worker outlived its template"
            time.sleep(0.05)
    finally:
        template.close()


def test_when_the_template_fails_workers_are_launched_instead(tmp_path):
    template = WorkerTemplate(tmp_path)
    template.start()
    first, second = (GradingWorker(tmp_path, Limits(), template) for _ in range(2))
    try:
        first._start()
        template.process.kill()
        template.process.wait()
        second._start()  # the template is gone: this worker starts as its own interpreter, and grades as one
        assert _parent(second._process.pid) == os.getpid()
        assert "failed" in template._failed
    finally:
        for worker in (first, second):
            worker.kill()
        template.close()


def test_the_template_outlives_the_pool_thread_that_forked_a_worker(tmp_path):
    """The run's own thread starts the template (ThreadExecutor.run): a pool thread that forks a worker and ends,
    as every pool thread does when the pool shuts down, takes neither the template nor the worker with it."""
    template = WorkerTemplate(tmp_path)
    template.start()
    worker = GradingWorker(tmp_path, Limits(), template)
    try:
        thread = threading.Thread(target=worker._start)
        thread.start()
        thread.join()
        time.sleep(0.5)  # PR_SET_PDEATHSIG would have fired at the thread's end
        assert _running(template.process.pid) and _running(worker._process.pid)
        assert _parent(worker._process.pid) == template.process.pid
    finally:
        worker.kill()
        template.close()


def test_an_unstarted_template_forks_nothing_and_the_worker_launches(tmp_path):
    template = WorkerTemplate(tmp_path)
    worker = GradingWorker(tmp_path, Limits(), template)
    try:
        with pytest.raises(RuntimeError, match="not started"):
            template.fork(tmp_path / "log")
        worker._start()
        assert template.process is None and _parent(worker._process.pid) == os.getpid()
    finally:
        worker.kill()
