"""Reference solutions and graded checks for section S04.1."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer

ROLLOUTS_N = "只数了 N 次仿真：中心差分每个维度要正、负各扰动一次，共 2N 次。"
ROLLOUTS_ONE = "仿真次数是 1：多半是用 jax.vmap 把全部扰动放进了一次调用。批量计算并不省仿真，2N 条扰动轨迹一条也没少，题目数的是仿真的条数：中心差分要 2N 次。"
NO_RESIDUAL = "结果与 h²(N − i) 吻合：漏了链式法则最外层的残差因子。L = ½(q_N − 1)²，所以 ∂L/∂u_i = (q_N − 1)·∂q_N/∂u_i，而 ∂q_N/∂u_i = h²(N − i)。"
ROLLOUTS_N_PLUS_ONE = "数成了 N+1 次仿真（像前向差分那样多算一次基准）：中心差分需要 2N 次。"

TARGET = 1.0


def _terminal_loss(us, dt, integrator):
    step = cl.make_integrator(integrator, cl.double_integrator, dt)
    xs = cl.rollout(step, jnp.zeros(2), jnp.reshape(us, (-1, 1)), cl.DoubleIntegratorParams())
    return 0.5 * (xs[-1, 0] - TARGET) ** 2


def analytic_grad(u, dt, integrator="semi_implicit_euler"):
    """dL/du for L = (x_N - 1)^2 / 2 on the double integrator (one reverse pass)."""
    return np.asarray(jax.grad(_terminal_loss)(jnp.asarray(u), dt, integrator))


def fd_grad(u, dt, eps=1e-6, scheme="central"):
    """Central-difference gradient and the number of rollouts it used (2N)."""
    u = np.asarray(u, dtype=np.float64)
    loss = jax.jit(lambda us: _terminal_loss(us, dt, "semi_implicit_euler"))
    grad = np.zeros_like(u)
    count = 0
    base = float(loss(u)) if scheme == "forward" else None
    count += scheme == "forward"
    for i in range(u.size):
        e = np.zeros_like(u)
        e[i] = eps
        if scheme == "forward":
            grad[i] = (float(loss(u + e)) - base) / eps
            count += 1
        else:
            grad[i] = (float(loss(u + e)) - float(loss(u - e))) / (2 * eps)
            count += 2
    return grad, count


def _cases():
    rng = case_rng(104_101)
    return [{"u": rng.normal(size=n).round(6), "dt": dt} for n, dt in ((7, 0.05), (23, 0.1), (40, 0.02))]


def _fd_cases():
    """The gradient's cases with a step eps: L is quadratic in u, so central differences are exact at any eps
    while one-sided ones are off by eps/2 * d2L/du_i2; at these eps that is far outside the tolerance."""
    rng = case_rng(104_102)
    settings = case_value(
        ((7, 0.05, 0.2), (23, 0.1, 0.05), (40, 0.02, 0.5)), ((7, 0.05, 0.1), (23, 0.1, 0.2), (40, 0.02, 0.3))
    )
    return [{"u": rng.normal(size=n).round(6), "dt": dt, "eps": eps} for n, dt, eps in settings]


def _shifted_horizon(u, dt, shift):
    """What an off-by-one horizon gives: the formula dt^2 (N - i + shift) (x_N - 1)."""
    g = analytic_grad(u, dt)
    n = np.arange(len(u))
    per_step = dt**2 * (len(u) - n)
    return g / per_step * (per_step + shift * dt**2)


def _no_residual(u, dt):
    """h^2 (N - i): the chain rule without the residual (x_N - 1)."""
    return dt**2 * (len(u) - np.arange(len(u)))


def _fd_explicit_euler(u, dt, eps):
    return analytic_grad(u, dt, "explicit_euler"), 2 * len(u)


def _fd_forward(u, dt, eps):
    return fd_grad(u, dt, eps, "forward")[0], 2 * len(u)


def _rollouts_n(u, dt, eps):
    return analytic_grad(u, dt), len(u)


def _rollouts_n_plus_one(u, dt, eps):
    return analytic_grad(u, dt), len(u) + 1


def _rollouts_one(u, dt, eps):
    return analytic_grad(u, dt), 1


_S04_1_EX1_CHECKS = (
    Check(
        "fd_grad",
        _fd_cases,
        reference=lambda u, dt, eps: (analytic_grad(u, dt), 2 * len(u)),
        # the count alone is easy to get right: the gradient carries two thirds of each case
        outputs=(Output("中心差分梯度", "finite_difference", weight=2.0), Output("仿真次数", "integer", weight=1.0)),
        mistakes={
            "explicit_euler": Mistake(messages.EXPLICIT_EULER, _fd_explicit_euler),
            "forward_difference": Mistake(messages.FORWARD_DIFFERENCE, _fd_forward),
            "rollouts_n": Mistake(ROLLOUTS_N, _rollouts_n),
            "rollouts_n_plus_one": Mistake(ROLLOUTS_N_PLUS_ONE, _rollouts_n_plus_one),
            "rollouts_one": Mistake(ROLLOUTS_ONE, _rollouts_one),
        },
    ),
    Check(
        "analytic_grad",
        _cases,
        reference=lambda u, dt: analytic_grad(u, dt),
        variant_of=analytic_grad,
        outputs=(Output("解析梯度", "exact"),),
        mistakes={
            "explicit_euler": Variant(messages.EXPLICIT_EULER, integrator="explicit_euler"),
            "horizon_minus_one": Mistake(messages.HORIZON_MINUS_ONE, partial(_shifted_horizon, shift=-1)),
            "horizon_plus_one": Mistake(messages.HORIZON_PLUS_ONE, partial(_shifted_horizon, shift=+1)),
            "no_residual": Mistake(NO_RESIDUAL, _no_residual),
        },
    ),
)


# --- s04_1_ex2: system identification of the friction block --------------------------------
#
# Model (course_lib.friction_block): m v' = u - b v - f_c tanh(v / v_s), x = (q, v), p = (m, b, f_c),
# smoothing speed V_SMOOTH (NOT the FrictionBlockParams default 0.01), semi-implicit Euler with step
# FB_DT. "Measured" data come from RK4 on the same model plus seeded noise, so the identified model
# (semi-implicit Euler) does not reproduce the data exactly, as with a real robot.

FB_DT = 0.01
FB_V_SMOOTH = 0.05
FB_RTOL = 1e-6
FB_NOISE = 2e-3

S041_DEFAULT_V_SMOOTH = "结果与平滑速度 v_s = 0.01（FrictionBlockParams 的默认值）吻合：本题规定 v_s = V_SMOOTH = 0.05，构造参数时要显式写 v_smooth=V_SMOOTH。"
S041_HARD_SIGN = "结果与用 sign(v) 的硬库仑摩擦吻合：题目要求平滑摩擦 f_c·tanh(v/v_s)，它在 v = 0 附近才可导。"
S041_PARAM_ORDER = "结果与把 p 读成 (m, f_c, b) 吻合：p 的顺序是 (m, b, f_c)，即质量、粘性阻尼、库仑摩擦。"
S041_X0_ZERO = "结果与“从原点出发仿真”吻合：仿真应从测量到的初始状态 x̂_0 = data['xs'][0] 出发。"
S041_POSITION_ONLY = "结果与“只比较位置”吻合：损失要把位置误差和速度误差都计入（Q = I）。"
S041_MEAN = "结果与“对平方误差取平均”吻合：本题的损失是对所有时刻、两个状态分量求和，不取平均。"
S041_TERMINAL_ONLY = "结果与只用终点灵敏度 ∂x_N/∂p（2×3 矩阵，秩至多为 2）吻合：要把 k = 0..N 每个时刻的 ∂x_k/∂p 纵向堆叠成 2(N+1)×3 的矩阵再求秩。"
S041_NO_THRESHOLD = (
    "把舍入误差量级（约 1e-16 倍）的奇异值也算进了秩：数值秩只数 σ_i > rtol·σ_max 的奇异值（rtol = 1e-6）。"
)
S041_MATRIX_RANK_DEFAULT = (
    "数值秩与 np.linalg.matrix_rank 的默认阈值（约 σ_1·矩阵边长·机器精度）吻合：题目规定的阈值是 rtol·σ_1。"
    "这个测试里有奇异值远小于 rtol·σ_1、却远大于机器精度：参数在数值上几乎分辨不出来，应当算作秩亏。"
)


def _sign_block(x, u, p):
    """friction_block with the unsmoothed Coulomb term f_c sign(v) (a known mistake)."""
    friction = p.damping * x[1] + p.coulomb * jnp.sign(x[1])
    return jnp.stack([x[1], (u[0] - friction) / p.mass])


@partial(jax.jit, static_argnames=("integrator", "v_smooth", "hard", "order"))
def _fb_sim_sens(p, us, x0, integrator="semi_implicit_euler", v_smooth=FB_V_SMOOTH, hard=False, order=(0, 1, 2)):
    """States (N+1, 2) and stacked sensitivities dx_k/dp (N+1, 2, 3) of the friction block."""
    step = cl.make_integrator(integrator, _sign_block if hard else cl.friction_block, FB_DT)

    def sim(theta):
        prm = cl.FrictionBlockParams(theta[order[0]], theta[order[1]], theta[order[2]], v_smooth)
        return cl.rollout(step, x0, us[:, None], prm)

    return sim(p), jax.jacfwd(sim)(p)


FB_PAD = 256  # inputs are zero-padded to this length so each variant compiles once (states up to N are unaffected)


def _fb(p, us, x0, **variant):
    us = np.asarray(us, np.float64)
    n = us.shape[0]
    if n > FB_PAD:
        raise ValueError(f"horizon {n} exceeds FB_PAD = {FB_PAD}")
    padded = np.concatenate([us, np.zeros(FB_PAD - n)])
    xs, s = _fb_sim_sens(jnp.asarray(p, jnp.float64), jnp.asarray(padded), jnp.asarray(x0, jnp.float64), **variant)
    return np.asarray(xs)[: n + 1], np.asarray(s)[: n + 1]


def fb_simulate(p, us, x0, **variant):
    """Reference rollout of the friction block: xs of shape (N+1, 2), xs[0] = x0."""
    return _fb(p, us, x0, **variant)[0]


def fb_sysid_loss_and_grad(p, us, xs, *, x0_zero=False, position_only=False, mean=False, **variant):
    """L(p) = sum_k ||x_k(p) - xs_k||^2 (simulated from xs[0]) and dL/dp = sum_k 2 (x_k - xs_k)^T dx_k/dp."""
    xs = np.asarray(xs, np.float64)
    x_sim, s = _fb(p, us, np.zeros(2) if x0_zero else xs[0], **variant)
    err = x_sim - xs
    if position_only:
        err[:, 1] = 0.0
    loss = float(np.sum(err**2))
    grad = 2.0 * np.einsum("ki,kij->j", err, s)
    if mean:
        loss, grad = loss / err.size, grad / err.size
    return loss, grad


def fb_sensitivity_rank(p, us, x0, rtol=FB_RTOL, terminal_only=False, no_threshold=False, numpy_default=False):
    """Numerical rank of the stacked sensitivities [dx_0/dp; ...; dx_N/dp] (shape 2(N+1) x 3)."""
    s = _fb(p, us, x0)[1]
    mat = s[-1] if terminal_only else s.reshape(-1, s.shape[-1])
    if numpy_default:
        return int(np.linalg.matrix_rank(mat))
    sv = np.linalg.svd(mat, compute_uv=False)
    if no_threshold:
        return int(np.sum(sv > 0.0))
    return int(np.sum(sv > rtol * sv[0])) if sv[0] > 0 else 0


def _multisine(rng, n):
    t = np.arange(n) * FB_DT
    amps = rng.uniform(0.5, 1.4, 3)
    omegas = 2 * np.pi * rng.uniform(0.3, 3.0, 3)
    phases = rng.uniform(0.0, 2 * np.pi, 3)
    return np.sum(amps * np.sin(t[:, None] * omegas + phases), axis=1).round(6)


def _measure(p_true, us, x0, rng):
    """'Measured' states: RK4 on the same model plus Gaussian noise of standard deviation FB_NOISE."""
    xs = fb_simulate(p_true, us, x0, integrator="rk4")
    return xs + FB_NOISE * rng.normal(size=xs.shape)


def _fb_sim_cases():
    rng = case_rng(104_102)
    cases = []
    for n, x0 in ((50, (0.1, -0.2)), (120, (0.0, 0.0)), (200, (-0.3, 0.5))):
        p = rng.uniform([0.6, 0.1, 0.3], [1.6, 0.5, 0.8]).round(6)
        cases.append({"p": p, "us": _multisine(rng, n), "x0": np.array(x0)})
    return cases


def _fb_sysid_cases():
    rng = case_rng(104_103)
    cases = []
    for n, x0 in ((50, (0.2, 0.3)), (120, (0.0, 0.0)), (200, (-0.1, -0.4))):
        p_true = rng.uniform([0.6, 0.1, 0.3], [1.6, 0.5, 0.8]).round(6)
        us = _multisine(rng, n)
        xs = _measure(p_true, us, np.array(x0), rng)
        p_guess = (p_true * rng.uniform(0.6, 1.5, 3)).round(6)
        cases.append({"p": p_guess, "us": us, "xs": xs})
    return cases


def _fb_rank_cases():
    rng = case_rng(104_104)
    p1, p2, p3, p4 = (rng.uniform([0.6, 0.1, 0.3], [1.6, 0.5, 0.8]).round(6) for _ in range(4))
    p5 = rng.uniform([0.6, 0.1, 0.3], [1.6, 0.5, 0.8]).round(6)  # drawn last: the cases above stay as they were
    v1 = -0.6  # constant velocity: the force that exactly balances friction at v1
    u1 = p1[1] * v1 + p1[2] * np.tanh(v1 / FB_V_SMOOTH)
    return [
        {"p": p1, "us": np.full(50, u1), "x0": np.array([0.2, v1])},  # rank 1
        {"p": p2, "us": np.zeros(120), "x0": np.array([0.0, 0.9])},  # coast-down, no force: rank 2
        {"p": p3, "us": _multisine(rng, 150), "x0": np.array([0.0, 0.0])},  # rank 3
        {"p": p4, "us": _multisine(rng, 200), "x0": np.array([0.1, 0.3])},  # rank 3
        # a whisper of excitation: |v| << v_s, where tanh is linear and f_c acts like extra damping. sigma_3 is
        # about 1e-8 sigma_1, between RTOL and np.linalg.matrix_rank's default threshold (~1e-13): rank 2
        {"p": p5, "us": 1e-3 * _multisine(rng, 150), "x0": np.array([0.0, 0.0])},
    ]


#: mistaken variants of the simulation: {name: (message, keyword arguments of the reference)}
_SIM_VARIANTS = {
    "explicit_euler": (messages.EXPLICIT_EULER, {"integrator": "explicit_euler"}),
    "s041_default_v_smooth": (S041_DEFAULT_V_SMOOTH, {"v_smooth": 0.01}),
    "s041_hard_sign": (S041_HARD_SIGN, {"hard": True}),
    "s041_param_order": (S041_PARAM_ORDER, {"order": (0, 2, 1)}),
}
_SYSID_VARIANTS = {
    **_SIM_VARIANTS,
    "s041_x0_zero": (S041_X0_ZERO, {"x0_zero": True}),
    "s041_position_only": (S041_POSITION_ONLY, {"position_only": True}),
    "s041_mean": (S041_MEAN, {"mean": True}),
}


def sysid_loss(p, us, xs, **variant):
    return fb_sysid_loss_and_grad(p, us, xs, **variant)[0]


def sysid_grad(p, us, xs, **variant):
    return fb_sysid_loss_and_grad(p, us, xs, **variant)[1]


_S04_1_EX2_CHECKS = (
    Check(
        "simulate",
        _fb_sim_cases,
        reference=lambda p, us, x0: fb_simulate(p, us, x0),
        variant_of=fb_simulate,
        outputs=(Output("状态轨迹", "exact"),),
        mistakes={name: Variant(message, **v) for name, (message, v) in _SIM_VARIANTS.items()},
    ),
    Check(
        "sysid_loss",
        _fb_sysid_cases,
        reference=sysid_loss,
        outputs=(Output("辨识损失", "exact"),),
        mistakes={name: Variant(message, **v) for name, (message, v) in _SYSID_VARIANTS.items()},
    ),
    Check(
        "sysid_grad",
        _fb_sysid_cases,
        reference=sysid_grad,
        outputs=(Output("损失对 p 的梯度", "exact"),),
        mistakes={name: Variant(message, **v) for name, (message, v) in _SYSID_VARIANTS.items()},
    ),
    Check(
        "sensitivity_rank",
        _fb_rank_cases,
        reference=lambda p, us, x0: fb_sensitivity_rank(p, us, x0),
        variant_of=fb_sensitivity_rank,
        outputs=(Output("数值秩", "integer"),),
        credit="above_constant",  # a rank guessed the same for every problem earns nothing (2 of 5 would pass)
        mistakes={
            "s041_terminal_only": Variant(S041_TERMINAL_ONLY, terminal_only=True),
            "s041_no_threshold": Variant(S041_NO_THRESHOLD, no_threshold=True),
            "s041_matrix_rank_default": Variant(S041_MATRIX_RANK_DEFAULT, numpy_default=True),
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

EXERCISES = (
    Exercise(
        "s04_1_ex1",
        _S04_1_EX1_CHECKS,
        wrong_answers=(
            # one rollout counted per component; the analytic gradient of explicit Euler (position with the old velocity)
            WrongAnswer(
                "2N",
                edits={
                    "fd_grad_answer": [("calls += 2", "calls += 1")],
                    "analytic_grad_answer": [
                        ("        v += dt * a\n        q_n += dt * v", "        q_n += dt * v\n        v += dt * a"),
                        ("(n - np.arange(n))", "(n - 1 - np.arange(n))"),
                    ],
                },
            ),
            # the perturbations counted as one batched call; the residual (q_N - 1) dropped from the chain rule
            WrongAnswer(
                "残差因子",
                edits={
                    "fd_grad_answer": [("calls += 2", "calls = 1")],
                    "analytic_grad_answer": [
                        ("return (q_n - 1.0) * dt**2 * (n - np.arange(n))", "return dt**2 * (n - np.arange(n))")
                    ],
                },
            ),
        ),
        shortcuts=(
            # a one-sided difference (half the rollouts) reported as 2N: the gradient's two thirds are lost
            Shortcut(
                "前向差分",
                edits={
                    "fd_grad_answer": [
                        (
                            "(float(terminal_loss(u + e, dt)) - float(terminal_loss(u - e, dt))) / (2 * eps)",
                            "(float(terminal_loss(u + e, dt)) - float(terminal_loss(u, dt))) / eps",
                        )
                    ],
                },
                keep=("analytic_grad_answer",),
                loses=2.0,
            ),
        ),
    ),
    Exercise(
        "s04_1_ex2",
        _S04_1_EX2_CHECKS,
        constants={"DT": FB_DT, "V_SMOOTH": FB_V_SMOOTH, "RTOL": FB_RTOL},
        wrong_answers=(
            # FrictionBlockParams built without v_smooth: the library default 0.01 instead of V_SMOOTH = 0.05
            WrongAnswer(
                "v_s = 0.01",
                keep=("sysid_loss_answer", "sysid_grad_answer", "sensitivity_rank_answer"),
                edits={
                    "simulate_answer": [(", coulomb=p[2], v_smooth=V_SMOOTH)", ", coulomb=p[2])")],
                },
            ),
            # np.linalg.matrix_rank with its default tolerance (~1e-13 sigma_1, not RTOL sigma_1)
            WrongAnswer(
                "matrix_rank",
                keep=("simulate_answer", "sysid_loss_answer", "sysid_grad_answer"),
                edits={
                    "sensitivity_rank_answer": [
                        (
                            "return int(np.sum(sigma > rtol * sigma[0]))",
                            "return int(np.linalg.matrix_rank(np.asarray(stacked).reshape(-1, 3)))",
                        )
                    ],
                },
            ),
            # mean instead of sum in the loss, and the rank of the terminal sensitivity dx_N/dp only
            WrongAnswer(
                "终点",
                keep=("simulate_answer", "sysid_grad_answer"),
                edits={
                    "sysid_loss_answer": [
                        ("return jnp.sum((predicted - measured) ** 2)", "return jnp.mean((predicted - measured) ** 2)")
                    ],
                    "sensitivity_rank_answer": [("np.asarray(stacked).reshape(-1, 3)", "np.asarray(stacked)[-1]")],
                },
            ),
        ),
    ),
)
