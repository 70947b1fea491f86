r"""Contact force laws and the smooth building blocks behind them (S04.4.3, S04.4.6, S04.5.1, S04.5.5).

The four normal-force laws ``law(phi, phi_dot, params: ContactParams) -> lambda_n`` of
:data:`CONTACT_LAWS` (the table of how they differ is in :mod:`course_lib.contact`), the
explicit-scalar formulas they call (:func:`penalty_force`, :func:`softplus_clamp_force`,
:func:`softplus_penetration_force`, :func:`smooth_contact_force`) and the smooth building blocks
:func:`softplus`, :func:`heaviside_step`, :func:`sigmoid_step` and :func:`relaxed_complementarity`,
with the smoothed ``max(0, x)`` and ``clip`` that the relaxed solver of
:mod:`course_lib.contact.complementarity` reuses.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from course_lib._types import Array, ArrayLike, ContactLaw, Float, ScalarLike
from course_lib._validate import check_nonnegative, check_positive, lookup

#: A gap or gap rate of the force laws: any shape (elementwise), a NumPy or JAX array or a float.
Gap = Float[Array, "*shape"] | Float[np.ndarray, "*shape"] | float


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
    beta = check_positive(beta, "beta", "softplus")
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
    alpha = check_positive(alpha, "alpha", "sigmoid_step")
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
    kappa = check_positive(kappa, "kappa", "relaxed_complementarity")
    q, kappa = jnp.asarray(q), jnp.asarray(kappa)
    dtype = jnp.result_type(q, kappa, float)
    q, kappa = jnp.broadcast_arrays(q.astype(dtype), kappa.astype(dtype))
    return _smooth_relu(-q, 4.0 * kappa)


# --- force laws (formulas) ------------------------------------------------------------------


def _spring_damper(stiffness, damping, owner):
    """``(stiffness, damping)`` of a force law, each checked to be non-negative and finite."""
    return check_nonnegative(stiffness, "stiffness", owner), check_nonnegative(damping, "damping", owner)


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
    stiffness, damping = _spring_damper(stiffness, damping, "penalty_force")
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
    stiffness, damping = _spring_damper(stiffness, damping, "softplus_clamp_force")
    beta = check_positive(beta, "beta", "softplus_clamp_force")
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
    stiffness, damping = _spring_damper(stiffness, damping, "softplus_penetration_force")
    beta = check_positive(beta, "beta", "softplus_penetration_force")
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
    stiffness, damping = _spring_damper(stiffness, damping, "smooth_contact_force")
    force_beta = check_positive(force_beta, "force_beta", "smooth_contact_force")
    gap_beta = check_positive(gap_beta, "gap_beta", "smooth_contact_force")
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


#: Normal-force laws ``law(phi, phi_dot, params: ContactParams) -> lambda_n`` (table in :mod:`course_lib.contact`).
CONTACT_LAWS = {
    "penalty": _penalty_law,
    "softplus_clamp": _softplus_clamp_law,
    "softplus_penetration": _softplus_penetration_law,
    "softplus_both": _softplus_both_law,
}


def get_contact_law(name: str) -> ContactLaw:
    """Return the law ``law(phi, phi_dot, params)`` called ``name`` (clear ``KeyError`` listing the valid names)."""
    return lookup(CONTACT_LAWS, name, "contact law")
