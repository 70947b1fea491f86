"""Grade a whole class: parallel, crash-safe and resumable, through long-lived grading workers.

A *job* is one student's submission of one section (nbgrader assignment). Each job runs
``nbgrader autograde <section> --student=<id> --force`` in one of ``workers`` long-lived grading
processes (:mod:`autograder.ops.worker`: nbgrader imported once, each notebook still in a fresh
confined kernel) under the limits of :mod:`autograder.confine.limits`, so a submission that hangs
or crashes costs only itself. When a job ends, a small ledger entry
``<course>/.grading/ledger/<section>/<student>.json`` is written atomically by this process (the one
writer of the ledger) with the fingerprint (SHA-256) of the submitted files, the outcome and the
seconds per phase (queue, kernel, execution, nbgrader and verdict).

Resuming: a job whose ledger entry says it was graded from the current submission is
skipped (failed jobs are tried again), so killing
the run at any moment (even SIGKILL) and starting it again grades exactly what is missing.
A job killed half-way has no ledger entry and is graded again with ``--force``, which
overwrites its partial results in the gradebook: nbgrader keys grades by (student,
assignment, notebook, cell), so nothing is duplicated and nothing graded is lost.

One grading at a time per submission: each job holds the submission's lock
(:mod:`autograder.ops.submission_lock`), so a rerun after a killed Dask driver, whose workers may still
grade the dead driver's jobs, waits for them instead of grading the same student twice at once.

Whatever a student hands in costs only that submission: its files are checked before nbgrader
sees them (:mod:`autograder.ops.submission_files`: links, FIFOs, sizes, nesting, encodings, names),
and any exception a job raises is recorded as that job's failure, never the run's.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from autograder.ops import audit
from autograder.confine.limits import DEFAULT_LIMITS, SANDBOX_OFF_WARNING, Limits, require_sandbox
from autograder.ops.submission_files import fingerprint, precheck, shown, submission_problem  # noqa: F401 (precheck: API)
from autograder.ops.nbgrader_run import prepare_gradebook
from autograder.ops.submission_lock import SubmissionBusy, graded_alone
from autograder.ops.worker import GradingWorker


@dataclass
class JobResult:
    section: str
    student: str
    status: str  # "graded", "failed" or "skipped" (graded by an earlier run)
    seconds: float = 0.0
    error: str = ""
    phases: dict = field(default_factory=dict)  # seconds by phase: queue, kernel, execute, nbgrader
    changed_cells: int = 0  # a regrade: cells whose score changed (autograder.ops.audit)
    flagged_cells: int = 0  # of those, changed with the same submission and the same data


def submissions(course_dir: Path, section: str) -> list[str]:
    """Students with anything at ``submitted/<student>/<section>`` (a link or a file too: those fail, with a reason)."""
    root = Path(course_dir) / "submitted"
    return sorted(p.name for p in root.iterdir() if os.path.lexists(p / section)) if root.is_dir() else []


def _ledger_path(course_dir: Path, section: str, student: str) -> Path:
    return Path(course_dir) / ".grading" / "ledger" / section / f"{student}.json"


def read_ledger(course_dir: Path, section: str, student: str) -> dict | None:
    try:
        entry = json.loads(_ledger_path(course_dir, section, student).read_text())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _write_ledger(course_dir: Path, section: str, student: str, entry: dict) -> None:
    path = _ledger_path(course_dir, section, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(entry, indent=1))  # ASCII: a student's name may hold undecodable bytes
    os.replace(tmp, path)  # atomic: a reader sees the old entry or the new one, never half of one


def explain_failure(log: str) -> str:
    """One readable line from nbgrader's log of a failed submission."""
    hints = [
        ("Failed to run command", "评分内核没能启动（多半是评分机器资源紧张），重试后仍失败：请稍后重跑。"),
        ("JSONDecodeError", "提交的 notebook 不是合法的 JSON（文件损坏或被手工编辑过）。"),
        ("NotJSONError", "提交的 notebook 不是合法的 JSON（文件损坏或被手工编辑过）。"),
        ("SchemaTooOld", "notebook 的 nbgrader 元数据版本过旧。"),
        ("database is locked", "成绩库被占用（并行写入冲突），重试后仍失败。"),
        ("ValidationError", "notebook 不符合 nbformat 格式。"),
    ]
    for needle, text in hints:
        if needle in log:
            return text
    lines = [ln for ln in log.splitlines() if "ERROR" in ln or "Error" in ln]
    return (lines[0] if lines else log.strip().splitlines()[-1] if log.strip() else "nbgrader failed").strip()[:300]


