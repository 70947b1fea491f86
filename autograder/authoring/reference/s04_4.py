"""Reference solutions and graded checks for section S04.4 (contact non-smoothness).

* ``s04_4_ex1``: the 1-D bouncing ball over one step of size h, the impact located inside the step:
  the next state and the mode it took (``cl.impact_step``), and d x_{k+1} / d v_k in either mode
  (``jax.jacobian`` of ``cl.impact_step``; a closed form guards it); beside them the naive map of
  ``cl.naive_impact_step`` (a semi-implicit Euler step, then flip the velocity if it went through the
  ground) and its derivative, (h, 1) in flight and (h, -e) after the flip.
* ``s04_4_ex2``: the sigmoid-softened Heaviside sigma(alpha z) and its derivative in z, for alpha up
  to 2000 (|alpha z| up to 1000, where a naive exp overflows in float64).
* ``s04_4_ex3``: one row of a per-step contact log on the box pushed against a wall
  (``cl.box_wall_step``, two contacts: 0 floor, 1 wall): the contacts that switched mode, normal
  forces, |tangential| / normal ratios, modes from the friction cone, and ||dL/dx_k|| = ||A_k^T lam_{k+1}||.
  Hidden steps come from a rollout the student never sees; their modes and forces are course_lib's
  contact records.
* ``s04_4_ex4``: FoBG against ZoBG on sigmoid(alpha z) with the noise passed in: the per-sample terms
  of each, the mean with its naive standard error (N - 1 sample variance), and the coverage of the
  naive two-standard-error interval over many seeds (the heavy tail of FoBG on a steep loss).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------

S044_NAIVE_FLIP_END = "结果与“先按自由落体走完整步、穿地后再把末速度反向乘 e”的朴素映射一致：碰撞时刻 t* 没有进入映射，位置也停在了地面以下。应先求出步内的触地时刻 t*，在 t* 处反射速度，再用剩下的 τ = h − t* 继续飞行。"
S044_NAIVE_SEMI_IMPLICIT = "结果与 cl.naive_impact_step（半隐式欧拉走一步、穿地后再反向速度）一致：碰撞时刻 t* 没有进入映射。本题要的是在步内定位碰撞时刻的精确映射。"
S044_NO_RESTITUTION = "结果与 e = 1（完全弹性）的映射一致：反射时漏了恢复系数，碰后速度应为 v♯ = −e·v⁻。"
S044_NEGATIVE_ROOT = "碰撞时刻取了 y + v·t − ½g·t² = 0 的负根 (v − |v⁻|)/g：那是过去的时刻。要取正根 t* = (v + |v⁻|)/g，它落在这一步之内（0 < t* < h）。"
S044_REFLECT_V_FREE = "反射的是步末的自由速度 v − g·h，而不是触地瞬间的速度 v⁻ = v − g·t*：碰撞发生在 t* 时刻，要先算出 v⁻ 再乘以 −e，然后用剩余时间 τ = h − t* 继续飞行。"
S044_STOP_AT_IMPACT = "结果停在了碰撞瞬间（y = 0，v = −e·v⁻）：反射之后还要用剩余时间 τ = h − t* 从地面继续飞行。"
S044_DV_NAIVE = (
    "导数等于朴素映射（走完整步再反向速度）的导数 (h, −e)：碰撞时刻 t* 随初速度移动，这一效应完全没有进入导数。"
)
S044_DV_NO_RESTITUTION = (
    "导数与“链式法则里漏掉恢复系数 e”的结果一致：v♯ = −e·v⁻ 对 v 求导时，∂v⁻/∂v 前面的因子 e 不能丢。"
)
S044_DV_TSTAR_SIGN = "导数与 ∂t*/∂v = +t*/v⁻ 的结果一致：符号反了。对 y + v·t* − ½g·t*² = 0 两边对 v 求导得 t* + (v − g·t*)·∂t*/∂v = 0，即 ∂t*/∂v = −t*/v⁻（v⁻ < 0，所以它是正的：下落越慢，触地越晚）。"
S044_DV_TSTAR_FIXED = "导数与“把碰撞时刻 t* 当作常数”的结果一致：t* 随初速度 v 变化（对 y + v·t* − ½g·t*² = 0 两边求导可得 ∂t*/∂v），它同时改变碰前速度 v⁻ 和剩余飞行时间 τ。"
S044_NAIVE_NO_FLIP = "下一步状态与“只走一步半隐式欧拉、穿地后什么也不做”一致：朴素映射在 y_{k+1} < 0 时还要把末速度反向并乘 e（v⁺ = −e·v′），导数随之变成 (h, −e)。"
S044_NAIVE_EXPLICIT = "下一步状态与“按自由落体的精确抛物线走整步再反向速度”一致：本题的朴素映射是 cl.naive_impact_step 的半隐式欧拉一步，先 v′ = v − g·h，再 y′ = y + h·v′。"
S044_NAIVE_IS_EXACT = (
    "结果与步内定位碰撞时刻的精确映射一致：这里要的是朴素映射（穿地后才在步末反向速度），好让你把两者放在一起比较。"
)
S044_NAIVE_DV_SIGN = "朴素映射的 ∂v_{k+1}/∂v_k 符号反了：v⁺ = −e·(v − g·h) 对 v 求导得 −e。"
S044_SIGMOID_FLIPPED = (
    "函数值与 1/(1 + e^{+αz}) = 1 − σ(αz) 一致：指数里 z 的符号反了；z > 0 时软化阶跃应接近 1，z < 0 时接近 0。"
)
S044_GRAD_MISSING_ALPHA = "导数与 σ(αz)·(1 − σ(αz)) 一致：链式法则漏了内层 αz 对 z 的导数，也就是因子 α。"
S044_GRAD_WRT_ALPHA = "导数与 z·σ(αz)·(1 − σ(αz)) 一致：这是对 α 的导数，题目要的是对 z 的导数。"
S044_RATIO_INVERTED = "比值与 λ_n/|λ_t| 一致：比值写反了，应为切向/法向 |λ_t|/λ_n（滑动时恰好等于 μ）。"
S044_RATIO_SIGNED = "比值与 λ_t/λ_n（没取绝对值）一致：切向力有正有负，比值要用 |λ_t|/λ_n。"
S044_FORCE_IS_IMPULSE = "法向力与冲量 p_n 的数值相同：忘了除以步长 h（冲量 N·s 换算成这一步的平均力 N）。"
S044_MODE_SWAPPED = "模式编码与参考值相比 1 和 2 对调了：约定 1 = sticking（严格在摩擦锥内），2 = sliding（在锥面上）。"
S044_CONE_NO_MARGIN = (
    "接触模式与不带容差的判断 |p_t| ≥ μ·p_n 吻合：求解器给出的滑动接触落在锥面上，但舍入误差常让 |p_t| 比 μ·p_n "
    "小一两个最低位，于是被误判成 sticking。题目规定用 |p_t| ≥ (1 − 1e-6)·μ·p_n 判断，浮点数比较要留容差。"
)
S044_IDS_ACTIVE = "列出的是“正在接触”的接触点，而不是“这一步模式发生改变”的接触点：要与 prev_mode 比较。"
S044_IDS_ONE_BASED = "接触编号整体多了 1：编号从 0 开始（0 = 地面，1 = 墙）。"
S044_GRAD_NO_TRANSPOSE = "梯度范数与 ‖A_k·λ_{k+1}‖ 一致：伴随递推要用转置，∂L/∂x_k = A_kᵀ·∂L/∂x_{k+1}。"
S044_GRAD_NEXT = "梯度范数与 ‖∂L/∂x_{k+1}‖ 一致：差了一步，要先用 A_kᵀ 把梯度传回到 x_k。"
S044_GRAD_JACOBIAN_NORM = (
    "梯度范数与单步 Jacobian A_k 自身的 Frobenius 范数一致：要记录的是损失对状态的梯度 ∂L/∂x_k 的 2-范数。"
)
S044_FOBG_AT_THETA = (
    "每个逐样本项都相同，等于 L′(θ)：导数要在扰动后的点 θ + w_i 上求，FoBG 平均的是 N 个不同点上的导数。"
)
S044_ZOBG_NO_BASELINE = (
    "逐样本项与 L(θ + w_i)·w_i/σ² 一致：少了基线 L(θ)。不减基线时平均值仍然无偏，但每一项（和方差）都不同；"
    "题目要的是带基线的 (L(θ + w_i) − L(θ))·w_i/σ²。"
)
S044_ZOBG_SIGMA_ONCE = "逐样本项差了一个因子 σ：分母是 σ²，不是 σ（由 ∇ 𝔼 L(θ + w) = 𝔼 [L(θ + w)·w]/σ² 而来）。"
S044_STDERR_DDOF0 = "标准误与除以 N 的样本方差一致：题目要求除以 N − 1（np.std(..., ddof=1)），N 小时两者差得不少。"
S044_STDERR_NO_SQRT = "标准误与样本标准差本身一致：平均值的标准误还要再除以 √N。"
S044_COVERAGE_ONE_SE = "覆盖率与“区间取 ±1 倍标准误”的结果一致：题目的区间是 |ḡ − exact| ≤ 2·ŝ/√N。"
S044_COVERAGE_OUTSIDE = "结果是区间没有覆盖精确值的那部分种子所占的比例：要返回覆盖到的比例。"
S044_BUMP_NO_SHIFT = (
    "结果与“鼓包以 w = 0 为中心”的概率吻合：样本是 θ + w，要落进 |θ + w| < 2/α，"
    "即 w 落在 (−2/α − θ, 2/α − θ) 里，标准化时先减去 θ 再除以 σ。"
)
S044_BUMP_HALF_WIDTH = "结果与带宽取 |z| < 1/α 的概率吻合：题目的鼓包是 |z| < 2/α（导数降到峰值约 42% 的地方）。"
S044_BUMP_VARIANCE = "结果与标准化时除以 σ² 的概率吻合：w ~ N(0, σ²) 的标准差是 σ，Φ 的自变量是 (z − μ)/σ。"
S044_HARD_FOBG_SMOOTHED = (
    "FoBG 的结果不是 0：硬阶跃 H(z) 的导数在 z ≠ 0 处处为 0，自动微分（jax.grad(cl.heaviside_step)）给出的每一项都是 0，"
    "平均值和标准误也都是 0。用差分或用陡峭的 sigmoid 代替硬阶跃，算的就不是这个损失的 FoBG 了。"
)


# --- s04_4_ex1: bouncing ball, one step with the impact inside it ---------------------------------


def _impact_parts(x, h, g, e):
    """Closed-form pieces of the impact mode: (t*, v-, tau, y+, v+), numpy float64."""
    y, v = float(x[0]), float(x[1])
    root = np.sqrt(v * v + 2.0 * g * y)  # |v-|
    t_star = 2.0 * y / (root - v) if v <= 0 else (v + root) / g  # the positive root, without cancellation
    v_minus = v - g * t_star
    tau = h - t_star
    v_sharp = -e * v_minus
    return t_star, v_minus, tau, v_sharp * tau - 0.5 * g * tau * tau, v_sharp - g * tau


def _hits(x, h, g):
    return float(x[0]) + float(x[1]) * h - 0.5 * g * h * h < 0


@jax.jit
def _impact_and_dv(x, h, g, e):
    x_next, mode = cl.impact_step(x, h, g, e)
    jac = jax.jacobian(lambda s: cl.impact_step(s, h, g, e)[0])(x)
    return x_next, mode, jac[:, 1]


def ball_step(x, h, g, e):
    """(x_{k+1}, mode) of the exact step (cl.impact_step); mode 0 flight, 1 impact inside the step."""
    x_next, mode, _ = _impact_and_dv(jnp.asarray(x, dtype=jnp.float64), h, g, e)
    return np.asarray(x_next), int(mode)


def ball_step_dv(x, h, g, e):
    """(d y_{k+1}/d v_k, d v_{k+1}/d v_k) by jax.jacobian of cl.impact_step."""
    _, _, dv = _impact_and_dv(jnp.asarray(x, dtype=jnp.float64), h, g, e)
    return float(dv[0]), float(dv[1])


def _naive_flip_end(x, h, g, e):
    y, v = float(x[0]), float(x[1])
    y_free, v_free = y + v * h - 0.5 * g * h * h, v - g * h
    return (np.array([y_free, -e * v_free]), 1) if y_free < 0 else (np.array([y_free, v_free]), 0)


def _naive_semi_implicit(x, h, g, e):
    x_next, mode = cl.naive_impact_step(jnp.asarray(x, dtype=jnp.float64), h, g, e)
    return np.asarray(x_next), int(mode)


@jax.jit
def _naive_and_dv(x, h, g, e):
    x_next, _ = cl.naive_impact_step(x, h, g, e)
    jac = jax.jacobian(lambda s: cl.naive_impact_step(s, h, g, e)[0])(x)
    return x_next, jac[:, 1]


def naive_ball_step(x, h, g, e):
    """(x_{k+1}, d y_{k+1}/d v_k, d v_{k+1}/d v_k) of cl.naive_impact_step (jax.jacobian); in closed form the
    derivatives are (h, 1) in flight and (h, -e) once the step went through the ground."""
    x_next, dv = (np.asarray(a) for a in _naive_and_dv(jnp.asarray(x, dtype=jnp.float64), h, g, e))
    return x_next, float(dv[0]), float(dv[1])


def _naive_closed_form(x, h, g, e, kind="semi_implicit"):
    """naive_ball_step in closed form; ``kind`` switches to a catalogued mistake."""
    y, v = float(x[0]), float(x[1])
    if kind == "exact":
        x_next, _ = ball_step(x, h, g, e)
        return (x_next, *ball_step_dv(x, h, g, e))
    if kind == "explicit":
        y_next, v_next = y + v * h - 0.5 * g * h * h, v - g * h
    else:
        v_next = v - g * h
        y_next = y + h * v_next
    if y_next >= 0 or kind == "no_flip":
        return np.array([y_next, v_next]), h, 1.0
    return np.array([y_next, -e * v_next]), h, (e if kind == "dv_sign" else -e)


def _no_restitution(x, h, g, e):
    return ball_step(x, h, g, 1.0)


def _impact_closed_form(x, h, g, e, root="positive", reflect="v_minus"):
    """The exact step in closed form; the mistakes: the negative root for t*, or reflecting the end-of-step
    velocity v - g h."""
    if not _hits(x, h, g):
        return ball_step(x, h, g, e)
    y, v = float(x[0]), float(x[1])
    speed = np.sqrt(v * v + 2.0 * g * y)
    t_star = (v + speed) / g if root == "positive" else (v - speed) / g
    v_sharp = -e * ((v - g * t_star) if reflect == "v_minus" else (v - g * h))
    tau = h - t_star
    return np.array([v_sharp * tau - 0.5 * g * tau * tau, v_sharp - g * tau]), 1


def _stop_at_impact(x, h, g, e):
    if not _hits(x, h, g):
        return ball_step(x, h, g, e)
    _, v_minus, _, _, _ = _impact_parts(x, h, g, e)
    return np.array([0.0, -e * v_minus]), 1


def _dv_mistake(x, h, g, e, kind):
    """(d y_{k+1}/d v_k, d v_{k+1}/d v_k) of the catalogued mistake ``kind``."""
    if not _hits(x, h, g):
        return h, 1.0
    t_star, v_minus, tau, _, v_plus = _impact_parts(x, h, g, e)
    if kind == "naive":
        return h, -e
    if kind == "tstar_fixed":
        return -e * tau, -e
    if kind == "tstar_sign":
        dt_dv = t_star / v_minus
        dsharp = -e * (1.0 - g * dt_dv)
        return dsharp * tau - v_plus * dt_dv, dsharp + g * dt_dv
    # "no_restitution": d v#/dv written as -(dv-/dv), the rest right
    dt_dv = -t_star / v_minus
    dsharp = -(1.0 - g * dt_dv)
    return dsharp * tau - v_plus * dt_dv, dsharp + g * dt_dv


def _ball_cases():
    """Six states: impacts while falling, an impact after rising within the step, two flights; no rest."""
    rng = case_rng(404_101)
    specs = [  # (mode wanted, y range, v range, public h, g, e range)
        (1, (0.005, 0.05), (-3.0, -0.6), 0.05, 9.81, (0.55, 0.95)),
        (0, (0.3, 1.0), (0.2, 2.0), 0.02, 9.81, (0.5, 0.9)),
        (1, (0.001, 0.004), (0.05, 0.15), 0.05, 9.81, (0.6, 0.9)),
        (1, (0.01, 0.06), (-2.5, -0.8), 0.04, 3.71, (0.3, 0.7)),
        (0, (0.08, 0.3), (-2.0, -0.5), 0.02, 9.81, (0.6, 0.95)),
        (1, (0.05, 0.15), (-4.0, -1.5), 0.1, 9.81, (0.7, 0.95)),
    ]
    # the hidden step sizes: 0.8 .. 1.25 times the public ones (at least 3 % away: in free flight the derivatives
    # are (h, 1) whatever the state), from a generator of their own, so the public draws stay what they were
    steps = case_rng(404_102)
    cases = []
    for mode, y_rng, v_rng, public_h, g, e_rng in specs:
        h = case_value(
            draw_until(
                lambda public_h=public_h: round(public_h * float(steps.uniform(0.8, 1.25)), 4),
                lambda h, public_h=public_h: abs(h / public_h - 1) > 0.03,
            ),
            public_h,
        )
        while True:
            x = np.array([round(rng.uniform(*y_rng), 5), round(rng.uniform(*v_rng), 5)])
            e = round(rng.uniform(*e_rng), 4)
            y_free = x[0] + x[1] * h - 0.5 * g * h * h
            if abs(y_free) < 0.002 or (y_free < 0) != bool(mode):
                continue  # away from the mode boundary, in the mode wanted
            if mode:
                t_star, _, tau, y_plus, _ = _impact_parts(x, h, g, e)
                if not (0.15 * h < t_star < 0.85 * h and y_plus > 1e-4):
                    continue  # impact well inside the step, and the rebound stays up
            break
        cases.append({"x": x, "h": h, "g": g, "e": e})
    return cases


_S04_4_EX1_CHECKS = (
    Check(
        "ball_step",
        _ball_cases,
        reference=ball_step,
        variant_of=_impact_closed_form,
        outputs=(Output("下一步状态 x_{k+1} = (y, v)", "exact"), Output("模式编号", "integer")),
        mistakes={
            "s044_naive_flip_end": Mistake(S044_NAIVE_FLIP_END, _naive_flip_end),
            "s044_naive_semi_implicit": Mistake(S044_NAIVE_SEMI_IMPLICIT, _naive_semi_implicit),
            "s044_no_restitution": Mistake(S044_NO_RESTITUTION, _no_restitution),
            "s044_stop_at_impact": Mistake(S044_STOP_AT_IMPACT, _stop_at_impact),
            "s044_negative_root": Variant(S044_NEGATIVE_ROOT, root="negative"),
            "s044_reflect_v_free": Variant(S044_REFLECT_V_FREE, reflect="v_free"),
        },
    ),
    Check(
        "ball_step_dv",
        _ball_cases,
        reference=ball_step_dv,
        outputs=(Output("∂y_{k+1}/∂v_k", "exact"), Output("∂v_{k+1}/∂v_k", "exact")),
        mistakes={
            "s044_dv_naive": Mistake(S044_DV_NAIVE, partial(_dv_mistake, kind="naive")),
            "s044_dv_no_restitution": Mistake(S044_DV_NO_RESTITUTION, partial(_dv_mistake, kind="no_restitution")),
            "s044_dv_tstar_fixed": Mistake(S044_DV_TSTAR_FIXED, partial(_dv_mistake, kind="tstar_fixed")),
            "s044_dv_tstar_sign": Mistake(S044_DV_TSTAR_SIGN, partial(_dv_mistake, kind="tstar_sign")),
        },
    ),
    Check(
        "naive_ball_step",
        _ball_cases,
        reference=naive_ball_step,
        variant_of=_naive_closed_form,
        outputs=(
            Output("朴素映射的下一步状态 x_{k+1} = (y, v)", "exact"),
            Output("朴素映射的 ∂y_{k+1}/∂v_k", "exact"),
            Output("朴素映射的 ∂v_{k+1}/∂v_k", "exact"),
        ),
        mistakes={
            "s044_naive_no_flip": Variant(S044_NAIVE_NO_FLIP, kind="no_flip"),
            "s044_naive_explicit": Variant(S044_NAIVE_EXPLICIT, kind="explicit"),
            "s044_naive_is_exact": Variant(S044_NAIVE_IS_EXACT, kind="exact"),
            "s044_naive_dv_sign": Variant(S044_NAIVE_DV_SIGN, kind="dv_sign"),
        },
    ),
)


# --- s04_4_ex2: sigmoid-softened Heaviside ---------------------------------------------------------

S044_OVERFLOW = (
    "这多半是上溢：float64 的 exp(x) 在 x 超过约 709 时就成了 inf，1/(1 + inf) 还算得出 0，"
    "但 inf/inf、inf·0 会得到 NaN。|αz| 很大的点上要用数值稳定的写法：jax.nn.sigmoid、cl.sigmoid_step，"
    "或按 z 的正负分两支（只对非正的自变量取 exp），导数写成 α·s·(1 − s)。"
)


def _sigmoid(s):
    return np.asarray(jax.nn.sigmoid(jnp.asarray(s, dtype=jnp.float64)))


def soft_step(z, alpha):
    """sigma(alpha z), the same values as cl.sigmoid_step."""
    return np.asarray(cl.sigmoid_step(jnp.asarray(z, dtype=jnp.float64), alpha))


_dsoft = jax.jit(jax.vmap(jax.grad(cl.sigmoid_step), in_axes=(0, None)))


def soft_step_grad(z, alpha):
    """d/dz sigma(alpha z) by jax.grad of cl.sigmoid_step (alpha s (1 - s) in closed form)."""
    z = np.asarray(z, dtype=np.float64)
    return np.asarray(_dsoft(jnp.asarray(z.ravel()), alpha)).reshape(z.shape)


def _sigmoid_flipped(z, alpha):
    return _sigmoid(-alpha * np.asarray(z))


def _grad_missing_alpha(z, alpha):
    return soft_step_grad(z, alpha) / alpha


def _grad_wrt_alpha(z, alpha):
    return np.asarray(z) * soft_step_grad(z, alpha) / alpha


def _soft_cases():
    """Five (z, alpha): alpha from 0.5 to 2000; every z set has a point near the step (|alpha z| < 1), so the
    reference's magnitude is the bump's, and the two largest alphas reach |alpha z| of 750 and 1000."""
    rng = case_rng(404_201)
    cases = []
    for alpha, z_max, n in ((0.5, 6.0, 7), (4.0, 1.5, 8), (30.0, 0.4, 9), (250.0, 3.0, 9), (2000.0, 0.5, 10)):
        z = rng.uniform(-z_max, z_max, size=n)
        z[0] = rng.uniform(-0.5, 0.5) / alpha  # near the step
        if alpha >= 250.0:
            z[1], z[2] = -z_max, z_max  # exp(-alpha z) = exp(750) or exp(1000): overflows in float64
        cases.append({"z": np.round(z, 6), "alpha": alpha})
    return cases


_S04_4_EX2_CHECKS = (
    Check(
        "soft_step",
        _soft_cases,
        reference=soft_step,
        outputs=(Output("σ(αz)", "exact"),),
        nonfinite_hint=S044_OVERFLOW,
        mistakes={"s044_sigmoid_flipped": Mistake(S044_SIGMOID_FLIPPED, _sigmoid_flipped)},
    ),
    Check(
        "soft_step_grad",
        _soft_cases,
        reference=soft_step_grad,
        outputs=(Output("导数 dσ(αz)/dz", "exact"),),
        nonfinite_hint=S044_OVERFLOW,
        mistakes={
            "s044_grad_missing_alpha": Mistake(S044_GRAD_MISSING_ALPHA, _grad_missing_alpha),
            "s044_grad_wrt_alpha": Mistake(S044_GRAD_WRT_ALPHA, _grad_wrt_alpha),
        },
    ),
)


# --- s04_4_ex3: a contact log on the box pushed against a wall ------------------------------------

#: a contact is sliding when |p_t| >= (1 - SLIP_TOL) mu p_n, i.e. on the friction cone up to rounding
SLIP_TOL = 1e-6


def _log(
    contact,
    h,
    prev_mode,
    A,
    lam_next,
    *,
    ratio="abs",
    force="force",
    mode_codes=(0, 1, 2),
    ids="switched",
    grad="adjoint",
    cone_margin=SLIP_TOL,
):
    """One log row; the keyword arguments select the mistaken variants."""
    p_n = np.asarray(contact["p_n"], dtype=np.float64)
    p_t = np.asarray(contact["p_t"], dtype=np.float64)
    mu = np.asarray(contact["mu"], dtype=np.float64)
    active = p_n > 0
    sliding = np.abs(p_t) >= (1.0 - cone_margin) * mu * p_n
    mode = np.where(active, np.where(sliding, mode_codes[2], mode_codes[1]), mode_codes[0]).astype(np.int64)
    true_mode = np.where(active, np.where(sliding, 2, 1), 0)
    changed = np.flatnonzero(true_mode != np.asarray(prev_mode))
    contact_ids = {"switched": changed, "one_based": changed + 1, "active": np.flatnonzero(active)}[ids]
    normal = p_n / h if force == "force" else p_n
    safe_n = np.where(active, p_n, 1.0)
    safe_t = np.where(p_t != 0, np.abs(p_t), 1.0)
    ratios = {
        "abs": np.where(active, np.abs(p_t) / safe_n, 0.0),
        "signed": np.where(active, p_t / safe_n, 0.0),
        "inverted": np.where(p_t != 0, p_n / safe_t, 0.0),
    }[ratio]
    A, lam_next = np.asarray(A, dtype=np.float64), np.asarray(lam_next, dtype=np.float64)
    grad_norm = {
        "adjoint": np.linalg.norm(A.T @ lam_next),
        "no_transpose": np.linalg.norm(A @ lam_next),
        "next": np.linalg.norm(lam_next),
        "jacobian": np.linalg.norm(A),
    }[grad]
    return contact_ids.astype(np.int64), normal, ratios, mode, float(grad_norm)


def log_step(contact, h, prev_mode, A, lam_next):
    """(switched contact ids, normal forces, |tangential|/normal ratios, modes, ||A^T lam_next||)."""
    return _log(contact, h, prev_mode, A, lam_next)


def box_wall_log_data(h, floor_friction, wall_friction, x0, pushes, loss_weights):
    """Roll the box against the wall out with records and step Jacobians, then the adjoint of L = c . x_N.

    Args:
        pushes: ``[(horizontal force, number of steps), ...]`` (the vertical force is 0).
        loss_weights: ``c`` of the loss, shape (4,).

    Returns:
        dict of numpy arrays: ``xs (N+1, 4)``, ``record`` (ContactRecord of ``(N, 2)`` fields),
        ``A (N, 4, 4)``, ``lam (N+1, 4)`` with ``lam[k] = dL/dx_k``.
    """
    us = np.concatenate([np.tile([f, 0.0], (n, 1)) for f, n in pushes])
    params = cl.BoxWallParams(floor_friction=floor_friction, wall_friction=wall_friction)
    xs, record, As, lams = _box_wall_run(
        jnp.asarray(x0, dtype=jnp.float64), jnp.asarray(us), params, jnp.asarray(loss_weights, dtype=jnp.float64), h
    )
    return {
        "xs": np.asarray(xs),
        "record": jax.tree_util.tree_map(np.asarray, record),
        "A": np.asarray(As),
        "lam": np.asarray(lams),
    }


@partial(jax.jit, static_argnums=4)
def _box_wall_run(x0, us, params, c, h):
    step = cl.box_wall_step(h, with_record=True)

    def with_state(x, u):
        x_next, rec = step(x, u, params)
        return x_next, (x_next, rec)

    def forward(x, u):
        A, (x_next, rec) = jax.jacfwd(with_state, has_aux=True)(x, u)
        return x_next, (x_next, rec, A)

    _, (xs, record, As) = jax.lax.scan(forward, x0, us)

    def backward(lam, A):
        lam = A.T @ lam
        return lam, lam

    _, lams = jax.lax.scan(backward, c, As, reverse=True)
    return jnp.concatenate([x0[None], xs]), record, As, jnp.concatenate([lams, c[None]])


#: the hidden rollout's fixed part (the notebook's own rollout uses other frictions, step, start, pushes and loss);
#: its frictions, start velocity and push forces are drawn each term (_draw_log_rollout)
_HIDDEN_ROLLOUT = dict(
    h=0.004,
    floor_friction=0.6,
    wall_friction=0.25,
    x0=(0.55, 0.45, 2.4, 0.5),
    pushes=((6.0, 35), (-9.0, 45), (4.0, 60)),
    loss_weights=(1.0, 0.5, 0.0, 0.0),
)
#: the public cases: other pushes and friction coefficients, and these steps: in the air; wall touched (sliding);
#: wall sticking; last wall step before release (gradient spike); floor landing (sliding); floor sticking
_PUBLIC_ROLLOUT = {
    **_HIDDEN_ROLLOUT,
    "floor_friction": 0.5,
    "wall_friction": 0.3,
    "x0": (0.55, 0.45, 2.4, 0.52),
    "pushes": ((6.5, 35), (-9.5, 45), (4.5, 60)),
}
_PUBLIC_STEPS = (10, 31, 32, 34, 97, 98)


def _draw_log_rollout(rng):
    """A hidden rollout: frictions, start velocity and push forces drawn around _HIDDEN_ROLLOUT's (the step, the
    push durations and the loss stay, so the jitted rollout compiles once)."""
    return {
        **_HIDDEN_ROLLOUT,
        "floor_friction": round(float(rng.uniform(0.5, 0.7)), 3),
        "wall_friction": round(float(rng.uniform(0.2, 0.3)), 3),
        "x0": (0.55, 0.45, round(float(rng.uniform(2.2, 2.6)), 3), round(float(rng.uniform(0.35, 0.65)), 3)),
        "pushes": tuple((round(f * float(rng.uniform(0.9, 1.1)), 3), n) for f, n in _HIDDEN_ROLLOUT["pushes"]),
    }


def _log_steps(modes):
    """The hidden steps in a rollout's modes (N, 2), or None when one of them is missing: in the air, the first wall
    step (sliding), the next one (sticking), the last wall step before release, the first floor step (sliding), and
    the floor sticking two steps later (its static friction holds the push back: a negative tangential force)."""
    wall, floor = np.flatnonzero(modes[:, 1]), np.flatnonzero(modes[:, 0])
    if not wall.size or not floor.size:
        return None
    touch, land = int(wall[0]), int(floor[0])
    release = touch + int(np.argmax(modes[touch:, 1] == 0)) - 1  # the last step of the first wall contact
    if not (
        touch >= 6
        and modes[touch, 1] == 2
        and modes[touch + 1, 1] == 1
        and touch + 1 < release < land
        and not modes[: release + 1, 0].any()
        and land + 2 < len(modes)
        and modes[land, 0] == 2
        and modes[land + 2, 0] == 1
    ):
        return None
    return (touch // 3, touch, touch + 1, release, land, land + 2)


def _log_cases_of(rollout, steps):
    """The cases at ``steps`` of ``rollout``, or None when one of them does not show course_lib's modes clearly."""
    run = box_wall_log_data(**rollout)
    rec, h = run["record"], rollout["h"]
    mu = np.array([rollout["floor_friction"], rollout["wall_friction"]])
    cases = []
    for k in steps:
        p_n, p_t = rec.normal_force[k] * h, rec.tangential_force[k] * h
        prev_mode = rec.mode[k - 1] if k > 0 else np.zeros(2, dtype=np.int64)
        case = {
            "contact": {"p_n": p_n, "p_t": p_t, "mu": mu},
            "h": h,
            "prev_mode": prev_mode.astype(np.int64),
            "A": run["A"][k],
            "lam_next": run["lam"][k + 1],
        }
        row = log_step(**case)
        # the friction-cone modes are course_lib's solver modes, with a margin around the cone
        sticking = rec.mode[k] == 1
        if not (
            np.array_equal(row[3], rec.mode[k])
            and np.all(np.abs(row[2] - mu)[sticking] > 1e-3 * mu[sticking])
            and np.allclose(row[1], rec.normal_force[k], rtol=1e-12, atol=0.0)
        ):
            return None
        cases.append(case)
    return cases


