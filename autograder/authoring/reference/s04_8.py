"""Reference solutions and graded checks for section S04.8 (gradient checking and diagnosis).

* ``s04_8_ex1``: directional check on the double integrator (semi-implicit Euler, log-cosh tracking
  cost): the (AD, FD, relative error) table for a list of step sizes, and the plateau detector
  (longest run of relative errors <= tol). References: ``cl.directional_check`` and ``cl.find_plateau``.
* ``s04_8_ex2``: the same on a ball dropped on a softplus ground (stiffness 1e4 N/m, sharpness
  beta), differentiated with respect to its initial state (y0, v0): tables for several beta and the
  index of the plateau's largest step size, per beta.
* ``s04_8_ex3``: a training log for a ball thrown near the ground (parameters: initial velocity and a
  constant force), gradient descent with global-norm clipping: loss, its two terms, gradient norm
  before clipping, contact count, maximum penetration, contact residual and update size, per iteration.
  Reference: ``cl.health_record`` fed from ``cl.rollout_with_record``.

Only results that do not depend on rounding are graded. In a central-difference sweep the error at
large eps is truncation (deterministic: the same on every machine to many digits) and at small eps
rounding (it changes with the order of floating-point operations, e.g. jit vs op-by-op). The tables
are graded at truncation-dominated eps only, and the plateau's largest eps is graded only where the
pass/fail pattern that decides it is at least 25 % away from the tolerance; the case generators
assert both, with a second, differently-rounded evaluation of the same sweep.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer
from autograder.kernel_support import sweeps

# --- mistakes this section recognises ------------------------------------------------------------

S048_UNNORMALISED = (
    "结果与“方向没有归一化”一致：先把方向缩放成单位向量 v = d/‖d‖，否则 AD 与 FD 的方向导数都被放大了 ‖d‖ 倍。"
)
S048_RELERR_NO_FLOOR = (
    "相对误差与 |a−f|/max(|a|,|f|) 一致：教材的公式分母是 max(1, |a|, |f|)，方向导数很小时不能再除以它本身。"
)
S048_RELERR_ABSOLUTE = "相对误差与绝对误差 |a−f| 一致：要除以 max(1, |a|, |f|)。"
S048_FD_NOT_HALVED = "FD 方向导数是参考值的 2 倍：中心差分的分母是 2ε，不是 ε。"
S048_PLATEAU_LAST_TIE = "两段一样长的平台里你选了后一段：按约定取ε较大的那一段（先出现的那一段）。"
S048_PLATEAU_STOP_EXCLUSIVE = (
    "平台终点多了一：stop 应是平台里最后一个通过的下标（闭区间），不是 Python 切片那样的“最后一个加一”。"
)
S048_PLATEAU_BEST_ONLY = (
    "结果与“只返回相对误差最小的那一个下标”一致：平台是连续通过（≤ tol）的一段，要返回这一段的起点和终点。"
)
S048_PLATEAU_FIRST_RUN = "结果与“取第一段连续通过的区间”一致：平台是最长的那一段，不一定是最先出现的那一段。"
S048_START_IS_BEST = (
    "结果与“每个 β 下相对误差最小的 ε 的下标”一致：题目要的是平台（最长的连续通过段）的起点，即平台里最大的 ε。"
)
S048_START_IS_STOP = "结果与平台的终点（最小的 ε）一致：题目要的是平台的起点，即平台里最大的 ε。"
S048_LOG_AFTER_UPDATE = "日志里损失、接触等字段与“更新之后的参数”对应，梯度却是更新之前的：同一行的所有字段必须来自同一个参数 θ_i（先记录，再更新）。"
S048_GRAD_NORM_CLIPPED = (
    "梯度范数与“裁剪之后的范数” min(‖g‖, c) 一致：要记录裁剪之前的 ‖g‖，否则尖峰被裁剪掩盖，日志里看不到。"
)
S048_STEP_IS_LR = "更新步长一栏等于学习率：要记录实际施加的更新 Δθ 的范数（裁剪之后的 lr·g 的范数）。"
S048_STEP_UNCLIPPED = "更新步长与“未裁剪的 lr·‖g‖”一致：要记录实际施加的（裁剪之后的）更新的范数。"
S048_CONTACTS_NEXT_STATES = "接触数与“在 x_1…x_N 上数 φ<0”一致：接触记录是在每一步开始时的状态 x_0…x_{N−1} 上求的，请直接用记录里的 penetration > 0。"
S048_RESIDUAL_MEAN = "残差一栏与各步残差的平均值一致：要记录最大值（最坏的一步才说明前向解可不可靠）。"


# --- the chapter's sweep and plateau --------------------------------------------------------------

#: the table of the exercises: eps = 1e-1 ... 1e-12
EPS_TABLE = tuple(10.0**-k for k in range(1, 13))
TOL = cl.default_tolerance(np.float64)  # 100 sqrt(machine epsilon), about 1.5e-6


def _sweep(loss, grad, theta, direction, eps_list):
    """(ad, fd, relerr) by cl.directional_check (vmap over eps inside one program)."""
    chk = cl.directional_check(
        loss, jnp.asarray(theta), grad, tuple(float(e) for e in eps_list), direction=jnp.asarray(direction)
    )
    return float(chk.ad), np.asarray(chk.fd), np.asarray(chk.rel_error)


def _sweep_python(loss, grad, theta, direction, eps_list):
    """The same sweep written as a plain Python loop (different rounding: the robustness witness)."""
    d = np.asarray(direction, dtype=np.float64)
    ad = float(np.sum(np.asarray(grad) * (d / np.linalg.norm(d))))
    fd = sweeps.central_differences(lambda z: loss(jnp.asarray(z)), theta, d, eps_list)
    return ad, fd, sweeps.relative_error(ad, fd)


def _sweep_by_hand(
    loss, grad, theta, direction, eps_list, normalise=True, formula="chapter", halved=True, forward=False
):
    """The sweep written as a Python loop; the keywords switch a typical mistake on."""
    theta, d = np.asarray(theta, dtype=np.float64), np.asarray(direction, dtype=np.float64)
    v = d / np.linalg.norm(d) if normalise else d
    ad = float(np.sum(np.asarray(grad) * v))
    base = float(loss(jnp.asarray(theta)))
    fd = []
    for e in eps_list:
        plus = float(loss(jnp.asarray(theta + e * v)))
        minus = base if forward else float(loss(jnp.asarray(theta - e * v)))
        fd.append((plus - minus) / ((1.0 if forward else 2.0) * e) * (1.0 if halved else 2.0))
    fd = np.array(fd)
    diff = np.abs(ad - fd)
    denom = {
        "chapter": np.maximum(1.0, np.maximum(abs(ad), np.abs(fd))),
        "no_floor": np.maximum(abs(ad), np.abs(fd)),
        "absolute": np.ones_like(fd),
    }[formula]
    return ad, fd, diff / denom


def find_plateau(relerr, tol):
    """(start, stop): the longest run of consecutive entries <= tol (the first of equal runs); (-1, -1) if none."""
    start, stop = sweeps.find_plateau(relerr, tol)
    return int(start), int(stop)


def _runs(relerr, tol):
    ok = np.asarray(relerr) <= tol
    runs, i = [], 0
    while i < len(ok):
        if ok[i]:
            j = i
            while j + 1 < len(ok) and ok[j + 1]:
                j += 1
            runs.append((i, j))
            i = j + 1
        else:
            i += 1
    return runs


def _plateau_last_tie(relerr, tol):
    runs = _runs(relerr, tol)
    if not runs:
        return -1, -1
    longest = max(j - i for i, j in runs)
    return [r for r in runs if r[1] - r[0] == longest][-1]


def _plateau_first_run(relerr, tol):
    runs = _runs(relerr, tol)
    return runs[0] if runs else (-1, -1)


def _plateau_stop_exclusive(relerr, tol):
    start, stop = find_plateau(relerr, tol)
    return (start, stop + 1) if start >= 0 else (-1, -1)


def _plateau_best_only(relerr, tol):
    i = int(np.argmin(relerr))
    return (i, i) if np.asarray(relerr)[i] <= tol else (-1, -1)


def _plateau_start(relerr, tol):
    return find_plateau(relerr, tol)[0]


def _robust_plateau(tables, tol) -> bool:
    """The plateau (start and stop) is the same for every table (differently rounded sweeps) and for
    0.8 tol ... 1.25 tol.

    The entries that decide the start are truncation errors, reproducible to far better than 25 %: the start is
    graded exactly. Those that decide the stop are rounding errors, which another machine can move by an entry;
    keeping the stop steady here only makes the catalogued mistake "the stop instead of the start" more often
    exactly what a student gets (course_check.compare names it when the result is near it, not only equal).
    """
    plateaus = {find_plateau(t, s * tol) for t in tables for s in (0.8, 1.0, 1.25)}
    return len(plateaus) == 1 and (-1, -1) not in plateaus


# --- s04_8_ex1: the double integrator --------------------------------------------------------------

DI_DT, DI_N, DI_TARGET = 0.1, 40, 1.0
_di_step = cl.semi_implicit_euler(cl.double_integrator, DI_DT)
_DI = cl.DoubleIntegratorParams()


@jax.jit
def di_loss(U):
    """sum_k log cosh(q_k - 1) over k = 1..N, plus 0.05 |U|^2; the rollout starts at rest at q = 0."""
    xs = cl.rollout(_di_step, jnp.zeros(2), U, _DI)
    return jnp.sum(jnp.log(jnp.cosh(xs[1:, 0] - DI_TARGET))) + 0.05 * jnp.sum(U**2)


di_grad = jax.jit(jax.grad(di_loss))


def directional_sweep(U, direction, eps_list):
    """(ad, fd (m,), relerr (m,)) of the double-integrator loss at U along the unit vector of direction."""
    return _sweep(di_loss, di_grad(jnp.asarray(U)), U, direction, eps_list)


def _di_sweep_by_hand(U, direction, eps_list, **switches):
    return _sweep_by_hand(di_loss, di_grad(jnp.asarray(U)), U, direction, eps_list, **switches)


def _di_points(seed, n, stable_for=None):
    """Case points (U, direction); the last one has a small directional derivative (|ad| < 1).

    ``stable_for``: one eps list per point; a point is redrawn until its sweep over that list is
    truncation-dominated (:func:`_rounding_proof`), so that another machine's rounding cannot move the graded
    relative errors (a term's salt once drew a point whose largest error moved by 3.6e-4 of itself)."""
    rng = case_rng(seed)
    out = []
    for i in range(n):

        def draw(i=i):
            U = rng.normal(size=(DI_N, 1)).round(6)
            d = rng.normal(scale=2.0, size=(DI_N, 1))
            if i == n - 1:  # a direction almost orthogonal to the gradient: ad = 0.3 exactly (before rounding)
                g = np.asarray(di_grad(jnp.asarray(U)))
                g_hat = g / np.linalg.norm(g)
                perp = d - np.sum(d * g_hat) * g_hat
                t = 0.3 / np.sqrt(np.sum(g * g) - 0.09)
                d = np.linalg.norm(d) * (perp / np.linalg.norm(perp) + t * g_hat)
            return U, d.round(6)

        eps = None if stable_for is None else stable_for[i]
        out.append(draw_until(draw, lambda point, eps=eps: eps is None or _rounding_proof(*point, eps)))
    return out


def _rounding_proof(U, d, eps):
    """Whether the sweep at (U, d) over ``eps`` keeps its relative errors to 1e-5 of the largest one when the
    point moves by 4 ulps and the sweep is written as a Python loop (two of the spread measurement's perturbations;
    regeneration accepts a measured spread up to 1e-4, MAX_WIDENED_RTOL / SAFETY)."""
    ref = directional_sweep(U, d, eps)
    moved = np.asarray(U) * (1.0 + 4 * np.finfo(np.float64).eps)
    for other in (directional_sweep(moved, d, eps), _sweep_python(di_loss, di_grad(jnp.asarray(U)), U, d, eps)):
        if np.max(np.abs(other[2] - ref[2])) > 1e-5 * np.max(ref[2]):
            return False
    return True


def _di_sweep_cases():
    eps_lists = case_value(
        ([0.1, 0.03, 0.01, 0.003, 0.001], [0.05, 0.02, 0.005, 0.002, 0.0005, 0.0002], [0.1, 0.01, 0.001, 0.0001]),
        ([0.08, 0.02, 0.008, 0.002], [0.06, 0.015, 0.004, 0.001, 0.0003], [0.2, 0.02, 0.002, 0.0002]),
    )
    cases = []
    for (U, d), eps in zip(_di_points(408_101, 3, stable_for=eps_lists), eps_lists):
        case = {"U": U, "direction": d, "eps_list": np.array(eps)}
        ref = directional_sweep(**case)
        alt = _sweep_python(di_loss, di_grad(jnp.asarray(U)), U, d, eps)
        # truncation-dominated: a differently rounded sweep agrees far inside the bands below
        assert abs(alt[0] - ref[0]) <= 1e-12 * max(1.0, abs(ref[0]))
        assert np.max(np.abs(alt[1] - ref[1])) <= 1e-11 * np.max(np.abs(ref[1])), np.max(np.abs(alt[1] - ref[1]))
        assert np.max(np.abs(alt[2] - ref[2])) <= 1e-6 * np.max(ref[2]), np.max(np.abs(alt[2] - ref[2])) / np.max(
            ref[2]
        )
        cases.append(case)
    return cases


def _same_pattern(rng, relerr, tol):
    """A plateau case with the pass/fail pattern of ``relerr`` and other numbers: each entry moved by a factor
    10^(-0.3 .. 0.3), redrawn until it lies on its side of ``tol`` and at least a factor 1.5 from it."""

    def entry(r):
        passes = r <= tol
        return draw_until(
            lambda: float(f"{r * 10.0 ** rng.uniform(-0.3, 0.3):.2g}"),
            lambda x: 1.5 * x <= tol if passes else x >= 1.5 * tol,
        )

    return {"relerr": np.array([entry(r) for r in relerr]), "tol": tol}


def _plateau_cases():
    """Relative-error tables to analyse: two from real sweeps of the loss, and constructed patterns."""
    tables = []
    for U, d in _di_points(408_102, 2):
        tables.append(directional_sweep(U, d, EPS_TABLE)[2])
    cases = [{"relerr": tables[0], "tol": TOL}, {"relerr": tables[1], "tol": 1e-9}]
    rng = case_rng(408_103)  # the hidden patterns' numbers (the public patterns are fixed)
    cases += case_value(
        [
            # runs of 2 and 3
            _same_pattern(rng, [3e-2, 4e-4, 2e-6, 7e-7, 9e-7, 2e-6, 5e-7, 8e-7, 6e-7, 3e-6, 4e-5], TOL),
            _same_pattern(rng, [2e-4, 9e-8, 3e-8, 5e-6, 8e-8, 2e-8, 7e-6, 3e-5], 1e-7),  # two runs of 2: the first
            _same_pattern(rng, [0.3, 0.1, 0.05, 0.2, 0.4, 0.6], TOL),  # nothing passes
            _same_pattern(rng, [5e-3, 4e-5, 2e-7, 1e-8, 3e-9, 4e-9, 1e-9], TOL),  # the run reaches the end
        ],
        [  # the same four patterns with other numbers
            {"relerr": np.array([1e-2, 6e-5, 8e-7, 4e-7, 3e-6, 9e-7, 2e-7, 5e-7, 7e-5]), "tol": TOL},
            {"relerr": np.array([7e-4, 6e-8, 4e-8, 2e-6, 5e-8, 9e-8, 4e-5]), "tol": 1e-7},
            {"relerr": np.array([0.5, 0.2, 0.08, 0.09, 0.3]), "tol": TOL},
            {"relerr": np.array([8e-2, 3e-4, 6e-6, 5e-8, 2e-8, 6e-9]), "tol": TOL},
        ],
    )
    return cases


_S04_8_EX1_CHECKS = (
    Check(
        "directional_sweep",
        _di_sweep_cases,
        reference=directional_sweep,
        variant_of=_di_sweep_by_hand,
        # Bands: graded eps are truncation-dominated (>= 1e-4); a differently rounded sweep (Python loop,
        # op-by-op perturbation) agrees with the reference to <= 1e-11 relative in fd and <= 1e-6 of the
        # largest relerr (asserted above; measured 1e-12 and 5e-7 at worst). FD against a forward difference
        # or an unnormalised direction differs by >= 1e-4 relative.
        outputs=(
            Output("AD 方向导数", "exact", rtol=1e-9),
            Output("FD 方向导数", "exact", rtol=1e-9),
            Output("相对误差", "exact", rtol=1e-4),
        ),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, forward=True),
            "s048_unnormalised": Variant(S048_UNNORMALISED, normalise=False),
            "s048_relerr_no_floor": Variant(S048_RELERR_NO_FLOOR, formula="no_floor"),
            "s048_relerr_absolute": Variant(S048_RELERR_ABSOLUTE, formula="absolute"),
            "s048_fd_not_halved": Variant(S048_FD_NOT_HALVED, halved=False),
        },
    ),
    Check(
        "find_plateau",
        _plateau_cases,
        reference=find_plateau,
        outputs=(Output("平台起点下标 start", "integer"), Output("平台终点下标 stop", "integer")),
        mistakes={
            "s048_plateau_last_tie": Mistake(S048_PLATEAU_LAST_TIE, _plateau_last_tie),
            "s048_plateau_first_run": Mistake(S048_PLATEAU_FIRST_RUN, _plateau_first_run),
            "s048_plateau_stop_exclusive": Mistake(S048_PLATEAU_STOP_EXCLUSIVE, _plateau_stop_exclusive),
            "s048_plateau_best_only": Mistake(S048_PLATEAU_BEST_ONLY, _plateau_best_only),
        },
    ),
)


