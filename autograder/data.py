"""Reference data: hidden inputs, reference results and known-mistake results, as JSON.

Generated from the reference solutions by :func:`regenerate` (deterministic: the same
bytes every time, which a test checks) and read at grading time by :func:`load`, so
grading never re-runs a reference solution.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from autograder.registry import Check, all_checks

DATA_DIR = Path(__file__).resolve().parent / "data"


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
        data[check.name] = {"points": check.points, "cases": cases}
    return data


def serialise(data) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def regenerate(exercises=None, out_dir: Path = DATA_DIR) -> list[Path]:
    """Write ``<exercise>.json`` for the given exercises (all by default); returns the paths."""
    by_exercise: dict[str, list[Check]] = {}
    for check in all_checks().values():
        by_exercise.setdefault(check.exercise, []).append(check)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for exercise in sorted(exercises or by_exercise):
        path = out_dir / f"{exercise}.json"
        path.write_text(serialise(build_exercise_data(by_exercise[exercise])), encoding="utf-8")
        written.append(path)
    return written


def load(exercise: str, data_dir: Path = DATA_DIR) -> dict:
    path = data_dir / f"{exercise}.json"
    if not path.exists():
        raise FileNotFoundError(f"no reference data for {exercise} at {path}; run `python -m autograder regenerate`")
    return json.loads(path.read_text(encoding="utf-8"))


def _from_json(value):
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float64)
    return value


def to_inputs(raw: dict) -> dict:
    """JSON inputs back to what student functions receive.

    Lists become float64 arrays; a dict input (e.g. named parameters) stays a dict whose
    lists become arrays. Integers and strings pass through.
    """
    return {k: _from_json(v) for k, v in raw.items()}