def _shows_sign_and_margin(cases):
    """Whether the cases show the mistakes that need a particular contact: a negative tangential force under load
    (|p_t| / p_n against p_t / p_n), and a sliding contact that rounding put just inside the cone (the cone test
    without its margin)."""
    signed = any(np.any((c["contact"]["p_t"] < 0) & (c["contact"]["p_n"] > 0)) for c in cases)
    no_margin = any(not np.array_equal(_log(**c, cone_margin=0.0)[3], log_step(**c)[3]) for c in cases)
    return signed and no_margin


def _hidden_log_cases():
    rng = case_rng(404_301)

    def draw():
        rollout = _draw_log_rollout(rng)
        steps = _log_steps(np.asarray(box_wall_log_data(**rollout)["record"].mode))
        return None if steps is None else _log_cases_of(rollout, steps)

    return draw_until(draw, lambda cases: cases is not None and _shows_sign_and_margin(cases))


def _log_cases():
    if case_value(False, True):
        cases = _log_cases_of(_PUBLIC_ROLLOUT, _PUBLIC_STEPS)
        assert cases is not None
        return cases
    return _hidden_log_cases()


_S04_4_EX3_CHECKS = (
    Check(
        "log_step",
        _log_cases,
        reference=log_step,
        variant_of=_log,
        outputs=(
            Output("模式切换的接触编号 contact_ids", "integer"),
            # a contact without load has force and ratio exactly 0: the stated atol is what "0" means (rounding)
            Output("法向力 normal_force", "exact", atol=1e-9),
            Output("切向/法向比值 ratio", "exact", atol=1e-9),
            Output("接触模式 mode", "integer"),
            Output("梯度范数 grad_norm", "exact"),
        ),
        mistakes={
            "s044_ratio_inverted": Variant(S044_RATIO_INVERTED, ratio="inverted"),
            "s044_ratio_signed": Variant(S044_RATIO_SIGNED, ratio="signed"),
            "s044_force_is_impulse": Variant(S044_FORCE_IS_IMPULSE, force="impulse"),
            "s044_mode_swapped": Variant(S044_MODE_SWAPPED, mode_codes=(0, 2, 1)),
            "s044_cone_no_margin": Variant(S044_CONE_NO_MARGIN, cone_margin=0.0),
            "s044_ids_active": Variant(S044_IDS_ACTIVE, ids="active"),
            "s044_ids_one_based": Variant(S044_IDS_ONE_BASED, ids="one_based"),
            "s044_grad_no_transpose": Variant(S044_GRAD_NO_TRANSPOSE, grad="no_transpose"),
            "s044_grad_next": Variant(S044_GRAD_NEXT, grad="next"),
            "s044_grad_jacobian_norm": Variant(S044_GRAD_JACOBIAN_NORM, grad="jacobian"),
        },
    ),
)


