"""Control tasks for SHAC: :class:`ShacTask`, and the stiff-wall toy task built by :func:`wall_task`.

A task bundles a discrete step, its parameters, a stage cost and (optionally) the contact gaps; how
:func:`~course_lib.shac.train.shac_train` uses one is described in :mod:`course_lib.shac`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from course_lib._types import Array, ArrayLike, Float, Params, Scalar, StageCost, State, Step
from course_lib._validate import check_vector
from course_lib.integrators import semi_implicit_euler


# --- tasks --------------------------------------------------------------------------------


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
