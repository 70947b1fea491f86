"""Limits every grading kernel runs under, and the rule that grading needs the sandbox.

* time: nbgrader's per-cell timeout (``Execute.timeout``, ``assignments/nbgrader_config.py``), a
  per-notebook budget (:class:`autograder.confine.execute.SafeExecute`) and a per-submission wall-clock
  limit in the class run (:mod:`autograder.ops.classrun`); CPU seconds back the wall-clock limits up;
* memory, file size and processes: rlimits set by :mod:`autograder.confine.launcher`;
* sandbox: the same launcher confines the kernel (Landlock; as root also its own user and no network).
  ``S04_GRADING_SANDBOX=off`` grades without it (only for a machine without Landlock; the grading is
  then NOT tamper-resistant, and every entry point says so).

These apply however grading is started (``make grade``, ``python -m autograder autograde``, plain
``nbgrader autograde`` in ``assignments/``, formgrader's button): all of them run
:class:`~autograder.confine.execute.SafeExecute` from the course's nbgrader config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from autograder.confine import landlock

SANDBOX_OFF_WARNING = "警告：S04_GRADING_SANDBOX=off，评分内核没有沙箱，学生代码可以读取参考数据：这次评分不防作弊。"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * 2**30  # address space; JAX on CPU grades comfortably within 3 GiB
    file_bytes: int = 64 * 2**20  # largest file a kernel may write
    cpu_seconds: int = 1200  # a backstop: the notebook budget ends a runaway notebook long before
    max_processes: int = 512  # processes and threads of one kernel (XLA starts a few per core)
    # wall-clock budgets of SafeExecute: an honest notebook needs 5-40 s even on a loaded 2-core machine,
    # a submission of 4 notebooks under 3 min; a submission whose every cell loops stops after these
    notebook_budget_s: float = 150.0  # all cells of one notebook
    submission_budget_s: float = 360.0  # all notebooks of one student's section, in one nbgrader run
    submission_timeout_s: float = 900.0  # the class run's backstop: it kills that student's nbgrader
    sandbox: bool = os.environ.get("S04_GRADING_SANDBOX", "on") != "off"


DEFAULT_LIMITS = Limits()


def require_sandbox(limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse to grade when the sandbox is on but this Linux kernel cannot provide it."""
    if limits.sandbox and landlock.abi_version() < 1:
        raise RuntimeError(
            "this Linux kernel has no Landlock, so grading kernels cannot be sandboxed and student "
            "code could read the reference data. Grade on Linux >= 5.13 with Landlock, or set "
            "S04_GRADING_SANDBOX=off to grade WITHOUT tamper resistance."
        )
