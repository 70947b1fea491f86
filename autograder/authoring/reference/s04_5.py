"""Reference solutions and graded checks for section S04.5 (soft contact, complementarity, smoothed hard contact).

* ``s04_5_ex1``: the penalty law lambda = k max(0, -phi) and d lambda / d phi, with the convention at
  phi = 0 that ``jax.grad`` of ``cl.penalty_force`` gives (-k/4: two nested ``max`` at a tie, each
  passing half of the slope).
* ``s04_5_ex2``: the max of the penetration depth replaced by a softplus, lambda = k sp_beta(-phi)
  (``cl.softplus_penetration_force`` with no damper), and its derivative -k sigma(-beta phi), for
  beta = 5, 50, 500; hidden points include beta |phi| > 709, where a naive log(1 + exp(.)) overflows.
  :func:`overflow_diagnosis` is called by the graded cell to say so.
* ``s04_5_ex3`` is written-only (no checks).
* ``s04_5_ex4``: a frictionless LCP 0 <= z _|_ W z + w0 >= 0 (W symmetric positive definite): its solution,
  d z* / d w0 by the implicit function theorem on the active set (-inv(W_AA), zero rows for separated
  contacts), and n projected Gauss-Seidel sweeps from z = 0 with the derivative through them. Hidden
  problems are built from a chosen active set with margins (z_i or w_i at least 0.2), so no case sits on a
  mode boundary.
"""

from __future__ import annotations

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import spread as spread_
from autograder.authoring.cases import case_rng, case_value, draw_until
from course_check.adapters import COMPLEMENTARITY_TOL, kink_as_subgradient
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------

S045_WRONG_SIDE = "结果与把力写成 k·max(0, φ) 的版本一致：力加在了 φ > 0（还没碰到、正在分离）的一侧。φ < 0 才表示穿透，穿透深度是 max(0, −φ)。"
S045_SLOPE_SIGN = "φ < 0 处的导数是 +k：对 max(0, −φ) 求导时漏了链式法则里内层 −φ 的那个负号。穿透越深（φ 越小）力越大，所以 dλ/dφ = −k。"
S045_KINK_OUTSIDE = "φ = 0 处的导数不在次微分 [−k, 0] 里：折角处左导数是 −k、右导数是 0，可以返回这两个数之间的任何一个值（jax.grad 给出 −k/4），但不能是正数或比 −k 还小。正号多半是漏了内层 −φ 的负号。"
S045_SOFTPLUS_ON_CLAMP = "结果与把 softplus 套在外层截断上的版本一致（cl.softplus_clamp_force：λ = sp_β(k·max(0, −φ))）。本题要替换的是穿透深度里的 max：λ = k·sp_β(−φ)（cl.softplus_penetration_force）。外层版本在 φ = 0 仍有折点，φ > 0 时还留着常数力 ln2/β，β 的单位也变成了 1/N。"
S045_MISSING_INV_BETA = "结果约是参考值的 β 倍：softplus_β(z) = log(1 + e^{βz})/β，别漏了除以 β（求导时链式法则带出的 β 正好和它约掉，导数是 −k·σ(−βφ)）。"
S045_SIGMOID_SIGN = (
    "导数与 −k·σ(βφ) 一致：sigmoid 的自变量应是 −βφ。检查极限：穿透很深时导数应趋于 −k，离地很远时应趋于 0。"
)
S045_LCP_UNPROJECTED = "结果与直接解线性方程 W z = −w0（不管 z ≥ 0）一致：有的冲量是负的，即接触在“拉”。要找出活动集：只对 z_i > 0 的接触解方程，其余接触 z_i = 0 且 w_i ≥ 0。"
S045_LCP_CLIPPED = "结果与“先解 W z = −w0，再把负的分量截成 0”一致：截断之后，留下的接触的方程 (W z + w0)_i = 0 不再成立（它们与被截掉的接触耦合）。要在活动集上重新解方程。"
S045_LCP_UNCONVERGED = (
    "解不满足互补条件（z ≥ 0、w = Wz + w0 ≥ 0、z·w = 0，容差 1e-12）：多半是迭代（例如投影 Gauss–Seidel）在收敛之前就停了。"
    "接触之间耦合强时（W 的非对角元接近对角元），PGS 每次扫描只把误差缩小一点，几十次扫描远远不够。"
    "本题要精确解：枚举活动集再解线性方程，或者一直迭代到残差小于 1e-14。"
)
S045_IFT_FULL_INVERSE = "导数与 −W⁻¹（整个矩阵求逆）一致：分离的接触（z_i = 0，w_i > 0）在小扰动下保持 z_i = 0，它们的行应为 0；活动接触只通过 W_AA 相互耦合，∂z_A/∂w0_A = −(W_AA)⁻¹。"
S045_IFT_SIGN = "导数的符号反了：活动集上 W_AA z_A = −w0_A，所以 ∂z_A/∂w0_A = −(W_AA)⁻¹（w0 越大，接触越不需要冲量）。"
S045_PGS_JACOBI = "结果与 Jacobi 迭代一致（一次扫描里都用扫描开始时的 z）：Gauss–Seidel 更新第 i 个分量时要用这次扫描里已经更新过的 z_0, …, z_{i−1}。"
S045_PGS_UNPROJECTED = "结果与不投影的 Gauss–Seidel 一致（z_i 可以变成负数）：每次更新后要取 max(0, ·)，冲量只推不拉。"
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