# --- s04_8_ex2: the softplus ground ------------------------------------------------------------

BALL_H, BALL_N, BALL_K = 2e-3, 100, 1e4
_ball_step = cl.soft_ball_step(BALL_H, law="softplus_penetration")
_BALL_U = jnp.zeros((BALL_N, 1))


def _ball_params(beta):
    return cl.SoftBallParams(contact=cl.ContactParams(stiffness=BALL_K, damping=0.0, gap_beta=beta))


@jax.jit
def ball_loss(theta, beta):
    """10 (y_N - 0.1)^2 + v_N^2 after N = 100 steps of 2 ms from the initial state theta = (y0, v0)."""
    xs = cl.rollout(_ball_step, theta, _BALL_U, _ball_params(beta))
    return 10.0 * (xs[-1, 0] - 0.1) ** 2 + xs[-1, 1] ** 2


ball_grad = jax.jit(jax.grad(ball_loss))


def contact_sweep(theta, direction, beta, eps_list):
    """(ad, fd, relerr) of the ball loss with sharpness beta at theta = (y0, v0) along direction."""
    loss = functools.partial(ball_loss, beta=float(beta))
    return _sweep(loss, ball_grad(jnp.asarray(theta), float(beta)), theta, direction, eps_list)


def _ball_sweep_by_hand(theta, direction, beta, eps_list, **switches):
    loss = functools.partial(ball_loss, beta=float(beta))
    return _sweep_by_hand(loss, ball_grad(jnp.asarray(theta), float(beta)), theta, direction, eps_list, **switches)


