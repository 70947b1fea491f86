"""Contact laws, the complementarity solver with IFT gradients, the time-of-impact ball and the contact systems.

Float64 throughout (tests/conftest.py). The solver tests use a small random 3-contact problem
whose solution has one sliding, one sticking and one separating contact, each at least 0.1
away from a mode boundary, so central differences with eps = 1e-6 never cross one.
"""

import inspect
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transform_checks import check_transforms
from course_lib.contact import complementarity as CC
from course_lib.contact import impact as CI
from course_lib.contact import laws as CL
from course_lib import contact_systems as CS
from course_lib.checks import relative_error

# ------------------------------------------------------------------------------------------------
# soft laws


def _one_sided_slopes(fn, z0, eps=1e-7):
    """Left and right difference quotients of a scalar function at z0."""
    return (fn(z0) - fn(z0 - eps)) / eps, (fn(z0 + eps) - fn(z0)) / eps


def test_softplus_sigmoid_and_heaviside_closed_forms():
    z = jnp.linspace(-2.0, 2.0, 9)
    np.testing.assert_allclose(CL.softplus(z, 3.0), np.log1p(np.exp(3.0 * np.asarray(z))) / 3.0, rtol=1e-13)
    np.testing.assert_allclose(CL.softplus(z, 1e4), np.maximum(0, z), atol=1e-4)
    np.testing.assert_allclose(CL.softplus(jnp.array([800.0, -800.0]), 1.0), [800.0, 0.0], atol=1e-300)  # no overflow
    np.testing.assert_allclose(jax.vmap(jax.grad(CL.softplus), (0, None))(z, 3.0), jax.nn.sigmoid(3.0 * z), rtol=1e-13)

    np.testing.assert_array_equal(CL.heaviside_step(jnp.array([-1.0, 0.0, 2.0])), [0.0, 1.0, 1.0])
    assert float(jax.grad(CL.heaviside_step)(0.3)) == 0.0  # the pathwise derivative never sees the jump
    for alpha in (1.0, 10.0, 100.0):  # the seed's table: wide and small, then narrow and tall
        s = CL.sigmoid_step(z, alpha)
        g = jax.vmap(jax.grad(CL.sigmoid_step), (0, None))(z, alpha)
        np.testing.assert_allclose(g, alpha * s * (1 - s), rtol=1e-12)
        assert float(jax.grad(CL.sigmoid_step)(0.0, alpha)) == pytest.approx(alpha / 4)
    np.testing.assert_allclose(CL.sigmoid_step(jnp.array([-0.5, 0.5]), 1e3), [0.0, 1.0], atol=1e-12)


K, CD = 1000.0, 10.0
LAW_PARAMS = CL.ContactParams(stiffness=K, damping=CD, force_beta=20.0, gap_beta=1000.0)


def test_penalty_force_closed_form_and_derivative():
    phi = jnp.array([0.01, 0.0, -0.01, -0.01, -0.01])
    phi_dot = jnp.array([-1.0, -1.0, 0.0, -0.5, 2.0])
    # [no force at a distance, none at contact, k d, k d + c d_dot, clamped (damper out-pulls the spring)]
    expected = [0.0, 0.0, 10.0, 15.0, 0.0]
    np.testing.assert_allclose(CL.penalty_force(phi, phi_dot, K, CD), expected, atol=1e-12)
    # S04.5.8 exercise 1: d lambda / d phi = -k inside, 0 outside, a jump of k at phi = 0
    dphi = jax.grad(CL.penalty_force)
    assert float(dphi(-0.01, 0.0, K, CD)) == pytest.approx(-K)
    assert float(dphi(0.01, 0.0, K, CD)) == 0.0
    assert np.isfinite(float(dphi(0.0, 0.0, K, CD)))


def test_softplus_laws_closed_forms_and_limits():
    phi, phi_dot = jnp.array(-0.02), jnp.array(-0.3)
    inner = K * 0.02 + CD * 0.3
    assert float(CL.softplus_clamp_force(phi, phi_dot, K, CD, 20.0)) == pytest.approx(np.log1p(np.exp(20 * inner)) / 20)
    # outside contact the clamp-smoothed law pushes with log(2)/beta at any distance
    assert float(CL.softplus_clamp_force(0.5, 0.0, K, CD, 20.0)) == pytest.approx(np.log(2) / 20)
    # the penetration-smoothed law: k log(2)/beta at phi = 0, exponentially small outside
    assert float(CL.softplus_penetration_force(0.0, 0.0, K, CD, 1000.0)) == pytest.approx(K * np.log(2) / 1000)
    assert float(CL.softplus_penetration_force(0.05, 0.0, K, CD, 1000.0)) < 1e-15
    d = np.log1p(np.exp(1000 * 0.02)) / 1000
    d_dot = 0.3 / (1 + np.exp(-1000 * 0.02))
    assert float(CL.softplus_penetration_force(phi, phi_dot, K, CD, 1000.0)) == pytest.approx(K * d + CD * d_dot)
    assert float(CL.smooth_contact_force(phi, phi_dot, K, CD, 20.0, 1000.0)) == pytest.approx(
        np.log1p(np.exp(20 * (K * d + CD * d_dot))) / 20
    )
    # every law tends to the penalty law as its sharpness grows
    phis = jnp.linspace(-0.03, 0.03, 13)
    dots = jnp.linspace(-0.5, 0.5, 13)
    hard = CL.penalty_force(phis, dots, K, CD)
    np.testing.assert_allclose(CL.softplus_clamp_force(phis, dots, K, CD, 1e6), hard, atol=1e-6)
    np.testing.assert_allclose(CL.softplus_penetration_force(phis, dots, K, CD, 1e8), hard, atol=1e-4)
    np.testing.assert_allclose(CL.smooth_contact_force(phis, dots, K, CD, 1e6, 1e8), hard, atol=1e-4)


