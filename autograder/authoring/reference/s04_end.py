"""Reference solutions and graded checks for the end-of-chapter exercises ("is this gradient trustworthy?").

* ``s04_end_exA``: spring-damper (``cl.spring_damper``) under semi-implicit Euler. The derivative of
  the final position q_N with respect to the stiffness k three ways: analytic (the forward
  sensitivity recursion derived by hand), AD (``jax.grad``) and central differences over an eps
  sweep; the error table log10 relerr(FD, AD).
* ``s04_end_exB``: one semi-implicit Euler step of a point mass on a penalty ground
  lambda = k max(0, -y). Forward, backward and central differences of the next velocity v+ with
  respect to the height y at points on both sides of the contact boundary y = 0, and the AD slope.
* ``s04_end_exC``: a short-horizon foothold task on the planar hopper (``cl.hopper_step``, penalty
  ground): the loss terms, and the per-step log (contact, contact switch, penetration, per-step
  loss terms, ||dL/du_k||).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Output, Shortcut, Variant, WrongAnswer
from autograder.kernel_support.sweeps import relative_error

# --- mistakes this section recognises ------------------------------------------------------------

S04END_SENS_OLD_VELOCITY = "解析导数与“位置的敏感度用旧速度的敏感度更新”一致：半隐式欧拉里 q_{k+1} = q_k + h·v_{k+1}，所以 ∂q_{k+1}/∂k = ∂q_k/∂k + h·∂v_{k+1}/∂k，要用更新之后的速度敏感度（那一项才含有 −h·q_k/m）。"
S04END_SENS_NEW_POSITION = "解析导数与“在 q_{k+1} 处计算直接项 −h·q/m”一致：速度更新 v_{k+1} = v_k + h(−b v_k − k q_k)/m 用的是旧位置 q_k，对 k 的直接导数是 −h·q_k/m。"
S04END_NATURAL_LOG = "误差列与用自然对数算出的结果一致：题目要的是 log10。"
S04END_ERROR_UNNORMALISED = "误差列与 |FD − AD|/|AD|（没有取 max(1, |AD|, |FD|)）一致：本章的相对误差分母是 max(1, |a|, |f|)，导数很小时它退化为绝对误差。"
S04END_ERROR_VS_ANALYTIC_WRONG = (
    "误差列与“拿有限差分和自己写错的解析导数比较”一致：请先让解析导数与 jax.grad 吻合，误差表以 jax.grad 的导数为基准。"
)
S04END_ONESIDED_SWAPPED = "前向与后向差分对调了：前向差分是 (s(y+ε) − s(y))/ε，向接触边界的“上方”看；后向差分是 (s(y) − s(y−ε))/ε，向“下方”看。"
S04END_GAP_SIGN = "结果与 λ = k·max(0, y) 一致：穿透时 y < 0，惩罚力应为 k·max(0, −y)，也就是地面以下才有推力。"
S04END_CENTRAL_IS_FORWARD = "中心差分一栏与前向差分相同：中心差分应为 (s(y+ε) − s(y−ε))/(2ε)，两侧各扰动一次。"
S04END_CENTRAL_NO_HALF = "中心差分一栏是参考值的 2 倍：两个采样点相距 2ε，分母应为 2ε 而不是 ε。"
S04END_SWITCH_SHIFTED = "切换标记与“比较第 k 步和第 k+1 步”一致（off-by-one）：switch[k] 表示第 k 步的接触状态与第 k−1 步不同，switch[0] = 0。"
S04END_CONTACT_FROM_FORCE = "接触标记与“法向力大于 0”一致：快速分离时阻尼项会把 penalty 力截断为 0，但脚仍在地面以下。本题的接触以记录里的 mode（即 φ ≤ 0）为准。"
S04END_PENETRATION_NEXT_STATE = (
    "穿透深度与用步末状态 x_{k+1} 计算的结果一致（off-by-one）：ContactRecord 记录的是第 k 步开始时的 max(0, −z_f)。"
)
S04END_GRAD_WRT_STATE = "梯度范数与 ‖∂L/∂x_k‖（对状态的伴随）一致：本题要的是对第 k 步控制的梯度 ‖∂L/∂u_k‖。"
S04END_PEN_NOT_SQUARED = "穿透项与 W_PEN·Σ d_k（没有平方）一致：穿透代价是 W_PEN·Σ d_k²。"
S04END_EFFORT_ABS = "控制代价与 W_U·Σ|u_k|（一范数）一致：控制代价是 W_U·Σ‖u_k‖²。"


# --- s04_end_exA: spring-damper, analytic vs AD vs finite differences -----------------------------

_U0 = jnp.zeros(1)


def _sd_final_q(m, b, k, q0, v0, h, n_steps):
    step = cl.semi_implicit_euler(cl.spring_damper, h)
    p = cl.SpringDamperParams(mass=m, damping=b, stiffness=k)
    x = jax.lax.fori_loop(0, n_steps, lambda i, x: step(x, _U0, p), jnp.stack([q0, v0]))
    return x[0]


_sd_final_q_jit = jax.jit(_sd_final_q)  # n_steps traced: forward only
_sd_grad_jit = jax.jit(jax.grad(_sd_final_q, argnums=2), static_argnums=6)  # reverse mode needs a static loop


def _as_f(*values):
    return tuple(jnp.asarray(v, dtype=jnp.float64) for v in values)


@partial(jax.jit, static_argnames=("variant",))
def _sd_analytic(m, b, k, q0, v0, h, n_steps, variant=None):
    """dq_N/dk by the forward sensitivity recursion of semi-implicit Euler (``variant``: a mistake)."""

    def body(_, carry):
        q, v, sq, sv = carry
        v_new = v + h * (-b * v - k * q) / m
        q_new = q + h * v_new
        direct = q_new if variant == "new_position" else q
        sv_new = sv + h * (-b * sv - k * sq - direct) / m
        sq_new = sq + h * (sv if variant == "old_velocity" else sv_new)
        return q_new, v_new, sq_new, sv_new

    zero = jnp.zeros_like(q0)
    return jax.lax.fori_loop(0, n_steps, body, (q0, v0, zero, zero))[2]


def analytic_derivative(m, b, k, q0, v0, h, n_steps, variant=None):
    """dq_N/dk from the hand-derived sensitivity recursion (jax.grad gives the same: ad_derivative)."""
    return float(_sd_analytic(*_as_f(m, b, k, q0, v0, h), int(n_steps), variant=variant))


def ad_derivative(m, b, k, q0, v0, h, n_steps):
    """dq_N/dk by jax.grad through the course_lib rollout."""
    return float(_sd_grad_jit(*_as_f(m, b, k, q0, v0, h), int(n_steps)))


def _error_table(m, b, k, q0, v0, h, n_steps, eps_list, scheme="central", log=np.log10, norm="chapter", base="ad"):
    args = _as_f(m, b, q0, v0, h)

    def q_of_k(kk):
        return float(_sd_final_q_jit(args[0], args[1], jnp.float64(kk), args[2], args[3], args[4], int(n_steps)))

    fd = []
    for eps in np.asarray(eps_list, dtype=np.float64):
        if scheme == "forward":
            fd.append((q_of_k(k + eps) - q_of_k(k)) / eps)
        else:
            fd.append((q_of_k(k + eps) - q_of_k(k - eps)) / (2 * eps))
    fd = np.array(fd)
    if base == "old_velocity":
        ref = analytic_derivative(m, b, k, q0, v0, h, n_steps, variant="old_velocity")
    else:
        ref = ad_derivative(m, b, k, q0, v0, h, n_steps)
    denom = np.maximum(1.0, np.maximum(abs(ref), np.abs(fd))) if norm == "chapter" else abs(ref)
    return fd, log(np.abs(fd - ref) / denom)


def error_table(m, b, k, q0, v0, h, n_steps, eps_list):
    """(central differences (E,), log10 relerr(FD, AD) (E,)), relerr = |a - f| / max(1, |a|, |f|)."""
    return _error_table(m, b, k, q0, v0, h, n_steps, eps_list)


#: Only step sizes where truncation dominates are graded: there the error is a property of the
#: function, not of the implementation. Measured on the hidden cases against three second
#: implementations of q_N (a numpy loop in the same order, the same loop with the algebra regrouped,
#: the 2x2 one-step matrix applied N times): log10(error) moves by at most 4.8e-4 (matrix form,
#: eps = 1e-3), i.e. 5.4e-5 relative to the largest |log10 error| of a case; once eps <= 1e-5 rounding
#: (1e-16 |q| / eps) takes over and the same implementations differ by up to 1 (a factor 10), so the
#: notebook only plots that part. The band 1e-3 is 18x the worst measured difference and 100x below the
#: closest mistake (the unnormalised error, 0.11 relative).
SD_LOG_ERR_RTOL = 1e-3
#: Central differences of the same implementations differ by at most 2e-11 relative to max |FD|
#: (matrix form), 50x below this band; the closest mistake (forward differences) is 9e-3 away.
SD_FD_RTOL = 1e-9


def _numpy_final_q(m, b, k, q0, v0, h, n_steps, form="loop"):
    """q_N by plain numpy, three ways (to measure how much faithful implementations differ)."""
    if form == "matrix":
        a = np.array([[1.0 - h * h * k / m, h * (1.0 - h * b / m)], [-h * k / m, 1.0 - h * b / m]])
        x = np.array([q0, v0])
        for _ in range(int(n_steps)):
            x = a @ x
        return x[0]
    q, v = q0, v0
    for _ in range(int(n_steps)):
        v = v - (h * b / m) * v - (h * k / m) * q if form == "regrouped" else v + h * (-b * v - k * q) / m
        q = q + h * v
    return q


SD_PUBLIC_SEED = 40_951


def _second_implementations_agree(case) -> bool:
    """Guard of a case: three NumPy implementations give the same error table well within the bands."""
    fd, log_err = error_table(**case)
    ad = ad_derivative(**{k: v for k, v in case.items() if k != "eps_list"})
    eps_list, h, n_steps = case["eps_list"], case["h"], case["n_steps"]
    for form in ("loop", "regrouped", "matrix"):
        q_of = lambda kk: _numpy_final_q(case["m"], case["b"], kk, case["q0"], case["v0"], h, n_steps, form)  # noqa: E731
        fd_np = np.array([(q_of(case["k"] + e) - q_of(case["k"] - e)) / (2 * e) for e in eps_list])
        log_np = np.log10(relative_error(ad, fd_np))
        if np.max(np.abs(fd_np - fd)) > 0.05 * SD_FD_RTOL * np.max(np.abs(fd)):
            return False
        if np.max(np.abs(log_np - log_err)) > 0.1 * SD_LOG_ERR_RTOL * np.max(np.abs(log_err)):
            return False
    return True


def _sd_cases():
    rng = case_rng(case_value(40_901, SD_PUBLIC_SEED))
    cases = []
    for h, n_steps, eps_list in (
        (0.01, 300, (0.3, 0.1, 0.03, 0.01, 0.003, 0.001)),
        (0.02, 180, (0.2, 0.05, 0.01, 0.002)),
        (0.005, 700, (0.1, 0.02, 0.004, 0.001)),
    ):

        def draw(h=h, n_steps=n_steps, eps_list=eps_list):
            return {
                "m": round(rng.uniform(0.6, 1.8), 3),
                "b": round(rng.uniform(0.1, 0.8), 3),
                "k": round(rng.uniform(6.0, 30.0), 3),
                "q0": round(rng.uniform(-1.0, 1.0), 4),
                "v0": round(rng.uniform(-1.5, 1.5), 4),
                "h": h,
                "n_steps": n_steps,
                "eps_list": np.asarray(eps_list),
            }

        case = draw_until(draw, _second_implementations_agree)
        cases.append(case)
    return cases


def _derivative_cases():
    return [{k: v for k, v in case.items() if k != "eps_list"} for case in _sd_cases()]


_S04_END_EXA_CHECKS = (
    Check(
        "analytic_derivative",
        _derivative_cases,
        reference=analytic_derivative,
        outputs=(Output("解析导数 ∂q_N/∂k", "exact"),),
        mistakes={
            "s04end_sens_old_velocity": Variant(S04END_SENS_OLD_VELOCITY, variant="old_velocity"),
            "s04end_sens_new_position": Variant(S04END_SENS_NEW_POSITION, variant="new_position"),
        },
    ),
    Check(
        "ad_derivative",
        _derivative_cases,
        reference=ad_derivative,
        outputs=(Output("自动微分导数 ∂q_N/∂k", "exact"),),
    ),
    Check(
        "error_table",
        _sd_cases,
        reference=error_table,
        variant_of=_error_table,
        outputs=(
            Output("中心差分 FD(ε)", rtol=SD_FD_RTOL),
            Output("误差表 log10 relerr(FD, AD)", rtol=SD_LOG_ERR_RTOL),
        ),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, scheme="forward"),
            "s04end_natural_log": Variant(S04END_NATURAL_LOG, log=np.log),
            "s04end_error_unnormalised": Variant(S04END_ERROR_UNNORMALISED, norm="plain"),
            "s04end_error_vs_analytic_wrong": Variant(S04END_ERROR_VS_ANALYTIC_WRONG, base="old_velocity"),
        },
    ),
)


# --- s04_end_exB: finite differences on both sides of a max(0, -y) penalty -----------------------

GRAVITY = 9.81


def _next_velocity(y, v0, h, k, m, gap_sign=1.0):
    return v0 + h * (k * jnp.maximum(0.0, -gap_sign * y) / m - GRAVITY)


@partial(jax.jit, static_argnames=("gap_sign",))
def _fd_table(y0s, v0, eps, h, k, m, gap_sign=1.0):
    s = lambda y: _next_velocity(y, v0, h, k, m, gap_sign)  # noqa: E731
    y, e = y0s[:, None], eps[None, :]
    return (s(y + e) - s(y)) / e, (s(y) - s(y - e)) / e, (s(y + e) - s(y - e)) / (2 * e)


def fd_estimates(y0s, v0, eps_list, h, k, m, swap=False, gap_sign=1.0, central_forward=False, central_no_half=False):
    """(forward, backward, central) differences of v+(y), each (P, E): row = point y0, column = eps (the keywords:
    the catalogued mistakes)."""
    fwd, bwd, cen = (np.asarray(a) for a in _fd_table(*_as_f(y0s, v0, eps_list, h, k, m), gap_sign=gap_sign))
    if central_forward:
        cen = fwd
    if central_no_half:
        cen = 2.0 * cen
    return (bwd, fwd, cen) if swap else (fwd, bwd, cen)


@partial(jax.jit, static_argnames=("gap_sign",))
def _ad_slopes(y0s, v0, h, k, m, gap_sign=1.0):
    return jax.vmap(jax.grad(lambda y: _next_velocity(y, v0, h, k, m, gap_sign)))(y0s)


def ad_slopes(y0s, v0, h, k, m, gap_sign=1.0):
    """dv+/dy by jax.grad at each point (never exactly on the boundary), shape (P,) (``gap_sign``: a mistake)."""
    return np.asarray(_ad_slopes(*_as_f(y0s, v0, h, k, m), gap_sign=gap_sign))


#: Every value is a difference quotient of a piecewise-linear function: two faithful implementations
#: differ by rounding only, at most 1e-16 |v+| / eps = 1e-11 for eps >= 1e-5, i.e. below 1e-12 relative
#: to max |slope| = h k / m >= 12 on the hidden cases (drawn so: _penalty_acceptable).
PENALTY_FD_RTOL = 1e-9


def _off_the_boundary(case) -> bool:
    """No difference quotient samples exactly on the boundary y = 0 (nor within 1e-7 of it)."""
    shifted = case["y0s"][:, None, None] + np.array([-1, 1])[None, :, None] * case["eps_list"][None, None, :]
    return bool(np.min(np.abs(shifted)) > 1e-7 and np.min(np.abs(case["y0s"])) > 1e-7)


def _draw_penalty_case(rng, base):
    """A case drawn around ``base``: the same number of points on each side of the boundary, each moved by
    10^(-0.2 .. 0.2); the step sizes by 10^(-0.15 .. 0.15) (the smallest at least 1e-5); v0, h, k and m by
    factors 0.8 .. 1.25."""

    def factor():
        return float(rng.uniform(0.8, 1.25))

    y0s = np.sort([float(f"{y * 10.0 ** rng.uniform(-0.2, 0.2):.2g}") for y in base["y0s"]])
    eps = np.array([float(f"{e * 10.0 ** rng.uniform(-0.15, 0.15):.1g}") for e in base["eps_list"]])
    return {
        "y0s": y0s,
        "v0": round(base["v0"] * factor(), 2),
        "eps_list": np.maximum(eps, 1e-5),
        "h": round(base["h"] * factor(), 4),
        "k": round(base["k"] * factor(), -1),
        "m": round(base["m"] * factor(), 2),
    }


def _penalty_acceptable(case) -> bool:
    """Off the boundary, the step sizes strictly decreasing, some difference straddling the boundary (|y| < eps:
    there the one-sided and central differences differ), and a slope h k / m of at least 12 (PENALTY_FD_RTOL's
    argument) that is 2 % away from every public case's."""
    eps, slope = case["eps_list"], case["h"] * case["k"] / case["m"]
    public = [c["h"] * c["k"] / c["m"] for c in _PENALTY_PUBLIC]
    return (
        _off_the_boundary(case)
        and bool(np.all(np.diff(eps) < 0))
        and bool(np.any(np.abs(case["y0s"])[:, None] < eps[None, :]))
        and slope >= 12.0
        and all(abs(slope / p - 1.0) > 0.02 for p in public)
    )


