"""The class run's ledger: which submissions are graded, which are pending, and each outcome, on disk.

A *job* is one student's submission of one section. When a job ends, the class run (the one writer of the
ledger) records it in ``<course>/.grading/ledger/<section>/<student>.json``, written atomically, with the
fingerprint (SHA-256) of the submitted files, the grading inputs (:func:`autograder.ops.audit.grading_inputs`),
the outcome and the seconds per phase.

Resuming: a job whose entry says it was graded from the current submission is skipped (failed jobs are
tried again), so killing the run at any moment (even SIGKILL) and starting it again grades exactly what is
missing. A job killed half-way has no entry and is graded again with ``--force``, which overwrites its partial
results in the gradebook: nbgrader keys grades by (student, assignment, notebook, cell), so nothing is
duplicated and nothing graded is lost. A :class:`Ledger` records each pending job exactly once.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.course.course import Course
from autograder.ops import audit
from autograder.ops.submission_files import fingerprint, shown


@dataclass(frozen=True)
class Job:
    section: str
    student: str
    fingerprint: str  # of the submitted files when the run began (or why they could not be read)


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

    @classmethod
    def crashed(cls, section: str, student: str, exc: BaseException) -> JobResult:
        """The failure of a job that raised (a bug of ours, a file system error): this submission alone fails."""
        return cls(section, student, "failed", 0.0, internal_error(exc))


def internal_error(exc: BaseException) -> str:
    return (
        f"评分程序处理这份提交时出错（{type(exc).__name__}: {shown(str(exc))[:200]}），这份提交没有评分；"
        "其他学生不受影响。请把这条信息报告给课程维护者。"
    )


def _entry_path(course_dir: Path, section: str, student: str) -> Path:
    return Path(course_dir) / ".grading" / "ledger" / section / f"{student}.json"


def read_ledger(course_dir: Path, section: str, student: str) -> dict | None:
    try:
        entry = json.loads(_entry_path(course_dir, section, student).read_text())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _write_entry(course_dir: Path, section: str, student: str, entry: dict) -> None:
    path = _entry_path(course_dir, section, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(entry, indent=1))  # ASCII: a student's name may hold undecodable bytes
    os.replace(tmp, path)  # atomic: a reader sees the old entry or the new one, never half of one


class Ledger:
    """One class run's record: the jobs still to grade, their earlier entries, and every result so far.

    Built from the ledger on disk: each submission of ``sections`` (of ``students``, or of every student with
    anything at ``submitted/<student>/<section>``: a link or a file too, which fail with a reason) is either
    skipped (graded from the same files before, unless ``force``) or pending. :meth:`record` writes a pending job's
    entry and keeps its result; each pending job is recorded once, and nothing else is."""

    def __init__(self, course: Course | Path, sections, students=None, force: bool = False):
        self.course = Course.of(course)
        self.inputs = {section: audit.grading_inputs(section) for section in sections}
        self.pending: list[Job] = []
        self.previous: dict[Job, dict | None] = {}  # a pending job's entry from an earlier run
        self._results: list[JobResult] = []
        planned = set()
        for section in sections:
            for student in students or self.course.submitters(section):
                folder = self.course.submitted(student, section)
                if (section, student) in planned or not os.path.lexists(folder):
                    continue  # a student or section named twice is still one job
                planned.add((section, student))
                try:
                    digest = fingerprint(folder)
                except Exception as exc:  # unreadable: the job fails on its own, with the reason
                    digest = f"unreadable: {type(exc).__name__}"
                entry = read_ledger(self.course.folder, section, student)
                if not force and entry and entry.get("fingerprint") == digest and entry.get("status") == "graded":
                    self._results.append(JobResult(section, student, "skipped"))
                else:
                    job = Job(section, student, digest)
                    self.pending.append(job)
                    self.previous[job] = entry
        self._open = set(self.pending)

    def record(self, job: Job, result: JobResult) -> None:
        """Write ``job``'s entry atomically and keep ``result``; a job recorded twice or never pending is a bug."""
        if job not in self._open:
            raise ValueError(f"{job} is not pending: recorded twice, or not part of this run")
        entry = {"fingerprint": job.fingerprint, "inputs": self.inputs[job.section], **asdict(result)}
        _write_entry(self.course.folder, job.section, job.student, entry)
        self._open.discard(job)
        self._results.append(result)

    @property
    def failed(self) -> int:
        return sum(r.status == "failed" for r in self._results)

    def results(self) -> list[JobResult]:
        """Every result so far (skipped ones included), by section and student."""
        return sorted(self._results, key=lambda r: (r.section, r.student))
