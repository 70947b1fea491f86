"""Reference solutions and graded checks for the cumulative project Mini-DiffSim (assignment ``mini_diffsim``).

The four notebooks follow the four stages of the project page (book/mini_diffsim.md):

* ``mini_diffsim_p1`` (smooth baselines): explicit Euler, semi-implicit Euler and RK4 steps of the
  double integrator and the pendulum, their Jacobians A and B, a one-step directional check with its
  eps plateau, and ||dx_k/du_0|| along a rollout.
* ``mini_diffsim_p2`` (soft contact): penalty and softplus normal forces with their derivatives, a
  stiffness sweep of a soft-contact ball (deepest penetration, peak force, peak ||dx_k/dx_0||_F) and a
  directional check near the contact boundary.
* ``mini_diffsim_p3`` (short-horizon policy optimisation): the window loss with a terminal-value hook,
  clipped SGD for horizons 8 / 16 / 32 (short runs compared value by value), and a longer h = 32 run
  graded on properties that survive its chaos: no NaN, a recorded spike, clipped norms, lower loss.
* ``mini_diffsim_p4`` (the debugging panel): per-iteration loss terms, gradient norm, contact count,
  penetration, peak force and finite-difference error along the stage-3 training.

How the stages are chained in grading: a stage's graded functions receive the earlier stages' building
blocks as ARGUMENTS (``integrator``, ``find_plateau``, ``step``, ``loss_fn``, ``force_fn``). In the
notebook the student passes the versions pasted from earlier stages; the hidden cells pass the reference
ones, wired by the kernel support modules ``autograder/kernel_support/mini_diffsim_*.py`` (the only
grading code the sandboxed kernel may read), so a bug of stage n costs points in stage n only. The
building blocks live there (stage-1 plateau finder, the task of stages 3-4, the stage-3 window loss) and
are imported here, so each exists once.

The exercise specs at the end (``EXERCISES``) hold the wrong answers as edits of the notebooks' own
solution cells (read from the sources), so each one shows exactly which line is wrong.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

import course_lib as cl
from autograder.kernel_support.mini_diffsim_common import (
    CLIP,
    EVAL_HORIZON,
    EVAL_SEED,
    LR,
    TERMINAL_VALUES,
    ball_params,
    start_states,
    task_force,
    task_step,
    zero_value,
)
from autograder.kernel_support.sweeps import PLATEAU_TOL, central_differences, find_plateau, relative_error
from autograder.kernel_support.mini_diffsim_p3 import SPIKE
from course_check.adapters import LONG_PREFIX, long_run_summary
from autograder.kernel_support.mini_diffsim_p4 import window_loss
from autograder.authoring import messages
from autograder.authoring import spread as spread_
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Output, Shortcut, Variant, WrongAnswer

# --- mistakes this assignment recognises ---------------------------------------------------------

MDS_RK4_FULL_STAGES = "RK4 的结果与“第二、三级也走整步 h”的写法一致：k2 = f(x + (h/2)·k1)、k3 = f(x + (h/2)·k2) 用半步，只有 k4 = f(x + h·k3) 用整步。"
MDS_SEMI_POSITION_FIRST = "半隐式欧拉的结果与“先用旧速度更新位置、再用新位置更新速度”的另一种辛欧拉一致：本项目约定先更新速度 v_{k+1} = v_k + h·a(q_k, v_k, u_k)，再用新速度更新位置 q_{k+1} = q_k + h·v_{k+1}（与 cl.semi_implicit_euler 相同）。"
MDS_DIRECTION_UNNORMALISED = (
    "结果与“没有把方向归一化”一致：方向导数要沿单位向量 d/‖d‖ 计算，否则 AD 值和差分值都被放大 ‖d‖ 倍。"
)
MDS_PLATEAU_STOP_EXCLUSIVE = "平台的终点与“右端不含”的写法一致（off-by-one）：本项目的平台是闭区间 [start, stop]，stop 是最后一个误差低于阈值的 ε 的下标。"
MDS_NORM_SHIFTED = (
    "梯度范数序列与“从 k = 0 开始”一致（off-by-one）：第 i 个值是 ‖∂x_{i+1}/∂u_0‖，i = 0..N−1，第一个值就是 ‖B_0‖。"
)
MDS_NORM_LAST_INPUT = (
    "梯度范数序列与 ‖∂x_k/∂u_{k−1}‖（每步只看上一步的控制）一致：题目要的是最早那个控制 u_0 的影响 ‖∂x_k/∂u_0‖。"
)
MDS_PENALTY_NO_DAMPING = "penalty 力与只有弹簧项 k·max(0, −φ) 的结果一致：穿透时还有阻尼项 c·ḋ（ḋ = −φ̇，只在 φ < 0 时起作用），再整体截断为非负。"
MDS_DAMPER_UNGATED = (
    "penalty 力与“阻尼项在 φ ≥ 0 时也起作用”的结果一致：没接触时 ḋ 应为 0，否则物体在空中靠近地面时就会被隔空推开。"
)
MDS_SOFTPLUS_ON_FORCE = "softplus 力与“把 softplus 套在力上”的写法一致：本项目平滑的是穿透深度 d = softplus(−βφ)/β（对应 cl.softplus_penetration_force），外层仍是 max(0, k·d + c·ḋ)。"
MDS_SOFTPLUS_RATE_GATED = (
    "softplus 力与“ḋ 仍用硬开关 [φ < 0]”的写法一致：平滑后的 d = softplus(−βφ)/β 的时间导数是 ḋ = −φ̇·σ(−βφ)。"
)
MDS_PEAK_SPRING_ONLY = "力峰值与只算弹簧项的结果一致：峰值要用完整的接触律（含阻尼项、截断或平滑），即你写的 penalty_force / softplus_force。"
MDS_GRAD_FINAL_ONLY = (
    "梯度范数与只取最后一步 ‖∂x_N/∂x_0‖_F 的结果一致：要的是 k = 0..N 上的最大值，接触期间的尖峰才会被记下来。"
)
MDS_NO_TERMINAL = "结果与“没有加终端价值”一致：窗口损失末尾要加上 terminal_value(x_h)，这是给 S05 的 critic / 可微 MPC 预留的接口，必须用传进来的那个函数。"
MDS_BATCH_SUM = "结果与对 B 条轨迹求和（而不是取平均）一致：各项都是批次平均。"
MDS_COST_AT_NEXT_STATE = "结果与“跟踪代价在 x_{k+1} 上计算”一致（off-by-one）：第 k 步的跟踪代价用的是走这一步之前的 x_k，穿透代价才用走完之后的 x_{k+1}。"
MDS_PEN_AT_CURRENT_STATE = (
    "结果与“穿透代价在 x_k 上计算”一致（off-by-one）：穿透代价罚的是这一步走完之后的 max(0, −y_{k+1})。"
)
MDS_NORM_AFTER_CLIP = "梯度范数与裁剪之后的值一致（都不超过阈值）：grad_norms 要记录裁剪之前的 ‖∇L‖，它才能暴露接触带来的尖峰；裁剪后的范数单独放在 clipped_norms 里。"
MDS_CLIPPED_IS_RAW = (
    "“裁剪后的范数”与裁剪之前的范数一致：clipped_norms 记录的是真正交给 SGD 的梯度的范数，不会超过阈值 CLIP。"
)
MDS_NO_CLIP = "结果与“没有裁剪梯度”的训练一致：优化器应先用 optax.clip_by_global_norm(CLIP) 把梯度的全局范数限制在 CLIP 以内，再做 SGD（make_optimizer(clip=True)）。"
MDS_PANEL_AFTER_UPDATE = (
    "面板数据与“在参数更新之后记录”一致（off-by-one）：第 i 行描述的是第 i 次迭代开始时的参数 θ_i，先记录，再更新。"
)
MDS_CONTACT_BY_FORCE = "接触数量与“法向力大于 0 的状态数”一致：本项目按间隙判定接触（y < 0 的状态算一次接触），阻尼项截断时力可能为 0 而物体仍在地面以下。"
MDS_FD_FORWARD = "有限差分误差与前向差分 (L(θ+εd) − L(θ))/ε 的结果一致：面板里用中心差分。"


def _as_f(*values):
    return tuple(jnp.asarray(v, dtype=jnp.float64) for v in values)


# ==================================================================================================
# Stage 1: smooth baselines (mini_diffsim_p1)
# ==================================================================================================

#: the two models of stage 1 (the notebook's setup cell defines the same table)
MODELS = {
    "double_integrator": (cl.double_integrator, cl.DoubleIntegratorParams(mass=1.5)),
    "pendulum": (cl.pendulum, cl.PendulumParams(mass=1.0, length=0.8, damping=0.2)),
}
INTEGRATOR_NAMES = ("explicit_euler", "semi_implicit_euler", "rk4")


def _rk4_full_stages(f, h):
    def step(x, u, p):
        k1 = f(x, u, p)
        k2 = f(x + h * k1, u, p)
        k3 = f(x + h * k2, u, p)
        k4 = f(x + h * k3, u, p)
        return x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    return step


def _semi_position_first(f, h):
    def step(x, u, p):
        n = x.shape[0] // 2
        q_next = x[:n] + h * f(x, u, p)[:n]
        return jnp.concatenate([q_next, x[n:] + h * f(jnp.concatenate([q_next, x[n:]]), u, p)[n:]])

    return step


#: integrator factories by name; the reference ones are course_lib's, the other two are catalogued mistakes
_INTEGRATOR_FACTORIES = {
    "explicit_euler": cl.explicit_euler,
    "semi_implicit_euler": cl.semi_implicit_euler,
    "rk4": cl.rk4,
    "rk4_full_stages": _rk4_full_stages,
    "semi_position_first": _semi_position_first,
}


def _model_step(system, integrator, h):
    f, p = MODELS[system]
    step = _INTEGRATOR_FACTORIES[integrator](f, h)
    return lambda x, u: step(x, u, p)


@partial(jax.jit, static_argnames=("system", "integrator"))
def _step_and_jacobians(x, u, h, system, integrator):
    step = _model_step(system, integrator, h)
    A, B = jax.jacfwd(step, argnums=(0, 1))(x, u)
    return step(x, u), A, B


def _one_step(system, x, u, h, what, integrators):
    """The next states (what = "x") or the Jacobians (what = "AB") of the ``integrators`` (names)."""
    out = []
    for name in integrators:
        x_next, A, B = (np.asarray(a) for a in _step_and_jacobians(*_as_f(x, u, h), system=system, integrator=name))
        out += [x_next] if what == "x" else [A, B]
    return tuple(out)


def next_states(system, x, u, h, integrators=INTEGRATOR_NAMES):
    """x_{k+1} of each integrator (``integrators``: the catalogued mistakes replace one)."""
    return _one_step(system, x, u, h, "x", integrators)


def step_jacobians(system, x, u, h, integrators=INTEGRATOR_NAMES):
    """(A, B) of each integrator (``integrators``: the catalogued mistakes replace one)."""
    return _one_step(system, x, u, h, "AB", integrators)


def _replaced(**replace):
    """INTEGRATOR_NAMES with integrators replaced by name."""
    return tuple(replace.get(n, n) for n in INTEGRATOR_NAMES)


#: the systems of the one-step cases and the public cases' step sizes
_STEP_SETTINGS = (("double_integrator", 0.1), ("pendulum", 0.05), ("pendulum", 0.2), ("double_integrator", 0.03))


def _step_cases():
    rng = case_rng(77_101)
    states = [
        (np.array([rng.uniform(-2.0, 2.0), rng.uniform(-3.0, 3.0)]).round(5), rng.uniform(-2.0, 2.0, 1).round(4))
        for _ in _STEP_SETTINGS
    ]
    # The hidden step sizes: 0.8 .. 1.25 times the public ones and at least 3 % from them (the double integrator's
    # Jacobians depend on h alone: with the public h a hidden case would expect a public case's A and B), drawn
    # after the states, so that the public cases stay what they were.
    steps = [
        case_value(
            draw_until(
                lambda h=h: round(h * float(rng.uniform(0.8, 1.25)), 4), lambda hidden, h=h: abs(hidden / h - 1) > 0.03
            ),
            h,
        )
        for _, h in _STEP_SETTINGS
    ]
    return [{"system": system, "x": x, "u": u, "h": h} for (system, _), (x, u), h in zip(_STEP_SETTINGS, states, steps)]


_LABELS = {"explicit_euler": "显式欧拉", "semi_implicit_euler": "半隐式欧拉", "rk4": "RK4"}


_INTEGRATOR_MISTAKES = {
    "explicit_euler": Variant(messages.EXPLICIT_EULER, integrators=_replaced(semi_implicit_euler="explicit_euler")),
    "mds_semi_position_first": Variant(
        MDS_SEMI_POSITION_FIRST, integrators=_replaced(semi_implicit_euler="semi_position_first")
    ),
    "mds_rk4_full_stages": Variant(MDS_RK4_FULL_STAGES, integrators=_replaced(rk4="rk4_full_stages")),
}


_MINI_DIFFSIM_P1_CHECKS = (
    Check(
        "next_states",
        _step_cases,
        reference=next_states,
        outputs=tuple(Output(f"{_LABELS[n]}的下一步状态") for n in INTEGRATOR_NAMES),
        mistakes=_INTEGRATOR_MISTAKES,
    ),
    Check(
        "step_jacobians",
        _step_cases,
        reference=step_jacobians,
        outputs=tuple(Output(f"{_LABELS[n]}的 {m}") for n in INTEGRATOR_NAMES for m in ("A", "B")),
        mistakes=_INTEGRATOR_MISTAKES,
    ),
)


def _check_result(ad, central, forward, scheme, stop_exclusive):
    """(ad, fd, plateau) of a directional check, or of a catalogued mistake of it."""
    fd = np.asarray(forward if scheme == "forward" else central)
    plateau = find_plateau(relative_error(float(ad), fd))
    if stop_exclusive and plateau[0] >= 0:
        plateau = plateau + np.array([0, 1])
    return float(ad), fd, plateau


def _ad_and_differences(loss, z, d, eps):
    ad = jnp.dot(jax.grad(loss)(z), d)
    central = jax.vmap(lambda e: (loss(z + e * d) - loss(z - e * d)) / (2 * e))(eps)
    forward = jax.vmap(lambda e: (loss(z + e * d) - loss(z)) / e)(eps)
    return ad, central, forward


@partial(jax.jit, static_argnames=("system", "integrator"))
def _step_check_values(x, u, h, d, eps, system, integrator):
    step = _model_step(system, integrator, h)
    nx = x.shape[0]
    return _ad_and_differences(lambda z: 0.5 * jnp.sum(step(z[:nx], z[nx:]) ** 2), jnp.concatenate([x, u]), d, eps)


def step_check(
    system, integrator, x, u, h, direction, eps_list, scheme="central", normalise=True, stop_exclusive=False
):
    """(AD, central differences, plateau) of the one-step check; the keywords switch to the catalogued mistakes."""
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d) if normalise else d
    values = _step_check_values(*_as_f(x, u, h, d, eps_list), system=system, integrator=integrator)
    return _check_result(*values, scheme, stop_exclusive)


def _step_check_numpy(system, integrator, x, u, h, direction, eps_list):
    """Central differences of the same loss, evaluated point by point in numpy (another rounding)."""
    step = _model_step(system, integrator, h)

    def loss(z):
        y = np.asarray(step(jnp.asarray(z[:2]), jnp.asarray(z[2:])))
        return 0.5 * float(y @ y)

    return central_differences(loss, np.concatenate([x, u]), direction, eps_list)


#: FD values of two faithful implementations differ by rounding, about eps_mach |L| / eps <= 2e-8 |L| at
#: the smallest eps = 1e-8; measured below 5e-8 of max |FD| on the hidden cases (numpy second
#: implementation, _robust), so a band of 1e-6 accepts them; a forward difference is off by >= 1e-3.
STEP_FD_RTOL = 1e-6
#: hidden sweeps keep every relative error this factor away from the plateau threshold (in both
#: implementations), so rounding cannot move a plateau index
PLATEAU_MARGIN = 3.0


def _clear_of_threshold(rel):
    ratio = np.maximum(rel, 1e-300) / PLATEAU_TOL
    return bool(np.all((ratio >= PLATEAU_MARGIN) | (ratio <= 1 / PLATEAU_MARGIN)))


def _robust(case):
    """Whether the sweep of ``case`` gives the same plateau for any faithful implementation."""
    ad, fd, _ = step_check(**case)
    fd_np = _step_check_numpy(**case)
    return (
        np.max(np.abs(fd_np - fd)) <= 0.05 * STEP_FD_RTOL * np.max(np.abs(fd))
        and _clear_of_threshold(relative_error(ad, fd))
        and _clear_of_threshold(relative_error(ad, fd_np))
    )


def _check_cases():
    rng = case_rng(77_102)
    eps = np.logspace(-1, -8, 8)
    cases = []
    for system, integrator, h in (
        ("pendulum", "rk4", 0.1),
        ("pendulum", "explicit_euler", 0.05),
        ("pendulum", "semi_implicit_euler", 0.2),
        ("double_integrator", "rk4", 0.1),
    ):
        while True:  # deterministic: the first draw whose sweep stays clear of the threshold
            case = {
                "system": system,
                "integrator": integrator,
                "x": np.array([rng.uniform(-2.5, 2.5), rng.uniform(-2.0, 2.0)]).round(5),
                "u": rng.uniform(-3.0, 3.0, 1).round(4),
                "h": h,
                "direction": rng.normal(size=3).round(4),
                "eps_list": eps,
            }
            if _robust(case):
                break
        cases.append(case)
    return cases


def _horizon_cases():
    rng = case_rng(77_103)
    cases = []
    for system, integrator, h, n in case_value(
        (
            ("pendulum", "rk4", 0.05, 40),
            ("double_integrator", "semi_implicit_euler", 0.1, 25),
            ("pendulum", "explicit_euler", 0.02, 60),
        ),
        (
            ("pendulum", "rk4", 0.04, 40),
            ("double_integrator", "semi_implicit_euler", 0.08, 25),
            ("pendulum", "explicit_euler", 0.025, 60),
        ),
    ):
        cases.append(
            {
                "system": system,
                "integrator": integrator,
                "x0": np.array([rng.uniform(-2.0, 2.0), rng.uniform(-1.0, 1.0)]).round(5),
                "us": rng.uniform(-1.5, 1.5, (n, 1)).round(4),
                "h": h,
            }
        )
    return cases


@partial(jax.jit, static_argnames=("system", "integrator", "variant"))
def _norms_vs_horizon(x0, us, h, system, integrator, variant=None):
    step = _model_step(system, integrator, h)

    def states_from(u0):  # x_1 .. x_N as a function of u_0
        def body(x, u):
            x_next = step(x, u)
            return x_next, x_next

        return jax.lax.scan(body, x0, jnp.concatenate([u0[None], us[1:]]))[1]

    if variant == "last_input":
        xs = jnp.concatenate([x0[None], states_from(us[0])[:-1]])
        return jnp.linalg.norm(jax.vmap(jax.jacfwd(step, argnums=1))(xs, us)[:, :, 0], axis=1)
    norms = jnp.linalg.norm(jax.jacfwd(states_from)(us[0])[:, :, 0], axis=1)
    return jnp.concatenate([jnp.zeros(1), norms[:-1]]) if variant == "shifted" else norms


def grad_norm_horizon(system, integrator, x0, us, h, variant=None):
    """||dx_k/du_0||_2 for k = 1..N, shape (N,) (``variant``: a catalogued mistake)."""
    return np.asarray(_norms_vs_horizon(*_as_f(x0, us, h), system=system, integrator=integrator, variant=variant))


_MINI_DIFFSIM_P1_CHECKS += (
    Check(
        "step_check",
        _check_cases,
        reference=step_check,
        outputs=(
            Output("AD 方向导数"),
            Output("中心差分 FD(ε)", rtol=STEP_FD_RTOL),
            Output("误差平台 [start, stop]", "integer"),
        ),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, scheme="forward"),
            "mds_direction_unnormalised": Variant(MDS_DIRECTION_UNNORMALISED, normalise=False),
            "mds_plateau_stop_exclusive": Variant(MDS_PLATEAU_STOP_EXCLUSIVE, stop_exclusive=True),
        },
    ),
    Check(
        "grad_norm_horizon",
        _horizon_cases,
        reference=grad_norm_horizon,
        outputs=(Output("‖∂x_k/∂u_0‖，k = 1..N"),),
        mistakes={
            "mds_norm_shifted": Variant(MDS_NORM_SHIFTED, variant="shifted"),
            "mds_norm_last_input": Variant(MDS_NORM_LAST_INPUT, variant="last_input"),
        },
    ),
)


# ==================================================================================================
# Stage 2: soft contact (mini_diffsim_p2)
# ==================================================================================================

#: the project's law names -> course_lib's (the stage-2 reference implementations)
CL_LAWS = {"penalty": "penalty", "softplus": "softplus_penetration"}
SWEEP_DAMPING = 10.0  # N s/m, ground damping of the stiffness sweep
CHECK_H, CHECK_K, CHECK_C = 0.01, 1000.0, 10.0  # the boundary check's step, stiffness and damping


def _force(law, phi, phi_dot, k, c, beta, variant=None):
    """The reference laws (course_lib's) and the catalogued mistakes of them."""
    gated_rate = jnp.where(phi < 0, -phi_dot, 0.0)
    if law == "penalty":
        if variant == "no_damping":
            return k * jnp.maximum(0.0, -phi)
        if variant == "ungated":
            return jnp.maximum(0.0, k * jnp.maximum(0.0, -phi) - c * phi_dot)
        return cl.penalty_force(phi, phi_dot, k, c)
    if variant == "on_force":
        return jax.nn.softplus(beta * (k * jnp.maximum(0.0, -phi) + c * gated_rate)) / beta
    if variant == "rate_gated":
        return jnp.maximum(0.0, k * jax.nn.softplus(-beta * phi) / beta + c * gated_rate)
    return cl.softplus_penetration_force(phi, phi_dot, k, c, beta)


@partial(jax.jit, static_argnames=("pen_variant", "sp_variant"))
def _force_curves(phi, phi_dot, k, c, beta, pen_variant=None, sp_variant=None):
    pen = lambda p, pd: _force("penalty", p, pd, k, c, beta, pen_variant)  # noqa: E731
    sp = lambda p, pd: _force("softplus", p, pd, k, c, beta, sp_variant)  # noqa: E731
    return (
        pen(phi, phi_dot),
        sp(phi, phi_dot),
        jax.vmap(jax.grad(pen))(phi, phi_dot),
        jax.vmap(jax.grad(sp))(phi, phi_dot),
    )


def force_curves(phi, phi_dot, k, c, beta, pen_variant=None, sp_variant=None):
    """(penalty force, softplus force, their derivatives in phi); the keywords: the catalogued mistakes of a law."""
    out = _force_curves(*_as_f(phi, phi_dot, k, c, beta), pen_variant=pen_variant, sp_variant=sp_variant)
    return tuple(np.asarray(a) for a in out)


def _curve_cases():
    rng = case_rng(77_201)
    cases = []
    for k, c, beta in case_value(
        ((800.0, 8.0, 300.0), (5000.0, 25.0, 1500.0), (20000.0, 4.0, 120.0)),
        ((1200.0, 10.0, 400.0), (7000.0, 20.0, 1000.0)),
    ):

        def draw():  # nine points: one length, so force_curves compiles once
            return np.sort(rng.uniform(-0.02, 0.01, 9)).round(6), rng.uniform(-2.0, 2.0, 9).round(4)

        def away_from_kinks(points, k=k, c=c, beta=beta):  # where jax.grad's tie conventions would decide
            phi, phi_dot = points
            inside = phi < 0
            soft = k * np.logaddexp(0.0, -beta * phi) / beta - c * phi_dot / (1 + np.exp(beta * phi))
            return bool(
                np.min(np.abs(phi)) > 1e-5  # the onset phi = 0
                and np.all(np.abs(k * (-phi[inside]) - c * phi_dot[inside]) > 1e-3)  # the clamps
                and np.all(np.abs(soft) > 1e-3)
            )

        phi, phi_dot = draw_until(draw, away_from_kinks)
        cases.append({"phi": phi, "phi_dot": phi_dot, "k": k, "c": c, "beta": beta})
    return cases


_MINI_DIFFSIM_P2_CHECKS = (
    Check(
        "force_curves",
        _curve_cases,
        reference=force_curves,
        outputs=(
            Output("penalty 力"),
            Output("softplus 力"),
            Output("penalty 力对 φ 的导数"),
            Output("softplus 力对 φ 的导数"),
        ),
        mistakes={
            "mds_penalty_no_damping": Variant(MDS_PENALTY_NO_DAMPING, pen_variant="no_damping"),
            "mds_damper_ungated": Variant(MDS_DAMPER_UNGATED, pen_variant="ungated"),
            "mds_softplus_on_force": Variant(MDS_SOFTPLUS_ON_FORCE, sp_variant="on_force"),
            "mds_softplus_rate_gated": Variant(MDS_SOFTPLUS_RATE_GATED, sp_variant="rate_gated"),
        },
    ),
)


def reference_ball_step(h, law):
    """The stage-2 reference: course_lib's soft ball (semi-implicit Euler) under the project's law name."""
    return cl.soft_ball_step(h, CL_LAWS[law])


@partial(jax.jit, static_argnames=("law", "n_steps"))
def _sweep_one(k, beta, y0, v0, h, law, n_steps):
    step = reference_ball_step(h, law)
    p = ball_params(k, SWEEP_DAMPING, beta)

    def trajectory(x0):
        def body(x, _):
            x_next = step(x, jnp.zeros(1), p)
            return x_next, x_next

        return jnp.concatenate([x0[None], jax.lax.scan(body, x0, None, length=n_steps)[1]])

    x0 = jnp.stack([y0, v0])
    return trajectory(x0), jax.jacfwd(trajectory)(x0)


def contact_sweep(law, ks, beta, y0, v0, h, n_steps, force="law", grad="max"):
    """(max_k max(0, -y_k), max_k lambda(y_k, v_k), max_k ||dx_k/dx_0||_F), k = 0..N, per stiffness; the keywords
    switch to the catalogued mistakes. The student's version also takes ``integrator`` (grading passes
    cl.semi_implicit_euler)."""
    depth, peak, gnorm = [], [], []
    for k in np.asarray(ks, dtype=np.float64):
        xs, sens = (np.asarray(a) for a in _sweep_one(*_as_f(k, beta, y0, v0, h), law=law, n_steps=int(n_steps)))
        y, v = xs[:, 0], xs[:, 1]
        depth.append(np.max(np.maximum(0.0, -y)))
        lam = k * np.maximum(0.0, -y) if force == "spring" else _force(law, y, v, k, SWEEP_DAMPING, float(beta))
        peak.append(np.max(lam))
        norms = np.linalg.norm(sens, axis=(1, 2))
        gnorm.append(norms[-1] if grad == "final" else np.max(norms))
    return np.array(depth), np.array(peak), np.array(gnorm)


#: one step size and one N for all cases: a jitted rollout compiles once per law
SWEEP_H, SWEEP_STEPS = 0.002, 250


def _draw_sweep_case(rng, base):
    """A sweep drawn around ``base``: each stiffness moved by 10^(-0.15 .. 0.15) (two significant digits), y0 and v0
    by 0.8 .. 1.25, a softplus law's beta by 10^(-0.15 .. 0.15); the law, h and N stay (one compilation per law)."""
    beta = base["beta"] if base["law"] == "penalty" else float(f"{base['beta'] * 10.0 ** rng.uniform(-0.15, 0.15):.2g}")
    return {
        **base,
        "ks": np.array([float(f"{k * 10.0 ** rng.uniform(-0.15, 0.15):.2g}") for k in base["ks"]]),
        "beta": beta,
        "y0": round(base["y0"] * float(rng.uniform(0.8, 1.25)), 3),
        "v0": round(base["v0"] * float(rng.uniform(0.8, 1.25)), 2),
    }


def _sweep_acceptable(case) -> bool:
    """Every stiffness penetrates the ground, and the peak sensitivity is not the final one (1e-6 apart at least)."""
    depth, _, peak = contact_sweep(**case)
    final = contact_sweep(**case, grad="final")[2]
    return bool(np.all(depth > 0) and np.all(peak > (1 + 1e-6) * final))


def _sweep_cases():
    if case_value(False, True):
        return _SWEEP_PUBLIC
    rng = case_rng(77_202)
    return [draw_until(lambda base=base: _draw_sweep_case(rng, base), _sweep_acceptable) for base in _SWEEP_HIDDEN]


_SWEEP_PUBLIC = [
    {
        "law": "penalty",
        "ks": np.array([300.0, 2500.0, 20000.0]),
        "beta": 1.0,
        "y0": 0.2,
        "v0": -0.8,
        "h": SWEEP_H,
        "n_steps": SWEEP_STEPS,
    },
    {
        "law": "softplus",
        "ks": np.array([500.0, 5000.0, 30000.0]),
        "beta": 1000.0,
        "y0": 0.25,
        "v0": -0.5,
        "h": SWEEP_H,
        "n_steps": SWEEP_STEPS,
    },
]
#: the hidden sweeps are drawn around these each term (_draw_sweep_case)
_SWEEP_HIDDEN = [
    {
        "law": "penalty",
        "ks": np.array([200.0, 1500.0, 9000.0, 40000.0]),
        "beta": 1.0,
        "y0": 0.25,
        "v0": -0.6,
        "h": SWEEP_H,
        "n_steps": SWEEP_STEPS,
    },
    {
        "law": "softplus",
        "ks": np.array([400.0, 3000.0, 25000.0]),
        "beta": 400.0,
        "y0": 0.15,
        "v0": -1.1,
        "h": SWEEP_H,
        "n_steps": SWEEP_STEPS,
    },
    {
        "law": "softplus",
        "ks": np.array([600.0, 6000.0, 50000.0]),
        "beta": 3000.0,
        "y0": 0.3,
        "v0": 0.2,
        "h": SWEEP_H,
        "n_steps": SWEEP_STEPS,
    },
]


_MINI_DIFFSIM_P2_CHECKS += (
    Check(
        "contact_sweep",
        _sweep_cases,
        reference=contact_sweep,
        outputs=(Output("最大穿透深度"), Output("法向力峰值"), Output("梯度范数峰值 max‖∂x_k/∂x_0‖_F")),
        mistakes={
            "mds_peak_spring_only": Variant(MDS_PEAK_SPRING_ONLY, force="spring"),
            "mds_grad_final_only": Variant(MDS_GRAD_FINAL_ONLY, grad="final"),
        },
    ),
)


@partial(jax.jit, static_argnames=("law",))
def _boundary_values(x0, beta, d, eps, law):
    step = reference_ball_step(CHECK_H, law)
    p = ball_params(CHECK_K, CHECK_C, beta)
    return _ad_and_differences(lambda x: step(x, jnp.zeros(1), p)[1], x0, d, eps)  # L(x0) = v_1


def boundary_check(law, x0, beta, direction, eps_list, scheme="central", stop_exclusive=False):
    """(AD, central differences (E,), plateau) of L(x0) = v_1 near the contact boundary; the keywords switch to the
    catalogued mistakes. The student's version also takes ``integrator`` and ``find_plateau`` (grading passes
    cl.semi_implicit_euler and find_plateau)."""
    d = np.asarray(direction, dtype=np.float64)
    values = _boundary_values(*_as_f(x0, beta, d / np.linalg.norm(d), eps_list), law=law)
    return _check_result(*values, scheme, stop_exclusive)


#: FD values differ by rounding only: 1e-16 |v_1| / eps <= 1e-8 at eps = 1e-8, below 1e-8 relative to
#: max |FD| (>= 1) on the hidden cases; a forward difference is off by >= 1e-2 there.
BOUNDARY_FD_RTOL = 1e-6


def _boundary_acceptable(case) -> bool:
    """Every relative error far from the threshold (rounding cannot move the plateau), a plateau to find, the FD
    column's scale at least 1 (BOUNDARY_FD_RTOL's argument), and a forward difference 1e-4 away (100 bands)."""
    ad, fd, plateau = boundary_check(**case)
    forward = boundary_check(**case, scheme="forward")[1]
    return bool(
        _clear_of_threshold(relative_error(ad, fd))
        and plateau[0] >= 0
        and np.max(np.abs(fd)) >= 1.0
        and np.max(np.abs(forward - fd)) > 1e-4 * np.max(np.abs(fd))
    )


def _draw_boundary_case(rng, base):
    """A case drawn around ``base`` (same law, same side of the boundary): the height moved by 10^(-0.2 .. 0.2),
    the velocity by 0.8 .. 1.25, a softplus law's beta by 10^(-0.15 .. 0.15), the direction's components by
    0.8 .. 1.25 and +-0.15."""
    y, v = base["x0"]
    d0, d1 = base["direction"]
    beta = base["beta"] if base["law"] == "penalty" else float(f"{base['beta'] * 10.0 ** rng.uniform(-0.15, 0.15):.2g}")
    return {
        **base,
        "x0": np.array(
            [float(f"{y * 10.0 ** rng.uniform(-0.2, 0.2):.2g}"), round(v * float(rng.uniform(0.8, 1.25)), 2)]
        ),
        "beta": beta,
        "direction": np.array(
            [round(d0 * float(rng.uniform(0.8, 1.25)), 2), round(d1 + float(rng.uniform(-0.15, 0.15)), 2)]
        ),
    }


def _boundary_cases():
    eps = np.logspace(-1, -8, 8)
    if case_value(False, True):
        cases = _boundary_public(eps)
        assert all(_clear_of_threshold(relative_error(*boundary_check(**case)[:2])) for case in cases)
        return cases
    rng = case_rng(77_203)
    return [
        draw_until(lambda base=base: _draw_boundary_case(rng, base), _boundary_acceptable)
        for base in _boundary_hidden(eps)
    ]


def _boundary_public(eps):
    return [
        {
            "law": "penalty",
            "x0": np.array([5e-4, -0.6]),
            "beta": 1.0,
            "direction": np.array([1.0, 0.2]),
            "eps_list": eps,
        },
        {
            "law": "softplus",
            "x0": np.array([-3e-3, -0.4]),
            "beta": 500.0,
            "direction": np.array([0.9, 0.3]),
            "eps_list": eps,
        },
    ]


def _boundary_hidden(eps):
    """The cases the hidden ones are drawn around each term (_draw_boundary_case)."""
    return [
        {
            "law": "penalty",
            "x0": np.array([3e-4, -0.8]),
            "beta": 1.0,
            "direction": np.array([1.0, 0.3]),
            "eps_list": eps,
        },
        {
            "law": "penalty",
            "x0": np.array([-2.2e-3, -0.5]),
            "beta": 1.0,
            "direction": np.array([1.0, -0.4]),
            "eps_list": eps,
        },
        {
            "law": "softplus",
            "x0": np.array([1.3e-3, -0.7]),
            "beta": 2000.0,
            "direction": np.array([0.8, 0.5]),
            "eps_list": eps,
        },
        {
            "law": "softplus",
            "x0": np.array([-4.5e-3, -0.3]),
            "beta": 300.0,
            "direction": np.array([1.0, 0.1]),
            "eps_list": eps,
        },
    ]


_MINI_DIFFSIM_P2_CHECKS += (
    Check(
        "boundary_check",
        _boundary_cases,
        reference=boundary_check,
        outputs=(
            Output("AD 方向导数"),
            Output("中心差分 FD(ε)", rtol=BOUNDARY_FD_RTOL),
            Output("误差平台 [start, stop]", "integer"),
        ),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, scheme="forward"),
            "mds_plateau_stop_exclusive": Variant(MDS_PLATEAU_STOP_EXCLUSIVE, stop_exclusive=True),
        },
    ),
)


