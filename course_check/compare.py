"""Comparing a student's result with the reference, and feedback in Chinese.

The rule: **a tolerance belongs to the check, never to the answer.**

* A result passes an output when ``max|result - expected| <= rtol * scale + atol``, where ``scale``
  is the largest magnitude of the expected value (of that output, on that hidden case) and
  ``rtol``/``atol`` are the output's, stored in the reference data.
* The reference data is float64, so the default relative tolerance of each comparison kind is
  that of a float64 reference: ``1e4 * eps`` for a result obtained exactly (AD or a closed form),
  ``1e3 * sqrt(eps)`` for a finite-difference result (central differences lose about half the
  digits), ``1e-3`` for ``loose``, exact equality for ``integer``. A check may state its own band
  (``Output.rtol``/``Output.atol``) where the reference run justifies one.
* Every stored tolerance also covers the numerical spread of *correct* answers across machines:
  when the data is generated, the reference of each check is re-run on its hidden cases under
  other BLAS kernels, other CPU instruction sets for XLA and numpy, and with its inputs moved
  by a few ulps, which stands in for other correct implementations and op-by-op evaluation
  (:mod:`autograder.authoring.spread`); the stored ``rtol`` is at least 100 times that spread,
  and the generator refuses a check where a catalogued mistake lies between 1/10 and 10
  tolerances from the reference on some hidden case (:mod:`autograder.authoring.regenerate`).
* Nothing the student returns changes a tolerance: not its dtype, its shape or its class. A
  float16 or float32 result is converted to float64 and compared as the numbers it holds; when it
  fails, the feedback adds that its precision is too low (the course computes in float64,
  ``cl.enable_float64()``).

When a result fails, the message names the likely mistake with numbers (sign, transpose,
all-zero gradient, NaN, or a named alternative such as an off-by-one horizon) without revealing
the hidden inputs or the expected values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

KINDS = ("exact", "finite_difference", "loose", "integer")
NONFINITE = "nonfinite"  # key of ``messages`` explaining NaN/Inf results of a check

#: what the reference data is computed and stored in; every default tolerance is this dtype's
REFERENCE_DTYPE = np.float64
#: float dtypes a student result may hold that cannot carry a float64 reference's digits
_LOW_PRECISION = frozenset({"float16", "float32"})


def tolerance(kind: str, reference_dtype=REFERENCE_DTYPE) -> float:
    """Default relative tolerance of comparison ``kind`` against a reference of ``reference_dtype``.

    Takes the REFERENCE's dtype (the data is float64), never the student's: a narrower result
    must not buy a wider tolerance.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown comparison kind {kind!r}; valid: {', '.join(KINDS)}")
    eps = float(np.finfo(reference_dtype).eps)
    return {"exact": 1e4 * eps, "finite_difference": 1e3 * np.sqrt(eps), "loose": 1e-3, "integer": 0.0}[kind]


#: the generic rules' codes (``Verdict.diagnosis`` when no catalogued mistake matched), in English for reports
RULES = {
    "type": "not a numeric array",
    "shape": "wrong shape",
    "transpose": "transposed (rows and columns swapped)",
    "nonfinite": "NaN or Inf in the result",
    "zero": "all zero (a cut graph?)",
    "sign": "flipped sign",
    "ratio": "off by a constant factor",
    "offset": "off by a constant offset",
    "near_miss": "close, but not accurate enough",
}


@dataclass(frozen=True)
class Verdict:
    """Outcome of one comparison; ``message`` is the Chinese feedback (empty when passed).

    ``diagnosis`` names what the message diagnoses, for statistics: the catalogued mistake's name when one
    matched, else one of the codes of :data:`RULES`, else ``""`` (passed, or failed with no diagnosis).
    """

    passed: bool
    message: str
    rel_error: float = float("nan")
    diagnosis: str = ""


