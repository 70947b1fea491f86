"""Reference solutions and graded checks for section S04.7 (adjoint method and back-propagation).

* ``s04_7_ex1``: the adjoint (backward) recursion by hand. ``adjoint_pass`` turns given step
  Jacobians A_k, B_k and cost derivatives l_x, l_u, l_N into all lambda_k and dL/du_k; the
  reference is ``jax.grad`` of the linearised rollout with a perturbation injected at every state
  (so lambda_k = dL/dx_k is a real gradient, not the recursion again). ``pendulum_adjoint`` wires the
  pass to a pendulum rollout; its reference is ``cl.adjoint_gradients``, checked against ``jax.grad``.
* ``s04_7_ex2``: x_{k+1} = A x_k + B u_k, L_H(U) = 1/2 sum_{k=1}^{H} |x_k|^2 at U = 0: the rollout,
  and log10 |dL_H/dU|_2 for several horizons H.
* ``s04_7_ex3``: SHAC-style window loss on ``cl.wall_task`` with a given quadratic critic and a
  linear policy: the loss of one window and the truncated (window-start stop_gradient) gradient
  over consecutive windows; the reference is ``cl.short_horizon_loss``.
* ``s04_7_ex4``: checkpointing by hand on a damped pendulum (semi-implicit Euler, h = 0.05), loss
  sum_k |x_{k+1}|^2/2 + R |u_k|^2/2: one segment's backward pass from its checkpoint and the incoming
  adjoint, and the whole checkpointed value and gradient; the references are ``jax.grad`` of the plain
  rollout (every state kept), which checkpointing must reproduce exactly. The schedule is graded too, as
  :func:`course_check.adapters.watch_checkpoints` records it (the grader's own counts): segment calls from the
  true checkpoints in reverse order, at most 3N steps, the states held at once within ceil(N/s) + s + 2.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Shortcut, Variant, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------
S047_CKPT_NO_STAGE_X = (
    "λ_start 与段内每步“漏掉落点代价的 ∂c/∂x_{k+1}”一致：往回传之前，要先把 ∂c(x_{k+1}, u_k)/∂x_{k+1} 加到 λ_{k+1} 上。"
)
S047_CKPT_COST_AT_START = (
    "结果与“代价加在出发点 x_k 而不是落点 x_{k+1} 上”一致：本题的损失是 Σ c(x_{k+1}, u_k)，u_k 先影响 x_{k+1}。"
)
S047_CKPT_NO_CARRY = "梯度与“每一段都从 λ = 0 开始反向”一致：这等于在段的边界截断了梯度（SHAC 的做法），不再是完整的梯度。段与段之间要把 λ 传下去：上一段返回的 dL/dx_start 就是前一段的 lam_end。"
S047_CKPT_DROP_TAIL = "最后几个控制的梯度是 0：N 不是段长的整数倍时，最后一段不满 s 步，也要存下它的起点并做反向。"
S047_CKPT_STORE_ALL = (
    "没有按检查点逐段调用 segment_backward：评分记录到的调用不是“从最后一段开始、每段一次、从该段真正的起点出发”。"
    "如果梯度来自对整条轨迹的 jax.grad / jax.value_and_grad，那就是全存的反向模式，内存随 N 线性增长，检查点一个也没用上。"
    "请前向时只存每段的起点，反向时从最后一段往前，用 segment_backward(检查点, 该段的控制, lam) 一段段传回来。"
)
S047_CKPT_STORE_STATES = (
    "同时存着的状态超过了 ⌈N/s⌉ + s + 2 个：前向时把每一步的状态都留了下来（例如存进列表），检查点省下的内存又花掉了。"
    "前向只需要保留每段的起点和手上的当前状态，段内的状态由 segment_backward 在反向时重算。"
)
S047_CKPT_RECOMPUTE_PER_STEP = (
    "step 被调用了超过 3N 次：重算太多了（例如反向时为每一步都从检查点重新走一遍）。"
    "每段从检查点重算一次、把段内的状态留到这一段的反向结束，总共约 2N 次就够了。"
)

S047_LAMBDA_INDEX = "dL/du_k 与用 λ_k（而不是 λ_{k+1}）算出的结果吻合：u_k 先影响 x_{k+1}，所以 dL/du_k = ℓ_u,k + B_kᵀλ_{k+1}，下标差了一（off-by-one）。"
S047_NO_TRANSPOSE = (
    "结果与递推里用 A_k（而不是 A_kᵀ）的结果吻合：反向传播的是行向量 λᵀ，乘的是 A_kᵀλ_{k+1}（B_k 同理要转置）。"
)
S047_NO_STAGE_LX = "λ_k 与“漏掉当步代价的 ℓ_x,k”一致：每往回走一步都要先加上 ∂ℓ_k/∂x_k，再加 A_kᵀλ_{k+1}。"
S047_NO_STAGE_LU = "dL/du_k 与“漏掉 ℓ_u,k”一致：控制本身也出现在当步代价里，要加上 ∂ℓ_k/∂u_k。"
S047_LAMBDA_SHIFTED = (
    "λ 序列整体错位了一格：第 k 行应是 λ_k = dL/dx_k（第 0 行是 dL/dx_0，最后一行是 λ_N = ∂ℓ_N/∂x_N），共 N+1 行。"
)
S047_GRAD_WRT_X0 = (
    "结果与 ‖dL/dx_0‖（对初始状态的梯度）吻合：题目要的是对整个控制序列 U = (u_0, …, u_{H-1}) 的梯度范数。"
)
S047_FIRST_ACTION_ONLY = "结果与只取第一个控制的 ‖dL/du_0‖ 吻合：题目要的是整个控制序列的梯度范数 ‖dL/dU‖₂。"
S047_NATURAL_LOG = "结果是参考值的 ln 10 ≈ 2.303 倍：用了自然对数，题目要的是 log10。"
S047_SUM_WITHOUT_HALF = "结果处处比参考值大 log10(2) ≈ 0.301：损失写成了 Σ‖x_k‖²，少了前面的 ½，梯度因此大了一倍。题目的损失是 L_H = ½ Σ_{k=1}^{H} ‖x_k‖²。"
S047_NO_LOG = "结果与“没有取 log10 的范数本身”吻合：请返回 log10‖dL/dU‖₂。"
S047_ROLLOUT_SHIFTED = "轨迹与“从 x_1 开始记录”一致：第 0 行应是 x_0，之后每步一行，共 H+1 行。"
S047_NO_CRITIC = "结果与“漏掉 critic 终值 γ^h·V(x_h)”一致：截断损失 = 窗口内折扣代价之和 + 窗口末端的 critic 估值。"
S047_CRITIC_UNDISCOUNTED = "结果与“critic 终值没有乘 γ^h”一致：窗口末端的估值同样要折扣，L_h = Σγ^k c_k + γ^h V(x_h)。"
S047_DISCOUNT_SHIFT = "结果与“折扣从 γ¹ 开始”一致：第 k 步（k = 0…h−1）的代价乘 γ^k，第一步不打折。"
S047_CRITIC_AT_START = "结果与“在窗口起点 x_0 而不是末端 x_h 上估 critic”一致：critic 代替的是第 h 步之后的代价。"
S047_NO_STOP_GRADIENT = "损失值对，梯度却与“窗口起点没有 stop_gradient”的结果吻合：梯度穿过窗口边界流进了上一个窗口。每个窗口的起点都要用 jax.lax.stop_gradient 当作常数。"
S047_SUM_NOT_MEAN = "结果是参考值的 n_windows 倍：题目要的是各窗口损失的平均，不是总和。"


# --- s04_7_ex1: the adjoint pass --------------------------------------------------------------


def _linear_cost(w, us, As, Bs, lx, lu, lN):
    """First-order change of L along the linearised rollout x_{k+1} = A_k x_k + B_k u_k + w_{k+1}, x_0 = w_0."""

    def body(x, inp):
        a, b, u, w_next = inp
        x_next = a @ x + b @ u + w_next
        return x_next, x_next

    _, xs = jax.lax.scan(body, w[0], (As, Bs, us, w[1:]))
    xs = jnp.concatenate([w[:1], xs])
    return jnp.sum(lx * xs[:-1]) + jnp.sum(lu * us) + jnp.dot(lN, xs[-1])


@jax.jit
def _adjoint_by_grad(As, Bs, lx, lu, lN):
    n, nx = lx.shape
    w0, u0 = jnp.zeros((n + 1, nx)), jnp.zeros((n, Bs.shape[-1]))
    return jax.grad(_linear_cost, argnums=(0, 1))(w0, u0, As, Bs, lx, lu, lN)


def _recursion(As, Bs, lx, lu, lN, transpose=True, index=1, stage_lx=True, stage_lu=True):
    """The recursion in numpy, with switches that reproduce the typical mistakes."""
    As, Bs, lx, lu, lN = (np.asarray(m, dtype=np.float64) for m in (As, Bs, lx, lu, lN))
    n = lx.shape[0]
    lam = np.zeros((n + 1, lN.shape[0]))
    lam[n] = lN
    grads = np.zeros_like(lu)
    for k in range(n - 1, -1, -1):
        a = As[k].T if transpose else As[k]  # B_k is not square: only A_k can be left untransposed
        lam[k] = (lx[k] if stage_lx else 0.0) + a @ lam[k + 1]
        grads[k] = (lu[k] if stage_lu else 0.0) + Bs[k].T @ lam[k + index]
    return lam, grads


def adjoint_pass(As, Bs, lx, lu, lN):
    """All lambda_k = dL/dx_k, shape (N+1, nx), and dL/du_k, shape (N, nu), by jax.grad (the reference)."""
    lam, grads = _adjoint_by_grad(*(jnp.asarray(m, dtype=jnp.float64) for m in (As, Bs, lx, lu, lN)))
    return np.asarray(lam), np.asarray(grads)


def _pass_shifted(As, Bs, lx, lu, lN):
    lam, grads = adjoint_pass(As, Bs, lx, lu, lN)
    return np.concatenate([lam[1:], np.zeros_like(lam[:1])]), grads


def _random_pass_case(rng, n, nx, nu):
    """A random time-varying linearisation: A_k near I (non-symmetric), cost gradients O(1)."""
    return {
        "As": (np.eye(nx) + 0.15 * rng.normal(size=(n, nx, nx))).round(6),
        "Bs": (0.3 * rng.normal(size=(n, nx, nu))).round(6),
        "lx": rng.normal(size=(n, nx)).round(6),
        "lu": (0.2 * rng.normal(size=(n, nu))).round(6),
        "lN": rng.normal(size=nx).round(6),
    }


#: the pendulum of the exercise: semi-implicit Euler, default parameters, swing-up costs
PEND_DT = 0.05
_PEND = cl.PendulumParams()  # m = l = 1, g = 9.81, damping 0.1
_pend_step = cl.semi_implicit_euler(cl.pendulum, PEND_DT)


def pend_stage_cost(x, u):
    """l(x, u) = (theta - pi)^2 + 0.1 omega^2 + 0.01 u^2 (upright is theta = pi)."""
    return (x[0] - jnp.pi) ** 2 + 0.1 * x[1] ** 2 + 0.01 * jnp.sum(u**2)


def pend_terminal_cost(x):
    """l_N(x) = 10 ((theta - pi)^2 + omega^2)."""
    return 10.0 * ((x[0] - jnp.pi) ** 2 + x[1] ** 2)


@jax.jit
def _pend_linearisation(x0, us):
    """Trajectory of the exercise's pendulum and (A_k, B_k, l_x, l_u, l_N) along it."""
    xs = cl.rollout(_pend_step, x0, us, _PEND)
    lin = cl.linearize_trajectory(_pend_step, xs, us, _PEND)
    lx, lu = jax.vmap(jax.grad(pend_stage_cost, argnums=(0, 1)))(xs[:-1], us)
    return xs, (lin.A, lin.B, lx, lu, jax.grad(pend_terminal_cost)(xs[-1]))