def _ball_tables(theta, direction, betas):
    """Per beta: the full EPS_TABLE sweep by the reference and by the Python loop."""
    out = []
    for beta in np.asarray(betas, dtype=np.float64):
        loss = functools.partial(ball_loss, beta=float(beta))
        g = ball_grad(jnp.asarray(theta), float(beta))
        out.append(
            (_sweep(loss, g, theta, direction, EPS_TABLE)[2], _sweep_python(loss, g, theta, direction, EPS_TABLE)[2])
        )
    return out


def plateau_starts(theta, direction, betas):
    """For each beta, the index in EPS_TABLE of the plateau's largest eps (tolerance TOL)."""
    return np.array([_plateau_start(ref, TOL) for ref, _ in _ball_tables(theta, direction, betas)])


def _plateau_indices(theta, direction, betas, index="start"):
    """plateau_starts; ``index``: the catalogued mistakes "best" (the smallest error) and "stop" (the plateau's end)."""
    tables = [ref for ref, _ in _ball_tables(theta, direction, betas)]
    if index == "best":
        return np.array([int(np.argmin(ref)) for ref in tables])
    if index == "stop":
        return np.array([find_plateau(ref, TOL)[1] for ref in tables])
    return np.array([_plateau_start(ref, TOL) for ref in tables])


