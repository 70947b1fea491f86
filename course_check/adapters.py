"""How a check calls a student's function when the notebook's own function is not called directly.

Grading (the hidden cells, in the sandboxed kernel) and the public checks wrap the same way; nothing here
answers a check.

S04.5: ``kink_as_subgradient`` grades the slope of a penalty force at the kink phi = 0 as what it is: any
value of the subdifferential [-k, 0] is right (jax.grad happens to give -k/4; other conventions are as valid).

S04.6:

``count_loss_calls`` measures how many loss evaluations a student's ``directional_checks`` makes;
``boolean_as_codes`` turns the boolean answer of ``ad_fd_disagreement`` into non-zero codes, so the
comparison never meets an all-zero (all-agree) result it would misdiagnose.
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