def _pend_pass_case(rng, n):
    """The exercise's pendulum, linearised along a rollout: a realistic input for adjoint_pass."""
    x0 = jnp.asarray([rng.uniform(0.2, 2.5), rng.normal()])
    us = jnp.asarray(rng.normal(scale=0.8, size=(n, 1)))
    _, parts = _pend_linearisation(x0, us)
    return dict(zip(("As", "Bs", "lx", "lu", "lN"), (np.asarray(m) for m in parts)))


def _pass_cases():
    rng = case_rng(407_101)
    return [
        _random_pass_case(rng, 7, 3, 2),
        _random_pass_case(rng, 19, 4, 2),
        _pend_pass_case(rng, 24),
        _random_pass_case(rng, 12, 2, 3),
    ]


@jax.jit
def _pend_adjoint_jit(x0, us):
    res = cl.adjoint_gradients(
        _pend_step, x0, us, _PEND, lambda x, u, p: pend_stage_cost(x, u), lambda x, p: pend_terminal_cost(x)
    )
    return res.loss, res.lambdas, res.grad_us


@jax.jit
def _pend_loss_grad(x0, us):
    return jax.grad(_pend_loss, argnums=(0, 1))(x0, us)


def _pend_loss(x0, us):
    return cl.rollout_cost(
        _pend_step, x0, us, _PEND, lambda x, u, p: pend_stage_cost(x, u), lambda x, p: pend_terminal_cost(x)
    )