def _penalty_cases():
    if case_value(False, True):
        assert all(_off_the_boundary(case) for case in _PENALTY_PUBLIC)
        return _PENALTY_PUBLIC
    rng = case_rng(40_902)
    return [
        draw_until(lambda base=base: _draw_penalty_case(rng, base), _penalty_acceptable) for base in _PENALTY_HIDDEN
    ]


_PENALTY_PUBLIC = [
    {
        "y0s": np.array([-2.5e-3, -3e-4, 9e-5, 4e-4, 2e-3]),
        "v0": -1.0,
        "eps_list": np.array([1e-2, 1e-3, 1e-4, 1e-5]),
        "h": 0.012,
        "k": 3000.0,
        "m": 1.4,
    },
    {
        "y0s": np.array([-5e-3, -6e-4, 3e-4, 2.4e-3]),
        "v0": 0.5,
        "eps_list": np.array([2e-2, 2e-3, 2e-4, 4e-5]),
        "h": 0.007,
        "k": 1500.0,
        "m": 0.7,
    },
]
#: the hidden cases are drawn around these each term (_draw_penalty_case)
_PENALTY_HIDDEN = [
    {
        "y0s": np.array([-3.2e-3, -4.5e-4, -6e-5, 7e-5, 5.5e-4, 2.7e-3]),
        "v0": -1.3,
        "eps_list": np.array([1e-2, 1e-3, 1e-4, 1e-5]),
        "h": 0.01,
        "k": 2000.0,
        "m": 1.0,
    },
    {
        "y0s": np.array([-8e-3, -1.5e-3, 2.5e-4, 3.5e-3]),
        "v0": -0.4,
        "eps_list": np.array([3e-2, 5e-3, 5e-4, 2e-5]),
        "h": 0.005,
        "k": 6000.0,
        "m": 2.0,
    },
    {
        "y0s": np.array([-2.2e-4, 1.3e-4, 4e-4]),
        "v0": 0.6,
        "eps_list": np.array([1e-3, 3e-4, 1e-4, 3e-5]),
        "h": 0.02,
        "k": 800.0,
        "m": 0.5,
    },
]