# ==================================================================================================
# Stage 3: short-horizon policy optimisation (mini_diffsim_p3)
# ==================================================================================================

# The task (DT, the ground, the policy, start_states, the terminal values) is defined in
# autograder/kernel_support/mini_diffsim_common.py, the stage-3 window loss in ..._p4.py (imported above).

#: The catalogued mistakes of the window loss, as the traced switches of the reference window_loss:
#: (terminal weight, sum over the batch, tracking cost at x_{k+1}, penetration cost at x_k).
_LOSS_VARIANTS = {
    None: (1.0, 0.0, 0.0, 0.0),
    "no_terminal": (0.0, 0.0, 0.0, 0.0),
    "batch_sum": (1.0, 1.0, 0.0, 0.0),
    "cost_at_next_state": (1.0, 0.0, 1.0, 0.0),
    "pen_at_current_state": (1.0, 0.0, 0.0, 1.0),
}


@partial(jax.jit, static_argnames=("horizon", "value", "step"))
def _window_loss_jit(theta, x_starts, horizon, value, switches, step=task_step):
    loss, (terms, states) = window_loss(theta, x_starts, horizon, step, TERMINAL_VALUES[value], switches)
    return loss, terms, states


def graded_window_loss(theta, x_starts, horizon, value, variant=None):
    """(L, terms, states) of the window loss with the terminal value named ``value`` (``variant``: _LOSS_VARIANTS)."""
    out = _window_loss_jit(*_as_f(theta, x_starts), int(horizon), value, jnp.asarray(_LOSS_VARIANTS[variant]))
    return tuple(np.asarray(a) for a in out)


