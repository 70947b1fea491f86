r"""Solving ``G(y, args) = 0`` forward by Newton, backward by the implicit function theorem.

Implicit integrators define the next state only through a residual
:math:`G(x_{k+1}, x_k, u_k, p) = 0` (S04.3.5). Forward, a fixed number of Newton
iterations runs inside ``lax.fori_loop`` so that the solve works under ``jit`` and
``vmap``. Derivatives never go through those iterations: a ``custom_jvp`` applies
the implicit function theorem at the solution,

.. math::
    \frac{\partial G}{\partial y}\,\dot y = -\frac{\partial G}{\partial \text{args}}\,\dot{\text{args}},

solved with ``jnp.linalg.solve`` (an LU factorisation, never an explicit inverse).
JAX transposes that linear solve for reverse mode, which gives the adjoint system
:math:`(\partial G/\partial y)^T w = \bar y` of S04.3.6. Both forward and reverse
mode therefore cost one linear solve per step, whatever the iteration count.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp

from course_lib._types import Array, Float, PyTree

#: ``G(y, args) -> (n,)``.
Residual = Callable[[Float[Array, " n"], PyTree], Float[Array, " n"]]
#: ``guess(args) -> (n,)``.
InitialGuess = Callable[[PyTree], Float[Array, " n"]]


def _newton(residual: Residual, y0: Float[Array, " n"], args: PyTree, iterations: int) -> Float[Array, " n"]:
    def body(_, y):
        jac = jax.jacfwd(residual)(y, args)
        return y - jnp.linalg.solve(jac, residual(y, args))

    return jax.lax.fori_loop(0, iterations, body, y0)


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def solve_implicit(
    residual: Residual, initial_guess: InitialGuess, iterations: int, args: PyTree
) -> Float[Array, " n"]:
    """Return ``y`` with ``residual(y, args) == 0``.

    Args:
        residual: ``G(y, args) -> (n,)``, smooth in both arguments.
        initial_guess: ``guess(args) -> (n,)``, e.g. an explicit Euler predictor.
        iterations: number of Newton iterations (static).
        args: pytree of inputs the solution depends on (differentiable).
    """
    return _newton(residual, initial_guess(args), args, iterations)


@solve_implicit.defjvp
def _solve_implicit_jvp(residual, initial_guess, iterations, primals, tangents):
    (args,), (args_dot,) = primals, tangents
    y = solve_implicit(residual, initial_guess, iterations, args)
    # IFT: G_y y_dot + G_args args_dot = 0, evaluated at the solution only.
    g_y = jax.jacfwd(residual)(y, args)
    _, g_dot = jax.jvp(lambda a: residual(y, a), (args,), (args_dot,))
    return y, -jnp.linalg.solve(g_y, g_dot)
