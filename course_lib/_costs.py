"""The cost-accumulating scan that rollouts, the adjoint's forward pass and trajectory optimisation share.

Private: one loop for "step forward and add up the stage cost" (it was written three times), and the
default terminal cost.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from course_lib._params import loop_params
from course_lib._types import Controls, Params, Scalar, StageCost, State, States, Step


def zero_terminal_cost(x: State, p: Params) -> Scalar:
    """The terminal cost of a problem that has none: ``0`` in the state's floating dtype."""
    return jnp.zeros((), jnp.result_type(x, float))


def cost_scan(
    step: Step, stage_cost: StageCost, x0: State, us: Controls, p: Params, *, keep_states: bool = False
) -> tuple[State, Scalar, States | None]:
    """``(x_N, sum_k stage_cost(x_k, u_k, p), xs)``: ``xs`` is ``(x_0, ..., x_{N-1})`` with ``keep_states``, else None."""

    packed, rebuild = loop_params(p)

    def body(carry, u):
        x, total = carry
        p = rebuild(packed)
        return (step(x, u, p), total + stage_cost(x, u, p)), (x if keep_states else None)

    (x_last, total), xs = jax.lax.scan(body, (x0, jnp.zeros((), jnp.result_type(x0, float))), us)
    return x_last, total, xs
