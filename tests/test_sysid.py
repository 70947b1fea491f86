"""System identification of the friction block: recovery under rich excitation, non-identifiability under poor."""

import jax.numpy as jnp
import numpy as np
import pytest

from transform_checks import check_transforms
from course_lib.integrators import rk4
from course_lib.rollout import rollout
from course_lib.systems import FrictionBlockParams, friction_block
from course_lib.sysid import (
    FRICTION_FIELDS,
    fit_parameters,
    friction_balance_force,
    identifiability,
    multisine,
    sysid_loss,
)

TRUE = FrictionBlockParams()  # m = 1, b = 0.2, f_c = 0.5, v_s = 0.01
GUESS = FrictionBlockParams(mass=2.0, damping=0.5, coulomb=0.1)
DT = 0.01
N = 400
STEP = rk4(friction_block, DT)
X0 = jnp.zeros(2)
RICH = multisine(N, DT, [2.0, 1.0, 0.5], [1.3, 3.7, 8.1], [0.0, 1.0, 2.0])
XS_RICH = rollout(STEP, X0, RICH, TRUE)
V0 = 1.0
X0_CONST = jnp.array([0.0, V0])
POOR = jnp.full((N, 1), friction_balance_force(TRUE, V0))
XS_POOR = rollout(STEP, X0_CONST, POOR, TRUE)
# velocity errors weigh more than position errors, which integrate and dominate otherwise
WEIGHTS = jnp.array([0.1, 1.0])


def _theta(p):
    return np.array([float(getattr(p, f)) for f in FRICTION_FIELDS])


def test_rich_excitation_recovers_mass_damping_and_coulomb_within_one_percent():
    result = fit_parameters(STEP, X0, RICH, GUESS, XS_RICH, weights=WEIGHTS, learning_rate=0.1, n_iterations=500)
    np.testing.assert_allclose(_theta(result.params), _theta(TRUE), rtol=1e-2)
    assert float(result.params.v_smooth) == TRUE.v_smooth  # not fitted, untouched
    assert float(result.final_loss) < 1e-4 * float(result.loss[0])
    assert result.loss.shape == (500,) and result.history.shape == (500, 3) and result.grad_norm.shape == (500,)
    np.testing.assert_allclose(result.history[0], _theta(GUESS))
    assert np.all(np.asarray(result.history) > 0)


def test_rich_excitation_is_identifiable():
    report = identifiability(STEP, X0, RICH, TRUE)
    assert int(report.rank) == 3 and report.identifiable()
    assert np.isfinite(float(report.condition_number)) and float(report.condition_number) < 1e3
    assert report.null_space().shape == (0, 3)
    assert report.sensitivities.shape == ((N + 1) * 2, 3)


def test_constant_velocity_is_not_identifiable():
    np.testing.assert_allclose(XS_POOR[:, 1], V0, atol=1e-12)  # the block really does not accelerate
    report = identifiability(STEP, X0_CONST, POOR, TRUE)
    assert int(report.rank) == 1 and not report.identifiable()
    assert float(report.singular_values[1]) < 1e-10 * float(report.singular_values[0])
    null = report.null_space()
    assert null.shape == (2, 3)
    # the mass is invisible: e_m lies in the null space
    np.testing.assert_allclose(np.linalg.norm(null.T @ null @ np.array([1.0, 0.0, 0.0])), 1.0, atol=1e-8)
    # damping and Coulomb friction enter only through b v0 + f_c: in log coordinates the
    # invisible combination is orthogonal to (b v0, f_c)
    combo = np.array([0.0, -TRUE.coulomb, TRUE.damping * V0])
    combo /= np.linalg.norm(combo)
    np.testing.assert_allclose(np.linalg.norm(null.T @ null @ combo), 1.0, atol=1e-8)


def test_poor_excitation_fits_the_data_with_wrong_parameters():
    result = fit_parameters(STEP, X0_CONST, POOR, GUESS, XS_POOR, n_iterations=200)
    assert float(result.final_loss) < 1e-6 * float(result.loss[0])  # a perfect fit ...
    assert abs(float(result.params.mass) - TRUE.mass) > 0.5  # ... with the wrong mass
    balance = float(result.params.damping) * V0 + float(result.params.coulomb)
    np.testing.assert_allclose(balance, TRUE.damping * V0 + TRUE.coulomb, rtol=1e-3)


