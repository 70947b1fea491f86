"""What a graded notebook cell calls: run a student function on the hidden cases and score it.

``grade(exercise, name, fn)`` prints feedback in Chinese and returns the points earned
as a plain float, which nbgrader reads as the cell's partial credit. Hidden inputs
and expected values are never printed.
"""

from __future__ import annotations

import traceback
import warnings

from autograder.compare import compare
from autograder.data import load, to_inputs
from autograder.registry import get_check


def _split(value, n):
    if n == 1:
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != n:
        return None
    return list(value)


def grade(exercise: str, name: str, student_fn) -> float:
    """Score ``student_fn`` on the hidden cases of check ``exercise.name``; prints feedback."""
    check = get_check(exercise, name)
    spec = load(exercise)[name]
    cases = spec["cases"]
    labels = [o.label for o in check.outputs]
    kinds = [o.kind for o in check.outputs]
    rtols = [o.rtol for o in check.outputs]
    passed = 0
    lines = []
    for i, case in enumerate(cases, start=1):
        where = f"隐藏测试 {i}/{len(cases)}"
        if not callable(student_fn):
            lines.append(f"{where}：`{name}` 不是函数。")
            continue
        try:
            # nbgrader gives zero to a graded cell that writes to stderr: keep warnings out of it
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = student_fn(**to_inputs(case["inputs"]))
        except NotImplementedError:
            lines.append(f"{where}：`{name}` 还没有实现（抛出了 NotImplementedError）。")
            continue
        except Exception as exc:  # the student's code failed: report, do not crash the grading run
            last = traceback.extract_tb(exc.__traceback__)[-1]
            lines.append(f"{where}：调用 `{name}` 时出错：{type(exc).__name__}: {exc}（第 {last.lineno} 行）。")
            continue
        parts = _split(result, len(labels))
        if parts is None:
            lines.append(f"{where}：`{name}` 应返回 {len(labels)} 个值（{', '.join(labels)}）。")
            continue
        ok = True
        for j, (label, kind, rtol, got) in enumerate(zip(labels, kinds, rtols, parts)):
            mistakes = {m: vals[j] for m, vals in case["mistakes"].items()}
            verdict = compare(got, case["expected"][j], kind=kind, mistakes=mistakes, rtol=rtol)
            if not verdict.passed:
                ok = False
                lines.append(f"{where}，{label}：{verdict.message}")
        passed += ok
    score = round(check.points * passed / len(cases), 6)
    header = f"[{exercise}] {name}: 通过 {passed}/{len(cases)} 个隐藏测试，得分 {score:g}/{check.points:g}"
    print("\n".join([header, *lines]))
    return float(score)
