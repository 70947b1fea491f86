"""Reference solutions and graded checks for section S04.3 (explicit, semi-implicit, implicit integration).

* ``s04_3_ex1``: amplification factors R(z), z = h a, of explicit Euler, implicit Euler and the
  explicit midpoint rule on xdot = a x, and the stability masks |R(z)| <= 1 on a complex grid.
* ``s04_3_ex2``: two masses joined by springs (``cl.two_mass_spring``): one explicit and one
  implicit Euler step, the energy along both rollouts, and log10 ||dx_N/dk|| over a k sweep.
* ``s04_3_ex3`` is written-only (no checks).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import course_lib as cl
from autograder.authoring import messages
from autograder.authoring.cases import case_rng, case_value, draw_until
from autograder.authoring.registry import Check, Exercise, Mistake, Output, Variant, WrongAnswer

# --- mistakes this section recognises ------------------------------------------------------------

S043_AMP_EXPLICIT_IS_IMPLICIT = "“显式欧拉”这一项等于隐式欧拉的 1/(1−ha)：显式与隐式欧拉的放大因子很可能对调了。"
S043_AMP_IMPLICIT_AT_XK = "“隐式欧拉”这一项等于 1+ha，也就是把 f 取在了已知的 x_k 处（那是显式欧拉）；隐式欧拉要用 x_{k+1} 处的斜率，解出 x_{k+1} = x_k/(1−ha)。也可能是两种方法对调了。"
S043_AMP_IMPLICIT_SIGN = (
    "“隐式欧拉”这一项等于 1/(1+ha)：把 h·a·x_{k+1} 移到等式左边时符号错了，应为 (1−ha)·x_{k+1} = x_k。"
)
S043_MIDPOINT_FULL_STEP = "中点法这一项等于 1+z+z²（z=ha）：中间点应只走半步 x_k + (h/2)·f(x_k)，你走了整步。"
S043_MIDPOINT_IMPLICIT = (
    "中点法这一项等于隐式中点法的 (1+z/2)/(1−z/2)：本题要的是显式中点法 x_{k+1} = x_k + h·f(x_k + (h/2)·f(x_k))。"
)
S043_MIDPOINT_IS_EULER = "中点法这一项等于 1+ha（显式欧拉）：中间点的斜率没有用上，漏了 z²/2 这一项。"
S043_MASK_INVERTED = "掩码与参考值处处相反：你标出的是 |R(z)| > 1 的不稳定区域，题目要的是 |R(z)| ≤ 1。"
S043_MASK_EULER_SWAPPED = "这个掩码与另一种欧拉法的稳定域一致：显式欧拉（圆心 −1、半径 1 的圆盘）与隐式欧拉（圆心 +1、半径 1 的圆盘之外）很可能对调了。"
S043_MASK_REAL_PART_ONLY = (
    "掩码与“只用 z 的实部”算出的结果一致：z = z_re + i·z_im 是复数，|R(z)| 要用复数模计算（可用 z = z_re + 1j*z_im）。"
)
S043_MASK_MIDPOINT_IMPLICIT = (
    "中点法的掩码恰好是左半平面，那是隐式中点法的稳定域：本题要显式中点法 R(z) = 1 + z + z²/2。"
)
S043_COUPLING_SIGN = (
    "结果与“耦合弹簧力符号写反”的模型一致：质量 1 受力 +k(q₂−q₁)，质量 2 受力 −k(q₂−q₁)，弹簧把两个质量拉向彼此。"
)
S043_MASSES_SWAPPED = "结果与 m₁、m₂ 对调后的模型一致：检查两个加速度分别除以哪个质量。"
S043_IMPLICIT_USED_EXPLICIT = "结果与显式欧拉一步一致：隐式欧拉的斜率取在未知的 x_{k+1} 处，要解线性方程 (I − hJ)·x_{k+1} = x_k，而不是直接用 f(x_k)。"
S043_IMPLICIT_MATRIX_SIGN = "结果与解 (I + hJ)·x_{k+1} = x_k 一致：把 h·J·x_{k+1} 移到左边时要变号，矩阵应为 I − hJ。"
S043_IMPLICIT_TRANSPOSED = "结果与解 (I − hJ)ᵀ·x_{k+1} = x_k 一致：系统矩阵 J 的行列弄反了，J[i, j] 应是 ∂ẋ_i/∂x_j。"
S043_ENERGY_NO_COUPLING = "能量与“漏掉耦合弹簧势能 ½k(q₂−q₁)²”的结果一致：两根弹簧的势能都要算上。"
S043_ENERGY_COUPLING_Q2 = "能量与“把耦合弹簧伸长量写成 q₂”的结果一致：连接两个质量的弹簧伸长量是 q₂ − q₁。"
S043_ENERGY_NO_WALL = "能量与“漏掉墙边弹簧势能 ½k_wall·q₁²”的结果一致：两根弹簧的势能都要算上。"
S043_ENERGY_SHIFTED = (
    "能量序列与“从 x₁ 开始记录、多走一步”一致（off-by-one）：第 0 个值应是初始状态 x₀ 的能量，之后每步一个，共 N+1 个。"
)
S043_NATURAL_LOG = "结果是参考值的 ln 10 ≈ 2.303 倍：用了自然对数，题目要的是 log10。"
S043_NORM_POSITIONS_ONLY = (
    "结果与“只对位置分量 (q₁, q₂) 求范数”一致：∂x_N/∂k 有四个分量 (q₁, q₂, v₁, v₂)，要对整个向量求 2-范数。"
)


# --- s04_3_ex1: amplification factors and stability masks ----------------------------------------

_U0 = jnp.zeros(1)


def _one_step_derivative(integrator, h, a):
    """dx_{k+1}/dx_k of one course_lib step on xdot = a x (jax.grad; implicit Euler via the IFT)."""
    step = integrator(cl.scalar_linear, h)
    return jax.grad(lambda x: step(jnp.array([x]), _U0, cl.ScalarLinearParams(a=a))[0])(1.0)


_batched_derivative = jax.jit(jax.vmap(_one_step_derivative, in_axes=(None, 0, 0)), static_argnums=0)


def amplification_factors(h, a):
    """(R_explicit_euler, R_implicit_euler, R_explicit_midpoint) at z = h a, elementwise."""
    h, a = np.broadcast_arrays(np.asarray(h, dtype=np.float64), np.asarray(a, dtype=np.float64))
    shape = h.shape
    hs, rates = jnp.asarray(h.ravel()), jnp.asarray(a.ravel())
    out = tuple(
        np.asarray(_batched_derivative(integrator, hs, rates)).reshape(shape)
        for integrator in (cl.explicit_euler, cl.implicit_euler, cl.explicit_midpoint)
    )
    return out


_CLOSED_R = {
    "explicit_euler": lambda z: 1 + z,
    "implicit_euler": lambda z: 1 / (1 - z),
    "explicit_midpoint": lambda z: 1 + z + z**2 / 2,
    "implicit_midpoint": lambda z: (1 + z / 2) / (1 - z / 2),
}


def _mask(name, z):
    return np.abs(_CLOSED_R[name](z)) <= 1.0


def stability_mask(z_re, z_im):
    """(explicit Euler, implicit Euler, explicit midpoint) masks |R(z)| <= 1 on z = z_re + i z_im."""
    z = np.asarray(z_re, dtype=np.float64) + 1j * np.asarray(z_im, dtype=np.float64)
    return tuple(_mask(name, z) for name in ("explicit_euler", "implicit_euler", "explicit_midpoint"))


def _amp_cases():
    rng = case_rng(403_101)
    cases = []
    for n in (4, 6, 5):
        h = rng.uniform(0.005, 0.2, size=n)
        a = rng.uniform(-90.0, 4.0, size=n)
        a = np.where(h * a > 0.7, -a, a)  # keep 1 - ha away from 0 (the pole of implicit Euler)
        cases.append({"h": h.round(5), "a": a.round(4)})
    return cases


_BOUNDARY_MARGIN = 1e-3


def _safe_points(rng, n, re_range, im_range):
    """n complex points drawn uniformly, none within the margin of |R| = 1 for any method."""
    pts = []
    while len(pts) < n:
        z = complex(round(rng.uniform(*re_range), 4), round(rng.uniform(*im_range), 4))
        if all(abs(abs(r(z)) - 1) > _BOUNDARY_MARGIN for r in _CLOSED_R.values()) and abs(1 - z) > 0.05:
            pts.append(z)
    return np.array(pts)


def _clear_of_boundaries(z):
    return all(np.min(np.abs(np.abs(r(z)) - 1)) > _BOUNDARY_MARGIN for r in _CLOSED_R.values()) and bool(
        np.min(np.abs(1 - z)) > 0.05
    )


def _mask_cases():
    rng = case_rng(403_102)
    plane = _safe_points(rng, 6 * 9, (-4.0, 2.5), (-3.0, 3.0)).reshape(6, 9)
    near_axis = _safe_points(rng, 8 * 5, (-3.0, 0.6), (-1.2, 1.2)).reshape(8, 5)

    def line():  # the hidden start drawn after the other points (the public cases stay what they were)
        start = round(float(rng.uniform(-3.45, -3.15)), 4)
        return np.linspace(start, start + 6.0, 17)

    # a line of the real axis clear of the real-axis boundaries -2, 0, 2 and the pole 1
    real_line = case_value(draw_until(line, _clear_of_boundaries), np.linspace(-3.25, 2.75, 13))
    cases = [
        {"z_re": plane.real, "z_im": plane.imag},
        {"z_re": real_line, "z_im": np.zeros_like(real_line)},
        {"z_re": near_axis.real, "z_im": near_axis.imag},
    ]
    for case in cases:  # the grids never sit on a boundary, so < and <= give the same mask
        z = case["z_re"] + 1j * case["z_im"]
        for r in _CLOSED_R.values():
            assert np.min(np.abs(np.abs(r(z)) - 1)) > _BOUNDARY_MARGIN
    return cases


#: amplification factors of catalogued mistakes that are no method's
_MISTAKEN_R = {"implicit_sign": lambda z: 1 / (1 + z), "midpoint_full_step": lambda z: 1 + z + z**2}


def _amplification(h, a, explicit=None, implicit=None, midpoint=None):
    """amplification_factors, a method's factor replaced by the closed form R named (_CLOSED_R, _MISTAKEN_R)."""
    ref = amplification_factors(h, a)
    z = np.asarray(h) * np.asarray(a)
    forms = {**_CLOSED_R, **_MISTAKEN_R}
    return tuple(ref[i] if alt is None else forms[alt](z) for i, alt in enumerate((explicit, implicit, midpoint)))


