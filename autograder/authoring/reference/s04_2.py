"""Reference solutions and graded checks for section S04.2 (discrete dynamics and sensitivities).

* ``s04_2_ex1``: A, B of explicit and semi-implicit Euler for the double integrator (u = acceleration),
  as the Jacobians of ``course_lib``'s step functions.
* ``s04_2_ex2``: the linear inverted pendulum ``c'' = w^2 (c - p_zmp)``, w = sqrt(g/h): its zero-order-hold
  exact discretisation (matrix exponential of the augmented system) and dx_N/du_0 = A^(N-1) B.
* ``s04_2_ex3``: along a given pendulum rollout near the upright equilibrium: step Jacobians, per-step
  spectral norms, log10 singular values of the running product A_k ... A_0, and ||dx_{k+1}/du_0||_2.
"""

from __future__ import annotations

import functools
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value, drawing_key
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------

AB_CONTINUOUS_TIME = (
    "结果与连续时间矩阵 A_c=∂f/∂x、B_c=∂f/∂u 吻合：那是连续方程右端的导数，还没经过积分器；要对离散步进映射 F_h 求导。"
)
AB_EXACT_ZOH = "B 的第一个元素是 h²/2：这是输入在一步内保持不变时的精确离散化，不是题目要的欧拉格式（显式欧拉这里是 0，半隐式欧拉是 h²）。"
LIPM_EXPLICIT_EULER = "结果与显式欧拉近似 A = I + Δt·A_c、B = Δt·B_c 吻合：那只是一阶近似，题目要求零阶保持下的精确离散化 A = e^{A_c Δt}（cosh/sinh 的形式）。"
LIPM_SEMI_IMPLICIT_EULER = (
    "结果与半隐式欧拉步的 Jacobian 吻合：题目要求零阶保持下的精确离散化（矩阵指数），不是任何一种欧拉格式。"
)
LIPM_RK4 = "结果与单步 RK4 的 Jacobian 吻合：RK4 只把矩阵指数展开到 4 阶，误差约 (ωΔt)⁵/120；题目要求精确离散化。"
LIPM_OMEGA_WITHOUT_SQRT = "结果与 ω = g/h_com（忘了开方）时的值吻合：自然频率是 ω = √(g/h_com)，即 ω² = g/h_com。"
LIPM_OMEGA_INVERTED = "结果与 ω = √(h_com/g)（分子分母颠倒）时的值吻合：倒立摆的自然频率是 ω = √(g/h_com)，单位是 1/s；√(h/g) 的单位是秒。"
LIPM_RECTANGLE_B = (
    "B 与端点矩形公式 Δt·e^{A_c Δt}·B_c 吻合：零阶保持的 B 是积分 (∫₀^Δt e^{A_c s} ds)·B_c，不能只取一个端点。"
)
CHAIN_TRANSPOSED_STEPS = "每一步的 A_k 都被转置了：A_k[i, j] 应是 ∂x_{k+1}[i]/∂x_k[j]（行对应输出、列对应输入）。"
CHAIN_SHIFTED_STATES = (
    "结果与在 x_{k+1} 处线性化的值吻合：A_k、B_k 要在 (x_k, u_k) 处求，即用 xs 的前 N 行，而不是后 N 行。"
)
CHAIN_FROBENIUS = "结果与 Frobenius 范数吻合：题目要的是谱范数 ‖A_k‖₂（最大奇异值），例如 np.linalg.norm(A, 2)。"
CHAIN_SPECTRAL_RADIUS = "结果与谱半径 max|λ(A_k)| 吻合：题目要的是谱范数（最大奇异值）；对非正规矩阵两者并不相等。"
CHAIN_ASCENDING = "奇异值的顺序反了：每一行应从大到小排列（σ₁ ≥ σ₂）；np.linalg.eigvalsh 等函数是从小到大返回的。"
CHAIN_STEP_SINGULAR_VALUES = "结果与单个 A_k 的奇异值吻合：题目要的是累积乘积 Φ_k = A_k⋯A_1A_0 的奇异值。"
CHAIN_NATURAL_LOG = "结果与自然对数 ln σ 吻合：题目要求以 10 为底的对数 log10 σ。"
CHAIN_NORM_PRODUCT = "结果与各步范数之积 ‖A_k‖₂⋯‖A_1‖₂·‖B_0‖₂ 吻合：那只是上界；应先把矩阵连乘起来，再对乘积取谱范数。"

# --- exercise 1: double integrator, explicit vs semi-implicit Euler -------------------------------

