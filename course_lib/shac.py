r"""Short-horizon actor-critic policy optimisation, SHAC style (S04.7.4–S04.7.7, S04.9.5 ex. 3).

A long episode of :math:`H` steps is cut into windows of :math:`h` steps. In each window the
policy is rolled out through the differentiable simulator and the loss

.. math:: L_h(\theta) = \frac1B\sum_{b=1}^B\Big[\sum_{k=0}^{h-1}\gamma^k c(x_k^b, u_k^b) + \gamma^h V_\psi(x_h^b)\Big],
          \qquad u_k = \pi_\theta(x_k),

is differentiated with respect to the policy parameters :math:`\theta`. The window's start
state is a constant (``stop_gradient``): gradients never cross a window boundary, so a
Jacobian product has at most :math:`h` factors. The critic :math:`V_\psi` (a cost-to-go,
since the library minimises) is also held constant in :math:`L_h`. The windows of one
episode are stored; after the episode's last window the critic is fitted by ridge regression
to the episode's λ-returns (:math:`T` = the episode's last step)

.. math:: G_T = V_\psi(x_T),\qquad G_k = c_k + \gamma\big[(1-\lambda)V_\psi(x_{k+1}) + \lambda G_{k+1}\big]

(:math:`\lambda = 1`: the observed discounted costs-to-go, bootstrapped once, at the episode
end) and blended into the old one, :math:`\psi \leftarrow (1-\tau)\psi + \tau\psi_{\text{fit}}`.
Fitting once per episode rather than once per window matters: a quadratic critic fitted to
one short window and bootstrapped at that window's end extrapolates, and the bootstrap
feeds the extrapolation back until the critic diverges.
The policy step clips the gradient with ``optax.clip_by_global_norm`` before Adam, so a
contact spike cannot throw the parameters away, and every iteration writes a
:class:`course_lib.health.TrainingHealth` record (loss terms, gradient norm *before*
clipping, contact count, maximum penetration, update size).

Conventions: a policy is ``policy(params, x) -> u`` with a pytree of parameters
(:func:`init_mlp`/:func:`mlp_policy`: a plain-JAX MLP, a linear map when it has no hidden
layer). A critic is linear in features, :math:`V_\psi(x) = \psi^T\phi(x)`
(:func:`quadratic_features` by default), so its fit is one linear solve. A task is a
:class:`ShacTask`; :func:`wall_task` builds the toy task with a stiff soft contact.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from course_lib._types import (
    Array,
    ArrayLike,
    Control,
    Float,
    Int,
    Key,
    Params,
    PyTree,
    Scalar,
    ScalarLike,
    StageCost,
    State,
    Step,
)
from course_lib._validate import check_finite, check_vector, is_concrete
from course_lib.health import TrainingHealth, contact_summary, health_record
from course_lib.integrators import semi_implicit_euler


# --- tasks --------------------------------------------------------------------------------


#: Parameters of :func:`mlp_policy`: one ``(W, b)`` pair per layer.
MLPParams = list[tuple[Float[Array, "n_out n_in"], Float[Array, " n_out"]]]
#: ``policy(params, x) -> u``.
Policy = Callable[[PyTree, State], Control]
#: Critic feature map ``features(x) -> (n_features,)``.
Features = Callable[[State], Float[Array, " n_features"]]


class ShacTask(NamedTuple):
    """A control task for :func:`shac_train` (all fields are static: close over it, do not trace it).

    Attributes:
        step: discrete dynamics ``step(x, u, p) -> x_next``.
        params: parameter pytree ``p`` of ``step``, ``stage_cost`` and ``gap``.
        stage_cost: ``c(x, u, p) -> scalar`` (minimised).
        gap: ``gap(x, p) -> (n_c,)`` signed contact distances (negative = penetration), or ``None``.
        x0: nominal initial state, shape ``(nx,)``.
        init_scale: standard deviation of the initial-state noise per component, shape ``(nx,)``.
        episode_length: steps per episode :math:`H` (int).
        nu: input size (int).
    """

    step: Step
    params: Params
    stage_cost: StageCost
    gap: Optional[Callable[[State, Params], Float[Array, " n_c"]]]
    x0: State
    init_scale: Float[Array, " nx"]
    episode_length: int
    nu: int


class WallParams(NamedTuple):
    """Point mass before a stiff wall (the toy contact task of :func:`wall_task`).

    ``mass`` 1 kg; ``damping`` 0.1 N·s/m; wall at ``wall`` = 1 m with ``stiffness`` k = 2500 N/m
    and softplus sharpness ``beta`` = 1000 1/m (force :math:`k\\,\\mathrm{softplus}(\\beta(q-q_w))/\\beta`);
    ``target`` 0.8 m; cost weights ``w_velocity`` 0.01 and ``w_input`` 1e-3.
    """

    mass: float = 1.0
    damping: float = 0.1
    wall: float = 1.0
    stiffness: float = 2500.0
    beta: float = 1000.0
    target: float = 0.8
    w_velocity: float = 0.01
    w_input: float = 1e-3


def wall_dynamics(x: Float[Array, "2"], u: Float[Array, "1"], p: WallParams) -> Float[Array, "2"]:
    r"""1-D point mass pushed towards a wall with a stiff softplus penalty contact.

    .. math:: m\dot v = u - b v - k\,\frac{\mathrm{softplus}(\beta\,(q - q_w))}{\beta},\qquad \dot q = v

    A minimal stand-in for the soft-contact models of S04.5 (a task built on
    ``course_lib.contact_systems`` can replace it: only ``step``, ``stage_cost`` and ``gap`` matter).

    Args:
        x: ``(q, v)``, shape ``(2,)``.
        u: force, shape ``(1,)``.
        p: :class:`WallParams`.
    """
    check_vector(x, 2, "state x", "wall_dynamics")
    check_vector(u, 1, "input u", "wall_dynamics")
    contact = p.stiffness * jax.nn.softplus(p.beta * (x[0] - p.wall)) / p.beta
    return jnp.stack([x[1], (u[0] - p.damping * x[1] - contact) / p.mass])


def wall_gap(x: Float[Array, "2"], p: WallParams) -> Float[Array, "1"]:
    """Signed distance to the wall :math:`\\phi = q_w - q`, shape ``(1,)``."""
    return jnp.reshape(p.wall - x[0], (1,))


def wall_cost(x: Float[Array, "2"], u: Float[Array, "1"], p: WallParams) -> Scalar:
    r"""Stage cost :math:`(q - q^*)^2 + w_v v^2 + w_u u^2`."""
    return (x[0] - p.target) ** 2 + p.w_velocity * x[1] ** 2 + p.w_input * jnp.sum(u**2)


def wall_task(
    params: WallParams = WallParams(),
    *,
    h: float = 0.02,
    episode_length: int = 64,
    x0: Float[ArrayLike, "2"] | tuple[float, float] = (0.0, 2.0),
    init_scale: Float[ArrayLike, "2"] | tuple[float, float] = (0.05, 0.3),
) -> ShacTask:
    """Toy task: stop a mass thrown at 2 m/s towards a stiff wall at 1 m, at the target 0.8 m.

    Without control the mass hits the wall after about 0.5 s and bounces; with
    :math:`k = 2500` N/m the contact lasts a few steps of ``h`` = 0.02 s (semi-implicit
    Euler, :math:`\\omega h = 1`), so gradients through it spike.

    Args:
        params: :class:`WallParams`.
        h: step size (s).
        episode_length: steps per episode.
        x0: nominal initial ``(q, v)``.
        init_scale: standard deviation of the initial-state noise.
    """
    if int(episode_length) < 1:
        raise ValueError(f"wall_task: episode_length must be >= 1, got {episode_length}")
    return ShacTask(
        step=semi_implicit_euler(wall_dynamics, h),
        params=params,
        stage_cost=wall_cost,
        gap=wall_gap,
        x0=jnp.asarray(x0, dtype=jnp.result_type(float)),
        init_scale=jnp.asarray(init_scale, dtype=jnp.result_type(float)),
        episode_length=int(episode_length),
        nu=1,
    )


# --- policy and critic --------------------------------------------------------------------


def init_mlp(key: Key, sizes: Sequence[int], *, scale: float = 1.0, zero_last: bool = True) -> MLPParams:
    """Parameters of a tanh MLP ``sizes = (nx, hidden..., nu)`` as a list of ``(W, b)`` pairs.

    ``W`` of layer ``i`` has shape ``(sizes[i+1], sizes[i])``, initialised
    :math:`\\mathcal N(0, \\text{scale}^2/\\text{fan\\_in})`. With ``zero_last`` the output layer starts
    at zero, so the initial policy outputs :math:`u = 0`. ``sizes = (nx, nu)`` is a linear policy.
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"init_mlp: sizes must list at least two positive layer sizes, got {sizes}")
    keys = jax.random.split(key, len(sizes) - 1)
    dtype = jnp.result_type(float)
    params = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        last = i == len(sizes) - 2
        w = scale * jax.random.normal(keys[i], (n_out, n_in), dtype) / np.sqrt(n_in)
        params.append((jnp.zeros_like(w) if (last and zero_last) else w, jnp.zeros((n_out,), dtype)))
    return params


