"""Kernel-side support of mini_diffsim_p2: the stage-1 reference pieces its graded functions receive.

The graded cells call the student's ``contact_sweep`` and ``boundary_check`` with course_lib's semi-implicit
Euler and the shared plateau finder (:mod:`autograder.kernel_support.sweeps`) in place of the student's own stage-1 code, so a stage-1 bug is not
charged again. Neither answers a check of this notebook.
"""

from __future__ import annotations

import course_lib as cl
from autograder.kernel_support.sweeps import PLATEAU_TOL, find_plateau
from course_check.adapters import with_pieces

__all__ = ["PLATEAU_TOL", "find_plateau", "graded"]


def graded(name: str, student_fn):
    """The student's function as the hidden cell of check ``mini_diffsim_p2.<name>`` calls it."""
    pieces = {"contact_sweep": (cl.semi_implicit_euler,), "boundary_check": (cl.semi_implicit_euler, find_plateau)}
    if name not in pieces:
        raise KeyError(f"no wiring for mini_diffsim_p2.{name}")
    return with_pieces(student_fn, *pieces[name])