# --- s04_4_ex4: FoBG against ZoBG, bias, variance and the naive standard error ------------------------


def fobg_terms(theta, w, alpha, at_theta=False):
    """L'(theta + w_i) for L = sigmoid(alpha z); ``at_theta``: the mistake of differentiating at theta."""
    z = np.full(np.shape(w), float(theta)) if at_theta else theta + np.asarray(w, dtype=np.float64)
    return soft_step_grad(z, alpha)


def _fobg_missing_alpha(theta, w, alpha):
    return fobg_terms(theta, w, alpha) / alpha


def zobg_terms(theta, w, sigma, alpha, baseline=True, sigma_power=2):
    """(L(theta + w_i) - L(theta)) w_i / sigma^2; the keywords switch to the catalogued mistakes."""
    w = np.asarray(w, dtype=np.float64)
    drop = soft_step(theta, alpha) if baseline else 0.0
    return (soft_step(theta + w, alpha) - drop) * w / sigma**sigma_power


def mean_and_stderr(terms, ddof=1, per_sqrt_n=True):
    """(mean, s / sqrt(N)) with the N - ddof sample variance."""
    terms = np.asarray(terms, dtype=np.float64)
    spread = terms.std(ddof=ddof)
    return float(terms.mean()), float(spread / np.sqrt(terms.size) if per_sqrt_n else spread)