def _ball_points(seed, n, acceptable=lambda i, theta, d: True, aim=None):
    """``n`` (theta, direction) pairs, the i-th redrawn until ``acceptable(i, theta, direction)``.

    ``aim(i, theta, rng)``, where given, returns the i-th direction's unit vector (or None for a random angle).
    """
    rng = case_rng(seed)
    lengths = case_rng(seed + 1).uniform(0.3, 3.0, size=n)  # not unit vectors: the sweep normalises

    def draw(i, length):
        theta = np.array([rng.uniform(0.03, 0.08), rng.uniform(-1.4, -0.6)]).round(5)
        unit = aim(i, theta, rng) if aim else None
        if unit is None:
            angle = rng.uniform(0.2, 1.3)
            unit = np.array([np.cos(angle), -np.sin(angle)])
        return theta, (length * unit).round(5)

    return [
        draw_until(lambda: draw(i, length), lambda point: acceptable(i, *point)) for i, length in enumerate(lengths)
    ]


#: per hidden case: sharpness beta and the eps list; every graded eps is truncation-dominated
#: (the relative error there is >= 1e-7 while rounding contributes <= 1e-11, asserted below)
_BALL_SWEEPS = (
    (300.0, [0.1, 0.02, 0.005, 0.001, 0.0005]),
    (3000.0, [0.03, 0.01, 0.001, 0.0002, 3e-5]),
    (10000.0, [0.01, 0.002, 5e-4, 1e-4, 2e-5, 5e-6]),
)