def _ad_cases():
    return [{k: v for k, v in case.items() if k != "eps_list"} for case in _penalty_cases()]


_S04_END_EXB_CHECKS = (
    Check(
        "fd_estimates",
        _penalty_cases,
        reference=fd_estimates,
        outputs=(
            Output("前向差分", rtol=PENALTY_FD_RTOL),
            Output("后向差分", rtol=PENALTY_FD_RTOL),
            Output("中心差分", rtol=PENALTY_FD_RTOL),
        ),
        mistakes={
            "s04end_onesided_swapped": Variant(S04END_ONESIDED_SWAPPED, swap=True),
            "s04end_gap_sign": Variant(S04END_GAP_SIGN, gap_sign=-1.0),
            "s04end_central_is_forward": Variant(S04END_CENTRAL_IS_FORWARD, central_forward=True),
            "s04end_central_no_half": Variant(S04END_CENTRAL_NO_HALF, central_no_half=True),
        },
    ),
    Check(
        "ad_slopes",
        _ad_cases,
        reference=ad_slopes,
        outputs=(Output("自动微分斜率 dv⁺/dy", "exact"),),
        mistakes={"s04end_gap_sign": Variant(S04END_GAP_SIGN, gap_sign=-1.0)},
    ),
)


# --- s04_end_exC: the per-step log of a short-horizon foothold task on the hopper -----------------