def coverage(terms, exact, width=2.0, inside=True):
    """Fraction of rows whose mean is within ``width`` naive standard errors of ``exact``."""
    terms = np.asarray(terms, dtype=np.float64)
    means = terms.mean(axis=1)
    stderrs = terms.std(axis=1, ddof=1) / np.sqrt(terms.shape[1])
    covered = np.abs(means - exact) <= width * stderrs
    return float(np.mean(covered if inside else ~covered))


def _noise_case(rng, alpha, sigma, n):
    """theta and N Gaussian perturbations, one of them placed inside the derivative's bump (|theta + w| < 1/alpha),
    so every case's FoBG terms have the bump's magnitude; |theta + w| stays below 1.5 (no overflow at alpha 300)."""
    theta = float(np.round(rng.uniform(-0.3, 0.3), 6))
    w = np.clip(sigma * rng.standard_normal(n), -1.2, 1.2)
    w[0] = rng.uniform(-1.0, 1.0) / alpha - theta
    return theta, np.round(w, 8)


_NOISE_SETTINGS = ((2.0, 0.3, 7), (20.0, 0.1, 12), (120.0, 0.05, 20), (300.0, 0.1, 40))


def _fobg_cases():
    rng = case_rng(404_401)
    cases = []
    for alpha, sigma, n in case_value(_NOISE_SETTINGS, ((3.0, 0.2, 9), (50.0, 0.1, 16), (250.0, 0.08, 30))):
        theta, w = _noise_case(rng, alpha, sigma, n)
        cases.append({"theta": theta, "w": w, "alpha": alpha})
    return cases


