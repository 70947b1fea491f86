"""Kernel-side support shared by the Mini-DiffSim notebooks (readable by the kernels grading mini_diffsim_p1..p4).

Nothing here answers a check of the project: the task of stages 3 and 4 (course_lib's soft ball on a stiff penalty ground, the linear policy, the window starts, the terminal
values), whose public parts the notebooks' task cells define too. ``autograder.authoring.reference.mini_diffsim`` imports
it, so each piece exists once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import course_lib as cl


def ball_params(k, c, beta):
    """SoftBallParams of the project's ball: 1 kg, g = 9.81, ground stiffness k, damping c, sharpness beta."""
    return cl.SoftBallParams(contact=cl.ContactParams(stiffness=k, damping=c, gap_beta=beta))


# --- the task of stages 3 and 4 ------------------------------------------------------------------
# Hold a 1 kg ball with a vertical thruster at Y_TARGET above a stiff penalty ground; semi-implicit Euler,
# DT = 0.02 s, k = 8000 N/m, c = 5 N s/m, so omega DT = 1.8: inside the stability limit 2, but every
# contact lasts two or three steps and its Jacobians are large.

DT = 0.02
TASK_K, TASK_C = 8000.0, 5.0
Y_TARGET, W_V, W_U, W_PEN = 0.1, 0.1, 1e-3, 1e3
N_ENVS = 8
LR, CLIP = 0.1, 1.0
EVAL_SEED, EVAL_HORIZON = 2024, 32
TASK_PARAMS = ball_params(TASK_K, TASK_C, 1.0)
_TASK_BALL_STEP = cl.soft_ball_step(DT, "penalty")


def task_step(x, u):
    """One step of the task (course_lib's soft ball, the stage-2 reference), ``(x, u) -> x_next``."""
    return _TASK_BALL_STEP(x, u, TASK_PARAMS)


def task_force(y, v):
    """The task's ground force lambda(y, v) (the stage-2 reference law)."""
    return cl.penalty_force(y, v, TASK_K, TASK_C)


def policy(theta, x):
    """u = theta_0 (y - y*) + theta_1 v + theta_2, shape (1,)."""
    return jnp.stack([theta[0] * (x[0] - Y_TARGET) + theta[1] * x[1] + theta[2]])


def start_states(seed, i):
    """Window starts of iteration i: N_ENVS states, y ~ U(0, 0.6) m, v ~ U(-3, 1) m/s, (N_ENVS, 2)."""
    key = jax.random.fold_in(jax.random.PRNGKey(seed), i)
    return jax.random.uniform(key, (N_ENVS, 2), minval=jnp.array([0.0, -3.0]), maxval=jnp.array([0.6, 1.0]))


def zero_value(x):
    """The default terminal value: no critic."""
    return jnp.zeros((), x.dtype)


def public_value(x):
    """The notebooks' quadratic terminal value (stand-in for a critic)."""
    return 5.0 * (x[0] - Y_TARGET) ** 2 + 0.5 * x[1] ** 2


def hidden_value(x):
    """The terminal value the graded cells pass (not shown to students)."""
    return 3.0 * (x[0] - Y_TARGET) ** 2 + 0.2 * x[1] ** 2 + 0.4 * (x[0] - Y_TARGET) * x[1]


TERMINAL_VALUES = {"zero": zero_value, "public": public_value, "hidden": hidden_value}


def terminal_value(name):
    """The terminal value function a case names (``"zero"``, ``"public"`` or ``"hidden"``)."""
    return TERMINAL_VALUES[str(name)]