#: the task of the notebook: 1 ms steps, penalty ground with damping 20 N s/m (its stiffness varies)
HOP_H = 1e-3
HOP_GROUND_DAMPING = 20.0
HOP_FOOT_TARGET = 0.06  # m, horizontal foot position at the end
HOP_HEIGHT_TARGET = 0.5  # m, body height at the end
W_FOOT, W_HEIGHT, W_EFFORT, W_PEN = 10.0, 10.0, 1e-6, 1e3

_HOP_STEP = cl.hopper_step(HOP_H, "penalty", with_record=True)


def hopper_params(ground_stiffness):
    return cl.HopperParams(contact=cl.ContactParams(stiffness=ground_stiffness, damping=HOP_GROUND_DAMPING))


def _hop_terms(us, x0, ground_stiffness, variant=None):
    """(terms (4,), per-step effort (N,), per-step penetration cost (N,), record, states)."""
    xs, rec = cl.rollout_with_record(_HOP_STEP, x0, us, hopper_params(ground_stiffness))
    pen = rec.penetration[:, 0]
    effort = W_EFFORT * (jnp.sum(jnp.abs(us), axis=1) if variant == "effort_abs" else jnp.sum(us**2, axis=1))
    pen_cost = W_PEN * (pen if variant == "pen_not_squared" else pen**2)
    x_end = xs[-1]
    terms = jnp.stack(
        [
            W_FOOT * (x_end[2] - HOP_FOOT_TARGET) ** 2,
            W_HEIGHT * (x_end[1] - HOP_HEIGHT_TARGET) ** 2,
            jnp.sum(effort),
            jnp.sum(pen_cost),
        ]
    )
    return terms, effort, pen_cost, rec, xs


