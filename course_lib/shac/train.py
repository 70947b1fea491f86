r"""The SHAC training loop, :func:`shac_train`, and its result :class:`ShacResult`.

Windows, critic fits, gradient clipping and health records as described in :mod:`course_lib.shac`;
the whole loop is one ``lax.scan``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from course_lib._types import Array, Float, Int, Key, PyTree, Scalar, ScalarLike
from course_lib._validate import check_finite, check_values
from course_lib.health import TrainingHealth, contact_summary, health_record
from course_lib.shac.critic import (
    Features,
    Policy,
    critic_value,
    fit_critic,
    lambda_returns,
    mlp_policy,
    quadratic_features,
)
from course_lib.shac.tasks import ShacTask
from course_lib.shac.window import _check_settings, episode_cost, short_horizon_loss

# --- the optimiser ------------------------------------------------------------------------


class ShacResult(NamedTuple):
    """Output of :func:`shac_train`; per-iteration arrays have leading axis ``(n_iterations,)``.

    Attributes:
        policy_params: final policy parameters.
        critic_params: final critic weights ``(n_features,)``.
        records: stacked :class:`~course_lib.health.TrainingHealth`: ``loss`` (window loss
            :math:`L_h`), ``loss_terms`` (``{"stage", "terminal"}``), ``grad_norm`` (before
            clipping), ``max_abs_grad``, ``contact_count`` (contact-active states in the window,
            summed over the batch), ``max_penetration``, ``solver_residual`` (0), ``step_size``
            (norm of the policy update).
        critic_loss: mean squared residual of the most recent critic fit (0 before the first).
        episode_cost: :func:`episode_cost` of the policy before each update (nominal start).
        window: window index inside the episode (0 = fresh episode).
    """

    policy_params: PyTree
    critic_params: Float[Array, " n_features"]
    records: TrainingHealth
    critic_loss: Float[Array, " n_iterations"]
    episode_cost: Float[Array, " n_iterations"]
    window: Int[Array, " n_iterations"]


def shac_train(
    task: ShacTask,
    policy_params: PyTree,
    key: Key,
    *,
    horizon: int,
    n_iterations: int,
    n_envs: int = 8,
    learning_rate: float | Scalar = 1e-2,
    max_grad_norm: float | Scalar = 1.0,
    gamma: ScalarLike = 0.99,
    td_lambda: ScalarLike = 1.0,
    critic_ridge: ScalarLike = 1e-6,
    critic_tau: ScalarLike = 0.5,
    policy: Policy = mlp_policy,
    features: Features = quadratic_features,
    optimizer: Optional[optax.GradientTransformation] = None,
) -> ShacResult:
    r"""Optimise a policy with short-horizon differentiable rollouts and a learned critic (SHAC style).

    Iteration :math:`i` handles window :math:`i \bmod W` of the episode, :math:`W = \max(1, \lfloor H/h\rfloor)`;
    window 0 draws ``n_envs`` fresh start states :math:`x_0 + \text{init\_scale}\odot\mathcal N(0, I)`,
    the others continue from where the previous window stopped. Per iteration: the window
    loss and its gradient (:func:`short_horizon_loss`), one optimiser step (clip the global
    norm to ``max_grad_norm``, then Adam) and one health record; after the episode's last
    window, one critic fit on the whole episode (:func:`lambda_returns`, :func:`fit_critic`,
    blending with ``critic_tau``). The whole loop is one ``lax.scan``, so it runs under
    ``jit`` and ``vmap`` (e.g. over seeds).

    Args:
        task: :class:`ShacTask` (static).
        policy_params: initial policy parameters (pytree).
        key: PRNG key for the start states.
        horizon: window length :math:`h \ge 1` (static).
        n_iterations: number of windows/updates (static, >= 1).
        n_envs: parallel rollouts per window (static, >= 1).
        learning_rate: Adam learning rate (ignored when ``optimizer`` is given).
        max_grad_norm: threshold of ``optax.clip_by_global_norm`` (> 0).
        gamma: discount in (0, 1].
        td_lambda: λ of the critic targets in [0, 1]; 1 = discounted costs-to-go.
        critic_ridge: ridge weight of the critic fit (>= 0).
        critic_tau: blending factor of the critic in (0, 1].
        policy: ``policy(params, x) -> u``.
        features: critic feature map.
        optimizer: optax transformation replacing ``clip_by_global_norm + adam``.

    Returns:
        :class:`ShacResult`.
    """
    owner = "shac_train"
    gamma, td_lambda, max_grad_norm = _check_settings(
        owner, horizon=horizon, gamma=gamma, td_lambda=td_lambda, max_grad_norm=max_grad_norm
    )
    for name, value in (("n_iterations", n_iterations), ("n_envs", n_envs)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner}: {name} must be a Python int >= 1, got {value!r}")
    critic_tau = check_values(critic_tau, lambda a: (a > 0) & (a <= 1), f"{owner}: critic_tau must be in (0, 1]")
    critic_ridge = check_values(critic_ridge, lambda a: a >= 0, f"{owner}: critic_ridge must be >= 0")
    out = jax.eval_shape(policy, policy_params, task.x0)
    if out.shape != (task.nu,):
        raise ValueError(
            f"{owner}: policy must map a state {task.x0.shape} to an input of shape ({task.nu},), got {out.shape}"
        )
    policy_params = check_finite(policy_params, "policy_params", owner)

    if optimizer is None:
        optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate))
    n_windows = max(1, task.episode_length // horizon)
    dtype = task.x0.dtype
    nx = task.x0.shape[0]
    psi0 = jnp.zeros(features(task.x0).shape, dtype)
    starts0 = jnp.broadcast_to(task.x0, (n_envs, task.x0.shape[0]))
    loss_and_grad = jax.value_and_grad(short_horizon_loss, has_aux=True)

    def critic_update(psi, buf_states, buf_costs):
        # the episode's windows joined: states x_0..x_{Wh}, costs c_0..c_{Wh-1} per environment
        xs = jnp.concatenate(
            [jnp.swapaxes(buf_states[:, :, :-1], 0, 1).reshape(n_envs, -1, nx), buf_states[-1][:, -1:]], axis=1
        )
        cs = jnp.swapaxes(buf_costs, 0, 1).reshape(n_envs, -1)
        values = jax.vmap(jax.vmap(lambda x: critic_value(psi, x, features)))(xs[:, 1:])
        targets = jax.vmap(lambda c, v: lambda_returns(c, v, v[-1], gamma=gamma, td_lambda=td_lambda))(cs, values)
        psi_fit, mse = fit_critic(
            xs[:, :-1].reshape(-1, nx), targets.reshape(-1), ridge=critic_ridge, features=features
        )
        return (1.0 - critic_tau) * psi + critic_tau * psi_fit, mse

    def iteration(carry, index):
        params, opt_state, psi, critic_mse, states, buf_states, buf_costs, key = carry
        window = index % n_windows
        key, sub = jax.random.split(key)
        fresh = task.x0 + task.init_scale * jax.random.normal(sub, states.shape, dtype)
        starts = jnp.where(window == 0, fresh, states)
        eval_cost = episode_cost(params, task, policy=policy)

        (loss, roll), grads = loss_and_grad(
            params, psi, starts, task, horizon=horizon, gamma=gamma, policy=policy, features=features
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)

        # critic: store the window; after the episode's last window, regress on its returns
        states_w = jax.lax.stop_gradient(roll.states)
        buf_states = buf_states.at[window].set(states_w)
        buf_costs = buf_costs.at[window].set(jax.lax.stop_gradient(roll.costs))
        psi_new, mse_new = critic_update(psi, buf_states, buf_costs)
        last = window == n_windows - 1
        psi = jnp.where(last, psi_new, psi)
        critic_mse = jnp.where(last, mse_new, critic_mse)

        count, depth = contact_summary(roll.gaps)
        record = health_record(
            {"stage": roll.stage_term, "terminal": roll.terminal_term},
            grads,
            loss=loss,
            contact_count=count,
            max_penetration=depth,
            step_size=updates,
        )
        carry = (params, opt_state, psi, critic_mse, states_w[:, -1], buf_states, buf_costs, key)
        return carry, (record, critic_mse, eval_cost, window)

    buf_states0 = jnp.zeros((n_windows, n_envs, horizon + 1, nx), dtype)
    buf_costs0 = jnp.zeros((n_windows, n_envs, horizon), dtype)
    init = (
        policy_params,
        optimizer.init(policy_params),
        psi0,
        jnp.zeros((), dtype),
        starts0,
        buf_states0,
        buf_costs0,
        key,
    )
    (params, _, psi, *_), (records, critic_loss, costs, windows) = jax.lax.scan(
        iteration, init, jnp.arange(n_iterations)
    )
    return ShacResult(params, psi, records, critic_loss, costs, windows)
