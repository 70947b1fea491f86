"""Scan a generated student release for anything that must not reach students."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from autograder.authoring.hidden_numbers import HiddenNumbers

FORBIDDEN_MARKERS = (
    "BEGIN SOLUTION",
    "END SOLUTION",
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    "autograder.grade",
    "参考答案与评分细则",
)


def solution_lines(source_nb, min_length: int = 26) -> set[str]:
    """Distinctive lines of solution regions (code solutions and the written answers' rubrics): those of at
    least ``min_length`` characters that are not comments."""
    lines = set()
    for cell in source_nb.cells:
        if not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        inside = cell.cell_type == "markdown"
        for line in cell.source.splitlines():
            stripped = line.strip()
            if "BEGIN SOLUTION" in stripped:
                inside = True
                continue
            if "END SOLUTION" in stripped:
                inside = False
                continue
            if inside and len(stripped) >= min_length and not stripped.startswith("#"):
                lines.add(stripped)
    return lines


#: a hidden input written with this many significant digits in a release is no coincidence
HIDDEN_INPUT_DIGITS = 5


def _hidden_inputs(data: dict) -> HiddenNumbers:
    """The hidden inputs of an exercise's reference data, as a secret set (:mod:`autograder.authoring.hidden_numbers`)."""
    values = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, float):
            values.append(v)

    for spec in data.values():
        for case in spec["cases"]:
            walk(case["inputs"])
    return HiddenNumbers(values, HIDDEN_INPUT_DIGITS)


def scan_release(release_dir: Path, source_dir: Path, data_dir: Path) -> list[str]:
    """Problems found in ``release_dir`` (one section); an empty list means clean."""
    problems = []
    for path in sorted(release_dir.rglob("*")):
        if path.is_file() and path.suffix != ".ipynb":
            problems.append(f"{path.name}: only notebooks may be released")
    for nb_path in sorted(release_dir.glob("*.ipynb")):
        text = nb_path.read_text(encoding="utf-8")
        for marker in FORBIDDEN_MARKERS:
            if marker in text:
                problems.append(f"{nb_path.name}: contains {marker!r}")
        source = source_dir / nb_path.name
        if source.exists():
            for line in solution_lines(nbformat.read(source, as_version=4)):
                if line in text:
                    problems.append(f"{nb_path.name}: solution line leaked: {line[:60]}")
        data_path = data_dir / f"{nb_path.stem}.json"
        if data_path.exists():
            for number in _hidden_inputs(json.loads(data_path.read_text(encoding="utf-8"))).found_in(text):
                problems.append(f"{nb_path.name}: hidden input value {number} appears")
    return problems