def _penalty_law(phi, k, side="penetration", slope_sign=-1.0, at_zero=-0.25):
    """A penalty force in closed form: the force on ``side``, slope ``slope_sign`` k, ``at_zero`` k at the kink."""
    phi = np.asarray(phi, dtype=np.float64)
    inside = phi < 0 if side == "penetration" else phi > 0
    lam = k * np.where(inside, np.abs(phi), 0.0)
    slope = np.where(inside, slope_sign * k, np.where(phi == 0, at_zero * k, 0.0))
    return lam, slope


def _graded_penalty_law(phi, k, **switches):
    """:func:`_penalty_law` graded like the student's (through kink_as_subgradient)."""
    return kink_as_subgradient(partial(_penalty_law, **switches))(phi, k)


def _both_sides_and_one_kink(phi) -> bool:
    return bool(np.sum(phi == 0.0) == 1 and np.any(phi < 0) and np.any(phi > 0))


def _penalty_cases():
    rng = case_rng(405_101)
    cases = []
    for k, n in ((350.0, 6), (2.0e4, 7), (1234.5, 5)):
        phi = draw_until(
            lambda n=n: rng.permutation(np.concatenate([rng.uniform(-0.05, 0.05, size=n).round(5), [0.0]])),
            _both_sides_and_one_kink,
        )
        cases.append({"phi": phi, "k": k})
    grid = np.concatenate([rng.uniform(-0.02, 0.0, size=3), rng.uniform(0.0, 0.02, size=2)]).round(5)
    cases.append({"phi": rng.permutation(np.concatenate([grid, [0.0]])).reshape(2, 3), "k": 870.0})  # a 2-D array
    assert all(_both_sides_and_one_kink(case["phi"]) for case in cases)  # the grid has both signs by construction
    return cases


