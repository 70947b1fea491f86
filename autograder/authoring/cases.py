"""Drawing a check's cases: the hidden ones and, from other seeds, the public ones.

A case function draws its random inputs from ``case_rng(seed)``. Called plainly it is
``np.random.default_rng(seed)``, so the hidden cases are what they always were; inside
:func:`drawing_public` the same function draws from ``(seed, PUBLIC_SALT)`` instead, which gives the
check's public cases with the hidden cases' structure (sizes, regimes, edge cases) but other numbers.
A fixed setting (a step size, a list of stiffnesses) goes through :func:`case_value`, so that the public
cases change it too; the generator refuses public cases equal to hidden ones.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

#: mixed into every seed when the public cases are drawn
PUBLIC_SALT = 20_261_203

_public = contextvars.ContextVar("drawing_public", default=False)


def case_rng(seed: int) -> np.random.Generator:
    """The random generator of a case function (see the module docstring)."""
    return np.random.default_rng([seed, PUBLIC_SALT] if _public.get() else seed)


@contextlib.contextmanager
def drawing_public():
    """Within this block, :func:`case_rng` draws the public cases."""
    token = _public.set(True)
    try:
        yield
    finally:
        _public.reset(token)


def case_value(hidden, public):
    """``hidden`` when the hidden cases are drawn, ``public`` inside :func:`drawing_public`: a fixed
    setting of a case function (a step size, a list of stiffnesses) that the public cases change."""
    return public if _public.get() else hidden
