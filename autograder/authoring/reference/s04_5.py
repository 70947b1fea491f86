"""Reference solutions and graded checks for section S04.5 (soft contact, complementarity, smoothed hard contact).

* ``s04_5_ex1``: the penalty law lambda = k max(0, -phi) and d lambda / d phi, with the convention at
  phi = 0 that ``jax.grad`` of ``cl.penalty_force`` gives (-k/4: two nested ``max`` at a tie, each
  passing half of the slope).
* ``s04_5_ex2``: the max of the penetration depth replaced by a softplus, lambda = k sp_beta(-phi)
  (``cl.softplus_penetration_force`` with no damper), and its derivative -k sigma(-beta phi), for
  beta = 5, 50, 500; hidden points include beta |phi| > 709, where a naive log(1 + exp(.)) overflows.
  :func:`overflow_diagnosis` is called by the graded cell to say so.
* ``s04_5_ex3`` is written-only (no checks).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring.cases import case_rng
from course_check.adapters import kink_as_subgradient
from autograder.authoring.registry import Check, Exercise, Mistake, Output, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------

S045_WRONG_SIDE = "结果与把力写成 k·max(0, φ) 的版本一致：力加在了 φ > 0（还没碰到、正在分离）的一侧。φ < 0 才表示穿透，穿透深度是 max(0, −φ)。"
S045_SLOPE_SIGN = "φ < 0 处的导数是 +k：对 max(0, −φ) 求导时漏了链式法则里内层 −φ 的那个负号。穿透越深（φ 越小）力越大，所以 dλ/dφ = −k。"
S045_KINK_OUTSIDE = "φ = 0 处的导数不在次微分 [−k, 0] 里：折角处左导数是 −k、右导数是 0，可以返回这两个数之间的任何一个值（jax.grad 给出 −k/4），但不能是正数或比 −k 还小。正号多半是漏了内层 −φ 的负号。"
S045_SOFTPLUS_ON_CLAMP = "结果与把 softplus 套在外层截断上的版本一致（cl.softplus_clamp_force：λ = sp_β(k·max(0, −φ))）。本题要替换的是穿透深度里的 max：λ = k·sp_β(−φ)（cl.softplus_penetration_force）。外层版本在 φ = 0 仍有折点，φ > 0 时还留着常数力 ln2/β，β 的单位也变成了 1/N。"
S045_MISSING_INV_BETA = "结果约是参考值的 β 倍：softplus_β(z) = log(1 + e^{βz})/β，别漏了除以 β（求导时链式法则带出的 β 正好和它约掉，导数是 −k·σ(−βφ)）。"
S045_SIGMOID_SIGN = (
    "导数与 −k·σ(βφ) 一致：sigmoid 的自变量应是 −βφ。检查极限：穿透很深时导数应趋于 −k，离地很远时应趋于 0。"
)
S045_SOFTPLUS_SLOPE_SIGN = "导数的形状对了但符号反了（+k·σ(−βφ)）：λ 随穿透加深而增大，φ 越小力越大，所以 dλ/dφ < 0。"

# --- s04_5_ex1: penalty force and its derivative ------------------------------------------------


def _penalty_scalar(phi, k):
    return cl.penalty_force(phi, 0.0, k, 0.0)  # no damper: lambda = max(0, k max(0, -phi))


_penalty_value_and_slope = jax.jit(jax.vmap(jax.value_and_grad(_penalty_scalar), in_axes=(0, None)))


def penalty_contact(phi, k):
    """(lambda, d lambda / d phi) elementwise, by jax.grad of ``cl.penalty_force`` (shape of ``phi``; -k/4 at phi = 0)."""
    phi = np.asarray(phi, dtype=np.float64)
    lam, slope = _penalty_value_and_slope(jnp.asarray(phi.ravel()), float(k))
    return np.asarray(lam).reshape(phi.shape), np.asarray(slope).reshape(phi.shape)


def graded_penalty_contact(phi, k):
    """What the graded cell compares: the reference through :func:`course_check.adapters.kink_as_subgradient`."""
    return kink_as_subgradient(penalty_contact)(phi, k)


def _penalty_variant(side="penetration", slope_sign=-1.0, at_zero=-0.25):
    """A penalty force graded like the student's: the force on ``side``, slope ``slope_sign`` k, ``at_zero`` k at the kink."""

    def fn(phi, k):
        phi = np.asarray(phi, dtype=np.float64)
        inside = phi < 0 if side == "penetration" else phi > 0
        lam = k * np.where(inside, np.abs(phi), 0.0)
        slope = np.where(inside, slope_sign * k, np.where(phi == 0, at_zero * k, 0.0))
        return lam, slope

    return kink_as_subgradient(fn)


