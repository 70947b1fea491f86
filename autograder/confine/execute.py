"""Execution of a submission in the confined grading kernel, within time budgets, surviving a kernel that dies.

:class:`SafeExecute` is nbgrader's ``Execute`` with these changes:

* the kernel is always the confined one (:func:`autograder.confine.kernel.confined_kernel`), whatever
  kernel the notebook's metadata names and however grading was started (the course's nbgrader config
  installs this preprocessor for ``nbgrader autograde`` and formgrader alike), and nothing it started
  outlives the notebook;
* time budgets: besides nbgrader's per-cell timeout, all cells of one notebook share
  ``notebook_budget_s`` and all notebooks of one student's section ``submission_budget_s`` (defaults in
  :class:`autograder.confine.limits.Limits`; nbgrader options ``--SafeExecute.notebook_budget_s=...``).
  When a budget is spent the remaining cells are not run (graded ones score zero), the cells graded
  before keep their points, and the feedback names the cell that ran out of time. So a submission
  whose every cell loops forever costs minutes, not the class run's whole limit;
* a dead kernel (``os._exit``, a segfault, the memory or CPU limit) no longer aborts the whole
  submission, so the student would lose every grade of the section: the death is recorded in the cell
  where it happened and every later code cell is marked with an error, so the unexecuted graded cells
  score zero (nbgrader gives full marks to a graded cell without an error);
* the notebook's name reaches the launcher, so the kernel may read that exercise's support module
  (``autograder/kernel_support/<exercise>.py``, see :mod:`autograder.confine.landlock`);
* the instructor's JAX compilation cache (``compile_cache``, set in the course's nbgrader config) is
  verified against its manifest before each kernel and handed to it read-only, or left out with the
  reason logged (:mod:`autograder.confine.compile_cache`);
* code cells tagged :data:`SKIP_TAG` (the public checks, the self-checks, exploration and plots) are not
  run: they cannot change a mark and would only spend the budgets. A graded cell always runs, whatever
  its tags (a graded cell that did not run would score zero, never more:
  :mod:`autograder.verdict.preprocessors`; a student who tags an answer cell only loses its functions);
  ``tests/test_skipped_cells.py`` proves that no cell that runs needs a name only a skipped cell defines;
* a notebook without any code cell to run (written answers only, as handed in) starts no kernel at all;
* the time each notebook spends starting its kernel and executing its cells is reported to whoever
  records phases around the run (:func:`recording_phases`; the class run's workers do, per submission).

Grading state belongs to one autograde run, never to the process: the seconds a student's section has
spent live on the run's nbgrader converter (:class:`GradingRun`), which a command, a formgrader click or a
class-run job creates afresh. Formgrader's Jupyter server lives for days and regrades a student as often
as a TA clicks; each regrade starts with the full budget.
"""

from __future__ import annotations

import copy
import contextlib
import os
import time
from pathlib import Path
from contextvars import ContextVar
from dataclasses import dataclass, field

from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.converters.base import BaseConverter
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Unicode

from autograder.confine.compile_cache import ENTRIES, MANIFEST, verified_entries
from autograder.confine.kernel import confined_kernel
from autograder.confine.limits import Limits


@dataclass
class GradingRun:
    """What one autograde run accumulates: seconds spent per (student, assignment), against the section budget."""

    spent: dict[tuple, float] = field(default_factory=dict)


def grading_run(preprocessor) -> GradingRun:
    """The run ``preprocessor`` works for, kept on its nbgrader converter (preprocessor -> exporter -> converter).

    nbgrader makes a new preprocessor for every notebook but one converter per run, so the converter is
    where a budget shared by a student's notebooks can live and die with the run. A preprocessor used
    outside any converter is a run of its own.
    """
    owner = preprocessor
    node = preprocessor.parent
    while node is not None:
        if isinstance(node, BaseConverter):
            owner = node
            break
        node = node.parent
    run = getattr(owner, "_grading_run", None)
    if run is None:
        run = GradingRun()
        owner._grading_run = run
    return run


#: where the caller of a run collects seconds by phase ("kernel": start and end of kernels, "execute": cells)
_PHASES: ContextVar[dict[str, float] | None] = ContextVar("grading_phases", default=None)


@contextlib.contextmanager
def recording_phases():
    """Collect the seconds by phase of the grading done inside the ``with`` body (in this thread) into the yielded dict."""
    phases: dict[str, float] = {}
    token = _PHASES.set(phases)
    try:
        yield phases
    finally:
        _PHASES.reset(token)


def _add_phase(name: str, seconds: float) -> None:
    phases = _PHASES.get()
    if phases is not None:
        phases[name] = phases.get(name, 0.0) + seconds


KERNEL_DIED = (
    "内核在执行这个单元时意外退出（例如调用了 os._exit 等强制退出、段错误，"
    "或超出了评分时的内存、CPU 时间或进程数上限）。之前单元的得分保留；之后的单元都没有执行，计 0 分。"
)
NOT_RUN = "没有执行：内核在前面的单元里意外退出（见上方第一个报错的单元）。"
TIMED_OUT = "CellTimeoutError"
#: the tag of a code cell that grading does not run (set in the source notebooks, see skipped_when_grading)
SKIP_TAG = "skip-in-grading"
SKIPPED = "评分时不运行这个单元（公开检查、自检或探索单元，不计分，也不占评分时间）。"


def skipped_when_grading(cell) -> bool:
    """Whether grading leaves this code cell unrun: it is tagged :data:`SKIP_TAG` and is not a graded cell
    (graded cells always run, whatever tags a submission adds)."""
    tagged = SKIP_TAG in cell.metadata.get("tags", [])
    return cell.cell_type == "code" and tagged and not cell.metadata.get("nbgrader", {}).get("grade")


