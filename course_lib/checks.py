r"""Gradient checks (S04.8): directional, per-coordinate and Jacobian, with an ε sweep.

All checks use the chapter's relative error

.. math:: \mathrm{relerr}(a, f) = \frac{|a - f|}{\max(1, |a|, |f|)}

and central differences :math:`(L(\theta + \varepsilon v) - L(\theta - \varepsilon v)) / 2\varepsilon`.
Run them in float64 (``jax.config.update("jax_enable_x64", True)``): in float32 the
rounding error :math:`\sim 10^{-7}/\varepsilon` hides the plateau a float64 sweep shows.
They are pure JAX, so they also work under ``jit`` and ``vmap``; the ``loss_fn`` they
receive must be traceable.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from jax.typing import DTypeLike

from course_lib._types import Array, ArrayLike, Bool, Float, Int, LossFn, PyTree, Scalar

#: The chapter's ε sweep (S04.8.2), extended by one decade on each side.
DEFAULT_EPS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def relative_error(a: Float[ArrayLike, "*shape"], f: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """``|a - f| / max(1, |a|, |f|)``, elementwise."""
    a, f = jnp.asarray(a), jnp.asarray(f)
    return jnp.abs(a - f) / jnp.maximum(1.0, jnp.maximum(jnp.abs(a), jnp.abs(f)))


def _flat_loss(loss_fn, theta):
    flat, unravel = ravel_pytree(theta)
    return flat, (lambda t: loss_fn(unravel(t)))


class DirectionalCheck(NamedTuple):
    """Result of :func:`directional_check`; index ``i`` of ``fd``/``rel_error`` belongs to ``eps[i]``.

    Attributes:
        eps: step sizes ``(m,)``.
        ad: AD directional derivative :math:`g^T v`, scalar.
        fd: central-difference directional derivatives ``(m,)``.
        rel_error: relative errors ``(m,)``.
        direction: unit direction ``v`` (flattened), ``(n,)``.
    """

    eps: Float[Array, " m"]
    ad: Scalar
    fd: Float[Array, " m"]
    rel_error: Float[Array, " m"]
    direction: Float[Array, " n"]

    def rows(self) -> list[tuple[float, float, float, float]]:
        """Host-side list of ``(eps, ad, fd, rel_error)`` float tuples, one per ε (for tables)."""
        return [(float(e), float(self.ad), float(d), float(r)) for e, d, r in zip(self.eps, self.fd, self.rel_error)]


def random_direction(theta: PyTree, seed: int = 0) -> Float[Array, " n"]:
    """A unit random direction with the flattened size of ``theta`` (Gaussian, fixed seed)."""
    flat, _ = ravel_pytree(theta)
    v = jax.random.normal(jax.random.PRNGKey(seed), flat.shape, flat.dtype)
    return v / jnp.linalg.norm(v)


def directional_check(
    loss_fn: LossFn,
    theta: PyTree,
    grad: PyTree,
    eps_list: Sequence[float] | Float[ArrayLike, " m"] = DEFAULT_EPS,
    direction: PyTree | None = None,
    seed: int = 0,
) -> DirectionalCheck:
    """Compare the AD directional derivative with central differences for each ε (S04.8.3).

    Args:
        loss_fn: deterministic ``loss_fn(theta) -> scalar``.
        theta: point (array or pytree).
        grad: gradient of ``loss_fn`` at ``theta`` to check (same structure as ``theta``).
        eps_list: step sizes.
        direction: direction ``v`` (normalised here); random unit vector from ``seed`` if ``None``.

    Uses ``2 * len(eps_list)`` evaluations of ``loss_fn``.
    """
    flat, loss = _flat_loss(loss_fn, theta)
    v = random_direction(theta, seed) if direction is None else ravel_pytree(direction)[0]
    v = v / jnp.linalg.norm(v)
    ad = jnp.dot(ravel_pytree(grad)[0], v)
    eps = jnp.asarray(eps_list, dtype=flat.dtype)
    fd = jax.vmap(lambda e: (loss(flat + e * v) - loss(flat - e * v)) / (2 * e))(eps)
    return DirectionalCheck(eps, ad, fd, relative_error(ad, fd), v)


def default_tolerance(dtype: DTypeLike) -> float:
    """Plateau threshold: ``100 * sqrt(machine epsilon)`` (1.5e-6 in float64, 3.5e-2 in float32)."""
    return float(100 * np.sqrt(np.finfo(dtype).eps))


class Plateau(NamedTuple):
    """The longest run of consecutive ε whose relative error is below a tolerance.

    Attributes:
        found: whether any ε passed.
        start, stop: index range ``[start, stop]`` of that run in the sweep (-1 if none).
        best_eps: ε with the smallest relative error.
        best_error: that smallest relative error.
    """

    found: Bool[Array, ""]
    start: Int[Array, ""]
    stop: Int[Array, ""]
    best_eps: Scalar
    best_error: Scalar


def find_plateau(check: DirectionalCheck, tol: Optional[float] = None) -> Plateau:
    """Detect the ε plateau of a sweep, or report (``found=False``) that there is none.

    A smooth loss gives a run of ε where truncation error (large ε) and rounding
    error (small ε) are both small; no run at all points to a cut graph, a wrong
    derivative, non-determinism or a point on a contact boundary (S04.8.2).
    """
    tol = default_tolerance(check.rel_error.dtype) if tol is None else tol
    ok = check.rel_error <= tol

    def body(carry, i):
        run, best_len, best_stop = carry
        run = jnp.where(ok[i], run + 1, 0)
        better = run > best_len
        return (run, jnp.where(better, run, best_len), jnp.where(better, i, best_stop)), None

    (_, best_len, best_stop), _ = jax.lax.scan(body, (0, 0, -1), jnp.arange(ok.shape[0]))
    found = jnp.asarray(best_len > 0)  # an Array already (the carry is traced); asarray tells the checker
    i_best = jnp.argmin(check.rel_error)
    return Plateau(
        found,
        jnp.where(found, best_stop - best_len + 1, -1),
        jnp.where(found, best_stop, -1),
        check.eps[i_best],
        check.rel_error[i_best],
    )


class CoordinateCheck(NamedTuple):
    """Per-coordinate central differences: ``fd`` and ``rel_error`` have the flattened size of ``theta``."""

    fd: Float[Array, " n"]
    rel_error: Float[Array, " n"]
    max_rel_error: Scalar


def coordinate_check(loss_fn: LossFn, theta: PyTree, grad: PyTree, eps: float = 1e-6) -> CoordinateCheck:
    """Central differences along every coordinate (``2n`` loss evaluations; small problems only)."""
    flat, loss = _flat_loss(loss_fn, theta)
    basis = jnp.eye(flat.shape[0], dtype=flat.dtype)
    fd = jax.vmap(lambda e: (loss(flat + eps * e) - loss(flat - eps * e)) / (2 * eps))(basis)
    rel = relative_error(ravel_pytree(grad)[0], fd)
    return CoordinateCheck(fd, rel, jnp.max(rel))


class JacobianCheck(NamedTuple):
    """AD and central-difference Jacobians ``(m, n)`` of a vector function, and their worst relative error."""

    ad: Float[Array, "m n"]
    fd: Float[Array, "m n"]
    max_rel_error: Scalar


def jacobian_check(
    fn: Callable[[Float[Array, " n"]], Float[Array, " m"]], x: Float[Array, " n"], eps: float = 1e-6
) -> JacobianCheck:
    """Check ``jax.jacrev(fn)(x)`` column by column with central differences (``x``: ``(n,)``)."""
    ad = jax.jacrev(fn)(x)
    basis = jnp.eye(x.shape[0], dtype=x.dtype)
    fd = jax.vmap(lambda e: (fn(x + eps * e) - fn(x - eps * e)) / (2 * eps), out_axes=-1)(basis)
    return JacobianCheck(ad, fd, jnp.max(relative_error(ad, fd)))
