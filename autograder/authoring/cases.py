"""Drawing a check's cases: the hidden ones and, from other seeds, the public ones.

A case function draws its random inputs from ``case_rng(seed)``. Called plainly it is
``np.random.default_rng(seed)``, so the hidden cases are what they always were; inside
:func:`drawing_public` the same function draws from ``(seed, PUBLIC_SALT)`` instead, which gives the
check's public cases with the hidden cases' structure (sizes, regimes, edge cases) but other numbers.
A fixed setting (a step size, a list of stiffnesses) goes through :func:`case_value`, so that the public
cases change it too; the generator refuses public cases equal to hidden ones.

Hidden cases are new each term: inside :func:`drawing_hidden` with the term's salt (``[grading] salt`` in
``assignments/term.toml``), ``case_rng(seed)`` draws from ``(seed, a 64-bit digest of the salt)``. The public
cases never depend on the salt: students keep the same public checks whatever the term.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib

import numpy as np

#: mixed into every seed when the public cases are drawn
PUBLIC_SALT = 20_261_203

_public = contextvars.ContextVar("drawing_public", default=False)
_salt = contextvars.ContextVar("term_salt", default="")


def salt_key(salt: str) -> int:
    """The 64-bit number a term's salt mixes into every hidden case's seed."""
    return int.from_bytes(hashlib.sha256(salt.encode("utf-8")).digest()[:8], "little")


def case_rng(seed: int) -> np.random.Generator:
    """The random generator of a case function (see the module docstring)."""
    if _public.get():
        return np.random.default_rng([seed, PUBLIC_SALT])
    salt = _salt.get()
    return np.random.default_rng([seed, salt_key(salt)] if salt else seed)


@contextlib.contextmanager
def drawing_hidden(salt: str):
    """Within this block, :func:`case_rng` draws the hidden cases of the term with this salt."""
    token = _salt.set(salt)
    try:
        yield
    finally:
        _salt.reset(token)


@contextlib.contextmanager
def drawing_public():
    """Within this block, :func:`case_rng` draws the public cases."""
    token = _public.set(True)
    try:
        yield
    finally:
        _public.reset(token)


def drawing_key() -> tuple:
    """Which cases :func:`case_rng` draws now (the public ones, or the hidden ones of which salt): the key of a
    cache of drawn cases, so that a case function that caches its draws never serves one term's another's."""
    return (_public.get(), _salt.get())


def case_value(hidden, public):
    """``hidden`` when the hidden cases are drawn, ``public`` inside :func:`drawing_public`: a fixed
    setting of a case function (a step size, a list of stiffnesses) that the public cases change."""
    return public if _public.get() else hidden


def draw_until(draw, acceptable, tries: int = 200):
    """The first ``draw()`` that ``acceptable`` accepts: a case function's guard (a point away from a kink, a
    plateau start that rounding cannot move) as a redraw rather than an assertion, so every term's salt gives
    valid cases. ``draw`` takes the next numbers of the case function's generator; raises after ``tries``."""
    for _ in range(tries):
        value = draw()
        if acceptable(value):
            return value
    raise ValueError(f"no acceptable case in {tries} draws: the guard refuses (almost) every draw")
