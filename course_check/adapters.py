"""How a check calls a student's function when the notebook's own function is not called directly.

Grading (the hidden cells, in the sandboxed kernel) and the public checks wrap the same way; nothing here
answers a check.

S04.5: ``kink_as_subgradient`` grades the slope of a penalty force at the kink phi = 0 as what it is: any
value of the subdifferential [-k, 0] is right (jax.grad happens to give -k/4; other conventions are as valid).

Mini-DiffSim: a stage's graded functions receive the earlier stages' pieces as arguments, so an earlier
stage's bug is not charged again. ``with_pieces`` passes them after the case's inputs; the stage-3 and
stage-4 wrappers also turn the case's terminal-value *name* into a function (grading knows one more than the
public cases use) and ``long_run_summary`` reduces a long, chaotic training run to what is reproducible.

S04.6:

``count_loss_calls`` measures how many loss evaluations a student's ``directional_checks`` makes;
``boolean_as_codes`` turns the boolean answer of ``ad_fd_disagreement`` into non-zero codes, so the
comparison never meets an all-zero (all-agree) result it would misdiagnose.
``count_passes`` (s04_6_ex4) builds the hidden map ``f`` from a case's ``(n_steps, sample_steps)`` with the
notebook's own ``pendulum_map`` and returns the student's result with the forward and reverse passes it made
through the notebook's counting ``forward_pass`` / ``reverse_pass``.
"""

from __future__ import annotations

import numpy as np

NO_CALLS = -1
DISAGREE_CODE, AGREE_CODE = 1.0, 2.0


def count_loss_calls(student_fn, loss):
    """Wrap the student's ``directional_checks`` for grading: ``(rows, measured loss calls)``.

    ``loss`` is the notebook's counting loss; it is reset before every call, so the count is
    measured per hidden case whatever ran before. A count of 0 is reported as :data:`NO_CALLS`.
    """

    def graded(u, directions, eps):
        loss.reset()
        rows = student_fn(u, directions, eps)
        return rows, (loss.calls if loss.calls else NO_CALLS)

    return graded


def flags_as_codes(flags):
    return np.where(np.asarray(flags, dtype=bool), DISAGREE_CODE, AGREE_CODE)


def boolean_as_codes(student_fn):
    """Wrap the student's ``ad_fd_disagreement`` for grading: its boolean (or 0/1) answer becomes codes.

    Anything else (wrong arity, floats, strings) is passed on unchanged, so ``grade`` reports it as usual.
    """

    def graded(points, eps, tol):
        result = student_fn(points, eps, tol)
        if isinstance(result, (tuple, list)) and len(result) == 2:
            try:
                flags = np.asarray(result[1])
            except Exception:  # noqa: BLE001 - leave it to grade() to report
                return result
            if flags.dtype == bool or (np.issubdtype(flags.dtype, np.integer) and np.isin(flags, (0, 1)).all()):
                return result[0], flags_as_codes(flags)
        return result

    return graded


def count_passes(student_fn, make_map, passes):
    """Wrap a student function of ``(f, x, *rest)`` for grading: ``(its result, [forward, reverse] passes)``.

    ``make_map(n_steps, sample_steps)`` is the notebook's map factory and ``passes`` its counter dict
    (``{"forward": 0, "reverse": 0}``), zeroed before every call, so each hidden case is counted on its own.
    """

    def graded(x, n_steps, sample_steps, *rest):
        for mode in passes:
            passes[mode] = 0
        result = student_fn(make_map(n_steps, sample_steps), x, *rest)
        return result, np.array([passes["forward"], passes["reverse"]])

    return graded