def _penalty_cases():
    rng = case_rng(405_101)
    cases = []
    for k, n in ((350.0, 6), (2.0e4, 7), (1234.5, 5)):
        phi = np.concatenate([rng.uniform(-0.05, 0.05, size=n).round(5), [0.0]])
        cases.append({"phi": rng.permutation(phi), "k": k})
    grid = np.concatenate([rng.uniform(-0.02, 0.0, size=3), rng.uniform(0.0, 0.02, size=2)]).round(5)
    cases.append({"phi": rng.permutation(np.concatenate([grid, [0.0]])).reshape(2, 3), "k": 870.0})  # a 2-D array
    for case in cases:
        assert np.sum(case["phi"] == 0.0) == 1 and np.any(case["phi"] < 0) and np.any(case["phi"] > 0)
    return cases


_S04_5_EX1_CHECKS = (
    Check(
        "penalty_contact",
        _penalty_cases,
        reference=graded_penalty_contact,
        # at the kink any subgradient is right: the slope is compared where phi != 0, and at phi = 0 only
        # its distance outside [-k, 0] (course_check.adapters.kink_as_subgradient)
        outputs=(
            Output("接触力 λ", "exact"),
            Output("导数 dλ/dφ（φ ≠ 0 处）", "exact"),
            Output("φ = 0 处的导数超出 [−k, 0] 的距离（除以 k）", "exact", atol=1e-12),
        ),
        mistakes={
            "s045_wrong_side": Mistake(
                S045_WRONG_SIDE, _penalty_variant(side="separation", slope_sign=1.0, at_zero=0.25)
            ),
            "s045_slope_sign": Mistake(S045_SLOPE_SIGN, _penalty_variant(slope_sign=1.0, at_zero=0.25)),
            "s045_kink_outside": Mistake(S045_KINK_OUTSIDE, _penalty_variant(at_zero=0.25)),
        },
    ),
)


# --- s04_5_ex2: softplus instead of max -----------------------------------------------------------

#: ln of the largest float64: exp(x) overflows to inf beyond it (88.7 in float32)
OVERFLOW_EXPONENT = float(np.log(np.finfo(np.float64).max))


def _penetration_scalar(phi, k, beta):
    return cl.softplus_penetration_force(phi, 0.0, k, 0.0, beta)  # lambda = max(0, k sp_beta(-phi))


def _clamp_scalar(phi, k, beta):
    return cl.softplus_clamp_force(phi, 0.0, k, 0.0, beta)  # lambda = sp_beta(k max(0, -phi))


def _value_and_slope(law):
    return jax.jit(jax.vmap(jax.value_and_grad(law), in_axes=(0, None, None)))


_LAWS = {"penetration": _value_and_slope(_penetration_scalar), "clamp": _value_and_slope(_clamp_scalar)}


def _law(name, phi, k, beta):
    phi = np.asarray(phi, dtype=np.float64)
    lam, slope = _LAWS[name](jnp.asarray(phi.ravel()), float(k), float(beta))
    return np.asarray(lam).reshape(phi.shape), np.asarray(slope).reshape(phi.shape)


def softplus_contact(phi, k, beta):
    """lambda = k sp_beta(-phi) and d lambda / d phi = -k sigma(-beta phi) (``cl.softplus_penetration_force``)."""
    return _law("penetration", phi, k, beta)


def _softplus_variant(name):
    def fn(phi, k, beta):
        lam, slope = softplus_contact(phi, k, beta)
        z = -np.asarray(phi, dtype=np.float64) * beta
        if name == "s045_missing_inv_beta":
            return beta * lam, beta * slope
        if name == "s045_sigmoid_sign":
            return lam, -k * np.exp(-np.logaddexp(0.0, z))
        if name == "s045_softplus_slope_sign":
            return lam, -slope
        return _law("clamp", phi, k, beta)

    return fn


def _softplus_cases():
    rng = case_rng(405_201)

    def draw(width, n):
        return rng.uniform(-width, width, size=n).round(5)

    cases = [
        {"phi": draw(0.3, 7), "k": 1000.0, "beta": 5.0},
        {"phi": draw(0.06, 7), "k": 1000.0, "beta": 50.0},
        # deep penetrations (beta |phi| > 709 on the first two) and far gaps: a naive log(1 + exp) gives inf
        {"phi": rng.permutation(np.concatenate([[-2.537, -1.618, 2.204], draw(0.008, 5)])), "k": 1000.0, "beta": 500.0},
        {"phi": draw(0.01, 6).reshape(2, 3), "k": 2500.0, "beta": 500.0},
    ]
    assert np.max(-cases[2]["phi"] * 500.0) > OVERFLOW_EXPONENT + 50
    for case in cases[:2] + cases[3:]:
        assert np.max(np.abs(case["phi"]) * case["beta"]) < 100.0  # only case 3 probes the overflow
    return cases


