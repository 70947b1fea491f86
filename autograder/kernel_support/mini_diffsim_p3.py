"""Kernel-side support of mini_diffsim_p3: how the graded cells call ``window_loss`` and ``train``.

They pass the task's reference step (course_lib's soft ball, not the student's stage-2 code) and the
terminal value a case names, the hidden one included. The ``train_long`` check reduces a longer, chaotic
h = 32 run to what is reproducible across machines (``course_check.adapters.long_run_summary``, which the
public checks use too). Nothing here answers a check of this notebook.
"""

from __future__ import annotations

from autograder.kernel_support.mini_diffsim_common import CLIP, TERMINAL_VALUES, task_step
from course_check.adapters import SPIKE_FACTOR, long_run_summary, stage3_train, stage3_window

#: a gradient spike: a raw norm this far above the clipping threshold
SPIKE = SPIKE_FACTOR * CLIP


def graded(name: str, student_fn):
    """The student's function as the hidden cell of check ``mini_diffsim_p3.<name>`` calls it."""
    if name == "window_loss":
        return stage3_window(student_fn, task_step, TERMINAL_VALUES)
    train = stage3_train(student_fn, task_step, TERMINAL_VALUES)
    if name == "train":
        return train
    if name == "train_long":
        return lambda *case: long_run_summary(train(*case), CLIP)
    raise KeyError(f"no wiring for mini_diffsim_p3.{name}")
