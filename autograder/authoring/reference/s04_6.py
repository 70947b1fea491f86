"""Reference solutions and graded checks for section S04.6 (AD vs analytic derivatives vs finite differences).

* ``s04_6_ex1``: f(x) = [x1 x2, sin x1]: its analytic Jacobian [[x2, x1], [cos x1, 0]] and the
  central-difference Jacobian at a given eps (column j from +-eps e_j).
* ``s04_6_ex2``: a 100-step RK4 pendulum rollout cost of a 100-dim control vector (the notebook's
  setup cell defines the same loss); five directional checks (AD g.v, central FD, the chapter's
  relative error) using exactly 10 loss evaluations. The evaluations are *measured*: the graded cell
  wraps the student's function with :func:`count_loss_calls`, which counts the calls of the notebook's
  ``loss`` through a stand-in whose count only the grader holds and returns ``(rows, calls)``; the reference
  measures its own calls the same way.
* ``s04_6_ex3``: seven variants of a scalar contact loss (softplus, max, clip, where, stop_gradient,
  argmin, round); the AD-FD relative error of each at given points and the boolean set of variants
  whose disagreement exceeds a tolerance somewhere (compared through :func:`boolean_as_codes`).
* ``s04_6_ex4``: forward vs reverse passes on a pendulum map f: (theta0, omega0, torque knots) -> angles at
  chosen steps. The full Jacobian from one forward pass per input and from one reverse pass per output, and
  the Gauss-Newton product J^T J v from one pass of each, and ``jacobian_auto`` in min(n, m) passes. The passes
  are *measured* by the grader: :func:`count_passes` hands the student an evaluable, non-differentiable ``f``,
  counts the calls of the notebook's ``forward_pass`` / ``reverse_pass`` through stand-ins, and returns
  ``(result, [forward, reverse])``; the reference states the counts the task asks for.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from course_check.adapters import NO_CALLS, flags_as_codes
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer
from autograder.kernel_support.sweeps import relative_error

# --- mistakes this section recognises ------------------------------------------------------------

S046_COS_SIGN = "雅可比里 ∂(sin x₁)/∂x₁ 这一项的符号反了：sin 的导数是 +cos x₁（cos 的导数才是 −sin）。"
S046_ROWS_SWAPPED = "两行的顺序反了：第 0 行对应第一个输出 x₁x₂，第 1 行对应 sin x₁（行对应输出，列对应输入）。"
S046_FD_IS_ANALYTIC = (
    "差分雅可比与解析雅可比完全一致，看不到 O(ε²) 的截断误差：本题要的是在给定 ε 上真正算出来的中心差分，不是解析导数。"
)
S046_FD_NO_HALF = "差分结果是参考值的 2 倍：中心差分的分母是 2ε（两个求值点相距 2ε），不是 ε。"
S046_NOT_NORMALISED = (
    "AD 与 FD 两列都约是参考值的 ‖d‖ 倍：方向没有归一化。先把每一行 d 变成单位向量 v = d/‖d‖，再算 gᵀv 和差分。"
)
S046_COUNT_ZERO = "计数为 0：差分没有通过计数的 loss(u) 求值（例如直接调用了 rollout_loss）。每一次差分求值都是一次完整仿真，请用 loss(u)，共 10 次。"
S046_COUNT_FORWARD_BASE = "loss 调用了 6 次：像前向差分那样共用一个基准值 L(u)，再加 5 次扰动。题目要中心差分：每个方向正、负各一次，共 10 次。"
S046_COUNT_EXTRA_BASE = "loss 调用了 11 次：多算了一次 L(u) 本身。中心差分用不到基准值，5 个方向各 2 次，共 10 次。"
S046_COUNT_DOUBLE = "loss 调用了 20 次：每个方向求值了 4 次（例如同一个 L(u ± εv) 算了两遍）。把每次求值的结果存起来，5 个方向各 2 次，共 10 次。"
S046_COUNT_PER_COORDINATE = (
    "loss 调用了 200 次：这是逐坐标中心差分（100 维 × 2）的代价。方向导数检查每个方向只要 2 次求值，共 10 次。"
)
S046_ABS_ERROR = "“差异”一项与绝对误差 |AD − FD| 一致：题目要 S04.6.4 的相对误差 |AD − FD| / max(1, |AD|, |FD|)。"
S046_THEORY_SET = "布尔结果与“凡是用了 max/clip/where/stop_gradient/argmin/round 的变体都算不一致”这个先验答案相同：题目要的是在给定的点和 ε 上实测的结果。非光滑只在离折点或跳变不到 ε 的点上被差分看见，stop_gradient 只在它切断的那一项不为零时才有影响。"
S046_ALL_AGREE = "你把所有变体都判为“一致”：检查判定是不是 rel > tol（任何一个点超过即可），以及差分是不是以给定的 ε 做的中心差分；在离折点或跳变不到 ε 的点上，非光滑的变体应当不一致。"
S046_PASS_NONE = "传递次数是 [0, 0]：评分时没有记到任何一次 forward_pass / reverse_pass（例如用 f 的求值做了差分，或者没有通过这两个名字调用它们）。本题的代价按传递计数，请逐个方向调用这两个函数。"
S046_PASS_BATCHED = "只记到 1 次传递：用 jax.vmap（或 jax.jit）把所有方向打包成了一次调用。这正是 jax.jacfwd / jax.jacrev 的做法，计算量并没有变少；本题请逐个方向调用，让每次传递都被数到。"
S046_PASS_EXTRA_FORWARD = "比需要的多了一次前向传递（例如用 forward_pass(f, x, 0) 去得到输出维度）：输出维度直接看 f(x) 的形状，调用 f 本身不算传递。"
S046_PASS_ROWS_NOT_COLUMNS = "雅可比是对的，但它是用 reverse_pass 一行一行拼出来的：本函数要用前向模式，每个输入方向 e_j 一次 forward_pass，得到第 j 列 J e_j。"
S046_PASS_COLUMNS_NOT_ROWS = "雅可比是对的，但它是用 forward_pass 一列一列拼出来的：本函数要用反向模式，每个输出方向 e_i 一次 reverse_pass，得到第 i 行 e_iᵀ J。"
S046_GN_FULL_FORWARD = "乘积是对的，但先用 n 次前向传递建出了完整的 J：JᵀJv 不需要 J 本身，先 forward_pass 得到 Jv，再对它做一次 reverse_pass，共两次传递。"
S046_GN_NO_REVERSE = (
    "只有一次前向传递、没有反向传递：Jv 是 m 维的，还要把它当作 w 做一次 reverse_pass，才得到 n 维的 JᵀJv。"
)
S046_AUTO_ALWAYS_FORWARD = (
    "雅可比是对的，但不论形状都用了前向模式（n 次传递）：输出比输入少（m < n）时，逐行的反向模式只要 m 次传递。"
)
S046_AUTO_ALWAYS_REVERSE = (
    "雅可比是对的，但不论形状都用了反向模式（m 次传递）：输入比输出少（n < m）时，逐列的前向模式只要 n 次传递。"
)
S046_AUTO_LARGER = "模式选反了：传递次数是 max(n, m) 而不是 min(n, m)。前向模式每个输入方向一次，反向模式每个输出方向一次，哪边少就用哪种。"
S046_GN_FULL_REVERSE = "乘积是对的，但先用 m 次反向传递建出了完整的 J：JᵀJv 不需要 J 本身，先 forward_pass 得到 Jv，再对它做一次 reverse_pass，共两次传递。"
S046_INVERTED = "布尔结果正好反了：“不一致”是相对误差大于 tol 的变体（在任何一个点上超过即可）。"


# --- s04_6_ex1: Jacobian of f(x) = [x1 x2, sin x1] -------------------------------------------------


def _f(x):
    return jnp.stack([x[0] * x[1], jnp.sin(x[0])])


_jacobian = jax.jit(jax.jacfwd(_f))
_f_jit = jax.jit(_f)


def analytic_jacobian(x):
    """[[x2, x1], [cos x1, 0]] by forward-mode AD."""
    return np.asarray(_jacobian(jnp.asarray(x, dtype=jnp.float64)))


def _fd_jacobian(x, eps, scheme="central"):
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = eps
        plus, minus = np.asarray(_f_jit(jnp.asarray(x + e))), np.asarray(_f_jit(jnp.asarray(x - e)))
        if scheme == "central":
            cols.append((plus - minus) / (2 * eps))
        elif scheme == "forward":
            cols.append((plus - np.asarray(_f_jit(jnp.asarray(x)))) / eps)
        else:  # "no_half"
            cols.append((plus - minus) / eps)
    return np.stack(cols, axis=1)  # column j = d f / d x_j


def fd_jacobian(x, eps):
    """Central-difference Jacobian at step ``eps``, shape (2, 2) (rows: outputs, columns: inputs)."""
    return _fd_jacobian(x, eps)


#: FD band: the student evaluates the same f at the same points; what can differ is the rounding of
#: sin (numpy vs XLA, 1 ulp) amplified by 1/eps: <= 1e-16 / 3e-3 ~ 4e-14 relative at the smallest eps
#: used (2500 x below the band). The analytic-instead-of-FD gap (eps^2/6 |cos x1|) and forward
#: differences (eps/2 |sin x1|) are kept above 100 x this band by the case generator.
FD_RTOL = 1e-10


def _jac_x(rng):
    while True:
        x = rng.uniform(-2.0, 2.0, size=2).round(5)
        if abs(np.cos(x[0])) > 0.3 and abs(np.sin(x[0])) > 0.3 and abs(x[1]) > 0.2:
            return x


def _analytic_cases():
    rng = case_rng(406_101)
    return [{"x": _jac_x(rng)} for _ in range(4)]


def _fd_cases():
    rng = case_rng(406_102)
    cases = [{"x": _jac_x(rng), "eps": eps} for eps in (1e-1, 1e-2, 3e-3)]
    for case in cases:
        ref = fd_jacobian(**case)
        scale = np.max(np.abs(ref))
        for alt in (analytic_jacobian(case["x"]), _fd_jacobian(case["x"], case["eps"], "forward")):
            assert np.max(np.abs(alt - ref)) / scale > 100 * FD_RTOL
    return cases


def _cos_sign(x):
    jac = analytic_jacobian(x).copy()
    jac[1, 0] = -jac[1, 0]
    return jac


def _rows_swapped(x):
    return analytic_jacobian(x)[::-1].copy()


def _fd_is_analytic(x, eps):
    return analytic_jacobian(x)


_S04_6_EX1_CHECKS = (
    Check(
        "analytic_jacobian",
        _analytic_cases,
        reference=analytic_jacobian,
        outputs=(Output("解析雅可比", "exact"),),
        mistakes={
            "s046_cos_sign": Mistake(S046_COS_SIGN, _cos_sign),
            "s046_rows_swapped": Mistake(S046_ROWS_SWAPPED, _rows_swapped),
        },
    ),
    Check(
        "fd_jacobian",
        _fd_cases,
        reference=fd_jacobian,
        variant_of=_fd_jacobian,
        outputs=(Output("中心差分雅可比", rtol=FD_RTOL),),
        mistakes={
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, scheme="forward"),
            "s046_fd_no_half": Variant(S046_FD_NO_HALF, scheme="no_half"),
            "s046_fd_is_analytic": Mistake(S046_FD_IS_ANALYTIC, _fd_is_analytic),
        },
    ),
)


# --- s04_6_ex2: five directional checks on a 100-dim control vector ------------------------------

#: the loss of the notebook's setup cell: 100 RK4 steps of the damped pendulum, one torque per step
H, N_STEPS = 0.05, 100
_STEP = cl.rk4(cl.pendulum, H)
_PEND = cl.PendulumParams()
_X0 = jnp.array([0.3, 0.0])
THETA_GOAL = 1.0


def _stage_cost(x, u, p):
    return 0.05 * ((x[0] - THETA_GOAL) ** 2 + 0.1 * x[1] ** 2 + 0.01 * u[0] ** 2)


def _terminal_cost(x, p):
    return 5.0 * ((x[0] - THETA_GOAL) ** 2 + 0.1 * x[1] ** 2)


def rollout_loss(u):
    return cl.rollout_cost(_STEP, _X0, jnp.reshape(jnp.asarray(u), (N_STEPS, 1)), _PEND, _stage_cost, _terminal_cost)


_loss_jit = jax.jit(rollout_loss)
_grad_jit = jax.jit(jax.grad(rollout_loss))


class CountedLoss:
    """The notebook's counting loss: every call is one rollout; ``calls`` counts them."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, u):
        self.calls += 1
        return float(self.fn(jnp.asarray(u, dtype=jnp.float64)))

    def reset(self):
        self.calls = 0


