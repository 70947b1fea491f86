"""Every public function of course_lib works under jit, vmap and (where it is differentiable) grad.

Each case maps one array ``z`` to a pytree of arrays through a public function, checked by the shared
harness (tests/transform_checks.py) that the module tests use too. The test also fails when a new
public name is neither covered here, nor by a module test, nor listed as host-side.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import course_lib as cl
from transform_checks import check_transforms

P = cl.PendulumParams()
STEP = cl.rk4(cl.pendulum, 0.05)
US = 0.2 * jnp.ones((6, 1))


def stage(x, u, p):
    return jnp.sum(x**2) + 0.1 * jnp.sum(u**2)


def terminal(x, p):
    return 3.0 * jnp.sum(x**2)


def _system_case(system):
    def fn(z):
        x = jnp.resize(z, (system.nx,))
        return system.dynamics(x, jnp.resize(z[::-1], (system.nu,)), system.params)

    return fn


def _integrator_case(name):
    step = cl.make_integrator(name, cl.pendulum, 0.05)
    return lambda z: step(z[:2], z[2:3], P)


def _loss(th):
    return jnp.sum(jnp.sin(th) ** 2)


def _check_case(z):
    return cl.directional_check(_loss, z, jax.grad(_loss)(z), eps_list=(1e-3, 1e-5))


def _as(z):
    return jnp.tile(jnp.array([[1.0, 0.1], [0.0, 1.0]]), (5, 1, 1)) * (1 + 0.1 * z[0]) + 0.01 * z[1]


CASES = {
    **{f"system:{name}": (_system_case(s), True) for name, s in cl.SYSTEMS.items()},
    **{f"integrator:{name}": (_integrator_case(name), True) for name in cl.INTEGRATORS},
    "rollout": (lambda z: cl.rollout(STEP, z[:2], US * z[2], P), True),
    **{
        f"rollout_cost:{mode}": (
            lambda z, m=mode: cl.rollout_cost(STEP, z[:2], US * z[2], P, stage, terminal, gradient=m, segment_length=4),
            True,
        )
        for mode in cl.GRADIENT_MODES
    },
    "adjoint_gradients": (lambda z: cl.adjoint_gradients(STEP, z[:2], US * z[2], P, stage, terminal), True),
    "linearize": (lambda z: cl.linearize(STEP, z[:2], z[2:3], P), True),
    "linearize_trajectory": (lambda z: cl.linearize_trajectory(STEP, jnp.tile(z[:2], (7, 1)), US * z[2], P), True),
    "parameter_sensitivities": (lambda z: cl.parameter_sensitivities(STEP, z[:2], US * z[2], P), True),
    "solve_implicit": (
        lambda z: cl.solve_implicit(lambda y, a: y**3 + y - a, lambda a: a, 12, z[:2]),
        True,
    ),
    "relative_error": (lambda z: cl.relative_error(z[0], z[1]), True),
    "random_direction": (lambda z: cl.random_direction(z), False),
    "directional_check": (_check_case, False),
    "find_plateau": (lambda z: cl.find_plateau(_check_case(z)), False),
    "coordinate_check": (lambda z: cl.coordinate_check(_loss, z, jax.grad(_loss)(z)), False),
    "jacobian_check": (lambda z: cl.jacobian_check(jnp.sin, z), False),
    "step_spectral_norms": (lambda z: cl.step_spectral_norms(_as(z)), True),
    "product_log_singular_values": (lambda z: cl.product_log_singular_values(_as(z)), True),
    "gradient_norm_vs_horizon": (lambda z: cl.gradient_norm_vs_horizon(_as(z), jnp.ones((5, 2, 1)) * z[2]), True),
    "first_nonfinite_step": (lambda z: cl.first_nonfinite_step(jnp.outer(z, z)), False),
    "wall_gap": (lambda z: cl.wall_gap(z[:2], cl.WallParams()), True),
    "wall_cost": (lambda z: cl.wall_cost(z[:2], z[2:3], cl.WallParams()), True),
    # a planted bug breaks the gradient on purpose (tests/test_planted_bugs.py): grad is checked on the clean one
    **{
        f"cart_pole_with_bug:{bug}": (lambda z, b=bug: cl.cart_pole_with_bug(b, 0.02)(z, 3.0 * z[:1]), bug == "none")
        for bug in cl.PLANTED_BUGS
    },
}

# Public names that configure or describe rather than compute on arrays.
HOST_SIDE = {
    "enable_float64",
    "get_contact_law",
    "get_contact_system",
    "make_integrator",
    "get_system",
    "checkpoint_plan",
    "default_tolerance",
    "explicit_euler",
    "semi_implicit_euler",
    "explicit_midpoint",
    "rk4",
    "implicit_euler",
    "implicit_midpoint",
    "scalar_linear",
    "double_integrator",
    "pendulum",
    "cart_pole",
    "spring_damper",
    "two_mass_spring",
    "lipm",
    "friction_block",
}


# Public functions whose jit/vmap/grad tests live in their module's own test file
# (they compile whole training loops; repeating them here would only cost CI time).
COVERED_IN_MODULE_TESTS = {
    "test_estimators.py": {
        "gradient_samples",
        "fobg",
        "zobg",
        "aobg",
        "adaptive_alpha",
        "adaptive_aobg",
        "ivw_aobg",
        "confidence_width",
    },
    "test_sysid.py": {"sysid_loss", "fit_parameters", "identifiability", "multisine", "friction_balance_force"},
    "test_shac.py": {
        "wall_dynamics",
        "wall_task",
        "init_mlp",
        "mlp_policy",
        "quadratic_features",
        "critic_value",
        "fit_critic",
        "lambda_returns",
        "short_horizon_loss",
        "episode_cost",
        "shac_train",
    },
    "test_health.py": {"health_record", "contact_summary", "stack_records", "first_nonfinite_record"},
    "test_trajopt.py": {"optimize_controls"},
    "test_contact.py": {
        "complementarity_step",
        "heaviside_step",
        "impact_step",
        "naive_impact_step",
        "penalty_force",
        "relaxed_complementarity",
        "sigmoid_step",
        "smooth_contact_force",
        "softplus",
        "softplus_clamp_force",
        "softplus_penetration_force",
        "solve_contact",
        "box_wall_energy",
        "box_wall_step",
        "hard_ball_energy",
        "hard_ball_step",
        "hopper",
        "hopper_energy",
        "hopper_step",
        "rollout_with_record",
        "sliding_block_energy",
        "sliding_block_step",
        "soft_ball",
        "soft_ball_energy",
        "soft_ball_step",
    },
}


def test_module_tests_exercise_transforms():
    here = Path(__file__).parent
    for filename, names in COVERED_IN_MODULE_TESTS.items():
        text = (here / filename).read_text()
        assert "check_transforms(" in text, f"{filename} does not use the shared harness"
        missing = [n for n in names if n not in text]
        assert not missing, f"{filename} never calls {missing}"


def test_every_public_function_is_covered():
    public = {n for n in dir(cl) if not n.startswith("_") and callable(getattr(cl, n)) and n[0].islower()}
    covered = {name.split(":")[0] for name in CASES} | HOST_SIDE | set().union(*COVERED_IN_MODULE_TESTS.values())
    assert public - covered == set()
    # factories and models are covered through the table entries
    assert {f"integrator:{n}" for n in cl.INTEGRATORS} <= set(CASES)


Z = jnp.array([0.3, -0.4, 0.9, 0.2])


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad(name):
    fn, differentiable = CASES[name]
    # finite differences inside fn amplify the rounding differences of fused (jit) arithmetic
    tol = 1e-12 if differentiable else 1e-8
    check_transforms(fn, Z, differentiable=differentiable, rtol=tol, atol=tol)
