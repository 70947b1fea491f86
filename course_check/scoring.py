"""Scoring recorded results against a check's stored cases, with partial credit and feedback in Chinese.

One function, :func:`score_results`, serves both places a student meets it: the verdict of grading
(hidden cases, in the trusted nbgrader process: ``autograder/verdict/score.py``) and the public
checks a student runs before the deadline (:func:`course_check.check`, public cases, in the student's
own kernel). Same comparison, same messages, same partial credit.

A check's spec (``autograder/data/<exercise>.json`` for hidden cases, ``course_check/public/`` for the
public ones) holds ``points``, ``outputs`` (label, kind, tolerances, ``weight``), the catalogued
mistakes' ``messages``, the call convention (``params``, ``signature``) and ``cases``.

**Partial credit.** Each case is worth the same share of the points; within a case each output
earns its ``weight`` (equal by default) when it passes. A case whose call failed earns nothing.
Expected values are never printed.

**Diagnoses.** Besides the feedback, :class:`Scored` says per case and output what was diagnosed
(``None``: passed; a catalogued mistake's name, a code of :data:`course_check.compare.RULES` or of
:data:`CALL_RULES`; ``""``: failed with no diagnosis), so that grading can count how often each fired.
"""

from __future__ import annotations

import json
import re

from dataclasses import dataclass

from course_check.compare import compare
from course_check.protocol import MalformedRecord, Unsupported, decode


#: codes of a case whose call gave no value to compare, in English for reports
CALL_RULES = {
    "not_callable": "not a function",
    "not_implemented": "not implemented (NotImplementedError)",
    "arguments": "arguments differ from the template",
    "error": "raised an error",
    "by_hand": "called a JAX differentiation transform where the derivative is asked by hand",
    "own_code": "called the course_lib reference implementation the exercise asks to write",
    "outputs": "wrong number of returned values",
}


@dataclass(frozen=True)
class Scored:
    """A check's score and feedback; ``diagnoses[case][output]`` as the module docstring says."""

    earned: float
    points: float
    feedback: str
    diagnoses: tuple[tuple[str | None, ...], ...] = ()


def _split(value, n):
    if n == 1:
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != n:
        return None
    return list(value)


def _where(name: str, result: dict) -> str:
    """Where an adapter's refusal was provoked: the line, and the function when it is not the graded one."""
    caller = re.search(r" from (\w+):", str(result.get("error")))
    inside = f"在 `{caller[1]}` 的" if caller and caller[1] != name else "在"
    return f"{inside}第 {result.get('line')} 行"


def _call_problem(name: str, spec: dict, result) -> str | None:
    """What the feedback says of a case whose call did not return a value (``None`` when it did); the
    record's status is then the case's code of :data:`CALL_RULES`."""
    status = result.get("status") if isinstance(result, dict) else None
    if status == "ok":
        return None
    if status == "not_callable":
        return f"：`{name}` 不是函数。"
    if status == "not_implemented":
        return f"：`{name}` 还没有实现（抛出了 NotImplementedError）。"
    if status == "arguments":
        return (
            f"：`{name}` 接受的参数与题目模板不一致（{str(result.get('error'))[:200]}）。"
            f"评分按模板的顺序、按位置传入参数：`{spec.get('signature', name)}`。参数可以改名，个数和顺序要保持。"
        )
    if status == "error":
        return f"：调用 `{name}` 时出错：{str(result.get('error'))[:300]}（第 {result.get('line')} 行）。"
    if status == "by_hand":
        called = re.search(r"called (jax\.\w+)(?: \(through course_lib's (\w+)\))?", str(result.get("error")))
        what = "" if called is None else f"（`{called[1]}`{f'，经由 `cl.{called[2]}`' if called[2] else ''}）"
        return (
            f"：`{name}` 运行时{_where(name, result)}用了 JAX 的自动微分{what}。这道题考的是亲手推出导数："
            "评分时 jax.grad、jax.jacfwd、jax.jacrev 以及内部调用它们的 `cl.linearize` 等都不能用，请写出闭式表达式或自己的递推。"
        )
    if status == "own_code":
        called = re.search(r"called (cl\.\w+)", str(result.get("error")))
        what = "参考实现" if called is None else f"参考实现 `{called[1]}`"
        return (
            f"：`{name}` 运行时{_where(name, result)}调用了 `course_lib` 的{what}。这一步要用你自己的代码写出来："
            "题目点名的 `cl.` 函数是自检拿来对照的参考，评分时不能调用（包括把它赋给自己的名字再调用）。"
        )
    raise MalformedRecord("unknown status")


