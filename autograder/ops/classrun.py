"""Grade a whole class: parallel, crash-safe and resumable, through long-lived grading workers.

A *job* is one student's submission of one section (nbgrader assignment). :func:`grade_class` puts three
parts together, each in its own module:

* the ledger (:mod:`autograder.ops.ledger`): which jobs are pending and which were graded from the current
  submission by an earlier run, and one atomically written entry per finished job, by this process alone,
  so killing the run at any moment (even SIGKILL) and starting it again grades exactly what is missing;
* an executor (:mod:`autograder.ops.executors`): this process's worker threads, or a Dask cluster with
  ``scheduler=``, each job in a long-lived grading process (:mod:`autograder.ops.worker`);
* the regrade audit (:mod:`autograder.ops.audit`) and the progress bar.

What one job does is :func:`run_job`: ``nbgrader autograde <section> --student=<id> --force`` in a grading
worker (nbgrader imported once, each notebook still in a fresh confined kernel) under the limits of
:mod:`autograder.confine.limits`, so a submission that hangs or crashes costs only itself; the seconds per
phase (queue, kernel, execution, nbgrader and verdict) go into its ledger entry.

One grading at a time per submission: each job holds the submission's lock
(:mod:`autograder.ops.submission_lock`), so a rerun after a killed Dask driver, whose workers may still
grade the dead driver's jobs, waits for them instead of grading the same student twice at once.

Whatever a student hands in costs only that submission: its files are checked before nbgrader
sees them (:mod:`autograder.ops.submission_files`: links, FIFOs, sizes, nesting, encodings, names),
and any exception a job raises is recorded as that job's failure, never the run's.
"""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm

from autograder.course.course import Course
from autograder.ops import audit
from autograder.confine.limits import SANDBOX_OFF_WARNING, Limits, require_sandbox, sandbox_wanted
from autograder.ops.executors import DaskExecutor, Executor, ThreadExecutor
from autograder.ops.ledger import Job, JobResult, Ledger, read_ledger  # noqa: F401 (JobResult, read_ledger: API)
from autograder.ops.submission_files import fingerprint, precheck, shown, submission_problem  # noqa: F401 (API)
from autograder.ops.nbgrader_run import prepare_gradebook
from autograder.ops.submission_lock import SubmissionBusy, graded_alone
from autograder.ops.worker import GradingWorker


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


def run_job(course: Course | Path, section: str, student: str, limits: Limits, extra_args=(), worker=None) -> JobResult:
    """Autograde one submission of ``course`` (or of the course in that folder) in ``worker`` (a
    :class:`~autograder.ops.worker.GradingWorker`; a fresh one for this job when ``None``); never raises."""
    try:
        return _run_job(Course.of(course), section, student, limits, extra_args, worker)
    except Exception as exc:  # a bug of ours, or a file system error: this submission fails, with why
        return JobResult.crashed(section, student, exc)


def _run_job(course: Course, section: str, student: str, limits: Limits, extra_args, worker) -> JobResult:
    problem = submission_problem(course, section, student)
    if problem:
        return JobResult(section, student, "failed", 0.0, problem)
    require_sandbox(limits)  # refuses to grade without the sandbox, before any kernel starts
    # Another process may still grade this submission (a killed Dask driver's job, a second class run):
    # wait for it, then grade again. Its own two attempts are bounded by the submission limit.
    asked = time.perf_counter()
    try:
        with graded_alone(course.folder, section, student, wait_s=2 * limits.submission_timeout_s + 60):
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


def _grade_locked(course: Course, section: str, student: str, limits: Limits, extra_args, worker) -> JobResult:
    own = worker is None
    worker = worker or GradingWorker(course.folder, limits)
    log_path = course.folder / ".grading" / "logs" / section / f"{student}.log"
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
        f"{explain_failure(outcome.log)}（nbgrader 日志：{log_path.relative_to(course.folder)}）",
        outcome.phases,
    )


def grade_class(
    course: Course | Path,
    sections,
    workers: int = 1,
    students=None,
    force: bool = False,
    limits: Limits | None = None,
    extra_args=(),
    progress: bool = True,
    scheduler: str | None = None,
) -> list[JobResult]:
    """Grade every submission of ``sections`` (or only ``students``) with ``workers`` parallel jobs.

    ``scheduler``: grade on a Dask cluster instead of this process's own worker threads (see
    :class:`~autograder.ops.executors.DaskExecutor`). The course folder must then be the same path on every
    Dask worker (a shared file system), and a gradebook several machines write needs a server (PostgreSQL).
    Dask retries a job whose worker died; this process remains the one writer of the ledger.
    """
    course = Course.of(course)
    limits = limits or Limits()  # the sandbox switch as the environment says now
    ledger = Ledger(course, sections, students, force)
    regraded = {job.section for job in ledger.pending if ledger.previous[job]}
    before = {section: audit.cell_scores(course, section) for section in regraded}  # scores a regrade may change
    if ledger.pending:
        prepare_gradebook(course)  # before any job: parallel jobs must not create it at once
    bar = tqdm(total=len(ledger.pending), desc="autograde", unit="submission", disable=not progress)

    def record(job: Job, result: JobResult) -> None:
        old = ledger.previous[job]
        if old and result.status == "graded":
            after = audit.cell_scores(course, job.section, {job.student}).get(job.student, {})
            why = audit.reasons(old, job.fingerprint, ledger.inputs[job.section])
            was = before[job.section].get(job.student, {})
            changes = audit.record_changes(course.folder, job.section, job.student, was, after, why)
            result.changed_cells, result.flagged_cells = len(changes), sum(c["flagged"] for c in changes)
        ledger.record(job, result)
        bar.update()
        bar.set_postfix_str(f"失败 {ledger.failed}", refresh=False)

    # run_job is handed in: the executors sit below this module, and Dask ships it to its workers by name
    executor: Executor = (
        DaskExecutor(run_job, course, limits, tuple(extra_args), scheduler, workers)
        if scheduler
        else ThreadExecutor(run_job, course, limits, tuple(extra_args), workers)
    )
    try:
        executor.run(ledger.pending, record)
    finally:
        bar.close()
    return ledger.results()


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


def summary_lines(course: Course | Path, results: list[JobResult]) -> list[str]:
    """Per-student scores from the gradebook, then the failures and why."""
    from autograder.ops.nbgrader_run import gradebook_scores

    course = Course.of(course)
    lines = []
    for section in sorted({r.section for r in results}):
        scores = gradebook_scores(course, section)
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
    if not sandbox_wanted():
        lines.append(SANDBOX_OFF_WARNING)
    return lines
