"""Integrators: closed-form derivatives, the chapter's numbers, convergence order, FD and diffrax cross-checks."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import course_lib as cl

ZERO_U = jnp.zeros(1)


def amplification(name, h, a):
    """d x_{k+1} / d x_k of one step on xdot = a x, by AD."""
    step = cl.make_integrator(name, cl.scalar_linear, h)
    return float(jax.grad(lambda x: step(jnp.array([x]), ZERO_U, cl.ScalarLinearParams(a))[0])(1.0))


CLOSED_FORMS = {
    "explicit_euler": lambda z: 1 + z,
    "explicit_midpoint": lambda z: 1 + z + z**2 / 2,
    "rk4": lambda z: 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24,
    "implicit_euler": lambda z: 1 / (1 - z),
    "implicit_midpoint": lambda z: (1 + z / 2) / (1 - z / 2),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
@pytest.mark.parametrize("h,a", [(0.05, -50.0), (0.1, -1.0), (0.01, 3.0), (0.2, -7.5)])
def test_amplification_factor_matches_closed_form(name, h, a):
    assert amplification(name, h, a) == pytest.approx(CLOSED_FORMS[name](h * a), rel=1e-12)


@pytest.mark.parametrize(
    "name,B",
    [("explicit_euler", [0.0, 0.1]), ("semi_implicit_euler", [0.01, 0.1])],
)
def test_double_integrator_A_B(name, B):
    step = cl.make_integrator(name, cl.double_integrator, 0.1)
    lin = cl.linearize(step, jnp.array([0.3, -0.2]), jnp.array([0.7]), cl.DoubleIntegratorParams())
    np.testing.assert_allclose(lin.A, [[1.0, 0.1], [0.0, 1.0]], atol=1e-15)
    np.testing.assert_allclose(lin.B[:, 0], B, atol=1e-15)


def test_s04_1_5_double_integrator_gradient():
    """Seed S04.1.5: 20 zero accelerations, dt = 0.1, target 1: dL/du_i = -dt^2 (N - i), FD agrees."""
    n, dt = 20, 0.1
    step = cl.semi_implicit_euler(cl.double_integrator, dt)
    p = cl.DoubleIntegratorParams()

    def loss(us):
        return 0.5 * (cl.rollout(step, jnp.zeros(2), us, p)[-1, 0] - 1.0) ** 2

    us = jnp.zeros((n, 1))
    g = jax.grad(loss)(us)[:, 0]
    np.testing.assert_allclose(g[:5], [-0.2, -0.19, -0.18, -0.17, -0.16], rtol=1e-12)
    np.testing.assert_allclose(g, -(dt**2) * (n - np.arange(n)), rtol=1e-12)
    fd = cl.coordinate_check(lambda u: loss(u.reshape(n, 1)), us.ravel(), g, eps=1e-5)
    assert float(fd.max_rel_error) < 1e-9


def test_s04_3_8_stiff_example():
    """Seed S04.3.8: a = -50, h = 0.05, 20 steps: factors -1.5 and 1/3.5."""
    p, n = cl.ScalarLinearParams(-50.0), 20
    us = jnp.zeros((n, 1))
    for name, factor in [("explicit_euler", -1.5), ("implicit_euler", 1 / 3.5)]:
        step = cl.make_integrator(name, cl.scalar_linear, 0.05)
        x_n = cl.rollout(step, jnp.ones(1), us, p)[-1, 0]
        dxn_dx0 = jax.grad(lambda x0: cl.rollout(step, x0, us, p)[-1, 0])(jnp.ones(1))[0]
        assert float(x_n) == pytest.approx(factor**n, rel=1e-10)
        assert float(dxn_dx0) == pytest.approx(factor**n, rel=1e-10)
    assert (-1.5) ** 20 == pytest.approx(3325.2567, rel=1e-6)


@pytest.mark.parametrize("name", sorted(cl.INTEGRATORS))
def test_convergence_order(name):
    """Log-log slope of the global error at T = 1 on the damped, driven pendulum."""
    f, p = cl.pendulum, cl.PendulumParams()
    x0, torque, t_end = jnp.array([1.0, 0.0]), jnp.array([0.3]), 1.0

    def solve(step_name, h):
        n = int(round(t_end / h))
        step = cl.make_integrator(
            step_name, f, h, **({"newton_iterations": 20} if cl.INTEGRATORS[step_name].implicit else {})
        )
        return cl.rollout(step, x0, jnp.tile(torque, (n, 1)), p)[-1]

    reference = solve("rk4", 1e-3)
    hs = np.array([0.1, 0.05, 0.025, 0.0125])
    errors = np.array([float(jnp.linalg.norm(solve(name, h) - reference)) for h in hs])
    slope = np.polyfit(np.log(hs), np.log(errors), 1)[0]
    assert slope == pytest.approx(cl.INTEGRATORS[name].order, abs=0.25), errors


def _system_point(system, seed):
    """A reproducible state, input and parameter set away from singular points."""
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.uniform(-0.5, 0.5, system.nx))
    u = jnp.asarray(rng.uniform(-0.5, 0.5, system.nu))
    return x, u, system.params


def _cases():
    # every integrator on the pendulum in the fast tier; the other systems in the slow one (make test)
    for sys_name, system in cl.SYSTEMS.items():
        for name in cl.INTEGRATORS:
            if cl.INTEGRATORS[name].mechanical and system.nq is None:
                continue
            yield pytest.param(
                sys_name, name, marks=() if sys_name == "pendulum" else pytest.mark.slow, id=f"{sys_name}-{name}"
            )


@pytest.mark.parametrize("sys_name,name", sorted(_cases(), key=lambda case: case.id))
def test_gradient_matches_central_differences(sys_name, name):
    """Three steps, gradient w.r.t. (x0, u, p) checked along a random direction over an eps sweep."""
    system = cl.get_system(sys_name)
    step = cl.make_integrator(name, system.dynamics, 0.02)
    x, u, p = _system_point(system, seed=len(sys_name) + len(name))
    weights = jnp.linspace(1.0, 2.0, system.nx)

    # jitted: eagerly, every Newton iteration of the implicit steps is dispatched op by op (2.6x the CPU of
    # the whole check, measured on four implicit cases); that jit changes nothing is check_transforms' job
    @jax.jit
    def loss(theta):
        x_, u_, p_ = theta
        for _ in range(3):
            x_ = step(x_, u_, p_)
        return jnp.sum(weights * jnp.sin(x_) + x_**2)

    theta = (x, u, jax.tree_util.tree_map(jnp.asarray, p))
    check = cl.directional_check(loss, theta, jax.grad(loss)(theta))
    plateau = cl.find_plateau(check)
    assert bool(plateau.found), check.rows()
    assert float(plateau.best_error) < 1e-8, check.rows()


def test_semi_implicit_rejects_non_mechanical_state():
    step = cl.semi_implicit_euler(cl.scalar_linear, 0.1)
    with pytest.raises(ValueError, match="mechanical state"):
        step(jnp.ones(1), ZERO_U, cl.ScalarLinearParams())


@pytest.mark.parametrize(
    "ours,theirs",
    [("explicit_euler", diffrax.Euler()), ("explicit_midpoint", diffrax.Midpoint())],
)
@pytest.mark.slow  # diffrax, the independent implementation, compiles each case
def test_agrees_with_diffrax(ours, theirs):
    """An independent implementation: same fixed-step method, same trajectory and gradient."""
    p, h, n = cl.PendulumParams(), 0.01, 200
    x0 = jnp.array([1.2, -0.3])

    def ours_final(x0, gravity):
        step = cl.make_integrator(ours, cl.pendulum, h)
        return cl.rollout(step, x0, jnp.zeros((n, 1)), p._replace(gravity=gravity))[-1]

    def theirs_final(x0, gravity):
        term = diffrax.ODETerm(lambda t, y, args: cl.pendulum(y, ZERO_U, p._replace(gravity=args)))
        sol = diffrax.diffeqsolve(
            term,
            theirs,
            0.0,
            n * h,
            h,
            x0,
            args=gravity,
            stepsize_controller=diffrax.ConstantStepSize(),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=n + 1,
        )
        return sol.ys[-1]

    def final_and_jacobians(final):  # one compiled program per implementation: the state and both Jacobians
        return jax.jit(lambda x0, gravity: (final(x0, gravity), jax.jacrev(final, argnums=(0, 1))(x0, gravity)))

    (x_ours, g_ours), (x_theirs, g_theirs) = (final_and_jacobians(f)(x0, 9.81) for f in (ours_final, theirs_final))
    np.testing.assert_allclose(x_ours, x_theirs, rtol=1e-11, atol=1e-12)
    for argnum in (0, 1):
        np.testing.assert_allclose(g_ours[argnum], g_theirs[argnum], rtol=1e-9, atol=1e-11)


def test_implicit_midpoint_conserves_quadratic_energy():
    """Undamped linear springs: implicit midpoint keeps the energy to rounding; explicit Euler gains energy."""
    system = cl.get_system("two_mass_spring")
    p, x0, us = system.params._replace(k=100.0), jnp.array([0.1, -0.2, 0.0, 0.3]), jnp.zeros((500, 2))
    energy = jax.vmap(lambda x: system.energy(x, p))
    xs = cl.rollout(cl.implicit_midpoint(system.dynamics, 0.01), x0, us, p)
    np.testing.assert_allclose(energy(xs), energy(xs[:1])[0], rtol=1e-10)
    xs_explicit = cl.rollout(cl.explicit_euler(system.dynamics, 0.01), x0, us, p)
    assert float(energy(xs_explicit)[-1]) > 1.5 * float(energy(xs[:1])[0])


@pytest.mark.parametrize("sys_name", ["pendulum", "cart_pole", "spring_damper", "two_mass_spring", "double_integrator"])
def test_energy_function_is_conserved_without_damping_or_input(sys_name):
    """RK4 with a small step conserves each system's documented energy when it should."""
    system = cl.get_system(sys_name)
    p = system.params
    if "damping" in p._fields:
        p = p._replace(damping=0.0)
    x0 = jnp.asarray(np.linspace(0.2, -0.3, system.nx))
    xs = cl.rollout(cl.rk4(system.dynamics, 1e-3), x0, jnp.zeros((1000, system.nu)), p)
    e = jax.vmap(lambda x: system.energy(x, p))(xs)
    np.testing.assert_allclose(e, e[0], rtol=1e-9, atol=1e-12)