def mlp_policy(params: MLPParams, x: State) -> Control:
    """:math:`u = W_L\\tanh(\\cdots\\tanh(W_1 x + b_1)\\cdots) + b_L`; params from :func:`init_mlp`."""
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(w @ h + b)
    w, b = params[-1]
    return w @ h + b


def quadratic_features(x: Float[Array, " n"]) -> Float[Array, " n_features"]:
    r"""Critic features :math:`\phi(x) = (1, x, \{x_i x_j\}_{i\le j})`, shape ``(1 + n + n(n+1)/2,)``."""
    i, j = np.triu_indices(x.shape[0])
    return jnp.concatenate([jnp.ones((1,), x.dtype), x, (x[:, None] * x[None, :])[i, j]])


def critic_value(psi: Float[Array, " n_features"], x: State, features: Features = quadratic_features) -> Scalar:
    r""":math:`V_\psi(x) = \psi^T\phi(x)`."""
    return jnp.dot(psi, features(x))


def fit_critic(
    states: Float[Array, "M nx"],
    targets: Float[Array, " M"],
    *,
    ridge: ScalarLike = 1e-6,
    features: Features = quadratic_features,
) -> tuple[Float[Array, " n_features"], Scalar]:
    r"""Ridge regression of a feature-linear critic: :math:`\min_\psi \|\Phi\psi - G\|^2 + \rho M\|\psi\|^2`.

    Args:
        states: ``(M, nx)``.
        targets: ``(M,)`` regression targets :math:`G`.
        ridge: :math:`\rho \ge 0` (scaled by the number of rows ``M``).
        features: feature map.

    Returns:
        ``(psi, mse)``: the weights ``(n_features,)`` and the fit's mean squared residual.
    """
    phi = jax.vmap(features)(states)
    m, n = phi.shape
    gram = phi.T @ phi + ridge * m * jnp.eye(n, dtype=phi.dtype)
    psi = jnp.linalg.solve(gram, phi.T @ targets)
    return psi, jnp.mean((phi @ psi - targets) ** 2)