@partial(jax.jit, static_argnames=("variant",))
def _hop_loss_terms(x0, us, ground_stiffness, variant=None):
    return _hop_terms(us, x0, ground_stiffness, variant)[0]


def loss_terms(x0, us, ground_stiffness, variant=None):
    """[foot placement, body height, effort, penetration] for the rollout from x0 under us (``variant``: a mistake)."""
    return np.asarray(_hop_loss_terms(*_as_f(x0, us, ground_stiffness), variant=variant))


@partial(jax.jit, static_argnames=("variant",))
def _hop_log(x0, us, ground_stiffness, variant=None):
    terms, effort, pen_cost, rec, xs = _hop_terms(us, x0, ground_stiffness)
    contact = (rec.mode[:, 0] > 0).astype(jnp.float64)
    if variant == "contact_from_force":
        contact = (rec.normal_force[:, 0] > 0).astype(jnp.float64)
    changed = (contact[1:] != contact[:-1]).astype(jnp.float64)
    switch = (
        jnp.concatenate([changed, jnp.zeros(1)])
        if variant == "switch_shifted"
        else jnp.concatenate([jnp.zeros(1), changed])
    )
    pen = rec.penetration[:, 0]
    if variant == "penetration_next_state":
        pen = jnp.maximum(0.0, -xs[1:, 3])

    if variant == "grad_wrt_state":

        def loss_of_offsets(offsets):
            def body(x, u_d):
                x_next, r = _HOP_STEP(x + u_d[1], u_d[0], hopper_params(ground_stiffness))
                return x_next, (x_next, r.penetration[0])

            _, (xs_, pens) = jax.lax.scan(body, x0, (us, offsets))
            x_end = xs_[-1]
            return (
                W_FOOT * (x_end[2] - HOP_FOOT_TARGET) ** 2
                + W_HEIGHT * (x_end[1] - HOP_HEIGHT_TARGET) ** 2
                + W_EFFORT * jnp.sum(us**2)
                + W_PEN * jnp.sum(pens**2)
            )

        grad_norm = jnp.linalg.norm(jax.grad(loss_of_offsets)(jnp.zeros((us.shape[0], 8))), axis=1)
    else:
        grad = jax.grad(lambda u: jnp.sum(_hop_terms(u, x0, ground_stiffness)[0]))(us)
        grad_norm = jnp.linalg.norm(grad, axis=1)
    return contact, switch, pen, effort, pen_cost, grad_norm