_LOSS_VALUES = ((8, "hidden"), (16, "zero"), (32, "hidden"))
_LOSS_PUBLIC_VALUES = ((8, "public"), (16, "zero"), (32, "public"))


def _loss_cases():
    rng = case_rng(77_301)
    cases = []
    # the public cases name only terminal values the notebook shows (the hidden one stays in the hidden data)
    for horizon, value in case_value(_LOSS_VALUES, _LOSS_PUBLIC_VALUES):
        theta = np.array([rng.uniform(-20.0, 5.0), rng.uniform(-4.0, 0.0), rng.uniform(0.0, 12.0)]).round(4)
        seed = 77_300 + horizon
        while True:  # the first batch in which some window ends below the ground (x_h penetrates)
            x_starts = np.asarray(start_states(seed, 0)).round(6)
            if np.any(graded_window_loss(theta, x_starts, horizon, value)[2][:, -1, 0] < -1e-4):
                break
            seed += 1
        cases.append({"theta": theta, "x_starts": x_starts, "horizon": horizon, "value": value})
    return cases


#: Band of the window loss. The hidden h = 32 window amplifies rounding: perturbing every step of the
#: dynamics by one ulp (three sign patterns) moves its outputs by up to 2.2e-10 relative (h = 8: 2e-15,
#: h = 16: 5e-14), above the "exact" tolerance 2.2e-12, so a faithful student whose rollout compiles to
#: slightly different code could fail it. Every catalogued mistake moves some output of every case by
#: 8e-6 or more (penetration cost at x_k in the h = 16 case; the others by 2e-4 .. 7).
WINDOW_RTOL = 1e-7

