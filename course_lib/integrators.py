r"""Fixed-step integrators: ``integrator(f, h, ...) -> step(x, u, p) -> x_next``.

The discrete map :math:`F_h` an integrator builds is what a differentiable
simulator differentiates (S04.2.1): the same ``f`` gives different Jacobians
:math:`A_k, B_k` under different integrators (S04.3). All integrators share one
signature and live in :data:`INTEGRATORS`, each entry with its facts (order, implicit, needs ``x = (q, v)``);
:func:`make_integrator` looks one up by name. The input ``u`` is held constant over the step (zero-order hold).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp

from course_lib._types import Control, Dynamics, Params, ScalarLike, State, Step
from course_lib._validate import check_positive_step, lookup
from course_lib.implicit import solve_implicit

DEFAULT_NEWTON_ITERATIONS = 8


def explicit_euler(f: Dynamics, h: ScalarLike) -> Step:
    r"""Explicit (forward) Euler, order 1 (S04.3.2): :math:`x_{k+1} = x_k + h f(x_k, u_k)`.

    Its Jacobian is :math:`A_k = I + h f_x`; on :math:`\dot x = a x` the amplification is :math:`1 + ha`.
    """
    h = check_positive_step(h, "explicit_euler")

    def step(x: State, u: Control, p: Params) -> State:
        return x + h * f(x, u, p)

    return step


def semi_implicit_euler(f: Dynamics, h: ScalarLike, nq: Optional[int] = None) -> Step:
    r"""Semi-implicit (symplectic) Euler for ``x = (q, v)``, order 1 (S04.3.3).

    .. math:: v_{k+1} = v_k + h\,a(q_k, v_k, u_k),\qquad q_{k+1} = q_k + h\,\dot q(q_k, v_{k+1})

    Velocity first, then position with the *new* velocity, so for the double
    integrator :math:`\partial q_{k+1}/\partial u_k = h^2` (explicit Euler gives 0).

    Args:
        f: dynamics whose first ``nq`` outputs are :math:`\dot q` and the rest :math:`\dot v`.
        h: step size.
        nq: number of positions; defaults to half the state size.
    """
    h = check_positive_step(h, "semi_implicit_euler")

    def step(x: State, u: Control, p: Params) -> State:
        n = x.shape[0]
        split = n // 2 if nq is None else nq
        if nq is None and n % 2:
            raise ValueError(f"semi_implicit_euler: needs a mechanical state x = (q, v); got odd state size {n}")
        v_next = x[split:] + h * f(x, u, p)[split:]
        x_mid = jnp.concatenate([x[:split], v_next])
        q_next = x[:split] + h * f(x_mid, u, p)[:split]
        return jnp.concatenate([q_next, v_next])

    return step


def explicit_midpoint(f: Dynamics, h: ScalarLike) -> Step:
    r"""Explicit midpoint rule, order 2: :math:`x_{k+1} = x_k + h f(x_k + \tfrac h2 f(x_k))`."""
    h = check_positive_step(h, "explicit_midpoint")

    def step(x: State, u: Control, p: Params) -> State:
        return x + h * f(x + 0.5 * h * f(x, u, p), u, p)

    return step


def rk4(f: Dynamics, h: ScalarLike) -> Step:
    r"""Classical Runge–Kutta, order 4 (S04.3.4).

    .. math::
        k_1 = f(x_k),\ k_2 = f(x_k + \tfrac h2 k_1),\ k_3 = f(x_k + \tfrac h2 k_2),\ k_4 = f(x_k + h k_3),\quad
        x_{k+1} = x_k + \tfrac h6 (k_1 + 2k_2 + 2k_3 + k_4)
    """
    h = check_positive_step(h, "rk4")

    def step(x: State, u: Control, p: Params) -> State:
        k1 = f(x, u, p)
        k2 = f(x + 0.5 * h * k1, u, p)
        k3 = f(x + 0.5 * h * k2, u, p)
        k4 = f(x + h * k3, u, p)
        return x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    return step


def _implicit_step(f: Dynamics, h: ScalarLike, residual, iterations: int) -> Step:
    def guess(args):
        x, u, p = args
        return x + h * f(x, u, p)

    def step(x: State, u: Control, p: Params) -> State:
        return solve_implicit(residual, guess, iterations, (x, u, p))

    return step


def implicit_euler(f: Dynamics, h: ScalarLike, newton_iterations: int = DEFAULT_NEWTON_ITERATIONS) -> Step:
    r"""Implicit (backward) Euler, order 1 (S04.3.5).

    Solves :math:`G = x_{k+1} - x_k - h f(x_{k+1}, u_k) = 0` with Newton; the
    derivative follows from the implicit function theorem,
    :math:`A_k = (I - h f_x(x_{k+1}))^{-1}`, applied as a linear solve
    (see :mod:`course_lib.implicit`). On :math:`\dot x = a x` the amplification is :math:`1/(1-ha)`.
    """
    h = check_positive_step(h, "implicit_euler")

    def residual(y, args):
        x, u, p = args
        return y - x - h * f(y, u, p)

    return _implicit_step(f, h, residual, newton_iterations)


def implicit_midpoint(f: Dynamics, h: ScalarLike, newton_iterations: int = DEFAULT_NEWTON_ITERATIONS) -> Step:
    r"""Implicit midpoint rule, order 2, symplectic (structure preserving).

    Solves :math:`x_{k+1} = x_k + h f(\tfrac12(x_k + x_{k+1}), u_k)`; it conserves quadratic
    invariants exactly (the energy of linear springs) and has no energy drift on
    Hamiltonian systems. Differentiated like :func:`implicit_euler`.
    """
    h = check_positive_step(h, "implicit_midpoint")

    def residual(y, args):
        x, u, p = args
        return y - x - h * f(0.5 * (x + y), u, p)

    return _implicit_step(f, h, residual, newton_iterations)


class Integrator(NamedTuple):
    """One entry of :data:`INTEGRATORS`: the integrator itself, called as ``entry(f, h, **options)``, and the
    facts about it that callers would otherwise encode in its name."""

    build: Callable[..., Step]
    order: int  #: global order of accuracy (checked by the convergence tests)
    implicit: bool  #: solves for :math:`x_{k+1}` with Newton, so it takes ``newton_iterations``
    mechanical: bool  #: needs a mechanical state :math:`x = (q, v)`

    def __call__(self, f: Dynamics, h: ScalarLike, **options: Any) -> Step:
        return self.build(f, h, **options)


INTEGRATORS = {
    "explicit_euler": Integrator(explicit_euler, order=1, implicit=False, mechanical=False),
    "semi_implicit_euler": Integrator(semi_implicit_euler, order=1, implicit=False, mechanical=True),
    "explicit_midpoint": Integrator(explicit_midpoint, order=2, implicit=False, mechanical=False),
    "rk4": Integrator(rk4, order=4, implicit=False, mechanical=False),
    "implicit_euler": Integrator(implicit_euler, order=1, implicit=True, mechanical=False),
    "implicit_midpoint": Integrator(implicit_midpoint, order=2, implicit=True, mechanical=False),
}


def make_integrator(name: str, f: Dynamics, h: ScalarLike, **options: Any) -> Step:
    """Build ``step(x, u, p)`` with the integrator called ``name`` (see :data:`INTEGRATORS`)."""
    return lookup(INTEGRATORS, name, "integrator")(f, h, **options)