_S04_5_EX1_CHECKS = (
    Check(
        "penalty_contact",
        _penalty_cases,
        reference=graded_penalty_contact,
        variant_of=_graded_penalty_law,
        # at the kink any subgradient is right: the slope is compared where phi != 0, and at phi = 0 only
        # its distance outside [-k, 0] (course_check.adapters.kink_as_subgradient)
        outputs=(
            Output("接触力 λ", "exact"),
            Output("导数 dλ/dφ（φ ≠ 0 处）", "exact"),
            # not returned by the student: computed by the grader from the slope the student returned at phi = 0
            Output(
                "你在 φ = 0 处给出的导数落在 [−k, 0] 之外的距离（评分程序由你的导数算出，除以 k）", "exact", atol=1e-12
            ),
        ),
        mistakes={
            "s045_wrong_side": Variant(S045_WRONG_SIDE, side="separation", slope_sign=1.0, at_zero=0.25),
            "s045_slope_sign": Variant(S045_SLOPE_SIGN, slope_sign=1.0, at_zero=0.25),
            "s045_kink_outside": Variant(S045_KINK_OUTSIDE, at_zero=0.25),
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


def _softplus_mistake(phi, k, beta, name):
    """(lambda, d lambda / d phi) of the catalogued mistake ``name``."""
    lam, slope = softplus_contact(phi, k, beta)
    z = -np.asarray(phi, dtype=np.float64) * beta
    if name == "s045_missing_inv_beta":
        return beta * lam, beta * slope
    if name == "s045_sigmoid_sign":
        return lam, -k * np.exp(-np.logaddexp(0.0, z))
    if name == "s045_softplus_slope_sign":
        return lam, -slope
    return _law("clamp", phi, k, beta)


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
            name: Mistake(message, partial(_softplus_mistake, name=name))
            for name, message in (
                ("s045_softplus_on_clamp", S045_SOFTPLUS_ON_CLAMP),
                ("s045_missing_inv_beta", S045_MISSING_INV_BETA),
                ("s045_sigmoid_sign", S045_SIGMOID_SIGN),
                ("s045_softplus_slope_sign", S045_SOFTPLUS_SLOPE_SIGN),
            )
        },
        nonfinite_hint=_OVERFLOW_MESSAGE,
    ),
)

# --- s04_5_ex4: the frictionless LCP, its IFT derivative, and unrolled projected Gauss-Seidel -------------


#: a projected Gauss-Seidel solve stopped after this many sweeps: the catalogued "not converged" solve
PGS_STOPPED_AT = 30


def _pgs_solve(W, w0, n_sweeps):
    z = np.zeros_like(w0)
    for _ in range(n_sweeps):
        for i in range(w0.size):
            z[i] = max(0.0, z[i] - (W[i] @ z + w0[i]) / W[i, i])
    return z


def _complementary(W, w0, z) -> bool:
    w, tol = W @ z + w0, COMPLEMENTARITY_TOL * max(1.0, float(np.max(np.abs(w0))))
    return bool(np.min(z) >= -tol and np.min(w) >= -tol and abs(float(z @ w)) <= tol)


def solve_lcp_checked(W, w0, method="enumerate"):
    """(z, complementarity holds) as :func:`course_check.adapters.complementarity` grades a solve."""
    z = solve_lcp(W, w0, method)
    return z, np.int64(_complementary(np.asarray(W, dtype=np.float64), np.asarray(w0, dtype=np.float64), z))


def solve_lcp(W, w0, method="enumerate"):
    """The solution of 0 <= z _|_ W z + w0 >= 0 by enumerating active sets; the other methods are mistakes."""
    W, w0 = np.asarray(W, dtype=np.float64), np.asarray(w0, dtype=np.float64)
    if method == "pgs_stopped":
        return _pgs_solve(W, w0, PGS_STOPPED_AT)
    if method != "enumerate":
        z = np.linalg.solve(W, -w0)
        return np.maximum(z, 0.0) if method == "clipped" else z
    for pattern in itertools.product((False, True), repeat=w0.size):
        active = np.array(pattern)
        z = np.zeros(w0.size)
        if active.any():
            z[active] = np.linalg.solve(W[np.ix_(active, active)], -w0[active])
        if np.all(z[active] > 0) and np.all((W @ z + w0)[~active] >= 0):
            return z
    raise ValueError("no active set satisfies the complementarity conditions")


def lcp_jacobian(W, w0, full_inverse=False, sign=-1.0):
    """d z* / d w0 = sign * inv(W_AA) on the active set A, zero elsewhere."""
    W = np.asarray(W, dtype=np.float64)
    if full_inverse:
        return sign * np.linalg.inv(W)
    active = solve_lcp(W, w0) > 0
    J = np.zeros_like(W)
    J[np.ix_(active, active)] = sign * np.linalg.inv(W[np.ix_(active, active)])
    return J


