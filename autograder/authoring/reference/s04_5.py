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
from autograder.verdict.compare import add_mistake_message
from autograder.authoring.registry import Check, Output, WrongAnswer, register

# --- mistakes this section recognises ------------------------------------------------------------

add_mistake_message("s045_wrong_side", "结果与把力写成 k·max(0, φ) 的版本一致：力加在了 φ > 0（还没碰到、正在分离）的一侧。φ < 0 才表示穿透，穿透深度是 max(0, −φ)。")
add_mistake_message("s045_slope_sign", "φ < 0 处的导数是 +k：对 max(0, −φ) 求导时漏了链式法则里内层 −φ 的那个负号。穿透越深（φ 越小）力越大，所以 dλ/dφ = −k。")
add_mistake_message("s045_zero_minus_k", "只有 φ = 0 处不对：你在 φ = 0 取了 −k（把边界归到了穿透一侧）。本题约定 φ = 0 处取 −k/4，也就是 jax.grad 作用在 cl.penalty_force 上得到的值。")
add_mistake_message("s045_zero_zero", "只有 φ = 0 处不对：你在 φ = 0 取了 0（把边界归到了分离一侧）。本题约定 φ = 0 处取 −k/4，也就是 jax.grad 作用在 cl.penalty_force 上得到的值。")
add_mistake_message("s045_zero_half", "只有 φ = 0 处不对：你取了 −k/2，这是 jax.grad 穿过“一个” jnp.maximum 时的平局约定。cl.penalty_force 里有两层 max（穿透深度 max(0, −φ) 和外层非负截断），每层在平局处各传一半斜率，合起来是 −k/4，本题按它约定。")
add_mistake_message("s045_softplus_on_clamp", "结果与把 softplus 套在外层截断上的版本一致（cl.softplus_clamp_force：λ = sp_β(k·max(0, −φ))）。本题要替换的是穿透深度里的 max：λ = k·sp_β(−φ)（cl.softplus_penetration_force）。外层版本在 φ = 0 仍有折点，φ > 0 时还留着常数力 ln2/β，β 的单位也变成了 1/N。")
add_mistake_message("s045_missing_inv_beta", "结果约是参考值的 β 倍：softplus_β(z) = log(1 + e^{βz})/β，别漏了除以 β（求导时链式法则带出的 β 正好和它约掉，导数是 −k·σ(−βφ)）。")
add_mistake_message("s045_sigmoid_sign", "导数与 −k·σ(βφ) 一致：sigmoid 的自变量应是 −βφ。检查极限：穿透很深时导数应趋于 −k，离地很远时应趋于 0。")
add_mistake_message("s045_softplus_slope_sign", "导数的形状对了但符号反了（+k·σ(−βφ)）：λ 随穿透加深而增大，φ 越小力越大，所以 dλ/dφ < 0。")

# --- s04_5_ex1: penalty force and its derivative ------------------------------------------------


def _penalty_scalar(phi, k):
    return cl.penalty_force(phi, 0.0, k, 0.0)  # no damper: lambda = max(0, k max(0, -phi))


_penalty_value_and_slope = jax.jit(jax.vmap(jax.value_and_grad(_penalty_scalar), in_axes=(0, None)))


def penalty_contact(phi, k):
    """(lambda, d lambda / d phi) elementwise, by jax.grad of ``cl.penalty_force`` (shape of ``phi``)."""
    phi = np.asarray(phi, dtype=np.float64)
    lam, slope = _penalty_value_and_slope(jnp.asarray(phi.ravel()), float(k))
    lam, slope = np.asarray(lam).reshape(phi.shape), np.asarray(slope).reshape(phi.shape)
    # the closed form and the stated convention, as a guard against a silent library change
    closed = np.where(phi < 0, -k, np.where(phi == 0, -k / 4, 0.0))
    np.testing.assert_allclose(slope, closed, rtol=1e-14, atol=0)
    np.testing.assert_allclose(lam, k * np.maximum(0.0, -phi), rtol=1e-14, atol=0)
    return lam, slope


def _penalty_variant(side="penetration", slope_sign=-1.0, at_zero="quarter"):
    def fn(phi, k):
        phi = np.asarray(phi, dtype=np.float64)
        inside = phi < 0 if side == "penetration" else phi > 0
        lam = k * np.where(inside, np.abs(phi), 0.0)
        zero = {"quarter": -k / 4, "minus_k": -k, "zero": 0.0, "half": -k / 2}[at_zero]
        slope = np.where(inside, slope_sign * k, np.where(phi == 0, zero, 0.0))
        return lam, slope

    return fn