_MINI_DIFFSIM_P3_CHECKS = (
    Check(
        "window_loss",
        _loss_cases,
        reference=graded_window_loss,
        outputs=(
            Output("窗口损失 L", rtol=WINDOW_RTOL),
            Output("损失分项 [跟踪, 控制, 穿透, 终端]", rtol=WINDOW_RTOL),
            Output("窗口状态 (B, h+1, 2)", rtol=WINDOW_RTOL),
        ),
        mistakes={
            "mds_no_terminal": Variant(MDS_NO_TERMINAL, variant="no_terminal"),
            "mds_batch_sum": Variant(MDS_BATCH_SUM, variant="batch_sum"),
            "mds_cost_at_next_state": Variant(MDS_COST_AT_NEXT_STATE, variant="cost_at_next_state"),
            "mds_pen_at_current_state": Variant(MDS_PEN_AT_CURRENT_STATE, variant="pen_at_current_state"),
        },
    ),
)


def _scaled(step, scale):
    """``step`` with every result multiplied by ``scale`` (one of _PERTURBED_SCALES: moved by one ulp, relative machine
    epsilon): a stand-in for a faithful implementation that rounds differently (another compiler's code, a Python
    loop). The scale is a traced argument of the jitted runs, so the three patterns share one compilation."""
    return lambda x, u: step(x, u) * scale


