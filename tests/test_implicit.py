"""Implicit steps: the IFT derivative equals differentiating an unrolled Newton solve,
and its backward pass does not grow with the number of Newton iterations."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import course_lib as cl

H = 0.1
P = cl.PendulumParams(damping=0.5)


def unrolled_implicit_euler(x, u, p, iterations=30):
    """Independent implementation: Newton in a Python loop, differentiated straight through."""
    y = x + H * cl.pendulum(x, u, p)
    for _ in range(iterations):
        g = y - x - H * cl.pendulum(y, u, p)
        y = y - jnp.linalg.solve(jax.jacfwd(lambda y_: y_ - x - H * cl.pendulum(y_, u, p))(y), g)
    return y


def test_ift_gradient_equals_unrolled_newton_gradient():
    step = cl.implicit_euler(cl.pendulum, H, newton_iterations=30)
    x, u = jnp.array([2.5, -1.0]), jnp.array([0.4])
    ours = jax.jacrev(step, argnums=(0, 1, 2))(x, u, P)
    theirs = jax.jacrev(unrolled_implicit_euler, argnums=(0, 1, 2))(x, u, P)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # forward mode uses the same IFT rule
    np.testing.assert_allclose(jax.jacfwd(step)(x, u, P), ours[0], rtol=1e-12)


def test_ift_jacobian_is_the_linear_solve_formula():
    """A_k = (I - h f_x(x_{k+1}))^{-1}, B_k = (I - h f_x)^{-1} h f_u (S04.3.5)."""
    step = cl.implicit_euler(cl.pendulum, H)
    x, u = jnp.array([0.8, 0.3]), jnp.array([-0.2])
    x_next = step(x, u, P)
    f_x, f_u = jax.jacfwd(cl.pendulum, argnums=(0, 1))(x_next, u, P)
    m = jnp.eye(2) - H * f_x
    lin = cl.linearize(step, x, u, P)
    np.testing.assert_allclose(lin.A, np.linalg.inv(m), rtol=1e-12)
    np.testing.assert_allclose(lin.B, np.linalg.solve(m, H * f_u), rtol=1e-12)


def _grad_fn(iterations, unrolled=False):
    x, u = jnp.array([2.5, -1.0]), jnp.array([0.4])
    if unrolled:
        return jax.grad(lambda u_: jnp.sum(unrolled_implicit_euler(x, u_, P, iterations))), u
    step = cl.implicit_euler(cl.pendulum, H, newton_iterations=iterations)
    return jax.grad(lambda u_: jnp.sum(step(x, u_, P))), u


def _count_eqns(jaxpr):
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            total += _count_eqns(sub)
    return total


def test_backward_pass_does_not_grow_with_newton_iterations():
    sizes = {}
    for iterations in (2, 50):
        fn, u = _grad_fn(iterations)
        sizes[iterations] = _count_eqns(jax.make_jaxpr(fn)(u).jaxpr)
        mem = jax.jit(fn).lower(u).compile().memory_analysis()
        if mem is not None:
            sizes[f"temp{iterations}"] = mem.temp_size_in_bytes
    assert sizes[2] == sizes[50]  # the iteration count is only a loop bound
    if "temp2" in sizes:
        assert sizes["temp2"] == sizes["temp50"]
    # The check can see growth: unrolling Newton makes the gradient program grow.
    grown = [_count_eqns(jax.make_jaxpr(fn)(u).jaxpr) for fn, u in (_grad_fn(2, True), _grad_fn(10, True))]
    assert grown[1] > 2 * grown[0]


@pytest.mark.parametrize("iterations", [1, 3])
def test_too_few_iterations_is_visible_in_the_residual(iterations):
    """With too few Newton iterations the step is not solved; the residual says so."""
    step = cl.implicit_euler(cl.pendulum, 0.5, newton_iterations=iterations)
    x, u = jnp.array([3.0, 4.0]), jnp.zeros(1)
    y = step(x, u, P)
    residual = y - x - 0.5 * cl.pendulum(y, u, P)
    converged = cl.implicit_euler(cl.pendulum, 0.5, newton_iterations=30)(x, u, P)
    residual_conv = converged - x - 0.5 * cl.pendulum(converged, u, P)
    assert float(jnp.linalg.norm(residual_conv)) < 1e-12
    assert float(jnp.linalg.norm(residual)) > float(jnp.linalg.norm(residual_conv))