def _penalty_cases():
    rng = np.random.default_rng(405_101)
    cases = []
    for k, n in ((350.0, 6), (2.0e4, 7), (1234.5, 5)):
        phi = np.concatenate([rng.uniform(-0.05, 0.05, size=n).round(5), [0.0]])
        cases.append({"phi": rng.permutation(phi), "k": k})
    grid = np.concatenate([rng.uniform(-0.02, 0.0, size=3), rng.uniform(0.0, 0.02, size=2)]).round(5)
    cases.append({"phi": rng.permutation(np.concatenate([grid, [0.0]])).reshape(2, 3), "k": 870.0})  # a 2-D array
    for case in cases:
        assert np.sum(case["phi"] == 0.0) == 1 and np.any(case["phi"] < 0) and np.any(case["phi"] > 0)
    return cases


register(
    Check(
        "s04_5_ex1", "penalty_contact", 3.0, _penalty_cases,
        reference=penalty_contact,
        outputs=(Output("接触力 λ", "exact"), Output("导数 dλ/dφ", "exact")),
        mistakes={
            "s045_wrong_side": _penalty_variant(side="separation", slope_sign=1.0),
            "s045_slope_sign": _penalty_variant(slope_sign=1.0),
            "s045_zero_minus_k": _penalty_variant(at_zero="minus_k"),
            "s045_zero_zero": _penalty_variant(at_zero="zero"),
            "s045_zero_half": _penalty_variant(at_zero="half"),
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
    lam, slope = _law("penetration", phi, k, beta)
    z = -np.asarray(phi, dtype=np.float64) * beta  # the stable closed forms agree to rounding
    closed_lam = k * (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta
    closed_slope = -k * np.exp(-np.logaddexp(0.0, -z))
    np.testing.assert_allclose(lam, closed_lam, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(slope, closed_slope, rtol=1e-13, atol=1e-300)
    return lam, slope


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
    rng = np.random.default_rng(405_201)

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


register(
    Check(
        "s04_5_ex2", "softplus_contact", 4.0, _softplus_cases,
        reference=softplus_contact,
        outputs=(Output("接触力 λ", "exact"), Output("导数 dλ/dφ", "exact")),
        mistakes={name: _softplus_variant(name) for name in (
            "s045_softplus_on_clamp", "s045_missing_inv_beta", "s045_sigmoid_sign", "s045_softplus_slope_sign")},
        nonfinite_hint=_OVERFLOW_MESSAGE,
    ),
)

# --- plausible wrong submissions (pasted into the release by the self-test) -----------------------

WRONG_ANSWERS = {
    "s04_5_ex1": [
        WrongAnswer(
            cells={
                "penalty_answer": '''def penalty_contact(phi, k):
    phi = np.asarray(phi, dtype=np.float64)
    lam = k * np.maximum(0.0, -phi)
    dlam = np.where(phi <= 0, -k, 0.0)   # the boundary counted as penetrating
    return lam, dlam
''',
            },
            feedback_contains="φ = 0 处不对",
        ),
        WrongAnswer(
            cells={
                "penalty_answer": '''def penalty_contact(phi, k):
    phi = np.asarray(phi, dtype=np.float64)
    lam = k * np.maximum(0.0, phi)       # force where the gap is positive
    dlam = np.where(phi > 0, k, np.where(phi == 0, -k / 4, 0.0))
    return lam, dlam
''',
            },
            feedback_contains="φ > 0",
        ),
        WrongAnswer(
            cells={
                "penalty_answer": '''def penalty_contact(phi, k):
    phi = np.asarray(phi, dtype=np.float64)
    lam = k * np.maximum(0.0, -phi)
    dlam = np.where(phi < 0, k, np.where(phi == 0, k / 4, 0.0))   # d/dphi max(0, -phi) taken as +1
    return lam, dlam
''',
            },
            feedback_contains="负号",
        ),
    ],
    "s04_5_ex2": [
        WrongAnswer(
            cells={
                "softplus_answer": '''def softplus_contact(phi, k, beta):
    phi = np.asarray(phi, dtype=np.float64)
    e = np.exp(-beta * phi)
    lam = k * np.log(1.0 + e) / beta
    dlam = -k * e / (1.0 + e)
    return lam, dlam
''',
            },
            feedback_contains="上溢",
        ),
        WrongAnswer(
            cells={
                "softplus_answer": '''def softplus_contact(phi, k, beta):
    def force(p):
        return jax.nn.softplus(beta * k * jnp.maximum(0.0, -p)) / beta   # softplus on the outer clamp
    phi = jnp.asarray(phi)
    lam = force(phi)
    dlam = jax.vmap(jax.grad(force))(phi.ravel()).reshape(phi.shape)
    return lam, dlam
''',
            },
            feedback_contains="cl.softplus_clamp_force",
        ),
    ],
}