def _as_array(value):
    """``(float64 ndarray, dtype name the value held, problem)``; a plain array whatever class came in."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # student objects may refuse conversion
        return None, "", f"返回值无法转换为数组（{type(exc).__name__}）。"
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool) or np.iscomplexobj(arr):
        return None, "", f"返回值应为数值数组，得到的类型是 {type(value).__name__}。"
    return np.array(arr, dtype=np.float64, subok=False), arr.dtype.name, ""


def _rel_error(a, b, scale):
    return float(np.max(np.abs(a - b)) / scale) if a.size else 0.0


def _precision_note(dtype_name: str) -> str:
    if dtype_name not in _LOW_PRECISION:
        return ""
    return (
        f"另外，结果是 {dtype_name}，精度太低：本课程全部用 float64 计算（notebook 开头的 cl.enable_float64()），"
        "请不要把数组转换成 float32/float16。"
    )


def _shape_message(got, exp) -> tuple[str, str]:
    """``(diagnosis code, message)`` of a result whose shape is not the reference's."""
    if got.ndim == 2 and got.T.shape == exp.shape and np.allclose(got.T, exp, rtol=1e-6, atol=1e-12):
        return "transpose", f"形状为 {got.shape}，应为 {exp.shape}：雅可比矩阵被转置了（行对应输出，列对应输入）。"
    if got.size == exp.size:
        return "shape", f"形状为 {got.shape}，应为 {exp.shape}：元素个数对，但排列方式不对（检查 reshape/转置）。"
    return "shape", f"形状为 {got.shape}，应为 {exp.shape}。"


def _first_index(wrong) -> str:
    """Where the first wrong element is (row-major; for a trajectory or a log: the first step that
    diverges), as ``，第一个在下标 (3,)`` -- an index, never a value. Empty for a scalar."""
    if np.ndim(wrong) == 0 or not np.any(wrong):
        return ""
    return f"，第一个在下标 {tuple(int(i) for i in np.argwhere(wrong)[0])}"


def _mistake_message(name: str, messages: Mapping[str, str] | None) -> str:
    # every catalogued mistake carries its message into the data; the fallback only guards hand-made data
    return (messages or {}).get(name) or f"结果与一种已知的错误做法（{name}）的结果吻合。"


#: a failed result closer than this (relative) to the reference is a near miss: the method, not its accuracy
NEAR_MISS = 1e-4


def _symmetric(exp) -> bool:
    return bool(np.allclose(exp, exp.T, rtol=1e-9, atol=0.0))


def _same_as_mistake(got, mistakes, tol) -> str:
    """The first catalogued mistake whose value has ``got``'s shape and equals it (NaN where it has NaN), or ``""``."""
    for name, alt in (mistakes or {}).items():
        alt = np.asarray(alt, dtype=np.float64)
        if alt.shape == got.shape and np.allclose(got, alt, rtol=max(tol, 1e-12), atol=0.0, equal_nan=True):
            return name
    return ""


