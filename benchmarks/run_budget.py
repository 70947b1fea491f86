"""How much of grading's time budgets an honest student's notebook spends, as written and without JIT.

Grading runs every code cell of a submission except the ones tagged ``skip-in-grading`` (public checks,
self-checks, exploration), within a per-cell timeout, a per-notebook budget and a per-section budget
(:class:`autograder.confine.limits.Limits`). A fair budget leaves room for a student who writes plain
Python loops and never calls ``jax.jit``. The stand-in for that student is the reference solution with
its own code un-jitted: in the solution cells ``jax.jit`` returns the function unchanged and
``jax.lax.scan`` is a Python loop over the steps, whenever those functions are called. The instructors'
setup and graded cells, and ``course_lib``, stay as written, as they do for every student. (Switching
JAX's JIT off everywhere, ``jax.disable_jit()``, would also slow the setup cells and ``course_lib``,
which no student can do to grading.)

Each notebook runs in a fresh Python process (JAX and ``course_lib`` imported before the clock starts,
as in a grading kernel forked from its warm zygote), twice: as written and without JIT. The clock covers
exactly the cells grading runs, on the hidden inputs (``autograder.grade`` records the results in
process); nothing is compiled ahead. Targets (issue 29, "fair time"): the un-jitted student uses at most
half of each notebook's budget, half of each section's, and half of the per-cell timeout in its slowest
cell. Reported, never asserted (tests never assert wall-clock times).

    python benchmarks/run_budget.py [sections...] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cell_timeout_s() -> float:
    """nbgrader's per-cell timeout, as the course's config sets it."""
    config = (ROOT / "assignments" / "nbgrader_config.py").read_text(encoding="utf-8")
    return float(re.search(r"c\.Execute\.timeout = (\d+)", config).group(1))


def running_cells(exercise: str) -> list[tuple[str, str, bool]]:
    """``(label, source, is a solution)`` of the code cells grading runs for the reference student, in order."""
    import jupytext

    from autograder.authoring.sources import complete_metadata, solution_cell, source_path
    from autograder.confine.execute import skipped_when_grading

    path = source_path(exercise)
    nb = complete_metadata(jupytext.read(path), path.name)
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or skipped_when_grading(cell):
            continue
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id", f"cell {i}")
        solution = bool(meta.get("solution"))
        cells.append((gid, solution_cell(exercise, gid) if solution else cell.source, solution))
    return cells


def _unjitted_jax():
    """``jax`` as a student who never compiles sees it: ``jit`` returns the function itself and
    ``lax.scan`` is a Python loop over the steps; everything else is JAX's own."""
    import types

    import jax
    import jax.numpy as jnp

    def jit(fun=None, **_options):
        return fun if fun is not None else (lambda f: f)

    def scan(f, init, xs=None, length=None, reverse=False, **_options):
        n = length if xs is None else len(jax.tree.leaves(xs)[0])
        carry, ys = init, []
        for i in reversed(range(n)) if reverse else range(n):
            carry, y = f(carry, None if xs is None else jax.tree.map(lambda a: a[i], xs))
            ys.append(y)
        if reverse:
            ys.reverse()
        stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *ys) if n else None
        return carry, stacked

    lax = types.SimpleNamespace(**{name: getattr(jax.lax, name) for name in dir(jax.lax) if not name.startswith("_")})
    lax.scan = scan
    shim = types.SimpleNamespace(**{name: getattr(jax, name) for name in dir(jax) if not name.startswith("_")})
    shim.jit, shim.lax = jit, lax
    return shim, lax