def test_bounds_are_respected():
    result = fit_parameters(
        STEP,
        X0,
        RICH,
        GUESS,
        XS_RICH,
        weights=WEIGHTS,
        lower=[0.5, 0.3, 0.05],
        upper=[1.5, 1.0, 1.0],
        learning_rate=0.1,
        n_iterations=100,
    )
    hist = np.asarray(result.history)
    assert np.all(hist >= np.array([0.5, 0.3, 0.05]) - 1e-12) and np.all(hist <= np.array([1.5, 1.0, 1.0]) + 1e-12)
    np.testing.assert_allclose(float(result.params.damping), 0.3, rtol=1e-9)  # the truth 0.2 is out of bounds


def test_loss_value_and_weights():
    assert float(sysid_loss(STEP, X0, RICH, TRUE, XS_RICH)) == 0.0
    xs = rollout(STEP, X0, RICH, GUESS)
    expected = float(jnp.sum(WEIGHTS * (xs - XS_RICH) ** 2))
    np.testing.assert_allclose(float(sysid_loss(STEP, X0, RICH, GUESS, XS_RICH, WEIGHTS)), expected, rtol=1e-12)


SHORT = 20


@pytest.mark.parametrize(
    "name", ["sysid_loss", "identifiability", "fit_parameters", "multisine", "friction_balance_force"]
)
@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad(name):
    us, xs = RICH[:SHORT], XS_RICH[: SHORT + 1]
    fns = {
        "sysid_loss": (lambda z: sysid_loss(STEP, X0, us, GUESS._replace(mass=z[0], coulomb=z[1]), xs), True),
        "identifiability": (
            lambda z: identifiability(STEP, X0, us, TRUE._replace(mass=z[0], coulomb=z[1])).singular_values,
            True,
        ),
        # differentiating the optimisation loop with respect to its initial guess means nothing here
        "fit_parameters": (
            lambda z: fit_parameters(STEP, X0, us, GUESS._replace(mass=z[0]), xs, n_iterations=3).history,
            False,
        ),
        "multisine": (lambda z: multisine(SHORT, DT, z, jnp.array([1.0, 2.0])), True),
        "friction_balance_force": (lambda z: friction_balance_force(TRUE._replace(damping=z[0]), z[1]), True),
    }
    fn, differentiable = fns[name]
    check_transforms(
        fn,
        jnp.array([1.3, 0.4]),
        differentiable=differentiable,
        scales=(1.0, 0.8),
        grad_rtol=1e-5,
        direction=[0.6, -0.8],
    )


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match=r"lower bounds must be >= 0"):
        fit_parameters(STEP, X0, RICH, GUESS, XS_RICH, lower=-1.0, n_iterations=2)
    with pytest.raises(ValueError, match="every upper bound must exceed its lower bound"):
        fit_parameters(STEP, X0, RICH, GUESS, XS_RICH, lower=1.0, upper=0.5, n_iterations=2)
    with pytest.raises(ValueError, match="initial values of .* must be positive"):
        fit_parameters(STEP, X0, RICH, GUESS._replace(mass=-1.0), XS_RICH, n_iterations=2)
    with pytest.raises(ValueError, match=r"xs_measured must have shape \(N\+1, nx\)"):
        sysid_loss(STEP, X0, RICH, TRUE, XS_RICH[:-1])
    with pytest.raises(ValueError, match=r"unknown parameter field\(s\) \['inertia'\]"):
        identifiability(STEP, X0, RICH, TRUE, fields=("mass", "inertia"))
    with pytest.raises(ValueError, match="n_iterations must be a Python int >= 1"):
        fit_parameters(STEP, X0, RICH, GUESS, XS_RICH, n_iterations=0)
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        sysid_loss(STEP, X0, RICH, TRUE, XS_RICH, weights=jnp.ones(3))
    with pytest.raises(ValueError, match=r"rtol must lie in \(0, 1\)"):
        identifiability(STEP, X0, RICH, TRUE, rtol=2.0)