def pendulum_adjoint(x0, us):
    """(L, lambdas (N+1, 2), dL/du (N, 1)) of the pendulum rollout, by course_lib's adjoint sweep."""
    x0, us = jnp.asarray(x0, dtype=jnp.float64), jnp.asarray(us, dtype=jnp.float64)
    loss, lam, grads = (np.asarray(v) for v in _pend_adjoint_jit(x0, us))
    return float(loss), lam, grads


def _pend_recursion(x0, us, **switches):
    """pendulum_adjoint with the lambdas and gradients of :func:`_recursion` (its switches: the mistakes)."""
    x0, us = jnp.asarray(x0, dtype=jnp.float64), jnp.asarray(us, dtype=jnp.float64)
    loss = float(_pend_adjoint_jit(x0, us)[0])
    _, parts = _pend_linearisation(x0, us)
    return (loss, *_recursion(*(np.asarray(m) for m in parts), **switches))


def _pend_cases():
    rng = case_rng(407_102)
    cases = []
    for n in (30, 30, 45):
        x0 = np.array([rng.uniform(-0.5, 2.8), rng.normal()]).round(5)
        cases.append({"x0": x0, "us": rng.normal(scale=0.7, size=(n, 1)).round(5)})
    return cases


_PASS_OUTPUTS = (Output("λ_k 序列（形状 (N+1, nx)）", "exact"), Output("dL/du_k 序列（形状 (N, nu)）", "exact"))

_S04_7_EX1_CHECKS = (
    Check(
        "adjoint_pass",
        _pass_cases,
        reference=adjoint_pass,
        variant_of=_recursion,
        outputs=_PASS_OUTPUTS,
        mistakes={
            "s047_lambda_index": Variant(S047_LAMBDA_INDEX, index=0),
            "s047_no_transpose": Variant(S047_NO_TRANSPOSE, transpose=False),
            "s047_no_stage_lx": Variant(S047_NO_STAGE_LX, stage_lx=False),
            "s047_no_stage_lu": Variant(S047_NO_STAGE_LU, stage_lu=False),
            "s047_lambda_shifted": Mistake(S047_LAMBDA_SHIFTED, _pass_shifted),
        },
    ),
    Check(
        "pendulum_adjoint",
        _pend_cases,
        reference=pendulum_adjoint,
        variant_of=_pend_recursion,
        outputs=(Output("损失 L", "exact"), *_PASS_OUTPUTS),
        mistakes={
            "s047_lambda_index": Variant(S047_LAMBDA_INDEX, index=0),
            "s047_no_transpose": Variant(S047_NO_TRANSPOSE, transpose=False),
            "s047_no_stage_lx": Variant(S047_NO_STAGE_LX, stage_lx=False),
            "s047_no_stage_lu": Variant(S047_NO_STAGE_LU, stage_lu=False),
        },
    ),
)


# --- s04_7_ex2: gradient norm against horizon on a linear system ------------------------------


def linear_rollout(A, B, x0, us):
    """x_0 .. x_H of x_{k+1} = A x_k + B u_k, shape (H+1, nx), by cl.rollout (lax.scan)."""
    a, b = jnp.asarray(A), jnp.asarray(B)
    xs = cl.rollout(
        lambda x, u, p: a @ x + b @ u, jnp.asarray(x0, dtype=jnp.float64), jnp.asarray(us, dtype=jnp.float64), None
    )
    return np.asarray(xs)


def _rollout_shifted(A, B, x0, us):
    """x_1 .. x_{H+1}: the trajectory shifted by one step."""
    return np.concatenate(
        [
            linear_rollout(A, B, x0, us)[1:],
            (np.asarray(A) @ linear_rollout(A, B, x0, us)[-1] + np.asarray(B) @ np.asarray(us)[-1])[None],
        ]
    )