def _masks(z_re, z_im, explicit=None, implicit=None, midpoint=None, real_only=False, invert=False):
    """The three masks in closed form; the keywords switch to the catalogued mistakes."""
    z = np.asarray(z_re) + (0.0 if real_only else 1j) * np.asarray(z_im)
    names = (explicit or "explicit_euler", implicit or "implicit_euler", midpoint or "explicit_midpoint")
    masks = tuple(_mask(name, z) for name in names)
    return tuple(~m for m in masks) if invert else masks


_AMP_OUTPUTS = (
    Output("显式欧拉的放大因子", "exact"),
    Output("隐式欧拉的放大因子", "exact"),
    Output("显式中点法的放大因子", "exact"),
)
_MASK_OUTPUTS = (Output("显式欧拉的稳定掩码"), Output("隐式欧拉的稳定掩码"), Output("显式中点法的稳定掩码"))

_S04_3_EX1_CHECKS = (
    Check(
        "amplification_factors",
        _amp_cases,
        reference=amplification_factors,
        variant_of=_amplification,
        outputs=_AMP_OUTPUTS,
        mistakes={
            "s043_amp_explicit_is_implicit": Variant(S043_AMP_EXPLICIT_IS_IMPLICIT, explicit="implicit_euler"),
            "s043_amp_implicit_at_xk": Variant(S043_AMP_IMPLICIT_AT_XK, implicit="explicit_euler"),
            "s043_amp_implicit_sign": Variant(S043_AMP_IMPLICIT_SIGN, implicit="implicit_sign"),
            "s043_midpoint_full_step": Variant(S043_MIDPOINT_FULL_STEP, midpoint="midpoint_full_step"),
            "s043_midpoint_implicit": Variant(S043_MIDPOINT_IMPLICIT, midpoint="implicit_midpoint"),
            "s043_midpoint_is_euler": Variant(S043_MIDPOINT_IS_EULER, midpoint="explicit_euler"),
        },
    ),
    Check(
        "stability_mask",
        _mask_cases,
        reference=stability_mask,
        variant_of=_masks,
        outputs=_MASK_OUTPUTS,
        mistakes={
            "s043_mask_inverted": Variant(S043_MASK_INVERTED, invert=True),
            "s043_mask_euler_swapped": Variant(
                S043_MASK_EULER_SWAPPED, explicit="implicit_euler", implicit="explicit_euler"
            ),
            "s043_mask_real_part_only": Variant(S043_MASK_REAL_PART_ONLY, real_only=True),
            "s043_mask_midpoint_implicit": Variant(S043_MASK_MIDPOINT_IMPLICIT, midpoint="implicit_midpoint"),
        },
    ),
)