def _pgs(w0, W, n_sweeps, jacobi, project):
    z = jnp.zeros_like(w0)
    for _ in range(n_sweeps):
        start = z
        for i in range(w0.shape[0]):
            seen = start if jacobi else z
            step = seen[i] - (W[i] @ seen + w0[i]) / W[i, i]
            z = z.at[i].set(jnp.maximum(step, 0.0) if project else step)
    return z


def pgs_unrolled(W, w0, n_sweeps, jacobi=False, project=True):
    """(z after n projected Gauss-Seidel sweeps from 0, d z / d w0 through them by jax.jacfwd)."""
    W, w0 = jnp.asarray(W, dtype=jnp.float64), jnp.asarray(w0, dtype=jnp.float64)
    run = lambda b: _pgs(b, W, int(n_sweeps), jacobi, project)  # noqa: E731
    return np.asarray(run(w0)), np.asarray(jax.jacfwd(run)(w0))


def _lcp_problem(rng, n, n_active, floor=0.5):
    """A symmetric positive definite W (eigenvalues in about [floor, 5]) and a w0 whose solution closes n_active
    contacts with z_i in [0.2, 1.5] and leaves the others apart with w_i in [0.2, 1.5]."""
    B = rng.normal(size=(n, n))
    W = np.round(0.5 * (B @ B.T + (B @ B.T).T) / n + floor * np.eye(n), 6)
    active = np.zeros(n, dtype=bool)
    active[rng.choice(n, size=n_active, replace=False)] = True
    z = np.where(active, rng.uniform(0.2, 1.5, n), 0.0)
    w = np.where(active, 0.0, rng.uniform(0.2, 1.5, n))
    return W, np.round(w - W @ z, 8)


def _coupled_problem(rng, n):
    """Strongly coupled contacts (W nearly singular, all closed) on which PGS_STOPPED_AT sweeps of projected
    Gauss-Seidel are still far from the solution: drawn until they are, so any seed gives such a case."""
    while True:
        W, w0 = _lcp_problem(rng, n, n, floor=0.02)
        z = solve_lcp(W, w0)
        if np.max(np.abs(_pgs_solve(W, w0, PGS_STOPPED_AT) - z)) > 1e-6 * np.max(np.abs(z)):
            return W, w0


def _lcp_cases(seed, coupled=0):
    """Cases of the usual shapes, then ``coupled`` strongly coupled problems of 3 contacts."""

    def cases():
        rng = case_rng(seed)
        problems = [_lcp_problem(rng, n, k) for n, k in _shapes()] + [_coupled_problem(rng, 3) for _ in range(coupled)]
        return [dict(zip(("W", "w0"), problem)) for problem in problems]

    return cases


def _shapes():
    return case_value(((2, 1), (3, 2), (4, 3), (4, 4), (3, 0)), ((2, 2), (3, 1), (4, 2)))


def _pgs_mistakes_apart(case) -> bool:
    """Each catalogued mistake either equals the reference (to 1e-13) or lies 1e-10 or more from it on both outputs
    (tens of tolerances): after many sweeps a quickly converging problem makes Jacobi and Gauss-Seidel agree to a
    few ulps, which no tolerance can separate (a term's salt drew such a case)."""
    reference = pgs_unrolled(**case)
    for variant in ({"jacobi": True}, {"project": False}):
        gaps = [spread_.deviation(r, m) for m, r in zip(pgs_unrolled(**case, **variant), reference)]
        if not all(gap <= 1e-13 for gap in gaps) and not all(gap >= 1e-10 for gap in gaps):
            return False
    return True


def _pgs_cases():
    rng = case_rng(405_403)
    sweeps = case_value((1, 3, 7, 15), (2, 5, 10))
    shapes = case_value(((2, 2), (3, 2), (4, 3), (4, 2)), ((3, 2), (2, 1), (4, 3)))
    apart = case_value(_pgs_mistakes_apart, lambda case: True)  # the public cases stay as they were
    return [
        draw_until(lambda s=s, k=k: dict(zip(("W", "w0"), _lcp_problem(rng, *s)), n_sweeps=k), apart)
        for s, k in zip(shapes, sweeps)
    ]


