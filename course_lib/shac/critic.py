r"""Policy and critic of SHAC: a plain-JAX MLP policy and a feature-linear critic.

A policy is ``policy(params, x) -> u`` with a pytree of parameters (:func:`init_mlp`/:func:`mlp_policy`:
a tanh MLP, a linear map when it has no hidden layer). A critic is linear in features,
:math:`V_\psi(x) = \psi^T\phi(x)` (:func:`quadratic_features` by default), so its fit
(:func:`fit_critic`, to the targets of :func:`lambda_returns`) is one linear solve. Overview: :mod:`course_lib.shac`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from course_lib._types import Array, Control, Float, Key, PyTree, Scalar, ScalarLike, State

#: Parameters of :func:`mlp_policy`: one ``(W, b)`` pair per layer.
MLPParams = list[tuple[Float[Array, "n_out n_in"], Float[Array, " n_out"]]]
#: ``policy(params, x) -> u``.
Policy = Callable[[PyTree, State], Control]
#: Critic feature map ``features(x) -> (n_features,)``.
Features = Callable[[State], Float[Array, " n_features"]]


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