def _zobg_cases():
    rng = case_rng(404_402)
    cases = []
    for alpha, sigma, n in case_value(_NOISE_SETTINGS, ((3.0, 0.2, 9), (50.0, 0.1, 16), (250.0, 0.08, 30))):
        theta, w = _noise_case(rng, alpha, sigma, n)
        cases.append({"theta": theta, "w": w, "sigma": sigma, "alpha": alpha})
    return cases


_HIT_RATE, _HIT_RANGE, _MISS_MEAN = 0.08, (5.0, 40.0), 0.2
_HEAVY_MEAN = _HIT_RATE * sum(_HIT_RANGE) / 2 + (1 - _HIT_RATE) * _MISS_MEAN  # the true mean of one term


def _heavy_tailed(rng, shape):
    """Mostly small terms with a few large ones, like FoBG's on a steep loss."""
    hits = rng.random(shape) < _HIT_RATE
    return np.round(np.where(hits, rng.uniform(*_HIT_RANGE, shape), rng.exponential(_MISS_MEAN, shape)), 8)


def _stderr_cases():
    rng = case_rng(404_403)
    cases = []
    for n in case_value((5, 8, 23, 60), (6, 11, 40)):
        cases.append({"terms": _heavy_tailed(rng, n) if n % 2 == 0 else np.round(rng.normal(1.0, 2.0, n), 8)})
    return cases


