"""Kernel-side support of mini_diffsim_p2: the stage-1 reference pieces its graded functions receive.

The graded cells call the student's ``contact_sweep`` and ``boundary_check`` with course_lib's semi-implicit
Euler and this module's plateau finder in place of the student's own stage-1 code, so a stage-1 bug is not
charged again. Neither answers a check of this notebook.
"""

from __future__ import annotations

import numpy as np

import course_lib as cl
from course_check.adapters import with_pieces

#: the plateau threshold of the chapter, 100 sqrt(eps) in float64 (cl.default_tolerance)
PLATEAU_TOL = cl.default_tolerance(np.float64)


def find_plateau(rel_errors, tol=PLATEAU_TOL):
    """[start, stop] of the first longest run of consecutive rel_errors <= tol; [-1, -1] if none (stage 1)."""
    best, best_stop, run = 0, -1, 0
    for i, ok in enumerate(np.asarray(rel_errors) <= tol):
        run = run + 1 if ok else 0
        if run > best:
            best, best_stop = run, i
    return np.array([best_stop - best + 1, best_stop] if best else [-1, -1], dtype=np.int64)


def graded(name: str, student_fn):
    """The student's function as the hidden cell of check ``mini_diffsim_p2.<name>`` calls it."""
    pieces = {"contact_sweep": (cl.semi_implicit_euler,), "boundary_check": (cl.semi_implicit_euler, find_plateau)}
    if name not in pieces:
        raise KeyError(f"no wiring for mini_diffsim_p2.{name}")
    return with_pieces(student_fn, *pieces[name])