_DI = cl.DoubleIntegratorParams()  # mass 1: the input is the acceleration


def _step_jacobians(step, x, u, p):
    a, b = jax.jacobian(step, argnums=(0, 1))(x, u, p)
    return np.asarray(a), np.asarray(b)


def ab_explicit(dt):
    return _step_jacobians(cl.explicit_euler(cl.double_integrator, dt), jnp.array([0.3, -0.2]), jnp.array([0.7]), _DI)


def ab_semi_implicit(dt):
    return _step_jacobians(
        cl.semi_implicit_euler(cl.double_integrator, dt), jnp.array([0.3, -0.2]), jnp.array([0.7]), _DI
    )


def _ab_continuous(dt):
    return np.array([[0.0, 1.0], [0.0, 0.0]]), np.array([[0.0], [1.0]])


def _ab_exact(dt):
    return np.array([[1.0, dt], [0.0, 1.0]]), np.array([[dt**2 / 2], [dt]])


def _ex1_cases():
    rng = case_rng(204_201)
    return [
        {"dt": float(round(dt, 4))} for dt in (rng.uniform(0.02, 0.06), rng.uniform(0.12, 0.2), rng.uniform(0.3, 0.5))
    ]


_AB_OUTPUTS = (Output("矩阵 A", "exact"), Output("矩阵 B", "exact"))

_S04_2_EX1_CHECKS = (
    Check(
        "ab_explicit",
        _ex1_cases,
        reference=ab_explicit,
        outputs=_AB_OUTPUTS,
        mistakes={
            "semi_implicit_euler": Mistake(messages.SEMI_IMPLICIT_EULER, ab_semi_implicit),
            "ab_exact_zoh": Mistake(AB_EXACT_ZOH, _ab_exact),
            "ab_continuous_time": Mistake(AB_CONTINUOUS_TIME, _ab_continuous),
        },
    ),
    Check(
        "ab_semi_implicit",
        _ex1_cases,
        reference=ab_semi_implicit,
        outputs=_AB_OUTPUTS,
        mistakes={
            "explicit_euler": Mistake(messages.EXPLICIT_EULER, ab_explicit),
            "ab_exact_zoh": Mistake(AB_EXACT_ZOH, _ab_exact),
            "ab_continuous_time": Mistake(AB_CONTINUOUS_TIME, _ab_continuous),
        },
    ),
)

# --- exercise 2: LIPM, zero-order-hold exact discretisation -------------------------------------

GRAVITY = 9.81


def _lipm_continuous(h_com, omega_sq=None):
    w2 = GRAVITY / h_com if omega_sq is None else omega_sq
    return np.array([[0.0, 1.0], [w2, 0.0]]), np.array([[0.0], [-w2]])


def lipm_ab(h_com, dt, omega_sq=None):
    """A = e^{A_c dt}, B = (int_0^dt e^{A_c s} ds) B_c, from the exponential of the augmented matrix."""
    a_c, b_c = _lipm_continuous(h_com, omega_sq)
    aug = np.zeros((3, 3))
    aug[:2, :2], aug[:2, 2:] = a_c, b_c
    e = np.asarray(jsl.expm(jnp.asarray(aug * dt)))
    return e[:2, :2], e[:2, 2:]


def _lipm_euler(h_com, dt):
    a_c, b_c = _lipm_continuous(h_com)
    return np.eye(2) + dt * a_c, dt * b_c


def _lipm_integrator(h_com, dt, integrator):
    """A, B of one step of a course_lib integrator (not the exact discretisation)."""
    step = cl.make_integrator(integrator, cl.lipm, dt)
    return _step_jacobians(
        step, jnp.array([0.05, 0.1]), jnp.array([0.02]), cl.LIPMParams(gravity=GRAVITY, height=h_com)
    )


def _lipm_rectangle(h_com, dt):
    a, _ = lipm_ab(h_com, dt)
    return a, dt * a @ _lipm_continuous(h_com)[1]


def _lipm_no_sqrt(h_com, dt):
    return lipm_ab(h_com, dt, omega_sq=(GRAVITY / h_com) ** 2)


def _lipm_inverted(h_com, dt):
    return lipm_ab(h_com, dt, omega_sq=h_com / GRAVITY)


def _lipm_ab_continuous(h_com, dt):
    return _lipm_continuous(h_com)


