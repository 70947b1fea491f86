"""Regenerating the reference data: hidden inputs, reference results and known-mistake results, as JSON.

Generated from the reference solutions by :func:`regenerate` (deterministic: the same
bytes every time, which a test checks). Two files per exercise:

* ``autograder/data/<exercise>.json`` (instructor-only): per check its points, how each output
  is compared, the Chinese mistake messages, and per hidden case the inputs, expected values and
  known-mistake values. Read by the verdict in the nbgrader process (:func:`load`), so grading
  never re-runs or imports a reference solution (:mod:`autograder.verdict.data`);
* ``autograder/kernel/inputs/<exercise>.json``: the hidden inputs alone, which the sandboxed grading
  kernel reads to call the student's function (:mod:`autograder.kernel.capture`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autograder.authoring.registry import Check, all_checks
from autograder.kernel.capture import INPUTS_DIR
from autograder.verdict.compare import MISTAKE_MESSAGES, NONFINITE
from autograder.verdict.data import DATA_DIR



def _plain(value):
    """numpy/JAX values to JSON-ready Python (floats keep their exact shortest repr)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    arr = np.asarray(value)
    if arr.dtype.kind in "iub":
        return arr.tolist()
    return np.asarray(arr, dtype=np.float64).tolist()


def _components(check: Check, value):
    return list(value) if len(check.outputs) > 1 else [value]


def build_exercise_data(checks) -> dict:
    data = {}
    for check in checks:
        cases = []
        for inputs in check.cases():
            cases.append({
                "inputs": _plain(inputs),
                "expected": _plain(_components(check, check.reference(**inputs))),
                "mistakes": {name: _plain(_components(check, fn(**inputs))) for name, fn in sorted(check.mistakes.items())},
            })
        data[check.name] = {
            "points": check.points,
            "outputs": [{"label": o.label, "kind": o.kind, "rtol": o.rtol} for o in check.outputs],
            "messages": {**{name: MISTAKE_MESSAGES[name] for name in sorted(check.mistakes) if name in MISTAKE_MESSAGES},
                         **({NONFINITE: check.nonfinite_hint} if check.nonfinite_hint else {})},
            "cases": cases,
        }
    return data


def inputs_only(data: dict) -> dict:
    """``{check name: [inputs of each case]}``: what the grading kernel may see of ``data``."""
    return {name: [case["inputs"] for case in spec["cases"]] for name, spec in data.items()}


def serialise(data) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def regenerate(exercises=None, out_dir: Path = DATA_DIR, inputs_dir: Path = INPUTS_DIR) -> list[Path]:
    """Write ``<exercise>.json`` (data and inputs) for the given exercises (all by default); returns the data paths."""
    by_exercise: dict[str, list[Check]] = {}
    for check in all_checks().values():
        by_exercise.setdefault(check.exercise, []).append(check)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for exercise in sorted(exercises or by_exercise):
        data = build_exercise_data(by_exercise[exercise])
        path = out_dir / f"{exercise}.json"
        path.write_text(serialise(data), encoding="utf-8")
        (inputs_dir / path.name).write_text(serialise(inputs_only(data)), encoding="utf-8")
        written.append(path)
    return written