def time_one(exercise: str, jit: bool) -> dict:
    """Run the cells grading runs in this process; seconds per cell and in all. Without ``jit``, the
    solution cells see an un-jitted ``jax`` (the instructors' setup and graded cells stay as written)."""
    import course_lib  # noqa: F401 - imported before the clock, as in a warm grading kernel

    os.environ.setdefault("MPLBACKEND", "Agg")
    shim, shim_lax = _unjitted_jax()
    main: dict = {"__name__": "__main__"}
    # The student's cells run in a namespace of their own whose ``jax`` (and ``lax``) is the un-jitted one, so
    # their functions see it whenever they are called; every other name is shared both ways after each cell.
    student: dict = {"__name__": "__main__"}
    own = {"jax": shim, "lax": shim_lax}
    per_cell: dict[str, float] = {}
    error = ""
    with contextlib.redirect_stdout(io.StringIO()):
        for label, source, solution in running_cells(exercise):
            target = student if solution and not jit else main
            began = time.perf_counter()
            try:
                exec(compile(source, f"{exercise}:{label}", "exec"), target)
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on as grading's does
                error = error or f"{label}: {type(exc).__name__}: {exc}"[:200]
            per_cell[label] = time.perf_counter() - began
            if not jit:
                source_ns, other = (student, main) if target is student else (main, student)
                other.update({k: v for k, v in source_ns.items() if k not in own})
                student.update({k: v for k, v in own.items() if k == "jax" or k in main or k in student})
    return {"exercise": exercise, "jit": jit, "total_s": sum(per_cell.values()), "cells": per_cell, "error": error}


def _measure(exercise: str, jit: bool) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", exercise, "--mode", "jit" if jit else "nojit"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"exercise": exercise, "jit": jit, "total_s": float("nan"), "cells": {}, "error": out.stderr[-300:]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", help="sections to measure (default: all)")
    parser.add_argument("--json", type=Path, help="also write the measurements as JSON")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("jit", "nojit"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(time_one(args.one, args.mode == "jit")))
        return

    from autograder.authoring.sources import source_notebooks
    from autograder.confine.limits import Limits as L

    notebooks = [md for md in source_notebooks(sections=args.sections or None) if running_cells(md.stem)]
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    cell_s = cell_timeout_s()
    print(f"budgets: cell {cell_s:.0f} s, notebook {L.notebook_budget_s:.0f} s, section {L.submission_budget_s:.0f} s")
    print(
        f"{'notebook':18s} {'as written':>11s} {'no JIT':>8s} {'no JIT / budget':>16s} {'slowest cell (no JIT)':>30s}"
    )
    rows, sections = [], {}
    for md in notebooks:
        fast, slow = _measure(md.stem, True), _measure(md.stem, False)
        worst = max(slow["cells"].items(), key=lambda kv: kv[1], default=("-", 0.0))
        rows.append({"as_written": fast, "no_jit": slow})
        sections[md.parent.name] = sections.get(md.parent.name, 0.0) + slow["total_s"]
        flag = " ERROR " + (slow["error"] or fast["error"]) if slow["error"] or fast["error"] else ""
        print(
            f"{md.stem:18s} {fast['total_s']:10.1f}s {slow['total_s']:7.1f}s "
            f"{slow['total_s'] / L.notebook_budget_s:15.0%} {worst[0][:20]:>22s} {worst[1]:6.1f}s{flag}"
        )
    print(
        "per section, no JIT:",
        ", ".join(f"{s} {t:.0f} s ({t / L.submission_budget_s:.0%})" for s, t in sections.items()),
    )
    worst_nb = max((r["no_jit"]["total_s"] / L.notebook_budget_s for r in rows), default=0.0)
    worst_sec = max((t / L.submission_budget_s for t in sections.values()), default=0.0)
    worst_cell = max((max(r["no_jit"]["cells"].values(), default=0.0) / cell_s for r in rows), default=0.0)
    verdict = "PASS" if max(worst_nb, worst_sec, worst_cell) <= 0.5 else "MISS"
    print(
        f"largest share without JIT: notebook {worst_nb:.0%}, section {worst_sec:.0%}, cell {worst_cell:.0%} "
        f"(target <= 50 %): {verdict}"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "sections": sections}, indent=1))


if __name__ == "__main__":
    main()