# --- s04_3_ex2: two masses joined by springs ------------------------------------------------------

#: the chain of the exercise: wall -k_wall- mass 1 -k- mass 2, no damping, no input
M1, M2, K_WALL = 1.0, 0.5, 1.0


def _params(k):
    return cl.TwoMassParams(mass1=M1, mass2=M2, k_wall=K_WALL, k=k, damping=0.0)


#: a model is (mass of body 1, mass of body 2, sign of the coupling spring); the two mistaken
#: models are parameter changes of course_lib's chain, so every variant shares one compiled function
_MODELS = {None: (M1, M2, 1.0), "coupling_sign": (M1, M2, -1.0), "masses_swapped": (M2, M1, 1.0)}


def _dynamics(x, k, model):
    """xdot of the chain: course_lib's model with the given (m1, m2, coupling sign)."""
    m1, m2, sign = model[0], model[1], model[2]
    p = cl.TwoMassParams(mass1=m1, mass2=m2, k_wall=K_WALL, k=sign * k, damping=0.0)
    return cl.two_mass_spring(x, jnp.zeros(2), p)


def _system_matrix(k, model):
    """J with xdot = J x (the model is linear), by forward-mode AD of the dynamics."""
    return jax.jacfwd(lambda x: _dynamics(x, k, model))(jnp.zeros(4))


