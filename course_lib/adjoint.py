r"""The hand-written adjoint (backward) recursion of S04.7.

For :math:`x_{k+1} = F(x_k, u_k, p)` and
:math:`L = \ell_N(x_N, p) + \sum_{k<N} \ell(x_k, u_k, p)`:

.. math::
    \lambda_N = \partial_x \ell_N,\qquad
    \lambda_k = \partial_x \ell_k + A_k^T \lambda_{k+1},\qquad
    \frac{dL}{du_k} = \partial_u \ell_k + B_k^T \lambda_{k+1},\qquad
    \frac{dL}{dp} = \partial_p \ell_N + \sum_k \left(\partial_p \ell_k + P_k^T \lambda_{k+1}\right)

The products :math:`A_k^T\lambda` etc. are vector–Jacobian products of one step, so
no Jacobian matrix is ever formed, and memory is the stored trajectory only.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from course_lib._types import (
    Array,
    Controls,
    Float,
    Params,
    PyTree,
    Scalar,
    ScalarLike,
    StageCost,
    State,
    States,
    Step,
    TerminalCost,
)
from course_lib._costs import cost_scan
from course_lib._params import loop_params
from course_lib._validate import check_finite


class AdjointResult(NamedTuple):
    """Output of :func:`adjoint_gradients`.

    Attributes:
        loss: scalar :math:`L`.
        xs: forward trajectory, ``(N+1, nx)``.
        lambdas: :math:`\\lambda_k = dL/dx_k`, ``(N+1, nx)``; ``lambdas[0]`` is ``dL/dx_0``.
        grad_us: :math:`dL/du_k`, ``(N, nu)``.
        grad_p: :math:`dL/dp`, same pytree structure as ``p``.
    """

    loss: Scalar
    xs: States
    lambdas: Float[Array, "N+1 nx"]
    grad_us: Float[Array, "N nu"]
    grad_p: PyTree


def forward_pass(
    step: Step, stage_cost: StageCost, terminal_cost: TerminalCost, x0: State, us: Controls, p: Params
) -> tuple[Scalar, States]:
    """Roll out and accumulate the cost; returns ``(loss, xs)`` with ``xs`` of shape ``(N+1, nx)``."""

    x_last, total, xs = cost_scan(step, stage_cost, x0, us, p, keep_states=True)
    assert xs is not None  # keep_states
    return total + terminal_cost(x_last, p), jnp.concatenate([xs, x_last[None]], axis=0)


def backward_pass(
    step: Step,
    stage_cost: StageCost,
    terminal_cost: TerminalCost,
    xs: States,
    us: Controls,
    p: Params,
    scale: ScalarLike = 1.0,
) -> tuple[Float[Array, "N+1 nx"], Float[Array, "N nu"], PyTree]:
    """Run the adjoint recursion on a stored trajectory ``xs``.

    ``scale`` multiplies every adjoint (it is the incoming cotangent when this pass
    serves as a custom VJP). Returns ``(lambdas, grad_us, grad_p)``.
    """
    # the loop differentiates with respect to the packed parameters and carries their cotangent
    packed, rebuild = loop_params(p)

    def packed_step(x, u, q):
        return step(x, u, rebuild(q))

    def packed_stage_cost(x, u, q):
        return stage_cost(x, u, rebuild(q))

    lam_n, gp_n = jax.grad(lambda x, q: terminal_cost(x, rebuild(q)), argnums=(0, 1))(xs[-1], packed)
    lam_n = scale * lam_n
    gp_n = jax.tree_util.tree_map(lambda g: scale * g, gp_n)

    def body(carry, xu):
        lam_next, gp = carry
        x, u = xu
        _, step_vjp = jax.vjp(packed_step, x, u, packed)
        at_lam, bt_lam, pt_lam = step_vjp(lam_next)  # A_k^T λ, B_k^T λ, P_k^T λ
        lx, lu, lp = jax.grad(packed_stage_cost, argnums=(0, 1, 2))(x, u, packed)
        lam = scale * lx + at_lam
        grad_u = scale * lu + bt_lam
        gp = jax.tree_util.tree_map(lambda a, b, c: a + scale * b + c, gp, lp, pt_lam)
        return (lam, gp), (lam, grad_u)

    (_, grad_packed), (lams, grad_us) = jax.lax.scan(body, (lam_n, gp_n), (xs[:-1], us), reverse=True)
    return jnp.concatenate([lams, lam_n[None]], axis=0), grad_us, rebuild(grad_packed)


def adjoint_gradients(
    step: Step, x0: State, us: Controls, p: Params, stage_cost: StageCost, terminal_cost: TerminalCost
) -> AdjointResult:
    """Loss and all its gradients by one forward and one adjoint sweep (S04.7.2).

    Args:
        step: ``step(x, u, p) -> x_next``.
        x0: initial state ``(nx,)``.
        us: inputs ``(N, nu)``.
        p: parameter pytree.
        stage_cost: ``ell(x, u, p) -> scalar``.
        terminal_cost: ``ell_N(x, p) -> scalar``.
    """
    x0, us, p = check_finite((x0, us, p), "x0, us or p", "adjoint_gradients")
    loss, xs = forward_pass(step, stage_cost, terminal_cost, x0, us, p)
    lambdas, grad_us, grad_p = backward_pass(step, stage_cost, terminal_cost, xs, us, p)
    return AdjointResult(loss, xs, lambdas, grad_us, grad_p)
