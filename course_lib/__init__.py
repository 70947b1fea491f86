"""course_lib: the JAX library behind the course "S04 可微分仿真理论".

Everything the book and the assignments use is re-exported here, so this file is
the map of the library. Conventions: a continuous model is ``f(x, u, p) -> xdot``;
an integrator turns it into ``step(x, u, p) -> x_next``; a rollout is ``lax.scan``
over a step. Float64 is opt-in: call :func:`enable_float64` before gradient checks.
"""

import jax

from course_lib.adjoint import AdjointResult, adjoint_gradients
from course_lib.checks import (
    DEFAULT_EPS,
    CoordinateCheck,
    DirectionalCheck,
    JacobianCheck,
    Plateau,
    coordinate_check,
    default_tolerance,
    directional_check,
    find_plateau,
    jacobian_check,
    random_direction,
    relative_error,
)
from course_lib.contact.complementarity import CONTACT_GRADIENTS, ContactSolution, complementarity_step, solve_contact
from course_lib.contact.impact import IMPACT_MODES, impact_step, naive_impact_step
from course_lib.contact.laws import (
    CONTACT_LAWS,
    ContactParams,
    get_contact_law,
    heaviside_step,
    penalty_force,
    relaxed_complementarity,
    sigmoid_step,
    smooth_contact_force,
    softplus,
    softplus_clamp_force,
    softplus_penetration_force,
)
from course_lib.contact_systems import (
    CONTACT_MODES,
    CONTACT_SYSTEMS,
    BoxWallParams,
    ContactRecord,
    ContactSystem,
    HardBallParams,
    HopperParams,
    SlidingBlockParams,
    SoftBallParams,
    box_wall_energy,
    box_wall_step,
    get_contact_system,
    hard_ball_energy,
    hard_ball_step,
    hopper,
    hopper_energy,
    hopper_step,
    rollout_with_record,
    sliding_block_energy,
    sliding_block_step,
    soft_ball,
    soft_ball_energy,
    soft_ball_step,
)
from course_lib.diagnostics import (
    first_nonfinite_step,
    gradient_norm_vs_horizon,
    product_log_singular_values,
    step_spectral_norms,
)
from course_lib.estimators import (
    GradientEstimate,
    GradientSamples,
    adaptive_alpha,
    adaptive_aobg,
    aobg,
    confidence_width,
    fobg,
    gradient_samples,
    ivw_aobg,
    zobg,
)
from course_lib.health import TrainingHealth, contact_summary, first_nonfinite_record, health_record, stack_records
from course_lib.implicit import solve_implicit
from course_lib.integrators import (
    INTEGRATORS,
    explicit_euler,
    explicit_midpoint,
    implicit_euler,
    implicit_midpoint,
    make_integrator,
    rk4,
    semi_implicit_euler,
)
from course_lib.planted_bugs import PLANTED_BUGS, cart_pole_with_bug
from course_lib.rollout import GRADIENT_MODES, CheckpointPlan, checkpoint_plan, rollout, rollout_cost
from course_lib.shac.critic import critic_value, fit_critic, init_mlp, lambda_returns, mlp_policy, quadratic_features
from course_lib.shac.tasks import ShacTask, WallParams, wall_cost, wall_dynamics, wall_gap, wall_task
from course_lib.shac.train import ShacResult, shac_train
from course_lib.shac.window import WindowRollout, episode_cost, short_horizon_loss
from course_lib.sensitivity import Linearization, linearize, linearize_trajectory, parameter_sensitivities
from course_lib.systems import (
    SYSTEMS,
    CartPoleParams,
    DoubleIntegratorParams,
    FrictionBlockParams,
    LIPMParams,
    PendulumParams,
    ScalarLinearParams,
    SpringDamperParams,
    System,
    TwoMassParams,
    cart_pole,
    double_integrator,
    friction_block,
    get_system,
    lipm,
    pendulum,
    scalar_linear,
    spring_damper,
    two_mass_spring,
)
from course_lib.sysid import (
    FRICTION_FIELDS,
    Identifiability,
    SysIdResult,
    fit_parameters,
    friction_balance_force,
    identifiability,
    multisine,
    sysid_loss,
)
from course_lib.trajopt import TrajOptResult, optimize_controls


def enable_float64() -> None:
    """Switch JAX to float64 (needed for gradient checks; see S04.8.2). Call before creating arrays."""
    jax.config.update("jax_enable_x64", True)


__version__ = "0.1.0"