def _coverage_cases():
    """Rows of heavy-tailed or Gaussian terms, ``exact`` their true mean: coverage neither 0 nor 1."""
    rng = case_rng(404_404)
    cases = []
    for seeds, n, heavy in case_value(
        ((60, 10, True), (80, 25, False), (50, 6, True)), ((40, 12, True), (70, 20, False))
    ):
        if heavy:
            terms, exact = _heavy_tailed(rng, (seeds, n)), _HEAVY_MEAN
        else:
            terms, exact = np.round(rng.normal(0.5, 1.5, (seeds, n)), 8), 0.5
        cases.append({"terms": terms, "exact": float(np.round(exact, 8))})
    return cases


def bump_probability(theta, sigma, alpha, shifted=True, half=2.0, sigma_power=1):
    """P(|theta + w| < half / alpha) for w ~ N(0, sigma^2); the keywords switch to the catalogued mistakes."""
    from scipy.stats import norm

    centre, scale = (theta if shifted else 0.0), sigma**sigma_power
    return float(norm.cdf((half / alpha - centre) / scale) - norm.cdf((-half / alpha - centre) / scale))


def _bump_cases():
    """Probabilities between 0.3 % and 95 %: where 0.5 * (1 + erf) is as accurate as scipy's Phi (far in a tail it
    cancels, and a correct formula written that way would miss the tolerance)."""
    rng = case_rng(404_405)
    cases = []
    for alpha, sigma in case_value(
        ((200.0, 0.1), (40.0, 0.3), (8.0, 0.25), (120.0, 0.02)), ((100.0, 0.2), (20.0, 0.1))
    ):
        theta = draw_until(
            lambda sigma=sigma: float(np.round(rng.uniform(-2.0, 2.0) * sigma, 6)),
            lambda theta, sigma=sigma, alpha=alpha: 0.003 < bump_probability(theta, sigma, alpha) < 0.95,
        )
        cases.append({"theta": theta, "sigma": sigma, "alpha": alpha})
    return cases