#: every horizon is run as a masked rollout of this fixed length, so one program serves all horizons
_MAX_HORIZON = 256


@jax.jit
def _horizon_grads(A, B, x0, horizon):
    """(dL_H/dU at U = 0, dL_H/dx0) for L_H = 1/2 sum_{k=1}^{H} |x_k|^2, by jax.grad through lax.scan.

    The rollout always has _MAX_HORIZON steps and the cost keeps only x_1..x_H (H traced); inputs
    u_k with k >= H reach masked states only, so their gradient is exactly zero.
    """

    def loss(x_init, us):
        xs = cl.rollout(lambda x, u, p: A @ x + B @ u, x_init, us, None)
        mask = jnp.arange(1, _MAX_HORIZON + 1) <= horizon
        return 0.5 * jnp.sum(jnp.where(mask[:, None], xs[1:] ** 2, 0.0))

    return jax.grad(loss, argnums=(1, 0))(x0, jnp.zeros((_MAX_HORIZON, B.shape[1]), dtype=A.dtype))


def _adjoint_grads(A, B, x0, horizon):
    """The same gradient by the adjoint recursion in numpy (a cross-check)."""
    xs = [np.asarray(x0, dtype=np.float64)]
    for _ in range(horizon):
        xs.append(A @ xs[-1])
    lam = xs[horizon].copy()
    g = np.zeros((horizon, B.shape[1]))
    for k in range(horizon - 1, -1, -1):
        g[k] = B.T @ lam  # dL/du_k = B^T lambda_{k+1}
        lam = (xs[k] if k > 0 else 0.0) + A.T @ lam
    return g


def _norms(A, B, x0, horizons, shift=0, which="u", first_action_only=False, log=np.log10):
    """log10 of the gradient norm per horizon; the keywords switch to the catalogued mistakes (log=None: no log)."""
    A, B, x0 = (np.asarray(m, dtype=np.float64) for m in (A, B, x0))
    out = []
    for h in np.asarray(horizons).astype(int):
        assert 1 <= int(h) + shift <= _MAX_HORIZON
        g_u, g_x0 = (
            np.asarray(v) for v in _horizon_grads(jnp.asarray(A), jnp.asarray(B), jnp.asarray(x0), int(h) + shift)
        )
        g = g_u if which == "u" else g_x0
        norm = np.linalg.norm(g[0] if first_action_only else g)
        out.append(norm if log is None else log(norm))
    return np.array(out)


def _norms_without_half(A, B, x0, horizons):
    return _norms(A, B, x0, horizons) + np.log10(2.0)


def grad_norms(A, B, x0, horizons):
    """log10 |dL_H/dU|_2 at U = 0 for each H in horizons, L_H = 1/2 sum_{k=1}^{H} |x_k|^2."""
    return _norms(A, B, x0, horizons)


def _rollout_cases():
    rng = case_rng(407_201)
    out = []
    for nx, nu, h in ((2, 1, 9), (3, 2, 14), (4, 1, 6)):
        out.append(
            {
                "A": (np.eye(nx) + 0.2 * rng.normal(size=(nx, nx))).round(5),
                "B": rng.normal(size=(nx, nu)).round(5),
                "x0": rng.normal(size=nx).round(5),
                "us": rng.normal(size=(h, nu)).round(5),
            }
        )
    return out


def _discrete_oscillator(omega, zeta, dt):
    """Exact zero-order-hold discretisation of q'' = -omega^2 q - 2 zeta omega q' + u."""
    import scipy.linalg as sla

    ac = np.array([[0.0, 1.0], [-(omega**2), -2 * zeta * omega]])
    aug = np.zeros((3, 3))
    aug[:2, :2], aug[1, 2] = ac, 1.0
    e = sla.expm(aug * dt)
    return e[:2, :2], e[:2, 2:]


#: one set of horizons for every hidden case (none of them the public 10/50/200): a student's jax.jit
#: compiles once per (H, nx, nu), so sharing the horizons keeps grading to 6 compilations
_HIDDEN_HORIZONS = [8, 40, 160]


def _grad_norm_cases():
    rng = case_rng(407_202)
    a_stable, b_stable = _discrete_oscillator(2.3, 0.08, 0.1)  # spectral radius ~0.98
    dt = 0.07
    a_marginal, b_marginal = (
        np.array([[1.0, dt], [0.0, 1.0]]),
        np.array([[dt**2], [dt]]),
    )  # semi-implicit double integrator
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    a_unstable = q @ np.diag([1.035, 0.9, -0.7]) @ q.T + 0.05 * rng.normal(size=(3, 3))  # one slowly growing mode
    b_unstable = rng.normal(size=(3, 2))
    cases = [
        {
            "A": a_stable,
            "B": b_stable,
            "x0": np.array([1.0, -0.4]) + 0.1 * rng.normal(size=2),
            "horizons": _HIDDEN_HORIZONS,
        },
        {
            "A": a_marginal,
            "B": b_marginal,
            "x0": np.array([0.5, 0.2]) + 0.1 * rng.normal(size=2),
            "horizons": _HIDDEN_HORIZONS,
        },
        {"A": a_unstable, "B": b_unstable, "x0": rng.normal(size=3), "horizons": _HIDDEN_HORIZONS},
    ]
    return [
        {k: (np.asarray(v).round(6) if k != "horizons" else np.asarray(v, dtype=np.float64)) for k, v in c.items()}
        for c in cases
    ]


