"""course_lib.planted_bugs: each planted bug breaks dx_{t+1}/du_t exactly as the module's table says, and only that.

Float64 (``cl.enable_float64``). The reverse-mode Jacobian (what training's jax.grad computes) is compared with
central differences at eps = 0.04, on a few states and forces inside each bug's range; the values of every
environment equal the clean step with the actuator's force.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import course_lib as cl

cl.enable_float64()

H, EPS = 0.03, 0.04
STATES = [np.array([0.1, 0.2, -0.3, 0.5]), np.array([-0.4, -0.7, 1.1, -0.2])]
#: each bug with forces where it shows and the force the actuator makes of u there
FORCES = {
    "none": ([3.0, -6.5], lambda u: u),
    "saturated": ([12.0, -15.0], lambda u: np.clip(u, -10.0, 10.0)),
    "stop_gradient": ([3.0, -6.5], lambda u: u),
    "quantized": ([3.013, -6.487], lambda u: 0.05 * np.round(u / 0.05)),
    "where_sqrt": ([0.7, -1.5], lambda u: u),
    "wrong_jvp": ([6.0, -4.5], lambda u: 10.0 * np.tanh(u / 10.0)),
}


def jacobians(bug, x, u):
    step = cl.cart_pole_with_bug(bug, H)
    x, u = jnp.asarray(x), jnp.asarray([u])
    ad = np.asarray(jax.jacrev(step, argnums=1)(x, u))[:, 0]
    fd = (np.asarray(step(x, u + EPS)) - np.asarray(step(x, u - EPS))) / (2 * EPS)
    return ad, fd


def test_the_bugs_are_the_tables():
    assert cl.PLANTED_BUGS == tuple(FORCES)
    with pytest.raises(ValueError, match="unknown bug"):
        cl.cart_pole_with_bug("typo", H)


@pytest.mark.parametrize("bug", sorted(FORCES))
def test_values_are_the_clean_step_with_the_actuators_force(bug):
    clean = cl.rk4(cl.cart_pole, H)
    for x in STATES:
        for u in FORCES[bug][0]:
            got = cl.cart_pole_with_bug(bug, H)(x, jnp.array([u]))
            want = clean(jnp.asarray(x), jnp.array([FORCES[bug][1](u)]), cl.CartPoleParams())
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("x", STATES, ids=["x0", "x1"])
def test_each_bug_breaks_the_derivative_as_documented(x):
    for u in FORCES["none"][0]:
        ad, fd = jacobians("none", x, u)
        assert np.max(np.abs(ad - fd)) < 1e-8 * np.max(np.abs(fd))  # agree to O(eps^2) truncation
    for u in FORCES["saturated"][0]:
        ad, fd = jacobians("saturated", x, u)
        assert np.all(ad == 0) and np.all(fd == 0)  # flat on both sides: nothing to disagree about
    for bug in ("stop_gradient", "quantized"):
        for u in FORCES[bug][0]:
            ad, fd = jacobians(bug, x, u)
            assert np.all(ad == 0) and np.max(np.abs(fd)) > 1e-3, bug  # a cut graph
    for u in FORCES["where_sqrt"][0]:
        ad, fd = jacobians("where_sqrt", x, u)
        assert np.all(np.isnan(ad)) and np.all(np.isfinite(fd))
        # forward mode selects tangents, so the NaN of the untaken branch does not show there
        forward = np.asarray(
            jax.jacfwd(cl.cart_pole_with_bug("where_sqrt", H), argnums=1)(jnp.asarray(x), jnp.array([u]))
        )
        np.testing.assert_allclose(forward[:, 0], fd, rtol=1e-8)
    for u in FORCES["wrong_jvp"][0]:
        ad, fd = jacobians("wrong_jvp", x, u)
        clean_ad, _ = jacobians("none", x, FORCES["wrong_jvp"][1](u))
        np.testing.assert_allclose(ad, clean_ad, rtol=1e-12)  # the rule returns the tangent unchanged ...
        sech2 = 1.0 / np.cosh(u / 10.0) ** 2
        np.testing.assert_allclose(fd, sech2 * clean_ad, rtol=1e-3)  # ... where the true factor is sech^2(u/u_max)


def test_an_environment_jits_and_vmaps():
    step = jax.jit(jax.vmap(cl.cart_pole_with_bug("wrong_jvp", H)))
    xs, us = jnp.asarray(np.stack(STATES)), jnp.array([[1.0], [2.0]])
    assert step(xs, us).shape == (2, 4)
