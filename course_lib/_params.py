"""Parameters as one vector inside the library's time loops.

Private. A parameter pytree such as :class:`~course_lib.PendulumParams` has several scalar leaves. When a
``lax.scan`` closes over them and is differentiated with respect to them, the backward loop carries one
scalar cotangent per leaf, and from three such scalars on, XLA's CPU loops slowed down 15x
(benchmarks/README.md, "parameter gradients"). Carrying the same numbers as one vector avoids that and
changes no value: the loop body rebuilds the pytree from the vector, which is only slicing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree


def _is_floating_array(leaf) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray)) and jnp.issubdtype(leaf.dtype, jnp.inexact)


def _identity(p):
    return p


def loop_params(p: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(packed, rebuild)`` with ``rebuild(packed)`` equal to ``p``, for a loop to close over ``packed``.

    ``packed`` is one vector when ``p`` has two or more leaves and all are floating arrays (under
    ``grad`` every parameter is), else ``p`` itself. ``rebuild`` also turns a cotangent of ``packed``
    into a cotangent of ``p``.
    """
    leaves = jax.tree_util.tree_leaves(p)
    if len(leaves) < 2 or not all(_is_floating_array(leaf) for leaf in leaves):
        return p, _identity
    return ravel_pytree(p)