def step_log(x0, us, ground_stiffness, variant=None):
    """The per-step log (``variant``: a catalogued mistake)."""
    contact, switch, *rest = (np.asarray(a) for a in _hop_log(*_as_f(x0, us, ground_stiffness), variant=variant))
    return (contact.astype(np.int64), switch.astype(np.int64), *rest)  # the flags are 0/1 integers


def hop_controls(seed, n_steps, push_start, push_length, push_force):
    """Leg thrust with one push (N) plus noise, small hip torques: the controls of one rollout, (N, 2)."""
    rng = case_rng(seed)
    k = np.arange(n_steps)
    thrust = np.where((k >= push_start) & (k < push_start + push_length), push_force, 0.0)
    thrust = thrust + rng.normal(0.0, 1.0, n_steps)
    torque = rng.normal(0.0, 0.1, n_steps)
    return np.stack([thrust, torque], axis=1).round(4)


#: Hidden rollouts: N = 150 steps each (the public length, so one compilation), ground stiffness from
#: soft (8e3 N/m: one landing) over 4e4 (5 switches) to chattering (1.2e5 N/m: 18 switches); the
#: notebook's public experiment uses 5e3 and 1.5e5 with other initial states and controls.
_HOP_CASES = (
    ((0.0, 0.52, 0.01, 0.012, 0.45, -0.9, 0.45, -0.9), 8e3, (40_903, 150, 30, 40, 35.0)),
    ((0.02, 0.53, 0.0, 0.025, 0.3, -1.2, 0.35, -1.2), 4e4, (40_904, 150, 45, 35, 40.0)),
    ((-0.01, 0.51, 0.0, 0.006, 0.6, -0.7, 0.6, -0.7), 1.2e5, (40_905, 150, 20, 50, 30.0)),
)