def _sweep_is_truncation_dominated(i, theta, d) -> bool:
    """Every graded eps of sweep i is truncation-dominated, and a Python-loop sweep agrees with the reference."""
    beta, eps = _BALL_SWEEPS[i]
    ref = contact_sweep(theta, d, beta, np.array(eps))
    loss = functools.partial(ball_loss, beta=beta)
    alt = _sweep_python(loss, ball_grad(jnp.asarray(theta), beta), theta, d, eps)
    return bool(
        np.min(ref[2]) >= 1e-7
        and np.max(np.abs(alt[1] - ref[1])) <= 1e-11 * np.max(np.abs(ref[1]))
        and np.max(np.abs(alt[2] - ref[2])) <= 1e-6 * np.max(ref[2])
    )


#: the directional derivative |AD| of the first hidden sweep: below the relative error's floor of 1, the one
#: place where dividing by max(|a|, |f|) instead of max(1, |a|, |f|) changes the answer (s048_relerr_no_floor);
#: with |AD| >= 1 in every case that mistake would keep full marks
_SMALL_AD = (0.1, 0.5)


def _aim_below_the_floor(i, theta, rng):
    """For the first sweep only: a unit direction nearly orthogonal to the gradient, with |AD| in _SMALL_AD."""
    if i != 0:
        return None
    g = np.asarray(ball_grad(jnp.asarray(theta), _BALL_SWEEPS[0][0]))
    along = g / np.linalg.norm(g)
    across = np.array([-along[1], along[0]])
    sine = min(rng.uniform(*_SMALL_AD) / np.linalg.norm(g), 1.0)
    return np.sqrt(1.0 - sine**2) * across + sine * along


def _ad_below_the_floor(i, theta, d) -> bool:
    """The first sweep's |AD| stays below the floor once its direction is rounded (the other sweeps: any)."""
    if i != 0:
        return True
    ad = float(np.dot(ball_grad(jnp.asarray(theta), _BALL_SWEEPS[0][0]), d / np.linalg.norm(d)))
    return _SMALL_AD[0] / 2 <= abs(ad) <= 2 * _SMALL_AD[1]


def _ball_sweep_cases():
    cases = []
    points = _ball_points(
        408_201,
        len(_BALL_SWEEPS),
        lambda i, theta, d: _ad_below_the_floor(i, theta, d) and _sweep_is_truncation_dominated(i, theta, d),
        aim=_aim_below_the_floor,
    )
    for (theta, d), (beta, eps) in zip(points, _BALL_SWEEPS):
        cases.append({"theta": theta, "direction": d, "beta": beta, "eps_list": np.array(eps)})
    return cases


_STARTS_BETAS = ([100.0, 1000.0, 10000.0, 100000.0], [200.0, 2000.0, 20000.0])


def _starts_cases():
    def robust(i, theta, d):  # the i-th point is redrawn until every one of its tables has a robust start
        return all(_robust_plateau(tables, TOL) for tables in _ball_tables(theta, d, _STARTS_BETAS[i]))

    points = _ball_points(408_202, len(_STARTS_BETAS), robust)
    return [
        {"theta": theta, "direction": d, "betas": np.array(betas)} for (theta, d), betas in zip(points, _STARTS_BETAS)
    ]


_S04_8_EX2_CHECKS = (
    Check(
        "contact_sweep",
        _ball_sweep_cases,
        reference=contact_sweep,
        variant_of=_ball_sweep_by_hand,
        # Same bands as s04_8_ex1: at the graded (truncation-dominated) eps a Python-loop sweep agrees with
        # the reference to <= 1e-11 relative in fd and <= 1e-6 of the largest relerr (asserted in the cases).
        outputs=(
            Output("AD 方向导数", "exact", rtol=1e-9),
            Output("FD 方向导数", "exact", rtol=1e-9),
            Output("相对误差", "exact", rtol=1e-4),
        ),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, forward=True),
            "s048_unnormalised": Variant(S048_UNNORMALISED, normalise=False),
            "s048_relerr_no_floor": Variant(S048_RELERR_NO_FLOOR, formula="no_floor"),
            "s048_relerr_absolute": Variant(S048_RELERR_ABSOLUTE, formula="absolute"),
            "s048_fd_not_halved": Variant(S048_FD_NOT_HALVED, halved=False),
        },
    ),
    Check(
        "plateau_starts",
        _starts_cases,
        reference=plateau_starts,
        variant_of=_plateau_indices,
        # An integer per beta, graded exactly: the cases assert that the start is the same for the
        # reference and a Python-loop sweep and for 0.8 tol ... 1.25 tol (the deciding entries are truncation errors).
        outputs=(Output("各 β 下平台起点的下标", "integer"),),
        mistakes={
            "s048_start_is_best": Variant(S048_START_IS_BEST, index="best"),
            "s048_start_is_stop": Variant(S048_START_IS_STOP, index="stop"),
        },
    ),
)