def _explicit(x, h, k, model):
    return x + h * _dynamics(x, k, model)


def _semi_implicit(x, h, k, model):
    v_next = x[2:] + h * _dynamics(x, k, model)[2:]
    return jnp.concatenate([x[:2] + h * v_next, v_next])


def _implicit(x, h, k, model, matrix="I-hJ"):
    J = _system_matrix(k, model)
    G = {"I-hJ": jnp.eye(4) - h * J, "I+hJ": jnp.eye(4) + h * J, "transposed": (jnp.eye(4) - h * J).T}[matrix]
    return jnp.linalg.solve(G, x)  # a linear solve, never an explicit inverse


_METHODS = {"explicit": _explicit, "semi_implicit": _semi_implicit, "implicit": _implicit}


@partial(jax.jit, static_argnames=("method", "matrix"))
def _jit_step(x, h, k, model, method, matrix="I-hJ"):
    if method == "implicit":
        return _implicit(x, h, k, model, matrix)
    return _METHODS[method](x, h, k, model)


def _step(x, h, k, method, variant=None, matrix="I-hJ"):
    """One step; ``variant`` names a (mistaken) model in _MODELS."""
    return _jit_step(x, h, k, jnp.asarray(_MODELS[variant]), method=method, matrix=matrix)


def step_explicit(x, h, k, method="explicit", variant=None):
    """x_{k+1} of explicit Euler; the keywords switch to the catalogued mistakes (another method, another model)."""
    return np.asarray(_step(jnp.asarray(x), h, k, method=method, variant=variant, matrix="I-hJ"))


def step_implicit(x, h, k, variant=None, matrix="I-hJ"):
    """x_{k+1} of implicit Euler; the keywords switch to the catalogued mistakes (another model, another matrix)."""
    return np.asarray(_step(jnp.asarray(x), h, k, method="implicit", variant=variant, matrix=matrix))


def _energy(x, k, variant=None):
    q1, q2, v1, v2 = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    kinetic = 0.5 * (M1 * v1**2 + M2 * v2**2)
    wall = 0.0 if variant == "s043_energy_no_wall" else 0.5 * K_WALL * q1**2
    coupling = {
        None: 0.5 * k * (q2 - q1) ** 2,
        "s043_energy_no_wall": 0.5 * k * (q2 - q1) ** 2,
        "s043_energy_no_coupling": 0.0,
        "s043_energy_coupling_q2": 0.5 * k * q2**2,
    }[variant]
    return kinetic + wall + coupling


def _trajectory(method, x0, h, k, n_steps, variant=None):
    """x_0 ... x_N, shape (N+1, 4): one compiled step, called N times."""
    xs = [jnp.asarray(x0, dtype=jnp.float64)]
    for _ in range(n_steps):
        xs.append(_step(xs[-1], h, k, method=method, variant=variant))
    return np.asarray(jnp.stack(xs))


def _energy_rollout(x0, h, k, n_steps, dynamics=None, energy=None, shift=0):
    return tuple(
        _energy(_trajectory(m, x0, h, k, n_steps + shift, dynamics)[shift:], k, energy)
        for m in ("explicit", "implicit")
    )


