"""Loading the instructor-only reference data (``autograder/data/<exercise>.json``) for the verdict.

Written by :mod:`autograder.authoring.regenerate`; read here, in the trusted nbgrader process only.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def load(exercise: str, data_dir: Path = DATA_DIR) -> dict:
    path = data_dir / f"{exercise}.json"
    if not path.exists():
        raise FileNotFoundError(f"no reference data for {exercise} at {path}; run `python -m autograder regenerate`")
    return json.loads(path.read_text(encoding="utf-8"))