# which boundary each law smooths: True = the slope jumps there
KINKS = {
    "penalty": (True, True),
    "softplus_clamp": (True, False),
    "softplus_penetration": (False, True),
    "softplus_both": (False, False),
}


@pytest.mark.parametrize("name", sorted(CL.CONTACT_LAWS))
def test_each_law_smooths_the_boundary_it_claims(name):
    law = CL.get_contact_law(name)
    onset_kink, clamp_kink = KINKS[name]
    # contact onset: slope in phi at phi = 0 (phi_dot = 0)
    left, right = _one_sided_slopes(lambda ph: float(law(ph, 0.0, LAW_PARAMS)), 0.0)
    assert (abs(left - right) > 0.5 * K) == onset_kink, (left, right)
    # force clamp: at phi = -0.01, k d + c d_dot = 0 when phi_dot = k * 0.01 / c = 1 (separating fast);
    # the slope in phi_dot there jumps from -c to 0 when the clamp is hard.
    phi0 = jnp.array(-0.01)
    zero_dot = K * 0.01 / CD if name in ("penalty", "softplus_clamp") else None
    if zero_dot is None:  # smoothed penetration: find the phi_dot where the inner force is zero
        d = np.log1p(np.exp(-LAW_PARAMS.gap_beta * -0.01)) / LAW_PARAMS.gap_beta
        zero_dot = K * d / (CD / (1 + np.exp(LAW_PARAMS.gap_beta * -0.01)))
    left, right = _one_sided_slopes(lambda pd: float(law(phi0, pd, LAW_PARAMS)), zero_dot, eps=1e-6)
    assert (abs(left - right) > 0.5 * CD) == clamp_kink, (left, right)


