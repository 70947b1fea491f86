"""Fill and seal the JAX compilation cache that grading kernels read (design: :mod:`autograder.confine.compile_cache`).

The instructor's run executes each released notebook of the chosen sections exactly as a student receives
it: the setup and the other given cells compile the ``course_lib`` programs every submission needs; the
blank answer cells and the cells that call them or build on them raise, which is expected (only a given
cell before the first answer that raises is reported: a broken release).
Two things never enter the cache, because every grading kernel can read it and a student can print what
their kernel reads into their own feedback: hidden inputs (the graded cells are not in a release), and
the reference solutions (a compiled program of a reference answer is a form of that answer; filling the
cache from them, as an earlier version did, handed it to every kernel). The kernel has a grading kernel's environment
(:func:`autograder.confine.launcher.kernel_environment`: same allow-list, so the same XLA flags and JAX
settings, hence the same cache keys) with JAX told to keep every program it compiles.

Entries of the current cache, when it verifies, are kept: warming one section does not drop the others.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import jax
import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from autograder.confine.compile_cache import ENTRIES, FILL_ENV, default_root, seal, verified_entries
from autograder.confine.execute import skipped_when_grading
from autograder.confine.launcher import kernel_environment
from autograder.course.course import Course

#: per-cell limit of the filling run: the heaviest given cell needs under 20 s on a loaded 2-core machine
CELL_TIMEOUT_S = 300


def release_notebooks(course: Course, section: str) -> dict[str, nbformat.NotebookNode]:
    """``{exercise: release notebook}``, as students receive them (needs ``release/<section>``)."""
    release = course.release(section)
    if not release.is_dir():
        raise FileNotFoundError(f"{release} does not exist: release the section first (python -m autograder release)")
    return {p.stem: nbformat.read(p, as_version=4) for p in sorted(release.glob("*.ipynb"))}


def _execute(nb, workdir: Path, entries: Path) -> list[str]:
    """Run the cells of ``nb`` that grading runs in a fresh kernel that writes ``entries``; the names of the given
    cells before the first answer cell that raised. Later cells may raise: they call, or build on, blank answers.

    The cells grading skips (public checks, self-checks, exploration, plots: :func:`skipped_when_grading`) are left
    out: no grading kernel would read what they compile, and they are a good part of a notebook's time."""
    nb = nbformat.from_dict({**nb, "cells": [cell for cell in nb.cells if not skipped_when_grading(cell)]})
    km = KernelManager(kernel_name="python3", transport="ipc", ip=str(workdir / "kernel"))  # no TCP port
    client = NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT_S,
        allow_errors=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    try:
        client.execute(env=kernel_environment(workdir, entries, FILL_ENV), cwd=str(workdir))
    finally:  # nbclient leaves running a kernel whose manager it was given
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        km.cleanup_resources()
    broken = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            break
        if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            broken.append(meta.get("grade_id", f"cell {i}"))
    return broken


def warm_cache(course: Course | Path, sections, root: Path | None = None, log=print) -> Path:
    """Fill the cache of ``course`` from the release notebooks of ``sections`` and seal it; returns its root."""
    course = Course.of(course)
    root = Path(root or default_root(course.folder))
    root.mkdir(parents=True, exist_ok=True)
    filled = root / f"{ENTRIES}.new"
    shutil.rmtree(filled, ignore_errors=True)
    current, _ = verified_entries(root)
    if current is not None:
        shutil.copytree(current, filled)
        filled.chmod(0o755)
        for path in filled.iterdir():
            path.chmod(0o644)
    else:
        filled.mkdir()
    failures = []
    start = time.perf_counter()
    for section in sections:
        for exercise, nb in release_notebooks(course, section).items():
            with tempfile.TemporaryDirectory(prefix="s04-warm-") as tmp:
                failed = _execute(nb, Path(tmp), filled)
            failures += [f"{exercise}:{cell}" for cell in failed]
            log(f"warmed {exercise} ({sum(1 for _ in filled.iterdir())} entries, {time.perf_counter() - start:.0f} s)")
    facts = {
        "jax": jax.__version__,
        "python": sys.version.split()[0],
        "sections": sorted(set(sections)),
        "environment": {k: v for k, v in kernel_environment(root).items() if k.startswith(("XLA_", "JAX_"))},
        "failed_cells": failures,
    }
    seal(root, filled, facts)
    if failures:  # a setup cell that raises is a broken release, not a cache problem: say so loudly
        log(f"WARNING: given cells raised before any answer while warming: {', '.join(failures)}")
    return root