def run_job(course_dir: Path, section: str, student: str, limits: Limits, extra_args=(), worker=None) -> JobResult:
    """Autograde one submission in ``worker`` (a :class:`~autograder.ops.worker.GradingWorker`; a fresh one
    for this job when ``None``); never raises."""
    try:
        return _run_job(Path(course_dir), section, student, limits, extra_args, worker)
    except Exception as exc:  # a bug of ours, or a file system error: this submission fails, with why
        return JobResult(section, student, "failed", 0.0, _internal_error(exc))


def _internal_error(exc: BaseException) -> str:
    return (
        f"评分程序处理这份提交时出错（{type(exc).__name__}: {shown(str(exc))[:200]}），这份提交没有评分；"
        "其他学生不受影响。请把这条信息报告给课程维护者。"
    )


def _run_job(course: Path, section: str, student: str, limits: Limits, extra_args, worker) -> JobResult:
    problem = submission_problem(course, section, student)
    if problem:
        return JobResult(section, student, "failed", 0.0, problem)
    require_sandbox(limits)  # refuses to grade without the sandbox, before any kernel starts
    # Another process may still grade this submission (a killed Dask driver's job, a second class run):
    # wait for it, then grade again. Its own two attempts are bounded by the submission limit.
    asked = time.perf_counter()
    try:
        with graded_alone(course, section, student, wait_s=2 * limits.submission_timeout_s + 60):
            waited = time.perf_counter() - asked
            result = _grade_locked(course, section, student, limits, extra_args, worker)
    except SubmissionBusy:
        return JobResult(
            section,
            student,
            "failed",
            time.perf_counter() - asked,
            "另一个评分进程一直在评这份提交（它的锁没有释放），这次没有评分：请确认没有别的评分在运行后重跑。",
        )
    result.phases = {"queue": round(waited, 3), **result.phases}  # waiting for the other grading is queueing
    return result


def _grade_locked(course: Path, section: str, student: str, limits: Limits, extra_args, worker) -> JobResult:
    own = worker is None
    worker = worker or GradingWorker(course, limits)
    log_path = course / ".grading" / "logs" / section / f"{student}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        # One retry: SQLite may refuse a write while another worker commits, and a loaded machine can
        # fail to start a kernel. A deterministic failure fails twice and is reported.
        for attempt in range(2):
            outcome = worker.grade(section, student, extra_args)
            if outcome is None:
                return JobResult(
                    section,
                    student,
                    "failed",
                    time.perf_counter() - start,
                    f"整份作业的评分超过了 {limits.submission_timeout_s:.0f} 秒的上限，已被终止。",
                )
            log_path.write_text(outcome.log, encoding="utf-8")  # nbgrader's full log, for the instructor
            if outcome.code == 0:
                return JobResult(section, student, "graded", time.perf_counter() - start, phases=outcome.phases)
    finally:
        if own:
            worker.stop()
    return JobResult(
        section,
        student,
        "failed",
        time.perf_counter() - start,
        f"{explain_failure(outcome.log)}（nbgrader 日志：{log_path.relative_to(course)}）",
        outcome.phases,
    )


class _WorkerPool:
    """One long-lived :class:`GradingWorker` per thread of the class run, all stopped at the end."""

    def __init__(self, course: Path, limits: Limits):
        self.course, self.limits = course, limits
        self._local = threading.local()
        self._all: list[GradingWorker] = []
        self._lock = threading.Lock()

    def get(self) -> GradingWorker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = GradingWorker(self.course, self.limits)
            with self._lock:
                self._all.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self._all:  # all at once: each exit takes about a second
            worker.request_stop()
        for worker in self._all:
            worker.stop()


