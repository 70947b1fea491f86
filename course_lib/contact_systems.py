r"""Systems with contact, wired from the laws and solvers of :mod:`course_lib.contact` (S04.4–S04.5).

Two kinds, following the library's conventions:

* **Soft contact** is a force inside a continuous model ``f(x, u, p) -> xdot``, usable with any
  integrator of :mod:`course_lib.integrators`: :func:`soft_ball` and :func:`hopper` take the name
  of a law in :data:`~course_lib.contact.laws.CONTACT_LAWS`.
* **Hard contact** changes the discrete map itself, so it is a step factory like the integrators:
  ``step = hard_ball_step(h)`` gives ``step(x, u, p) -> x_next`` (time of impact inside the step);
  :func:`sliding_block_step` and :func:`box_wall_step` solve a complementarity problem each step.

Every step factory takes ``with_record=True`` to return ``step(x, u, p) -> (x_next, record)`` with a
:class:`ContactRecord`, the per-step contact log of S04.4.4 (mode, penetration, forces,
complementarity residual); :func:`rollout_with_record` scans it. Mechanical states are ordered
``x = (q, v)``. Every system is described by a :class:`ContactSystem` in :data:`CONTACT_SYSTEMS`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from course_lib._types import (
    Array,
    Control,
    Controls,
    Dynamics,
    Float,
    Int,
    Params,
    Scalar,
    ScalarLike,
    State,
    States,
    Step,
)
from course_lib._validate import check_nonnegative, check_positive, check_positive_step, check_vector, lookup
from course_lib.contact.complementarity import (
    DEFAULT_CONTACT_ITERATIONS,
    DEFAULT_REGULARIZATION,
    ContactSolution,
    complementarity_step,
)
from course_lib.contact.impact import impact_step
from course_lib.contact.laws import ContactParams, get_contact_law
from course_lib.integrators import make_integrator

#: Contact modes of a :class:`ContactRecord`.
CONTACT_MODES = ("separating", "sticking", "sliding")


#: A step that also reports its contacts: ``step(x, u, p) -> (x_next, ContactRecord)``.
RecordingStep = Callable[[State, Control, Params], "tuple[State, ContactRecord]"]


class ContactRecord(NamedTuple):
    r"""Contact log of one step for ``nc`` contacts; every field has shape ``(nc,)`` (S04.4.4).

    Attributes:
        mode: ``int32``, index into :data:`CONTACT_MODES`: 0 separating, 1 sticking, 2 sliding.
            A contact with no tangential direction (the 1-D ball) counts as sticking when in contact.
        penetration: :math:`\max(0, -\phi)` at the start of the step (m).
        normal_force: normal force (N); for hard contact the mean over the step, impulse / h.
        tangential_force: friction force along the contact tangent (N), same convention.
        residual: distance from hard complementarity. Hard contact: the natural-map residual of
            :class:`~course_lib.contact.complementarity.ContactSolution` (N·s; 0 for the exact time-of-impact ball).
            Soft contact: :math:`|\min(\phi, \lambda_n/k)|` (m), the penetration while pushing
            or the force-at-a-distance of a smoothed law, zero only for hard contact.
    """

    mode: Int[Array, "*N nc"]
    penetration: Float[Array, "*N nc"]
    normal_force: Float[Array, "*N nc"]
    tangential_force: Float[Array, "*N nc"]
    residual: Float[Array, "*N nc"]


def _finish(step_with_record, with_record: bool):
    if with_record:
        return step_with_record

    def step(x, u, p):
        return step_with_record(x, u, p)[0]

    return step


def _soft_record(phi, normal, tangential, tangent_speed, slip_speed, stiffness):
    """Record of a soft contact evaluated at the start of the step (shapes ``(nc,)``)."""
    in_contact = phi <= 0
    mode = jnp.where(in_contact, jnp.where(jnp.abs(tangent_speed) <= slip_speed, 1, 2), 0).astype(jnp.int32)
    k_safe = jnp.where(stiffness > 0, stiffness, 1.0)
    residual = jnp.abs(jnp.minimum(phi, normal / k_safe))
    return ContactRecord(mode, jnp.maximum(0.0, -phi), normal, tangential, residual)


def _hard_record(sol: ContactSolution, phi, h):
    return ContactRecord(sol.mode, jnp.maximum(0.0, -phi), sol.normal / h, sol.tangent / h, sol.residual)


def rollout_with_record(
    step_with_record: RecordingStep, x0: State, us: Controls, p: Params
) -> tuple[States, ContactRecord]:
    """Scan a recording step: states ``(N+1, nx)`` and a :class:`ContactRecord` whose fields have shape ``(N, nc)``."""
    if jnp.ndim(x0) != 1 or jnp.ndim(us) != 2:
        raise ValueError(
            f"rollout_with_record: x0 must have shape (nx,) and us shape (N, nu), got {jnp.shape(x0)} and {jnp.shape(us)}"
        )

    def body(x, u):
        x_next, record = step_with_record(x, u, p)
        return x_next, (x_next, record)

    _, (xs, records) = jax.lax.scan(body, x0, us)
    return jnp.concatenate([x0[None], xs], axis=0), records


# --- 1-D bouncing ball, hard --------------------------------------------------------------------


class HardBallParams(NamedTuple):
    """``mass`` 1 kg, ``gravity`` 9.81 m/s², ``restitution`` e = 0.8 (0 plastic, 1 elastic)."""

    mass: float = 1.0
    gravity: float = 9.81
    restitution: float = 0.8


def hard_ball_step(h: ScalarLike, *, with_record: bool = False) -> Step | RecordingStep:
    r"""Step factory of the 1-D ball on a hard ground, impact located inside the step (S04.4.1).

    State ``x = (y, v)`` (height, upward velocity), input ``u = (F,)`` an upward force held over
    the step. Flight is integrated exactly (:func:`~course_lib.contact.impact.impact_step` with downward
    acceleration :math:`g - F/m`), so energy :math:`mgy + \tfrac12mv^2` is conserved in flight and
    multiplied by :math:`e^2` at each impact; a ball whose bounces get shorter than ``h`` is put at rest.

    Args:
        h: step size.
        with_record: return ``(x_next, ContactRecord)`` (one contact; mode 1 for impact or rest;
            normal force = impulse / h; residual 0, complementarity holds exactly at :math:`t^*`).

    Returns:
        ``step(x, u, p: HardBallParams)``.
    """
    h = check_positive_step(h, "hard_ball_step")

    def step(x, u, p: HardBallParams):
        check_vector(x, 2, "state x", "hard_ball_step")
        check_vector(u, 1, "input u", "hard_ball_step")
        p = p._replace(mass=check_positive(p.mass, "mass", "hard_ball_step"))
        accel = p.gravity - u[0] / p.mass
        x_next, mode = impact_step(x, h, accel, p.restitution)
        impulse = p.mass * (x_next[1] - x[1] + accel * h)
        zero = jnp.zeros((1,), x_next.dtype)
        record = ContactRecord(
            jnp.minimum(mode, 1)[None].astype(jnp.int32),
            jnp.maximum(0.0, -x[:1]),
            (impulse / h)[None],
            zero,
            zero,
        )
        return x_next, record

    return _finish(step, with_record)


def _ball_energy(x, p):
    return p.mass * p.gravity * x[0] + 0.5 * p.mass * x[1] ** 2


def hard_ball_energy(x: Float[Array, "2"], p: HardBallParams) -> Scalar:
    r""":math:`m g y + \tfrac12 m v^2`."""
    return _ball_energy(x, p)


# --- 1-D bouncing ball, soft --------------------------------------------------------------------


class SoftBallParams(NamedTuple):
    """``mass`` 1 kg, ``gravity`` 9.81 m/s², ground ``contact`` = :class:`~course_lib.contact.laws.ContactParams` defaults."""

    mass: float = 1.0
    gravity: float = 9.81
    contact: ContactParams = ContactParams()


def soft_ball(law: str = "penalty") -> Dynamics:
    r"""Dynamics ``f(x, u, p)`` of the 1-D ball on a soft ground (S04.5.1).

    .. math:: \dot y = v,\qquad m\dot v = -mg + \lambda_n(\phi = y,\ \dot\phi = v) + F

    with :math:`\lambda_n` the law ``law`` of :data:`~course_lib.contact.laws.CONTACT_LAWS`.

    Args:
        law: ``"penalty"``, ``"softplus_clamp"``, ``"softplus_penetration"`` or ``"softplus_both"``.

    Returns:
        ``f(x, u, p: SoftBallParams) -> xdot``, ``x = (y, v)`` shape ``(2,)``, ``u = (F,)`` shape ``(1,)``.
    """
    force = get_contact_law(law)

    def f(x, u, p: SoftBallParams):
        check_vector(x, 2, "state x", "soft_ball")
        check_vector(u, 1, "input u", "soft_ball")
        lam = force(x[0], x[1], p.contact)
        return jnp.stack([x[1], (lam + u[0]) / p.mass - p.gravity])

    return f


def soft_ball_step(
    h: ScalarLike, law: str = "penalty", integrator: str = "semi_implicit_euler", *, with_record: bool = False
) -> Step | RecordingStep:
    """Step factory: :func:`soft_ball` integrated with ``integrator`` (any name of ``INTEGRATORS``).

    The record is evaluated at the state at the start of the step (the force explicit Euler and
    semi-implicit Euler use).
    """
    f = soft_ball(law)
    force = get_contact_law(law)
    base = make_integrator(integrator, f, h)

    def step(x, u, p: SoftBallParams):
        lam = force(x[0], x[1], p.contact)[None]
        zero = jnp.zeros_like(lam)
        record = _soft_record(x[:1], lam, zero, zero, 1.0, p.contact.stiffness)
        return base(x, u, p), record

    return _finish(step, with_record)


def soft_ball_energy(x: Float[Array, "2"], p: SoftBallParams) -> Scalar:
    r""":math:`m g y + \tfrac12 m v^2` (the energy stored in the ground spring is not included)."""
    return _ball_energy(x, p)


# --- block sliding on the ground with Coulomb friction ------------------------------------------


class SlidingBlockParams(NamedTuple):
    """``mass`` 1 kg, ``friction`` μ = 0.5, ``gravity`` 9.81 m/s², relaxation ``kappa`` 0 (hard contact)."""

    mass: float = 1.0
    friction: float = 0.5
    gravity: float = 9.81
    kappa: float = 0.0


def _translating_body_step(x, p, force, Jn, Jt, phi, mu, h, solver_options):
    """One velocity-level complementarity step of a translating planar body ``x = (s, z, vs, vz)``,
    then :math:`q^+ = q + h v^+`; returns ``(x_next, ContactRecord)``."""
    q, v = x[:2], x[2:]
    M = p.mass * jnp.eye(2, dtype=x.dtype)
    v_next, sol = complementarity_step(v, M, force, Jn, Jt, phi, mu, h, p.kappa, **solver_options)
    return jnp.concatenate([q + h * v_next, v_next]), _hard_record(sol, phi, h)


def _translating_body_energy(x, p):
    return 0.5 * p.mass * (x[2] ** 2 + x[3] ** 2) + p.mass * p.gravity * x[1]


def sliding_block_step(
    h: ScalarLike,
    *,
    iterations: int = DEFAULT_CONTACT_ITERATIONS,
    gap_factor: float = 1.0,
    regularization: float = DEFAULT_REGULARIZATION,
    gradient: str = "implicit",
    with_record: bool = False,
) -> Step | RecordingStep:
    r"""Step factory of a block on the ground with hard normal contact and Coulomb friction (stick/slide).

    State ``x = (s, z, s_dot, z_dot)`` (horizontal position, height of the block's bottom, their
    velocities), input ``u = (F,)`` a horizontal push. One contact (ground, normal :math:`+z`,
    tangent :math:`+s`) solved with :func:`~course_lib.contact.complementarity.complementarity_step`, then
    :math:`q^+ = q + h v^+`. Resting on the ground, the normal impulse is :math:`mgh` and the
    friction impulse is the stick impulse clipped to :math:`\pm\mu m g h`, so a block launched at
    :math:`v_0` stops after :math:`v_0^2/(2\mu g)` up to one step of travel (:math:`h v_0`).

    Args:
        h: step size.
        iterations, gap_factor, regularization, gradient: passed to the contact solver.
        with_record: also return a :class:`ContactRecord`.

    Returns:
        ``step(x, u, p: SlidingBlockParams)``.
    """
    owner = "sliding_block_step"
    h = check_positive_step(h, owner)
    solver_options = dict(
        gap_factor=gap_factor, iterations=iterations, regularization=regularization, gradient=gradient
    )

    def step(x, u, p: SlidingBlockParams):
        check_vector(x, 4, "state x", owner)
        check_vector(u, 1, "input u", owner)
        p = p._replace(mass=check_positive(p.mass, "mass", owner))
        p = p._replace(friction=check_nonnegative(p.friction, "friction coefficient mu", owner))
        dtype = x.dtype
        force = jnp.stack([u[0], -p.mass * p.gravity]).astype(dtype)
        Jn = jnp.array([[0.0, 1.0]], dtype)
        Jt = jnp.array([[1.0, 0.0]], dtype)
        mu = jnp.reshape(jnp.asarray(p.friction, dtype), (1,))
        return _translating_body_step(x, p, force, Jn, Jt, x[1:2], mu, h, solver_options)

    return _finish(step, with_record)


def sliding_block_energy(x: Float[Array, "4"], p: SlidingBlockParams) -> Scalar:
    r""":math:`\tfrac12 m |v|^2 + m g z`."""
    return _translating_body_energy(x, p)


# --- box pushed against a wall ------------------------------------------------------------------


class BoxWallParams(NamedTuple):
    """A translating box (no rotation) between a floor and a wall on its right.

    ``mass`` 1 kg, ``gravity`` 9.81, floor friction ``floor_friction`` 0.5, wall friction
    ``wall_friction`` 0 (a smooth wall), half sizes ``half_width`` 0.1 m and ``half_height`` 0.1 m,
    wall at ``wall_position`` x = 1.0 m, relaxation ``kappa`` 0.
    """

    mass: float = 1.0
    gravity: float = 9.81
    floor_friction: float = 0.5
    wall_friction: float = 0.0
    half_width: float = 0.1
    half_height: float = 0.1
    wall_position: float = 1.0
    kappa: float = 0.0


def box_wall_step(
    h: ScalarLike,
    *,
    iterations: int = DEFAULT_CONTACT_ITERATIONS,
    gap_factor: float = 1.0,
    regularization: float = DEFAULT_REGULARIZATION,
    gradient: str = "implicit",
    with_record: bool = False,
) -> Step | RecordingStep:
    r"""Step factory of a box pushed against a wall (S04.5.8 exercise 3), planar, hard contact.

    State ``x = (px, pz, vx, vz)`` (box centre and velocity), input ``u = (Fx, Fz)`` applied force.
    Two contacts, in this order: floor (:math:`\phi_f = p_z - h_z`, normal :math:`+z`, tangent
    :math:`+x`, Coulomb friction ``floor_friction``) and wall (:math:`\phi_w = x_w - p_x - h_x`,
    normal :math:`-x`, tangent :math:`+z`, friction ``wall_friction``). Pressed into the corner with
    the floor sticking, the wall normal and the floor friction act on the same direction and their
    split is not unique (S04.4.2's redundant contacts); the solver's regularisation picks one, the
    motion is unique either way.

    Args:
        h: step size.
        iterations, gap_factor, regularization, gradient: passed to the contact solver.
        with_record: also return a :class:`ContactRecord` with ``nc = 2`` (floor, wall).

    Returns:
        ``step(x, u, p: BoxWallParams)``.
    """
    owner = "box_wall_step"
    h = check_positive_step(h, owner)
    solver_options = dict(
        gap_factor=gap_factor, iterations=iterations, regularization=regularization, gradient=gradient
    )

    def step(x, u, p: BoxWallParams):
        check_vector(x, 4, "state x", owner)
        check_vector(u, 2, "input u", owner)
        p = p._replace(mass=check_positive(p.mass, "mass", owner))
        p = p._replace(floor_friction=check_nonnegative(p.floor_friction, "floor friction coefficient", owner))
        p = p._replace(wall_friction=check_nonnegative(p.wall_friction, "wall friction coefficient", owner))
        dtype = x.dtype
        force = (u + jnp.stack([0.0, -p.mass * p.gravity])).astype(dtype)
        Jn = jnp.array([[0.0, 1.0], [-1.0, 0.0]], dtype)
        Jt = jnp.array([[1.0, 0.0], [0.0, 1.0]], dtype)
        phi = jnp.stack([x[1] - p.half_height, p.wall_position - x[0] - p.half_width])
        mu = jnp.stack([jnp.asarray(p.floor_friction, dtype), jnp.asarray(p.wall_friction, dtype)])
        return _translating_body_step(x, p, force, Jn, Jt, phi, mu, h, solver_options)

    return _finish(step, with_record)


def box_wall_energy(x: Float[Array, "4"], p: BoxWallParams) -> Scalar:
    r""":math:`\tfrac12 m |v|^2 + m g p_z`."""
    return _translating_body_energy(x, p)


# --- planar point-foot hopper -------------------------------------------------------------------


class HopperParams(NamedTuple):
    """Planar hopper: a body and a point foot joined by a springy, actuated telescopic leg.

    ``body_mass`` 1 kg, ``foot_mass`` 0.1 kg, ``leg_length`` rest length 0.5 m, ``leg_stiffness``
    400 N/m, ``leg_damping`` 2 N·s/m, ``gravity`` 9.81, ground ``friction`` μ = 0.8 smoothed over
    ``slip_speed`` 0.1 m/s, a stiffer ground ``contact`` than the default, :math:`k` = 5000 N/m and
    :math:`c` = 20 N·s/m (standing, the foot sinks about 2 mm; stable with h = 1 ms).
    """

    body_mass: float = 1.0
    foot_mass: float = 0.1
    leg_length: float = 0.5
    leg_stiffness: float = 400.0
    leg_damping: float = 2.0
    gravity: float = 9.81
    friction: float = 0.8
    slip_speed: float = 0.1
    contact: ContactParams = ContactParams(stiffness=5000.0, damping=20.0)


def _hopper_forces(x, u, p: HopperParams, force_law):
    xb, zb, xf, zf, vxb, vzb, vxf, vzf = (x[i] for i in range(8))
    dx, dz = xb - xf, zb - zf
    length = jnp.sqrt(dx * dx + dz * dz + 1e-12)
    ex, ez = dx / length, dz / length
    length_rate = (vxb - vxf) * ex + (vzb - vzf) * ez
    axial = p.leg_stiffness * (p.leg_length - length) - p.leg_damping * length_rate + u[0]
    swing = u[1] / length  # hip torque as a force pair normal to the leg
    fx_leg = axial * ex - swing * ez
    fz_leg = axial * ez + swing * ex
    normal = force_law(zf, vzf, p.contact)
    friction = -p.friction * normal * jnp.tanh(vxf / p.slip_speed)
    return fx_leg, fz_leg, normal, friction


def hopper(law: str = "penalty") -> Dynamics:
    r"""Dynamics ``f(x, u, p)`` of a planar point-foot hopper with soft ground contact (for S04.4 exercise 3).

    State ``x = (x_b, z_b, x_f, z_f, \dot x_b, \dot z_b, \dot x_f, \dot z_f)`` (body and foot
    positions, then velocities), input ``u = (F, \tau)``: leg thrust (N, along the leg) and hip
    torque (N·m, applied as a force pair :math:`\pm\tau/\ell` normal to the leg). With
    :math:`\ell` the leg length and :math:`e` the unit vector from foot to body:

    .. math::
        F_a = k_\ell(\ell_0 - \ell) - c_\ell\dot\ell + F,\qquad
        m_b\ddot p_b = F_a e + \tfrac{\tau}{\ell}e^\perp - m_b g\hat z,\qquad
        m_f\ddot p_f = -F_a e - \tfrac{\tau}{\ell}e^\perp - m_f g\hat z + \lambda_n\hat z + \lambda_t\hat x

    with the ground force :math:`\lambda_n` from the law ``law`` at :math:`\phi = z_f` and the
    smoothed Coulomb friction :math:`\lambda_t = -\mu\lambda_n\tanh(\dot x_f/v_s)`.

    Args:
        law: a name in :data:`~course_lib.contact.laws.CONTACT_LAWS`.

    Returns:
        ``f(x, u, p: HopperParams) -> xdot``, shapes ``(8,)``, ``(2,)``.
    """
    force_law = get_contact_law(law)

    def f(x, u, p: HopperParams):
        check_vector(x, 8, "state x", "hopper")
        check_vector(u, 2, "input u", "hopper")
        fx, fz, normal, friction = _hopper_forces(x, u, p, force_law)
        acc = jnp.stack(
            [
                fx / p.body_mass,
                fz / p.body_mass - p.gravity,
                (friction - fx) / p.foot_mass,
                (normal - fz) / p.foot_mass - p.gravity,
            ]
        )
        return jnp.concatenate([x[4:], acc])

    return f


def hopper_step(
    h: ScalarLike, law: str = "penalty", integrator: str = "semi_implicit_euler", *, with_record: bool = False
) -> Step | RecordingStep:
    """Step factory: :func:`hopper` integrated with ``integrator``; the foot's record is taken at the start of the step."""
    f = hopper(law)
    force_law = get_contact_law(law)
    base = make_integrator(integrator, f, h)

    def step(x, u, p: HopperParams):
        _, _, normal, friction = _hopper_forces(x, u, p, force_law)
        record = _soft_record(x[3:4], normal[None], friction[None], x[6:7], p.slip_speed, p.contact.stiffness)
        return base(x, u, p), record

    return _finish(step, with_record)


def hopper_energy(x: Float[Array, "8"], p: HopperParams) -> Scalar:
    r"""Kinetic + gravitational + leg-spring energy (the ground spring is not included)."""
    length = jnp.sqrt((x[0] - x[2]) ** 2 + (x[1] - x[3]) ** 2)
    kinetic = 0.5 * p.body_mass * (x[4] ** 2 + x[5] ** 2) + 0.5 * p.foot_mass * (x[6] ** 2 + x[7] ** 2)
    potential = p.gravity * (p.body_mass * x[1] + p.foot_mass * x[3])
    return kinetic + potential + 0.5 * p.leg_stiffness * (length - p.leg_length) ** 2


# --- the table ----------------------------------------------------------------------------------


class ContactSystem(NamedTuple):
    """Description of one contact system.

    Attributes:
        name: key in :data:`CONTACT_SYSTEMS`.
        make_step: ``make_step(h, *, with_record=False, **options) -> step(x, u, p)``.
        params: default parameter NamedTuple.
        nx, nu, nq, nc: state, input, position and contact counts.
        energy: ``energy(x, p) -> scalar`` or ``None``.
        x0: a typical initial state (tuple of floats, for demos and tests).
        h: a step size the defaults are stable with.
        dynamics: ``dynamics(law) -> f(x, u, p)`` for soft-contact systems, ``None`` for hard ones.
    """

    name: str
    make_step: Callable
    params: NamedTuple
    nx: int
    nu: int
    nq: int
    nc: int
    energy: Optional[Callable]
    x0: tuple
    h: float
    dynamics: Optional[Callable]


CONTACT_SYSTEMS = {
    s.name: s
    for s in (
        ContactSystem(
            "hard_ball", hard_ball_step, HardBallParams(), 2, 1, 1, 1, hard_ball_energy, (1.0, 0.0), 0.01, None
        ),
        ContactSystem(
            "soft_ball",
            soft_ball_step,
            SoftBallParams(),
            2,
            1,
            1,
            1,
            soft_ball_energy,
            (1.0, 0.0),
            0.001,
            soft_ball,
        ),
        ContactSystem(
            "sliding_block",
            sliding_block_step,
            SlidingBlockParams(),
            4,
            1,
            2,
            1,
            sliding_block_energy,
            (0.0, 0.0, 2.0, 0.0),
            0.001,
            None,
        ),
        ContactSystem(
            "box_wall",
            box_wall_step,
            BoxWallParams(),
            4,
            2,
            2,
            2,
            box_wall_energy,
            (0.5, 0.3, 1.0, 0.0),
            0.005,
            None,
        ),
        ContactSystem(
            "hopper",
            hopper_step,
            HopperParams(),
            8,
            2,
            4,
            1,
            hopper_energy,
            (0.0, 0.9, 0.0, 0.4, 0.3, 0.0, 0.3, 0.0),
            0.001,
            hopper,
        ),
    )
}


def get_contact_system(name: str) -> ContactSystem:
    """Return the :class:`ContactSystem` called ``name`` (clear ``KeyError`` listing the valid names)."""
    return lookup(CONTACT_SYSTEMS, name, "contact system")