def sensitivity(h_com, dt, N, ab=lipm_ab):
    """dx_N/du_0 by differentiating an N-step rollout of x_{k+1} = A x_k + B u_k (equals A^(N-1) B)."""
    a, b = (jnp.asarray(m) for m in ab(h_com, dt))

    def final_state(us):
        return cl.rollout(lambda x, u, p: a @ x + b @ u, jnp.zeros(2), us, None)[-1]

    return np.asarray(jax.jacobian(final_state)(jnp.zeros((int(N), 1)))[:, 0, :])


def _power_sensitivity(h_com, dt, N, shift):
    """A^(N-1+shift) B: the sensitivity with the horizon off by ``shift``."""
    a, b = lipm_ab(h_com, dt)
    power = int(N) - 1 + shift
    m = np.linalg.matrix_power(a, power) if power >= 0 else np.linalg.matrix_power(np.linalg.inv(a), -power)
    return m @ b


def _ex2_ab_cases():
    rng = case_rng(204_202)
    heights = rng.uniform(0.45, 1.3, size=3).round(3)
    return [{"h_com": float(h), "dt": dt} for h, dt in zip(heights, (0.05, 0.012, 0.08))]


def _ex2_sens_cases():
    rng = case_rng(204_203)
    heights = rng.uniform(0.45, 1.3, size=4).round(3)
    return [
        {"h_com": float(h), "dt": dt, "N": n} for h, dt, n in zip(heights, (0.03, 0.01, 0.02, 0.05), (1, 37, 64, 9))
    ]


_S04_2_EX2_CHECKS = (
    Check(
        "lipm_ab",
        _ex2_ab_cases,
        reference=lipm_ab,
        outputs=_AB_OUTPUTS,
        mistakes={
            "lipm_explicit_euler": Mistake(LIPM_EXPLICIT_EULER, _lipm_euler),
            "lipm_semi_implicit_euler": Mistake(
                LIPM_SEMI_IMPLICIT_EULER, functools.partial(_lipm_integrator, integrator="semi_implicit_euler")
            ),
            "lipm_rk4": Mistake(LIPM_RK4, functools.partial(_lipm_integrator, integrator="rk4")),
            "lipm_omega_without_sqrt": Mistake(LIPM_OMEGA_WITHOUT_SQRT, _lipm_no_sqrt),
            "lipm_omega_inverted": Mistake(LIPM_OMEGA_INVERTED, _lipm_inverted),
            "lipm_rectangle_b": Mistake(LIPM_RECTANGLE_B, _lipm_rectangle),
            "ab_continuous_time": Mistake(AB_CONTINUOUS_TIME, _lipm_ab_continuous),
        },
    ),
    Check(
        "sensitivity",
        _ex2_sens_cases,
        reference=sensitivity,
        outputs=(Output("∂x_N/∂u_0", "exact"),),
        mistakes={
            "horizon_plus_one": Mistake(messages.HORIZON_PLUS_ONE, functools.partial(_power_sensitivity, shift=+1)),
            "horizon_minus_one": Mistake(messages.HORIZON_MINUS_ONE, functools.partial(_power_sensitivity, shift=-1)),
            "lipm_explicit_euler": Variant(LIPM_EXPLICIT_EULER, ab=_lipm_euler),
            "lipm_omega_inverted": Variant(LIPM_OMEGA_INVERTED, ab=_lipm_inverted),
            "lipm_omega_without_sqrt": Variant(LIPM_OMEGA_WITHOUT_SQRT, ab=_lipm_no_sqrt),
        },
    ),
)

# --- exercise 3: a pendulum rollout near upright, the chain of step Jacobians ---------------------

_PEND = cl.PendulumParams()  # m = 1, l = 1, g = 9.81, b = 0.1


def pendulum_rollout(x0, dt, n, us=None):
    """The rollout the exercise's setup cell provides: semi-implicit Euler, torques ``us`` (zero by default)."""
    step = cl.semi_implicit_euler(cl.pendulum, dt)
    us = jnp.zeros((int(n), 1)) if us is None else jnp.asarray(us, dtype=jnp.float64).reshape(int(n), 1)
    return np.asarray(cl.rollout(step, jnp.asarray(x0, dtype=jnp.float64), us, _PEND)), np.asarray(us)


def step_jacobians(xs, us, dt, integrator="semi_implicit_euler", offset=0):
    step = cl.make_integrator(integrator, cl.pendulum, dt)
    n = us.shape[0]
    lin = cl.linearize_trajectory(step, jnp.asarray(xs)[offset : offset + n], jnp.asarray(us), _PEND)
    return np.asarray(lin.A), np.asarray(lin.B)


