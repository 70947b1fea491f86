r"""Differentiable system identification and identifiability (S04.1 exercise 2, S04.9.1, S04.9.5 ex. 4).

Given a measured trajectory :math:`\hat x_0..\hat x_N` under known inputs, the parameters
:math:`\theta` (by default mass :math:`m`, viscous damping :math:`b` and Coulomb friction
:math:`f_c` of :func:`course_lib.systems.friction_block`) minimise

.. math:: J(\theta) = \sum_{k=0}^{N}\sum_{i} W_{ki}\,\big(x_{k,i}(\theta) - \hat x_{k,i}\big)^2,
          \qquad x_{k+1}(\theta) = F(x_k(\theta), u_k, \theta),\ x_0 = \hat x_0.

**Bounds.** Physical parameters are positive, so :func:`fit_parameters` optimises
:math:`z = \log\theta` (a reparametrisation: :math:`\theta = e^z > 0` whatever the step), and
enforces optional box bounds :math:`0 \le \ell \le \theta \le u` by projecting :math:`z` onto
:math:`[\log\ell, \log u]` after each optax step. In log coordinates Adam's steps are
*relative* changes, so parameters of different magnitude move at the same rate.

**Identifiability.** Near the optimum :math:`J \approx \|J_s\,\delta\theta\|^2` with the stacked
sensitivities :math:`J_s = [\sqrt{W_k}\,S_k]_k`, :math:`S_k = \partial x_k/\partial\theta`
(:func:`course_lib.sensitivity.parameter_sensitivities`). Its singular values say how
strongly the data pin each parameter combination: a zero singular value is a direction
:math:`v` in parameter space the trajectory cannot see (rank deficiency), a tiny one a
direction the noise will decide (ill-conditioning). :func:`identifiability` reports the rank,
the condition number, the singular values and the right singular vectors, whose trailing
rows span the null space. By default the columns are scaled by :math:`\theta_j`
(sensitivities to :math:`\log\theta_j`, the coordinates the fit uses), which makes the
condition number independent of the parameters' units.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from course_lib._types import Array, ArrayLike, Controls, Float, Int, Params, Scalar, ScalarLike, State, Step
from course_lib._validate import check_condition, check_finite, check_values
from course_lib.rollout import rollout
from course_lib.sensitivity import parameter_sensitivities
from course_lib.systems import FrictionBlockParams

#: State weights of :func:`sysid_loss`: ``None``, ``(nx,)`` or ``(N+1, nx)`` (a tuple of floats works too).
Weights = Float[ArrayLike, " nx"] | Float[ArrayLike, "N+1 nx"] | Sequence[float] | None
#: Parameter bounds of :func:`fit_parameters`: a scalar or ``(n_fit,)``.
Bounds = ScalarLike | Float[ArrayLike, " n_fit"] | Sequence[float] | None

#: The parameters of :class:`~course_lib.systems.FrictionBlockParams` identified by default.
FRICTION_FIELDS = ("mass", "damping", "coulomb")


# --- helpers --------------------------------------------------------------------------------


def _fields(p, fields, owner):
    if not hasattr(p, "_fields"):
        raise TypeError(f"{owner}: parameters must be a NamedTuple, got {type(p).__name__}")
    fields = tuple(fields)
    if not fields:
        raise ValueError(f"{owner}: fields must name at least one parameter")
    unknown = [f for f in fields if f not in p._fields]
    if unknown:
        raise ValueError(f"{owner}: unknown parameter field(s) {unknown}; {type(p).__name__} has {list(p._fields)}")
    if len(set(fields)) != len(fields):
        raise ValueError(f"{owner}: fields {fields} name a parameter twice")
    for f in fields:
        if jnp.ndim(getattr(p, f)) != 0:
            raise ValueError(
                f"{owner}: parameter {f!r} must be a scalar to be identified, got shape {jnp.shape(getattr(p, f))}"
            )
    return fields


def _theta(p, fields):
    return jnp.stack([jnp.asarray(getattr(p, f), dtype=jnp.result_type(float)) for f in fields])


def _with(p, fields, theta):
    return p._replace(**{f: theta[i] for i, f in enumerate(fields)})


def _weights(weights, shape, owner):
    if weights is None:
        return jnp.ones(shape)
    w = jnp.asarray(weights)
    if w.shape not in (shape, shape[1:]):
        raise ValueError(f"{owner}: weights must have shape {shape[1:]} or {shape}, got {w.shape}")
    w = check_values(w, lambda a: a >= 0, f"{owner}: weights must be non-negative")  # NaN fails too
    return jnp.broadcast_to(w, shape)


def _check_data(x0, us, xs_measured, owner):
    """``xs_measured``, checked against ``x0`` and ``us`` (shapes now; finiteness now or when traced code runs)."""
    if jnp.ndim(us) != 2:
        raise ValueError(f"{owner}: us must have shape (N, nu), got shape {jnp.shape(us)}")
    expected = (jnp.shape(us)[0] + 1, jnp.shape(x0)[0] if jnp.ndim(x0) == 1 else -1)
    if jnp.ndim(x0) != 1 or jnp.shape(xs_measured) != expected:
        raise ValueError(
            f"{owner}: xs_measured must have shape (N+1, nx) = {expected} for x0 {jnp.shape(x0)} and us "
            f"{jnp.shape(us)}, got {jnp.shape(xs_measured)}"
        )
    return check_finite(xs_measured, "xs_measured", owner)


def _bounds(lower, upper, n, dtype, owner):
    lo = jnp.zeros((n,), dtype) if lower is None else jnp.broadcast_to(jnp.asarray(lower, dtype), (n,))
    hi = jnp.full((n,), jnp.inf, dtype) if upper is None else jnp.broadcast_to(jnp.asarray(upper, dtype), (n,))
    lo, hi = check_values((lo, hi), lambda a: a == a, f"{owner}: bounds must not be NaN")
    lo = check_values(
        lo, lambda a: a >= 0, f"{owner}: lower bounds must be >= 0 (the parameters are physical, positive)"
    )
    hi = check_condition(hi, hi > lo, f"{owner}: every upper bound must exceed its lower bound")
    return lo, hi


# --- public API -----------------------------------------------------------------------------


def sysid_loss(
    step: Step, x0: State, us: Controls, p: Params, xs_measured: Float[Array, "N+1 nx"], weights: Weights = None
) -> Scalar:
    r"""Sum of squared (weighted) state errors :math:`J = \sum_k\sum_i W_{ki}(x_{k,i}(p) - \hat x_{k,i})^2`.

    Args:
        step: ``step(x, u, p) -> x_next``.
        x0: initial state ``(nx,)`` (usually the measured ``xs_measured[0]``).
        us: inputs ``(N, nu)``.
        p: parameter pytree.
        xs_measured: measured states ``(N+1, nx)``.
        weights: ``None`` (all ones), ``(nx,)`` per-state or ``(N+1, nx)`` per-sample weights, >= 0.

    Returns:
        scalar :math:`J`.
    """
    owner = "sysid_loss"
    xs_measured = _check_data(x0, us, xs_measured, owner)
    w = _weights(weights, jnp.shape(xs_measured), owner)
    xs = rollout(step, x0, us, p)
    return jnp.sum(w * (xs - xs_measured) ** 2)


class SysIdResult(NamedTuple):
    """Output of :func:`fit_parameters`; histories have leading axis ``(n_iterations,)``.

    Attributes:
        params: identified parameters (the initial NamedTuple with the fitted fields replaced).
        loss: :math:`J` before each update, ``(n_iterations,)``.
        history: fitted values :math:`\\theta` before each update, ``(n_iterations, n_fit)`` (order of ``fields``).
        grad_norm: :math:`\\|\\partial J/\\partial\\log\\theta\\|_2` before each update, ``(n_iterations,)``.
        final_loss: :math:`J` at ``params``, scalar.
    """

    params: NamedTuple
    loss: Float[Array, " n_iterations"]
    history: Float[Array, "n_iterations n_fit"]
    grad_norm: Float[Array, " n_iterations"]
    final_loss: Scalar


def fit_parameters(
    step: Step,
    x0: State,
    us: Controls,
    p_init: NamedTuple,
    xs_measured: Float[Array, "N+1 nx"],
    *,
    fields: Sequence[str] = FRICTION_FIELDS,
    lower: Bounds = None,
    upper: Bounds = None,
    weights: Weights = None,
    learning_rate: float | Scalar = 0.1,
    n_iterations: int = 500,
    optimizer: Optional[optax.GradientTransformation] = None,
) -> SysIdResult:
    r"""Identify the scalar parameters ``fields`` of ``p_init`` from one trajectory with optax.

    Optimises :math:`z = \log\theta` (positivity by construction) with Adam whose learning rate
    decays from ``learning_rate`` to 1 % of it along a cosine schedule (constant-rate Adam keeps
    hopping around the optimum), projecting :math:`z` onto :math:`[\log\ell, \log u]` after
    every step. The loop is a ``lax.scan``, so the call runs under ``jit`` (``n_iterations``
    static) and ``vmap`` (e.g. over several initial guesses).

    Position errors integrate velocity errors and grow along the trajectory, so they dominate
    an unweighted loss and slow the fit down; weighting velocity more (``weights=(0.1, 1.0)``
    for the friction block) conditions the problem better.

    Args:
        step: ``step(x, u, p) -> x_next`` (e.g. ``rk4(friction_block, h)``).
        x0: initial state ``(nx,)``.
        us: inputs ``(N, nu)``.
        p_init: initial guess, a NamedTuple; fields not in ``fields`` stay fixed.
        xs_measured: measured states ``(N+1, nx)``.
        fields: names of the scalar fields to identify (default mass, damping, Coulomb friction).
        lower: lower bounds :math:`\ell \ge 0`, scalar or ``(n_fit,)``; default 0 (positivity only).
        upper: upper bounds :math:`u > \ell`, scalar or ``(n_fit,)``; default :math:`+\infty`.
        weights: state weights of :func:`sysid_loss`.
        learning_rate: initial Adam step in log-parameter space (ignored when ``optimizer`` is given).
        n_iterations: number of optimiser steps (static, >= 1).
        optimizer: an optax transformation to use instead of the default.

    Returns:
        :class:`SysIdResult`.
    """
    owner = "fit_parameters"
    fields = _fields(p_init, fields, owner)
    xs_measured = _check_data(x0, us, xs_measured, owner)
    if not isinstance(n_iterations, (int, np.integer)) or isinstance(n_iterations, bool) or n_iterations < 1:
        raise ValueError(f"{owner}: n_iterations must be a Python int >= 1, got {n_iterations!r}")
    theta0 = _theta(p_init, fields)
    theta0 = check_values(theta0, lambda a: a > 0, f"{owner}: the initial values of {fields} must be positive")
    learning_rate = check_values(learning_rate, lambda a: a > 0, f"{owner}: learning_rate must be positive")
    lo, hi = _bounds(lower, upper, len(fields), theta0.dtype, owner)
    w = _weights(weights, jnp.shape(xs_measured), owner)
    z_lo, z_hi = jnp.log(lo), jnp.log(hi)

    if optimizer is None:
        schedule = optax.cosine_decay_schedule(learning_rate, n_iterations, alpha=0.01)
        optimizer = optax.adam(schedule)

    def objective(z):
        return sysid_loss(step, x0, us, _with(p_init, fields, jnp.exp(z)), xs_measured, w)

    value_and_grad = jax.value_and_grad(objective)

    def body(carry, _):
        z, opt_state = carry
        loss, g = value_and_grad(z)
        updates, opt_state = optimizer.update(g, opt_state, z)
        # optax types apply_updates on pytrees (optax.Params); on an array it returns an array
        z_next = jnp.clip(optax.apply_updates(z, updates), z_lo, z_hi)  # pyright: ignore[reportArgumentType]
        return (z_next, opt_state), (loss, jnp.exp(z), jnp.linalg.norm(g))

    z0 = jnp.clip(jnp.log(theta0), z_lo, z_hi)
    (z, _), (losses, history, grad_norms) = jax.lax.scan(body, (z0, optimizer.init(z0)), None, length=n_iterations)
    params = _with(p_init, fields, jnp.exp(z))
    return SysIdResult(params, losses, history, grad_norms, objective(z))


class Identifiability(NamedTuple):
    """Output of :func:`identifiability` (parameter order = ``fields``).

    Attributes:
        singular_values: of the stacked sensitivity matrix, descending, ``(n_fit,)``.
        rank: number of singular values above ``rtol * singular_values[0]`` (integer scalar).
        condition_number: :math:`s_{\\max}/s_{\\min}` (``inf`` when :math:`s_{\\min} = 0`).
        directions: right singular vectors as rows, ``(n_fit, n_fit)``; ``directions[i]`` goes with
            ``singular_values[i]``, so ``directions[rank:]`` span the null space.
        sensitivities: the stacked (weighted, scaled) matrix, ``((N+1) * nx, n_fit)``.
    """

    singular_values: Float[Array, " n_fit"]
    rank: Int[Array, ""]
    condition_number: Scalar
    directions: Float[Array, "n_fit n_fit"]
    sensitivities: Float[Array, "(N+1)*nx n_fit"]

    def null_space(self) -> np.ndarray:
        """Host-side: the null-space directions ``directions[rank:]``, shape ``(n_fit - rank, n_fit)``."""
        return np.asarray(self.directions)[int(self.rank) :]

    def identifiable(self) -> bool:
        """Host-side: True when every parameter direction is seen (full rank)."""
        return int(self.rank) == self.directions.shape[0]


def identifiability(
    step: Step,
    x0: State,
    us: Controls,
    p: NamedTuple,
    *,
    fields: Sequence[str] = FRICTION_FIELDS,
    weights: Weights = None,
    relative: bool = True,
    rtol: float = 1e-6,
) -> Identifiability:
    r"""Rank, conditioning and null space of the stacked sensitivities :math:`\partial x_k/\partial\theta` (S04.2.5).

    Rows :math:`\sqrt{W_{ki}}\,\partial x_{k,i}/\partial\theta` for k = 0..N (the Jacobian whose
    :math:`J_s^TJ_s` is the Gauss–Newton Hessian of :func:`sysid_loss`), columns scaled by
    :math:`\theta_j` when ``relative``.

    Args:
        step: ``step(x, u, p) -> x_next``.
        x0: initial state ``(nx,)``.
        us: inputs ``(N, nu)``.
        p: parameters (NamedTuple) at which to linearise (the truth, or the estimate).
        fields: scalar fields whose identifiability is analysed.
        weights: as in :func:`sysid_loss`.
        relative: scale columns by :math:`\theta_j` (sensitivities to :math:`\log\theta_j`).
        rtol: relative singular-value threshold of the numerical rank, in (0, 1).

    Returns:
        :class:`Identifiability`.
    """
    owner = "identifiability"
    fields = _fields(p, fields, owner)
    if jnp.ndim(us) != 2 or jnp.ndim(x0) != 1:
        raise ValueError(
            f"{owner}: x0 must have shape (nx,) and us shape (N, nu), got {jnp.shape(x0)} and {jnp.shape(us)}"
        )
    rtol = check_values(rtol, lambda a: (a > 0) & (a < 1), f"{owner}: rtol must lie in (0, 1)")
    theta = _theta(p, fields)
    w = _weights(weights, (jnp.shape(us)[0] + 1, jnp.shape(x0)[0]), owner)

    def sub_step(x, u, th):
        return step(x, u, _with(p, fields, th))

    s = parameter_sensitivities(sub_step, x0, us, theta)  # (N+1, nx, n_fit)
    if relative:
        s = s * theta
    matrix = (jnp.sqrt(w)[..., None] * s).reshape(-1, theta.shape[0])
    _, sv, vt = jnp.linalg.svd(matrix, full_matrices=False)
    rank = jnp.sum(sv > rtol * sv[0])
    cond = jnp.where(sv[-1] > 0, sv[0] / jnp.where(sv[-1] > 0, sv[-1], 1.0), jnp.inf)
    return Identifiability(sv, rank, cond, vt, matrix)


# --- excitation signals for the friction block ---------------------------------------------


def multisine(
    n_steps: int,
    h: float,
    amplitudes: Float[ArrayLike, "*n_sines"] | Sequence[float],
    frequencies: Float[ArrayLike, "*n_sines"] | Sequence[float],
    phases: Float[ArrayLike, "*n_sines"] | Sequence[float] | None = None,
) -> Float[Array, "N 1"]:
    r"""Sum-of-sines input :math:`u(t_k) = \sum_j a_j\sin(\omega_j t_k + \varphi_j)`, :math:`t_k = k h`, shape ``(N, 1)`` (``h``: step size).

    A rich excitation: several frequencies and amplitudes large enough to make the block
    accelerate, slide both ways and cross :math:`v = 0`, so mass, damping and Coulomb
    friction each leave their own signature in the trajectory.
    """
    a, w = jnp.atleast_1d(jnp.asarray(amplitudes, float)), jnp.atleast_1d(jnp.asarray(frequencies, float))
    ph = jnp.zeros_like(a) if phases is None else jnp.atleast_1d(jnp.asarray(phases, float))
    if not (a.shape == w.shape == ph.shape) or a.ndim != 1:
        raise ValueError(
            f"multisine: amplitudes, frequencies and phases must be 1-D of one length, got {a.shape}, {w.shape}, {ph.shape}"
        )
    t = jnp.arange(int(n_steps)) * h
    return jnp.sum(a * jnp.sin(t[:, None] * w + ph), axis=1, keepdims=True)


def friction_balance_force(p: FrictionBlockParams, velocity: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    r"""Force that holds the friction block at constant velocity: :math:`u = b v + f_c\tanh(v/v_s)`.

    Under this input, started at :math:`v`, the block never accelerates: the mass leaves no
    trace and damping and Coulomb friction enter only through their sum at one speed, so the
    stacked sensitivities have rank 1 (a poor excitation).
    """
    # a NumPy velocity makes the first term an ndarray; ndarray + jax.Array is a jax.Array (its
    # __array_priority__), which NumPy's stubs cannot express
    return p.damping * velocity + p.coulomb * jnp.tanh(velocity / p.v_smooth)  # pyright: ignore[reportReturnType]