def _diagnosis(got, exp, scale, tol, mistakes, messages) -> tuple[str, str]:
    """``(code, Chinese message)`` of the likely mistake behind a failed float comparison (``("", "")`` when none
    is recognised; the code is the mistake's name or one of :data:`RULES`).

    A catalogued mistake is matched first (its own message is the most precise; the nearest one, among those
    whose value on this output differs from the reference's), then the generic patterns
    (all zero, a flipped sign, a transposed non-symmetric Jacobian, a constant factor or offset), then a
    result much closer to a catalogued mistake than to the reference, then a near miss.
    """
    near = lambda alt: _rel_error(got, np.asarray(alt, dtype=np.float64), scale) <= max(tol, 1e-6)  # noqa: E731
    nonzero = bool(np.any(exp))  # an all-zero reference has no sign, factor or nearness to speak of
    # a mistake that gives the reference's own value on this output cannot be what went wrong here (an RK4 A
    # next to the exact one would otherwise be "diagnosed" as a mistake in B); among the rest, the nearest
    distinct = {
        name: np.asarray(alt, dtype=np.float64)
        for name, alt in (mistakes or {}).items()
        if np.shape(alt) == exp.shape and _rel_error(np.asarray(alt, dtype=np.float64), exp, scale) > tol
    }
    matched = sorted(
        (_rel_error(got, alt, scale), k, name) for k, (name, alt) in enumerate(distinct.items()) if near(alt)
    )
    if matched:
        name = matched[0][2]
        return name, _mistake_message(name, messages)
    if nonzero and not np.any(got):
        return (
            "zero",
            "结果全为零。若这是导数或梯度，计算图可能被切断（例如用了 stop_gradient、float()、np.asarray 或 .item() "
            "把数组变成了常数）；若是状态、力或其他数值，检查是否把初始化的零数组原样返回了、忘了赋值或累加。",
        )
    if nonzero and near(-exp):
        return "sign", "结果与参考值只差一个负号：检查符号（例如误差写成了 target − x，或梯度下降方向弄反）。"
    if exp.ndim == 2 and exp.shape[0] == exp.shape[1] and not _symmetric(exp) and near(exp.T):
        return "transpose", "结果是参考值的转置：雅可比矩阵的行应对应输出、列应对应输入。"
    flat_e, flat_g = exp.ravel(), got.ravel()
    mask = np.abs(flat_e) > 1e-12 * scale
    ratios = flat_g[mask] / flat_e[mask]
    # a constant ratio only means something when several entries share it, and when it is not 1 up to rounding
    if ratios.size > 1 and np.allclose(ratios, ratios[0], rtol=1e-6) and abs(ratios[0] - 1) > max(tol, 1e-6):
        return "ratio", f"结果处处是参考值的 {ratios[0]:.4g} 倍：可能漏了或多乘了一个常数因子（例如步长 h 或 1/2）。"
    # a constant offset: on a log scale (log10 of an error, of a norm) that is a missing constant factor
    offsets = flat_g - flat_e
    if (
        offsets.size > 1
        and np.allclose(offsets, offsets[0], rtol=1e-6, atol=tol * scale)
        and abs(offsets[0]) > max(tol, 1e-6) * scale
    ):
        return "offset", (
            f"结果处处比参考值多了同一个常数 {offsets[0]:.4g}：若这是对数尺度上的量（例如 log10 误差或范数），"
            f"相当于原来的量漏乘或多乘了因子 10^{offsets[0]:.4g} ≈ {10.0 ** offsets[0]:.4g}（例如少了 1/2 或步长 h）；"
            "否则检查是否多加或漏加了一个常数项。"
        )
    # A mistake's own value can move across machines where it is ill-conditioned (e.g. where a round-off
    # dominated error crosses a threshold), while the reference does not: a result four times closer to a
    # catalogued mistake than to the reference still names that mistake. Feedback only; scores never change.
    err = _rel_error(got, exp, scale)
    close = sorted((_rel_error(got, alt, scale), k, name) for k, (name, alt) in enumerate(distinct.items()))
    if close and close[0][0] <= 0.25 * err:
        name = close[0][2]
        return name, _mistake_message(name, messages)
    if nonzero and err <= NEAR_MISS:
        return "near_miss", (
            "结果离参考值很近，只是没有达到要求的精度：做法多半是对的，检查精度从哪里丢的——例如用了 float32、"
            "用差分代替了精确梯度、迭代没有收敛，或步长、容差设得太粗。"
        )
    return "", ""


