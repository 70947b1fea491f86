r"""Hard impact of the 1-D ball, the impact time located inside the step (S04.4.1).

:func:`impact_step` is the exact step; :func:`naive_impact_step` ("step, then flip the velocity")
is kept only to show what it gets wrong. Overview of the contact families: :mod:`course_lib.contact`.
"""

from __future__ import annotations

import jax.numpy as jnp

from course_lib._types import Array, Float, Int, ScalarLike
from course_lib._validate import check_positive_step, check_restitution

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
    restitution = check_restitution(restitution, owner)
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
    restitution = check_restitution(restitution, "naive_impact_step")
    v_free = x[1] - gravity * h
    y_free = x[0] + h * v_free
    hit = y_free < 0
    v_next = jnp.where(hit, -restitution * v_free, v_free)
    return jnp.stack([y_free, v_next]), hit.astype(jnp.int32)
