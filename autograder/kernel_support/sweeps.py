"""The ε-sweep arithmetic the reference solutions and the grading kernels share.

One relative error, one central difference and one plateau finder, each the chapter's definition
(S04.8.2) as ``course_lib.checks`` states it. They live in ``kernel_support`` because a grading kernel
imports the plateau finder (it is the stage-1 piece handed to a student's stage-2 code); the references
import all three from here. ``tests/test_reference_witnesses.py`` checks them against course_lib.
"""

from __future__ import annotations

import numpy as np

import course_lib as cl

#: the plateau threshold of the chapter, 100 sqrt(eps) in float64 (cl.default_tolerance)
PLATEAU_TOL = cl.default_tolerance(np.float64)


def relative_error(a, f) -> np.ndarray:
    """``|a - f| / max(1, |a|, |f|)`` elementwise, by ``cl.relative_error`` (float64: call with x64 enabled)."""
    return np.asarray(cl.relative_error(np.asarray(a, dtype=np.float64), np.asarray(f, dtype=np.float64)))


def central_differences(loss, z, direction, eps_list) -> np.ndarray:
    """``(L(z + εv) − L(z − εv)) / 2ε`` for each ε, one plain Python evaluation per point.

    ``v`` is ``direction`` normalised; ``loss`` maps a float64 numpy vector to a float. A second rounding
    beside a vmapped sweep (cl.directional_check), for case selection that must not hinge on the last bits.
    """
    z = np.asarray(z, dtype=np.float64)
    v = np.asarray(direction, dtype=np.float64)
    v = v / np.linalg.norm(v)
    return np.array([(float(loss(z + e * v)) - float(loss(z - e * v))) / (2 * e) for e in eps_list])


def find_plateau(rel_errors, tol=PLATEAU_TOL) -> np.ndarray:
    """``[start, stop]`` of the first longest run of consecutive ``rel_errors <= tol``; ``[-1, -1]`` if none.

    The run ``cl.find_plateau`` finds, computed in numpy (no JAX dispatch, no dependence on the kernel's x64 flag).
    """
    best, best_stop, run = 0, -1, 0
    for i, ok in enumerate(np.asarray(rel_errors) <= tol):
        run = run + 1 if ok else 0
        if run > best:
            best, best_stop = run, i
    return np.array([best_stop - best + 1, best_stop] if best else [-1, -1], dtype=np.int64)
