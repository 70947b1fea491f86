"""Trajectory optimisation through a differentiable rollout: pendulum swing-up."""

import jax.numpy as jnp
import numpy as np
import pytest

from transform_checks import check_transforms
from course_lib.integrators import rk4
from course_lib.systems import PendulumParams, pendulum
from course_lib.trajopt import TrajOptResult, optimize_controls

P = PendulumParams()
STEP = rk4(pendulum, 0.05)
N = 80
X0 = jnp.zeros(2)


def effort(x, u, p):
    return 1e-3 * jnp.sum(u**2)


def upright(x, p):
    return 10.0 * ((x[0] - jnp.pi) ** 2 + x[1] ** 2)


def test_swing_up_with_bounded_torque():
    result = optimize_controls(
        STEP,
        X0,
        jnp.zeros((N, 1)),
        P,
        effort,
        upright,
        learning_rate=0.2,
        n_iterations=300,
        u_lower=-4.0,
        u_upper=4.0,
        max_grad_norm=10.0,
    )
    assert isinstance(result, TrajOptResult)
    assert float(result.final_loss) < 0.02 * float(result.loss[0])
    assert abs(float(result.xs[-1, 0]) - np.pi) < 0.2 and abs(float(result.xs[-1, 1])) < 0.3
    assert float(jnp.max(jnp.abs(result.us))) <= 4.0  # the torque limit (9.81 N·m of gravity) forces a pump
    assert result.loss.shape == (300,) and bool(jnp.all(jnp.isfinite(result.grad_norm)))


def test_gradient_modes_give_the_same_iterates():
    kwargs = dict(learning_rate=0.1, n_iterations=5)
    a = optimize_controls(STEP, X0, jnp.zeros((20, 1)), P, effort, upright, **kwargs)
    b = optimize_controls(STEP, X0, jnp.zeros((20, 1)), P, effort, upright, gradient="adjoint", **kwargs)
    np.testing.assert_allclose(a.us, b.us, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad():
    def fn(z):
        return optimize_controls(
            STEP, z[:2], jnp.zeros((10, 1)) + z[2], P, effort, upright, learning_rate=0.1, n_iterations=3
        ).us

    # differentiating the optimisation loop with respect to x0 is meaningful (bilevel problems) and works
    check_transforms(fn, jnp.array([0.1, 0.0, 0.3]), scales=(1.0, 0.5), grad_rtol=1e-5, direction=[0.6, -0.8, 0.0])


def test_bad_input_names_the_problem():
    us = jnp.zeros((N, 1))
    with pytest.raises(ValueError, match="optimize_controls: n_iterations must be a Python int >= 1"):
        optimize_controls(STEP, X0, us, P, effort, upright, n_iterations=0)
    with pytest.raises(ValueError, match=r"us_init must have shape \(N, nu\)"):
        optimize_controls(STEP, X0, jnp.zeros(N), P, effort, upright)
    with pytest.raises(ValueError, match="every upper input bound must exceed its lower bound"):
        optimize_controls(STEP, X0, us, P, effort, upright, u_lower=1.0, u_upper=-1.0)
    with pytest.raises(ValueError, match="max_grad_norm must be positive"):
        optimize_controls(STEP, X0, us, P, effort, upright, max_grad_norm=-1.0)
    with pytest.raises(KeyError, match="unknown gradient mode"):
        optimize_controls(STEP, X0, us, P, effort, upright, gradient="magic")
