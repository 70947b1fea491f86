"""Batched gradient estimators (S04.4.5): FoBG, ZoBG, the α-order mix and its adaptive α."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transform_checks import check_transforms
from course_lib.estimators import (
    GradientEstimate,
    adaptive_alpha,
    adaptive_aobg,
    aobg,
    confidence_width,
    fobg,
    gradient_samples,
    ivw_aobg,
    zobg,
)

SIGMA = 0.5
KEY = jax.random.PRNGKey(0)

# a smooth quadratic: the smoothed gradient is exactly A theta + b (Gaussian smoothing adds a constant)
A = jnp.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])
B = jnp.array([1.0, -2.0, 0.5])
THETA = jnp.array([0.3, -0.2, 1.0])


def heaviside(theta):
    return jnp.where(theta[0] >= 0.0, 1.0, 0.0)


def quadratic(theta):
    return 0.5 * theta @ A @ theta + B @ theta


def smoothed_heaviside_gradient(theta, sigma):
    return np.exp(-0.5 * (theta / sigma) ** 2) / (np.sqrt(2 * np.pi) * sigma)


@pytest.mark.parametrize("theta", [-0.3, 0.0, 0.4])
def test_zobg_converges_to_the_gaussian_density_and_fobg_is_zero(theta):
    x = jnp.array([theta])
    truth = smoothed_heaviside_gradient(theta, SIGMA)
    zo = zobg(heaviside, x, KEY, sigma=SIGMA, n_samples=20_000)
    # within four standard errors, and the standard error itself is small
    assert abs(float(zo.grad[0]) - truth) < 4 * float(zo.stderr[0])
    assert float(zo.stderr[0]) < 0.02 * truth
    fo = fobg(heaviside, x, KEY, sigma=SIGMA, n_samples=20_000)
    assert float(fo.grad[0]) == 0.0 and float(fo.stderr[0]) == 0.0
    assert float(fo.alpha) == 1.0 and float(zo.alpha) == 0.0


@pytest.mark.parametrize("estimator", [fobg, zobg])
def test_both_estimators_are_unbiased_on_a_smooth_quadratic(estimator):
    est = estimator(quadratic, THETA, jax.random.PRNGKey(3), sigma=0.3, n_samples=4000)
    z = (np.asarray(est.grad) - np.asarray(A @ THETA + B)) / np.asarray(est.stderr)
    assert np.all(np.abs(z) < 4)


def test_first_order_has_lower_variance_on_the_smooth_quadratic():
    fo = fobg(quadratic, THETA, KEY, sigma=0.3, n_samples=2000)
    zo = zobg(quadratic, THETA, KEY, sigma=0.3, n_samples=2000)
    assert np.all(np.asarray(fo.stderr) < np.asarray(zo.stderr))


def test_alpha_order_is_the_convex_combination_on_shared_samples():
    s = gradient_samples(quadratic, THETA, KEY, sigma=0.3, n_samples=500)
    mix = aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=500, alpha=0.25)
    expected = 0.25 * s.first_order.mean(0) + 0.75 * s.zeroth_order.mean(0)
    np.testing.assert_allclose(mix.grad, expected, rtol=1e-12)
    for alpha, est in ((1.0, fobg), (0.0, zobg)):
        end = aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=500, alpha=alpha)
        np.testing.assert_allclose(end.grad, est(quadratic, THETA, KEY, sigma=0.3, n_samples=500).grad, rtol=1e-12)
    # the per-sample terms match the formulas
    np.testing.assert_allclose(s.first_order, jax.vmap(jax.grad(quadratic))(THETA + s.noise), rtol=1e-12)
    np.testing.assert_allclose(s.zeroth_order, (s.values - quadratic(THETA))[:, None] * s.noise / 0.3**2, rtol=1e-12)


def test_adaptive_alpha_trusts_gradients_only_where_they_are_unbiased():
    step = adaptive_aobg(heaviside, jnp.array([0.0]), KEY, sigma=SIGMA, n_samples=20_000, gamma=0.1)
    smooth = adaptive_aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=4000, gamma=0.5)
    assert float(step.alpha) < 0.2  # FoBG (zero) disagrees with ZoBG: mostly zeroth order
    assert float(smooth.alpha) > 0.9  # they agree; FoBG has less variance: mostly first order
    # a tolerance below the confidence radius cannot be certified: pure ZoBG
    s = gradient_samples(heaviside, jnp.array([0.0]), KEY, sigma=SIGMA, n_samples=100)
    assert float(adaptive_alpha(s, gamma=1e-6)) == 0.0


def _phi(a):
    return np.exp(-0.5 * a * a) / np.sqrt(2 * np.pi)


def _upper_tail(a):  # 1 - Phi(a) = Phi(-a)
    return 0.5 * math.erfc(a / np.sqrt(2))


@pytest.mark.parametrize("theta", [-0.3, 0.0, 0.4])
def test_zobg_variance_of_the_smoothed_heaviside_has_its_closed_form(theta):
    # per-sample term t = (H(theta + w) - H(theta)) w / sigma^2 is nonzero only beyond the step, so with
    # a = |theta| / sigma: E t = phi(a) / sigma (the smoothed derivative) and
    # E t^2 = (a phi(a) + Phi(-a)) / sigma^2 (the second moment of a standard normal's tail)
    a = abs(theta) / SIGMA
    variance = (a * _phi(a) + _upper_tail(a)) / SIGMA**2 - (_phi(a) / SIGMA) ** 2
    s = gradient_samples(heaviside, jnp.array([theta]), KEY, sigma=SIGMA, n_samples=40_000)
    sample_variance = float(jnp.var(s.zeroth_order[:, 0], ddof=1))
    assert abs(sample_variance / variance - 1) < 0.05
    assert float(jnp.max(jnp.abs(s.first_order))) == 0.0  # FoBG's terms: identically zero


def test_bernstein_width_is_the_authors_formula_and_satisfies_the_inequality():
    for var, n, d, bound, delta in ((0.7, 100, 1, 2.0, 0.05), (12.0, 1000, 5, 30.0, 0.01), (1e-3, 20, 3, 0.1, 0.2)):
        eps = float(confidence_width(var, n, delta=delta, dim=d, bound=bound))
        log_term = math.log((d + 1) / delta)
        assert eps == pytest.approx(math.sqrt(2 * var * log_term / n) + 2 * bound * log_term / (3 * n), rel=1e-12)
        # the vector Bernstein tail at eps is at most delta (the closed form over-approximates the root)
        tail = (d + 1) * math.exp(-(n * eps**2 / 2) / (var + bound * eps / 3))
        assert tail <= delta * (1 + 1e-12)
        assert float(confidence_width(var, n, delta=delta, rule="chebyshev")) == pytest.approx(
            math.sqrt(var / (n * delta))
        )
    with pytest.raises(ValueError, match="needs the bound"):
        confidence_width(1.0, 10, delta=0.05)
    with pytest.raises(ValueError, match="rule must be one of"):
        confidence_width(1.0, 10, delta=0.05, bound=1.0, rule="hoeffding")


def test_adaptive_aobg_uses_independent_draws_as_the_authors_do():
    est = adaptive_aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=300, gamma=0.5, bound=50.0)
    k1, k0 = jax.random.split(KEY)
    first = gradient_samples(quadratic, THETA, k1, sigma=0.3, n_samples=300)
    zeroth = gradient_samples(quadratic, THETA, k0, sigma=0.3, n_samples=300)
    alpha = adaptive_alpha(first, zeroth, gamma=0.5, bound=50.0)
    np.testing.assert_allclose(est.alpha, alpha, rtol=1e-12)
    np.testing.assert_allclose(
        est.grad, alpha * first.first_order.mean(0) + (1 - alpha) * zeroth.zeroth_order.mean(0), rtol=1e-12
    )
    # a wider (Chebyshev, small delta) width leaves less room for the first-order part
    tight = adaptive_alpha(first, zeroth, gamma=0.5, bound=50.0, delta=0.2)
    wide = adaptive_alpha(first, zeroth, gamma=0.5, width="chebyshev", delta=0.001)
    assert float(wide) <= float(tight)


def test_inverse_variance_weights_minimise_the_variance_but_keep_the_bias():
    smooth = ivw_aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=4000)
    fo = fobg(quadratic, THETA, KEY, sigma=0.3, n_samples=4000)
    zo = zobg(quadratic, THETA, KEY, sigma=0.3, n_samples=4000)
    z = (np.asarray(smooth.grad) - np.asarray(A @ THETA + B)) / np.asarray(smooth.stderr)
    assert np.all(np.abs(z) < 4)  # unbiased on a smooth loss
    assert np.all(np.asarray(smooth.stderr) <= 1.05 * np.minimum(np.asarray(fo.stderr), np.asarray(zo.stderr)))
    assert np.all((np.asarray(smooth.alpha) > 0.5) & (np.asarray(smooth.alpha) <= 1.0))
    # on the step FoBG is exactly zero with zero variance: all weight goes to it, and so does its bias
    step = ivw_aobg(heaviside, jnp.array([0.0]), KEY, sigma=SIGMA, n_samples=2000)
    assert float(step.alpha[0]) == 1.0 and float(step.grad[0]) == 0.0


def test_pytree_theta_keeps_its_structure():
    theta = {"a": jnp.array([0.3, -0.2]), "b": jnp.array(1.0)}

    def loss(t):
        v = jnp.concatenate([t["a"], t["b"][None]])
        return quadratic(v)

    est = fobg(loss, theta, KEY, sigma=0.3, n_samples=64)
    assert isinstance(est, GradientEstimate)
    assert est.grad["a"].shape == (2,) and est.grad["b"].shape == ()
    assert est.stderr["a"].shape == (2,)


@pytest.mark.parametrize(
    "fn",
    [
        lambda t, k: fobg(quadratic, t, k, sigma=0.3, n_samples=64),
        lambda t, k: zobg(quadratic, t, k, sigma=0.3, n_samples=64),
        lambda t, k: aobg(quadratic, t, k, sigma=0.3, n_samples=64, alpha=0.4),
        lambda t, k: adaptive_aobg(quadratic, t, k, sigma=0.3, n_samples=64, gamma=1.0),
        lambda t, k: ivw_aobg(quadratic, t, k, sigma=0.3, n_samples=64),
        lambda t, k: gradient_samples(quadratic, t, k, sigma=0.3, n_samples=64),
    ],
    ids=["fobg", "zobg", "aobg", "adaptive_aobg", "ivw_aobg", "gradient_samples"],
)
@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad(fn):
    check_transforms(fn, THETA, key=KEY, direction=[0.5, -0.2, 0.3])


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan")])
def test_non_positive_sigma_is_rejected(sigma):
    for est in (fobg, zobg):
        with pytest.raises(ValueError, match=f"{est.__name__}: sigma .* must be positive and finite"):
            est(quadratic, THETA, KEY, sigma=sigma, n_samples=10)


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_alpha_outside_unit_interval_is_rejected(alpha):
    with pytest.raises(ValueError, match=r"aobg: alpha must lie in \[0, 1\]"):
        aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=10, alpha=alpha)


def test_other_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="zobg: n_samples must be a Python int >= 2"):
        zobg(quadratic, THETA, KEY, sigma=0.3, n_samples=1)
    with pytest.raises(ValueError, match="fobg: loss_fn must return a scalar, got shape"):
        fobg(lambda t: t, THETA, KEY, sigma=0.3, n_samples=10)
    with pytest.raises(ValueError, match="zobg: key must be one PRNG key"):
        zobg(quadratic, THETA, jax.random.split(KEY, 3), sigma=0.3, n_samples=10)
    with pytest.raises(ValueError, match="adaptive_aobg: gamma must lie in"):
        adaptive_aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=10, gamma=-1.0)
    with pytest.raises(ValueError, match="adaptive_aobg: delta must lie in"):
        adaptive_aobg(quadratic, THETA, KEY, sigma=0.3, n_samples=10, gamma=1.0, delta=1.5)