def _continuous_jacobians(xs, us, dt):
    n = us.shape[0]
    a, b = jax.vmap(jax.jacobian(cl.pendulum, argnums=(0, 1)), in_axes=(0, 0, None))(
        jnp.asarray(xs[:n]), jnp.asarray(us), _PEND
    )
    return np.asarray(a), np.asarray(b)


def _transposed_steps(xs, us, dt):
    return tuple(np.swapaxes(m, 1, 2) if i == 0 else m for i, m in enumerate(step_jacobians(xs, us, dt)))


def step_norms(As, kind=2):
    return np.array([np.linalg.norm(a, kind) for a in As])


def _spectral_radius(As):
    return np.array([np.max(np.abs(np.linalg.eigvals(a))) for a in As])


def _products(As):
    out, m = [], np.eye(As.shape[-1])
    for a in As:
        m = a @ m
        out.append(m)
    return np.array(out)


def product_log10_sv(As):
    """log10 of the singular values of Phi_k = A_k ... A_0, k = 0..N-1, each row descending."""
    return np.log10(np.linalg.svd(_products(np.asarray(As)), compute_uv=False))


def _ascending_sv(As):
    return product_log10_sv(As)[:, ::-1]


def _step_log10_sv(As):
    return np.log10(np.linalg.svd(np.asarray(As), compute_uv=False))


def _natural_log_sv(As):
    return np.log(10.0) * product_log10_sv(As)


def _product_log10_sv_minus_one(As):
    return product_log10_sv(np.concatenate([np.eye(2)[None], np.asarray(As)[:-1]]))


def cumulative_grad_norms(As, Bs):
    """g_k = ||A_k ... A_1 B_0||_2 = ||dx_{k+1}/du_0||_2, k = 0..N-1."""
    g, out = np.asarray(Bs[0]), []
    for k, a in enumerate(np.asarray(As)):
        if k:
            g = a @ g
        out.append(np.linalg.norm(g, 2))
    return np.array(out)


def _grad_norms_plus_one(As, Bs):
    return np.array([np.linalg.norm(m @ Bs[0], 2) for m in _products(np.asarray(As))])


def _norm_product(As, Bs):
    return np.linalg.norm(Bs[0], 2) * np.cumprod(np.concatenate([[1.0], step_norms(As)[1:]]))


def _ex3_rollouts():
    return _rollouts_of(drawing_key())


#: the hidden rollouts: two from rest near the upright equilibrium (offsets of 1e-4 .. 1e-3 rad, either side),
#: one from further away with random torques; the number of steps is fixed, the start and the step size drawn
_EX3_HIDDEN_N = (70, 110, 40)


@functools.lru_cache(maxsize=None)
def _rollouts_of(key):
    rng = case_rng(204_204)
    torques_hidden = 0.5 * rng.normal(size=_EX3_HIDDEN_N[2])
    torques_public = 0.5 * rng.normal(size=35)
    # the hidden starts and steps, drawn after the public torques (the public cases stay what they were)
    offsets = rng.choice([-1.0, 1.0], 2) * 10.0 ** rng.uniform(-4.0, -3.0, 2)
    rate = rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-3.5, -2.5)
    steps = rng.uniform(0.018, 0.03, 3).round(4)
    far = (round(float(rng.uniform(2.2, 2.6)), 4), round(float(rng.uniform(0.3, 0.7)), 4))
    specs = case_value(
        [
            ((np.pi + float(offsets[0].round(6)), 0.0), float(steps[0]), _EX3_HIDDEN_N[0], None),
            ((np.pi + float(offsets[1].round(6)), float(round(rate, 6))), float(steps[1]), _EX3_HIDDEN_N[1], None),
            (far, float(steps[2]), _EX3_HIDDEN_N[2], torques_hidden),
        ],
        [((np.pi - 8e-4, 1e-3), 0.03, 60, None), ((2.0, -0.4), 0.035, 35, torques_public)],
    )
    out = []
    for x0, dt, n, us in specs:
        xs, us = pendulum_rollout(x0, dt, n, us)
        out.append((xs, us, dt))
    return tuple(out)


def _ex3_jac_cases():
    return [{"xs": xs, "us": us, "dt": dt} for xs, us, dt in _ex3_rollouts()]


def _ex3_chain_cases(with_b):
    def cases():
        out = []
        for xs, us, dt in _ex3_rollouts():
            a, b = step_jacobians(xs, us, dt)
            out.append({"As": a, "Bs": b} if with_b else {"As": a})
        return out

    return cases


