"""Reference solutions and graded checks for section S04.1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.registry import Check, Output, WrongAnswer, register

TARGET = 1.0


def _terminal_loss(us, dt, integrator):
    step = cl.make_integrator(integrator, cl.double_integrator, dt)
    xs = cl.rollout(step, jnp.zeros(2), jnp.reshape(us, (-1, 1)), cl.DoubleIntegratorParams())
    return 0.5 * (xs[-1, 0] - TARGET) ** 2


def analytic_grad(u, dt, integrator="semi_implicit_euler"):
    """dL/du for L = (x_N - 1)^2 / 2 on the double integrator (one reverse pass)."""
    return np.asarray(jax.grad(_terminal_loss)(jnp.asarray(u), dt, integrator))


def fd_grad(u, dt, eps=1e-6, scheme="central"):
    """Central-difference gradient and the number of rollouts it used (2N)."""
    u = np.asarray(u, dtype=np.float64)
    loss = jax.jit(lambda us: _terminal_loss(us, dt, "semi_implicit_euler"))
    grad = np.zeros_like(u)
    count = 0
    base = float(loss(u)) if scheme == "forward" else None
    count += scheme == "forward"
    for i in range(u.size):
        e = np.zeros_like(u)
        e[i] = eps
        if scheme == "forward":
            grad[i] = (float(loss(u + e)) - base) / eps
            count += 1
        else:
            grad[i] = (float(loss(u + e)) - float(loss(u - e))) / (2 * eps)
            count += 2
    return grad, count


def _cases():
    rng = np.random.default_rng(104_101)
    return [
        {"u": rng.normal(size=n).round(6), "dt": dt}
        for n, dt in ((7, 0.05), (23, 0.1), (40, 0.02))
    ]


def _shifted_horizon(u, dt, shift):
    """What an off-by-one horizon gives: the formula dt^2 (N - i + shift) (x_N - 1)."""
    g = analytic_grad(u, dt)
    n = np.arange(len(u))
    per_step = dt**2 * (len(u) - n)
    return g / per_step * (per_step + shift * dt**2)


register(
    Check(
        "s04_1_ex1", "fd_grad", 3.0, _cases,
        reference=lambda u, dt: (analytic_grad(u, dt), 2 * len(u)),
        outputs=(Output("中心差分梯度", "finite_difference"), Output("仿真次数")),
        mistakes={
            "explicit_euler": lambda u, dt: (analytic_grad(u, dt, "explicit_euler"), 2 * len(u)),
            "rollouts_n": lambda u, dt: (analytic_grad(u, dt), len(u)),
            "rollouts_n_plus_one": lambda u, dt: (analytic_grad(u, dt), len(u) + 1),
        },
    ),
    Check(
        "s04_1_ex1", "analytic_grad", 3.0, _cases,
        reference=lambda u, dt: analytic_grad(u, dt),
        outputs=(Output("解析梯度", "exact"),),
        mistakes={
            "explicit_euler": lambda u, dt: analytic_grad(u, dt, "explicit_euler"),
            "horizon_minus_one": lambda u, dt: _shifted_horizon(u, dt, -1),
            "horizon_plus_one": lambda u, dt: _shifted_horizon(u, dt, +1),
        },
    ),
)


WRONG_ANSWERS = {
    "s04_1_ex1": [
        WrongAnswer(
            cells={
                "fd_grad_answer": '''def fd_grad(u, dt, eps=1e-6):
    u = np.asarray(u, dtype=np.float64)
    grad = np.zeros_like(u)
    for i in range(u.size):
        e = np.zeros_like(u)
        e[i] = eps
        grad[i] = (float(terminal_loss(u + e, dt)) - float(terminal_loss(u - e, dt))) / (2 * eps)
    return grad, u.size  # counts one rollout per component
''',
                "analytic_grad_answer": '''def analytic_grad(u, dt):
    u = np.asarray(u, dtype=np.float64)
    n = u.size
    q, v = 0.0, 0.0
    for a in u:  # explicit Euler: position with the old velocity
        q += dt * v
        v += dt * a
    return (q - 1.0) * dt**2 * (n - 1 - np.arange(n))
''',
            },
            feedback_contains="2N",
        ),
    ],
}