_S04_5_EX4_CHECKS = (
    Check(
        "solve_lcp",
        _lcp_cases(405_401, coupled=2),  # graded through course_check.adapters.complementarity
        reference=solve_lcp_checked,
        # with no contact closed z* is exactly 0: atol 1e-12 is what "0" means there (the complementarity's own)
        outputs=(
            Output("LCP 的解 z*", "exact", weight=0.5, atol=COMPLEMENTARITY_TOL),
            Output("互补条件成立", "integer", weight=0.5),
        ),
        mistakes={
            "s045_lcp_unprojected": Variant(S045_LCP_UNPROJECTED, method="unprojected"),
            "s045_lcp_clipped": Variant(S045_LCP_CLIPPED, method="clipped"),
            "s045_lcp_unconverged": Variant(S045_LCP_UNCONVERGED, method="pgs_stopped"),
        },
    ),
    Check(
        "lcp_jacobian",
        _lcp_cases(405_402),
        reference=lcp_jacobian,
        outputs=(Output("∂z*/∂w0", "exact", atol=1e-12),),  # no contact closed: a zero Jacobian
        mistakes={
            "s045_ift_full_inverse": Variant(S045_IFT_FULL_INVERSE, full_inverse=True),
            "s045_ift_sign": Variant(S045_IFT_SIGN, sign=1.0),
        },
    ),
    Check(
        "pgs_unrolled",
        _pgs_cases,
        reference=pgs_unrolled,
        outputs=(Output("扫描后的 z", "exact", weight=0.5), Output("穿过扫描的 ∂z/∂w0", "exact", weight=0.5)),
        mistakes={
            "s045_pgs_jacobi": Variant(S045_PGS_JACOBI, jacobi=True),
            "s045_pgs_unprojected": Variant(S045_PGS_UNPROJECTED, project=False),
        },
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
                "链式法则里内层 −φ",  # s045_slope_sign's own message, not the generic sign diagnosis
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
    Exercise(
        "s04_5_ex4",
        _S04_5_EX4_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "不管 z ≥ 0",
                edits={  # the unconstrained solve: negative impulses; its Jacobian -inv(W) follows
                    "solve_lcp_answer": [
                        ("    n = w0.size\n", "    return np.linalg.solve(W, -w0)\n    n = w0.size\n"),
                    ],
                },
            ),
            WrongAnswer(
                "−(W_AA)⁻¹",
                edits={  # the whole matrix inverted: separated contacts respond to w0
                    "lcp_jacobian_answer": [("    return J  ", "    J = -np.linalg.inv(W)\n    return J  ")],
                },
                keep=("solve_lcp_answer",),
            ),
            WrongAnswer(
                "Jacobi",
                edits={  # every update of a sweep reads the z the sweep started from
                    "pgs_unrolled_answer": [
                        (
                            "        for _ in range(n_sweeps):\n",
                            "        for _ in range(n_sweeps):\n            z_prev = z\n",
                        ),
                        (
                            "step = z[i] - (W[i] @ z + w0[i]) / W[i, i]",
                            "step = z_prev[i] - (W[i] @ z_prev + w0[i]) / W[i, i]",
                        ),
                    ],
                },
            ),
        ),
        shortcuts=(
            # projected Gauss-Seidel stopped at 30 sweeps: right where it converged, not where contacts couple
            Shortcut(
                "互补条件",
                edits={
                    "solve_lcp_answer": [
                        (
                            "    n = w0.size\n",
                            "    z = np.zeros_like(w0)\n"
                            "    for _ in range(30):\n"
                            "        for i in range(w0.size):\n"
                            "            z[i] = max(0.0, z[i] - (W[i] @ z + w0[i]) / W[i, i])\n"
                            "    return z\n"
                            "    n = w0.size\n",
                        )
                    ],
                },
                loses=0.5,
            ),
        ),
    ),
)