_OVERFLOW_MESSAGE = (
    "溢出诊断：在 β·|φ| 很大（超过约 709）的隐藏点上会出现这种情况。朴素写法 log(1 + exp(βz)) 里的 exp(βz) "
    "在 βz > 709.78 时超出 float64 的表示范围，上溢成 inf（float32 里 βz > 88.7 就会上溢），log(inf) = inf，"
    "导数写成 exp(βz)/(1 + exp(βz)) 还会得到 inf/inf = NaN。请改用数值稳定的写法：力用 jax.nn.softplus(βz)/β、"
    "np.logaddexp(0, βz)/β 或 max(z, 0) + log1p(exp(−β|z|))/β；导数用 jax.nn.sigmoid(βz) 或 1/(1 + exp(−βz))（z = −φ）。"
)


_S04_5_EX2_CHECKS = (
    Check(
        "softplus_contact",
        _softplus_cases,
        reference=softplus_contact,
        outputs=(Output("接触力 λ", "exact"), Output("导数 dλ/dφ", "exact")),
        mistakes={
            "s045_softplus_on_clamp": Mistake(S045_SOFTPLUS_ON_CLAMP, _softplus_variant("s045_softplus_on_clamp")),
            "s045_missing_inv_beta": Mistake(S045_MISSING_INV_BETA, _softplus_variant("s045_missing_inv_beta")),
            "s045_sigmoid_sign": Mistake(S045_SIGMOID_SIGN, _softplus_variant("s045_sigmoid_sign")),
            "s045_softplus_slope_sign": Mistake(
                S045_SOFTPLUS_SLOPE_SIGN, _softplus_variant("s045_softplus_slope_sign")
            ),
        },
        nonfinite_hint=_OVERFLOW_MESSAGE,
    ),
)

# --- the exercises: checks and plausible wrong submissions (edits of the notebooks' solution cells) ---

EXERCISES = (
    Exercise(
        "s04_5_ex1",
        _S04_5_EX1_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "次微分",
                edits={  # a positive slope at the kink: outside the subdifferential [-k, 0]
                    "penalty_answer": [("np.where(phi == 0, -0.25 * k, dlam)", "np.where(phi == 0, 0.25 * k, dlam)")],
                },
            ),
            WrongAnswer(
                "φ > 0",
                edits={  # the force put on the separating side, slope +k there
                    "penalty_answer": [
                        ("k * np.where(phi < 0, -phi, 0.0)", "k * np.where(phi > 0, phi, 0.0)"),
                        ("np.where(phi < 0, -k, 0.0)", "np.where(phi > 0, k, 0.0)"),
                    ],
                },
            ),
            WrongAnswer(
                "负号",
                edits={  # d/dphi max(0, -phi) taken as +1: slope +k, and +k/4 at the kink
                    "penalty_answer": [
                        ("np.where(phi < 0, -k, 0.0)", "np.where(phi < 0, k, 0.0)"),
                        ("-0.25 * k", "0.25 * k"),
                    ],
                },
            ),
        ),
    ),
    Exercise(
        "s04_5_ex2",
        _S04_5_EX2_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "上溢",
                edits={  # the naive log(1 + exp) and exp/(1 + exp): inf and nan for large beta |phi|
                    "softplus_answer": [
                        ("k * np.logaddexp(0.0, z) / beta", "k * np.log(1.0 + np.exp(z)) / beta"),
                        ("-k * np.exp(-np.logaddexp(0.0, -z))", "-k * np.exp(z) / (1.0 + np.exp(z))"),
                    ],
                },
            ),
            WrongAnswer(
                "cl.softplus_clamp_force",
                edits={  # softplus on the outer clamp: sp_beta(k max(0, -phi))
                    "softplus_answer": [
                        ("k * np.logaddexp(0.0, z) / beta", "np.logaddexp(0.0, k * np.maximum(z, 0.0)) / beta"),
                        (
                            "-k * np.exp(-np.logaddexp(0.0, -z))",
                            "np.where(z > 0, -k * np.exp(-np.logaddexp(0.0, -k * z)), 0.0)",
                        ),
                    ],
                },
            ),
        ),
    ),
)
