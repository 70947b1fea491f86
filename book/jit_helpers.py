"""Small helpers the two S04.7 pages share (the adjoint page and its continuation).

``quick_jit`` compiles with XLA's backend optimisations off: the pages' demo programs are tiny and run once, so
compiling costs far more than running (about half the compile time, the same results to rounding); the cells
that measure memory and time use plain ``jax.jit``. The other two compare results on the host.
"""

from __future__ import annotations

import jax
import numpy as np


def quick_jit(fn):
    """jax.jit with XLA's backend optimisations off."""
    return jax.jit(fn, compiler_options={"xla_backend_optimization_level": 0})


def max_diff(a, b):
    """max |a - b| over all entries, computed on the host (after the jitted work)."""
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def tree_norm(tree):
    """Global 2-norm of a pytree of arrays (host side)."""
    return float(np.sqrt(sum(np.sum(np.asarray(leaf) ** 2) for leaf in jax.tree_util.tree_leaves(tree))))