def _with_queue(result: JobResult, queued: float) -> JobResult:
    """``result`` with its ``queue`` phase: seconds from the start of the run (or the submission to Dask) until
    a worker took the job, plus any wait for another grading of the same submission."""
    result.phases = {**result.phases, "queue": round(queued + result.phases.get("queue", 0.0), 3)}
    return result


_DASK_WORKERS = threading.local()


def _dask_job(course: str, section: str, student: str, limits: Limits, extra_args, submitted: float) -> JobResult:
    """One job on a Dask worker, in that worker thread's own long-lived :class:`GradingWorker`.

    ``submitted``: the driver's ``time.time()`` when it handed the job to Dask (clocks of other machines may
    differ a little: a negative queue time is counted as none)."""
    queued = max(0.0, time.time() - submitted)
    course_dir = Path(course)
    worker = getattr(_DASK_WORKERS, "worker", None)
    if worker is None or worker.course != course_dir.resolve() or worker.limits != limits:
        if worker is not None:
            worker.stop()
        worker = _DASK_WORKERS.worker = GradingWorker(course_dir, limits)
    return _with_queue(run_job(course_dir, section, student, limits, extra_args, worker=worker), queued)


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


def grade_class(
    course_dir: Path,
    sections,
    workers: int = 1,
    students=None,
    force: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    extra_args=(),
    progress: bool = True,
    scheduler: str | None = None,
) -> list[JobResult]:
    """Grade every submission of ``sections`` (or only ``students``) with ``workers`` parallel jobs.

    ``scheduler``: grade on a Dask cluster instead of this process's own worker threads (see
    :func:`_dask_client`). The course folder must then be the same path on every Dask worker (a shared
    file system), and a gradebook several machines write needs a server (PostgreSQL). Dask retries a job
    whose worker died; this process remains the one writer of the ledger.
    """
    course = Path(course_dir)
    results, todo, previous = [], [], {}
    inputs = {section: audit.grading_inputs(section) for section in sections}
    for section in sections:
        for student in students or submissions(course, section):
            folder = course / "submitted" / student / section
            if not os.path.lexists(folder):
                continue
            try:
                digest = fingerprint(folder)
            except Exception as exc:  # unreadable: the job fails on its own, with the reason
                digest = f"unreadable: {type(exc).__name__}"
            entry = read_ledger(course, section, student)
            if not force and entry and entry.get("fingerprint") == digest and entry.get("status") == "graded":
                results.append(JobResult(section, student, "skipped"))
            else:
                todo.append((section, student, digest))
                previous[section, student] = entry
    regraded = {section for (section, _), entry in previous.items() if entry}
    before = {section: audit.cell_scores(course, section) for section in regraded}  # scores a regrade may change
    if todo:
        prepare_gradebook(course)  # before any job: parallel jobs must not create it at once
    bar = tqdm(total=len(todo), desc="autograde", unit="submission", disable=not progress)
    pool = _WorkerPool(course, limits)
    began = time.perf_counter()

    def job(section, student):
        queued = time.perf_counter() - began
        return _with_queue(run_job(course, section, student, limits, extra_args, worker=pool.get()), queued)

    def record(future, section, student, digest):
        try:
            result = future.result()
        except Exception as exc:  # run_job never raises; should it ever, one submission fails, not the run
            result = JobResult(section, student, "failed", 0.0, _internal_error(exc))
        old = previous.get((section, student))
        if old and result.status == "graded":
            after = audit.cell_scores(course, section, {student}).get(student, {})
            why = audit.reasons(old, digest, inputs[section])
            changes = audit.record_changes(course, section, student, before[section].get(student, {}), after, why)
            result.changed_cells, result.flagged_cells = len(changes), sum(c["flagged"] for c in changes)
        _write_ledger(course, section, student, {"fingerprint": digest, "inputs": inputs[section], **asdict(result)})
        results.append(result)
        bar.update()
        bar.set_postfix_str(f"失败 {sum(r.status == 'failed' for r in results)}", refresh=False)

    try:
        if scheduler:
            from distributed import as_completed as dask_completed

            client, cluster = _dask_client(scheduler, workers)
            try:
                futures = {
                    client.submit(
                        _dask_job,
                        str(course.resolve()),
                        s,
                        st,
                        limits,
                        tuple(extra_args),
                        time.time(),
                        pure=False,
                        retries=1,
                    ): (s, st, d)
                    for s, st, d in todo
                }
                for future in dask_completed(futures):
                    record(future, *futures[future])
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
        else:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as threads:
                futures = {threads.submit(job, s, st): (s, st, d) for s, st, d in todo}
                for future in as_completed(futures):
                    record(future, *futures[future])
                # while the threads that started the workers still live: a worker dies with its thread
                # (PR_SET_PDEATHSIG), so stopping it after the pool has shut down would only find it killed
                pool.stop()
    finally:
        pool.stop()
        bar.close()
    return sorted(results, key=lambda r: (r.section, r.student))