_S04_7_EX2_CHECKS = (
    Check(
        "linear_rollout",
        _rollout_cases,
        reference=linear_rollout,
        outputs=(Output("轨迹 x_0…x_H", "exact"),),
        mistakes={
            "s047_rollout_shifted": Mistake(S047_ROLLOUT_SHIFTED, _rollout_shifted),
        },
    ),
    Check(
        "grad_norms",
        _grad_norm_cases,
        reference=grad_norms,
        variant_of=_norms,
        # jax.grad through lax.scan and the hand-written adjoint recursion agree to 2e-16 of max |log10|
        # (measured on these cases); the band 1e-9 leaves that margin many times over while every
        # catalogued mistake moves the array by >= 8e-3 of max |log10|.
        outputs=(Output("各时域的 log10‖dL/dU‖₂", "exact", rtol=1e-9),),
        mistakes={
            "horizon_minus_one": Variant(messages.HORIZON_MINUS_ONE, shift=-1),
            "horizon_plus_one": Variant(messages.HORIZON_PLUS_ONE, shift=+1),
            "s047_grad_wrt_x0": Variant(S047_GRAD_WRT_X0, which="x0"),
            "s047_first_action_only": Variant(S047_FIRST_ACTION_ONLY, first_action_only=True),
            "s047_sum_without_half": Mistake(S047_SUM_WITHOUT_HALF, _norms_without_half),
            "s047_natural_log": Variant(S047_NATURAL_LOG, log=np.log),
            "s047_no_log": Variant(S047_NO_LOG, log=None),
        },
    ),
)


# --- s04_7_ex3: the SHAC window loss with a given critic --------------------------------------

SHAC_GAMMA = 0.99
#: the given critic: V(x) = psi . (1, q, v, q^2, q v, v^2), a cost-to-go fitted once by cl.shac_train (rounded)
CRITIC_PSI = np.array([14.0, -30.4, -9.7, 16.0, 9.9, 3.25])
_TASK = cl.wall_task()


def linear_policy(theta, x):
    """u = theta_0 q + theta_1 v + theta_2, shape (1,)."""
    return jnp.reshape(theta[0] * x[0] + theta[1] * x[1] + theta[2], (1,))


def _critic(x):
    return cl.critic_value(jnp.asarray(CRITIC_PSI), x)


@functools.partial(jax.jit, static_argnames=("h",))
def _lib_window(theta, x_start, h):
    loss, roll = cl.short_horizon_loss(
        theta, jnp.asarray(CRITIC_PSI), x_start[None], _TASK, horizon=h, gamma=SHAC_GAMMA, policy=linear_policy
    )
    return loss, roll.states[0, -1]


def window_loss(theta, x_start, h):
    """(L_h, x_h) of one window from x_start: sum_k gamma^k c_k + gamma^h V(x_h), by cl.short_horizon_loss."""
    theta, x_start = jnp.asarray(theta, dtype=jnp.float64), jnp.asarray(x_start, dtype=jnp.float64)
    loss, x_end = _lib_window(theta, x_start, int(h))
    return float(loss), np.asarray(x_end)


#: switches of the written-out window loss: (critic weight, critic discounted, discount shift, critic at start,
#: stop_gradient at the window start); traced, so the reference and every mistake share one program per (h, n_windows)
_RIGHT = (1.0, 1.0, 0.0, 0.0, 1.0)


def _my_window(theta, x, h, switches):
    """The window loss written out with lax.scan (for the mistakes and as a cross-check of the library)."""
    critic_w, critic_disc, shift, at_start, _ = switches
    p = _TASK.params

    def body(carry, k):
        x_k, total = carry
        u = linear_policy(theta, x_k)
        total = total + SHAC_GAMMA ** (k + shift) * _TASK.stage_cost(x_k, u, p)
        return (_TASK.step(x_k, u, p), total), None

    (x_end, total), _ = jax.lax.scan(body, (x, jnp.zeros((), x.dtype)), jnp.arange(h))
    discount = critic_disc * SHAC_GAMMA**h + (1.0 - critic_disc)
    value = at_start * _critic(x) + (1.0 - at_start) * _critic(x_end)
    return total + critic_w * discount * value, x_end


_my_window_jit = jax.jit(_my_window, static_argnames=("h",))


@functools.partial(jax.jit, static_argnames=("h", "n_windows"))
def _my_truncated(theta, x0, h, n_windows, switches):
    stop = switches[4]

    def mean_loss(th):
        def one(x, _):
            x = x + stop * (jax.lax.stop_gradient(x) - x)  # stop = 1: the window start is a constant
            loss, x_end = _my_window(th, x, h, switches)
            return x_end, loss

        _, losses = jax.lax.scan(one, x0, None, length=n_windows)
        return jnp.mean(losses)

    return jax.value_and_grad(mean_loss)(theta)


@functools.partial(jax.jit, static_argnames=("h", "n_windows"))
def _lib_truncated(theta, x0, h, n_windows):
    """Mean of cl.short_horizon_loss over consecutive windows; each window start is stop_gradient'ed by the library."""

    def mean_loss(th):
        def one(x, _):
            loss, roll = cl.short_horizon_loss(
                th, jnp.asarray(CRITIC_PSI), x, _TASK, horizon=h, gamma=SHAC_GAMMA, policy=linear_policy
            )
            return roll.states[:, -1], loss

        _, losses = jax.lax.scan(one, x0[None], None, length=n_windows)
        return jnp.mean(losses)

    return jax.value_and_grad(mean_loss)(theta)


def truncated_value_and_grad(theta, x0, h, n_windows):
    """(mean window loss, its truncated gradient w.r.t. theta (3,)) over n_windows consecutive windows."""
    theta, x0 = jnp.asarray(theta, dtype=jnp.float64), jnp.asarray(x0, dtype=jnp.float64)
    loss, grad = _lib_truncated(theta, x0, int(h), int(n_windows))
    return float(loss), np.asarray(grad)