#: one-ulp perturbations of every step of the dynamics, three sign patterns: the bands of the training checks
#: (TRAIN_RTOL, PANEL_RTOL) were measured with them, and a drawn hidden run must stay far inside them under each
_PERTURBED_SCALES = tuple(
    1.0 + np.asarray(signs, dtype=np.float64) * np.finfo(np.float64).eps
    for signs in ((1.0, 1.0), (-1.0, -1.0), (1.0, -1.0))
)

#: seeds a hidden training run never draws: the notebooks' and the evaluation's, and the public cases'
_RESERVED_SEEDS = frozenset({0, EVAL_SEED, 31, 32, 41, 167, 180})


def _draw_seed(rng) -> int:
    return draw_until(lambda: int(rng.integers(100, 100_000)), lambda seed: seed not in _RESERVED_SEEDS)


def _runs(settings) -> list[dict]:
    """One case per ``(horizon, n_iterations, seed, value)`` of ``settings``."""
    return [{"horizon": h, "n_iterations": n, "seed": seed, "value": value} for h, n, seed, value in settings]


def _drawn_runs(seed: int, settings, acceptable, tries: int = 200) -> list[dict]:
    """The hidden runs of ``settings`` with their seeds drawn this term, each until ``acceptable``."""
    rng = case_rng(seed)
    return [
        draw_until(lambda case=case: {**case, "seed": _draw_seed(rng)}, acceptable, tries) for case in _runs(settings)
    ]


