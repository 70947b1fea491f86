"""Which checks a naive formula overflows on: the checks that need a non-finite hint.

A student who writes softplus as ``log(1 + exp(x))`` or the sigmoid as ``exp(x) / (1 + exp(x))`` is
right wherever ``|x|`` stays below about 709 and gets ``inf`` or ``NaN`` beyond it (float64). Where a
check's hidden inputs go that far, the generic NaN feedback does not say what to change, so the check
must carry a :attr:`~autograder.authoring.registry.Check.nonfinite_hint` that does; where they never do,
such a hint would point at a problem the student cannot have.

:func:`hint_problems` finds out by running the reference itself with the numerically stable functions
it (or course_lib) calls replaced by their naive formulas (:func:`naive_math`). Regeneration refuses a
check whose hint and hidden inputs disagree (:mod:`autograder.authoring.regenerate`).
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np


def _softplus(x):
    return jnp.log(1.0 + jnp.exp(x))


def _sigmoid(x):
    e = jnp.exp(x)
    return e / (1.0 + e)


def _log_sigmoid(x):
    return -jnp.log(1.0 + jnp.exp(-x))


def _logaddexp(a, b):
    return jnp.log(jnp.exp(a) + jnp.exp(b))


def _np_logaddexp(a, b, *args, **kwargs):
    return np.log(np.exp(a) + np.exp(b))


#: (module, attribute, naive formula): every stable function the references and course_lib call
NAIVE = (
    (jax.nn, "softplus", _softplus),
    (jax.nn, "sigmoid", _sigmoid),
    (jax.nn, "log_sigmoid", _log_sigmoid),
    (jax.scipy.special, "expit", _sigmoid),
    (jnp, "logaddexp", _logaddexp),
    (np, "logaddexp", _np_logaddexp),
)


@contextlib.contextmanager
def naive_math():
    """Run the body with the functions of :data:`NAIVE` replaced by their naive formulas.

    JAX's caches are cleared on entry and on exit, so that no function traced with one set of formulas
    runs with the other. Floating-point warnings are silenced inside: overflow is what is looked for.
    """
    saved = [getattr(module, name) for module, name, _ in NAIVE]
    jax.clear_caches()
    try:
        for module, name, naive in NAIVE:
            setattr(module, name, naive)
        with np.errstate(all="ignore"):
            yield
    finally:
        for (module, name, _), original in zip(NAIVE, saved):
            setattr(module, name, original)
        jax.clear_caches()


def _finite(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_finite(v) for v in value)
    arr = np.asarray(value)
    return arr.dtype.kind not in "fc" or bool(np.all(np.isfinite(arr)))


def _overflowing(reference, cases: list[dict]) -> list[int]:
    found = []
    for i, case in enumerate(cases):
        try:
            finite = _finite(reference(**case))
        except Exception:  # noqa: BLE001 - an inf reaching a validation or a solver is an overflow too
            finite = False
        if not finite:
            found.append(i)
    return found


def naive_overflows(reference, cases: list[dict]) -> list[int]:
    """Indices of the cases on which ``reference`` gives a non-finite result (or raises) with naive formulas."""
    with naive_math():
        return _overflowing(reference, cases)


def hint_problems(checks, cases: dict[str, list[dict]]) -> list[str]:
    """Why the non-finite hints of ``checks`` do not fit their hidden ``cases`` (by check key); empty when all fit.

    All checks run in one :func:`naive_math` session: each reference is compiled once with the naive formulas.
    """
    problems = []
    with naive_math():
        for check in checks:
            overflowing = _overflowing(check.reference, cases[check.key])
            if overflowing and not check.nonfinite_hint:
                problems.append(
                    f"{check.key}: with naive softplus/sigmoid/logaddexp its reference overflows on hidden cases "
                    f"{overflowing}; give the check a nonfinite_hint that says which stable formula to use"
                )
            elif check.nonfinite_hint and not overflowing:
                problems.append(
                    f"{check.key}: has a nonfinite_hint, but no hidden case overflows a naive formula; "
                    "drop the hint or add a case that reaches the overflow"
                )
    return problems