#: The log is the AD of one program, so two faithful implementations differ by rounding. A second
#: implementation (the loss accumulated in the scan carry in another order, the gradient by forward
#: mode, jax.jacfwd, instead of reverse mode) agrees to 5e-15 relative to the largest entry on these
#: rollouts (worst: the chattering 1.2e5 N/m ground); the contact flags are exact (the foot is never
#: within 1e-9 m of the ground at a step start). Every catalogued mistake moves some entry by > 3e-2
#: relative (on at least one case; "contact from force" only shows on the two stiffer grounds).
HOP_RTOL = 1e-9


def _hop_cases():
    cases = []
    for x0, stiffness, control in _HOP_CASES:
        case = {"x0": np.asarray(x0), "us": hop_controls(*control), "ground_stiffness": stiffness}
        xs, rec = cl.rollout_with_record(
            _HOP_STEP, jnp.asarray(case["x0"]), jnp.asarray(case["us"]), hopper_params(stiffness)
        )
        assert float(jnp.min(jnp.abs(xs[:-1, 3]))) > 1e-9  # contact flags are robust
        contact = np.asarray(rec.mode[:, 0] > 0)
        assert 0 < contact.sum() < len(contact) and np.any(np.diff(contact.astype(int)) != 0)
        cases.append(case)
    return cases


_LOG_OUTPUTS = (
    Output("接触标记 contact", "integer"),  # flags: 0/1, compared as integers (bools are fine)
    Output("接触切换 switch", "integer"),
    Output("穿透深度", rtol=HOP_RTOL),
    Output("每步控制代价", rtol=HOP_RTOL),
    Output("每步穿透代价", rtol=HOP_RTOL),
    Output("每步梯度范数 ‖∂L/∂u_k‖", rtol=HOP_RTOL),
)


