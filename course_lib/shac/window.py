r"""The SHAC window loss :math:`L_h` (defined in :mod:`course_lib.shac`) and the cost of a full episode.

:func:`short_horizon_loss` rolls the policy out for ``h`` steps from start states held constant and adds
the critic's discounted value at the window's end; :func:`episode_cost` is the undiscounted cost of one
whole episode, the evaluation that :func:`~course_lib.shac.train.shac_train` records.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from course_lib._types import Array, ArrayLike, Float, PyTree, Scalar, ScalarLike
from course_lib._validate import check_values, check_vector
from course_lib.shac.critic import Features, Policy, critic_value, mlp_policy, quadratic_features
from course_lib.shac.tasks import ShacTask

# --- the short-horizon loss ---------------------------------------------------------------


class WindowRollout(NamedTuple):
    """Auxiliary output of :func:`short_horizon_loss` for a batch of ``B`` windows of ``h`` steps.

    Attributes:
        states: :math:`x_0..x_h`, ``(B, h+1, nx)``.
        costs: :math:`c_0..c_{h-1}`, ``(B, h)``.
        gaps: contact gaps of :math:`x_1..x_h`, ``(B, h, n_c)`` (``n_c = 0`` without contact).
        stage_term: batch mean of :math:`\\sum_k\\gamma^k c_k`, scalar.
        terminal_term: batch mean of :math:`\\gamma^h V_\\psi(x_h)`, scalar.
    """

    states: Float[Array, "B h+1 nx"]
    costs: Float[Array, "B h"]
    gaps: Float[Array, "B h n_c"]
    stage_term: Scalar
    terminal_term: Scalar


def _check_settings(owner, horizon=None, gamma=None, td_lambda=None, max_grad_norm=None):
    """``(gamma, td_lambda, max_grad_norm)``, checked (``None`` stays ``None``); ``horizon`` must be an int."""
    if horizon is not None and (not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1):
        raise ValueError(f"{owner}: horizon h must be a Python int >= 1, got {horizon!r}")
    checked = []
    for name, value, ok, what in (
        ("gamma", gamma, lambda a: (a > 0) & (a <= 1), "in (0, 1]"),
        ("td_lambda", td_lambda, lambda a: (a >= 0) & (a <= 1), "in [0, 1]"),
        ("max_grad_norm", max_grad_norm, lambda a: (a > 0) & (a < np.inf), "positive"),
    ):
        if value is not None and jnp.ndim(value) != 0:
            raise ValueError(f"{owner}: {name} must be a scalar, got shape {jnp.shape(value)}")
        checked.append(None if value is None else check_values(value, ok, f"{owner}: {name} must be {what}"))
    return tuple(checked)


def short_horizon_loss(
    policy_params: PyTree,
    critic_params: Float[Array, " n_features"],
    x_starts: Float[Array, "B nx"],
    task: ShacTask,
    *,
    horizon: int,
    gamma: ScalarLike = 0.99,
    policy: Policy = mlp_policy,
    features: Features = quadratic_features,
) -> tuple[Scalar, WindowRollout]:
    r"""SHAC window loss :math:`L_h` (:mod:`course_lib.shac`) and its rollout, for ``jax.value_and_grad(..., has_aux=True)``.

    ``x_starts`` and ``critic_params`` enter through ``stop_gradient``: only the policy
    parameters receive a gradient, and no gradient crosses the window start.

    Args:
        policy_params: pytree of ``policy``.
        critic_params: critic weights :math:`\psi`, ``(n_features,)``.
        x_starts: window start states, ``(B, nx)``.
        task: :class:`ShacTask`.
        horizon: window length :math:`h \ge 1` (static).
        gamma: discount :math:`\gamma\in(0, 1]`.
        policy: ``policy(params, x) -> u``.
        features: critic feature map.

    Returns:
        ``(loss, WindowRollout)``.
    """
    owner = "short_horizon_loss"
    gamma, _, _ = _check_settings(owner, horizon=horizon, gamma=gamma)
    if jnp.ndim(x_starts) != 2 or jnp.shape(x_starts)[1] != task.x0.shape[0]:
        raise ValueError(f"{owner}: x_starts must have shape (B, {task.x0.shape[0]}), got shape {jnp.shape(x_starts)}")
    x_starts = jax.lax.stop_gradient(x_starts)
    psi = jax.lax.stop_gradient(critic_params)
    p = task.params

    def one_window(x0):
        def body(x, _):
            u = policy(policy_params, x)
            x_next = task.step(x, u, p)
            gap = task.gap(x_next, p) if task.gap is not None else jnp.zeros((0,), x.dtype)
            return x_next, (x_next, task.stage_cost(x, u, p), gap)

        x_last, (xs, costs, gaps) = jax.lax.scan(body, x0, None, length=horizon)
        discounts = gamma ** jnp.arange(horizon, dtype=costs.dtype)
        stage = jnp.sum(discounts * costs)
        terminal = gamma**horizon * critic_value(psi, x_last, features)
        return jnp.concatenate([x0[None], xs]), costs, gaps, stage, terminal

    states, costs, gaps, stage, terminal = jax.vmap(one_window)(x_starts)
    stage_term, terminal_term = jnp.mean(stage), jnp.mean(terminal)
    return stage_term + terminal_term, WindowRollout(states, costs, gaps, stage_term, terminal_term)


def episode_cost(
    policy_params: PyTree, task: ShacTask, *, policy: Policy = mlp_policy, x0: Float[ArrayLike, " nx"] | None = None
) -> Scalar:
    r"""Undiscounted cost :math:`\sum_{k<H} c(x_k, \pi(x_k))` of one full episode from ``x0`` (default ``task.x0``)."""
    x0 = task.x0 if x0 is None else jnp.asarray(x0)
    check_vector(x0, task.x0.shape[0], "x0", "episode_cost")

    def body(x, _):
        u = policy(policy_params, x)
        return task.step(x, u, task.params), task.stage_cost(x, u, task.params)

    _, costs = jax.lax.scan(body, x0, None, length=task.episode_length)
    return jnp.sum(costs)
