r"""Contact laws: soft (penalty, softplus), hard (complementarity, time of impact) and relaxed (S04.4–S04.5).

Three families live here, each a pure formula that works under ``jit``, ``vmap`` and ``grad``:

1. **Force laws** (S04.5.1). A gap :math:`\phi` (negative = penetration) and its rate
   :math:`\dot\phi` give a normal force :math:`\lambda_n`. The four laws differ only in which of
   the two non-smooth boundaries of the penalty law they smooth:

   * ``"penalty"``: :math:`\lambda_n = \max(0, k d + c\dot d)`, :math:`d = \max(0, -\phi)`;
     kinks at the contact onset :math:`\phi = 0` and at the force clamp :math:`kd + c\dot d = 0`.
   * ``"softplus_clamp"``: :math:`\lambda_n = \mathrm{sp}_\beta(k d + c\dot d)`, :math:`d = \max(0, -\phi)`;
     the clamp is smooth, the onset keeps its kink.
   * ``"softplus_penetration"``: :math:`\lambda_n = \max(0, k d + c\dot d)`, :math:`d = \mathrm{sp}_\beta(-\phi)`;
     the onset is smooth, the clamp keeps its kink.
   * ``"softplus_both"``: :math:`\lambda_n = \mathrm{sp}_{\beta_f}(k d + c\dot d)`, :math:`d = \mathrm{sp}_{\beta_g}(-\phi)`;
     both smooth.

   with :math:`\mathrm{sp}_\beta(z) = \log(1+e^{\beta z})/\beta` and :math:`\dot d = \partial d/\partial t`.
   All four share the signature ``law(phi, phi_dot, params: ContactParams) -> lambda_n`` and sit in
   one table, :data:`CONTACT_LAWS`; :func:`get_contact_law` looks one up by name. The formulas
   themselves (:func:`penalty_force`, ...) take explicit scalars and stay apart from that wiring.

2. **Complementarity** (S04.4.2, S04.5.3–S04.5.5): :func:`solve_contact` solves the
   velocity-level contact problem of one time step (normal non-penetration plus Coulomb friction
   in a box :math:`|\lambda_t|\le\mu\lambda_n`, one tangent per contact, i.e. the planar friction
   "pyramid") by projected Gauss–Seidel with a fixed number of sweeps, and differentiates the
   solution with the implicit function theorem at the solution (one linear solve). With
   ``kappa > 0`` it solves the interior-point relaxation instead; :func:`relaxed_complementarity`
   is the scalar closed form. :func:`complementarity_step` wires the solver into a
   Stewart–Trinkle/Anitescu time step :math:`v^+ = v + M^{-1}(hf + J^T\lambda)`.

3. **Hard impact** (S04.4.1): :func:`impact_step` integrates the 1-D ball exactly, locating the
   impact *inside* the step; :func:`naive_impact_step` is the "step, then flip the velocity"
   variant, kept only to show what it gets wrong.

The solver and the impact step cannot share the force-law signature (they return impulses or a
next state, not a force), so they live beside :data:`CONTACT_LAWS`, not in it.

Values are checked when concrete (outside ``jit``/``vmap``/``grad``): negative stiffness,
damping or friction coefficient, :math:`\beta\le0`, :math:`\alpha\le0`, :math:`\kappa\le0` in
:func:`relaxed_complementarity` (:math:`\kappa<0` in the solver, where 0 means hard contact) and a
restitution outside :math:`[0,1]` raise ``ValueError``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from course_lib._types import Array, ArrayLike, ContactLaw, Float, Int, ScalarLike
from course_lib._validate import check_positive_step, check_values, lookup

#: Projected Gauss–Seidel sweeps used by :func:`solve_contact` unless told otherwise.
DEFAULT_CONTACT_ITERATIONS = 50
#: Diagonal regularisation of the Delassus matrix, relative to its mean diagonal (see :func:`solve_contact`).
DEFAULT_REGULARIZATION = 1e-6

#: A gap or gap rate of the force laws: any shape (elementwise), a NumPy or JAX array or a float.
Gap = Float[Array, "*shape"] | Float[np.ndarray, "*shape"] | float


# --- input checks ---------------------------------------------------------------------------


def _check_nonnegative(value, name: str, owner: str):
    return check_values(value, lambda a: (a >= 0) & (a < np.inf), f"{owner}: {name} must be non-negative and finite")


def _check_positive(value, name: str, owner: str):
    return check_values(value, lambda a: (a > 0) & (a < np.inf), f"{owner}: {name} must be positive and finite")


def _check_restitution(value, owner: str):
    return check_values(value, lambda a: (a >= 0) & (a <= 1), f"{owner}: restitution e must be in [0, 1]")


# --- smooth building blocks -----------------------------------------------------------------


def softplus(z: Float[ArrayLike, "*shape"], beta: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    r"""Softplus with sharpness :math:`\beta`: :math:`\mathrm{sp}_\beta(z) = \log(1 + e^{\beta z})/\beta` (S04.5.1).

    Computed stably as ``jax.nn.softplus(beta * z) / beta``; it tends to :math:`\max(0, z)` as
    :math:`\beta\to\infty`, is :math:`\log 2/\beta` at :math:`z=0`, and its derivative is the
    sigmoid :math:`\sigma(\beta z)`.

    Args:
        z: any shape.
        beta: sharpness, :math:`\beta > 0` (units of 1/z), broadcastable with ``z``.

    Returns:
        Array of the broadcast shape of ``z`` and ``beta``.
    """
    beta = _check_positive(beta, "beta", "softplus")
    return jax.nn.softplus(beta * z) / beta


def heaviside_step(z: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    r"""Hard switch :math:`H(z) = 1` for :math:`z \ge 0`, else 0 (S04.4.3).

    Its derivative is 0 wherever it exists: AD through it returns 0, which is the point the
    chapter makes (the boundary's contribution is invisible to a pathwise gradient).

    Args:
        z: any shape.

    Returns:
        Floating array of the shape of ``z``.
    """
    z = jnp.asarray(z)
    return jnp.where(z >= 0, 1.0, 0.0).astype(jnp.result_type(z, float))


def sigmoid_step(z: Float[ArrayLike, "*shape"], alpha: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    r"""Sigmoid-smoothed Heaviside :math:`\sigma(\alpha z) = 1/(1+e^{-\alpha z})` (S04.4.6).

    Its derivative :math:`\alpha\,\sigma(1-\sigma)` is a bump of height :math:`\alpha/4` and width
    about :math:`4/\alpha`: larger :math:`\alpha` is closer to :func:`heaviside_step` and gives a
    sharper gradient spike, as a stiffer contact does.

    Args:
        z: any shape.
        alpha: sharpness, :math:`\alpha > 0`.

    Returns:
        Array of the broadcast shape of ``z`` and ``alpha``.
    """
    alpha = _check_positive(alpha, "alpha", "sigmoid_step")
    return jax.nn.sigmoid(alpha * z)


@jax.custom_jvp
def _smooth_relu(x, c):
    r""":math:`(x + \sqrt{x^2 + c})/2`, the unique :math:`y \ge \max(0,x)` with :math:`y(y - x) = c/4`.

    ``c = 0`` gives :math:`\max(0, x)` exactly. Evaluated without cancellation; its derivative is
    finite everywhere, 1/2 at the kink ``x = c = 0`` (the mean of the one-sided slopes).
    """
    s = jnp.sqrt(x * x + c)
    den = s - x  # > 0 for x < 0
    den_safe = jnp.where(den > 0, den, 1.0)
    return jnp.where(x >= 0, 0.5 * (x + s), 0.5 * c / den_safe)


@_smooth_relu.defjvp
def _smooth_relu_jvp(primals, tangents):
    x, c = primals
    dx, dc = tangents
    y = _smooth_relu(x, c)
    s = jnp.sqrt(x * x + c)
    pos = s > 0
    s_safe = jnp.where(pos, s, 1.0)
    den = s - x
    den_safe = jnp.where(den > 0, den, 1.0)
    # dy/dx = (1 + x/s)/2, written as c/(2 s (s - x)) for x < 0 to avoid cancellation.
    slope = jnp.where(x >= 0, 0.5 * (1.0 + x / s_safe), 0.5 * c / (den_safe * s_safe))
    dy_dx = jnp.where(pos, slope, 0.5)
    dy_dc = jnp.where(pos, 0.25 / s_safe, 0.0)
    return y, dy_dx * dx + dy_dc * dc


def _smooth_clip(x, lower, upper, c):
    """``clip(x, lower, upper)`` when ``c = 0``; with ``c > 0`` each corner is smoothed like :func:`_smooth_relu`."""
    return lower + _smooth_relu(x - lower, c) - _smooth_relu(x - upper, c)


def relaxed_complementarity(q: Float[ArrayLike, "*shape"], kappa: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    r"""Solution of the relaxed scalar LCP :math:`y\ge0,\ y+q\ge0,\ y(y+q)=\kappa` (S04.5.5).

    .. math::
        y = \frac{-q + \sqrt{q^2 + 4\kappa}}{2},\qquad
        \frac{dy}{dq} = -\frac{y}{2y + q} = -\frac{y}{\sqrt{q^2+4\kappa}},\qquad
        \lim_{\kappa\to0^+} y = \max(0, -q)

    This is the interior-point (central-path) smoothing of hard contact: with :math:`q` the free
    normal velocity and :math:`y` the impulse, :math:`\kappa\to0` recovers the complementarity
    :math:`0\le y\perp y+q\ge0`, whose derivative jumps from 0 to -1 at :math:`q = 0`; for
    :math:`\kappa>0` the derivative is smooth, of width :math:`\sim\sqrt\kappa`. Computed without
    cancellation for both signs of :math:`q`.

    Args:
        q: any shape.
        kappa: relaxation, :math:`\kappa > 0`, broadcastable with ``q``.

    Returns:
        ``y`` of the broadcast shape, strictly positive.
    """
    kappa = _check_positive(kappa, "kappa", "relaxed_complementarity")
    q, kappa = jnp.asarray(q), jnp.asarray(kappa)
    dtype = jnp.result_type(q, kappa, float)
    q, kappa = jnp.broadcast_arrays(q.astype(dtype), kappa.astype(dtype))
    return _smooth_relu(-q, 4.0 * kappa)


# --- force laws (formulas) ------------------------------------------------------------------


def _gated_rate(phi, phi_dot):
    r""":math:`\dot d` for :math:`d = \max(0, -\phi)`: :math:`-\dot\phi` while penetrating, else 0."""
    return jnp.where(phi < 0, -phi_dot, jnp.zeros_like(phi_dot))


def penalty_force(phi: Gap, phi_dot: Gap, stiffness: ScalarLike, damping: ScalarLike) -> Float[Array, "*shape"]:
    r"""Penalty spring–damper normal force (S04.5.1).

    .. math::
        d = \max(0, -\phi),\qquad \dot d = -\dot\phi\,[\phi<0],\qquad \lambda_n = \max(0,\ k d + c\dot d)

    Two kinks: the contact onset :math:`\phi = 0` and the clamp :math:`kd + c\dot d = 0` (reached
    when the damper pulls harder than the spring pushes, during fast separation). The damper acts
    only while penetrating, so the law never pulls and never acts at a distance.

    Args:
        phi: gap, negative when penetrating, any shape.
        phi_dot: gap rate, same shape.
        stiffness: :math:`k \ge 0` (N/m).
        damping: :math:`c \ge 0` (N·s/m).

    Returns:
        :math:`\lambda_n \ge 0`, shape of ``phi``.
    """
    stiffness = _check_nonnegative(stiffness, "stiffness", "penalty_force")
    damping = _check_nonnegative(damping, "damping", "penalty_force")
    d = jnp.maximum(0.0, -phi)
    return jnp.maximum(0.0, stiffness * d + damping * _gated_rate(phi, phi_dot))


def softplus_clamp_force(
    phi: Gap,
    phi_dot: Gap,
    stiffness: ScalarLike,
    damping: ScalarLike,
    beta: ScalarLike,
) -> Float[Array, "*shape"]:
    r"""Penalty force with the *outer clamp* smoothed, the penetration left hard (S04.5.1).

    .. math:: d = \max(0, -\phi),\qquad \lambda_n = \mathrm{sp}_\beta(k d + c\dot d)

    Smooth across :math:`kd + c\dot d = 0`, still a kink at the contact onset :math:`\phi = 0`.
    Out of contact the force is the constant :math:`\log 2/\beta` (a small push at any distance):
    that is the model error this smoothing buys.

    Args:
        phi, phi_dot: gap and its rate, any shape.
        stiffness: :math:`k \ge 0` (N/m).
        damping: :math:`c \ge 0` (N·s/m).
        beta: :math:`\beta > 0` in 1/N (the smoothing acts on a force).

    Returns:
        :math:`\lambda_n > 0`, shape of ``phi``.
    """
    stiffness = _check_nonnegative(stiffness, "stiffness", "softplus_clamp_force")
    damping = _check_nonnegative(damping, "damping", "softplus_clamp_force")
    beta = _check_positive(beta, "beta", "softplus_clamp_force")
    d = jnp.maximum(0.0, -phi)
    return jax.nn.softplus(beta * (stiffness * d + damping * _gated_rate(phi, phi_dot))) / beta


def softplus_penetration_force(
    phi: Gap,
    phi_dot: Gap,
    stiffness: ScalarLike,
    damping: ScalarLike,
    beta: ScalarLike,
) -> Float[Array, "*shape"]:
    r"""Penalty force with the *penetration* smoothed, the outer clamp left hard (S04.5.1).

    .. math::
        d = \mathrm{sp}_\beta(-\phi),\qquad \dot d = -\dot\phi\,\sigma(-\beta\phi),\qquad
        \lambda_n = \max(0,\ k d + c\dot d)

    :math:`\dot d` is the exact time derivative of the smoothed :math:`d`, so the damper fades in
    with the spring. Smooth across the contact onset :math:`\phi = 0` (force :math:`k\log2/\beta`
    there, decaying like :math:`e^{-\beta\phi}` outside); the clamp at zero force keeps a kink,
    reached only when the damper out-pulls the spring during fast separation.

    Args:
        phi, phi_dot: gap and its rate, any shape.
        stiffness: :math:`k \ge 0` (N/m).
        damping: :math:`c \ge 0` (N·s/m).
        beta: :math:`\beta > 0` in 1/m (the smoothing acts on a length).

    Returns:
        :math:`\lambda_n \ge 0`, shape of ``phi``.
    """
    stiffness = _check_nonnegative(stiffness, "stiffness", "softplus_penetration_force")
    damping = _check_nonnegative(damping, "damping", "softplus_penetration_force")
    beta = _check_positive(beta, "beta", "softplus_penetration_force")
    d = jax.nn.softplus(-beta * phi) / beta
    d_dot = -phi_dot * jax.nn.sigmoid(-beta * phi)
    return jnp.maximum(0.0, stiffness * d + damping * d_dot)


def smooth_contact_force(
    phi: Gap,
    phi_dot: Gap,
    stiffness: ScalarLike,
    damping: ScalarLike,
    force_beta: ScalarLike,
    gap_beta: ScalarLike,
) -> Float[Array, "*shape"]:
    r"""Penalty force with *both* boundaries smoothed: :math:`C^\infty` in :math:`(\phi, \dot\phi)` (S04.5.1).

    .. math::
        d = \mathrm{sp}_{\beta_g}(-\phi),\qquad \dot d = -\dot\phi\,\sigma(-\beta_g\phi),\qquad
        \lambda_n = \mathrm{sp}_{\beta_f}(k d + c\dot d)

    Args:
        phi, phi_dot: gap and its rate, any shape.
        stiffness: :math:`k \ge 0` (N/m).
        damping: :math:`c \ge 0` (N·s/m).
        force_beta: :math:`\beta_f > 0` in 1/N.
        gap_beta: :math:`\beta_g > 0` in 1/m.

    Returns:
        :math:`\lambda_n > 0`, shape of ``phi``.
    """
    stiffness = _check_nonnegative(stiffness, "stiffness", "smooth_contact_force")
    damping = _check_nonnegative(damping, "damping", "smooth_contact_force")
    force_beta = _check_positive(force_beta, "force_beta", "smooth_contact_force")
    gap_beta = _check_positive(gap_beta, "gap_beta", "smooth_contact_force")
    d = jax.nn.softplus(-gap_beta * phi) / gap_beta
    d_dot = -phi_dot * jax.nn.sigmoid(-gap_beta * phi)
    return jax.nn.softplus(force_beta * (stiffness * d + damping * d_dot)) / force_beta


# --- force laws (the table) -----------------------------------------------------------------


class ContactParams(NamedTuple):
    r"""Parameters shared by every law in :data:`CONTACT_LAWS` (each law reads the fields it needs).

    Attributes:
        stiffness: :math:`k` = 1000 N/m (a 1 kg body rests about 1 cm deep).
        damping: :math:`c` = 10 N·s/m (damping ratio about 0.16 for 1 kg).
        force_beta: :math:`\beta_f` = 20 1/N, sharpness of the force clamp (``"softplus_clamp"``,
            ``"softplus_both"``); the force at a distance is :math:`\log 2/\beta_f` ≈ 0.035 N.
        gap_beta: :math:`\beta_g` = 1000 1/m, sharpness of the penetration (``"softplus_penetration"``,
            ``"softplus_both"``); contact fades in over about 1 mm.
    """

    stiffness: float = 1000.0
    damping: float = 10.0
    force_beta: float = 20.0
    gap_beta: float = 1000.0


def _penalty_law(phi, phi_dot, p: ContactParams):
    return penalty_force(phi, phi_dot, p.stiffness, p.damping)


def _softplus_clamp_law(phi, phi_dot, p: ContactParams):
    return softplus_clamp_force(phi, phi_dot, p.stiffness, p.damping, p.force_beta)


def _softplus_penetration_law(phi, phi_dot, p: ContactParams):
    return softplus_penetration_force(phi, phi_dot, p.stiffness, p.damping, p.gap_beta)


def _softplus_both_law(phi, phi_dot, p: ContactParams):
    return smooth_contact_force(phi, phi_dot, p.stiffness, p.damping, p.force_beta, p.gap_beta)


#: Normal-force laws ``law(phi, phi_dot, params: ContactParams) -> lambda_n`` (see the module table).
CONTACT_LAWS = {
    "penalty": _penalty_law,
    "softplus_clamp": _softplus_clamp_law,
    "softplus_penetration": _softplus_penetration_law,
    "softplus_both": _softplus_both_law,
}


def get_contact_law(name: str) -> ContactLaw:
    """Return the law ``law(phi, phi_dot, params)`` called ``name`` (clear ``KeyError`` listing the valid names)."""
    return lookup(CONTACT_LAWS, name, "contact law")


# --- complementarity: velocity-level contact with Coulomb friction --------------------------


class ContactSolution(NamedTuple):
    r"""Result of :func:`solve_contact` for ``nc`` contacts; every field has shape ``(nc,)``.

    Attributes:
        normal: normal impulses :math:`p_n \ge 0` (N·s).
        tangent: tangential (friction) impulses :math:`|p_t| \le \mu p_n` (N·s).
        normal_velocity: :math:`w_n` = normal relative velocity after the step plus the gap term.
        tangent_velocity: :math:`w_t` = tangential relative velocity after the step.
        residual: natural-map residual of the *hard* problem, in N·s:
            :math:`\max(|p_n - \max(0, p_n - r w_n)|,\ |p_t - \mathrm{clip}(p_t - r w_t, -\mu p_n, \mu p_n)|)`
            with :math:`r = 1/W_{ii}`; zero exactly at a solution of the hard problem; for the relaxed
            one :math:`O(\kappa)` at strictly (in)active contacts and :math:`O(\sqrt\kappa)` at degenerate ones.
        mode: ``int32``; 0 separating, 1 sticking, 2 sliding (S04.4.5's contact log).
    """

    normal: Float[Array, " nc"]
    tangent: Float[Array, " nc"]
    normal_velocity: Float[Array, " nc"]
    tangent_velocity: Float[Array, " nc"]
    residual: Float[Array, " nc"]
    mode: Int[Array, " nc"]


def _regularized(W, regularization: float):
    n = W.shape[0]
    scale = jnp.mean(jnp.diagonal(W))
    return W + (regularization * scale) * jnp.eye(n, dtype=W.dtype)


def _pgs(W, w0, mu, kappa, iterations: int, regularization: float):
    """Projected Gauss–Seidel: ``iterations`` sweeps, each row solved exactly given the others."""
    nc = mu.shape[0]
    Wr = _regularized(W, regularization)
    r = 1.0 / jnp.diagonal(Wr)
    c = 4.0 * kappa * r

    def contact(i, z):  # normal row i, then tangent row nc + i, each solved exactly given the rest
        x_n = z[i] - r[i] * (Wr[i] @ z + w0[i])
        z = z.at[i].set(_smooth_relu(x_n, c[i]))
        j = nc + i
        x_t = z[j] - r[j] * (Wr[j] @ z + w0[j])
        bound = mu[i] * z[i]
        return z.at[j].set(_smooth_clip(x_t, -bound, bound, c[j]))

    def sweep(_, z):
        return jax.lax.fori_loop(0, nc, contact, z)

    return jax.lax.fori_loop(0, iterations, sweep, jnp.zeros_like(w0))


def _natural_map(z, W, w0, mu, kappa, regularization: float):
    """``z - P(z - r w(z))``: zero exactly at a solution; ``P`` is the (smoothed, if kappa > 0) projection."""
    nc = mu.shape[0]
    Wr = _regularized(W, regularization)
    r = 1.0 / jnp.diagonal(Wr)
    c = 4.0 * kappa * r
    x = z - r * (Wr @ z + w0)
    p_n, p_t = z[:nc], z[nc:]
    bound = mu * p_n
    return jnp.concatenate(
        [
            p_n - _smooth_relu(x[:nc], c[:nc]),
            p_t - _smooth_clip(x[nc:], -bound, bound, c[nc:]),
        ]
    )


@partial(jax.custom_jvp, nondiff_argnums=(4, 5))
def _solve_ift(W, w0, mu, kappa, iterations: int, regularization: float):
    return _pgs(W, w0, mu, kappa, iterations, regularization)


@_solve_ift.defjvp
def _solve_ift_jvp(iterations, regularization, primals, tangents):
    z = _solve_ift(*primals, iterations, regularization)
    residual = partial(_natural_map, regularization=regularization)
    # IFT at the solution: R_z z_dot = -R_theta theta_dot, one LU solve, never through the sweeps.
    r_z = jax.jacfwd(residual)(z, *primals)
    _, r_dot = jax.jvp(lambda *theta: residual(z, *theta), primals, tangents)
    return z, -jnp.linalg.solve(r_z, r_dot)


def _solve_unrolled(W, w0, mu, kappa, iterations: int, regularization: float):
    return _pgs(W, w0, mu, kappa, iterations, regularization)


#: How :func:`solve_contact` is differentiated: IFT at the solution, or AD through every sweep.
CONTACT_GRADIENTS = {"implicit": _solve_ift, "unrolled": _solve_unrolled}


def solve_contact(
    W: Float[ArrayLike, "2*nc 2*nc"],
    w0: Float[ArrayLike, " 2*nc"],
    mu: Float[ArrayLike, " nc"] | float,
    kappa: ScalarLike = 0.0,
    *,
    iterations: int = DEFAULT_CONTACT_ITERATIONS,
    regularization: float = DEFAULT_REGULARIZATION,
    gradient: str = "implicit",
) -> ContactSolution:
    r"""Contact impulses of one time step: normal complementarity plus Coulomb friction (S04.5.3–S04.5.5).

    For ``nc`` contacts with impulses :math:`z = (p_n, p_t)` (normals first, then tangents) and
    contact-space velocities :math:`w = W z + w_0`, find for every contact :math:`i`

    .. math::
        0 \le p_{n,i} \perp w_{n,i} \ge 0,\qquad
        p_{t,i} \in [-\mu_i p_{n,i},\ \mu_i p_{n,i}],\quad
        \begin{cases} w_{t,i} = 0 & |p_{t,i}| < \mu_i p_{n,i} \ \text{(stick)}\\
        w_{t,i} \le 0 & p_{t,i} = \mu_i p_{n,i}\\ w_{t,i} \ge 0 & p_{t,i} = -\mu_i p_{n,i}\ \text{(slide)}\end{cases}

    (the planar friction pyramid: friction opposes sliding, at most :math:`\mu p_n`). Equivalently
    :math:`R(z) = z - P(z - r\,w(z)) = 0` with :math:`r_i = 1/W_{ii}` and :math:`P` the projection on
    :math:`p_n \ge 0` and on the friction box.

    **Forward**: projected Gauss–Seidel, ``iterations`` sweeps in ``lax.fori_loop`` (each row solved
    exactly given the others), so the cost and the program are fixed under ``jit``.

    **Backward** (``gradient="implicit"``): a ``custom_jvp`` applies the implicit function theorem
    to :math:`R` at the solution, :math:`\partial z/\partial\theta = -R_z^{-1}R_\theta` (S04.5.4),
    one LU solve of size ``2 nc``, whatever the iteration count. The projection's derivative is
    0 or 1 per row (inactive / active constraint), and 1/2 at a degenerate row where the
    unprojected value is exactly on the boundary (e.g. a contact touching with zero force): the
    mean of the two one-sided derivatives, so the gradient is finite at and near contact
    (:math:`R_z` then mixes identity rows and rows of the regularised :math:`W`, and stays
    non-singular). ``gradient="unrolled"`` differentiates through every sweep instead (for
    comparison: memory grows with ``iterations``).

    **Relaxation** (``kappa > 0``, S04.5.5): each projection is replaced by its interior-point
    smoothing, so the normal rows solve :math:`p_n w_n = \kappa` with :math:`p_n, w_n > 0` (the
    system version of :func:`relaxed_complementarity`) and the friction box corners are rounded the
    same way. The solution and its derivative are smooth; :math:`\kappa\to0` gives the hard problem.

    **Regularisation**: :math:`W` is replaced by :math:`W + \epsilon\,\overline{W_{ii}}\,I` with
    :math:`\epsilon` = ``regularization`` (a tiny constraint compliance, like ODE's CFM or MuJoCo's
    soft constraints) so that redundant contacts (two constraints acting on the same direction,
    whose force split is not unique, S04.4.2) still give a unique solution and a solvable IFT system.

    Args:
        W: Delassus matrix :math:`J M^{-1} J^T`, shape ``(2 nc, 2 nc)``, symmetric positive semi-definite.
        w0: contact velocities at zero impulse (free velocity plus gap term), shape ``(2 nc,)``.
        mu: friction coefficients :math:`\mu_i \ge 0`, shape ``(nc,)``.
        kappa: relaxation :math:`\kappa \ge 0`; 0 is hard contact.
        iterations: Gauss–Seidel sweeps (static Python int).
        regularization: relative diagonal regularisation :math:`\epsilon \ge 0` (static Python float).
        gradient: ``"implicit"`` (IFT, default) or ``"unrolled"`` (see :data:`CONTACT_GRADIENTS`).

    Returns:
        :class:`ContactSolution`.

    Limitations: the IFT derivative is exact inside one contact mode; across a mode switch the
    true map has a kink and no derivative exists (S04.5.4). Very large :math:`\mu` with coupled
    normal and tangent rows can make the Coulomb problem non-unique and :math:`R_z` singular; the
    point contacts on orthogonal planes of :mod:`course_lib.contact_systems` never couple them.
    """
    owner = "solve_contact"
    lookup(CONTACT_GRADIENTS, gradient, "contact gradient mode")
    mu = jnp.atleast_1d(jnp.asarray(mu))
    nc = mu.shape[0]
    if jnp.ndim(mu) != 1:
        raise ValueError(f"{owner}: mu must have shape (nc,), got shape {jnp.shape(mu)}")
    if jnp.shape(w0) != (2 * nc,):
        raise ValueError(f"{owner}: w0 must have shape (2*nc,) = ({2 * nc},), got shape {jnp.shape(w0)}")
    if jnp.shape(W) != (2 * nc, 2 * nc):
        raise ValueError(f"{owner}: W must have shape ({2 * nc}, {2 * nc}), got shape {jnp.shape(W)}")
    if int(iterations) < 1:
        raise ValueError(f"{owner}: iterations must be >= 1, got {iterations}")
    mu = _check_nonnegative(mu, "friction coefficient mu", owner)
    kappa = _check_nonnegative(kappa, "kappa", owner)
    regularization = _check_nonnegative(regularization, "regularization", owner)
    dtype = jnp.result_type(W, w0, mu, kappa, float)
    W, w0, mu, kappa = (jnp.asarray(a, dtype) for a in (W, w0, mu, kappa))
    return _solve_and_report(W, w0, mu, kappa, int(iterations), float(regularization), gradient)


# jitted once per (shapes, iterations, regularization, gradient): eager calls from the book reuse it
@partial(jax.jit, static_argnums=(4, 5, 6))
def _solve_and_report(W, w0, mu, kappa, iterations: int, regularization: float, gradient: str) -> ContactSolution:
    nc = mu.shape[0]
    z = CONTACT_GRADIENTS[gradient](W, w0, mu, kappa, iterations, regularization)
    Wr = _regularized(W, regularization)
    r = 1.0 / jnp.diagonal(Wr)
    w = Wr @ z + w0
    x = z - r * w
    p_n, p_t = z[:nc], z[nc:]
    bound = mu * p_n
    res_n = jnp.abs(p_n - jnp.maximum(0.0, x[:nc]))
    res_t = jnp.abs(p_t - jnp.clip(x[nc:], -bound, bound))
    separating = x[:nc] <= 0
    sticking = (x[nc:] > -bound) & (x[nc:] < bound)
    mode = jnp.where(separating, 0, jnp.where(sticking, 1, 2)).astype(jnp.int32)
    return ContactSolution(p_n, p_t, w[:nc], w[nc:], jnp.maximum(res_n, res_t), mode)


def complementarity_step(
    v: Float[ArrayLike, " n"],
    M: Float[ArrayLike, "n n"],
    f: Float[ArrayLike, " n"],
    Jn: Float[ArrayLike, "nc n"],
    Jt: Float[ArrayLike, "nc n"],
    phi: Float[ArrayLike, " nc"],
    mu: Float[ArrayLike, " nc"],
    h: ScalarLike,
    kappa: ScalarLike = 0.0,
    *,
    gap_factor: float = 1.0,
    iterations: int = DEFAULT_CONTACT_ITERATIONS,
    regularization: float = DEFAULT_REGULARIZATION,
    gradient: str = "implicit",
) -> tuple[Float[Array, " n"], ContactSolution]:
    r"""Velocity-level time step with hard contact (Stewart–Trinkle / Anitescu style, S04.5.3).

    .. math::
        v^+ = v + M^{-1}\left(h f + J_n^T p_n + J_t^T p_t\right),\qquad
        0 \le p_n \perp J_n v^+ + \gamma\,\phi/h \ge 0,\qquad \text{Coulomb box on } p_t

    The gap term :math:`\gamma\phi/h` (:math:`\gamma` = ``gap_factor``, 1 = Stewart–Trinkle, < 1 =
    Baumgarte-style) lets a body close a positive gap within the step and lands it on
    :math:`\phi = 0` (a plastic impact); a penetration is pushed out at rate :math:`\gamma|\phi|/h`.
    The impulses come from :func:`solve_contact` with :math:`W = J M^{-1} J^T`,
    :math:`w_0 = J(v + hM^{-1}f) + (\gamma\phi/h, 0)`. Positions are then updated by the caller,
    usually :math:`q^+ = q + h v^+` (semi-implicit).

    Args:
        v: generalised velocity, shape ``(n,)``.
        M: mass matrix, shape ``(n, n)``, symmetric positive definite.
        f: non-contact generalised force (gravity, inputs), shape ``(n,)``.
        Jn: normal Jacobians (rows are contact normals), shape ``(nc, n)``.
        Jt: tangent Jacobians, shape ``(nc, n)``.
        phi: gaps at the start of the step, shape ``(nc,)``.
        mu: friction coefficients, shape ``(nc,)``.
        h: step size.
        kappa: relaxation (0 = hard), see :func:`solve_contact`.
        gap_factor, iterations, regularization, gradient: see above and :func:`solve_contact`.

    Returns:
        ``(v_next, solution)``: ``(n,)`` and a :class:`ContactSolution` of impulses (divide by ``h``
        for mean forces).
    """
    owner = "complementarity_step"
    h = check_positive_step(h, owner)
    lookup(CONTACT_GRADIENTS, gradient, "contact gradient mode")
    n = jnp.shape(v)[0] if jnp.ndim(v) == 1 else -1
    nc = jnp.shape(phi)[0] if jnp.ndim(phi) == 1 else -1
    if n < 1 or nc < 1 or jnp.shape(M) != (n, n) or jnp.shape(f) != (n,):
        raise ValueError(f"{owner}: need v (n,), M (n, n), f (n,); got {jnp.shape(v)}, {jnp.shape(M)}, {jnp.shape(f)}")
    if jnp.shape(Jn) != (nc, n) or jnp.shape(Jt) != (nc, n) or jnp.shape(mu) != (nc,):
        raise ValueError(
            f"{owner}: need Jn (nc, n), Jt (nc, n), phi (nc,), mu (nc,) with n = {n}; got "
            f"{jnp.shape(Jn)}, {jnp.shape(Jt)}, {jnp.shape(phi)}, {jnp.shape(mu)}"
        )
    if int(iterations) < 1:
        raise ValueError(f"{owner}: iterations must be >= 1, got {iterations}")
    mu = _check_nonnegative(mu, "friction coefficient mu", owner)
    kappa = _check_nonnegative(kappa, "kappa", owner)
    regularization = _check_nonnegative(regularization, "regularization", owner)
    dtype = jnp.result_type(v, M, f, Jn, Jt, phi, mu, h, kappa, gap_factor, float)
    arrays = (jnp.asarray(a, dtype) for a in (v, M, f, Jn, Jt, phi, mu, h, kappa, gap_factor))
    return _complementarity_step(*arrays, int(iterations), float(regularization), gradient)


@partial(jax.jit, static_argnums=(10, 11, 12))
def _complementarity_step(v, M, f, Jn, Jt, phi, mu, h, kappa, gap_factor, iterations, regularization, gradient):
    J = jnp.concatenate([Jn, Jt], axis=0)
    minv_jt = jnp.linalg.solve(M, J.T)
    v_free = v + h * jnp.linalg.solve(M, f)
    W = J @ minv_jt
    w0 = J @ v_free + jnp.concatenate([gap_factor * phi / h, jnp.zeros_like(phi)])
    sol = _solve_and_report(W, w0, mu, kappa, iterations, regularization, gradient)
    v_next = v_free + minv_jt @ jnp.concatenate([sol.normal, sol.tangent])
    return v_next, sol


# --- hard impact with the impact time inside the step ---------------------------------------

#: Modes of :func:`impact_step`.
IMPACT_MODES = ("flight", "impact", "rest")


def impact_step(
    x: Float[Array, "2"], h: ScalarLike, gravity: ScalarLike, restitution: ScalarLike
) -> tuple[Float[Array, "2"], Int[Array, ""]]:
    r"""Exact step of a 1-D ball over a hard ground, the impact located inside the step (S04.4.1).

    Free flight :math:`y(t) = y + vt - \tfrac12 a t^2` (:math:`a` = ``gravity``, the downward
    acceleration). If it would end below the ground, the step

    1. finds the impact time :math:`t^* \in [0, h]`, the root of :math:`y(t^*) = 0`,
       :math:`t^* = 2y / (\sqrt{v^2 + 2ay} - v)` (same root as :math:`(v + \sqrt{v^2+2ay})/a`,
       without cancellation and valid for :math:`a \le 0`),
    2. reflects :math:`v^- = v - a t^* \mapsto v^\sharp = -e\,v^-`,
    3. flies on for :math:`\tau = h - t^*`: :math:`y^+ = v^\sharp\tau - \tfrac12a\tau^2`, :math:`v^+ = v^\sharp - a\tau`.

    If the rebound would land again within :math:`\tau` (the remaining bounces are shorter than the
    step; Zeno for :math:`e < 1`), the ball is put at rest, :math:`(y^+, v^+) = (0, 0)`.

    Because :math:`t^*` moves with the initial state, the sensitivity is not just :math:`-e`
    on the velocity. In the impact mode with :math:`a = 0`:

    .. math::
        \frac{\partial (y^+, v^+)}{\partial (y, v)} = \begin{pmatrix} -e & -e h\\ 0 & -e\end{pmatrix},

    i.e. :math:`\partial y^+/\partial y = -e` (a higher start lands later and rebounds less far);
    with gravity :math:`\partial y^+/\partial y = -e + (1+e)\,a\tau/|v^-|`. The naive
    :func:`naive_impact_step` gives :math:`+1` there.

    Args:
        x: ``(y, v)``: height above the ground (:math:`y \ge 0`) and upward velocity, shape ``(2,)``.
        h: step size.
        gravity: downward acceleration :math:`a` during flight (``g - u/m`` with an applied force).
        restitution: :math:`e \in [0, 1]`.

    Returns:
        ``(x_next, mode)``: shape ``(2,)`` and an ``int32`` scalar indexing :data:`IMPACT_MODES`
        (0 flight, 1 impact inside the step, 2 rest).
    """
    owner = "impact_step"
    h = check_positive_step(h, owner)
    restitution = _check_restitution(restitution, owner)
    y, v = x[0], x[1]
    a, e = gravity, restitution
    y_free = y + v * h - 0.5 * a * h * h
    v_free = v - a * h
    hits = y_free < 0
    disc = v * v + 2.0 * a * y
    ok = hits & (disc > 0)
    root = jnp.sqrt(jnp.where(ok, disc, 1.0))  # |v^-|; the masked value keeps sqrt away from 0
    # falling (v <= 0): 2y / (root - v), root - v >= root > 0; rising (v > 0, so a > 0): (v + root) / a
    den = root - v
    t_fall = 2.0 * y / jnp.where(den > 0, den, 1.0)
    t_rise = (v + root) / jnp.where(a > 0, a, 1.0)
    t_star = jnp.clip(jnp.where(ok, jnp.where(v > 0, t_rise, t_fall), 0.0), 0.0, h)
    v_minus = v - a * t_star
    v_up = -e * v_minus
    tau = h - t_star
    y_bounce = v_up * tau - 0.5 * a * tau * tau
    v_bounce = v_up - a * tau
    rest = hits & (~ok | (y_bounce < 0))
    mode = jnp.where(hits, jnp.where(rest, 2, 1), 0).astype(jnp.int32)
    zero = jnp.zeros_like(y_bounce)
    y_next = jnp.where(hits, jnp.where(rest, zero, y_bounce), y_free)
    v_next = jnp.where(hits, jnp.where(rest, zero, v_bounce), v_free)
    return jnp.stack([y_next, v_next]), mode


def naive_impact_step(
    x: Float[Array, "2"], h: ScalarLike, gravity: ScalarLike, restitution: ScalarLike
) -> tuple[Float[Array, "2"], Int[Array, ""]]:
    r"""The "step, then flip the velocity" ball, for comparison only (S04.4.1, exercise 1).

    .. math::
        v' = v - a h,\quad y' = y + h v',\qquad
        \text{if } y' < 0:\ (y^+, v^+) = (y', -e v')

    The impact is detected one step late and applied at the end of the step, so the position
    keeps its penetration and the impact time never enters the map: in the impact mode
    :math:`\partial y^+/\partial y = 1` and :math:`\partial y^+/\partial v = h`, where the exact
    flow (and :func:`impact_step`) gives :math:`-e` and :math:`-eh` (for :math:`a = 0`).

    Args:
        x: ``(y, v)``, shape ``(2,)``.
        h: step size.
        gravity: downward acceleration :math:`a`.
        restitution: :math:`e \in [0, 1]`.

    Returns:
        ``(x_next, mode)``: shape ``(2,)`` and an ``int32`` scalar (0 flight, 1 impact).
    """
    h = check_positive_step(h, "naive_impact_step")
    restitution = _check_restitution(restitution, "naive_impact_step")
    v_free = x[1] - gravity * h
    y_free = x[0] + h * v_free
    hit = y_free < 0
    v_next = jnp.where(hit, -restitution * v_free, v_free)
    return jnp.stack([y_free, v_next]), hit.astype(jnp.int32)
