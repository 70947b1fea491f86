"""Input checks shared by the public API.

Shapes are static under ``jit``, so shape errors are raised everywhere.
Values are only known outside tracing, so finiteness and sign checks run on
concrete inputs and are skipped (silently, by design) inside ``jit``/``vmap``.
"""

from __future__ import annotations

import jax
import jax.core  # jax imports it too, then deletes the name; importing it here lets the checker see jax.core
import jax.numpy as jnp
import numpy as np


def is_concrete(value) -> bool:
    """True when ``value`` holds data (not a tracer inside jit/vmap/grad)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(value))


def check_vector(x, size: int, name: str, owner: str) -> None:
    """Raise ``ValueError`` unless ``x`` has shape ``(size,)``."""
    shape = jnp.shape(x)
    if shape != (size,):
        raise ValueError(f"{owner}: {name} must have shape ({size},), got shape {shape}")


def check_positive_step(h, owner: str) -> None:
    """Raise ``ValueError`` for a non-positive or non-finite step size."""
    if is_concrete(h):
        value = np.asarray(h)
        if value.shape != () or not np.isfinite(value) or value <= 0:
            raise ValueError(f"{owner}: step size h must be a positive finite scalar, got {h!r}")


def check_finite(value, name: str, owner: str) -> None:
    """Raise ``FloatingPointError`` if a concrete array holds NaN or Inf."""
    if not is_concrete(value):
        return
    for leaf in jax.tree_util.tree_leaves(value):
        arr = np.asarray(leaf)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))
            where = tuple(int(i) for i in bad[0]) if bad.size else ()
            raise FloatingPointError(
                f"{owner}: {name} contains NaN or Inf (first at index {where}); "
                "check the initial state, controls and parameters"
            )


def lookup(table: dict, name: str, family: str):
    """Return ``table[name]`` or raise a ``KeyError`` listing the valid names."""
    try:
        return table[name]
    except KeyError:
        valid = ", ".join(sorted(table))
        raise KeyError(f"unknown {family} {name!r}; valid names: {valid}") from None