def _checks(u, directions, eps, loss, scheme="central", normalise=True, extra_base=False):
    """(rows, measured calls) of five directional checks with the given (possibly mistaken) recipe."""
    loss.reset()
    u = np.asarray(u, dtype=np.float64)
    g = np.asarray(_grad_jit(jnp.asarray(u)))
    base = loss(u) if scheme == "forward_shared" or extra_base else None
    rows = []
    for d in np.asarray(directions, dtype=np.float64):
        v = d / np.linalg.norm(d) if normalise else d
        ad = float(g @ v)
        if scheme == "forward":
            fd = (loss(u + eps * v) - loss(u)) / eps
        elif scheme == "forward_shared":
            fd = (loss(u + eps * v) - base) / eps
        else:
            fd = (loss(u + eps * v) - loss(u - eps * v)) / (2 * eps)
        rows.append((ad, fd, float(relative_error(ad, fd))))
    return np.array(rows), loss.calls


def directional_checks(u, directions, eps, scheme="central", normalise=True):
    """((5, 3) rows of (AD, FD, relative error), number of loss evaluations used), both measured; the keywords
    switch to the catalogued mistakes."""
    return _checks(u, directions, eps, CountedLoss(_loss_jit), scheme=scheme, normalise=normalise)


def _counted_as(u, directions, eps, calls):
    """The right rows with a wrong count ``calls`` (NO_CALLS: what the grader reports for "loss was never called":
    compare()'s generic all-zero diagnosis, "the graph was cut", would otherwise fire on a count of 0 first)."""
    return directional_checks(u, directions, eps)[0], calls