def compare(
    student,
    expected,
    kind: str = "exact",
    mistakes: Mapping[str, object] | None = None,
    rtol: float | None = None,
    messages: Mapping[str, str] | None = None,
    atol: float = 0.0,
) -> Verdict:
    """Compare ``student`` with ``expected`` (arrays or scalars) and explain a mismatch.

    Passes when ``max|student - expected| <= rtol * max|expected| + atol``. Both tolerances are the
    check's (see the module docstring); the student's dtype, shape or class never changes them.

    Args:
        student: the student's value.
        expected: the reference value (compared as float64).
        kind: ``"exact"``, ``"finite_difference"``, ``"loose"`` (sets the default tolerance) or
            ``"integer"`` (ids, modes, counts: exact equality, no float diagnoses).
        mistakes: optional ``{name: value}`` of results a known mistake would give.
        rtol: relative tolerance (to the reference's largest magnitude) replacing the kind's
            default; the reference data stores one per output (derived from the kind or the
            check's band and the measured spread of correct answers).
        messages: ``{name: Chinese explanation}`` of each mistake, as the reference data stores it
            (each mistake of a check carries its own, :class:`autograder.authoring.registry.Mistake`).
        atol: absolute tolerance added to ``rtol * scale`` (a check's stated band; default 0).
    """
    exp = np.asarray(expected, dtype=np.float64)
    got, dtype_name, problem = _as_array(student)
    if got is None:
        return Verdict(False, problem, diagnosis="type")
    if got.shape != exp.shape or not np.all(np.isfinite(got)):
        # a catalogued mistake can have another shape (one id too many) or hold NaN (a run without clipping):
        # a result that is exactly that mistake's is named as it, before the generic shape or NaN message
        same = _same_as_mistake(got, mistakes, rtol if rtol is not None else tolerance(kind))
        if same:
            text = f"形状为 {got.shape}，应为 {exp.shape}。" if got.shape != exp.shape else ""
            return Verdict(False, text + _mistake_message(same, messages), diagnosis=same)
    if got.shape != exp.shape:
        code, text = _shape_message(got, exp)
        return Verdict(False, text, diagnosis=code)
    if not np.all(np.isfinite(got)):
        n_bad = int(np.sum(~np.isfinite(got)))
        hint = (messages or {}).get(NONFINITE, "检查除零、对负数开方、或发散的仿真。")
        return Verdict(
            False, f"结果中有 {n_bad} 个 NaN 或 Inf：{hint}{_precision_note(dtype_name)}", diagnosis="nonfinite"
        )

    if kind == "integer":  # ids, modes, counts: equal or not; the float diagnoses would mislead
        wrong = int(np.sum(got != exp))
        if wrong == 0:
            return Verdict(True, "", 0.0)
        # a catalogued mistake is named when the result is four times closer to it than to the reference, in
        # entries that differ or, for indices and counts, in total distance (as for floats, below: a mistake's own
        # integers can move by an entry or one across machines, e.g. where a plateau's edge is rounding-dominated);
        # several can match: name each
        far = float(np.sum(np.abs(got - exp)))
        differ, named = {}, []
        for name, alt in (mistakes or {}).items():
            alt = np.asarray(alt, dtype=np.float64)
            if alt.shape != exp.shape or np.array_equal(alt, exp):
                continue
            differ[name] = int(np.sum(got != alt))
            if differ[name] <= 0.25 * wrong or float(np.sum(np.abs(got - alt))) <= 0.25 * far:
                named.append(name)
        text = f"有 {wrong}/{exp.size} 个整数值（编号、模式或计数）与参考值不同{_first_index(got != exp)}。"
        # the diagnosis is the closest of those named (the first in the catalogue's order among equals)
        closest = min(named, key=lambda name: differ[name], default="")
        message = text + "也可能是：".join(_mistake_message(name, messages) for name in named)
        return Verdict(False, message, float(wrong), closest)

    scale = max(float(np.max(np.abs(exp))) if exp.size else 0.0, 1e-300)
    tol = tolerance(kind) if rtol is None else float(rtol)
    err = _rel_error(got, exp, scale)
    if exp.size == 0 or float(np.max(np.abs(got - exp))) <= tol * scale + float(atol):
        return Verdict(True, "", err)
    code, reason = _diagnosis(got, exp, scale, tol, mistakes, messages)
    outside = np.abs(got - exp) > tol * scale + float(atol)
    where = f"，{int(np.sum(outside))}/{exp.size} 个元素超出容差{_first_index(outside)}" if exp.size > 1 else ""
    if np.any(exp):
        allowed = f"允许 {tol:.1e}" + (f"（另加绝对误差 {float(atol):.1e}）" if atol else "")
        detail = f"相对误差 {err:.2e}，{allowed}{where}。"
    else:  # a relative error to an all-zero reference means nothing: say how far from zero, absolutely
        got_max = float(np.max(np.abs(got)))
        detail = f"参考值全为零，你的结果最大绝对值为 {got_max:.2e}（允许的绝对误差 {float(atol):.1e}）{where}。"
    return Verdict(
        False,
        detail + (reason or "没有识别出常见错误模式，请对照推导逐步检查。") + _precision_note(dtype_name),
        err,
        code,
    )
