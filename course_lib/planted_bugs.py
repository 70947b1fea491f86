r"""Cart-pole steps with a planted gradient bug, for auditing a differentiable environment (S04.8.6, S04.9.5).

:func:`cart_pole_with_bug` says what each bug does to the derivative. The ``jnp.where`` with a square root is the
pitfall of S04.8.6; the custom JVP is how a hand-written derivative (a contact model's, a solver's) goes wrong
without anything failing.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from course_lib._types import Array, ArrayLike, Float, ScalarLike
from course_lib.integrators import rk4
from course_lib.systems import CartPoleParams, cart_pole

#: the bugs :func:`cart_pole_with_bug` can plant, in the order of the module's table
PLANTED_BUGS = ("none", "saturated", "stop_gradient", "quantized", "where_sqrt", "wrong_jvp")


def _tanh_forgetting_the_chain_rule(u_max: float) -> Callable[[Array], Array]:
    @jax.custom_jvp
    def saturate(u):
        return u_max * jnp.tanh(u / u_max)

    @saturate.defjvp
    def _(primals, tangents):
        (u,), (t,) = primals, tangents
        return saturate(u), t  # the bug: the derivative is sech²(u / u_max) * t

    return saturate


def _actuator(bug: str, u_max: float, quantum: float, dead_band: float) -> Callable[[Array], Array]:
    if bug == "none":
        return lambda u: u
    if bug == "saturated":
        return lambda u: jnp.clip(u, -u_max, u_max)
    if bug == "stop_gradient":
        return jax.lax.stop_gradient
    if bug == "quantized":
        return lambda u: quantum * jnp.round(u / quantum)
    if bug == "where_sqrt":
        return lambda u: u - jnp.where(u**2 > dead_band**2, jnp.sqrt(u**2 - dead_band**2), 0.0)
    if bug == "wrong_jvp":
        return _tanh_forgetting_the_chain_rule(u_max)
    raise ValueError(f"unknown bug {bug!r}; known: {', '.join(PLANTED_BUGS)}")


def cart_pole_with_bug(
    bug: str,
    h: ScalarLike,
    p: CartPoleParams = CartPoleParams(),
    *,
    u_max: float = 10.0,
    quantum: float = 0.05,
    dead_band: float = 2.0,
) -> Callable[[Float[ArrayLike, "4"], Float[ArrayLike, "1"]], Float[Array, "4"]]:
    r"""One RK4 step ``step(x, u) -> x_next`` of the cart-pole whose force is :math:`F = a(u)` with ``bug`` planted.

    Each bug changes only how the control becomes the force on the cart. The values stay finite and plausible;
    what breaks is :math:`\partial x_{t+1}/\partial u_t` as reverse-mode AD (``jax.jacrev``, ``jax.grad``) reports
    it, compared with central differences:

    * ``none``: :math:`a(u) = u`; AD agrees.
    * ``saturated``: ``clip(u, -u_max, u_max)``, meant for :math:`|u| > u_{\max}`: AD and differences are both
      zero, so they agree (a clamp that is flat on both sides of ``u`` is no bug there).
    * ``stop_gradient``: ``stop_gradient(u)``: AD is zero where the differences are not (a cut graph).
    * ``quantized``: ``quantum * round(u / quantum)``: AD is zero where the differences are not, once a step of the
      staircase lies within ``u ± eps``.
    * ``where_sqrt``: ``u - where(u**2 > d**2, sqrt(u**2 - d**2), 0)``, meant for :math:`|u| < d`: the value is
      ``u``, AD is NaN (the untaken branch's square root of a negative number meets a zero cotangent). Forward
      mode (``jax.jacfwd``) selects tangents and does not show it.
    * ``wrong_jvp``: ``u_max * tanh(u / u_max)`` with a custom JVP that returns the tangent unchanged: AD is
      finite and wrong by the forgotten factor :math:`\operatorname{sech}^2(u/u_{\max})`.

    Args:
        bug: one of :data:`PLANTED_BUGS`.
        h: step size.
        p: :class:`CartPoleParams`.
        u_max: the saturation force of ``saturated`` and ``wrong_jvp`` [N].
        quantum: the force resolution of ``quantized`` [N].
        dead_band: :math:`d` of ``where_sqrt`` [N].

    Returns:
        ``step(x, u)``: ``x`` of shape ``(4,)``, ``u`` of shape ``(1,)``, the next state of shape ``(4,)``.
        Pure JAX: it can be jitted, vmapped and differentiated (which is the point).
    """
    actuator = _actuator(bug, u_max, quantum, dead_band)
    physics = rk4(cart_pole, h)

    def step(x: Float[ArrayLike, "4"], u: Float[ArrayLike, "1"]) -> Float[Array, "4"]:
        return physics(jnp.asarray(x), actuator(jnp.asarray(u)), p)

    return step