def _stable(run, case, limit: float) -> bool:
    """Whether every output of ``run(case, step)`` moves by at most ``limit`` (relative to its largest entry) when
    every step of the dynamics is perturbed by one ulp (_PERTURBED_SCALES)."""
    reference = run(case)
    return all(
        spread_.deviation(r, p) <= limit for scale in _PERTURBED_SCALES for r, p in zip(reference, run(case, scale))
    )


@partial(jax.jit, static_argnames=("horizon", "n_iterations", "value", "step"))
def _train_run(seed, horizon, n_iterations, value, switches, clip_on, step=task_step, scale=None):
    """Clipped SGD as one lax.scan: raw and clipped gradient norms, window losses, eval before/after (with ``scale``,
    every step's result perturbed: _scaled)."""
    if scale is not None:
        step = _scaled(step, scale)
    opt, clip = optax.sgd(LR), optax.clip_by_global_norm(CLIP)
    value_and_grad = jax.value_and_grad(
        lambda th, xs: window_loss(th, xs, horizon, step, TERMINAL_VALUES[value], switches)[0]
    )

    def evaluate(theta):
        return window_loss(theta, start_states(EVAL_SEED, 0), EVAL_HORIZON, step, zero_value, switches)[0]

    def iteration(carry, i):
        theta, opt_state = carry
        loss, g = value_and_grad(theta, start_states(seed, i))
        g_used = jnp.where(clip_on, clip.update(g, clip.init(g))[0], g)
        updates, opt_state = opt.update(g_used, opt_state, theta)
        return (optax.apply_updates(theta, updates), opt_state), (jnp.linalg.norm(g), jnp.linalg.norm(g_used), loss)

    theta0 = jnp.zeros(3)
    (theta, _), (norms, used, losses) = jax.lax.scan(iteration, (theta0, opt.init(theta0)), jnp.arange(n_iterations))
    return norms, used, losses, jnp.stack([evaluate(theta0), evaluate(theta)])


def training_run(horizon, n_iterations, seed, value, loss_variant=None, clip_on=True, record="raw"):
    """(raw norms, clipped norms, window losses, eval before/after) of the clipped SGD run; the keywords switch to
    the catalogued mistakes (a window loss of _LOSS_VARIANTS, no clipping, the wrong norm recorded)."""
    run = _train_run(
        int(seed),
        int(horizon),
        int(n_iterations),
        value,
        jnp.asarray(_LOSS_VARIANTS[loss_variant]),
        jnp.asarray(clip_on),
    )
    norms, used, losses, evals = (np.asarray(a) for a in run)
    if record == "after_clip":
        norms = used
    elif record == "clipped_is_raw":
        used = norms
    return norms, used, losses, evals


#: Short runs, compared value by value: every choice is fixed by the spec (starts, loss, optimiser, order
#: of record and update), so faithful implementations differ by rounding only. Measured: perturbing every
#: step of the dynamics by one ulp (three sign patterns) moves any output by at most 7e-14 (h = 8, 16;
#: 12 iterations) and 7e-12 (h = 32, 5 iterations); another seed moves them by 90 % to 150 %, every
#: catalogued mistake by more than 0.2. The band 1e-6 accepts faithful implementations and nothing else.
#: h = 32 is kept short because its training is chaotic once the contact spikes begin: the same
#: perturbation grows to 2e-11 after 8 and 4e-8 after 12 iterations (to 0.2 after 25, see _LONG_RUN).
#: The hidden runs draw their seeds each term (_train_cases: a drawn run must pass the same one-ulp perturbations,
#: 1000 times inside the band); these seeds were the hidden ones before.
_TRAIN_CASES = ((8, 12, 3, "hidden"), (16, 12, 5, "hidden"), (32, 5, 14, "hidden"))
_TRAIN_PUBLIC = ((8, 6, 31, "public"), (16, 5, 32, "public"))
TRAIN_RTOL = 1e-6


def _train_outputs(case, scale=None):
    """The reference run of ``case``, or with every step perturbed by ``scale`` (one of _PERTURBED_SCALES)."""
    switches, clip_on = jnp.asarray(_LOSS_VARIANTS[None]), jnp.asarray(True)
    run = _train_run(
        int(case["seed"]),
        int(case["horizon"]),
        int(case["n_iterations"]),
        case["value"],
        switches,
        clip_on,
        scale=None if scale is None else jnp.asarray(scale),
    )
    return tuple(np.asarray(a) for a in run)


def _train_acceptable(case) -> bool:
    """A run that stays finite and lowers the evaluation loss, clips in some iteration and has no gradient norm
    within 0.1 % of the threshold (where the clipped norms would hardly differ from the raw ones), and moves by at
    most 1e-9 (a thousandth of TRAIN_RTOL) under one-ulp perturbations of the dynamics."""
    norms, _, losses, evals = _train_outputs(case)
    return bool(
        np.all(np.isfinite(norms))
        and np.all(np.isfinite(losses))
        and evals[1] < evals[0]
        and np.any(norms > CLIP)
        and np.all(np.abs(norms / CLIP - 1.0) > 1e-3)
        and _stable(_train_outputs, case, 1e-9)
    )


def _train_cases():
    """The hidden runs draw their seeds each term (horizons, budgets and the terminal value stay)."""
    if case_value(False, True):
        cases = _runs(_TRAIN_PUBLIC)
        for case in cases:
            norms, _, losses, evals = _train_outputs(case)
            assert np.all(np.isfinite(norms)) and np.all(np.isfinite(losses)) and evals[1] < evals[0], case
        return cases
    return _drawn_runs(77_302, _TRAIN_CASES, _train_acceptable)


_MINI_DIFFSIM_P3_CHECKS += (
    Check(
        "train",
        _train_cases,
        reference=training_run,
        outputs=(
            Output("裁剪前的梯度范数", rtol=TRAIN_RTOL),
            Output("裁剪后的梯度范数", rtol=TRAIN_RTOL),
            Output("每次迭代的窗口损失", rtol=TRAIN_RTOL),
            Output("评估损失 [训练前, 训练后]", rtol=TRAIN_RTOL),
        ),
        mistakes={
            "mds_norm_after_clip": Variant(MDS_NORM_AFTER_CLIP, record="after_clip"),
            "mds_clipped_is_raw": Variant(MDS_CLIPPED_IS_RAW, record="clipped_is_raw"),
            "mds_no_terminal": Variant(MDS_NO_TERMINAL, loss_variant="no_terminal"),
            "mds_batch_sum": Variant(MDS_BATCH_SUM, loss_variant="batch_sum"),
            "mds_no_clip": Variant(MDS_NO_CLIP, clip_on=False),
        },
    ),
)

#: A longer h = 32 run. After 25 iterations one-ulp perturbations of the dynamics (nine patterns) move its
#: outputs by up to 18 %, so it is compared through course_check.adapters.long_run_summary: the
#: first LONG_PREFIX = 4 iterations value by value (perturbation: <= 5e-11; 6e-10 with 5, 6e-8 with 6;
#: band 1e-6), which also means made-up numbers cannot pass, then four properties. For this seed every
#: perturbed run stays finite, records the same spike (raw norm 267, far above SPIKE = 10) and lowers the
#: evaluation loss to 0.661..0.666 of its start. Over seeds 20..35 every clipped run stayed finite with a
#: spike above 260, but at other seeds the evaluation loss rose for some perturbations (up to 1.64 times),
#: so the seed matters; without clipping this run (like most) ends in NaN. The hidden run draws its seed each
#: term and keeps it only if the run and three one-ulp perturbations of it pass (_long_acceptable); 28 was the
#: hidden seed before.
_LONG_RUN = {"horizon": 32, "n_iterations": 25, "seed": 28, "value": "hidden"}
_LONG_PUBLIC = {"horizon": 32, "n_iterations": 25, "seed": 41, "value": "public"}


def long_run(horizon, n_iterations, seed, value, **switches):
    """long_run_summary of :func:`training_run` (its switches: the catalogued mistakes)."""
    return long_run_summary(training_run(horizon, n_iterations, seed, value, **switches), CLIP)