_S04_2_EX3_CHECKS = (
    Check(
        "step_jacobians",
        _ex3_jac_cases,
        reference=step_jacobians,
        outputs=(Output("A_k 序列", "exact"), Output("B_k 序列", "exact")),
        mistakes={
            "explicit_euler": Variant(messages.EXPLICIT_EULER, integrator="explicit_euler"),
            "chain_shifted_states": Variant(CHAIN_SHIFTED_STATES, offset=1),
            "chain_transposed_steps": Mistake(CHAIN_TRANSPOSED_STEPS, _transposed_steps),
            "ab_continuous_time": Mistake(AB_CONTINUOUS_TIME, _continuous_jacobians),
        },
    ),
    Check(
        "step_norms",
        _ex3_chain_cases(False),
        reference=step_norms,
        outputs=(Output("逐步谱范数", "exact"),),
        mistakes={
            "chain_frobenius": Variant(CHAIN_FROBENIUS, kind="fro"),
            "chain_spectral_radius": Mistake(CHAIN_SPECTRAL_RADIUS, _spectral_radius),
        },
    ),
    Check(
        "product_log10_sv",
        _ex3_chain_cases(False),
        reference=product_log10_sv,
        # sigma_min of a product with condition number c carries a relative error ~ c * eps whatever
        # the method, so exact agreement to 1e4 eps is not attainable: compare to 1.5e-5 of max |log10 sigma|.
        outputs=(Output("乘积奇异值的 log10", "finite_difference"),),
        mistakes={
            "chain_ascending": Mistake(CHAIN_ASCENDING, _ascending_sv),
            "chain_step_singular_values": Mistake(CHAIN_STEP_SINGULAR_VALUES, _step_log10_sv),
            "chain_natural_log": Mistake(CHAIN_NATURAL_LOG, _natural_log_sv),
            "horizon_minus_one": Mistake(messages.HORIZON_MINUS_ONE, _product_log10_sv_minus_one),
        },
    ),
    Check(
        "cumulative_grad_norms",
        _ex3_chain_cases(True),
        reference=cumulative_grad_norms,
        outputs=(Output("累计梯度范数", "exact"),),
        mistakes={
            "horizon_plus_one": Mistake(messages.HORIZON_PLUS_ONE, _grad_norms_plus_one),
            "chain_norm_product": Mistake(CHAIN_NORM_PRODUCT, _norm_product),
        },
    ),
)

# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

_FLOAT = ", dtype=np.float64)"

