"""Where the class run's jobs run: this process's threads, or a Dask cluster; one interface for both.

An :class:`Executor` runs each job it is given once, through a grading function (the class run's
:func:`autograder.ops.classrun.run_job`, which never raises), in a long-lived
:class:`~autograder.ops.worker.GradingWorker` of its own, and hands each result back *in the calling thread*
as the job ends, so the caller stays the one writer of the ledger. A job whose grading function raised all
the same is that job's failure, never the run's. Every result carries its ``queue`` phase: seconds from the
start of the run (or the submission to Dask) until a worker took the job.

* :class:`ThreadExecutor`: ``workers`` threads of this process, one :class:`GradingWorker` each, all forked
  from one :class:`~autograder.ops.worker.WorkerZygote` (nbgrader imported once per run, not per worker).
* :class:`DaskExecutor`: a Dask cluster (:func:`_dask_client`), one :class:`GradingWorker` per Dask worker
  thread; Dask retries a job whose worker died.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from autograder.confine.limits import Limits
from autograder.course.course import Course
from autograder.ops.ledger import Job, JobResult
from autograder.ops.worker import GradingWorker, WorkerZygote

#: ``grade(course, section, student, limits, extra_args, worker=...)``: one job in ``worker``; never raises
GradeJob = Callable[..., JobResult]
OnResult = Callable[[Job, JobResult], None]


class Executor(Protocol):
    def run(self, jobs: Sequence[Job], on_result: OnResult) -> None:
        """Grade each of ``jobs`` once; call ``on_result(job, result)`` in this thread as each ends, in any order."""
        ...


def _with_queue(result: JobResult, queued: float) -> JobResult:
    """``result`` with its ``queue`` phase: ``queued`` seconds until a worker took the job, plus any wait for
    another grading of the same submission (:func:`autograder.ops.classrun.run_job`)."""
    result.phases = {**result.phases, "queue": round(queued + result.phases.get("queue", 0.0), 3)}
    return result


def _result(future, job: Job) -> JobResult:
    try:
        return future.result()
    except Exception as exc:  # the grading function never raises; should it ever, one submission fails, not the run
        return JobResult.crashed(job.section, job.student, exc)


class _WorkerPool:
    """One long-lived :class:`GradingWorker` per thread of the class run, forked from the run's worker zygote; all
    stopped, and the worker zygote closed, at the end."""

    def __init__(self, course: Path, limits: Limits, extra_args=()):
        self.course, self.limits = course, limits
        self.worker_zygote = WorkerZygote(course, extra_args)
        self._local = threading.local()
        self._all: list[GradingWorker] = []
        self._lock = threading.Lock()

    def get(self) -> GradingWorker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = GradingWorker(self.course, self.limits, self.worker_zygote)
            with self._lock:
                self._all.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self._all:  # all at once: each exit takes about a second
            worker.request_stop()
        for worker in self._all:
            worker.stop()
        self._all.clear()
        self.worker_zygote.close()


@dataclass
class ThreadExecutor:
    """``workers`` threads of this process, each grading in its own :class:`GradingWorker`."""

    grade: GradeJob
    course: Course
    limits: Limits
    extra_args: tuple = ()
    workers: int = 1

    def run(self, jobs: Sequence[Job], on_result: OnResult) -> None:
        if not jobs:
            return  # no worker zygote, no kernel zygote: nothing to grade
        pool = _WorkerPool(self.course.folder, self.limits, self.extra_args)
        pool.worker_zygote.start()  # a child of this thread, which outlives the pool's threads
        began = time.perf_counter()

        def one(job: Job) -> JobResult:
            queued = time.perf_counter() - began
            worker = pool.get()
            return _with_queue(
                self.grade(self.course, job.section, job.student, self.limits, self.extra_args, worker=worker), queued
            )

        try:
            with ThreadPoolExecutor(max_workers=max(1, self.workers)) as threads:
                futures = {threads.submit(one, job): job for job in jobs}
                for future in as_completed(futures):
                    on_result(futures[future], _result(future, futures[future]))
        finally:
            pool.stop()


#: the Dask worker thread's own GradingWorker, kept from one job to the next (a Dask task has no other state)
_DASK_WORKERS = threading.local()


def _dask_job(
    grade: GradeJob, course: str, section: str, student: str, limits: Limits, extra_args, submitted: float
) -> JobResult:
    """One job on a Dask worker, in that worker thread's own long-lived :class:`GradingWorker`.

    ``course``: the course folder; ``grade`` reads its config for each job (a cluster outlives a run, and the
    config may change between runs). ``submitted``: the driver's ``time.time()`` when it handed the job to Dask
    (clocks of other machines may differ a little: a negative queue time is counted as none)."""
    queued = max(0.0, time.time() - submitted)
    course_dir = Path(course)
    worker = getattr(_DASK_WORKERS, "worker", None)
    if worker is None or worker.course != course_dir.resolve() or worker.limits != limits:
        if worker is not None:
            worker.stop()
        worker = _DASK_WORKERS.worker = GradingWorker(course_dir, limits)
    return _with_queue(grade(course_dir, section, student, limits, extra_args, worker=worker), queued)


def _dask_client(scheduler: str, workers: int):
    """A client of ``scheduler``: ``"local"`` (a cluster of ``workers`` processes on this machine, one
    thread each), a scheduler address (``tcp://host:8786``) or a scheduler file (``*.json``)."""
    from distributed import Client, LocalCluster

    if scheduler == "local":
        cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True, dashboard_address=None)
        return Client(cluster), cluster
    if scheduler.endswith(".json"):
        return Client(scheduler_file=scheduler), None
    return Client(scheduler), None


@dataclass
class DaskExecutor:
    """The jobs on a Dask cluster (``scheduler``: see :func:`_dask_client`).

    The course folder must be the same path on every Dask worker (a shared file system), and a gradebook
    several machines write needs a server (PostgreSQL). ``grade`` travels to the workers by name, so it must
    be a module-level function they can import."""

    grade: GradeJob
    course: Course
    limits: Limits
    extra_args: tuple = ()
    scheduler: str = "local"
    workers: int = 1

    def run(self, jobs: Sequence[Job], on_result: OnResult) -> None:
        from distributed import as_completed as dask_completed

        client, cluster = _dask_client(self.scheduler, self.workers)
        try:
            course = str(self.course.folder)  # a path travels to the workers; each job reads the config there
            futures = {
                client.submit(
                    _dask_job,
                    self.grade,
                    course,
                    job.section,
                    job.student,
                    self.limits,
                    tuple(self.extra_args),
                    time.time(),
                    pure=False,
                    retries=1,
                ): job
                for job in jobs
            }
            for future in dask_completed(futures):
                on_result(futures[future], _result(future, futures[future]))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