def phase_lines(results: list[JobResult]) -> list[str]:
    """Where the time went: seconds per phase, summed over the graded jobs and per job."""
    graded = [r for r in results if r.status != "skipped" and r.phases]
    if not graded:
        return []
    names = ["queue", "kernel", "execute", "nbgrader"]
    totals = {n: sum(r.phases.get(n, 0.0) for r in graded) for n in names}
    parts = "，".join(f"{PHASE_NAMES[n]} {totals[n] / len(graded):.1f} s" for n in names if n != "queue")
    return [
        f"每份提交平均：{parts}；排队最长 {max(r.phases.get('queue', 0.0) for r in graded):.0f} s。",
        f"全部 {len(graded)} 份合计："
        + "，".join(f"{PHASE_NAMES[n]} {totals[n]:.0f} s" for n in names if n != "queue"),
    ]


#: phases of a job (Chinese names in the summary): kernel start/stop, executing cells, nbgrader's own work
PHASE_NAMES = {"queue": "排队", "kernel": "内核启动与结束", "execute": "执行单元", "nbgrader": "nbgrader 与评判"}


def summary_lines(course_dir: Path, results: list[JobResult]) -> list[str]:
    """Per-student scores from the gradebook, then the failures and why."""
    from autograder.ops.nbgrader_run import gradebook_scores

    lines = []
    for section in sorted({r.section for r in results}):
        scores = gradebook_scores(course_dir, section)
        for r in (r for r in results if r.section == section):
            notebooks = scores.get(r.student, {})
            got = sum(v["auto"][0] for v in notebooks.values())
            total = sum(v["auto"][1] for v in notebooks.values())
            state = {"graded": "评分完成", "skipped": "之前已评分", "failed": "失败"}[r.status]
            lines.append(
                f"{section:12s} {shown(r.student):24s} {state:6s} 自动评分 {got:6.1f}/{total:<6.1f} {r.seconds:6.1f} s"
            )
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        lines.append(f"失败 {shown(r.student)}/{r.section}: {r.error}")
    lines += phase_lines(results)
    changed, flagged = sum(r.changed_cells for r in results), sum(r.flagged_cells for r in results)
    if changed:
        lines.append(
            f"重评：{changed} 个单元的分数变了，其中 {flagged} 个被标记（同一份提交、同样的数据，分数却变了），"
            "逐条记录（旧分、新分、原因）见 assignments/.grading/audit/<作业>.jsonl。"
        )
    lines.append(
        f"共 {len(results)} 份提交：评分 {sum(r.status == 'graded' for r in results)}，"
        f"沿用之前的结果 {sum(r.status == 'skipped' for r in results)}，失败 {len(failed)}。"
    )
    if not DEFAULT_LIMITS.sandbox:
        lines.append(SANDBOX_OFF_WARNING)
    return lines