def _switches(critic=1.0, critic_discount=1.0, discount_shift=0.0, critic_at_start=0.0, stop=1.0):
    return jnp.asarray([critic, critic_discount, discount_shift, critic_at_start, stop], dtype=jnp.float64)


def _written_window(theta, x_start, h, **switches):
    """window_loss written out (_my_window); the switches (_switches) are the catalogued mistakes."""
    loss, x = _my_window_jit(jnp.asarray(theta), jnp.asarray(x_start), h=int(h), switches=_switches(**switches))
    return float(loss), np.asarray(x)


def _written_truncated(theta, x0, h, n_windows, summed=False, **switches):
    """truncated_value_and_grad written out (_my_truncated); ``summed``: the sum over the windows, not the mean."""
    scale = float(n_windows) if summed else 1.0
    loss, grad = _my_truncated(jnp.asarray(theta), jnp.asarray(x0), int(h), int(n_windows), _switches(**switches))
    return scale * float(loss), scale * np.asarray(grad)


_THETA_STAR = np.array([0.24, -1.11, 0.24])  # near what cl.shac_train learns on this task


def _window_cases():
    rng = case_rng(407_301)
    return [
        {
            "theta": (_THETA_STAR + 0.3 * rng.normal(size=3)).round(5),
            "x_start": np.array([0.1, 1.8]) + 0.05 * rng.normal(size=2),
            "h": h,
        }
        for h in (5, 13, 24)
    ]


def _truncated_cases():
    rng = case_rng(407_302)
    out = []
    for h, n_windows in ((6, 3), (6, 3), (10, 2)):  # two (h, n_windows) pairs: two compiles when graded
        out.append(
            {
                "theta": (_THETA_STAR + 0.3 * rng.normal(size=3)).round(5),
                "x0": (np.array([0.0, 2.0]) + np.array([0.05, 0.3]) * rng.normal(size=2)).round(5),
                "h": h,
                "n_windows": n_windows,
            }
        )
    return out


# Loss values and gradients agree to ~1e-15 relative between the library (lax.scan) and a Python-loop
# formula (measured; the stiff wall contact sits inside some windows); 1e-9 leaves a wide margin, while a
# missing stop_gradient or critic changes the gradient by O(1) relative.
_BAND = 1e-9

_S04_7_EX3_CHECKS = (
    Check(
        "window_loss",
        _window_cases,
        reference=window_loss,
        variant_of=_written_window,
        outputs=(Output("窗口损失 L_h", "exact", rtol=_BAND), Output("窗口末端状态 x_h", "exact", rtol=_BAND)),
        mistakes={
            "s047_no_critic": Variant(S047_NO_CRITIC, critic=0.0),
            "s047_critic_undiscounted": Variant(S047_CRITIC_UNDISCOUNTED, critic_discount=0.0),
            "s047_discount_shift": Variant(S047_DISCOUNT_SHIFT, discount_shift=1.0),
            "s047_critic_at_start": Variant(S047_CRITIC_AT_START, critic_at_start=1.0),
        },
    ),
    Check(
        "truncated_value_and_grad",
        _truncated_cases,
        reference=truncated_value_and_grad,
        variant_of=_written_truncated,
        outputs=(Output("平均窗口损失", "exact", rtol=_BAND), Output("截断梯度 dL/dθ", "exact", rtol=_BAND)),
        mistakes={
            "s047_no_stop_gradient": Variant(S047_NO_STOP_GRADIENT, stop=0.0),
            "s047_no_critic": Variant(S047_NO_CRITIC, critic=0.0),
            "s047_critic_undiscounted": Variant(S047_CRITIC_UNDISCOUNTED, critic_discount=0.0),
            "s047_sum_not_mean": Variant(S047_SUM_NOT_MEAN, summed=True),
        },
    ),
)


# --- s04_7_ex4: checkpointing by hand ---------------------------------------------------------------------

CKPT_H, CKPT_R = 0.05, 0.1
CKPT_PEND = cl.PendulumParams()
_ckpt_step = cl.semi_implicit_euler(cl.pendulum, CKPT_H)


def _ckpt_segment_loss(x_start, us, lam_end, stage_x=True, cost_at="next"):
    """sum_k c(x_{k+1}, u_k) over the segment + lam_end . x_end (whose gradient is the segment's backward)."""
    x, total = x_start, 0.0
    for u in us:
        x_next = _ckpt_step(x, u, CKPT_PEND)
        at = x_next if cost_at == "next" else x
        state_cost = 0.5 * jnp.sum(at**2) if stage_x else 0.5 * jnp.sum(jax.lax.stop_gradient(at) ** 2)
        total = total + state_cost + 0.5 * CKPT_R * jnp.sum(u**2)
        x = x_next
    return total + jnp.dot(lam_end, x)


def segment_backward(x_start, us_seg, lam_end, stage_x=True, cost_at="next"):
    """(d/dx_start, d/dus) of the segment's loss plus lam_end . x_end, by jax.grad of the plain rollout."""
    grad = jax.grad(_ckpt_segment_loss, argnums=(0, 1))(
        jnp.asarray(x_start, dtype=jnp.float64),
        jnp.asarray(us_seg, dtype=jnp.float64),
        jnp.asarray(lam_end),
        stage_x,
        cost_at,
    )
    return np.asarray(grad[0]), np.asarray(grad[1])