#: rows band: the student evaluates the same jitted loss at the same points (u +- eps v with v
#: normalised in any of the usual ways: differences of 1 ulp in v); measured spread between two such
#: implementations <= 1e-15 of the largest entry, op-by-op vs jitted gradients about the same. Forward
#: differences move the FD column by eps/2 |v^T H v|, >= 100 x this band at the eps used (checked below).
ROWS_RTOL = 1e-8


def _forward_differences_visible(case) -> bool:
    """Forward differences move the rows by more than 100 x their band on this case."""
    ref = directional_checks(**case)[0]
    fwd = _checks(**case, loss=CountedLoss(_loss_jit), scheme="forward")[0]
    return bool(np.max(np.abs(fwd - ref)) / np.max(np.abs(ref)) > 100 * ROWS_RTOL)


def _direction_cases():
    rng = case_rng(406_201)

    def draw(eps, scale):
        return {
            "u": (scale * rng.normal(size=N_STEPS)).round(6),
            "directions": rng.normal(size=(5, N_STEPS)).round(6),
            "eps": eps,
        }

    settings = ((1e-3, 1.0), (1e-4, 2.0), (2e-3, 0.5))
    return [draw_until(lambda e=eps, s=scale: draw(e, s), _forward_differences_visible) for eps, scale in settings]