def kink_as_subgradient(student_fn):
    """Wrap the student's ``penalty_contact(phi, k) -> (lam, slope)`` for grading: ``(lam, slope where
    phi != 0 (0 at phi = 0), how far the slopes at phi = 0 lie outside [-k, 0], divided by k)``.

    A result that is not a pair with a slope shaped like ``phi`` raises a TypeError that says so (the
    feedback quotes it; the outputs of this wrapper are not the student's to count).
    """
    shape_error = "penalty_contact must return two arrays shaped like phi: (lam, dlam_dphi)"

    def graded(phi, k):
        result = student_fn(phi, k)
        try:
            lam, slope = result
            slope, phi_arr = np.asarray(slope, dtype=np.float64), np.asarray(phi, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(shape_error) from None
        if slope.shape != phi_arr.shape:
            raise TypeError(shape_error)
        kink = phi_arr == 0
        at_kink = slope[kink]
        outside = np.maximum(at_kink, 0.0) + np.maximum(-k - at_kink, 0.0)
        return lam, np.where(kink, 0.0, slope), np.max(outside, initial=0.0) / k

    return graded


# --- Mini-DiffSim ----------------------------------------------------------------------------------

#: iterations of the long stage-3 run compared value by value (reproducible across machines: see
#: autograder.authoring.reference.mini_diffsim); a gradient spike is a raw norm SPIKE_FACTOR x the clip
LONG_PREFIX = 4
SPIKE_FACTOR = 10.0


def with_pieces(student_fn, *pieces):
    """The student's function called with the case's inputs, then ``pieces`` (an integrator, a plateau finder)."""
    return lambda *inputs: student_fn(*inputs, *pieces)


def stage3_window(student_fn, step, values):
    """``window_loss(theta, x_starts, horizon, step, terminal_value) -> (L, (terms, states))`` as a check calls
    it: ``(theta, x_starts, horizon, value name) -> (L, terms, states)``; ``values``: name -> terminal value."""

    def window(theta, x_starts, horizon, value):
        loss, parts = student_fn(theta, x_starts, int(horizon), step, values[str(value)])
        return (loss, *parts)  # parts = (terms, states)

    return window


def stage3_train(student_fn, step, values):
    """``train(horizon, n_iterations, seed, step, terminal_value)`` as a check calls it (the value by name)."""
    return lambda horizon, n_iterations, seed, value: student_fn(
        int(horizon), int(n_iterations), int(seed), step, values[str(value)]
    )


def long_run_summary(result, clip):
    """What check ``mini_diffsim_p3.train_long`` compares of ``train``'s result
    ``(grad_norms, clipped_norms, losses, eval_losses)``.

    Returns the raw gradient norms and window losses of the first LONG_PREFIX iterations, shape
    (2, LONG_PREFIX), then four 0/1 properties: no NaN/Inf anywhere; a spike > SPIKE_FACTOR * clip among the
    raw norms; clipped norms = min(raw norms, clip); evaluation loss lower after training. Each property is
    judged on the finite entries, so a run that ends in NaN fails the first (and the last) only.
    """
    try:
        norms, clipped, losses, evals = (np.asarray(a, dtype=np.float64) for a in result)
        prefix = np.stack([norms[:LONG_PREFIX], losses[:LONG_PREFIX]])
        both = np.isfinite(norms) & np.isfinite(clipped)
        finite_norms = norms[np.isfinite(norms)]
        flags = (
            all(np.all(np.isfinite(a)) for a in (norms, clipped, losses, evals)),
            finite_norms.size > 0 and np.max(finite_norms) > SPIKE_FACTOR * clip,
            np.any(both) and np.allclose(clipped[both], np.minimum(norms[both], clip), rtol=1e-9, atol=0),
            evals.shape == (2,) and np.all(np.isfinite(evals)) and evals[1] < evals[0],
        )
    except (TypeError, ValueError, IndexError):
        raise ValueError(
            "train must return four arrays (grad_norms, clipped_norms, losses, eval_losses), "
            "the first three of length n_iterations"
        ) from None
    return (prefix, *(np.int64(f) for f in flags))


def stage4_panel(student_fn, loss_for_value, force):
    """``panel_data(horizon, n_iterations, seed, loss_fn, force_fn)`` as a check calls it: the case names a
    terminal value, ``loss_for_value(name)`` gives the window loss ``loss_fn(theta, x_starts, horizon)``."""
    return lambda horizon, n_iterations, seed, value: student_fn(
        int(horizon), int(n_iterations), int(seed), loss_for_value(str(value)), force
    )