def hard_step_estimates(theta, w, sigma, fobg="ad"):
    """(FoBG mean, its naive standard error, ZoBG mean, its naive standard error) for the hard step H(z).

    ``fobg="sigmoid"``: the mistake of using a steep sigmoid (alpha = 1000) for the FoBG terms."""
    w = np.asarray(w, dtype=np.float64)
    z = theta + w
    if fobg == "ad":
        first = np.asarray(jax.vmap(jax.grad(cl.heaviside_step))(jnp.asarray(z)))
    else:
        first = soft_step_grad(z, 1000.0)
    hard = lambda v: np.asarray(cl.heaviside_step(jnp.asarray(v)))  # noqa: E731
    zeroth = (hard(z) - hard(theta)) * w / sigma**2
    return (*mean_and_stderr(first), *mean_and_stderr(zeroth))


def _hard_step_cases():
    """theta a little off the step, N Gaussian perturbations: some cross the step (the ZoBG is not 0), one within
    1 / 1000 of it (a steep sigmoid's FoBG is not 0 either)."""
    rng = case_rng(404_406)
    cases = []
    for sigma, n in case_value(((0.1, 20), (0.05, 40), (0.2, 12)), ((0.1, 15), (0.3, 25))):

        def draw(sigma=sigma, n=n):
            theta = float(np.round(rng.uniform(-0.6, 0.6) * sigma, 6))
            w = sigma * rng.standard_normal(n)
            w[0] = rng.uniform(-0.5, 0.5) / 1000 - theta
            return theta, np.round(w, 8)

        def crosses(case, sigma=sigma):
            theta, w = case
            return np.any(theta + w >= 0) and np.any(theta + w < 0) and abs(theta + w[0]) < 1e-3

        theta, w = draw_until(draw, crosses)
        cases.append({"theta": theta, "w": w, "sigma": sigma})
    return cases