_S04_6_EX2_CHECKS = (
    Check(
        "directional_checks",
        _direction_cases,
        reference=directional_checks,
        outputs=(Output("五行 (AD, FD, 相对误差)", rtol=ROWS_RTOL), Output("loss 的调用次数", "integer")),
        mistakes={
            "s046_not_normalised": Variant(S046_NOT_NORMALISED, normalise=False),
            "forward_difference": Variant(messages.FORWARD_DIFFERENCE, scheme="forward"),
            "s046_count_forward_base": Mistake(S046_COUNT_FORWARD_BASE, functools.partial(_counted_as, calls=6)),
            "s046_count_extra_base": Mistake(S046_COUNT_EXTRA_BASE, functools.partial(_counted_as, calls=11)),
            "s046_count_zero": Mistake(S046_COUNT_ZERO, functools.partial(_counted_as, calls=NO_CALLS)),
            "s046_count_double": Mistake(S046_COUNT_DOUBLE, functools.partial(_counted_as, calls=20)),
            "s046_count_per_coordinate": Mistake(
                S046_COUNT_PER_COORDINATE, functools.partial(_counted_as, calls=2 * N_STEPS)
            ),
        },
    ),
)


# --- s04_6_ex3: which operations make AD and FD disagree ----------------------------------------

#: the contact-loss variants of the notebook's setup cell, theta = the foot's gap to the ground (m)
W, TARGET = 100.0, 0.05  # smooth tracking term 1/2 W (theta - TARGET)^2
K, BETA = 100.0, 200.0  # penalty stiffness (N/m), softplus sharpness (1/m)
F_MAX, C0 = 2.0, 0.5  # clip: force saturation (N); where: a contact cost paid once touching
X_POINTS, X_GOAL, W_X = (-0.1, 0.1), 0.05, 10.0  # argmin: heel/toe positions and the foothold target
CELL = 0.01  # round: height map resolution (m)


def _base(t):
    return 0.5 * W * (t - TARGET) ** 2


def _l_softplus(t):
    return _base(t) + K * cl.softplus(-t, BETA)


def _l_max(t):
    return _base(t) + K * jnp.maximum(0.0, -t)


def _l_clip(t):
    return _base(t) + jnp.clip(K * (-t), 0.0, F_MAX)


def _l_where(t):
    return _base(t) + jnp.where(t < 0, K * (-t) + C0, 0.0)


def _l_stop_gradient(t):
    d = jnp.maximum(0.0, -t)
    return _base(t) + 0.5 * jax.lax.stop_gradient(K * d) * d


def _l_argmin(t):
    gaps = jnp.stack([t, 2.0 * t - 0.03])  # heel and toe of a tilted foot; the toe is lower below 3 cm
    i = jnp.argmin(gaps)
    return _base(t) + 0.5 * W_X * (jnp.asarray(X_POINTS)[i] - X_GOAL) ** 2


def _l_round(t):
    snapped = CELL * jnp.round(t / CELL)
    return _base(t) + 0.5 * W * (snapped - TARGET) ** 2


VARIANTS = {
    "softplus": _l_softplus,
    "max": _l_max,
    "clip": _l_clip,
    "where": _l_where,
    "stop_gradient": _l_stop_gradient,
    "argmin": _l_argmin,
    "round": _l_round,
}
VARIANT_NAMES = tuple(VARIANTS)
#: the variants built on a non-smooth or graph-cutting operation (what a student might assume disagree)
_NON_SMOOTH = np.array([name != "softplus" for name in VARIANT_NAMES])

