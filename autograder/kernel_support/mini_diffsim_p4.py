"""Kernel-side support of mini_diffsim_p4: the stage-3 reference window loss its graded function receives.

The graded cell calls the student's ``panel_data`` with this window loss (on the task's reference step, with
the hidden terminal value) and the task's reference force law in place of the student's own earlier stages,
so their bugs are not charged again. Neither answers the panel check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from course_check.adapters import stage4_panel

from autograder.kernel_support.mini_diffsim_common import (
    W_PEN,
    W_U,
    W_V,
    Y_TARGET,
    policy,
    task_force,
    task_step,
    terminal_value,
    zero_value,
)

#: (terminal weight, sum over the batch, tracking cost at x_{k+1}, penetration cost at x_k): the reference is
#: (1, 0, 0, 0); the reference module of the project switches the others on to compute catalogued mistakes
#: of stage 3 (traced switches: one compilation serves them all, and a switch of 0 changes no bit).
REFERENCE_SWITCHES = (1.0, 0.0, 0.0, 0.0)


def window_loss(theta, x_starts, horizon, step=task_step, terminal_value=zero_value, switches=REFERENCE_SWITCHES):
    """Stage-3 window loss: (L, (terms [tracking, effort, penetration, terminal], states (B, h+1, 2)))."""
    terminal_weight, batch_sum, track_next, pen_current = (
        jnp.asarray(switches, dtype=jnp.float64)[i] for i in range(4)
    )

    def one(x0):
        def body(x, _):
            u = policy(theta, x)
            x_next = step(x, u)
            tracked = x + track_next * (x_next - x)  # x_k
            gap = x_next + pen_current * (x - x_next)  # x_{k+1}
            costs = jnp.stack(
                [
                    (tracked[0] - Y_TARGET) ** 2 + W_V * tracked[1] ** 2,
                    W_U * jnp.sum(u**2),
                    W_PEN * jnp.maximum(0.0, -gap[0]) ** 2,
                ]
            )
            return x_next, (x_next, costs)

        x_end, (xs, costs) = jax.lax.scan(body, x0, None, length=horizon)
        terms = jnp.concatenate([jnp.sum(costs, axis=0), terminal_weight * jnp.reshape(terminal_value(x_end), (1,))])
        return terms, jnp.concatenate([x0[None], xs])

    terms, states = jax.vmap(one)(jax.lax.stop_gradient(jnp.asarray(x_starts)))
    terms = jnp.mean(terms, axis=0) * (1.0 + batch_sum * (terms.shape[0] - 1))
    return jnp.sum(terms), (terms, states)


def graded(name: str, student_fn):
    """The student's function as the hidden cell of check ``mini_diffsim_p4.<name>`` calls it."""
    if name != "panel_data":
        raise KeyError(f"no wiring for mini_diffsim_p4.{name}")

    def loss_for_value(value):
        return lambda theta, x_starts, h: window_loss(theta, x_starts, h, task_step, terminal_value(value))

    return stage4_panel(student_fn, loss_for_value, task_force)