def _error(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


def _cell_name(cell, index: int) -> str:
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    return f"“{grade_id}”" if grade_id else f"第 {index + 1} 个单元"


class SafeExecute(Execute):
    """``Execute`` in the confined kernel, with time budgets, turning a dead kernel into per-cell errors."""

    notebook_budget_s = Float(Limits.notebook_budget_s, help="Seconds for all cells of one notebook.").tag(config=True)
    submission_budget_s = Float(
        Limits.submission_budget_s, help="Seconds for all notebooks of one student's assignment."
    ).tag(config=True)
    compile_cache = Unicode(
        "",
        help="Root of the instructor's sealed JAX compilation cache (autograder.confine.compile_cache); '' for none.",
    ).tag(config=True)
    fork_kernels = Bool(
        True,
        help="Fork each grading kernel from a warm zygote (autograder.confine.zygote) instead of starting a new "
        "interpreter; False launches every kernel from nothing (slower, equally confined).",
    ).tag(config=True)

    def _verified_cache(self):
        if not self.compile_cache:
            return None
        entries, why = verified_entries(self.compile_cache)
        if entries is None:  # slower, same marks; a cache that fails verification is worth a warning
            sealed = any(os.path.lexists(os.path.join(self.compile_cache, n)) for n in (ENTRIES, MANIFEST))
            (self.log.warning if sealed else self.log.info)("grading without the compilation cache: %s", why)
        return entries

    def preprocess(self, nb, resources=None, km=None):
        resources = resources or {}
        for cell in nb.cells:
            if skipped_when_grading(cell):
                cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=SKIPPED + "\n")]
        if not any(cell.cell_type == "code" and not skipped_when_grading(cell) for cell in nb.cells):
            return nb, resources  # nothing to run (written answers only, or only skipped cells): no kernel
        meta = resources.get("nbgrader") or {}
        self._submission = (meta.get("student"), meta.get("assignment"))
        self._cell_timeout = self.timeout
        self._kernel_died = False
        self._stopped = ""  # the Chinese reason once a budget is spent
        self._timed_out: list[str] = []
        self._executing = 0.0  # seconds inside cells; the rest of this notebook's time is its kernel's
        start = time.monotonic()
        self._run = grading_run(self)
        spent = self._run.spent.get(self._submission, 0.0)
        self._deadline = start + min(self.notebook_budget_s, max(0.0, self.submission_budget_s - spent))
        exercise = (resources.get("metadata") or {}).get("name", "")
        try:
            cache = self._verified_cache()
            with confined_kernel(exercise, Limits(), cache, fork=self.fork_kernels, log=self.log) as confined:
                try:
                    return super().preprocess(nb, resources, confined)
                finally:  # nbclient leaves a kernel it did not create running; confined_kernel ends it
                    if getattr(self, "kc", None) is not None:
                        self.kc.stop_channels()
                    self.kc = self.km = None
        finally:
            self.timeout = self._cell_timeout
            total = time.monotonic() - start
            self._run.spent[self._submission] = spent + total
            _add_phase("kernel", total - self._executing)
            _add_phase("execute", self._executing)

    def _budget_reason(self) -> str:
        spent = self._run.spent.get(self._submission, 0.0)
        which = (
            f"整份作业（同一节的所有 notebook）共 {self.submission_budget_s:.0f} 秒"
            if spent + self.notebook_budget_s > self.submission_budget_s
            else f"这个 notebook 共 {self.notebook_budget_s:.0f} 秒"
        )
        late = f"超时的单元：{'、'.join(self._timed_out)}。" if self._timed_out else ""
        return f"没有执行：评分时间上限（{which}）已经用完。{late}之前单元的得分保留。"

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or skipped_when_grading(cell):
            return cell, resources
        if self._kernel_died:
            cell.outputs = [_error("KernelNotRunning", NOT_RUN)]
            return cell, resources
        remaining = self._deadline - time.monotonic()
        if self._stopped or remaining < 1:
            self._stopped = self._stopped or self._budget_reason()
            cell.outputs = [_error("GradingTimeBudget", self._stopped)]
            return cell, resources
        self.timeout = int(max(1, min(self._cell_timeout or remaining, remaining)))
        began = time.monotonic()
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._kernel_died = True
            cell.outputs.append(_error("KernelDied", KERNEL_DIED))
            return cell, resources
        finally:
            self._executing += time.monotonic() - began
        if any(o.get("output_type") == "error" and o.get("ename") == TIMED_OUT for o in cell.outputs):
            self._timed_out.append(_cell_name(cell, index))
        return cell, resources


def kernel_settings(config, extra_args=()) -> tuple[bool, Path | None]:
    """``(fork_kernels, verified compilation cache or None)`` as :class:`SafeExecute` will see them when
    ``nbgrader autograde ... <extra_args>`` runs with the course's nbgrader ``config`` (its ``nbgrader_config.py``,
    read by the caller) and the ``--SafeExecute.*`` arguments. The class run starts the one zygote its workers
    share for these; a worker that sees other settings starts its own
    (:meth:`autograder.confine.zygote_registry.ZygoteRegistry.get`)."""
    from traitlets.config.loader import KVArgParseConfigLoader

    merged = copy.deepcopy(config)  # the caller's config stays as it was read (merge shares its sections)
    merged.merge(KVArgParseConfigLoader([a for a in extra_args if a.startswith("--SafeExecute.")]).load_config())
    executor = SafeExecute(config=merged)
    return executor.fork_kernels, (executor._verified_cache() if executor.fork_kernels else None)
