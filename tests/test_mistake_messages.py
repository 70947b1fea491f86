"""Every catalogued mistake shows its own message: the diagnosis of each stored mistake value is that mistake.

For every check's stored hidden cases (``autograder/data``) and public cases (``course_check/public``), every
output and every catalogued mistake whose value fails the comparison there: handing in exactly the mistake's value
gets that mistake's diagnosis and its own message, not a generic rule's (a sign, a zero, a transpose) and not
another mistake's, unless that other mistake gives the very same value on this output (then either is true).
This is the comparison grading and the public checks both run (``course_check.scoring.compare_output``), on the
data they read.

And every catalogued mistake is found by name: a :class:`~autograder.authoring.registry.Variant` of the check's
parametrised reference or a named function, never a lambda (in the specs' source or in what a check holds).
"""

import ast
import functools
import json
from pathlib import Path

import numpy as np
import pytest

from autograder.authoring.registry import all_checks
from autograder.verdict.data import DATA_DIR
from course_check import PUBLIC_DIR
from course_check.scoring import compare_output

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "autograder" / "authoring" / "reference"

FILES = sorted(DATA_DIR.glob("*.json")) + sorted(PUBLIC_DIR.glob("*.json"))


def _same(a, b, output) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if output["kind"] == "integer":
        return bool(np.array_equal(a, b))
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-300)
    return bool(np.max(np.abs(a - b), initial=0.0) <= output["rtol"] * scale + output.get("atol", 0.0))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_catalogued_mistake_is_diagnosed_as_itself(path):
    wrong = []
    for check, spec in json.loads(path.read_text(encoding="utf-8")).items():
        for i, case in enumerate(spec["cases"]):
            for j, output in enumerate(spec["outputs"]):
                mistakes = {name: values[j] for name, values in case["mistakes"].items()}
                for name, value in mistakes.items():
                    verdict = compare_output(value, spec, case, j)
                    if verdict.passed:
                        continue  # this mistake does not show on this output of this case
                    named = verdict.diagnosis
                    if named != name and not (named in mistakes and _same(mistakes[named], value, output)):
                        wrong.append(f"{check} case {i} output {j}: {name} diagnosed as {named!r}: {verdict.message}")
                    elif spec["messages"][name] not in verdict.message and named == name:
                        wrong.append(f"{check} case {i} output {j}: {name}'s own message missing: {verdict.message}")
    assert not wrong, "\n".join(wrong[:20])


def _lambdas(fn) -> list:
    """The lambdas a mistake runs: ``fn`` itself or, through (nested) functools.partial, its function and the
    functions among its bound arguments (a Variant's switches)."""
    if isinstance(fn, functools.partial):
        return [found for part in (fn.func, *fn.args, *fn.keywords.values()) for found in _lambdas(part)]
    return [fn] if callable(fn) and getattr(fn, "__name__", "") == "<lambda>" else []


def test_no_catalogued_mistake_is_a_lambda():
    lambdas = [
        f"{key}: {name}"
        for key, check in all_checks().items()
        for name, mistake in check.mistakes.items()
        if _lambdas(mistake.fn)
    ]
    assert not lambdas, (
        "write these as Variant(message, switch=...) or Mistake(message, named_function):\n" + "\n".join(lambdas)
    )


def test_no_lambda_is_written_in_a_mistake_or_variant():
    paths, found = sorted(REFERENCE_DIR.glob("*.py")), []
    assert paths, REFERENCE_DIR
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if called in ("Mistake", "Variant"):
                found += [f"{path.name}:{sub.lineno}" for sub in ast.walk(node) if isinstance(sub, ast.Lambda)]
    assert not found, found