# --- s04_8_ex3: the training log ------------------------------------------------------------------

LOG_H, LOG_N, LOG_Y0, LOG_TARGET = 0.01, 60, 0.4, 0.03
_log_step = cl.soft_ball_step(LOG_H, law="softplus_penetration", with_record=True)
_LOG_P = cl.SoftBallParams(contact=cl.ContactParams(stiffness=2000.0, damping=0.0, gap_beta=300.0))


def log_loss(theta):
    """theta = (v0, F): thrown from y0 = 0.4 m at v0, constant force F; (loss, (terms (2,), xs, records))."""
    x0 = jnp.stack([jnp.asarray(LOG_Y0, theta.dtype), theta[0]])
    xs, rec = cl.rollout_with_record(_log_step, x0, jnp.full((LOG_N, 1), theta[1]), _LOG_P)
    task = 100.0 * (xs[-1, 0] - LOG_TARGET) ** 2
    effort = 1e-2 * theta[1] ** 2
    return task + effort, (jnp.stack([task, effort]), xs, rec)


log_value_and_grad = jax.jit(jax.value_and_grad(log_loss, has_aux=True))

#: field order of a log row
LOG_FIELDS = ("loss", "task", "effort", "grad_norm", "contact_count", "max_penetration", "residual", "step_size")


def _row(theta, lr, max_norm, variant=None):
    """One log row (as a dict) at theta and the next theta; ``variant`` names a logging mistake."""
    (loss, (terms, xs, rec)), g = log_value_and_grad(jnp.asarray(theta, dtype=jnp.float64))
    gn = float(jnp.linalg.norm(g))
    update = -lr * min(1.0, max_norm / gn) * np.asarray(g)
    count = int(jnp.sum(rec.penetration > 0))
    if variant == "s048_contacts_next_states":
        count = int(jnp.sum(xs[1:, 0] < 0))
    residual = float(jnp.mean(rec.residual)) if variant == "s048_residual_mean" else float(jnp.max(rec.residual))
    step = {"s048_step_is_lr": lr, "s048_step_unclipped": lr * gn}.get(variant, float(np.linalg.norm(update)))
    health = cl.health_record(
        {"task": terms[0], "effort": terms[1]},
        g,
        loss=loss,
        contact_count=count,
        max_penetration=jnp.max(rec.penetration),
        solver_residual=residual,
        step_size=step,
    )
    row = {
        "loss": float(health.loss),
        "task": float(terms[0]),
        "effort": float(terms[1]),
        "grad_norm": min(gn, max_norm) if variant == "s048_grad_norm_clipped" else float(health.grad_norm),
        "contact_count": int(health.contact_count),
        "max_penetration": float(health.max_penetration),
        "residual": float(health.solver_residual),
        "step_size": float(health.step_size),
    }
    return row, np.asarray(theta, dtype=np.float64) + update, np.asarray(rec.penetration), np.asarray(xs)


def log_entry(theta, lr, max_norm, variant=None):
    """The log row (8 fields, LOG_FIELDS) at theta, before the clipped gradient step of size lr (``variant``: a
    logging mistake)."""
    row, _, _, _ = _row(theta, float(lr), float(max_norm), variant)
    return tuple(row[f] for f in LOG_FIELDS)


def _train(theta0, lr, max_norm, n_iters, variant=None):
    theta, rows, pens, states = np.asarray(theta0, dtype=np.float64), [], [], []
    for _ in range(int(n_iters)):
        row, theta_next, pen, xs = _row(theta, float(lr), float(max_norm), variant)
        rows.append(row)
        pens.append(pen)
        states.append(xs)
        theta = theta_next
    if variant == "s048_log_after_update":  # every field but the gradient and the step from theta_{i+1}
        after = [_row(r_theta, float(lr), float(max_norm))[0] for r_theta in _thetas(theta0, lr, max_norm, n_iters)[1:]]
        rows = [{**a, "grad_norm": r["grad_norm"], "step_size": r["step_size"]} for r, a in zip(rows, after)]
    return tuple(np.array([r[f] for r in rows]) for f in LOG_FIELDS), pens, states


def _thetas(theta0, lr, max_norm, n_iters):
    theta, out = np.asarray(theta0, dtype=np.float64), [np.asarray(theta0, dtype=np.float64)]
    for _ in range(int(n_iters)):
        theta = _row(theta, float(lr), float(max_norm))[1]
        out.append(theta)
    return out


def train_with_log(theta0, lr, max_norm, n_iters, variant=None):
    """The stacked log (8 arrays of shape (n_iters,)) of n_iters clipped gradient steps from theta0 (``variant``: a
    logging mistake)."""
    return _train(theta0, lr, max_norm, n_iters, variant)[0]


def _contacts_robust(states) -> bool:
    """No state sits within 1e-7 m of the contact onset, so every contact count is the same on any machine."""
    return all(np.min(np.abs(np.asarray(xs)[:, 0])) > 1e-7 for xs in states)


def _clip_clear(grad_norm, max_norm) -> bool:
    """Whether the gradient norm is at least 1 % from the clipping threshold: clipped or not on any machine, and
    the logging mistakes that depend on it (norm after clipping, unclipped step) far outside the band."""
    return abs(grad_norm / max_norm - 1.0) > 0.01