def test_contact_law_table_wires_the_formulas():
    phi, phi_dot = jnp.array([-0.02, 0.01]), jnp.array([0.1, -0.2])
    p = LAW_PARAMS
    expected = {
        "penalty": CL.penalty_force(phi, phi_dot, p.stiffness, p.damping),
        "softplus_clamp": CL.softplus_clamp_force(phi, phi_dot, p.stiffness, p.damping, p.force_beta),
        "softplus_penetration": CL.softplus_penetration_force(phi, phi_dot, p.stiffness, p.damping, p.gap_beta),
        "softplus_both": CL.smooth_contact_force(phi, phi_dot, p.stiffness, p.damping, p.force_beta, p.gap_beta),
    }
    assert set(CL.CONTACT_LAWS) == set(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(CL.get_contact_law(name)(phi, phi_dot, p), value)


# ------------------------------------------------------------------------------------------------
# relaxed complementarity


def test_relaxed_complementarity_closed_form_derivative_and_limit():
    big = CL.relaxed_complementarity(jnp.array([-1e8, 1e8]), 1e-2)  # no cancellation on either side
    np.testing.assert_allclose(big, [1e8, 1e-10], rtol=1e-12)
    q = jnp.linspace(-3.0, 3.0, 61)
    value_and_slope = jax.jit(jax.vmap(jax.value_and_grad(CL.relaxed_complementarity), (0, None)))
    for kappa in (1e-1, 1e-3, 1e-8):
        y, g = value_and_slope(q, kappa)
        assert bool(jnp.all(y > 0)) and bool(jnp.all(y + q > 0))
        np.testing.assert_allclose(y * (y + q), kappa, rtol=1e-6)
        np.testing.assert_allclose(g, -y / (2 * y + q), rtol=1e-12)
        # kappa -> 0: max(0, -q), never further than sqrt(kappa) (reached at q = 0)
        gap = y - jnp.maximum(0.0, -q)
        assert bool(jnp.all(gap >= 0)) and float(jnp.max(gap)) == pytest.approx(np.sqrt(kappa), rel=1e-9)
    # far from q = 0 the error is kappa / |q| (first order in kappa); the slope at q = 0 is -1/2 for any kappa
    y, g = value_and_slope(jnp.array([-2.0, 2.0, 0.0]), 1e-6)
    np.testing.assert_allclose(y - jnp.array([2.0, 0.0, 0.0]), [1e-6 / 2, 1e-6 / 2, 1e-3], rtol=1e-5)
    assert float(g[2]) == pytest.approx(-0.5)


# ------------------------------------------------------------------------------------------------
# complementarity solver: closed forms, IFT vs unrolled vs central differences


def _problem():
    """3 contacts, W = J J^T SPD; solution modes (slide, stick, separate) far from boundaries."""
    J = np.eye(6) + 0.3 * np.random.default_rng(3).standard_normal((6, 6))
    w0 = np.random.default_rng(3).standard_normal(6)
    return jnp.asarray(J @ J.T), jnp.asarray(w0), jnp.array([0.3, 0.8, 0.5])


def unrolled_pgs(W, w0, mu, iterations):
    """Independent plain projected Gauss-Seidel (hard, unregularised), differentiated straight through."""
    nc = mu.shape[0]

    def sweep(_, z):
        for i in range(nc):
            z = z.at[i].set(jnp.maximum(0.0, z[i] - (W[i] @ z + w0[i]) / W[i, i]))
            j = nc + i
            b = mu[i] * z[i]
            z = z.at[j].set(jnp.clip(z[j] - (W[j] @ z + w0[j]) / W[j, j], -b, b))
        return z

    return jax.lax.fori_loop(0, iterations, sweep, jnp.zeros_like(w0))


def _z(sol):
    return jnp.concatenate([sol.normal, sol.tangent])


def test_single_contact_closed_form_and_modes():
    m, h, g, mu = 2.0, 0.01, 9.81, 0.4
    W = jnp.eye(2) / m
    for vt, mode in ((0.01, 1), (3.0, 2), (-3.0, 2)):
        w0 = jnp.array([-g * h, vt])  # resting on the ground under gravity, tangential speed vt
        sol = CC.solve_contact(W, w0, jnp.array([mu]), regularization=0.0)
        assert float(sol.normal[0]) == pytest.approx(m * g * h, rel=1e-14)
        assert float(sol.tangent[0]) == pytest.approx(np.clip(-m * vt, -mu * m * g * h, mu * m * g * h), rel=1e-14)
        assert int(sol.mode[0]) == mode and float(sol.residual[0]) < 1e-15
    sol = CC.solve_contact(W, jnp.array([0.5, 1.0]), jnp.array([mu]))
    assert int(sol.mode[0]) == 0 and float(sol.normal[0]) == 0.0 and float(sol.tangent[0]) == 0.0


def test_relaxed_solver_matches_scalar_formula_and_tends_to_hard():
    # one frictionless normal row: p (W p + q) = kappa  <=>  W p = relaxed_complementarity(q, kappa W)
    w_nn, q = 0.5, -0.2
    W = jnp.diag(jnp.array([w_nn, 1.0]))
    for kappa in (1e-2, 1e-4):
        sol = CC.solve_contact(W, jnp.array([q, 0.0]), jnp.array([0.0]), kappa, regularization=0.0)
        assert float(sol.normal[0]) == pytest.approx(
            float(CL.relaxed_complementarity(q, kappa * w_nn)) / w_nn, rel=1e-12
        )
        assert float(sol.normal[0] * sol.normal_velocity[0]) == pytest.approx(kappa, rel=1e-10)
    W, w0, mu = _problem()
    hard = _z(CC.solve_contact(W, w0, mu, iterations=300, regularization=0.0))
    errors = []
    for kappa in (1e-2, 1e-4, 1e-6, 1e-8):
        relaxed = CC.solve_contact(W, w0, mu, kappa, iterations=300, regularization=0.0)
        errors.append(float(jnp.max(jnp.abs(_z(relaxed) - hard))))
        assert float(jnp.max(relaxed.residual)) < 10 * np.sqrt(kappa)
    # away from degenerate contacts the relaxation error is first order in kappa
    assert errors[-1] < 1e-7 and all(b < 0.02 * a for a, b in zip(errors, errors[1:]))


ITERATIONS = 100  # PGS reaches the solution of _problem() to round-off in 80 sweeps


@jax.jit
def _implicit(w0, mu, W, kappa):
    return _z(CC.solve_contact(W, w0, mu, kappa, iterations=ITERATIONS, regularization=0.0))


def test_ift_gradient_equals_unrolled_and_central_differences():
    W, w0, mu = _problem()
    jac_rev = jax.jit(jax.jacrev(_implicit, argnums=(0, 1, 2)))
    jac_fwd = jax.jit(jax.jacfwd(_implicit, argnums=(0, 1, 2)))
    fn = _implicit
    for kappa in (0.0, 1e-3):
        sol = CC.solve_contact(W, w0, mu, kappa, iterations=ITERATIONS, regularization=0.0)
        assert [int(m) for m in sol.mode] == [2, 1, 0] and float(jnp.max(sol.residual)) < 1e-12 + 10 * np.sqrt(kappa)
        jac_ift = jac_rev(w0, mu, W, kappa)
        for a, b in zip(jac_ift, jac_fwd(w0, mu, W, kappa)):  # reverse mode transposes the same IFT rule
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        if kappa == 0.0:  # AD straight through every sweep of the test's own solver, written independently
            jac_test = jax.jit(jax.jacrev(lambda *a: unrolled_pgs(a[2], a[0], a[1], ITERATIONS), argnums=(0, 1, 2)))(
                w0, mu, W
            )
            for a, c in zip(jac_ift, jac_test):
                np.testing.assert_allclose(a, c, rtol=1e-8, atol=1e-10)
        # central differences (eps = 1e-6) along every coordinate of w0 and mu, and one random direction of W
        eps = 1e-6
        for arg, size in ((0, 6), (1, 3)):
            for k in range(size):
                args_p, args_m = [w0, mu, W], [w0, mu, W]
                args_p[arg] = args_p[arg].at[k].add(eps)
                args_m[arg] = args_m[arg].at[k].add(-eps)
                fd = (fn(*args_p, kappa) - fn(*args_m, kappa)) / (2 * eps)
                assert float(jnp.max(relative_error(jac_ift[arg][:, k], fd))) < 1e-7, (kappa, arg, k)
        v = jnp.asarray(np.random.default_rng(0).standard_normal(W.shape))
        fd = (fn(w0, mu, W + eps * v, kappa) - fn(w0, mu, W - eps * v, kappa)) / (2 * eps)
        assert float(jnp.max(relative_error(jnp.tensordot(jac_ift[2], v, 2), fd))) < 1e-7


def test_gradient_is_nan_free_at_and_near_contact():
    """phi exactly 0, slightly positive and negative; at rest (degenerate: zero force, zero velocity) and pressed."""
    h = 0.01
    M = jnp.eye(2)
    Jn, Jt = jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 0.0]])

    def loss(state, gravity, kappa, gradient):
        q, v = state[:2], state[2:]
        f = jnp.stack([0.0, -gravity])
        v_next, sol = CC.complementarity_step(v, M, f, Jn, Jt, q[1:2], jnp.array([0.5]), h, kappa, gradient=gradient)
        return jnp.sum(q + h * v_next) + jnp.sum(v_next) + jnp.sum(sol.normal) + jnp.sum(sol.tangent)

    grads = {
        mode: jax.jit(jax.vmap(jax.grad(partial(loss, gradient=mode), argnums=(0, 1, 2)))) for mode in ("implicit",)
    }
    cases = [
        (phi, *vel, gravity, kappa)
        for phi in (0.0, 1e-12, -1e-12, 1e-6, -1e-6)
        for vel in ((0.0, 0.0), (0.3, 0.0), (0.0, -1e-9))
        for gravity in (0.0, 9.81)
        for kappa in (0.0, 1e-6)
    ]
    table = jnp.array(cases)
    states = jnp.concatenate([jnp.zeros((len(cases), 1)), table[:, :3]], axis=1)
    for mode, grad in grads.items():
        g = grad(states, table[:, 3], table[:, 4])
        for leaf in g:
            bad = ~np.all(np.isfinite(np.asarray(leaf).reshape(len(cases), -1)), axis=1)
            assert not bad.any(), (mode, [cases[i] for i in np.flatnonzero(bad)])

    # the soft laws, the impact step and the relaxed LCP at their boundaries
    @jax.jit
    def boundary_grads(points, balls):
        laws = {
            name: jax.vmap(jax.grad(lambda a, law=law: law(a[0], a[1], LAW_PARAMS)))(points)
            for name, law in CL.CONTACT_LAWS.items()
        }
        impact = jax.vmap(jax.jacrev(lambda b: CI.impact_step(b, 0.01, 9.81, 0.7)[0]))(balls)
        relaxed = jax.grad(lambda q: CL.relaxed_complementarity(q, 1e-12))(0.0)
        return laws, impact, relaxed

    points = jnp.array([[0.0, 0.0], [1e-12, 0.0], [-1e-12, 0.0], [0.0, 1e-9], [0.0, -1e-9]])
    balls = jnp.array([(0.0, 0.0), (0.0, -1.0), (0.0, 0.3), (1e-12, 0.0), (0.5 * 9.81 * 0.01**2, 0.0)])
    laws, impact, relaxed = boundary_grads(points, balls)
    for name, g in laws.items():
        assert np.all(np.isfinite(g)), name
    assert np.all(np.isfinite(impact)) and np.isfinite(float(relaxed))


