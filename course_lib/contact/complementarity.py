r"""The velocity-level contact problem with Coulomb friction, solved and differentiated (S04.4.2, S04.5.3–S04.5.5).

:func:`solve_contact` solves one time step's normal complementarity and friction box by projected
Gauss–Seidel and differentiates the solution with the implicit function theorem (or, for comparison,
through every sweep; see :data:`CONTACT_GRADIENTS`); ``kappa > 0`` solves the interior-point
relaxation. :func:`complementarity_step` wires the solver into a Stewart–Trinkle/Anitescu time step.
Overview of the contact families: :mod:`course_lib.contact`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from course_lib._types import Array, ArrayLike, Float, Int, ScalarLike
from course_lib._validate import check_nonnegative, check_positive_step, lookup
from course_lib.contact.laws import _smooth_clip, _smooth_relu

#: Projected Gauss–Seidel sweeps used by :func:`solve_contact` unless told otherwise.
DEFAULT_CONTACT_ITERATIONS = 50
#: Diagonal regularisation of the Delassus matrix, relative to its mean diagonal (see :func:`solve_contact`).
DEFAULT_REGULARIZATION = 1e-6


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
        mode: ``int32``; 0 separating, 1 sticking, 2 sliding (S04.4.4's contact log).
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
    mu = check_nonnegative(mu, "friction coefficient mu", owner)
    kappa = check_nonnegative(kappa, "kappa", owner)
    regularization = check_nonnegative(regularization, "regularization", owner)
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
    mu = check_nonnegative(mu, "friction coefficient mu", owner)
    kappa = check_nonnegative(kappa, "kappa", owner)
    regularization = check_nonnegative(regularization, "regularization", owner)
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
