"""Execution of a submission in the confined grading kernel, surviving a kernel that dies.

:class:`SafeExecute` is nbgrader's ``Execute`` with two changes. nbgrader's own lets a dead kernel
(``os._exit``, a segfault, the memory limit) abort the whole submission, so the student loses every
grade of the section, and the class run logs a traceback. This one records the death in the cell
where it happened and marks every later code cell with an error, so the cells graded before keep
their points, the unexecuted graded cells score zero (nbgrader gives full marks to a graded cell
without an error), and the feedback says what happened. It also passes the notebook's name to the
grading kernel, which may then read that exercise's support module
(``autograder/kernel_support/<exercise>.py``, see :mod:`autograder.confine.landlock`).
"""

from __future__ import annotations

from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute

from autograder.confine.landlock import EXERCISE_ARGUMENT


def _error(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


KERNEL_DIED = ("内核在执行这个单元时意外退出（例如调用了 os._exit / sys.exit 之外的强制退出、段错误，"
               "或超出了评分时的内存上限）。之前单元的得分保留；之后的单元都没有执行，计 0 分。")
NOT_RUN = "没有执行：内核在前面的单元里意外退出（见上方第一个报错的单元）。"


def _error(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


class SafeExecute(Execute):
    """``Execute`` that turns a dead kernel into per-cell errors instead of a failed submission."""

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_died = False
        # tell the kernel launcher which exercise it grades: it may read that exercise's support module only
        name = ((resources or {}).get("metadata") or {}).get("name", "")
        base = [a for a in self.extra_arguments if not a.startswith(EXERCISE_ARGUMENT)]
        self.extra_arguments = base + ([EXERCISE_ARGUMENT + name] if name else [])
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._kernel_died:
            cell.outputs = [_error("KernelNotRunning", NOT_RUN)]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._kernel_died = True
            cell.outputs.append(_error("KernelDied", KERNEL_DIED))
            return cell, resources
