"""Kernel-side support of mini_diffsim_p3: how the graded cells call ``window_loss`` and ``train``.

They pass the task's reference step (course_lib's soft ball, not the student's stage-2 code) and the hidden
terminal value. The ``train_long`` check reduces a longer, chaotic h = 32 run to what is reproducible across
machines (:func:`long_run_summary`). Nothing here answers a check of this notebook.
"""

from __future__ import annotations

import numpy as np

from autograder.kernel_support.mini_diffsim_common import CLIP, task_step, terminal_value

#: iterations of the long run compared value by value (reproducible: see autograder.authoring.reference.mini_diffsim)
LONG_PREFIX = 4
#: a gradient spike: a raw norm this far above the clipping threshold
SPIKE = 10.0 * CLIP


def long_run_summary(result):
    """What check ``train_long`` compares of ``train``'s result ``(grad_norms, clipped_norms, losses, eval_losses)``.

    Returns the raw gradient norms and window losses of the first LONG_PREFIX iterations, shape
    (2, LONG_PREFIX), then four 0/1 properties: no NaN/Inf anywhere; a spike > SPIKE among the raw norms;
    clipped norms = min(raw norms, CLIP); evaluation loss lower after training. Each property is judged on
    the finite entries, so a run that ends in NaN fails the first (and the last) only.
    """
    try:
        norms, clipped, losses, evals = (np.asarray(a, dtype=np.float64) for a in result)
        prefix = np.stack([norms[:LONG_PREFIX], losses[:LONG_PREFIX]])
        both = np.isfinite(norms) & np.isfinite(clipped)
        finite_norms = norms[np.isfinite(norms)]
        flags = (
            all(np.all(np.isfinite(a)) for a in (norms, clipped, losses, evals)),
            finite_norms.size > 0 and np.max(finite_norms) > SPIKE,
            np.any(both) and np.allclose(clipped[both], np.minimum(norms[both], CLIP), rtol=1e-9, atol=0),
            evals.shape == (2,) and np.all(np.isfinite(evals)) and evals[1] < evals[0],
        )
    except (TypeError, ValueError, IndexError):
        raise ValueError(
            "train must return four arrays (grad_norms, clipped_norms, losses, eval_losses), "
            "the first three of length n_iterations"
        ) from None
    return (prefix, *(np.int64(f) for f in flags))


def graded(name: str, student_fn):
    """The student's function as the hidden cell of check ``mini_diffsim_p3.<name>`` calls it."""
    if name == "window_loss":

        def window(theta, x_starts, horizon, value):
            loss, (terms, states) = student_fn(theta, x_starts, int(horizon), task_step, terminal_value(value))
            return loss, terms, states

        return window

    def train(horizon, n_iterations, seed, value):
        return student_fn(int(horizon), int(n_iterations), int(seed), task_step, terminal_value(value))

    if name == "train":
        return train
    if name == "train_long":
        return lambda horizon, n_iterations, seed, value: long_run_summary(train(horizon, n_iterations, seed, value))
    raise KeyError(f"no wiring for mini_diffsim_p3.{name}")
