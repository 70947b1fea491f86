"""Running the real nbgrader commands on a course directory and reading its gradebook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def jax_cache_env(course_dir: Path) -> dict:
    """Environment that makes grading kernels share XLA's persistent compilation cache.

    XLA compilation is most of a notebook's grading time (see benchmarks/run_grading.py);
    with the cache, a program already compiled for an earlier submission (course_lib code,
    the locked setup cells, identical answers) is loaded instead of compiled again. The
    cache lives in the course folder, so one class shares it and nothing leaks between courses.
    """
    return {
        "JAX_COMPILATION_CACHE_DIR": str(Path(course_dir).resolve() / ".jax_cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",  # small programs add up: cache them all
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def nbgrader(args, course_dir: Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` in ``course_dir``; raise with nbgrader's log if it fails.

    The interpreter's ``bin/`` goes first on PATH because nbgrader calls ``alembic`` by name;
    kernels started by nbgrader inherit :func:`jax_cache_env`.
    """
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, **jax_cache_env(course_dir), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(
        [os.path.join(bin_dir, "nbgrader"), *args], cwd=course_dir, env=env,
        capture_output=True, text=True, timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def gradebook_scores(course_dir: Path, assignment: str) -> dict:
    """``{student: {notebook: {"auto": (score, max), "manual_max": max}}}`` from the gradebook."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{Path(course_dir) / 'gradebook.db'}"
    out: dict = {}
    with Gradebook(url) as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                auto = [g for g in nb.grades if g.cell.cell_type == "code"]
                manual = [g for g in nb.grades if g.cell.cell_type == "markdown"]
                out.setdefault(sub.student.id, {})[nb.name] = {
                    "auto": (sum(g.score for g in auto), sum(g.max_score for g in auto)),
                    "manual_max": sum(g.max_score for g in manual),
                }
    return out