def energy_rollout(x0, h, k, n_steps):
    """Energies E(x_0..x_N) under explicit and under implicit Euler, each shape (N+1,)."""
    return _energy_rollout(x0, h, k, n_steps)


@partial(jax.jit, static_argnames=("method",))
def _jit_sensitivities(x0, h, ks, n_steps, model, method):
    def final(k):
        return jax.lax.fori_loop(0, n_steps, lambda i, x: _METHODS[method](x, h, k, model), x0)

    return jax.vmap(jax.jacfwd(final))(ks)


def _final_sensitivities(x0, h, ks, n_steps, method, variant=None):
    """dx_N/dk for each k (forward-mode AD through N steps; N and the model are traced: one compile per method)."""
    return _jit_sensitivities(x0, h, ks, n_steps, jnp.asarray(_MODELS[variant]), method=method)


def _grad_norms(x0, h, n_steps, ks, shift=0, dynamics=None, components=slice(None), log=np.log10):
    out = []
    for method in ("explicit", "implicit"):
        sens = _final_sensitivities(
            jnp.asarray(x0), h, jnp.asarray(ks), n_steps + shift, method=method, variant=dynamics
        )
        out.append(log(np.linalg.norm(np.asarray(sens)[:, components], axis=1)))
    return tuple(out)


def grad_norm_sweep(x0, h, n_steps, ks):
    """log10 ||dx_N/dk||_2 for each k in ks, under explicit and under implicit Euler."""
    return _grad_norms(x0, h, n_steps, ks)


def _step_cases():
    rng = case_rng(403_201)
    return [
        {"x": rng.normal(size=4).round(6), "h": h, "k": k}
        for h, k in ((0.01, 3.0), (0.05, 50.0), (0.1, 400.0), (0.02, 1200.0))
    ]


def _energy_cases():
    rng = case_rng(403_202)
    return [
        {"x0": rng.normal(size=4).round(6), "h": h, "k": k, "n_steps": n}
        for h, k, n in ((0.05, 5.0, 23), (0.02, 300.0, 40), (0.1, 60.0, 17))
    ]


def _grad_cases():
    rng = case_rng(403_203)
    return [
        {"x0": rng.normal(size=4).round(6), "h": h, "n_steps": n, "ks": np.asarray(ks, dtype=np.float64)}
        for h, n, ks in (
            (0.05, 30, (1.0, 10.0, 100.0, 400.0)),
            (0.02, 70, (2.0, 30.0, 300.0, 2000.0, 5000.0)),
            (0.1, 12, (0.5, 5.0, 50.0)),
        )
    ]


_STEP_OUTPUTS = (Output("下一步状态 x_{k+1}", "exact"),)

_S04_3_EX2_CHECKS = (
    Check(
        "step_explicit",
        _step_cases,
        reference=step_explicit,
        outputs=_STEP_OUTPUTS,
        mistakes={
            "s043_coupling_sign": Variant(S043_COUPLING_SIGN, variant="coupling_sign"),
            "s043_masses_swapped": Variant(S043_MASSES_SWAPPED, variant="masses_swapped"),
            "semi_implicit_euler": Variant(messages.SEMI_IMPLICIT_EULER, method="semi_implicit"),
        },
    ),
    Check(
        "step_implicit",
        _step_cases,
        reference=step_implicit,
        outputs=_STEP_OUTPUTS,
        mistakes={
            "s043_implicit_used_explicit": Mistake(S043_IMPLICIT_USED_EXPLICIT, step_explicit),
            "s043_implicit_matrix_sign": Variant(S043_IMPLICIT_MATRIX_SIGN, matrix="I+hJ"),
            "s043_implicit_transposed": Variant(S043_IMPLICIT_TRANSPOSED, matrix="transposed"),
            "s043_coupling_sign": Variant(S043_COUPLING_SIGN, variant="coupling_sign"),
            "s043_masses_swapped": Variant(S043_MASSES_SWAPPED, variant="masses_swapped"),
        },
    ),
    Check(
        "energy_rollout",
        _energy_cases,
        reference=energy_rollout,
        variant_of=_energy_rollout,
        outputs=(Output("显式欧拉轨迹上的能量", "exact"), Output("隐式欧拉轨迹上的能量", "exact")),
        mistakes={
            "s043_energy_no_coupling": Variant(S043_ENERGY_NO_COUPLING, energy="s043_energy_no_coupling"),
            "s043_energy_coupling_q2": Variant(S043_ENERGY_COUPLING_Q2, energy="s043_energy_coupling_q2"),
            "s043_energy_no_wall": Variant(S043_ENERGY_NO_WALL, energy="s043_energy_no_wall"),
            "s043_energy_shifted": Variant(S043_ENERGY_SHIFTED, shift=1),
            "s043_coupling_sign": Variant(S043_COUPLING_SIGN, dynamics="coupling_sign"),
        },
    ),
    Check(
        "grad_norm_sweep",
        _grad_cases,
        reference=grad_norm_sweep,
        variant_of=_grad_norms,
        outputs=(
            Output("显式欧拉的 log10‖∂x_N/∂k‖", "exact"),
            # at k = 5000 the implicit sensitivity is ~1e-8 after cancellation: inv(I - hJ)^N with jacrev lands
            # 3.4e-10 from the exact value (the reference 1.5e-11), so the band is 1e-8, still 1e5x inside the
            # nearest mistake (horizon_minus_one, 1.0e-3)
            Output("隐式欧拉的 log10‖∂x_N/∂k‖", "exact", rtol=1e-8),
        ),
        mistakes={
            "horizon_minus_one": Variant(messages.HORIZON_MINUS_ONE, shift=-1),
            "horizon_plus_one": Variant(messages.HORIZON_PLUS_ONE, shift=+1),
            "s043_natural_log": Variant(S043_NATURAL_LOG, log=np.log),
            "s043_norm_positions_only": Variant(S043_NORM_POSITIONS_ONLY, components=slice(0, 2)),
            "s043_coupling_sign": Variant(S043_COUPLING_SIGN, dynamics="coupling_sign"),
        },
    ),
)


