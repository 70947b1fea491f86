"""Build nbgrader source notebooks from the MyST markdown sources.

``assignments/source/<section>/<exercise>.md`` is the file authors edit (readable diffs);
this module writes ``<exercise>.ipynb`` beside it with jupytext and completes each
cell's nbgrader metadata with nbgrader's defaults, so a source only states what
matters (``grade_id``, ``solution``, ``grade``, ``points``, ``locked``).
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat

COURSE_DIR = Path(__file__).resolve().parents[2] / "assignments"

_DEFAULTS = {"grade": False, "locked": False, "schema_version": 3, "solution": False, "task": False}


def _complete(meta: dict, where: str) -> dict:
    full = {**_DEFAULTS, **meta}
    if "grade_id" not in full:
        raise ValueError(f"{where}: nbgrader metadata needs a grade_id")
    if full["grade"] and "points" not in full:
        raise ValueError(f"{where}: graded cell {full['grade_id']} needs points")
    if full["grade"] or full["solution"]:
        full["locked"] = False if full["solution"] else full["locked"]
    return full


def build_notebook(md_path: Path) -> Path:
    """Convert one source ``.md`` into the ``.ipynb`` nbgrader reads; returns its path."""
    nb = jupytext.read(md_path)
    seen = set()
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        cell.metadata["nbgrader"] = _complete(dict(meta), f"{md_path.name} cell {i}")
        gid = cell.metadata["nbgrader"]["grade_id"]
        if gid in seen:
            raise ValueError(f"{md_path.name}: duplicate grade_id {gid}")
        seen.add(gid)
    nb.metadata.pop("jupytext", None)
    out = md_path.with_suffix(".ipynb")
    nbformat.write(nb, out)
    return out


def source_notebooks(course_dir: Path = COURSE_DIR, sections=None) -> list[Path]:
    """All source ``.md`` files, optionally only those of the given sections (assignments)."""
    paths = sorted((course_dir / "source").glob("*/*.md"))
    return [p for p in paths if sections is None or p.parent.name in sections]


def build_all(course_dir: Path = COURSE_DIR, sections=None) -> list[Path]:
    return [build_notebook(p) for p in source_notebooks(course_dir, sections)]