EXERCISES = (
    Exercise(
        "s04_2_ex1",
        _S04_2_EX1_CHECKS,
        constants={"P_DI": _DI},
        wrong_answers=(
            WrongAnswer(
                "题目要求半隐式欧拉",
                edits={  # the two schemes swapped
                    "ab_explicit_answer": [
                        ("B = np.array([[0.0], [dt]]" + _FLOAT, "B = np.array([[dt * dt], [dt]]" + _FLOAT)
                    ],
                    "ab_semi_implicit_answer": [
                        ("B = np.array([[dt * dt], [dt]]" + _FLOAT, "B = np.array([[0.0], [dt]]" + _FLOAT)
                    ],
                },
            ),
            WrongAnswer(
                "转置",
                keep=("ab_semi_implicit_answer",),
                edits={  # rows and columns mixed up: A transposed, B a row
                    "ab_explicit_answer": [
                        ("A = np.array([[1.0, dt], [0.0, 1.0]]", "A = np.array([[1.0, 0.0], [dt, 1.0]]"),
                        ("B = np.array([[0.0], [dt]]", "B = np.array([[0.0, dt]]"),
                    ],
                },
            ),
        ),
        shortcuts=(
            # A and B from course_lib's AD linearisation of the two steps instead of derived: every point is lost
            # (course_check.adapters.by_hand refuses the transform cl.linearize calls)
            Shortcut(
                "亲手推出导数",
                edits={
                    cell: [
                        (
                            "    A = np.array([[1.0, dt], [0.0, 1.0]]" + _FLOAT,
                            f"    lin = cl.linearize(cl.{scheme}(cl.double_integrator, dt), jnp.zeros(2), jnp.zeros(1), P_DI)\n"
                            "    return np.asarray(lin.A), np.asarray(lin.B)",
                        )
                    ]
                    for cell, scheme in (
                        ("ab_explicit_answer", "explicit_euler"),
                        ("ab_semi_implicit_answer", "semi_implicit_euler"),
                    )
                },
                loses=4.0,
            ),
        ),
    ),
    Exercise(
        "s04_2_ex2",
        _S04_2_EX2_CHECKS,
        constants={"G": GRAVITY},
        wrong_answers=(
            WrongAnswer(
                "零阶保持",
                keep=("sensitivity_answer",),
                edits={  # explicit Euler instead of the exact ZOH map
                    "lipm_ab_answer": [
                        (
                            "    A = np.array([[ch, sh / w], [w * sh, ch]]"
                            + _FLOAT
                            + "\n    B = np.array([[1.0 - ch], [-w * sh]]"
                            + _FLOAT,
                            "    A = np.eye(2) + dt * np.array([[0.0, 1.0], [w * w, 0.0]])\n    B = dt * np.array([[0.0], [-w * w]])",
                        )
                    ],
                },
            ),
            WrongAnswer(
                "√(g/h_com)",
                keep=("sensitivity_answer",),
                edits={"lipm_ab_answer": [("w = np.sqrt(G / h_com)", "w = np.sqrt(h_com / G)")]},  # omega upside down
            ),
            WrongAnswer(
                "多算一步",
                keep=("lipm_ab_answer",),
                edits={  # one power of A too many
                    "sensitivity_answer": [
                        ("np.linalg.matrix_power(A, int(N) - 1)", "np.linalg.matrix_power(A, int(N))")
                    ],
                },
            ),
        ),
    ),
    Exercise(
        "s04_2_ex3",
        _S04_2_EX3_CHECKS,
        constants={"P_PEND": _PEND},
        wrong_answers=(
            # Frobenius norm per step; singular values from eigvalsh of the Gram matrix (ascending)
            WrongAnswer(
                "从大到小",
                keep=("step_jacobians_answer", "cumulative_grad_norms_answer"),
                edits={
                    "step_norms_answer": [
                        (
                            "return np.linalg.svd(np.asarray(As), compute_uv=False)[:, 0]",
                            "return np.array([np.linalg.norm(A) for A in As])",
                        )
                    ],
                    "product_log10_sv_answer": [
                        (
                            "rows.append(np.linalg.svd(Phi, compute_uv=False))  # svd 已按从大到小排好",
                            "rows.append(np.sqrt(np.linalg.eigvalsh(Phi.T @ Phi)))",
                        )
                    ],
                },
            ),
            # Jacobians transposed per step; the gradient "norm" as a product of step norms
            WrongAnswer(
                "上界",
                keep=("step_norms_answer", "product_log10_sv_answer"),
                edits={
                    "step_jacobians_answer": [
                        (
                            "return np.asarray(As), np.asarray(Bs)",
                            "return np.swapaxes(np.asarray(As), 1, 2), np.asarray(Bs)",
                        )
                    ],
                    "cumulative_grad_norms_answer": [
                        (
                            "        J = A_k @ J  # dx_{k+1}/du_0 = A_k dx_k/du_0\n        out.append(np.linalg.norm(J, 2))",
                            "        out.append(out[-1] * np.linalg.norm(A_k, 2))",
                        )
                    ],
                },
            ),
        ),
        shortcuts=(
            # every function handed to the course_lib diagnostics the notebook says not to call: all points lost
            # (course_check.adapters.own_code refuses them)
            Shortcut(
                "参考实现",
                edits={
                    "step_jacobians_answer": [
                        (
                            "    n = us.shape[0]\n",
                            "    lin = cl.linearize_trajectory(make_step(dt), jnp.asarray(xs), jnp.asarray(us), P_PEND)\n"
                            "    return np.asarray(lin.A), np.asarray(lin.B)\n",
                        )
                    ],
                    "step_norms_answer": [
                        (
                            "return np.linalg.svd(np.asarray(As), compute_uv=False)[:, 0]",
                            "return np.asarray(cl.step_spectral_norms(jnp.asarray(As)))",
                        )
                    ],
                    "product_log10_sv_answer": [
                        (
                            "    Phi = np.eye(2)\n",
                            "    return np.asarray(cl.product_log_singular_values(jnp.asarray(As)))\n",
                        )
                    ],
                    "cumulative_grad_norms_answer": [
                        (
                            "    As, Bs = np.asarray(As), np.asarray(Bs)\n",
                            "    return np.asarray(cl.gradient_norm_vs_horizon(jnp.asarray(As), jnp.asarray(Bs)))\n",
                        )
                    ],
                },
                loses=7.0,
            ),
        ),
    ),
)
