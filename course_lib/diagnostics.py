r"""Gradient-health diagnostics along a trajectory (S04.2.3, S04.8.4).

They take the step Jacobians of :func:`course_lib.linearize_trajectory`
(``As: (N, nx, nx)``, ``Bs: (N, nx, nu)``) or a trajectory ``xs: (N+1, nx)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from course_lib._types import Array, Float, Int, Shaped


def step_spectral_norms(As: Float[Array, "N nx nx"]) -> Float[Array, " N"]:
    r"""Per-step :math:`\|A_k\|_2` (largest singular value), shape ``(N,)``.

    A heuristic only (S04.2.3): the product's norm is bounded by the product of these
    norms, but for non-normal :math:`A_k` it can grow for many steps even when every
    spectral radius is below 1, and a norm above 1 need not mean growth.
    """
    return jax.vmap(lambda a: jnp.linalg.svd(a, compute_uv=False)[0])(As)


def product_log_singular_values(As: Float[Array, "N nx nx"]) -> Float[Array, "N nx"]:
    r"""log10 of the singular values of :math:`A_k A_{k-1}\cdots A_0` for k = 0..N-1, shape ``(N, nx)``.

    The running product is renormalised at every step and its scale kept as a
    logarithm, so long horizons neither overflow nor underflow in the largest
    singular values. The smallest lose relative accuracy once the product's
    condition number passes about 1e16, and read -inf once it passes about 1e300.
    Descending order per row.
    """
    nx = As.shape[-1]

    def body(carry, a):
        m, log_scale = carry
        m = a @ m
        s = jnp.linalg.norm(m)
        s = jnp.where(s > 0, s, 1.0)
        m, log_scale = m / s, log_scale + jnp.log10(s)
        return (m, log_scale), jnp.log10(jnp.linalg.svd(m, compute_uv=False)) + log_scale

    init = (jnp.eye(nx, dtype=As.dtype), jnp.zeros((), As.dtype))
    _, out = jax.lax.scan(body, init, As)
    return out


def gradient_norm_vs_horizon(As: Float[Array, "N nx nx"], Bs: Float[Array, "N nx nu"]) -> Float[Array, " N"]:
    r""":math:`\|\partial x_{k+1}/\partial u_0\|_2 = \|A_k\cdots A_1 B_0\|_2` for k = 0..N-1, shape ``(N,)``.

    How far the influence of the first action reaches: it decays for a contracting
    system (vanishing gradients) and grows for an unstable one (exploding gradients).
    """

    def body(g, a):
        g = a @ g
        return g, jnp.linalg.svd(g, compute_uv=False)[0]

    g0 = Bs[0]
    _, rest = jax.lax.scan(body, g0, As[1:])
    return jnp.concatenate([jnp.linalg.svd(g0, compute_uv=False)[:1], rest])


def first_nonfinite_step(xs: Shaped[Array, " T *rest"]) -> Int[Array, ""]:
    """Index of the first row of ``xs`` holding NaN or Inf, or -1 if every row is finite."""
    bad = ~jnp.all(jnp.isfinite(jnp.reshape(xs, (xs.shape[0], -1))), axis=1)
    return jnp.where(jnp.any(bad), jnp.argmax(bad), -1)