def lambda_returns(
    costs: Float[Array, " h"],
    values_next: Float[Array, " h"],
    terminal_value: ScalarLike,
    *,
    gamma: ScalarLike,
    td_lambda: ScalarLike,
) -> Float[Array, " h"]:
    r"""TD(λ) targets along one window, computed backwards with ``lax.scan``.

    .. math:: G_h = V(x_h),\quad G_k = c_k + \gamma\big[(1-\lambda)V(x_{k+1}) + \lambda G_{k+1}\big]

    Args:
        costs: :math:`c_0..c_{h-1}`, shape ``(h,)``.
        values_next: :math:`V(x_1)..V(x_h)`, shape ``(h,)``.
        terminal_value: :math:`V(x_h)`, scalar.
        gamma: discount.
        td_lambda: :math:`\lambda\in[0,1]`.

    Returns:
        :math:`G_0..G_{h-1}`, shape ``(h,)``.
    """

    def body(g_next, cv):
        c, v_next = cv
        g = c + gamma * ((1.0 - td_lambda) * v_next + td_lambda * g_next)
        return g, g

    _, gs = jax.lax.scan(body, terminal_value, (costs, values_next), reverse=True)
    return gs


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
    if horizon is not None and (not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1):
        raise ValueError(f"{owner}: horizon h must be a Python int >= 1, got {horizon!r}")
    for name, value, ok, what in (
        ("gamma", gamma, lambda v: 0.0 < v <= 1.0, "in (0, 1]"),
        ("td_lambda", td_lambda, lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
        ("max_grad_norm", max_grad_norm, lambda v: v > 0.0, "positive"),
    ):
        if value is None:
            continue
        if jnp.ndim(value) != 0:
            raise ValueError(f"{owner}: {name} must be a scalar, got shape {jnp.shape(value)}")
        if is_concrete(value):
            v = float(np.asarray(value))
            if not np.isfinite(v) or not ok(v):
                raise ValueError(f"{owner}: {name} must be {what}, got {v!r}")


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
    r"""SHAC window loss :math:`L_h` (module doc) and its rollout, for ``jax.value_and_grad(..., has_aux=True)``.

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
    _check_settings(owner, horizon=horizon, gamma=gamma)
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
    _check_settings(owner, horizon=horizon, gamma=gamma, td_lambda=td_lambda, max_grad_norm=max_grad_norm)
    for name, value in (("n_iterations", n_iterations), ("n_envs", n_envs)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner}: {name} must be a Python int >= 1, got {value!r}")
    if is_concrete(critic_tau) and not (0.0 < float(critic_tau) <= 1.0):
        raise ValueError(f"{owner}: critic_tau must be in (0, 1], got {critic_tau!r}")
    if is_concrete(critic_ridge) and not float(critic_ridge) >= 0.0:
        raise ValueError(f"{owner}: critic_ridge must be >= 0, got {critic_ridge!r}")
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
