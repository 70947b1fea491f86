"""Gradient checks and diagnostics against hand-computed answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import course_lib as cl


def smooth_loss(theta):
    return jnp.sum(jnp.sin(theta) ** 2) + theta[0] * theta[1]


THETA = jnp.array([0.3, -1.2, 2.0, 0.7])


def test_relative_error_is_the_chapters_formula():
    np.testing.assert_allclose(cl.relative_error(2.0, 1.0), 0.5)
    np.testing.assert_allclose(cl.relative_error(1e-3, 2e-3), 1e-3)  # denominator floored at 1
    np.testing.assert_allclose(cl.relative_error(-4.0, 4.0), 2.0)


def test_directional_check_rows_and_plateau_on_smooth_loss():
    check = cl.directional_check(smooth_loss, THETA, jax.grad(smooth_loss)(THETA))
    rows = check.rows()
    assert len(rows) == len(cl.DEFAULT_EPS) and rows[0][0] == pytest.approx(0.1)
    v = check.direction
    assert float(jnp.linalg.norm(v)) == pytest.approx(1.0)
    # central differences: error ~ eps^2 for large eps (truncation), ~1e-16/eps for small eps (rounding)
    assert rows[0][3] > 1e-4 and rows[2][3] < 1e-5
    plateau = cl.find_plateau(check)
    assert bool(plateau.found)
    assert 1e-6 <= float(plateau.best_eps) <= 1e-4
    assert float(plateau.best_error) < 1e-9


@pytest.mark.parametrize(
    "wrong",
    [lambda g: -g, lambda g: jnp.zeros_like(g), lambda g: 2 * g, lambda g: g[::-1]],
    ids=["flipped-sign", "cut-graph", "doubled", "permuted"],
)
def test_no_plateau_for_a_wrong_gradient(wrong):
    check = cl.directional_check(smooth_loss, THETA, wrong(jax.grad(smooth_loss)(THETA)))
    assert not bool(cl.find_plateau(check).found)
    assert int(cl.find_plateau(check).start) == -1


def test_plateau_only_below_the_distance_to_a_kink():
    """Near the boundary of max(0, x), steps that cross it break the check (S04.8.2)."""

    def loss(t):
        return jnp.sum(10.0 * jnp.maximum(0.0, t))

    theta = jnp.full(3, 1e-3)  # 1e-3 away from the kink along every axis
    check = cl.directional_check(loss, theta, jax.grad(loss)(theta), direction=jnp.ones(3))
    plateau = cl.find_plateau(check)
    assert bool(plateau.found)
    assert float(check.eps[int(plateau.start)]) <= 1e-3 * np.sqrt(3)  # steps of eps/sqrt(3) per axis
    assert float(check.rel_error[1]) > 0.1  # eps = 0.01 crosses it too
    assert float(check.rel_error[0]) > 0.1  # eps = 0.1 crosses the kink


def test_directional_check_with_pytree_and_given_direction():
    params = cl.PendulumParams()

    def loss(p):
        return p.mass * p.gravity * jnp.sin(p.length) + p.damping**2

    grad = jax.grad(loss)(params)
    check = cl.directional_check(loss, params, grad, direction=cl.PendulumParams(0.0, 0.0, 1.0, 0.0))
    assert float(check.ad) == pytest.approx(float(grad.gravity))
    assert float(jnp.min(check.rel_error)) < 1e-10


def test_default_tolerance_by_dtype():
    assert cl.default_tolerance(jnp.float64) == pytest.approx(1.49e-6, rel=1e-2)
    assert cl.default_tolerance(jnp.float32) == pytest.approx(3.45e-2, rel=1e-2)


def test_coordinate_and_jacobian_checks():
    grad = jax.grad(smooth_loss)(THETA)
    coord = cl.coordinate_check(smooth_loss, THETA, grad)
    np.testing.assert_allclose(coord.fd, grad, rtol=1e-8)
    assert float(coord.max_rel_error) < 1e-8
    bad = cl.coordinate_check(smooth_loss, THETA, grad.at[2].set(0.0))
    assert int(jnp.argmax(bad.rel_error)) == 2

    def f(x):  # S04.6 exercise 1
        return jnp.array([x[0] * x[1], jnp.sin(x[0])])

    x = jnp.array([0.4, -1.3])
    jac = cl.jacobian_check(f, x)
    np.testing.assert_allclose(jac.ad, [[x[1], x[0]], [jnp.cos(x[0]), 0.0]], rtol=1e-14)
    assert float(jac.max_rel_error) < 1e-9


# --- diagnostics ---------------------------------------------------------------------------------


def test_step_spectral_norms():
    rng = np.random.default_rng(0)
    As = jnp.asarray(rng.normal(size=(5, 3, 3)))
    np.testing.assert_allclose(cl.step_spectral_norms(As), [np.linalg.norm(a, 2) for a in np.asarray(As)], rtol=1e-12)


def test_product_singular_values_short_horizon_matches_numpy():
    rng = np.random.default_rng(1)
    As = rng.normal(size=(6, 3, 3)) * 0.7
    out = cl.product_log_singular_values(jnp.asarray(As))
    prod = np.eye(3)
    for k in range(6):
        prod = As[k] @ prod
        np.testing.assert_allclose(out[k], np.log10(np.linalg.svd(prod, compute_uv=False)), rtol=1e-10, atol=1e-10)


def test_product_singular_values_do_not_overflow():
    """500 steps growing 10x and 5x per step: the naive product overflows (1e500), the log stays exact."""
    As = jnp.tile(jnp.diag(jnp.array([10.0, 5.0])), (500, 1, 1))
    out = cl.product_log_singular_values(As)
    np.testing.assert_allclose(out[-1], [500.0, 500 * np.log10(5.0)], rtol=1e-10)
    with np.errstate(over="ignore"):
        assert np.isinf(np.linalg.norm(np.linalg.matrix_power(np.diag([10.0, 5.0]), 500)))


def test_non_normal_matrix_grows_with_unit_step_norm_bound():
    """S04.2.3: spectral radius < 1 yet the product grows for a while (non-normal A)."""
    a = jnp.array([[0.9, 5.0], [0.0, 0.9]])
    out = cl.product_log_singular_values(jnp.tile(a, (30, 1, 1)))
    assert float(jnp.max(jnp.abs(jnp.linalg.eigvals(a)))) < 1
    assert float(jnp.max(out[:, 0])) > 1.0  # the product exceeds 10 at some horizon


def test_gradient_norm_vs_horizon_matches_explicit_products():
    step = cl.semi_implicit_euler(cl.pendulum, 0.05)
    us = jnp.zeros((25, 1))
    xs = cl.rollout(step, jnp.array([2.0, 0.0]), us, cl.PendulumParams())
    lin = cl.linearize_trajectory(step, xs, us, cl.PendulumParams())
    norms = cl.gradient_norm_vs_horizon(lin.A, lin.B)
    for k in (0, 5, 24):
        direct = jax.jacfwd(lambda u0: cl.rollout(step, xs[0], us.at[0].set(u0), cl.PendulumParams())[k + 1])(us[0])
        assert float(norms[k]) == pytest.approx(float(jnp.linalg.norm(direct, 2)), rel=1e-10)


def test_first_nonfinite_step():
    xs = jnp.ones((6, 2))
    assert int(cl.first_nonfinite_step(xs)) == -1
    assert int(cl.first_nonfinite_step(xs.at[3, 1].set(jnp.nan).at[5, 0].set(jnp.inf))) == 3
    step = cl.explicit_euler(cl.scalar_linear, 1.0)
    blown = cl.rollout(step, jnp.ones(1), jnp.zeros((2000, 1)), cl.ScalarLinearParams(a=2.0))
    assert int(cl.first_nonfinite_step(blown)) == 647  # 3**k overflows float64 at k = 647