def test_redundant_contacts_give_finite_gradients():
    """Box pushed into the corner: wall normal and floor friction act along x, their split is not unique."""
    p = CS.BoxWallParams()
    step = CS.box_wall_step(0.01, with_record=True)
    x = jnp.array([p.wall_position - p.half_width, p.half_height, 0.0, 0.0])
    u = jnp.array([2.0, 0.0])  # pushes into the wall, less than the floor friction could hold alone
    x_next, rec = step(x, u, p)
    np.testing.assert_allclose(x_next, x, atol=1e-6)  # up to the solver's 1e-6 regularisation
    assert [int(m) for m in rec.mode] == [1, 2]  # floor sticks, frictionless wall "slides"
    jac = jax.jit(jax.jacrev(lambda x_, u_: step(x_, u_, p)[0], argnums=(0, 1)))(x, u)
    assert all(np.all(np.isfinite(j)) for j in jac)


# ------------------------------------------------------------------------------------------------
# hard impact: the impact time inside the step


def exact_flow(y0, v0, t, g, e):
    """Analytic ball flow over [0, t] with exactly one impact (test-only, written independently)."""
    t_hit = (v0 + np.sqrt(v0**2 + 2 * g * y0)) / g
    v_up = e * np.sqrt(v0**2 + 2 * g * y0)
    tau = t - t_hit
    return np.array([v_up * tau - 0.5 * g * tau**2, v_up - g * tau])


