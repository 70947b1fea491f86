"""Bad input raises a clear error that names the problem."""

import jax
import jax.numpy as jnp
import pytest

import course_lib as cl

P = cl.PendulumParams()


def test_wrong_state_shape_names_the_system_and_shapes():
    with pytest.raises(ValueError, match=r"pendulum: state x must have shape \(2,\), got shape \(3,\)"):
        cl.pendulum(jnp.zeros(3), jnp.zeros(1), P)
    with pytest.raises(ValueError, match=r"cart_pole: input u must have shape \(1,\)"):
        cl.cart_pole(jnp.zeros(4), jnp.zeros(2), cl.CartPoleParams())


def test_wrong_state_shape_is_caught_under_jit_and_in_rollouts():
    step = cl.rk4(cl.pendulum, 0.1)
    with pytest.raises(ValueError, match="state x must have shape"):
        jax.jit(step)(jnp.zeros(3), jnp.zeros(1), P)
    with pytest.raises(ValueError, match=r"us must have shape \(N, nu\)"):
        cl.rollout(step, jnp.zeros(2), jnp.zeros(5), P)
    with pytest.raises(ValueError, match=r"x0 must be a state vector"):
        cl.rollout(step, jnp.zeros((1, 2)), jnp.zeros((5, 1)), P)


def test_step_that_changes_the_state_shape():
    with pytest.raises(ValueError, match=r"step maps a state of shape \(2,\) to shape \(3,\)"):
        cl.rollout(lambda x, u, p: jnp.zeros(3), jnp.zeros(2), jnp.zeros((4, 1)), P)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(KeyError, match=r"unknown integrator 'rk5'; valid names: .*rk4"):
        cl.make_integrator("rk5", cl.pendulum, 0.1)
    with pytest.raises(KeyError, match=r"unknown system 'quadruped'"):
        cl.get_system("quadruped")
    with pytest.raises(KeyError, match=r"unknown gradient mode 'magic'; valid names: adjoint, checkpointed, store_all"):
        cl.rollout_cost(
            cl.rk4(cl.pendulum, 0.1), jnp.zeros(2), jnp.zeros((3, 1)), P, lambda x, u, p: 0.0, gradient="magic"
        )


@pytest.mark.parametrize("h", [0.0, -0.01, float("nan"), float("inf")])
@pytest.mark.parametrize("name", sorted(cl.INTEGRATORS))
def test_non_positive_or_non_finite_step_size(name, h):
    with pytest.raises(ValueError, match=f"{name}: step size h must be a positive finite scalar"):
        cl.make_integrator(name, cl.pendulum, h)


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf])
def test_non_finite_state_or_input(bad):
    step = cl.rk4(cl.pendulum, 0.1)
    with pytest.raises(FloatingPointError, match=r"rollout: x0, us or p contains NaN or Inf \(first at index \(1,\)\)"):
        cl.rollout(step, jnp.array([0.0, bad]), jnp.zeros((3, 1)), P)
    with pytest.raises(FloatingPointError, match="rollout_cost: x0, us or p contains NaN or Inf"):
        cl.rollout_cost(step, jnp.zeros(2), jnp.zeros((3, 1)).at[2, 0].set(bad), P, lambda x, u, p: 0.0)
    with pytest.raises(FloatingPointError, match="adjoint_gradients"):
        cl.adjoint_gradients(
            step, jnp.zeros(2), jnp.zeros((3, 1)), P._replace(mass=bad), lambda x, u, p: 0.0, lambda x, p: 0.0
        )


def test_checkpoint_plan_rejects_empty_horizon():
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        cl.checkpoint_plan(0)


# --- value checks hold under jit and vmap too (equinox.error_if), and do not change gradients -------
# A traced value cannot be checked while tracing; the check is compiled into the program and raises
# when it runs. JAX reports a failed runtime check as an error whose text carries our message.


def _raises_at_run_time(fn, *args, match):
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn(*args))


