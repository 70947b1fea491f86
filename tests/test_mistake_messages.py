"""Every catalogued mistake shows its own message: the diagnosis of each stored mistake value is that mistake.

For every check's stored hidden cases (``autograder/data``) and public cases (``course_check/public``), every
output and every catalogued mistake whose value fails the comparison there: handing in exactly the mistake's value
gets that mistake's diagnosis and its own message, not a generic rule's (a sign, a zero, a transpose) and not
another mistake's, unless that other mistake gives the very same value on this output (then either is true).
This is the comparison grading and the public checks both run (``course_check.scoring.compare_output``), on the
data they read.
"""

import json

import numpy as np
import pytest

from autograder.verdict.data import DATA_DIR
from course_check import PUBLIC_DIR
from course_check.scoring import compare_output

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