@functools.lru_cache(maxsize=32)
def _store_all_value_and_grad(x0_bytes, us_bytes, shape, s, carry):
    """(L, dL/dU) with every state kept (un-jitted: one Python step per control). Cached by the inputs' bytes:
    the reference and four of its five mistakes share them, and each costs one un-jitted value-and-grad."""
    x0 = jnp.asarray(np.frombuffer(x0_bytes, dtype=np.float64))
    us = jnp.asarray(np.frombuffer(us_bytes, dtype=np.float64).reshape(shape))

    def loss(us):
        x, total = x0, 0.0
        for k in range(shape[0]):
            if k % s == 0 and not carry:
                x = jax.lax.stop_gradient(x)  # every segment's backward starts from lambda = 0
            x = _ckpt_step(x, us[k], CKPT_PEND)
            total = total + 0.5 * jnp.sum(x**2) + 0.5 * CKPT_R * jnp.sum(us[k] ** 2)
        return total

    value, grad = jax.value_and_grad(loss)(us)
    return float(value), np.asarray(grad)


def checkpointed_value_and_grad(x0, us, segment_length, carry=True, tail=True, schedule="checkpointed"):
    """(L, dL/dU, segments, steps_ok, held_ok): the value and gradient by jax.value_and_grad with every state
    kept, and the schedule :func:`course_check.adapters.watch_checkpoints` records of a checkpointed answer
    (ceil(N/s) segments in order, at most 3N steps, the held states within the bound).

    The keywords switch to the catalogued mistakes: no adjoint carried across segments; the last, partial
    segment dropped (its backward never called, so the first call is from the wrong checkpoint); and the
    schedules ``"store_all"`` (no segment_backward at all), ``"store_states"`` (every state kept in the forward
    pass), ``"recompute_per_step"`` (more than 3N steps)."""
    x0, us = np.asarray(x0, dtype=np.float64), np.asarray(us, dtype=np.float64)
    n, s = us.shape[0], int(segment_length)
    value, grad = _store_all_value_and_grad(x0.tobytes(), us.tobytes(), us.shape, s, carry)
    grad = np.array(grad)  # a writable copy
    segments = -(-n // s)
    if not tail and n % s:
        grad[n - n % s :] = 0.0
        segments = 0
    if schedule == "store_all":
        segments = 0
    return (
        float(value),
        grad,
        np.int64(segments),
        np.int64(schedule != "recompute_per_step"),
        np.int64(schedule != "store_states"),
    )


def _ckpt_state(rng):
    return np.round(np.array([rng.uniform(-1.0, 1.0), rng.uniform(-2.0, 2.0)]), 6)


def _segment_cases():
    rng = case_rng(407_401)
    cases = []
    for n in case_value((1, 3, 6, 10), (2, 5, 8)):
        us = np.round(rng.uniform(-1.5, 1.5, (n, 1)), 6)
        cases.append({"x_start": _ckpt_state(rng), "us_seg": us, "lam_end": np.round(rng.normal(size=2), 6)})
    return cases


def _checkpointed_cases():
    rng = case_rng(407_402)
    cases = []
    for n, s in case_value(((12, 1), (25, 4), (37, 5), (40, 40)), ((10, 3), (20, 6), (16, 16))):
        us = np.round(rng.uniform(-1.5, 1.5, (n, 1)), 6)
        cases.append({"x0": _ckpt_state(rng), "us": us, "segment_length": s})
    return cases


_S04_7_EX4_CHECKS = (
    Check(
        "segment_backward",
        _segment_cases,
        reference=segment_backward,
        outputs=(Output("dL/dx_start", "exact", weight=0.5), Output("段内 dL/du_k", "exact", weight=0.5)),
        mistakes={
            "s047_ckpt_no_stage_x": Variant(S047_CKPT_NO_STAGE_X, stage_x=False),
            "s047_ckpt_cost_at_start": Variant(S047_CKPT_COST_AT_START, cost_at="start"),
        },
    ),
    Check(
        "checkpointed_value_and_grad",
        _checkpointed_cases,
        reference=checkpointed_value_and_grad,
        # the schedule is the concept: store-all (the right value and gradient, no checkpoint) earns half
        outputs=(
            Output("损失 L", "exact", weight=0.1),
            Output("dL/dU", "exact", weight=0.3),
            Output("按段逆序、从检查点出发的 segment_backward 调用数", "integer", weight=0.4),
            Output("step 调用不超过 3N 次", "integer", weight=0.1),
            Output("同时存着的状态不超过 ⌈N/s⌉+s+2 个", "integer", weight=0.1),
        ),
        mistakes={
            "s047_ckpt_no_carry": Variant(S047_CKPT_NO_CARRY, carry=False),
            "s047_ckpt_drop_tail": Variant(S047_CKPT_DROP_TAIL, tail=False),
            "s047_ckpt_store_all": Variant(S047_CKPT_STORE_ALL, schedule="store_all"),
            "s047_ckpt_store_states": Variant(S047_CKPT_STORE_STATES, schedule="store_states"),
            "s047_ckpt_recompute_per_step": Variant(S047_CKPT_RECOMPUTE_PER_STEP, schedule="recompute_per_step"),
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

EXERCISES = (
    Exercise(
        "s04_7_ex1",
        _S04_7_EX1_CHECKS,
        constants={"DT": PEND_DT, "P": _PEND},
        wrong_answers=(
            # dL/du_k read off lambda_k instead of lambda_{k+1}
            WrongAnswer(
                "B_kᵀλ_{k+1}，下标差了一",
                keep=("pendulum_adjoint_answer",),
                edits={
                    "adjoint_pass_answer": [
                        (
                            "        grads[k] = lu[k] + Bs[k].T @ lambdas[k + 1]   # u_k 通过 x_{k+1} 影响后面的损失\n"
                            "        lambdas[k] = lx[k] + As[k].T @ lambdas[k + 1]\n",
                            "        lambdas[k] = lx[k] + As[k].T @ lambdas[k + 1]\n"
                            "        grads[k] = lu[k] + Bs[k].T @ lambdas[k]\n",
                        )
                    ],
                },
            ),
            WrongAnswer(
                "A_kᵀλ_{k+1}",
                keep=("pendulum_adjoint_answer",),
                edits={  # A_k used without the transpose
                    "adjoint_pass_answer": [("As[k].T @", "As[k] @")],
                },
            ),
        ),
        shortcuts=(
            # the recursion left to jax.grad of the linearised rollout with a perturbation w_k injected at every
            # state (what the grader itself compares with): the recursion's points are lost
            # (course_check.adapters.by_hand refuses the transform)
            Shortcut(
                "亲手推出导数",
                edits={
                    "adjoint_pass_answer": [
                        (
                            "    As, Bs, lx, lu, lN = (np.asarray(m, dtype=np.float64) for m in (As, Bs, lx, lu, lN))\n",
                            "    As, Bs, lx, lu, lN = (jnp.asarray(m, dtype=jnp.float64) for m in (As, Bs, lx, lu, lN))\n"
                            "    def total(ws, dus):\n"
                            "        x, L = ws[0], 0.0\n"
                            "        for k in range(lx.shape[0]):\n"
                            "            L = L + lx[k] @ x + lu[k] @ dus[k]\n"
                            "            x = As[k] @ x + Bs[k] @ dus[k] + ws[k + 1]\n"
                            "        return L + lN @ x\n"
                            "    ws = jnp.zeros((lx.shape[0] + 1, lN.shape[0]))\n"
                            "    lambdas, grads = jax.jit(jax.grad(total, argnums=(0, 1)))(ws, jnp.zeros_like(lu))\n"
                            "    return np.asarray(lambdas), np.asarray(grads)\n",
                        )
                    ],
                },
                keep=("pendulum_adjoint_answer",),
                loses=3.0,
            ),
        ),
    ),
    Exercise(
        "s04_7_ex2",
        _S04_7_EX2_CHECKS,
        wrong_answers=(
            WrongAnswer(
                "对初始状态的梯度",
                keep=("linear_rollout_answer",),
                edits={  # the gradient w.r.t. the initial state
                    "grad_norms_answer": [("jax.grad(horizon_loss)", "jax.grad(horizon_loss, argnums=3)")],
                },
            ),
            WrongAnswer(
                "off-by-one",
                keep=("linear_rollout_answer",),
                edits={  # the last state dropped: one step short
                    "grad_norms_answer": [("jnp.sum(xs[1:] ** 2)", "jnp.sum(xs[1:-1] ** 2)")],
                },
            ),
            WrongAnswer(
                "½",
                keep=("linear_rollout_answer",),
                edits={  # the loss without its 1/2: every gradient twice as large
                    "grad_norms_answer": [("return 0.5 * jnp.sum(xs[1:] ** 2)", "return jnp.sum(xs[1:] ** 2)")],
                },
            ),
        ),
    ),
    Exercise(
        "s04_7_ex3",
        _S04_7_EX3_CHECKS,
        constants={"GAMMA": SHAC_GAMMA},
        wrong_answers=(
            # window starts not stop_gradient'ed: the gradient leaks into the previous window
            WrongAnswer(
                "stop_gradient",
                keep=("truncated_answer",),
                edits={
                    "window_loss_answer": [
                        (
                            "jax.lax.stop_gradient(jnp.asarray(x_start, dtype=jnp.float64))",
                            "jnp.asarray(x_start, dtype=jnp.float64)",
                        )
                    ],
                },
            ),
            WrongAnswer(
                "critic 终值",
                keep=("truncated_answer",),
                edits={  # the critic term forgotten
                    "window_loss_answer": [("total + GAMMA**h * critic(x_h), x_h", "total + 0.0, x_h")],
                },
            ),
        ),
    ),
    Exercise(
        "s04_7_ex4",
        _S04_7_EX4_CHECKS,
        constants={"H": CKPT_H, "R": CKPT_R, "P_PEND": CKPT_PEND},
        wrong_answers=(
            WrongAnswer(
                "∂c/∂x_{k+1}",
                edits={  # the stage cost's state derivative left out of the backward step
                    "segment_backward_answer": [
                        ("lam, g_u = pullbacks[k](lam + c_x)", "lam, g_u = pullbacks[k](lam)      ")
                    ],
                },
            ),
            WrongAnswer(
                "λ = 0",
                edits={  # every segment starts its backward from zero: a truncated gradient
                    "checkpointed_answer": [
                        (
                            "lam, g = segment_backward(x_start, us[s : s + segment_length], lam)",
                            "lam, g = segment_backward(x_start, us[s : s + segment_length], jnp.zeros(2))",
                        )
                    ],
                },
                keep=("segment_backward_answer",),
            ),
        ),
        shortcuts=(
            # store-all reverse mode handed in as the checkpointed answer: right value and gradient, no checkpoint
            Shortcut(
                "没有按检查点逐段调用",
                edits={
                    "checkpointed_answer": [
                        (
                            "    us = jnp.asarray(us)\n    starts",
                            "    def total(us):\n"
                            "        x, cost = jnp.asarray(x0), 0.0\n"
                            "        for u in us:\n"
                            "            x = step(x, u)\n"
                            "            cost = cost + stage_cost(x, u)\n"
                            "        return cost\n"
                            "    value, grad = jax.value_and_grad(total)(jnp.asarray(us))\n"
                            "    return float(value), np.asarray(grad)\n"
                            "    us = jnp.asarray(us)\n    starts",
                        )
                    ],
                },
                keep=("segment_backward_answer",),
                loses=1.2,  # the segment calls: 0.4 of the check's 3 points
            ),
        ),
    ),
)
