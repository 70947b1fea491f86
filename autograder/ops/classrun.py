"""Grade a whole class: parallel, crash-safe and resumable, one nbgrader run per submission.

A *job* is one student's submission of one section (nbgrader assignment). Each job runs
``nbgrader autograde <section> --student <id> --force`` in its own process under the
limits of :mod:`autograder.confine.limits`, so a submission that hangs or crashes costs only
itself. When a job ends, a small ledger entry
``<course>/.grading/ledger/<section>/<student>.json`` is written atomically with the
fingerprint (SHA-256) of the submitted files and the outcome.

Resuming: a job whose ledger entry says it was graded from the current submission is
skipped (failed jobs are tried again), so killing
the run at any moment (even SIGKILL) and starting it again grades exactly what is missing.
A job killed half-way has no ledger entry and is graded again with ``--force``, which
overwrites its partial results in the gradebook: nbgrader keys grades by (student,
assignment, notebook, cell), so nothing is duplicated and nothing graded is lost.

Whatever a student hands in costs only that submission: its files are checked before nbgrader
sees them (:mod:`autograder.ops.submission_files`: links, FIFOs, sizes, nesting, encodings, names),
and any exception a job raises is recorded as that job's failure, never the run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from autograder.confine.limits import DEFAULT_LIMITS, SANDBOX_OFF_WARNING, Limits, grading_env
from autograder.ops.submission_files import fingerprint, precheck, shown, submission_problem  # noqa: F401 (precheck: API)

_PR_SET_PDEATHSIG = 1


@dataclass
class JobResult:
    section: str
    student: str
    status: str  # "graded", "failed" or "skipped" (graded by an earlier run)
    seconds: float = 0.0
    error: str = ""


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


# Runs nbgrader after asking the kernel to SIGKILL it when the class run dies, so a killed run's
# nbgrader processes cannot keep grading behind a rerun's back. (A prctl in a small exec wrapper,
# because preexec_fn is unsafe in a process with threads.) Off Linux the wrapper just execs.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    f"    ctypes.CDLL('libc.so.6').prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL)\n"
    "except OSError:\n"
    "    pass\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


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


def run_job(course_dir: Path, section: str, student: str, limits: Limits, extra_args=()) -> JobResult:
    """Autograde one submission in its own nbgrader process; never raises."""
    try:
        return _run_job(Path(course_dir), section, student, limits, extra_args)
    except Exception as exc:  # a bug of ours, or a file system error: this submission fails, with why
        return JobResult(section, student, "failed", 0.0, _internal_error(exc))


def _internal_error(exc: BaseException) -> str:
    return (
        f"评分程序处理这份提交时出错（{type(exc).__name__}: {shown(str(exc))[:200]}），这份提交没有评分；"
        "其他学生不受影响。请把这条信息报告给课程维护者。"
    )


def _run_job(course: Path, section: str, student: str, limits: Limits, extra_args) -> JobResult:
    problem = submission_problem(course, section, student)
    if problem:
        return JobResult(section, student, "failed", 0.0, problem)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, **grading_env(course, limits), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    args = [
        sys.executable,
        "-c",
        _DIE_WITH_PARENT,
        # --student=<id>: an id such as "-x" must not read as an option (submission_problem rules out globs)
        os.path.join(bin_dir, "nbgrader"),
        "autograde",
        section,
        f"--student={student}",
        "--force",
        *extra_args,
    ]
    log_path = course / ".grading" / "logs" / section / f"{student}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    # One retry: SQLite may refuse a write while another worker commits, and a loaded machine can
    # fail to start a kernel. A deterministic failure fails twice and is reported.
    for attempt in range(2):
        proc = subprocess.Popen(
            args,
            cwd=course,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        try:
            log, _ = proc.communicate(timeout=limits.submission_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # nbgrader and the student's kernel with it
            proc.communicate()
            return JobResult(
                section,
                student,
                "failed",
                time.perf_counter() - start,
                f"整份作业的评分超过了 {limits.submission_timeout_s:.0f} 秒的上限，已被终止。",
            )
        log_path.write_text(log, encoding="utf-8")  # nbgrader's full log, for the instructor
        if proc.returncode == 0:
            return JobResult(section, student, "graded", time.perf_counter() - start)
    return JobResult(
        section,
        student,
        "failed",
        time.perf_counter() - start,
        f"{explain_failure(log)}（nbgrader 日志：{log_path.relative_to(course)}）",
    )


def grade_class(
    course_dir: Path,
    sections,
    workers: int = 1,
    students=None,
    force: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    extra_args=(),
    progress: bool = True,
) -> list[JobResult]:
    """Grade every submission of ``sections`` (or only ``students``) with ``workers`` parallel jobs."""
    course = Path(course_dir)
    results, todo = [], []
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
    bar = tqdm(total=len(todo), desc="autograde", unit="submission", disable=not progress)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(run_job, course, s, st, limits, extra_args): (s, st, d) for s, st, d in todo}
        for future in as_completed(futures):
            section, student, digest = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # run_job never raises; should it ever, one submission fails, not the run
                result = JobResult(section, student, "failed", 0.0, _internal_error(exc))
            _write_ledger(course, section, student, {"fingerprint": digest, **asdict(result)})
            results.append(result)
            bar.update()
    bar.close()
    return sorted(results, key=lambda r: (r.section, r.student))


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
    lines.append(
        f"共 {len(results)} 份提交：评分 {sum(r.status == 'graded' for r in results)}，"
        f"沿用之前的结果 {sum(r.status == 'skipped' for r in results)}，失败 {len(failed)}。"
    )
    if not DEFAULT_LIMITS.sandbox:
        lines.append(SANDBOX_OFF_WARNING)
    return lines
