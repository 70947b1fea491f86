"""Input checks shared by the public API.

Shapes are static under ``jit``, so shape errors are raised at once everywhere. Values are only known
outside tracing: a concrete value is checked at once (``ValueError``, ``FloatingPointError``); a traced
one (inside ``jit``, ``vmap``, ``grad``) gets an ``equinox.error_if`` check that runs with the compiled
program and raises there with the same message. Each check therefore returns its value, and callers
use what it returns: a check whose result is dropped would be removed from the traced program.
"""

from __future__ import annotations

from typing import TypeVar

import jax
import jax.core  # jax imports it too, then deletes the name; importing it here lets the checker see jax.core
import jax.numpy as jnp
import numpy as np
from equinox import error_if
from jax.typing import ArrayLike

T = TypeVar("T")
H = TypeVar("H", bound=ArrayLike)


def check_vector(x, size: int, name: str, owner: str) -> None:
    """Raise ``ValueError`` unless ``x`` has shape ``(size,)``."""
    shape = jnp.shape(x)
    if shape != (size,):
        raise ValueError(f"{owner}: {name} must have shape ({size},), got shape {shape}")


def check_positive_step(h: H, owner: str) -> H:
    """``h``, checked to be a positive finite scalar step size (``ValueError`` when concrete)."""
    message = f"{owner}: step size h must be a positive finite scalar"
    if jnp.shape(h) != ():
        raise ValueError(f"{message}, got {h!r}")
    return check_values(h, lambda a: (a > 0) & (a < np.inf), message)  # NaN fails both comparisons


def check_values(value: T, ok, message: str, error: type[Exception] = ValueError) -> T:
    """``value`` (an array or a pytree of them), checked to satisfy ``ok`` elementwise.

    ``ok`` maps an array to booleans and must work on NumPy and JAX arrays alike. Concrete leaves are
    checked now (``error(message + ", got <value>")``); traced leaves come back carrying an
    ``equinox.error_if`` check that raises ``message`` when the compiled program runs.
    """
    leaves, treedef = jax.tree_util.tree_flatten(value)
    traced = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, jax.core.Tracer):
            traced.append(i)
        elif not np.all(ok(np.asarray(leaf, dtype=float))):
            raise error(f"{message}, got {value!r}")
    return _checked_at_run_time(value, leaves, treedef, traced, ok, message)


def check_nonnegative(value, name: str, owner: str):
    """``value``, checked to be non-negative and finite elementwise (a stiffness, a friction coefficient)."""
    return check_values(value, lambda a: (a >= 0) & (a < np.inf), f"{owner}: {name} must be non-negative and finite")


def check_positive(value, name: str, owner: str):
    """``value``, checked to be positive and finite elementwise (a sharpness such as beta or kappa)."""
    return check_values(value, lambda a: (a > 0) & (a < np.inf), f"{owner}: {name} must be positive and finite")


def check_restitution(value, owner: str):
    """``value``, checked to be a coefficient of restitution in [0, 1]."""
    return check_values(value, lambda a: (a >= 0) & (a <= 1), f"{owner}: restitution e must be in [0, 1]")


def check_finite(value: T, name: str, owner: str) -> T:
    """``value`` (a pytree), checked to hold no NaN or Inf in its floating leaves (``FloatingPointError``)."""
    leaves, treedef = jax.tree_util.tree_flatten(value)
    traced = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, jax.core.Tracer):
            if jnp.issubdtype(leaf.dtype, jnp.inexact):
                traced.append(i)
            continue
        arr = np.asarray(leaf)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            where = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0]) if arr.ndim else ()
            raise FloatingPointError(
                f"{owner}: {name} contains NaN or Inf (first at index {where}); "
                "check the initial state, controls and parameters"
            )
    message = f"{owner}: {name} contains NaN or Inf; check the initial state, controls and parameters"
    # the sum of an array is NaN or Inf when any entry is (overflow aside, beyond 1e308): one scalar
    # per leaf, so the check adds no array-sized temporary to a gradient's memory
    return _checked_at_run_time(value, leaves, treedef, traced, lambda a: jnp.isfinite(jnp.sum(a)), message)


def check_condition(value: T, ok, message: str, error: type[Exception] = ValueError) -> T:
    """``value``, checked against ``ok``: booleans computed from ``value`` and other arguments.

    For a relation between arguments (an upper bound above its lower bound) that no elementwise test of
    one value expresses. A concrete ``ok`` raises ``error(message)`` at once; a traced one attaches an
    ``equinox.error_if`` to ``value``.
    """
    if not isinstance(ok, jax.core.Tracer):
        if not np.all(np.asarray(ok)):
            raise error(message)
        return value
    leaves, treedef = jax.tree_util.tree_flatten(value)
    return _attach(leaves, treedef, jnp.logical_not(jnp.all(ok)), message)


def _checked_at_run_time(value: T, leaves: list, treedef, traced: list[int], ok, message: str) -> T:
    """``value`` carrying one ``error_if`` on ``ok`` over its traced leaves."""
    if not traced:
        return value
    bad = jnp.logical_not(jnp.all(jnp.stack([jnp.all(ok(leaves[i])) for i in traced])))
    return _attach(leaves, treedef, bad, message)


def _attach(leaves: list, treedef, bad, message: str):
    """The pytree of ``leaves`` with an ``error_if(bad, message)`` attached.

    The check yields a scalar zero that is added to the first floating leaf (``x0`` of a rollout:
    callers put first a value the computation always uses), so the program keeps the check without
    passing whole arrays through the check's ``cond``; that would copy a rollout's controls and cost
    the memory a checkpointed gradient is meant to save.
    """
    first = next(i for i, leaf in enumerate(leaves) if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact))
    zero = error_if(jnp.zeros((), jnp.result_type(leaves[first])), bad, message)
    leaves = list(leaves)
    leaves[first] = leaves[first] + zero
    return jax.tree_util.tree_unflatten(treedef, leaves)


def lookup(table: dict, name: str, family: str):
    """Return ``table[name]`` or raise a ``KeyError`` listing the valid names."""
    try:
        return table[name]
    except KeyError:
        valid = ", ".join(sorted(table))
        raise KeyError(f"unknown {family} {name!r}; valid names: {valid}") from None