def test_impact_inside_the_step_has_position_derivative_minus_e():
    e, h = 0.6, 0.1
    x = jnp.array([0.03, -1.0])  # hits the ground at t* = 0.03 < h, no gravity
    x_next, mode = CI.impact_step(x, h, 0.0, e)
    assert int(mode) == 1
    np.testing.assert_allclose(x_next, [e * 1.0 * (h - 0.03), e * 1.0], rtol=1e-14)
    jac = jax.jacfwd(lambda s: CI.impact_step(s, h, 0.0, e)[0])(x)
    np.testing.assert_allclose(jac, [[-e, -e * h], [0.0, -e]], atol=1e-14)
    # the naive "step, then flip the velocity" variant: d y+/d y = +1, the sign is wrong
    naive_next, naive_mode = CI.naive_impact_step(x, h, 0.0, e)
    assert int(naive_mode) == 1 and float(naive_next[0]) < 0  # and it is left below the ground
    naive_jac = jax.jacfwd(lambda s: CI.naive_impact_step(s, h, 0.0, e)[0])(x)
    np.testing.assert_allclose(naive_jac, [[1.0, h], [0.0, -e]], atol=1e-14)
    assert float(naive_jac[0, 0]) - float(jac[0, 0]) == pytest.approx(1 + e)


def test_impact_step_is_the_exact_flow_with_gravity():
    g, e, h = 9.81, 0.8, 0.05
    x = np.array([0.01, -0.7])
    x_next, mode = CI.impact_step(jnp.asarray(x), h, g, e)
    assert int(mode) == 1
    np.testing.assert_allclose(x_next, exact_flow(*x, h, g, e), rtol=1e-12)
    jac = jax.jacfwd(lambda s: CI.impact_step(s, h, g, e)[0])(jnp.asarray(x))
    eps = 1e-6
    columns = [
        (exact_flow(*(x + eps * d), h, g, e) - exact_flow(*(x - eps * d), h, g, e)) / (2 * eps) for d in np.eye(2)
    ]
    fd = np.stack(columns, 1)
    np.testing.assert_allclose(jac, fd, rtol=1e-7, atol=1e-9)
    # the chapter's formula: d y+/d y = -e + (1 + e) g tau / |v-|
    v_minus = np.sqrt(x[1] ** 2 + 2 * g * x[0])
    tau = h - (x[1] + v_minus) / g
    assert float(jac[0, 0]) == pytest.approx(-e + (1 + e) * g * tau / v_minus, rel=1e-12)
    naive_jac = jax.jacfwd(lambda s: CI.naive_impact_step(s, h, g, e)[0])(jnp.asarray(x))
    assert abs(float(naive_jac[0, 0]) - fd[0, 0]) > 1.0


def test_hard_ball_energy_is_kept_in_flight_and_scaled_by_e_squared_at_impacts():
    for e in (1.0, 0.8):
        p = CS.HardBallParams(restitution=e)
        step = CS.hard_ball_step(0.01, with_record=True)
        xs, rec = CS.rollout_with_record(step, jnp.array([1.0, 0.0]), jnp.zeros((600, 1)), p)
        assert bool(jnp.all(jnp.isfinite(xs))) and float(jnp.min(xs[:, 0])) >= 0.0
        energy = jax.vmap(CS.hard_ball_energy, (0, None))(xs, p)
        ratio = np.asarray(energy[1:] / jnp.maximum(energy[:-1], 1e-300))
        in_contact = np.asarray(rec.mode[:, 0]) == 1
        rest = np.asarray(xs[1:, 0] == 0) & np.asarray(xs[1:, 1] == 0)
        flight = ~in_contact
        np.testing.assert_allclose(ratio[flight], 1.0, rtol=1e-9)
        np.testing.assert_allclose(ratio[in_contact & ~rest], e**2, rtol=1e-9)
        assert in_contact.sum() >= 3
        if e < 1:
            assert rest[-1] and float(energy[-1]) == 0.0  # Zeno bounces end at rest
        else:
            assert not rest.any()