_S04_4_EX4_CHECKS = (
    Check(
        "fobg_terms",
        _fobg_cases,
        reference=fobg_terms,
        outputs=(Output("FoBG 逐样本项", "exact"),),
        mistakes={
            "s044_fobg_at_theta": Variant(S044_FOBG_AT_THETA, at_theta=True),
            "s044_fobg_missing_alpha": Mistake(S044_GRAD_MISSING_ALPHA, _fobg_missing_alpha),
        },
    ),
    Check(
        "zobg_terms",
        _zobg_cases,
        reference=zobg_terms,
        outputs=(Output("ZoBG 逐样本项", "exact"),),
        mistakes={
            "s044_zobg_no_baseline": Variant(S044_ZOBG_NO_BASELINE, baseline=False),
            "s044_zobg_sigma_once": Variant(S044_ZOBG_SIGMA_ONCE, sigma_power=1),
        },
    ),
    Check(
        "mean_and_stderr",
        _stderr_cases,
        reference=mean_and_stderr,
        outputs=(Output("平均值", "exact", weight=0.5), Output("朴素标准误", "exact", weight=0.5)),
        mistakes={
            "s044_stderr_ddof0": Variant(S044_STDERR_DDOF0, ddof=0),
            "s044_stderr_no_sqrt": Variant(S044_STDERR_NO_SQRT, per_sqrt_n=False),
        },
    ),
    Check(
        "coverage",
        _coverage_cases,
        reference=coverage,
        outputs=(Output("覆盖率", "exact"),),
        mistakes={
            "s044_coverage_one_se": Variant(S044_COVERAGE_ONE_SE, width=1.0),
            "s044_coverage_outside": Variant(S044_COVERAGE_OUTSIDE, inside=False),
        },
    ),
    Check(
        "bump_probability",
        _bump_cases,
        reference=bump_probability,
        outputs=(Output("落进鼓包的概率", rtol=1e-9),),
        mistakes={
            "s044_bump_no_shift": Variant(S044_BUMP_NO_SHIFT, shifted=False),
            "s044_bump_half_width": Variant(S044_BUMP_HALF_WIDTH, half=1.0),
            "s044_bump_variance": Variant(S044_BUMP_VARIANCE, sigma_power=2),
        },
    ),
    Check(
        "hard_step_estimates",
        _hard_step_cases,
        reference=hard_step_estimates,
        # the FoBG's mean and standard error are exactly 0: atol says what "0" is
        outputs=(
            Output("FoBG 平均值", "exact", atol=1e-12),
            Output("FoBG 标准误", "exact", atol=1e-12),
            Output("ZoBG 平均值", "exact"),
            Output("ZoBG 标准误", "exact"),
        ),
        mistakes={"s044_hard_fobg_smoothed": Variant(S044_HARD_FOBG_SMOOTHED, fobg="sigmoid")},
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---
# (s04_4_ex3's setup constants H, BOX, PUSHES describe the notebook's own rollout; the hidden rollouts (drawn
# around _HIDDEN_ROLLOUT) deliberately differ from it, so the reference shares no constant with that setup cell)

EXERCISES = (
    Exercise(
        "s04_4_ex1",
        _S04_4_EX1_CHECKS,
        wrong_answers=(
            # the naive map: through the ground, flip the end-of-step velocity; its derivative (h, -e)
            WrongAnswer(
                "碰撞时刻 t* 没有进入映射",
                edits={
                    "ball_step_answer": [
                        (
                            "        return np.array([y_free, v_free]), 0\n",
                            "        return np.array([y_free, v_free]), 0\n"
                            "    return np.array([y_free, -e * v_free]), 1      # 穿地：在步末把速度反向\n",
                        )
                    ],
                    "ball_step_dv_answer": [
                        (
                            "        return h, 1.0                             # 飞行：y + v h - g h^2/2，v - g h\n",
                            "        return h, 1.0                             # 飞行：y + v h - g h^2/2，v - g h\n"
                            "    return h, -e                                  # d(-e v_free)/dv\n",
                        )
                    ],
                },
            ),
            # the restitution factor dropped from d v#/dv in the chain rule
            WrongAnswer(
                "漏掉恢复系数 e",
                edits={
                    "ball_step_dv_answer": [("dafter_dv = -e * dbefore_dv", "dafter_dv = -dbefore_dv    ")],
                },
            ),
            # the naive map without its flip: a plain semi-implicit step through the ground
            WrongAnswer(
                "穿地后什么也不做",
                edits={
                    "naive_answer": [("np.array([y_next, -e * v_next]), h, -e", "np.array([y_next, v_next]), h, 1.0")],
                },
                keep=("ball_step_answer", "ball_step_dv_answer"),
            ),
            # the root of the past for t*, and d t*/d v with the wrong sign
            WrongAnswer(
                "负根",
                edits={
                    "ball_step_answer": [("t_hit = (v + root) / g", "t_hit = (v - root) / g")],
                    "ball_step_dv_answer": [("dt_dv = -t_hit / v_before", "dt_dv = t_hit / v_before ")],
                },
            ),
            # the end-of-step velocity reflected instead of the velocity at the impact
            WrongAnswer(
                "步末的自由速度",
                edits={"ball_step_answer": [("    v_after = -e * v_before\n", "    v_after = -e * v_free\n")]},
                keep=("ball_step_dv_answer",),
            ),
        ),
        shortcuts=(
            # the derivative by jax.jacfwd through cl.impact_step, both of which the notebook rules out: the
            # derivative's points are lost (course_check.adapters.by_hand refuses them)
            Shortcut(
                "亲手推出导数",
                edits={
                    "ball_step_dv_answer": [
                        (
                            "    y, v = float(x[0]), float(x[1])\n",
                            "    J = jax.jacfwd(lambda z: cl.impact_step(z, h, g, e)[0])(jnp.asarray(x, dtype=jnp.float64))\n"
                            "    return float(J[0, 1]), float(J[1, 1])\n",
                        )
                    ]
                },
                keep=("ball_step_answer", "naive_answer"),
                loses=3.0,
            ),
        ),
    ),
    Exercise(
        "s04_4_ex2",
        _S04_4_EX2_CHECKS,
        wrong_answers=(
            # the sign of the exponent flipped; the inner derivative alpha forgotten
            WrongAnswer(
                "因子 α",
                edits={
                    "soft_step_answer": [
                        (
                            "    s = alpha * np.asarray(z, dtype=np.float64)",
                            "    s = -alpha * np.asarray(z, dtype=np.float64)",
                        )
                    ],
                    "soft_step_grad_answer": [("return alpha * sig * (1.0 - sig)", "return sig * (1.0 - sig)")],
                },
            ),
            # the naive formulas: exp(-alpha z) overflows to inf, and inf / inf is NaN in the derivative
            WrongAnswer(
                "上溢",
                edits={
                    "soft_step_answer": [
                        (
                            "    decay = np.exp(-np.abs(s))                    # 在 (0, 1] 内，不会溢出\n"
                            "    return np.where(s >= 0, 1.0 / (1.0 + decay), decay / (1.0 + decay))",
                            "    return 1.0 / (1.0 + np.exp(-s))",
                        )
                    ],
                    "soft_step_grad_answer": [
                        (
                            "    sig = soft_step(z, alpha)\n    return alpha * sig * (1.0 - sig)",
                            "    q = np.exp(-alpha * np.asarray(z, dtype=np.float64))\n    return alpha * q / (1.0 + q) ** 2",
                        )
                    ],
                },
            ),
        ),
        shortcuts=(
            # the derivative from jax.grad of cl.sigmoid_step instead of the closed form: its points are lost
            # (course_check.adapters.by_hand refuses the transform)
            Shortcut(
                "亲手推出导数",
                edits={
                    "soft_step_grad_answer": [
                        (
                            "    sig = soft_step(z, alpha)\n    return alpha * sig * (1.0 - sig)",
                            "    dsig = jax.vmap(jax.grad(cl.sigmoid_step), in_axes=(0, None))\n"
                            "    flat = jnp.ravel(jnp.asarray(z, dtype=jnp.float64))\n"
                            "    return np.asarray(dsig(flat, alpha)).reshape(np.shape(z))",
                        )
                    ]
                },
                keep=("soft_step_answer",),
                loses=3.0,
            ),
        ),
    ),
    Exercise(
        "s04_4_ex3",
        _S04_4_EX3_CHECKS,
        wrong_answers=(
            # the friction ratio taken the other way round
            WrongAnswer(
                "比值写反了",
                edits={
                    "log_step_answer": [
                        (
                            "ratio = np.where(touching, np.abs(p_t) / np.where(touching, p_n, 1.0), 0.0)",
                            "ratio = np.where(p_t != 0, p_n / np.where(p_t != 0, np.abs(p_t), 1.0), 0.0)",
                        )
                    ],
                },
            ),
            # the friction cone tested without its margin: rounding turns sliding contacts into sticking ones
            WrongAnswer(
                "不带容差",
                edits={
                    "log_step_answer": [
                        (
                            "on_cone = np.abs(p_t) >= (1.0 - 1e-6) * mu * p_n",
                            "on_cone = np.abs(p_t) >= mu * p_n",
                        )
                    ],
                },
            ),
            # the impulse logged as the force; the gradient norm of lam_{k+1}, not propagated back to x_k
            WrongAnswer(
                "差了一步",
                edits={
                    "log_step_answer": [
                        ("normal_force = p_n / h", "normal_force = p_n"),
                        (
                            "grad = np.asarray(A, dtype=np.float64).T @ np.asarray(lam_next, dtype=np.float64)",
                            "grad = np.asarray(lam_next, dtype=np.float64)",
                        ),
                    ],
                },
            ),
        ),
    ),
    Exercise(
        "s04_4_ex4",
        _S04_4_EX4_CHECKS,
        wrong_answers=(
            # the ZoBG terms without their baseline (unbiased on average, other terms)
            WrongAnswer(
                "少了基线",
                edits={
                    "zobg_terms_answer": [
                        (
                            "return (loss(theta + w) - loss(theta)) * w / sigma**2",
                            "return loss(theta + w) * w / sigma**2",
                        )
                    ],
                },
            ),
            # the derivative taken at theta for every sample; the standard error of N, not N - 1
            WrongAnswer(
                "θ + w_i",
                edits={
                    "fobg_terms_answer": [
                        (
                            "jnp.asarray(theta + np.asarray(w, dtype=np.float64))",
                            "jnp.asarray(theta + 0.0 * np.asarray(w, dtype=np.float64))",
                        )
                    ],
                    "mean_and_stderr_answer": [("terms.std(ddof=1)", "terms.std()")],
                },
            ),
            # one standard error instead of two
            WrongAnswer(
                "±1 倍标准误",
                edits={"coverage_answer": [("<= 2.0 * stderrs", "<= stderrs")]},
            ),
            # the bump centred on w = 0 instead of on -theta
            WrongAnswer(
                "先减去 θ",
                edits={
                    "bump_probability_answer": [
                        ("norm.cdf((2.0 / alpha - theta) / sigma)", "norm.cdf((2.0 / alpha) / sigma)"),
                        ("norm.cdf((-2.0 / alpha - theta) / sigma)", "norm.cdf((-2.0 / alpha) / sigma)"),
                    ]
                },
            ),
            # the hard step's FoBG terms from a steep sigmoid: not the estimator of this loss
            WrongAnswer(
                "FoBG 的结果不是 0",
                edits={
                    "hard_step_estimates_answer": [
                        ("jax.grad(cl.heaviside_step)", "jax.grad(lambda v: cl.sigmoid_step(v, 1000.0))")
                    ]
                },
                keep=("mean_and_stderr_answer",),
            ),
        ),
    ),
)
