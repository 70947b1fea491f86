"""The verdict: score a graded cell's recorded results against the reference data, with feedback in Chinese.

Runs in the nbgrader process (never in the student's kernel; see :mod:`autograder.kernel.capture`).
Hidden inputs and expected values are never printed.
"""

from __future__ import annotations

from autograder.protocol import MalformedRecord, Unsupported, decode
from autograder.verdict.compare import compare
from autograder.verdict.data import load


def _split(value, n):
    if n == 1:
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != n:
        return None
    return list(value)


def _case_lines(where: str, name: str, spec: dict, case: dict, result) -> list[str]:
    """Feedback lines for one hidden case; an empty list means it passed."""
    status = result.get("status") if isinstance(result, dict) else None
    if status == "not_callable":
        return [f"{where}：`{name}` 不是函数。"]
    if status == "not_implemented":
        return [f"{where}：`{name}` 还没有实现（抛出了 NotImplementedError）。"]
    if status == "error":
        return [f"{where}：调用 `{name}` 时出错：{str(result.get('error'))[:300]}（第 {result.get('line')} 行）。"]
    if status != "ok":
        raise MalformedRecord("unknown status")
    outputs = spec["outputs"]
    parts = _split(decode(result.get("value")), len(outputs))
    if parts is None:
        return [f"{where}：`{name}` 应返回 {len(outputs)} 个值（{', '.join(o['label'] for o in outputs)}）。"]
    lines = []
    for j, (output, got) in enumerate(zip(outputs, parts)):
        if isinstance(got, Unsupported):
            lines.append(f"{where}，{output['label']}：返回值应为数值数组（或数值），得到的是 {got.description}。")
            continue
        mistakes = {m: vals[j] for m, vals in case["mistakes"].items()}
        # the tolerances are the output's, as stored by the generator; nothing in the record changes them
        verdict = compare(
            got,
            case["expected"][j],
            kind=output["kind"],
            mistakes=mistakes,
            rtol=output["rtol"],
            messages=spec["messages"],
            atol=output.get("atol", 0.0),
        )
        if not verdict.passed:  # a long diagnosis shared by several outputs is printed once per case
            same = any(line.endswith(verdict.message) for line in lines)
            lines.append(f"{where}，{output['label']}：{'同上。' if same else verdict.message}")
    return lines


def score(exercise: str, name: str, record: dict) -> tuple[float, float, str]:
    """``(points earned, points possible, feedback)`` for check ``exercise.name`` from a record of
    :func:`autograder.kernel.capture.grade` (``exercise`` and ``name`` come from the trusted cell source).

    Raises :class:`MalformedRecord` when the record is not one the capture side writes for this check.
    """
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("results"), list)
        or record.get("exercise") != exercise
        or record.get("name") != name
    ):
        raise MalformedRecord("not a results record of this check")
    spec = load(exercise)[name]
    cases = spec["cases"]
    if len(record["results"]) != len(cases):
        raise MalformedRecord(f"{len(record['results'])} results for {len(cases)} cases")
    passed, lines = 0, []
    for i, (case, result) in enumerate(zip(cases, record["results"]), start=1):
        case_lines = _case_lines(f"隐藏测试 {i}/{len(cases)}", name, spec, case, result)
        passed += not case_lines
        lines += case_lines
    points = float(spec["points"])
    earned = round(points * passed / len(cases), 6)
    header = f"[{exercise}] {name}: 通过 {passed}/{len(cases)} 个隐藏测试，得分 {earned:g}/{points:g}"
    return earned, points, "\n".join([header, *lines])
