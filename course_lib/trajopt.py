r"""Gradient-based trajectory optimisation through a differentiable rollout (S04.1, S04.9.1).

The decision variables are the inputs :math:`u_0..u_{N-1}`; the objective is
:func:`course_lib.rollout.rollout_cost`,

.. math:: L(u) = \ell_N(x_N) + \sum_{k<N}\ell(x_k, u_k),\qquad x_{k+1} = F(x_k, u_k, p),

whose gradient :math:`dL/du_k = \partial_u\ell_k + B_k^T\lambda_{k+1}` (S04.7) comes from
reverse-mode AD in the mode chosen by ``gradient``. An optax optimiser (Adam by default,
optionally behind ``clip_by_global_norm``) takes the steps; input bounds are enforced by
projecting (clipping) the inputs after every step. The loop is one ``lax.scan``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from course_lib._types import (
    Array,
    ArrayLike,
    Controls,
    Float,
    Params,
    Scalar,
    StageCost,
    State,
    States,
    Step,
    TerminalCost,
)
from course_lib._validate import check_condition, check_values
from course_lib._costs import zero_terminal_cost
from course_lib.rollout import rollout, rollout_cost


class TrajOptResult(NamedTuple):
    """Output of :func:`optimize_controls`; histories have leading axis ``(n_iterations,)``.

    Attributes:
        us: optimised inputs ``(N, nu)``.
        xs: their trajectory ``(N+1, nx)``.
        loss: :math:`L` before each update.
        grad_norm: :math:`\\|dL/du\\|_2` before each update (before clipping).
        final_loss: :math:`L` at ``us``, scalar.
    """

    us: Controls
    xs: States
    loss: Float[Array, " n_iterations"]
    grad_norm: Float[Array, " n_iterations"]
    final_loss: Scalar


def optimize_controls(
    step: Step,
    x0: State,
    us_init: Float[ArrayLike, "N nu"],
    p: Params,
    stage_cost: StageCost,
    terminal_cost: TerminalCost = zero_terminal_cost,
    *,
    learning_rate: float | Scalar = 0.05,
    n_iterations: int = 200,
    max_grad_norm: float | Scalar | None = None,
    u_lower: Float[ArrayLike, "*nu"] | None = None,
    u_upper: Float[ArrayLike, "*nu"] | None = None,
    gradient: str = "store_all",
    optimizer: Optional[optax.GradientTransformation] = None,
) -> TrajOptResult:
    r"""Minimise :func:`~course_lib.rollout.rollout_cost` over the input sequence with optax.

    Args:
        step: ``step(x, u, p) -> x_next``.
        x0: initial state ``(nx,)``.
        us_init: initial inputs ``(N, nu)``.
        p: parameter pytree.
        stage_cost: ``ell(x, u, p) -> scalar``.
        terminal_cost: ``ell_N(x, p) -> scalar`` (zero by default).
        learning_rate: Adam learning rate (ignored when ``optimizer`` is given).
        n_iterations: optimiser steps (static, >= 1).
        max_grad_norm: if given (> 0), ``optax.clip_by_global_norm`` before Adam.
        u_lower, u_upper: input bounds (scalars or ``(nu,)``), enforced by clipping after each step.
        gradient: differentiation mode of :func:`~course_lib.rollout.rollout_cost`.
        optimizer: an optax transformation replacing the default.

    Returns:
        :class:`TrajOptResult`.
    """
    owner = "optimize_controls"
    if not isinstance(n_iterations, (int, np.integer)) or isinstance(n_iterations, bool) or n_iterations < 1:
        raise ValueError(f"{owner}: n_iterations must be a Python int >= 1, got {n_iterations!r}")
    if jnp.ndim(us_init) != 2:
        raise ValueError(f"{owner}: us_init must have shape (N, nu), got shape {jnp.shape(us_init)}")
    if max_grad_norm is not None:
        max_grad_norm = check_values(max_grad_norm, lambda a: a > 0, f"{owner}: max_grad_norm must be positive")
    learning_rate = check_values(learning_rate, lambda a: a > 0, f"{owner}: learning_rate must be positive")
    nu = jnp.shape(us_init)[1]
    lo = jnp.full((nu,), -jnp.inf) if u_lower is None else jnp.broadcast_to(jnp.asarray(u_lower, float), (nu,))
    hi = jnp.full((nu,), jnp.inf) if u_upper is None else jnp.broadcast_to(jnp.asarray(u_upper, float), (nu,))
    hi = check_condition(hi, hi > lo, f"{owner}: every upper input bound must exceed its lower bound")

    if optimizer is None:
        optimizer = optax.adam(learning_rate)
        if max_grad_norm is not None:
            optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optimizer)

    def objective(us):
        return rollout_cost(step, x0, us, p, stage_cost, terminal_cost, gradient=gradient)

    value_and_grad = jax.value_and_grad(objective)
    us0 = jnp.clip(jnp.asarray(us_init), lo, hi)
    objective(us0)  # validates shapes and names once, outside the loop

    def body(carry, _):
        us, opt_state = carry
        loss, g = value_and_grad(us)
        updates, opt_state = optimizer.update(g, opt_state, us)
        # optax types apply_updates on pytrees (optax.Params); on an array it returns an array
        us = jnp.clip(optax.apply_updates(us, updates), lo, hi)  # pyright: ignore[reportArgumentType]
        return (us, opt_state), (loss, optax.tree.norm(g))

    (us, _), (losses, grad_norms) = jax.lax.scan(body, (us0, optimizer.init(us0)), None, length=n_iterations)
    return TrajOptResult(us, rollout(step, x0, us, p), losses, grad_norms, objective(us))