# ------------------------------------------------------------------------------------------------
# sliding block: stopping distance and its mu-derivative


def test_sliding_block_stopping_distance_and_mu_derivative():
    h, v0, g = 1e-3, 2.0, 9.81
    step = CS.sliding_block_step(h)
    us = jnp.zeros((450, 1))  # v0 / (mu g h) = 408 steps to stop

    @jax.jit
    def distance(mu):
        p = CS.SlidingBlockParams(friction=mu, gravity=g)

        def body(x, u):
            return step(x, u, p), None

        x_final, _ = jax.lax.scan(body, jnp.array([0.0, 0.0, v0, 0.0]), us)
        return x_final[0], x_final[2]

    mu = 0.5
    d, v_final = distance(mu)
    grad = jax.jit(jax.grad(lambda m: distance(m)[0]))(mu)
    exact = v0**2 / (2 * mu * g)
    exact_grad = -(v0**2) / (2 * mu**2 * g)
    # semi-implicit Euler loses at most one step of travel; the derivative's relative error is ~ 1/K,
    # K = v0 / (mu g h) the number of sliding steps
    assert abs(float(v_final)) < 1e-12
    assert abs(float(d) - exact) <= h * v0
    assert abs(float(grad) - exact_grad) <= 2 * (mu * g * h / v0) * abs(exact_grad)
    # and the discrete map's own derivative, checked by central differences
    eps = 1e-7
    fd = (distance(mu + eps)[0] - distance(mu - eps)[0]) / (2 * eps)
    assert float(grad) == pytest.approx(float(fd), rel=1e-6)


def test_sliding_block_records_slide_then_stick():
    step = CS.sliding_block_step(1e-3, with_record=True)
    p = CS.SlidingBlockParams()
    xs, rec = CS.rollout_with_record(step, jnp.array([0.0, 0.0, 1.0, 0.0]), jnp.zeros((300, 1)), p)
    modes = np.asarray(rec.mode[:, 0])
    k_stop = int(np.argmax(modes == 1))
    assert k_stop > 100 and np.all(modes[:k_stop] == 2) and np.all(modes[k_stop:] == 1)
    np.testing.assert_allclose(rec.normal_force[:, 0], p.mass * p.gravity, rtol=1e-5)
    np.testing.assert_allclose(rec.tangential_force[:k_stop, 0], -p.friction * rec.normal_force[:k_stop, 0], rtol=1e-12)
    assert float(jnp.max(rec.residual)) < 1e-12


# ------------------------------------------------------------------------------------------------
# systems run for a few hundred steps


@pytest.mark.parametrize("name", sorted(CS.CONTACT_SYSTEMS))
def test_each_contact_system_runs_without_nan(name):
    s = CS.get_contact_system(name)
    step = s.make_step(s.h, with_record=True)
    us = jnp.zeros((300, s.nu))
    if name == "box_wall":
        us = us.at[:, 0].set(8.0)  # push towards the wall, harder than floor friction (4.9 N) holds
    xs, rec = jax.jit(lambda x0: CS.rollout_with_record(step, x0, us, s.params))(jnp.asarray(s.x0, float))
    assert xs.shape == (301, s.nx) and rec.mode.shape == (300, s.nc)
    assert bool(jnp.all(jnp.isfinite(xs))) and all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in rec[1:])
    assert set(np.unique(np.asarray(rec.mode))) <= {0, 1, 2}
    energy = jax.vmap(s.energy, (0, None))(xs, s.params)
    assert bool(jnp.all(jnp.isfinite(energy)))
    if name in ("sliding_block", "box_wall", "hard_ball"):
        assert float(jnp.max(rec.penetration)) < 1e-6  # hard contact does not penetrate
    if name == "box_wall":
        assert int(rec.mode[-1, 1]) != 0  # it ends pressed against the wall
        assert float(xs[-1, 0]) == pytest.approx(s.params.wall_position - s.params.half_width, abs=1e-6)
    if name == "hopper":
        assert bool(jnp.any(rec.mode[:, 0] > 0)) and float(jnp.min(xs[:, 1] - xs[:, 3])) > 0.2  # lands, leg holds