_AD = {name: jax.jit(jax.vmap(jax.grad(fn))) for name, fn in VARIANTS.items()}
_VALUE = {name: jax.jit(jax.vmap(fn)) for name, fn in VARIANTS.items()}


def _measure(points, eps, scheme="central", error="relative"):
    points = jnp.asarray(points, dtype=jnp.float64)
    rows = []
    for name in VARIANT_NAMES:
        ad = _AD[name](points)
        if scheme == "central":
            fd = (_VALUE[name](points + eps) - _VALUE[name](points - eps)) / (2 * eps)
        else:
            fd = (_VALUE[name](points + eps) - _VALUE[name](points)) / eps
        rows.append(cl.relative_error(ad, fd) if error == "relative" else jnp.abs(ad - fd))
    return np.asarray(jnp.stack(rows))


def ad_fd_disagreement(points, eps, tol):
    """(relative error AD vs central FD, shape (7, P); which variants exceed ``tol`` at some point, (7,) bool)."""
    rel = _measure(points, eps)
    return rel, np.max(rel, axis=1) > tol


#: How the boolean answer is compared: True (disagrees) -> 1.0, False (agrees) -> 2.0. compare()
#: handles bool arrays, but its generic "all zero: the graph was cut" diagnosis would fire on an
#: all-False answer; with two non-zero codes a wrong set is reported as a mismatch (or as a named
#: mistake), exactly as before. The student still returns a bool array (the self-check asserts it).


def _graded_reference(points, eps, tol):
    rel, disagree = ad_fd_disagreement(points, eps, tol)
    return rel, flags_as_codes(disagree)


def _disagreement_mistake(points, eps, tol, name):
    """(relative errors, graded codes) of the catalogued mistake ``name``."""
    rel, disagree = ad_fd_disagreement(points, eps, tol)
    if name == "forward_difference":
        rel = _measure(points, eps, scheme="forward")
        disagree = np.max(rel, axis=1) > tol
    elif name == "s046_abs_error":
        rel = _measure(points, eps, error="absolute")
        disagree = np.max(rel, axis=1) > tol
    elif name == "s046_all_agree":
        disagree = np.zeros_like(disagree)
    elif name == "s046_theory_set":
        disagree = _NON_SMOOTH.copy()
    else:  # s046_inverted
        disagree = ~disagree
    return rel, flags_as_codes(disagree)


#: relerr band: two implementations (vmapped vs a Python loop over points, jnp vs numpy arithmetic)
#: differ by <= 1.3e-12 of the largest entry (measured); forward differences move entries by >= 2e-4.
REL_RTOL = 1e-7

#: where each variant has a kink or a jump (theta values)
_BOUNDARIES = (0.0, -F_MAX / K, 0.03) + tuple(CELL * (n + 0.5) for n in range(-5, 12))


def _generic(rng, n, low, high, eps):
    pts = []
    while len(pts) < n:
        t = round(float(rng.uniform(low, high)), 4)
        if min(abs(t - b) for b in _BOUNDARIES) > 100 * eps and (t >= 0 or t < -0.003):
            pts.append(t)
    return pts


def _disagreement_cases():
    rng = case_rng(406_301)
    tol = 1e-4
    specs = case_value(  # (eps, generic points in [low, high), points placed within eps of a boundary)
        [
            (1e-6, (3, 0.0, 0.1), (CELL * 0.5 + 3e-7,)),  # a rounding boundary
            (1e-6, (2, -0.06, 0.08), (4e-7, -0.0071)),  # the contact onset and a contact point
            (1e-5, (2, 0.005, 0.1), (0.03 - 3e-6, -F_MAX / K + 4e-6)),  # the argmin switch, the clip saturation
            (1e-6, (3, 0.0, 0.12), (-0.0412,)),  # deep contact only
        ],
        [
            (1e-6, (3, 0.0, 0.1), (CELL * 1.5 + 2e-7,)),
            (1e-6, (2, -0.06, 0.08), (3e-7, -0.0083)),
            (1e-5, (2, 0.005, 0.1), (0.03 - 4e-6, -F_MAX / K + 3e-6)),
            (1e-6, (3, 0.0, 0.12), (-0.0378,)),
        ],
    )
    cases = []
    for eps, (n, low, high), placed in specs:
        pts = np.array(_generic(rng, n, low, high, eps) + list(placed))
        cases.append({"points": rng.permutation(pts), "eps": eps, "tol": tol})
    sets = set()
    for case in cases:
        rel, disagree = ad_fd_disagreement(**case)
        # every entry is far from the threshold, so the boolean answer is robust to rounding
        assert np.all((rel < case["tol"] / 10) | (rel > case["tol"] * 10)), rel
        assert np.max(rel) > 0.05  # the relerr band is relative to an O(1) scale
        assert not np.array_equal(disagree, _NON_SMOOTH)
        fwd = _measure(case["points"], case["eps"], scheme="forward")
        assert np.max(np.abs(fwd - rel)) / np.max(rel) > 100 * REL_RTOL
        sets.add(tuple(disagree))
    assert len(sets) == len(cases)  # each case has its own answer
    return cases