def _long_acceptable(case) -> bool:
    """The reference run and its one-ulp perturbations (_PERTURBED_SCALES) all hold the four properties with a
    margin (a spike above twice SPIKE, the evaluation loss lowered to 0.9 of its start or less) and agree on the
    graded prefix to 1e-9 (a thousandth of TRAIN_RTOL); training without clipping differs clearly (a property,
    or the prefix by more than 1e-3)."""
    reference = _train_outputs(case)
    runs = [reference, *(_train_outputs(case, scale) for scale in _PERTURBED_SCALES)]
    summaries = [long_run_summary(run, CLIP) for run in runs]
    unclipped = long_run(**case, clip_on=False)
    return bool(
        all([int(f) for f in summary[1:]] == [1, 1, 1, 1] for summary in summaries)
        and all(np.max(run[0]) > 2 * SPIKE and run[3][1] <= 0.9 * run[3][0] for run in runs)
        and all(spread_.deviation(summaries[0][0], summary[0]) <= 1e-9 for summary in summaries[1:])
        and ([int(f) for f in unclipped[1:]] != [1, 1, 1, 1] or spread_.deviation(summaries[0][0], unclipped[0]) > 1e-3)
    )


def _long_run_cases():
    """The hidden run draws its seed each term (horizon, budget and terminal value stay), redrawn until the run is
    robust (_long_acceptable): the check grades properties that a faithful implementation must meet too."""
    if case_value(False, True):
        assert [int(f) for f in long_run(**_LONG_PUBLIC)[1:]] == [1, 1, 1, 1]
        return [_LONG_PUBLIC]
    rng = case_rng(77_303)
    return [draw_until(lambda: {**_LONG_RUN, "seed": _draw_seed(rng)}, _long_acceptable)]


_MINI_DIFFSIM_P3_CHECKS += (
    Check(
        "train_long",
        _long_run_cases,
        reference=long_run,
        outputs=(
            Output(f"前 {LONG_PREFIX} 次迭代的 [裁剪前的梯度范数, 窗口损失]", rtol=TRAIN_RTOL),
            Output("性质检查“全程没有 NaN/Inf（梯度范数、损失、评估损失）”", "integer"),
            Output(f"性质检查“裁剪前的梯度范数记录到了接触尖峰（最大值 > {SPIKE:g}）”", "integer"),
            Output("性质检查“裁剪后的范数 = min(裁剪前的范数, CLIP)”", "integer"),
            Output("性质检查“评估损失下降（训练后 < 训练前）”", "integer"),
        ),
        mistakes={
            "mds_norm_after_clip": Variant(MDS_NORM_AFTER_CLIP, record="after_clip"),
            "mds_no_terminal": Variant(MDS_NO_TERMINAL, loss_variant="no_terminal"),
            "mds_no_clip": Variant(MDS_NO_CLIP, clip_on=False),
        },
    ),
)


# ==================================================================================================
# Stage 4: the debugging panel (mini_diffsim_p4)
# ==================================================================================================

#: the panel's finite-difference check: central differences along a fixed unit direction in theta
PANEL_EPS = 1e-3
PANEL_DIRECTION = np.array([0.6, -0.48, 0.64])


@partial(jax.jit, static_argnames=("horizon", "n_iterations", "value", "variant", "step"))
def _panel_run(seed, horizon, n_iterations, value, variant=None, step=task_step, scale=None):
    if scale is not None:  # every step's result perturbed (_scaled)
        step = _scaled(step, scale)
    opt = optax.chain(optax.clip_by_global_norm(CLIP), optax.sgd(LR))
    d = jnp.asarray(PANEL_DIRECTION)

    def loss_fn(theta, x_starts):
        return window_loss(theta, x_starts, horizon, step, TERMINAL_VALUES[value])

    def record(theta, x_starts):
        (loss, (terms, states)), g = jax.value_and_grad(loss_fn, has_aux=True)(theta, x_starts)
        ys, vs = states[:, 1:, 0], states[:, 1:, 1]
        count = jnp.sum(task_force(ys, vs) > 0) if variant == "contact_by_force" else jnp.sum(ys < 0)
        plus = loss_fn(theta + PANEL_EPS * d, x_starts)[0]
        if variant == "fd_forward":
            fd = (plus - loss) / PANEL_EPS
        else:
            fd = (plus - loss_fn(theta - PANEL_EPS * d, x_starts)[0]) / (2 * PANEL_EPS)
        ad = jnp.dot(g, d)
        row = (
            terms,
            jnp.linalg.norm(g),
            count.astype(jnp.float64),
            jnp.maximum(0.0, -jnp.min(ys)),
            jnp.max(task_force(ys, vs)),
            cl.relative_error(ad, fd),
        )
        return row, g

    def iteration(carry, i):
        theta, opt_state = carry
        x_starts = start_states(seed, i)
        row, g = record(theta, x_starts)
        updates, opt_state = opt.update(g, opt_state, theta)
        theta_next = optax.apply_updates(theta, updates)
        if variant == "after_update":
            row = record(theta_next, x_starts)[0]
        return (theta_next, opt_state), row

    theta0 = jnp.zeros(3)
    return jax.lax.scan(iteration, (theta0, opt.init(theta0)), jnp.arange(n_iterations))[1]


def panel_data(horizon, n_iterations, seed, value, variant=None):
    """The panel's rows of the training run (``variant``: a catalogued mistake)."""
    return tuple(np.asarray(a) for a in _panel_run(int(seed), int(horizon), int(n_iterations), value, variant))


#: Hidden panel runs: a seed unseen in the notebook (which uses 0), the hidden terminal value. Both runs
#: have an iteration whose central difference straddles a contact kink (with seed 101: FD error 0.65 at
#: iteration 3 of the h = 16 run, 0.57 and 0.60 at iterations 0 and 1 of the h = 32 run), so the FD column has
#: a scale far above rounding; most seeds have none at h = 16 with this terminal value, and then the column is
#: rounding-dominated truncation error (~1e-6) that no band can compare robustly. h = 32 is kept to three
#: iterations because its training is chaotic (see _TRAIN_CASES). The hidden runs draw their seeds each term,
#: redrawn until the run has such a kink and passes the perturbations below (_panel_acceptable); 101 was the
#: hidden seed before.
_PANEL_CASES = ((16, 8, 101, "hidden"), (32, 3, 101, "hidden"))
_PANEL_PUBLIC = ((16, 5, 167, "public"), (32, 3, 180, "public"))  # the second: counting contacts by force > 0 differs

#: Bands of the panel, measured on the hidden runs: perturbing every step of the dynamics by one ulp
#: (three sign patterns) moves the first five columns by at most 2e-13 (h = 16) and 4e-12 (h = 32; 2e-8
#: with a fourth iteration) relative, and the FD column by at most 6e-11 of its largest entry. The FD
#: error is a difference quotient at eps = 1e-3: where the loss is smooth at that scale it is truncation
#: error (1e-8 .. 1e-5), across a contact kink it is of order 1, and rounding adds about
#: 1e-16 |L| / eps ~ 1e-12. It is compared at the scale of its largest entry with a band of 1e-4: far above
#: rounding, below the gap of every catalogued mistake in that column (forward difference: 0.2 and 0.9).
PANEL_RTOL = 1e-6
PANEL_FD_RTOL = 1e-4


def _panel_outputs(case, scale=None, variant=None):
    """The panel of ``case``, with every step perturbed by ``scale`` (one of _PERTURBED_SCALES) or a mistake."""
    scale = None if scale is None else jnp.asarray(scale)
    rows = _panel_run(
        int(case["seed"]), int(case["horizon"]), int(case["n_iterations"]), case["value"], variant, scale=scale
    )
    return tuple(np.asarray(a) for a in rows)


def _panel_acceptable(case) -> bool:
    """A panel with an iteration whose central difference straddles a contact kink (FD error above 0.1, so the FD
    column has a scale far above rounding), contacts, and every mistake in sight: a contact with no force (damper
    clipped), a forward difference at least 1e-2 (100 bands) away. Under one-ulp perturbations of the dynamics
    the first five columns move by at most 1e-9 and the FD column by at most 1e-7 of its largest entry (a
    thousandth of PANEL_RTOL and PANEL_FD_RTOL)."""
    rows = _panel_outputs(case)
    if not (all(np.all(np.isfinite(r)) for r in rows) and np.max(rows[5]) > 0.1 and np.max(rows[2]) > 0):
        return False
    by_force = _panel_outputs(case, variant="contact_by_force")[2]
    forward = _panel_outputs(case, variant="fd_forward")[5]
    limits = (1e-9,) * 5 + (1e-7,)
    return bool(
        not np.array_equal(by_force, rows[2])
        and spread_.deviation(rows[5], forward) > 1e-2
        and all(
            spread_.deviation(r, p) <= limit
            for scale in _PERTURBED_SCALES
            for r, p, limit in zip(rows, _panel_outputs(case, scale), limits)
        )
    )