def test_nan_initial_state_is_caught_inside_jit():
    step = cl.semi_implicit_euler(cl.pendulum, 0.05)
    rollout = jax.jit(lambda x0: cl.rollout(step, x0, jnp.zeros((5, 1)), P))
    assert jnp.all(jnp.isfinite(rollout(jnp.array([0.1, 0.0]))))
    _raises_at_run_time(rollout, jnp.array([jnp.nan, 0.0]), match="x0, us or p contains NaN or Inf")


def test_negative_contact_stiffness_is_caught_inside_jit_and_vmap():
    force = jax.jit(lambda k: cl.penalty_force(-0.01, 0.0, k, 1.0))
    assert float(force(1000.0)) > 0
    _raises_at_run_time(force, -1000.0, match="penalty_force: stiffness must be non-negative and finite")
    batched = jax.jit(jax.vmap(lambda k: cl.penalty_force(-0.01, 0.0, k, 1.0)))
    _raises_at_run_time(batched, jnp.array([1000.0, -1.0]), match="stiffness must be non-negative")


def test_non_positive_traced_step_size_is_caught():
    final = jax.jit(lambda h: cl.rollout(cl.rk4(cl.pendulum, h), jnp.array([0.1, 0.0]), jnp.zeros((3, 1)), P)[-1])
    _raises_at_run_time(final, -0.1, match="rk4: step size h must be a positive finite scalar")


def test_runtime_checks_leave_values_and_gradients_unchanged():
    def loss(k):
        return cl.penalty_force(-0.01, -0.2, k, 3.0) ** 2

    k = 500.0
    eager, traced = jax.value_and_grad(loss)(k), jax.jit(jax.value_and_grad(loss))(k)
    assert jnp.allclose(eager[0], traced[0]) and jnp.allclose(eager[1], traced[1])
    # d/dk (k*0.01 + 3*0.2)^2 = 2 * (0.01 k + 0.6) * 0.01
    assert jnp.allclose(traced[1], 2 * (0.01 * k + 0.6) * 0.01)


# --- hyper-parameters are checked under jit too (they used to be skipped when traced) ------------


def test_traced_smoothing_width_is_caught():
    def loss(theta):
        return jnp.sum(theta**2)

    estimate = jax.jit(lambda s: cl.fobg(loss, jnp.ones(2), jax.random.key(0), sigma=s, n_samples=8).grad)
    assert jnp.all(jnp.isfinite(estimate(0.1)))
    _raises_at_run_time(estimate, -0.1, match="fobg: sigma .* must be positive and finite")
    _raises_at_run_time(estimate, jnp.nan, match="fobg: sigma .* must be positive and finite")


def test_traced_input_bounds_in_the_wrong_order_are_caught():
    step = cl.semi_implicit_euler(cl.pendulum, 0.05)
    us = jnp.zeros((5, 1))

    def solve(upper):
        result = cl.optimize_controls(
            step,
            jnp.array([0.1, 0.0]),
            us,
            P,
            lambda x, u, p: jnp.sum(u**2),
            lambda x, p: jnp.sum(x**2),
            n_iterations=2,
            u_lower=-1.0,
            u_upper=upper,
        )
        return result.us

    solve = jax.jit(solve)
    assert jnp.all(jnp.isfinite(solve(1.0)))
    _raises_at_run_time(solve, -2.0, match="optimize_controls: every upper input bound must exceed its lower bound")


def test_traced_discount_is_caught():
    task = cl.wall_task()
    params = cl.init_mlp(jax.random.key(0), (task.x0.shape[0], task.nu))
    psi = jnp.zeros(cl.quadratic_features(task.x0).shape)
    x0s = jnp.tile(task.x0, (2, 1))
    loss = jax.jit(lambda g: cl.short_horizon_loss(params, psi, x0s, task, horizon=4, gamma=g)[0])
    assert jnp.isfinite(loss(0.99))
    _raises_at_run_time(loss, 1.5, match=r"short_horizon_loss: gamma must be in \(0, 1\]")