def test_soft_ball_works_with_every_law_and_integrator():
    for law in CL.CONTACT_LAWS:
        f = CS.soft_ball(law)
        xdot = f(jnp.array([-0.01, 0.0]), jnp.zeros(1), CS.SoftBallParams())
        assert float(xdot[1]) > 0  # pushed back up
    step = CS.soft_ball_step(1e-3, "softplus_both", "rk4")
    x = step(jnp.array([0.0, -1.0]), jnp.zeros(1), CS.SoftBallParams())
    assert x.shape == (2,) and bool(jnp.all(jnp.isfinite(x)))


# ------------------------------------------------------------------------------------------------
# bad input


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="penalty_force: stiffness must be non-negative"):
        CL.penalty_force(0.0, 0.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="penalty_force: damping must be non-negative"):
        CL.penalty_force(0.0, 0.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="softplus_clamp_force: beta must be positive"):
        CL.softplus_clamp_force(0.0, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="smooth_contact_force: gap_beta must be positive"):
        CL.smooth_contact_force(0.0, 0.0, 1.0, 1.0, 1.0, -2.0)
    with pytest.raises(ValueError, match="softplus: beta must be positive"):
        CL.softplus(1.0, -1.0)
    with pytest.raises(ValueError, match="sigmoid_step: alpha must be positive"):
        CL.sigmoid_step(1.0, 0.0)
    with pytest.raises(ValueError, match="relaxed_complementarity: kappa must be positive"):
        CL.relaxed_complementarity(1.0, 0.0)
    with pytest.raises(ValueError, match="solve_contact: kappa must be non-negative"):
        CC.solve_contact(jnp.eye(2), jnp.zeros(2), jnp.array([0.5]), -1e-3)
    with pytest.raises(ValueError, match="solve_contact: friction coefficient mu must be non-negative"):
        CC.solve_contact(jnp.eye(2), jnp.zeros(2), jnp.array([-0.5]))
    with pytest.raises(ValueError, match=r"solve_contact: W must have shape \(2, 2\)"):
        CC.solve_contact(jnp.eye(3), jnp.zeros(2), jnp.array([0.5]))
    with pytest.raises(ValueError, match=r"impact_step: restitution e must be in \[0, 1\]"):
        CI.impact_step(jnp.array([1.0, 0.0]), 0.01, 9.81, 1.5)
    with pytest.raises(ValueError, match=r"hard_ball_step: restitution|impact_step: restitution e must be in \[0, 1\]"):
        CS.hard_ball_step(0.01)(jnp.array([1.0, 0.0]), jnp.zeros(1), CS.HardBallParams(restitution=-0.1))
    with pytest.raises(ValueError, match="sliding_block_step: friction coefficient mu must be non-negative"):
        CS.sliding_block_step(0.01)(jnp.zeros(4), jnp.zeros(1), CS.SlidingBlockParams(friction=-0.1))
    with pytest.raises(ValueError, match="step size h must be a positive finite scalar"):
        CS.sliding_block_step(0.0)
    with pytest.raises(ValueError, match=r"soft_ball: state x must have shape \(2,\)"):
        CS.soft_ball()(jnp.zeros(3), jnp.zeros(1), CS.SoftBallParams())
    with pytest.raises(
        KeyError, match=r"unknown contact law 'hertz'; valid names: penalty, softplus_both, softplus_clamp"
    ):
        CL.get_contact_law("hertz")
    with pytest.raises(KeyError, match="unknown contact law 'hertz'"):
        CS.hopper("hertz")
    with pytest.raises(KeyError, match="unknown contact gradient mode 'magic'; valid names: implicit, unrolled"):
        CC.solve_contact(jnp.eye(2), jnp.zeros(2), jnp.array([0.5]), gradient="magic")
    with pytest.raises(KeyError, match="unknown contact system 'quadruped'; valid names: box_wall"):
        CS.get_contact_system("quadruped")


# ------------------------------------------------------------------------------------------------
# every public function under jit, vmap and grad

W3, W0_3, MU3 = _problem()
H = 0.05


def _solver_case(kappa, gradient):
    def fn(z):
        w0 = W0_3 + 0.01 * jnp.resize(z, (6,))
        return CC.solve_contact(W3, w0, MU3 * (1 + 0.1 * z[0]), kappa, iterations=60, gradient=gradient)

    return fn


def _step_case(z):
    v = jnp.array([0.3, -0.2]) + 0.1 * z[:2]
    f = jnp.array([0.0, -9.81]) + z[2:4]
    Jn, Jt = jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 0.0]])
    return CC.complementarity_step(v, jnp.eye(2), f, Jn, Jt, jnp.array([0.001 * z[2]]), jnp.array([0.5]), H)


def _ball_state(z):
    return jnp.array([0.02 + 0.01 * z[0], -1.0 + 0.1 * z[1]])  # hits within H in every sample