def _panel_cases():
    """The hidden runs draw their seeds each term (horizons, budgets and the terminal value stay)."""
    if case_value(False, True):
        cases = _runs(_PANEL_PUBLIC)
        for case in cases:
            rows = _panel_outputs(case)
            assert all(np.all(np.isfinite(r)) for r in rows)
            assert np.max(rows[5]) > 0.1 and np.max(rows[2]) > 0, case  # a kink is straddled, contact happens
        return cases
    # about 1 seed in 30 passes at h = 16 (a run of 8 iterations takes milliseconds): 2000 tries
    return _drawn_runs(77_401, _PANEL_CASES, _panel_acceptable, tries=2000)


_MINI_DIFFSIM_P4_CHECKS = (
    Check(
        "panel_data",
        _panel_cases,
        reference=panel_data,
        outputs=(
            Output("loss 分项 (n, 4)", rtol=PANEL_RTOL),
            Output("梯度范数", rtol=PANEL_RTOL),
            Output("接触数量"),
            Output("最大穿透深度", rtol=PANEL_RTOL),
            Output("接触力峰值", rtol=PANEL_RTOL),
            Output("有限差分误差", rtol=PANEL_FD_RTOL),
        ),
        mistakes={
            "mds_panel_after_update": Variant(MDS_PANEL_AFTER_UPDATE, variant="after_update"),
            "mds_contact_by_force": Variant(MDS_CONTACT_BY_FORCE, variant="contact_by_force"),
            "mds_fd_forward": Variant(MDS_FD_FORWARD, variant="fd_forward"),
        },
    ),
)


# ==================================================================================================
# The exercise specs; the wrong answers are edits of the notebooks' own solution cells
# ==================================================================================================

# MODELS (stage 1) is defined in the notebook's setup cell too, but holds functions and is not a literal
# that sources.setup_constants can read, so it is not declared; stage 3-4 constants live in the task cells.
_P2_KEEP = ("forces_answer", "ball_answer")

EXERCISES = (
    Exercise(
        "mini_diffsim_p1",
        _MINI_DIFFSIM_P1_CHECKS,
        wrong_answers=(
            # semi-implicit Euler updates the position with the OLD velocity; RK4 stages 2 and 3 take full steps
            WrongAnswer(
                "题目要求半隐式欧拉",
                keep=("steps_answer",),
                edits={
                    "integrators_answer": [
                        (
                            "q_next = x[:n] + h * f(jnp.concatenate([x[:n], v_next]), u, p)[:n]",
                            "q_next = x[:n] + h * f(x, u, p)[:n]  # position with the OLD velocity",
                        ),
                        ("k2 = f(x + 0.5 * h * k1, u, p)", "k2 = f(x + h * k1, u, p)"),
                        ("k3 = f(x + 0.5 * h * k2, u, p)", "k3 = f(x + h * k2, u, p)"),
                    ]
                },
            ),
            # a forward difference in the directional check; the rollout collects x_0 .. x_{N-1}
            WrongAnswer(
                "前向差分",
                keep=("integrators_answer",),
                edits={
                    "check_answer": [
                        (
                            "(float(loss(z + e * d)) - float(loss(z - e * d))) / (2 * e)",
                            "(float(loss(z + e * d)) - float(loss(z))) / e",
                        )
                    ],
                    "horizon_answer": [("return x_next, x_next", "return x_next, x  # collects x_0 .. x_{N-1}")],
                },
            ),
        ),
        shortcuts=(
            # course_lib's integrators bound to the notebook's names instead of written: every graded function steps
            # through them, so every point is lost (course_check.adapters.own_code refuses them)
            Shortcut(
                "参考实现",
                edits={
                    "integrators_answer": [
                        (
                            "        return x + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)\n\n    return step",
                            "        return x + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)\n\n    return step\n\n\n"
                            "explicit_euler, semi_implicit_euler, rk4 = cl.explicit_euler, cl.semi_implicit_euler, cl.rk4",
                        )
                    ]
                },
                keep=("steps_answer", "check_answer", "horizon_answer"),
                loses=10.0,
            ),
        ),
    ),
    Exercise(
        "mini_diffsim_p2",
        _MINI_DIFFSIM_P2_CHECKS,
        wrong_answers=(
            # the penalty law without its damper; the softplus law's rate still gated by [phi < 0]
            WrongAnswer(
                "只有弹簧项",
                edits={
                    "forces_answer": [
                        (
                            "d_dot = jnp.where(phi < 0, -phi_dot, 0.0)\n    return jnp.maximum(0.0, k * d + c * d_dot)",
                            "return k * d",
                        ),
                        ("d_dot = -phi_dot * jax.nn.sigmoid(-beta * phi)", "d_dot = jnp.where(phi < 0, -phi_dot, 0.0)"),
                    ]
                },
            ),
            # only the last ||dx_N/dx_0||_F of the sweep; a forward difference at the contact boundary
            WrongAnswer(
                "只取最后一步",
                keep=_P2_KEEP,
                edits={
                    "sweep_answer": [
                        ("float(jnp.max(jnp.linalg.norm(sens, axis=(1, 2))))", "float(jnp.linalg.norm(sens[-1]))")
                    ],
                    "boundary_answer": [
                        (
                            "(float(loss(x0 + e * d)) - float(loss(x0 - e * d))) / (2 * e)",
                            "(float(loss(x0 + e * d)) - float(loss(x0))) / e",
                        )
                    ],
                },
            ),
        ),
        constants={"SWEEP_DAMPING": SWEEP_DAMPING, "CHECK_H": CHECK_H, "CHECK_K": CHECK_K, "CHECK_C": CHECK_C},
    ),
    Exercise(
        "mini_diffsim_p3",
        _MINI_DIFFSIM_P3_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "没有加终端价值",
                keep=("train_answer",),
                edits={
                    "loss_answer": [  # terminal value dropped
                        ("jnp.append(acc, terminal_value(x_end))", "jnp.append(acc, 0.0)"),
                    ]
                },
            ),
            WrongAnswer(
                "没有裁剪梯度",
                keep=("loss_answer",),
                edits={
                    "train_answer": [  # the unclipped optimiser
                        ("optimizer = OPTIMIZERS[clip]", "optimizer = OPTIMIZERS[False]"),
                    ]
                },
            ),
            WrongAnswer(
                "裁剪之前",
                keep=("loss_answer",),
                edits={
                    "train_answer": [  # the norm recorded after clipping
                        (
                            "g_norm = jnp.linalg.norm(grad)",
                            "g_norm = jnp.minimum(jnp.linalg.norm(grad), CLIP)  # after clipping",
                        ),
                    ]
                },
            ),
        ),
    ),
    Exercise(
        "mini_diffsim_p4",
        _MINI_DIFFSIM_P4_CHECKS,
        wrong_answers=(
            # contact counted by force > 0; a forward difference in the FD column
            WrongAnswer(
                "按间隙判定接触",
                keep=("stage123_paste",),  # earlier stages done: the public check runs on them
                edits={
                    "panel_answer": [
                        ("jnp.sum(y < 0)", "jnp.sum(force_fn(y, v) > 0)"),
                        ("f = (sides[0] - sides[1]) / (2 * PANEL_EPS)", "f = (sides[0] - loss) / PANEL_EPS"),
                    ]
                },
            ),
            # the row taken after the parameter update
            WrongAnswer(
                "在参数更新之后记录",
                keep=("stage123_paste",),  # earlier stages done: the public check runs on them
                edits={
                    "panel_answer": [
                        (
                            "    (loss, (terms, states)), grad = jax.value_and_grad",
                            "    updates, opt_state = optimizer.update(jax.grad(lambda t: loss_fn(t, x_starts, horizon)[0])(theta), opt_state, theta)\n"
                            "    theta = optax.apply_updates(theta, updates)  # updated BEFORE the row is taken\n"
                            "    (loss, (terms, states)), grad = jax.value_and_grad",
                        ),
                        (
                            "    updates, opt_state = optimizer.update(grad, opt_state, theta)\n    return row, optax.apply_updates(theta, updates), opt_state",
                            "    return row, theta, opt_state",
                        ),
                    ]
                },
            ),
        ),
    ),
)