_S04_END_EXC_CHECKS = (
    Check(
        "loss_terms",
        _hop_cases,
        reference=loss_terms,
        outputs=(Output("loss 分项 [落脚, 身体高度, 控制, 穿透]", rtol=HOP_RTOL),),
        mistakes={
            "s04end_pen_not_squared": Variant(S04END_PEN_NOT_SQUARED, variant="pen_not_squared"),
            "s04end_effort_abs": Variant(S04END_EFFORT_ABS, variant="effort_abs"),
        },
    ),
    Check(
        "step_log",
        _hop_cases,
        reference=step_log,
        outputs=_LOG_OUTPUTS,
        mistakes={
            "s04end_switch_shifted": Variant(S04END_SWITCH_SHIFTED, variant="switch_shifted"),
            "s04end_contact_from_force": Variant(S04END_CONTACT_FROM_FORCE, variant="contact_from_force"),
            "s04end_penetration_next_state": Variant(S04END_PENETRATION_NEXT_STATE, variant="penetration_next_state"),
            "s04end_grad_wrt_state": Variant(S04END_GRAD_WRT_STATE, variant="grad_wrt_state"),
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

_CENTRAL = "(s(y + e) - s(y - e)) / (2 * e)"

EXERCISES = (
    Exercise(
        "s04_end_exA",
        _S04_END_EXA_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "旧速度的敏感度",
                edits={  # the position sensitivity updated with the OLD velocity sensitivity
                    "analytic_answer": [
                        (
                            "        s_v = s_v + h * (-b * s_v - k * s_q - q) / m\n",
                            "        s_q, s_v = s_q + h * s_v, s_v + h * (-b * s_v - k * s_q - q) / m\n",
                        ),
                        (
                            "        # d/dk of q' = q + h v': the NEW velocity sensitivity\n        s_q = s_q + h * s_v\n",
                            "",
                        ),
                    ],
                },
            ),
            WrongAnswer(
                "前向差分",
                keep=("ad_answer",),
                edits={  # a forward difference in the table
                    "table_answer": [
                        (
                            "- float(final_position(m, b, k - e, q0, v0, h, n_steps))) / (2 * e)",
                            "- float(final_position(m, b, k, q0, v0, h, n_steps))) / e",
                        )
                    ],
                },
            ),
            WrongAnswer(
                "自然对数",
                keep=("ad_answer",),
                edits={  # ln instead of log10
                    "table_answer": [("return fd, np.log10(rel)", "return fd, np.log(rel)")],
                },
            ),
        ),
        shortcuts=(
            # the hand recursion handed to the notebook's own AD version: its points are lost (by_hand refuses
            # the jax.grad inside ad_derivative)
            Shortcut(
                "亲手推出导数",
                edits={
                    "analytic_answer": [
                        ("    q, v = float(q0), float(v0)\n", "    return ad_derivative(m, b, k, q0, v0, h, n_steps)\n")
                    ]
                },
                keep=("ad_answer",),
                loses=3.0,
            ),
        ),
    ),
    Exercise(
        "s04_end_exB",
        _S04_END_EXB_CHECKS,
        constants={"G": GRAVITY},
        wrong_answers=(
            WrongAnswer(
                "对调",
                edits={  # forward and backward differences swapped
                    "fd_answer": [
                        (
                            "return (s(y + e) - s(y)) / e, (s(y) - s(y - e)) / e, " + _CENTRAL,
                            "return (s(y) - s(y - e)) / e, (s(y + e) - s(y)) / e, " + _CENTRAL,
                        )
                    ],
                },
            ),
            WrongAnswer(
                "地面以下才有推力",
                keep=("ad_answer",),
                edits={  # contact on the wrong side of the ground
                    "fd_answer": [("jnp.maximum(0.0, -y)", "jnp.maximum(0.0, y)")],
                },
            ),
            WrongAnswer(
                "分母应为 2ε",
                edits={  # the central difference divided by eps, not 2 eps
                    "fd_answer": [(_CENTRAL, "(s(y + e) - s(y - e)) / e")],
                },
            ),
        ),
    ),
    Exercise(
        "s04_end_exC",
        _S04_END_EXC_CHECKS,
        constants={
            "H": HOP_H,
            "GROUND_DAMPING": HOP_GROUND_DAMPING,
            "FOOT_TARGET": HOP_FOOT_TARGET,
            "HEIGHT_TARGET": HOP_HEIGHT_TARGET,
            "W_FOOT": W_FOOT,
            "W_HEIGHT": W_HEIGHT,
            "W_EFFORT": W_EFFORT,
            "W_PEN": W_PEN,
        },
        wrong_answers=(
            WrongAnswer(
                "与第 k−1 步不同",
                keep=("terms_answer",),
                edits={  # the switch compares step k with k+1
                    "log_answer": [
                        (
                            "switch = jnp.concatenate([jnp.zeros(1), (contact[1:] != contact[:-1]).astype(jnp.float64)])",
                            "switch = jnp.concatenate([(contact[1:] != contact[:-1]).astype(jnp.float64), jnp.zeros(1)])",
                        )
                    ],
                },
            ),
            # the penetration logged from the state AFTER each step (the rollout's states instead of the record)
            WrongAnswer(
                "步末状态",
                edits={
                    "terms_answer": [
                        ("    return terms, effort, pen_cost, rec\n", "    return terms, effort, pen_cost, rec, xs\n")
                    ],
                    "log_answer": [
                        (
                            "terms, effort, pen_cost, rec = _rollout_terms",
                            "terms, effort, pen_cost, rec, xs = _rollout_terms",
                        ),
                        ("rec.penetration[:, 0], effort", "jnp.maximum(0.0, -xs[1:, 3]), effort"),
                    ],
                },
            ),
            WrongAnswer(
                "截断为 0",
                keep=("terms_answer",),
                edits={  # "in contact" taken as "the ground pushes"
                    "log_answer": [("contact = (rec.mode[:, 0] > 0)", "contact = (rec.normal_force[:, 0] > 0)")],
                },
            ),
        ),
    ),
)
