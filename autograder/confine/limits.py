"""Limits every grading kernel runs under, and the rule that grading needs the sandbox.

* time: nbgrader's per-cell timeout (``Execute.timeout``, ``assignments/nbgrader_config.py``), a
  per-notebook budget (:class:`autograder.confine.execute.SafeExecute`) and a per-submission wall-clock
  limit in the class run (:mod:`autograder.ops.classrun`); CPU seconds back the wall-clock limits up;
* memory, file size and processes: rlimits set by :mod:`autograder.confine.launcher`, which gets the whole
  :class:`Limits` as one argument (:meth:`Limits.to_json`): a new limit is a field here and its use there;
* sandbox: the same launcher confines the kernel (Landlock; as root also its own user and no network).
  ``S04_GRADING_SANDBOX=off`` grades without it (only for a machine without Landlock; the grading is
  then NOT tamper-resistant, and every entry point says so).

These apply however grading is started (``make grade``, ``python -m autograder autograde``, plain
``nbgrader autograde`` in ``assignments/``, formgrader's button): all of them run
:class:`~autograder.confine.execute.SafeExecute` from the course's nbgrader config.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass

from autograder.confine import landlock


def sandbox_wanted() -> bool:
    """Whether grading confines its kernels: read from ``S04_GRADING_SANDBOX`` each time limits are made, so a
    long-lived process (a class run, a formgrader server) follows the variable it is given, not its import."""
    return os.environ.get("S04_GRADING_SANDBOX", "on") != "off"


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
    sandbox: bool = dataclasses.field(default_factory=sandbox_wanted)

    def to_json(self) -> str:
        """Every field, as the launcher's ``--limits`` argument (:meth:`from_json` reads it back)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Limits:
        """The limits :meth:`to_json` wrote; ``ValueError`` names any field unknown, missing or of the wrong type.

        Every field must be given: a default filled in here would be the launcher's, not the grader's.
        """
        values = json.loads(text)
        if not isinstance(values, dict):
            raise ValueError(f"limits must be a JSON object, not {type(values).__name__}")
        types = typing.get_type_hints(cls)
        wrong = [f"unknown field {name!r}" for name in values if name not in types]
        wrong += [f"missing field {name!r}" for name in types if name not in values]
        if wrong:
            raise ValueError(f"limits: {', '.join(wrong)}")
        for name, value in values.items():
            # a float field set to a whole number (Limits(notebook_budget_s=30)) comes back as an int
            wanted = (int, float) if types[name] is float else types[name]
            if isinstance(value, bool) != (types[name] is bool) or not isinstance(value, wanted):
                raise ValueError(f"limits: {name} must be {types[name].__name__}, not {value!r}")
        return cls(**values)


def require_sandbox(limits: Limits | None = None) -> None:
    """Refuse to grade when the sandbox is on (``limits``, else the environment's) but this Linux kernel cannot
    provide it."""
    limits = limits or Limits()
    if limits.sandbox and landlock.abi_version() < 1:
        raise RuntimeError(
            "this Linux kernel has no Landlock, so grading kernels cannot be sandboxed and student "
            "code could read the reference data. Grade on Linux >= 5.13 with Landlock, or set "
            "S04_GRADING_SANDBOX=off to grade WITHOUT tamper resistance."
        )