# --- the exercises: checks, the constants shared with each setup cell, plausible wrong submissions ---

EXERCISES = (
    Exercise(
        "s04_3_ex1",
        _S04_3_EX1_CHECKS,
        wrong_answers=(
            # explicit and implicit Euler swapped; the mask marks the unstable points
            WrongAnswer(
                "对调",
                edits={
                    "amplification_answer": [
                        ("return r_explicit, r_implicit, r_midpoint", "return r_implicit, r_explicit, r_midpoint")
                    ],
                    "stability_mask_answer": [("np.abs(r) <= 1.0", "np.abs(r) > 1.0")],
                },
            ),
            # midpoint stage taken with a full step; the imaginary part of z forgotten
            WrongAnswer(
                "只走半步",
                edits={
                    "amplification_answer": [("1.0 + z * (1.0 + 0.5 * z)", "1.0 + z * (1.0 + z)      ")],
                    "stability_mask_answer": [(" + 1j * np.asarray(z_im, dtype=np.float64)", "")],
                },
            ),
        ),
    ),
    Exercise(
        "s04_3_ex2",
        _S04_3_EX2_CHECKS,
        constants={"M1": M1, "M2": M2, "K_WALL": K_WALL},
        wrong_answers=(
            # coupling force with the wrong sign in the explicit step; the implicit step takes the slope at x_k
            WrongAnswer(
                "I − hJ",
                edits={
                    "step_explicit_answer": [
                        (
                            "    return x + h * f(x, k)",
                            "    q1, q2, v1, v2 = x[0], x[1], x[2], x[3]\n"
                            "    a1 = (-K_WALL * q1 - k * (q2 - q1)) / M1\n"
                            "    a2 = (k * (q2 - q1)) / M2\n"
                            "    return x + h * jnp.stack([v1, v2, a1, a2])",
                        )
                    ],
                    "step_implicit_answer": [
                        (
                            "    lhs = jnp.eye(4) - h * system_matrix(k)\n    return jnp.linalg.solve(lhs, jnp.asarray(x))",
                            "    x = jnp.asarray(x)\n    return x + h * f(x, k)",
                        )
                    ],
                },
            ),
            # the coupling spring's potential forgotten; the sensitivity rollout one step short
            WrongAnswer(
                "耦合弹簧势能",
                keep=("step_explicit_answer", "step_implicit_answer"),
                edits={
                    "energy_answer": [
                        (
                            "    potential = 0.5 * K_WALL * q1**2 + 0.5 * k * (q2 - q1) ** 2",
                            "    potential = 0.5 * K_WALL * q1**2",
                        )
                    ],
                    "grad_norm_answer": [
                        ("            for _ in range(n_steps):", "            for _ in range(n_steps - 1):")
                    ],
                },
            ),
        ),
    ),
)