SYSTEM_INPUTS = {
    "hard_ball_step": lambda z: (_ball_state(z), z[2:3], CS.HardBallParams()),
    "soft_ball_step": lambda z: (jnp.array([-0.01 * (1.5 + z[0]), z[1]]), z[2:3], CS.SoftBallParams()),
    "sliding_block_step": lambda z: (jnp.array([z[0], 0.0, 1.0 + z[1], 0.0]), z[2:3], CS.SlidingBlockParams()),
    "box_wall_step": lambda z: (jnp.array([0.5 + 0.1 * z[0], 0.1, 1.0 + z[1], -0.5]), z[2:4], CS.BoxWallParams()),
    "hopper_step": lambda z: (
        jnp.array([0.0, 0.45, 0.0, -0.005 * (1.5 + z[0]), z[1], -0.3, 0.2 * z[2], -0.2]),
        z[2:4],
        CS.HopperParams(),
    ),
}


def _system_case(name, h):
    factory = getattr(CS, name)

    def fn(z):
        x, u, p = SYSTEM_INPUTS[name](z)
        return factory(h, with_record=True)(x, u, p)

    return fn


def _dynamics_case(name, law):
    def fn(z):
        x, u, p = SYSTEM_INPUTS[f"{name}_step"](z)
        return getattr(CS, name)(law)(x, u, p)

    return fn


def _energy_case(name, step_name):
    def fn(z):
        x, _, p = SYSTEM_INPUTS[step_name](z)
        return getattr(CS, name)(x, p)

    return fn


LP = CL.ContactParams(100.0, 2.0, 5.0, 20.0)
CASES = {
    "softplus": lambda z: CL.softplus(z, 3.0),
    "heaviside_step": CL.heaviside_step,
    "sigmoid_step": lambda z: CL.sigmoid_step(z, 5.0),
    "relaxed_complementarity": lambda z: CL.relaxed_complementarity(z, 0.1),
    "penalty_force": lambda z: CL.penalty_force(z[0] - 0.5, z[1], 100.0, 2.0),
    "softplus_clamp_force": lambda z: CL.softplus_clamp_force(z[0] - 0.5, z[1], 100.0, 2.0, 5.0),
    "softplus_penetration_force": lambda z: CL.softplus_penetration_force(z[0] - 0.5, z[1], 100.0, 2.0, 20.0),
    "smooth_contact_force": lambda z: CL.smooth_contact_force(z[0] - 0.5, z[1], 100.0, 2.0, 5.0, 20.0),
    **{f"get_contact_law:{n}": (lambda z, n=n: CL.get_contact_law(n)(z[0] - 0.5, z[1], LP)) for n in CL.CONTACT_LAWS},
    "solve_contact:implicit": _solver_case(0.0, "implicit"),
    "solve_contact:unrolled": _solver_case(0.0, "unrolled"),
    "complementarity_step": _step_case,
    "impact_step": lambda z: CI.impact_step(_ball_state(z), H, 9.81 + z[2], 0.7),
    "naive_impact_step": lambda z: CI.naive_impact_step(_ball_state(z), H, 9.81 + z[2], 0.7),
    **{
        name: _system_case(name, 1e-3 if name in ("soft_ball_step", "hopper_step") else H)
        for name in ("hard_ball_step", "soft_ball_step", "sliding_block_step", "box_wall_step", "hopper_step")
    },
    **{f"soft_ball:{n}": _dynamics_case("soft_ball", n) for n in CL.CONTACT_LAWS},
    "hopper": _dynamics_case("hopper", "softplus_both"),
    "hard_ball_energy": _energy_case("hard_ball_energy", "hard_ball_step"),
    "soft_ball_energy": _energy_case("soft_ball_energy", "soft_ball_step"),
    "sliding_block_energy": _energy_case("sliding_block_energy", "sliding_block_step"),
    "box_wall_energy": _energy_case("box_wall_energy", "box_wall_step"),
    "hopper_energy": _energy_case("hopper_energy", "hopper_step"),
    "rollout_with_record": lambda z: CS.rollout_with_record(
        CS.hard_ball_step(H, with_record=True), _ball_state(z), jnp.ones((4, 1)) * z[2], CS.HardBallParams()
    ),
    "get_contact_system": lambda z: CS.get_contact_system("soft_ball").make_step(1e-3)(
        *SYSTEM_INPUTS["soft_ball_step"](z)
    ),
}


def _public_functions(module):
    return {
        n
        for n, obj in vars(module).items()
        if not n.startswith("_") and inspect.isfunction(obj) and obj.__module__ == module.__name__
    }


def test_every_public_function_is_covered():
    covered = {name.split(":")[0] for name in CASES}
    modules = (CL, CC, CI, CS)
    assert set().union(*(_public_functions(m) for m in modules)) - covered == set()


Z = jnp.array([0.3, -0.4, 0.9, 0.2])


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad(name):
    check_transforms(CASES[name], Z)
