"""Fill and seal the JAX compilation cache that grading kernels read (design: :mod:`autograder.confine.compile_cache`).

The instructor's run executes, for each released notebook of the chosen sections, the *release* with the
reference solutions pasted into its answer cells: the setup, the answers and the student-visible self-checks
on their public inputs. The hidden graded cells are not in a release, so no hidden input can end up in a
compiled program that every kernel may read. The kernel has a grading kernel's environment
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
from autograder.confine.launcher import kernel_environment
from autograder.ops.selftest import make_submission, reference_solutions

#: per-cell limit of the filling run: the heaviest reference cell needs under 20 s on a loaded 2-core machine
CELL_TIMEOUT_S = 300


def reference_submissions(course_dir: Path, section: str) -> dict[str, nbformat.NotebookNode]:
    """``{exercise: release notebook with the reference answers}`` (needs ``release/<section>``)."""
    course = Path(course_dir)
    release = course / "release" / section
    if not release.is_dir():
        raise FileNotFoundError(f"{release} does not exist: release the section first (python -m autograder release)")
    return {
        exercise: make_submission(nbformat.read(release / f"{exercise}.ipynb", as_version=4), answers)
        for exercise, answers in reference_solutions(course, section).items()
    }


def _execute(nb, workdir: Path, entries: Path) -> list[str]:
    """Run ``nb`` in a fresh kernel that writes ``entries``; the names of cells that raised."""
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
    return [
        c.metadata.get("nbgrader", {}).get("grade_id", "?")
        for c in nb.cells
        if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", []))
    ]


def warm_cache(course_dir: Path, sections, root: Path | None = None, log=print) -> Path:
    """Fill the cache of ``course_dir`` from the reference answers of ``sections`` and seal it; returns its root."""
    course = Path(course_dir).resolve()
    root = Path(root or default_root(course))
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
        for exercise, nb in reference_submissions(course, section).items():
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
    if failures:  # a reference answer that raises is a broken exercise, not a cache problem: say so loudly
        log(f"WARNING: reference cells raised while warming: {', '.join(failures)}")
    return root