def _draw_theta(rng, v0, force, lr, max_norm):
    """theta = (v0, F), lr and max_norm drawn uniformly from the given (low, high) ranges."""
    return (
        np.array([round(float(rng.uniform(*v0)), 3), round(float(rng.uniform(*force)), 3)]),
        round(float(rng.uniform(*lr)), 4),
        round(float(rng.uniform(*max_norm)), 1),
    )


#: the hidden log rows: (v0, F, lr, max_norm ranges), whether the ball touches the ground, whether the step clips
_ENTRY_DRAWS = (
    (((2.8, 3.4), (-0.3, -0.1), (0.03, 0.05), (10.0, 20.0)), False, True),  # in the air, clipped
    (((2.1, 2.5), (-0.55, -0.35), (0.025, 0.04), (8.0, 12.0)), True, False),  # in contact, not clipped
    (((1.8, 2.2), (0.0, 0.2), (0.04, 0.06), (0.5, 2.0)), True, True),  # in contact, clipped
)
_ENTRY_PUBLIC = (((3.4, -0.1), 0.035, 12.0), ((2.5, -0.3), 0.045, 8.0), ((1.8, 0.2), 0.04, 2.0))


def _entry_cases():
    if case_value(False, True):
        cases = [{"theta": np.array(t), "lr": lr, "max_norm": c} for t, lr, c in _ENTRY_PUBLIC]
        assert all(_contacts_robust([_row(**case)[3]]) for case in cases)
        return cases
    rng = case_rng(408_301)

    def acceptable(case, contact, clipped):
        row, _, _, xs = _row(**case)
        return (
            _contacts_robust([xs])
            and (row["contact_count"] > 0) == contact
            and (row["grad_norm"] > case["max_norm"]) == clipped
            and _clip_clear(row["grad_norm"], case["max_norm"])
        )

    return [
        draw_until(
            lambda ranges=ranges: dict(zip(("theta", "lr", "max_norm"), _draw_theta(rng, *ranges))),
            lambda case, contact=contact, clipped=clipped: acceptable(case, contact, clipped),
        )
        for ranges, contact, clipped in _ENTRY_DRAWS
    ]


#: the hidden training runs: (v0, F, lr, max_norm ranges) and the number of iterations. Every run clips in some
#: iteration and has contacts in some iteration: the first two start in the air and reach the ground, the third
#: stays in contact throughout
_TRAIN_DRAWS = (
    (((3.5, 4.1), (-0.1, 0.1), (0.03, 0.04), (15.0, 25.0)), 9),
    (((3.9, 4.5), (0.0, 0.2), (0.025, 0.035), (20.0, 30.0)), 8),
    (((1.3, 1.7), (-0.4, -0.2), (0.015, 0.025), (4.0, 6.0)), 7),
)
_TRAIN_PUBLIC = (((3.5, 0.05), 0.03, 18.0, 6), ((1.8, -0.2), 0.025, 6.0, 5))


def _train_cases():
    if case_value(False, True):
        cases = [{"theta0": np.array(t), "lr": lr, "max_norm": c, "n_iters": n} for t, lr, c, n in _TRAIN_PUBLIC]
        assert all(_contacts_robust(_train(**case)[2]) for case in cases)
        return cases
    rng = case_rng(408_302)

    def acceptable(case):
        logs, _, states = _train(**case)
        norms, counts = logs[LOG_FIELDS.index("grad_norm")], logs[LOG_FIELDS.index("contact_count")]
        return (
            all(np.all(np.isfinite(log)) for log in logs)
            and _contacts_robust(states)
            and bool(np.any(counts > 0))
            and bool(np.any(norms > case["max_norm"]))
            and all(_clip_clear(n, case["max_norm"]) for n in norms)
        )

    return [
        draw_until(
            lambda ranges=ranges, n=n: dict(zip(("theta0", "lr", "max_norm"), _draw_theta(rng, *ranges)), n_iters=n),
            acceptable,
        )
        for ranges, n in _TRAIN_DRAWS
    ]


_LOG_OUTPUTS = tuple(
    # without contact the penetration is exactly 0: 1e-12 m of absolute tolerance is what "0" means there
    Output(
        label, "integer" if _rtol is None else "exact", rtol=_rtol, atol=1e-12 if "max_penetration" in label else 0.0
    )
    for label, _rtol in (
        ("损失 loss", 1e-8),
        ("任务项 task", 1e-8),
        ("控制代价项 effort", 1e-8),
        ("裁剪前的梯度范数 grad_norm", 1e-8),
        ("接触数 contact_count", None),  # a count: compared as an integer
        ("最大穿透 max_penetration", 1e-8),
        ("接触残差 residual", 1e-8),
        ("更新步长 step_size", 1e-8),
    )
)
# Bands: the run is deterministic in float64. A Python-loop reimplementation (op-by-op rollout, numpy
# clipping) reproduces every float field to <= 1e-12 relative over the graded iterations (measured); the
# contact counts are integers and exact because no state comes within 1e-7 m of the ground (asserted).

