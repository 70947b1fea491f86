r"""Smooth continuous-time systems ``f(x, u, p) -> xdot``.

Every model follows one convention (S04.2.1): ``x`` is the state vector, ``u``
the input vector, ``p`` a NamedTuple of physical parameters whose defaults are
documented on the class. Mechanical states are ordered ``x = (q, v)`` so that
semi-implicit Euler can split them. Each model is also described by a
:class:`System` record in :data:`SYSTEMS`, so code can loop over all of them.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from course_lib._types import Array, ArrayLike, Dynamics, Energy, Float, Scalar

from course_lib._validate import check_vector, lookup


def _checked(x: ArrayLike, u: ArrayLike, nx: int, nu: int, owner: str) -> tuple[Array, Array]:
    check_vector(x, nx, "state x", owner)
    check_vector(u, nu, "input u", owner)
    return jnp.asarray(x), jnp.asarray(u)


# --- scalar linear system -------------------------------------------------------------------


class ScalarLinearParams(NamedTuple):
    """``a``: rate of :math:`\\dot x = a x + u` (default -1, a stable decay)."""

    a: float = -1.0


def scalar_linear(x: Float[ArrayLike, "1"], u: Float[ArrayLike, "1"], p: ScalarLinearParams) -> Float[Array, "1"]:
    r"""Scalar test equation :math:`\dot x = a x + u` (S04.3.1).

    Args:
        x: state, shape ``(1,)``.
        u: input, shape ``(1,)``.
        p: :class:`ScalarLinearParams`.
    """
    x, u = _checked(x, u, 1, 1, "scalar_linear")
    return p.a * x + u


# --- double integrator ----------------------------------------------------------------------


class DoubleIntegratorParams(NamedTuple):
    """``mass`` (default 1): the input is a force, so :math:`\\dot v = u/m`."""

    mass: float = 1.0


def double_integrator(
    x: Float[ArrayLike, "2"], u: Float[ArrayLike, "1"], p: DoubleIntegratorParams
) -> Float[Array, "2"]:
    r"""Double integrator :math:`\dot q = v,\ \dot v = u/m` (S04.1.5, S04.2.6).

    Args:
        x: ``(q, v)``, shape ``(2,)``.
        u: force, shape ``(1,)``.
        p: :class:`DoubleIntegratorParams`.
    """
    x, u = _checked(x, u, 2, 1, "double_integrator")
    return jnp.stack([x[1], u[0] / p.mass])


def double_integrator_energy(x: Float[Array, "2"], p: DoubleIntegratorParams) -> Scalar:
    """Kinetic energy :math:`\\tfrac12 m v^2`."""
    return 0.5 * p.mass * x[1] ** 2


# --- damped pendulum ------------------------------------------------------------------------


class PendulumParams(NamedTuple):
    """Point-mass pendulum: ``mass`` 1 kg, ``length`` 1 m, ``gravity`` 9.81, ``damping`` 0.1 N·m·s."""

    mass: float = 1.0
    length: float = 1.0
    gravity: float = 9.81
    damping: float = 0.1


def pendulum(x: Float[ArrayLike, "2"], u: Float[ArrayLike, "1"], p: PendulumParams) -> Float[Array, "2"]:
    r"""Damped pendulum, angle from the downward vertical.

    .. math:: m l^2 \ddot\theta = -m g l \sin\theta - b\dot\theta + u

    Args:
        x: ``(theta, omega)``, shape ``(2,)``.
        u: joint torque, shape ``(1,)``.
        p: :class:`PendulumParams`.
    """
    x, u = _checked(x, u, 2, 1, "pendulum")
    inertia = p.mass * p.length**2
    acc = (-p.mass * p.gravity * p.length * jnp.sin(x[0]) - p.damping * x[1] + u[0]) / inertia
    return jnp.stack([x[1], acc])


def pendulum_energy(x: Float[Array, "2"], p: PendulumParams) -> Scalar:
    r""":math:`\tfrac12 m l^2\omega^2 + m g l (1-\cos\theta)`."""
    return 0.5 * p.mass * p.length**2 * x[1] ** 2 + p.mass * p.gravity * p.length * (1 - jnp.cos(x[0]))


# --- cart-pole ------------------------------------------------------------------------------


class CartPoleParams(NamedTuple):
    """Cart ``cart_mass`` 1 kg, pole ``pole_mass`` 0.1 kg at ``pole_length`` 0.5 m (half length, uniform rod), ``gravity`` 9.81."""

    cart_mass: float = 1.0
    pole_mass: float = 0.1
    pole_length: float = 0.5
    gravity: float = 9.81


def cart_pole(x: Float[ArrayLike, "4"], u: Float[ArrayLike, "1"], p: CartPoleParams) -> Float[Array, "4"]:
    r"""Cart-pole (Barto et al. 1983 form), pole angle from the upright vertical.

    .. math::
        \ddot\theta = \frac{g\sin\theta - \cos\theta\,\frac{u + m_p l\dot\theta^2\sin\theta}{m_c+m_p}}
                          {l\left(\tfrac43 - \frac{m_p\cos^2\theta}{m_c+m_p}\right)},\qquad
        \ddot s = \frac{u + m_p l(\dot\theta^2\sin\theta - \ddot\theta\cos\theta)}{m_c+m_p}

    Args:
        x: ``(s, theta, s_dot, theta_dot)``, shape ``(4,)``.
        u: horizontal force on the cart, shape ``(1,)``.
        p: :class:`CartPoleParams`.
    """
    x, u = _checked(x, u, 4, 1, "cart_pole")
    _, th, sd, thd = x
    total = p.cart_mass + p.pole_mass
    sin, cos = jnp.sin(th), jnp.cos(th)
    temp = (u[0] + p.pole_mass * p.pole_length * thd**2 * sin) / total
    th_acc = (p.gravity * sin - cos * temp) / (p.pole_length * (4.0 / 3.0 - p.pole_mass * cos**2 / total))
    s_acc = temp - p.pole_mass * p.pole_length * th_acc * cos / total
    return jnp.stack([sd, thd, s_acc, th_acc])


def cart_pole_energy(x: Float[Array, "4"], p: CartPoleParams) -> Scalar:
    """Kinetic plus potential energy (pole as a uniform rod of half length ``half``)."""
    _, th, sd, thd = x
    m_p, half = p.pole_mass, p.pole_length
    pole_vel_sq = sd**2 + 2 * sd * half * thd * jnp.cos(th) + (half * thd) ** 2
    kinetic = 0.5 * p.cart_mass * sd**2 + 0.5 * m_p * pole_vel_sq + 0.5 * (m_p * (2 * half) ** 2 / 12) * thd**2
    return kinetic + m_p * p.gravity * half * jnp.cos(th)


# --- spring-damper --------------------------------------------------------------------------


class SpringDamperParams(NamedTuple):
    """``mass`` 1 kg, ``damping`` b = 0.5 N·s/m, ``stiffness`` k = 10 N/m."""

    mass: float = 1.0
    damping: float = 0.5
    stiffness: float = 10.0


def spring_damper(x: Float[ArrayLike, "2"], u: Float[ArrayLike, "1"], p: SpringDamperParams) -> Float[Array, "2"]:
    r"""Mass-spring-damper :math:`m\ddot q = u - b\dot q - k q` (end-of-chapter exercise A).

    Args:
        x: ``(q, v)``, shape ``(2,)``.
        u: force, shape ``(1,)``.
        p: :class:`SpringDamperParams`.
    """
    x, u = _checked(x, u, 2, 1, "spring_damper")
    return jnp.stack([x[1], (u[0] - p.damping * x[1] - p.stiffness * x[0]) / p.mass])


def spring_damper_energy(x: Float[Array, "2"], p: SpringDamperParams) -> Scalar:
    r""":math:`\tfrac12 m v^2 + \tfrac12 k q^2`."""
    return 0.5 * p.mass * x[1] ** 2 + 0.5 * p.stiffness * x[0] ** 2


# --- two masses joined by springs -----------------------------------------------------------


class TwoMassParams(NamedTuple):
    """Wall –k_wall– mass 1 –k– mass 2: masses 1 kg each, ``k_wall`` 1 N/m, coupling ``k`` 10 N/m, ``damping`` 0 on each mass."""

    mass1: float = 1.0
    mass2: float = 1.0
    k_wall: float = 1.0
    k: float = 10.0
    damping: float = 0.0


def two_mass_spring(x: Float[ArrayLike, "4"], u: Float[ArrayLike, "2"], p: TwoMassParams) -> Float[Array, "4"]:
    r"""Two masses in a chain: wall, spring ``k_wall``, mass 1, spring ``k``, mass 2 (S04.3 exercise 2).

    .. math::
        m_1\ddot q_1 = -k_w q_1 + k(q_2-q_1) - b\dot q_1 + u_1,\quad
        m_2\ddot q_2 = -k(q_2-q_1) - b\dot q_2 + u_2

    Args:
        x: ``(q1, q2, v1, v2)``, shape ``(4,)``.
        u: forces on each mass, shape ``(2,)``.
        p: :class:`TwoMassParams`.
    """
    x, u = _checked(x, u, 4, 2, "two_mass_spring")
    q1, q2, v1, v2 = x
    stretch = q2 - q1
    a1 = (-p.k_wall * q1 + p.k * stretch - p.damping * v1 + u[0]) / p.mass1
    a2 = (-p.k * stretch - p.damping * v2 + u[1]) / p.mass2
    return jnp.stack([v1, v2, a1, a2])


def two_mass_spring_energy(x: Float[Array, "4"], p: TwoMassParams) -> Scalar:
    """Kinetic plus elastic energy of both springs."""
    q1, q2, v1, v2 = x
    return 0.5 * (p.mass1 * v1**2 + p.mass2 * v2**2 + p.k_wall * q1**2 + p.k * (q2 - q1) ** 2)


# --- linear inverted pendulum ---------------------------------------------------------------


class LIPMParams(NamedTuple):
    """Centre-of-mass height ``height`` 0.8 m and ``gravity`` 9.81; :math:`\\omega = \\sqrt{g/h}`."""

    gravity: float = 9.81
    height: float = 0.8


def lipm(x: Float[ArrayLike, "2"], u: Float[ArrayLike, "1"], p: LIPMParams) -> Float[Array, "2"]:
    r"""Linear inverted pendulum with the ZMP as input: :math:`\ddot c = \omega^2 (c - p_{zmp})`, :math:`\omega=\sqrt{g/h}`.

    Args:
        x: ``(c, c_dot)`` (CoM position and velocity), shape ``(2,)``.
        u: ZMP position, shape ``(1,)``.
        p: :class:`LIPMParams`.
    """
    x, u = _checked(x, u, 2, 1, "lipm")
    omega_sq = p.gravity / p.height
    return jnp.stack([x[1], omega_sq * (x[0] - u[0])])


# --- block with viscous and smoothed Coulomb friction ---------------------------------------


class FrictionBlockParams(NamedTuple):
    """``mass`` 1 kg, viscous ``damping`` b = 0.2 N·s/m, Coulomb ``coulomb`` f_c = 0.5 N, smoothing speed ``v_smooth`` 0.01 m/s."""

    mass: float = 1.0
    damping: float = 0.2
    coulomb: float = 0.5
    v_smooth: float = 0.01


def friction_block(x: Float[ArrayLike, "2"], u: Float[ArrayLike, "1"], p: FrictionBlockParams) -> Float[Array, "2"]:
    r"""Block pushed along a surface (S04.1 exercise 2, system identification).

    .. math:: m\dot v = u - b v - f_c \tanh(v / v_s)

    The ``tanh`` replaces :math:`\mathrm{sign}(v)` so the model stays differentiable at v = 0.

    Args:
        x: ``(q, v)``, shape ``(2,)``.
        u: applied force, shape ``(1,)``.
        p: :class:`FrictionBlockParams`.
    """
    x, u = _checked(x, u, 2, 1, "friction_block")
    friction = p.damping * x[1] + p.coulomb * jnp.tanh(x[1] / p.v_smooth)
    return jnp.stack([x[1], (u[0] - friction) / p.mass])


def friction_block_energy(x: Float[Array, "2"], p: FrictionBlockParams) -> Scalar:
    """Kinetic energy :math:`\\tfrac12 m v^2`."""
    return 0.5 * p.mass * x[1] ** 2


# --- the table ------------------------------------------------------------------------------


class System(NamedTuple):
    """Description of one model: its dynamics, sizes and default parameters.

    Attributes:
        name: key in :data:`SYSTEMS`.
        dynamics: ``f(x, u, p) -> xdot``.
        params: default parameter NamedTuple.
        nx, nu: state and input sizes.
        nq: number of position coordinates when ``x = (q, v)``; ``None`` if not mechanical.
        energy: ``energy(x, p) -> scalar`` or ``None`` where energy means nothing.
    """

    name: str
    dynamics: Dynamics
    params: NamedTuple
    nx: int
    nu: int
    nq: Optional[int]
    energy: Optional[Energy]


SYSTEMS = {
    s.name: s
    for s in (
        System("scalar_linear", scalar_linear, ScalarLinearParams(), 1, 1, None, None),
        System("double_integrator", double_integrator, DoubleIntegratorParams(), 2, 1, 1, double_integrator_energy),
        System("pendulum", pendulum, PendulumParams(), 2, 1, 1, pendulum_energy),
        System("cart_pole", cart_pole, CartPoleParams(), 4, 1, 2, cart_pole_energy),
        System("spring_damper", spring_damper, SpringDamperParams(), 2, 1, 1, spring_damper_energy),
        System("two_mass_spring", two_mass_spring, TwoMassParams(), 4, 2, 2, two_mass_spring_energy),
        System("lipm", lipm, LIPMParams(), 2, 1, 1, None),
        System("friction_block", friction_block, FrictionBlockParams(), 2, 1, 1, friction_block_energy),
    )
}


def get_system(name: str) -> System:
    """Return the :class:`System` called ``name`` (clear ``KeyError`` otherwise)."""
    return lookup(SYSTEMS, name, "system")