def compare_output(got, spec: dict, case: dict, j: int):
    """:func:`compare` of ``got`` with output ``j`` of a stored case of ``spec``: the tolerances, the catalogued
    mistakes' values and their messages as the generator stored them (nothing in a record changes them)."""
    output = spec["outputs"][j]
    return compare(
        got,
        case["expected"][j],
        kind=output["kind"],
        mistakes={m: vals[j] for m, vals in case["mistakes"].items()},
        rtol=output["rtol"],
        messages=spec["messages"],
        atol=output.get("atol", 0.0),
    )


def _case(name: str, spec: dict, case: dict, result) -> tuple[list[bool], list[str], list[str | None]]:
    """``(passed per output, what the feedback says of this case, diagnosis per output)``; each line follows
    the case's name."""
    outputs = spec["outputs"]
    problem = _call_problem(name, spec, result)
    if problem is not None:
        return [False] * len(outputs), [problem], [result["status"]] * len(outputs)
    parts = _split(decode(result.get("value")), len(outputs))
    if parts is None:
        labels = "、".join(o["label"] for o in outputs)
        return (
            [False] * len(outputs),
            [f"：`{name}` 应返回 {len(outputs)} 个值（{labels}）。"],
            ["outputs"] * len(outputs),
        )
    passed, lines, codes = [], [], []
    for j, (output, got) in enumerate(zip(outputs, parts)):
        if isinstance(got, Unsupported):
            passed.append(False)
            codes.append("type")
            lines.append(f"，{output['label']}：返回值应为数值数组（或数值），得到的是 {got.description}。")
            continue
        verdict = compare_output(got, spec, case, j)
        passed.append(verdict.passed)
        codes.append(None if verdict.passed else verdict.diagnosis)
        if not verdict.passed:  # a long diagnosis shared by several outputs is printed once per case
            same = any(line.endswith(verdict.message) for line in lines)
            lines.append(f"，{output['label']}：{'同上。' if same else verdict.message}")
    return passed, lines, codes


def constant_best(cases: list) -> int:
    """How many of ``cases`` the best constant answer passes: the count of the most common expected value (the
    check's one output is a label)."""
    counts: dict[str, int] = {}
    for case in cases:
        label = json.dumps(case["expected"][0])
        counts[label] = counts.get(label, 0) + 1
    return max(counts.values(), default=0)


def score_results(exercise: str, name: str, kind: str, spec: dict, results: list) -> Scored:
    """Score ``results`` (one record per case of ``spec``, as :mod:`course_check.calling` writes them)
    of check ``exercise.name``; ``kind`` names the cases in the feedback (``隐藏测试`` or ``公开测试``).

    Raises :class:`MalformedRecord` when the results are not one well-formed record per case.
    """
    cases, outputs = spec["cases"], spec["outputs"]
    if not isinstance(results, list) or len(results) != len(cases):
        raise MalformedRecord(f"results for {len(cases)} cases expected")
    weights = [float(o.get("weight", 1.0)) for o in outputs]
    share, full, per_output = 0.0, 0, [0] * len(outputs)
    said: dict[str, list[str]] = {}  # what a line says -> the cases it is said of (the same line once)
    diagnoses = []
    for i, (case, result) in enumerate(zip(cases, results), start=1):
        passed, case_lines, codes = _case(name, spec, case, result)
        diagnoses.append(tuple(codes))
        share += sum(w for w, ok in zip(weights, passed) if ok) / sum(weights)
        full += all(passed)
        per_output = [n + ok for n, ok in zip(per_output, passed)]
        for line in case_lines:
            said.setdefault(line, []).append(f"{i}/{len(cases)}")
    lines = [f"{kind} {'、'.join(cases_of)}{text}" for text, cases_of in said.items()]
    points = float(spec["points"])
    earned = round(points * share / len(cases), 6) if cases else 0.0
    best = constant_best(cases) if spec.get("credit") == "above_constant" else 0
    if best:  # a label: only what beats answering the most common label everywhere earns points
        earned = round(points * max(0, full - best) / (len(cases) - best), 6)
    # "完全通过": a case counts as passed when every output passed; partial credit comes from the outputs
    header = f"[{exercise}] {name}: 完全通过 {full}/{len(cases)} 个{kind}，得分 {earned:g}/{points:g}"
    if best and full < len(cases):
        header += f"（结论题：每次都给同一个结论也能对 {best} 个，只有超出的部分得分）"
    if len(outputs) > 1 and full < len(cases):
        each = "，".join(f"{o['label']} {n}/{len(cases)}" for o, n in zip(outputs, per_output))
        header += f"（部分得分：各项输出通过的测试数为 {each}）"
    return Scored(earned, points, "\n".join([header, *lines]), tuple(diagnoses))
