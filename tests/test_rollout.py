"""Rollouts, gradient modes, the adjoint recursion, linearisation and parameter sensitivities."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import course_lib as cl

P = cl.PendulumParams()
STEP = cl.rk4(cl.pendulum, 0.05)
X0 = jnp.array([0.4, -0.1])
US = 0.3 * jnp.sin(jnp.linspace(0.0, 3.0, 37))[:, None]


def stage(x, u, p):
    return 0.5 * x[0] ** 2 + 0.01 * p.damping * u[0] ** 2


def terminal(x, p):
    return 2.0 * (x[0] - 0.2 * p.length) ** 2 + 0.5 * x[1] ** 2


def test_rollout_shape_and_start():
    xs = cl.rollout(STEP, X0, US, P)
    assert xs.shape == (US.shape[0] + 1, 2)
    np.testing.assert_array_equal(xs[0], X0)
    np.testing.assert_allclose(xs[1], STEP(X0, US[0], P))


@pytest.mark.parametrize(
    "mode,segment", [("checkpointed", None), ("checkpointed", 5), ("checkpointed", 37), ("adjoint", None)]
)
def test_gradient_modes_agree_with_store_all(mode, segment):
    def grads(gradient, seg=None):
        return jax.grad(cl.rollout_cost, argnums=(1, 2, 3))(
            STEP, X0, US, P, stage, terminal, gradient=gradient, segment_length=seg
        )

    ref, got = grads("store_all"), grads(mode, segment)
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(got)):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    loss_ref = cl.rollout_cost(STEP, X0, US, P, stage, terminal)
    assert float(
        cl.rollout_cost(STEP, X0, US, P, stage, terminal, gradient=mode, segment_length=segment)
    ) == pytest.approx(float(loss_ref), rel=1e-14)


def test_adjoint_matches_jax_grad_including_lambdas():
    result = cl.adjoint_gradients(STEP, X0, US, P, stage, terminal)
    g_x0, g_us, g_p = jax.grad(cl.rollout_cost, argnums=(1, 2, 3))(STEP, X0, US, P, stage, terminal)
    np.testing.assert_allclose(result.lambdas[0], g_x0, rtol=1e-12)
    np.testing.assert_allclose(result.grad_us, g_us, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ravel_pytree(result.grad_p)[0], ravel_pytree(g_p)[0], rtol=1e-12)
    # lambda_k = d(cost from step k on)/d x_k, checked at an interior k by restarting there.
    k = 17
    tail = jax.grad(lambda x: cl.rollout_cost(STEP, x, US[k:], P, stage, terminal))(result.xs[k])
    np.testing.assert_allclose(result.lambdas[k], tail, rtol=1e-12)
    np.testing.assert_allclose(result.lambdas[-1], jax.grad(terminal)(result.xs[-1], P), rtol=1e-12)


def test_adjoint_recursion_matches_explicit_jacobians():
    """lambda_k = l_x + A_k^T lambda_{k+1} with A_k from linearize_trajectory (S04.7.2)."""
    result = cl.adjoint_gradients(STEP, X0, US, P, stage, terminal)
    lin = cl.linearize_trajectory(STEP, result.xs, US, P)
    for k in (0, 10, 36):
        l_x = jax.grad(stage)(result.xs[k], US[k], P)
        np.testing.assert_allclose(result.lambdas[k], l_x + lin.A[k].T @ result.lambdas[k + 1], rtol=1e-12)
        l_u = jax.grad(stage, argnums=1)(result.xs[k], US[k], P)
        np.testing.assert_allclose(result.grad_us[k], l_u + lin.B[k].T @ result.lambdas[k + 1], rtol=1e-12, atol=1e-15)


def _executions(jaxpr, primitive):
    """How many times ``primitive`` runs: occurrences weighted by enclosing scan lengths."""
    total = 0
    for eqn in jaxpr.eqns:
        total += eqn.primitive.name == primitive
        repeat = eqn.params["length"] if eqn.primitive.name == "scan" else 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            total += repeat * _executions(sub, primitive)
    return total


@pytest.mark.parametrize("n,segment", [(100, None), (100, 7), (30, 30), (12, 5)])
def test_checkpoint_recomputation_count_as_predicted(n, segment):
    """Each pendulum step evaluates ``sin`` once (its derivative uses ``cos``), so the number
    of ``sin`` executions in the gradient program counts forward step evaluations."""
    step = cl.explicit_euler(cl.pendulum, 0.01)
    us = jnp.zeros((n, 1))

    def sin_runs(gradient):
        grad = jax.grad(lambda u: cl.rollout_cost(step, X0, u, P, stage, gradient=gradient, segment_length=segment))
        return _executions(jax.make_jaxpr(grad)(us).jaxpr, "sin")

    assert sin_runs("store_all") == n
    assert sin_runs("checkpointed") == n + cl.checkpoint_plan(n, segment).recomputed_steps
    assert sin_runs("adjoint") == 2 * n  # the adjoint pass linearises each step again (one VJP per step)


def test_checkpoint_plan_layout():
    plan = cl.checkpoint_plan(10_000)
    assert plan == cl.CheckpointPlan(segment_length=100, n_segments=100, stored_states=100, recomputed_steps=10_000)
    assert cl.checkpoint_plan(10, 3).n_segments == 4
    with pytest.raises(ValueError, match="segment_length"):
        cl.checkpoint_plan(10, 0)


def test_checkpointing_uses_less_memory():
    n = 4000
    us = jnp.zeros((n, 1))
    sizes = {}
    for mode in ("store_all", "checkpointed"):
        fn = jax.jit(jax.grad(lambda u, m=mode: cl.rollout_cost(STEP, X0, u, P, stage, gradient=m)))
        mem = fn.lower(us).compile().memory_analysis()
        if mem is None:
            pytest.skip("this backend reports no memory analysis")
        sizes[mode] = mem.temp_size_in_bytes
    assert sizes["checkpointed"] < sizes["store_all"] / 10, sizes


def test_linearize_trajectory_matches_per_step_jacobians():
    xs = cl.rollout(STEP, X0, US, P)
    lin = cl.linearize_trajectory(STEP, xs, US, P)
    assert lin.A.shape == (37, 2, 2) and lin.B.shape == (37, 2, 1) and lin.P.shape == (37, 2, 4)
    k = 11
    np.testing.assert_allclose(lin.A[k], jax.jacfwd(STEP)(xs[k], US[k], P), rtol=1e-13)
    np.testing.assert_allclose(lin.B[k], jax.jacfwd(STEP, argnums=1)(xs[k], US[k], P), rtol=1e-13)
    p_flat, unravel = ravel_pytree(P)
    np.testing.assert_allclose(lin.P[k], jax.jacfwd(lambda q: STEP(xs[k], US[k], unravel(q)))(p_flat), rtol=1e-13)


def test_parameter_sensitivities_match_jacobian_of_rollout():
    p_flat, unravel = ravel_pytree(P)
    s = cl.parameter_sensitivities(STEP, X0, US, P)
    direct = jax.jacfwd(lambda q: cl.rollout(STEP, X0, US, unravel(q)))(p_flat)
    assert s.shape == (38, 2, 4)
    np.testing.assert_allclose(s, direct, rtol=1e-11, atol=1e-14)


def test_parameter_sensitivity_rank_reveals_identifiability():
    """Constant velocity cannot separate viscous from Coulomb friction; a rich input can (S04.2.5)."""
    p = cl.FrictionBlockParams()
    step = cl.semi_implicit_euler(cl.friction_block, 0.01)
    n = 300

    def rank(x0, us):
        s = cl.parameter_sensitivities(step, x0, us, p)[:, :, :3]  # mass, damping, coulomb
        sv = np.linalg.svd(np.asarray(s.reshape(-1, 3)), compute_uv=False)
        return int(np.sum(sv > 1e-8 * sv[0]))

    v0 = 0.5
    balance = p.damping * v0 + p.coulomb * np.tanh(v0 / p.v_smooth)
    assert rank(jnp.array([0.0, v0]), jnp.full((n, 1), balance)) == 1
    t = jnp.arange(n) * 0.01
    assert rank(jnp.array([0.0, 0.0]), (3.0 * jnp.sin(2.0 * t) + 1.5 * jnp.sin(7.0 * t))[:, None]) == 3
