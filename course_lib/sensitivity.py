r"""Linearisation along a trajectory and parameter sensitivities (S04.2.2–S04.2.5).

.. math::
    \delta x_{k+1} = A_k\,\delta x_k + B_k\,\delta u_k + P_k\,\delta p,\qquad
    A_k = \partial F/\partial x_k,\ B_k = \partial F/\partial u_k,\ P_k = \partial F/\partial p

Parameters may be any pytree (usually a NamedTuple); :math:`P_k` has one column per
leaf, in the order of ``jax.flatten_util.ravel_pytree(p)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from course_lib._types import Array, Control, Controls, Float, Params, State, Step


class Linearization(NamedTuple):
    """Step Jacobians. For one step: ``A (nx, nx)``, ``B (nx, nu)``, ``P (nx, np)``; along a trajectory each gains a leading ``N``."""

    A: Float[Array, "*N nx nx"]
    B: Float[Array, "*N nx nu"]
    P: Float[Array, "*N nx np"]


def linearize(step: Step, x: State, u: Control, p: Params) -> Linearization:
    """Jacobians of one step ``step(x, u, p)`` at ``(x, u, p)`` by reverse-mode AD."""
    flat_p, unravel = ravel_pytree(p)

    def flat_step(x_, u_, p_flat):
        return step(x_, u_, unravel(p_flat))

    A, B, P = jax.jacrev(flat_step, argnums=(0, 1, 2))(x, u, flat_p)
    return Linearization(A, B, P)


def linearize_trajectory(
    step: Step, xs: Float[Array, "N+1 nx"] | Float[Array, "N nx"], us: Controls, p: Params
) -> Linearization:
    """:func:`linearize` at every ``(x_k, u_k)``, k = 0..N-1.

    Args:
        xs: states, shape ``(N+1, nx)`` or ``(N, nx)`` (only the first N rows are used).
        us: inputs, shape ``(N, nu)``.
    """
    n = us.shape[0]
    return jax.vmap(linearize, in_axes=(None, 0, 0, None))(step, xs[:n], us, p)


def parameter_sensitivities(step: Step, x0: State, us: Controls, p: Params) -> Float[Array, "N+1 nx np"]:
    r"""Stacked :math:`S_k = \partial x_k/\partial p`, shape ``(N+1, nx, np)``, by the forward recursion

    .. math:: S_{k+1} = A_k S_k + P_k,\qquad S_0 = 0

    (S04.2.5). Stacking the rows of all :math:`S_k` gives the matrix whose rank and
    conditioning say which parameters a trajectory can identify.
    """
    n_p = ravel_pytree(p)[0].shape[0]

    def body(carry, u):
        x, s = carry
        lin = linearize(step, x, u, p)
        return (step(x, u, p), lin.A @ s + lin.P), lin.A @ s + lin.P

    s0 = jnp.zeros((x0.shape[0], n_p), dtype=jnp.result_type(x0, float))
    _, ss = jax.lax.scan(body, (x0, s0), us)
    return jnp.concatenate([s0[None], ss], axis=0)