_S04_6_EX3_CHECKS = (
    Check(
        "ad_fd_disagreement",
        _disagreement_cases,
        reference=_graded_reference,
        outputs=(Output("AD 与 FD 的相对误差", rtol=REL_RTOL), Output("不一致的变体（布尔）", "integer")),
        mistakes={
            name: Mistake(message, functools.partial(_disagreement_mistake, name=name))
            for name, message in (
                ("s046_all_agree", S046_ALL_AGREE),
                ("forward_difference", messages.FORWARD_DIFFERENCE),
                ("s046_abs_error", S046_ABS_ERROR),
                ("s046_theory_set", S046_THEORY_SET),
                ("s046_inverted", S046_INVERTED),
            )
        },
    ),
)


# --- s04_6_ex4: forward vs reverse passes ----------------------------------------------------------------------

PASS_H = 0.05
PASS_PEND = cl.PendulumParams()
_pass_step = cl.semi_implicit_euler(cl.pendulum, PASS_H)


@functools.lru_cache(maxsize=None)
def _pass_map(n_steps: int, sample_steps: tuple):
    n_steps, rows = int(n_steps), jnp.asarray(np.asarray(sample_steps, dtype=int) - 1)

    @jax.jit
    def f(z):
        knots = z.shape[0] - 2  # torque held on each of `knots` equal stretches of the horizon
        torque = z[jnp.asarray([2 + (k * knots) // n_steps for k in range(n_steps)])]

        def body(x, u):
            x = _pass_step(x, u[None], PASS_PEND)
            return x, x[0]

        _, thetas = jax.lax.scan(body, z[:2], torque)
        return thetas[rows]

    return f


def pendulum_map(n_steps, sample_steps):
    """f(z), z = (theta0, omega0, torque knots...) -> theta_k for k in sample_steps (the notebook's own map)."""
    return _pass_map(int(n_steps), tuple(int(k) for k in np.asarray(sample_steps).ravel()))


def _pass_jacobian(z, n_steps, sample_steps):
    return np.asarray(jax.jacfwd(pendulum_map(n_steps, sample_steps))(jnp.asarray(z, dtype=jnp.float64)))


# pass counts [forward, reverse] of an n-input, m-output map: the reference rules and the catalogued mistakes
def _no_passes(n, m):
    return (0, 0)


def _one_forward(n, m):
    return (1, 0)


def _one_reverse(n, m):
    return (0, 1)


def _one_each(n, m):
    return (1, 1)


def _forward_per_input(n, m):
    return (n, 0)


def _reverse_per_output(n, m):
    return (0, m)


def _forward_per_input_plus_one(n, m):
    return (n + 1, 0)


def _one_forward_reverse_per_output(n, m):
    return (1, m)


def _fewer(n, m):
    return (n, 0) if n <= m else (0, m)


def _more(n, m):
    return (0, m) if n <= m else (n, 0)


def jacobian_forward(z, n_steps, sample_steps, passes=_forward_per_input):
    """(J of shape (m, n), [forward, reverse] passes): one forward pass per input direction."""
    J = _pass_jacobian(z, n_steps, sample_steps)
    return J, np.array(passes(J.shape[1], J.shape[0]))


def jacobian_reverse(z, n_steps, sample_steps, passes=_reverse_per_output):
    """(J of shape (m, n), [forward, reverse] passes): one reverse pass per output."""
    J = _pass_jacobian(z, n_steps, sample_steps)
    return J, np.array(passes(J.shape[1], J.shape[0]))


def gauss_newton_product(z, n_steps, sample_steps, v, passes=_one_each):
    """(J^T J v, [forward, reverse] passes): J v by one forward pass, then J^T (J v) by one reverse pass."""
    J = _pass_jacobian(z, n_steps, sample_steps)
    return J.T @ (J @ np.asarray(v, dtype=np.float64)), np.array(passes(J.shape[1], J.shape[0]))


def jacobian_auto(z, n_steps, sample_steps, passes=_fewer):
    """(J of shape (m, n), [forward, reverse] passes): the mode with fewer passes, min(n, m)."""
    J = _pass_jacobian(z, n_steps, sample_steps)
    return J, np.array(passes(J.shape[1], J.shape[0]))


def _pass_cases(seed, with_direction=False):
    """Maps wide on the input side (many knots, few samples) and on the output side (one knot, every step)."""
    rng = case_rng(seed)
    every = lambda n: tuple(range(1, n + 1))  # noqa: E731
    shapes = case_value(
        ((3, 40, every(40)), (4, 30, tuple(range(2, 31, 2))), (10, 24, (8, 16, 24)), (26, 50, (50,))),
        ((3, 20, every(20)), (12, 20, (10, 20))),
    )
    cases = []
    for n, n_steps, samples in shapes:
        z = np.round(np.r_[rng.uniform(-1.0, 1.0, 2), rng.uniform(-1.5, 1.5, n - 2)], 6)
        case = {"z": z, "n_steps": n_steps, "sample_steps": np.array(samples)}
        if with_direction:
            case["v"] = np.round(rng.normal(size=n), 6)
        cases.append(case)
    return cases


_PASSES = Output("传递次数 [前向, 反向]", "integer", weight=0.5)
_S04_6_EX4_CHECKS = (
    Check(
        "jacobian_forward",
        lambda: _pass_cases(406_401),
        reference=jacobian_forward,
        outputs=(Output("雅可比 J", "exact", weight=0.5), _PASSES),
        mistakes={
            "s046_pass_none": Variant(S046_PASS_NONE, passes=_no_passes),
            "s046_pass_batched": Variant(S046_PASS_BATCHED, passes=_one_forward),
            "s046_pass_extra_forward": Variant(S046_PASS_EXTRA_FORWARD, passes=_forward_per_input_plus_one),
            "s046_pass_rows_not_columns": Variant(S046_PASS_ROWS_NOT_COLUMNS, passes=_reverse_per_output),
        },
    ),
    Check(
        "jacobian_reverse",
        lambda: _pass_cases(406_402),
        reference=jacobian_reverse,
        outputs=(Output("雅可比 J", "exact", weight=0.5), _PASSES),
        mistakes={
            "s046_pass_none": Variant(S046_PASS_NONE, passes=_no_passes),
            "s046_pass_batched": Variant(S046_PASS_BATCHED, passes=_one_reverse),
            "s046_pass_extra_forward": Variant(S046_PASS_EXTRA_FORWARD, passes=_one_forward_reverse_per_output),
            "s046_pass_columns_not_rows": Variant(S046_PASS_COLUMNS_NOT_ROWS, passes=_forward_per_input),
        },
    ),
    Check(
        "gauss_newton_product",
        lambda: _pass_cases(406_403, with_direction=True),
        reference=gauss_newton_product,
        outputs=(Output("JᵀJv", "exact", weight=0.5), _PASSES),
        mistakes={
            "s046_pass_none": Variant(S046_PASS_NONE, passes=_no_passes),
            "s046_gn_full_forward": Variant(S046_GN_FULL_FORWARD, passes=_forward_per_input),
            "s046_gn_full_reverse": Variant(S046_GN_FULL_REVERSE, passes=_reverse_per_output),
            "s046_gn_no_reverse": Variant(S046_GN_NO_REVERSE, passes=_one_forward),
        },
    ),
    Check(
        "jacobian_auto",
        lambda: _pass_cases(406_404),  # wide (n > m) and tall (n < m) maps, never n = m
        reference=jacobian_auto,
        outputs=(Output("雅可比 J", "exact", weight=0.5), _PASSES),
        mistakes={
            "s046_pass_none": Variant(S046_PASS_NONE, passes=_no_passes),
            "s046_auto_always_forward": Variant(S046_AUTO_ALWAYS_FORWARD, passes=_forward_per_input),
            "s046_auto_always_reverse": Variant(S046_AUTO_ALWAYS_REVERSE, passes=_reverse_per_output),
            "s046_auto_larger": Variant(S046_AUTO_LARGER, passes=_more),
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

EXERCISES = (
    Exercise(
        "s04_6_ex1",
        _S04_6_EX1_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "转置",
                edits={  # one row per input variable: the Jacobian transposed
                    "analytic_answer": [("[[x2, x1],", "[[x2, np.cos(x1)],"), ("[np.cos(x1), 0.0]]", "[x1, 0.0]]")],
                },
            ),
            WrongAnswer(
                "前向差分",
                edits={  # (f(x + eps e_j) - f(x)) / eps
                    "fd_answer": [("- np.asarray(f(x - step))) / (2 * eps)", "- np.asarray(f(x))) / eps")],
                },
            ),
        ),
        shortcuts=(
            # the Jacobian from jax.jacfwd instead of derived by hand: the hand derivation's points are lost
            # (course_check.adapters.by_hand refuses the transform)
            Shortcut(
                "亲手推出导数",
                edits={
                    "analytic_answer": [
                        (
                            "    x1, x2 = float(x[0]), float(x[1])\n",
                            "    return np.asarray(jax.jacfwd(f)(jnp.asarray(x)))\n",
                        )
                    ],
                },
                keep=("fd_answer",),
                loses=2.0,
            ),
        ),
    ),
    Exercise(
        "s04_6_ex2",
        _S04_6_EX2_CHECKS,
        constants={"H": H, "N_STEPS": N_STEPS, "PEND": _PEND, "THETA_GOAL": THETA_GOAL},
        wrong_answers=(
            WrongAnswer(
                "共 10 次",
                edits={  # one base value L(u) shared by forward differences: 6 calls
                    "directional_answer": [
                        (
                            "    rows = []\n",
                            "    L0 = loss(u)                                   # 所有方向共用一个基准值\n    rows = []\n",
                        ),
                        ("(loss(u + eps * v) - loss(u - eps * v)) / (2 * eps)", "(loss(u + eps * v) - L0) / eps"),
                    ],
                },
            ),
            WrongAnswer(
                "归一化",
                edits={  # the raw directions used as they are
                    "directional_answer": [("v = d / np.linalg.norm(d)", "v = d")],
                },
            ),
        ),
        shortcuts=(
            # the differences taken on the uncounted rollout_loss, the count set by hand: the count's half is lost
            Shortcut(
                "计数为 0",
                edits={
                    "directional_answer": [
                        (
                            "fd = (loss(u + eps * v) - loss(u - eps * v)) / (2 * eps)",
                            "fd = (float(rollout_loss(u + eps * v)) - float(rollout_loss(u - eps * v))) / (2 * eps)",
                        ),
                        ("    return np.array(rows)", "    loss.calls += 10\n    return np.array(rows)"),
                    ],
                },
                loses=2.0,
            ),
        ),
    ),
    Exercise(
        "s04_6_ex3",
        _S04_6_EX3_CHECKS,
        constants={
            "W": W,
            "TARGET": TARGET,
            "K": K,
            "BETA": BETA,
            "F_MAX": F_MAX,
            "C0": C0,
            "X_POINTS": X_POINTS,
            "X_GOAL": X_GOAL,
            "W_X": W_X,
            "CELL": CELL,
        },
        wrong_answers=(
            WrongAnswer(
                "前向差分",
                edits={  # forward differences (L(t + eps) - L(t)) / eps
                    "disagreement_answer": [
                        ("- jax.vmap(L)(points - eps)) / (2 * eps)", "- jax.vmap(L)(points)) / eps")
                    ],
                },
            ),
            WrongAnswer(
                "实测",
                edits={  # every variant with a non-smooth operation assumed to disagree
                    "disagreement_answer": [
                        (
                            "return rel, np.max(rel, axis=1) > tol",
                            'return rel, np.array([name != "softplus" for name in VARIANT_NAMES])',
                        )
                    ],
                },
            ),
        ),
    ),
    Exercise(
        "s04_6_ex4",
        _S04_6_EX4_CHECKS,
        constants={"H": PASS_H, "P_PEND": PASS_PEND},
        wrong_answers=(
            WrongAnswer(
                "转置",
                edits={  # the rows stacked as columns: J transposed
                    "jacobian_reverse_answer": [("jnp.stack(rows, axis=0)", "jnp.stack(rows, axis=1)")],
                },
                keep=("jacobian_forward_answer",),
            ),
            WrongAnswer(
                "完整的 J",
                edits={  # the product through the whole Jacobian: right value, n forward passes
                    "gauss_newton_answer": [
                        (
                            "return np.asarray(reverse_pass(f, x, forward_pass(f, x, v)))",
                            "J = jacobian_forward(f, x)\n    return J.T @ (J @ np.asarray(v))",
                        )
                    ],
                },
                keep=("jacobian_forward_answer",),
            ),
        ),
        shortcuts=(
            # the counter raised by hand, the Jacobian from jax.jacfwd / jax.jacrev: the passes' points are lost
            # (the grader's f cannot be differentiated directly, so both calls fail and say why)
            Shortcut(
                "may be evaluated",
                edits={
                    "jacobian_forward_answer": [
                        (
                            "    columns = [forward_pass(f, x, basis[j]) for j in range(x.shape[0])]\n"
                            "    return np.asarray(jnp.stack(columns, axis=1))",
                            '    PASSES["forward"] += x.shape[0]\n    return np.asarray(jax.jacfwd(f)(x))',
                        )
                    ],
                    "jacobian_reverse_answer": [
                        (
                            "    rows = [reverse_pass(f, x, basis[i]) for i in range(m)]\n"
                            "    return np.asarray(jnp.stack(rows, axis=0))",
                            '    PASSES["reverse"] += m\n    return np.asarray(jax.jacrev(f)(x))',
                        )
                    ],
                },
                keep=("gauss_newton_answer", "jacobian_auto_answer"),
                loses=3.0,
            ),
        ),
    ),
)