#: the message of each logging mistake (the module constant of its name)
_LOG_MESSAGES = {
    "s048_log_after_update": S048_LOG_AFTER_UPDATE,
    "s048_grad_norm_clipped": S048_GRAD_NORM_CLIPPED,
    "s048_step_is_lr": S048_STEP_IS_LR,
    "s048_step_unclipped": S048_STEP_UNCLIPPED,
    "s048_contacts_next_states": S048_CONTACTS_NEXT_STATES,
    "s048_residual_mean": S048_RESIDUAL_MEAN,
}

_S04_8_EX3_CHECKS = (
    Check(
        "log_entry",
        _entry_cases,
        reference=log_entry,
        outputs=_LOG_OUTPUTS,
        mistakes={
            m: Variant(_LOG_MESSAGES[m], variant=m)
            for m in (
                "s048_grad_norm_clipped",
                "s048_step_is_lr",
                "s048_step_unclipped",
                "s048_contacts_next_states",
                "s048_residual_mean",
            )
        },
    ),
    Check(
        "train_with_log",
        _train_cases,
        reference=train_with_log,
        outputs=_LOG_OUTPUTS,
        mistakes={
            m: Variant(_LOG_MESSAGES[m], variant=m)
            for m in (
                "s048_log_after_update",
                "s048_grad_norm_clipped",
                "s048_step_is_lr",
                "s048_step_unclipped",
                "s048_contacts_next_states",
                "s048_residual_mean",
            )
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

EXERCISES = (
    Exercise(
        "s04_8_ex1",
        _S04_8_EX1_CHECKS,
        constants={"DT": DI_DT, "N": DI_N, "P": _DI},
        wrong_answers=(
            WrongAnswer(
                "中心差分",
                keep=("plateau_answer",),
                edits={  # a forward difference instead of the central one
                    "sweep_answer": [
                        (
                            "(float(loss(U + e * v)) - float(loss(U - e * v))) / (2.0 * e)",
                            "(float(loss(U + e * v)) - float(loss(U))) / e",
                        )
                    ],
                },
            ),
            # the direction used as given; the plateau's stop one past the run (slice-style)
            WrongAnswer(
                "单位向量",
                edits={
                    "sweep_answer": [("    v = v / jnp.linalg.norm(v)                              # 单位方向\n", "")],
                    "plateau_answer": [
                        ("(i - 1 - run_start) > (best[1] - best[0])", "(i - run_start) > (best[1] - best[0])"),
                        ("best = (run_start, i - 1)", "best = (run_start, i)"),
                    ],
                },
            ),
        ),
        shortcuts=(
            # the sweep handed to cl.directional_check, which the notebook says not to call: the sweep's points are
            # lost (course_check.adapters.own_code refuses it)
            Shortcut(
                "参考实现",
                edits={
                    "sweep_answer": [
                        (
                            "    ad = float(jnp.vdot(grad_loss(U), v))\n",
                            "    r = cl.directional_check(loss, U, grad_loss(U), eps_list, direction=v)\n"
                            "    return float(r.ad), np.asarray(r.fd), np.asarray(r.rel_error)\n",
                        )
                    ],
                },
                keep=("plateau_answer",),
                loses=3.0,
            ),
        ),
    ),
    Exercise(
        "s04_8_ex2",
        _S04_8_EX2_CHECKS,
        constants={"H": BALL_H, "N": BALL_N, "K": BALL_K},
        wrong_answers=(
            # the absolute error instead of the chapter's relative error; the best eps instead of the plateau
            WrongAnswer(
                "绝对误差",
                edits={
                    "contact_sweep_answer": [
                        (
                            "relerr = np.abs(ad - fd) / np.maximum(1.0, np.maximum(abs(ad), np.abs(fd)))",
                            "relerr = np.abs(ad - fd)",
                        )
                    ],
                    "plateau_starts_answer": [
                        ("starts.append(find_plateau(rel, TOL)[0])", "starts.append(int(np.argmin(rel)))")
                    ],
                },
            ),
            WrongAnswer(
                "平台的起点",
                keep=("contact_sweep_answer",),
                edits={  # the plateau's smallest eps instead of its largest
                    "plateau_starts_answer": [
                        ("starts.append(find_plateau(rel, TOL)[0])", "starts.append(find_plateau(rel, TOL)[1])")
                    ],
                },
            ),
        ),
    ),
    Exercise(
        "s04_8_ex3",
        _S04_8_EX3_CHECKS,
        constants={"H": LOG_H, "N": LOG_N, "Y0": LOG_Y0, "TARGET": LOG_TARGET},
        wrong_answers=(
            # the loss, contacts and residual logged after the update, the gradient norm and step before it
            WrongAnswer(
                "同一行的所有字段必须来自同一个",
                keep=("log_entry_answer",),
                edits={
                    "train_answer": [
                        (
                            "        row, theta = _log_and_step(theta, lr, max_norm)   # 先记录 theta_i，再走到 theta_{i+1}\n"
                            "        rows.append(row)",
                            "        row, theta = _log_and_step(theta, lr, max_norm)\n"
                            "        after, _ = _log_and_step(theta, lr, max_norm)   # 记录走到的地方\n"
                            "        rows.append(after._replace(grad_norm=row.grad_norm, step_size=row.step_size))",
                        )
                    ],
                },
            ),
            WrongAnswer(
                "裁剪之前",
                keep=("train_answer",),
                edits={  # the gradient norm logged after clipping
                    "log_entry_answer": [
                        (
                            "grad_norm=g_norm,                                         # 裁剪之前",
                            "grad_norm=min(g_norm, max_norm),",
                        )
                    ],
                },
            ),
        ),
    ),
)
