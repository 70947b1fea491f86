"""How long autograding one submission takes, with JAX compilation reported apart from run time.

For each section (one nbgrader assignment) this builds the release in a scratch course,
hands in ONE submission (the reference solutions pasted into the release, i.e. a student
who answers everything, so every graded check runs to the end) and measures:

1. ``nbgrader autograde <section>`` for that one student, wall clock (what an instructor waits
   for: nbgrader start-up, gradebook, one sandboxed grading kernel per notebook, the verdicts);
2. per notebook, the same submitted notebook executed by nbclient (the executor nbgrader
   uses) with JAX's monitoring hooks installed in the kernel: kernel start-up, importing JAX,
   JAX tracing + lowering, XLA backend compilation, and the rest (running the code, recording
   results), once in an ordinary kernel and once in the grading kernel (resource limits, as root its
   own user and no network, Landlock: ``autograder.confine.kernel.confined_kernel``), so the
   isolation's cost shows side by side.

Grading kernels do not share an XLA compilation cache (a shared cache would let one student's
kernel change what another's loads), so every notebook compiles its programs afresh.

Target (issue "Assignments and autograder"): at most 10 s per notebook on the 2-core
development machine. Targets are reported, never asserted.

    python benchmarks/run_grading.py [sections...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.confine.kernel import confined_kernel  # noqa: E402
from autograder.confine.limits import Limits  # noqa: E402
from autograder.ops.nbgrader_run import nbgrader  # noqa: E402
from autograder.authoring.reference import SECTIONS  # noqa: E402
from autograder.ops.selftest import solution_sources, make_submission, scratch_course  # noqa: E402
from autograder.authoring.sources import build_all  # noqa: E402

TARGET_S = 10.0

# Installed as the notebook's first cell: sums the durations JAX reports for its compile stages.
PROBE = """
import time as _bench_time
from jax import monitoring as _bench_monitoring
_bench_t0 = _bench_time.perf_counter()
_bench_durations = {}
def _bench_listener(event, duration, **kwargs):
    _bench_durations[event] = _bench_durations.get(event, 0.0) + duration
_bench_monitoring.register_event_duration_secs_listener(_bench_listener)
"""
REPORT = """
import json as _bench_json
_bench_durations["total_after_probe"] = _bench_time.perf_counter() - _bench_t0
print("BENCH" + _bench_json.dumps(_bench_durations))
"""
TRACE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
BACKEND_EVENT = "/jax/core/compile/backend_compile_duration"


def prepare(section: str, course: Path) -> dict:
    """Release ``section`` and hand in one complete submission; returns {exercise: submitted path}."""
    build_all(course, sections=[section])
    nbgrader(["generate_assignment", section, "--force"], course)
    folder = course / "submitted" / "student" / section
    folder.mkdir(parents=True)
    submitted = {}
    for source in sorted((course / "source" / section).glob("*.ipynb")):
        release_nb = nbformat.read(course / "release" / section / source.name, as_version=4)
        answers = solution_sources(nbformat.read(source, as_version=4))
        path = folder / source.name
        nbformat.write(make_submission(release_nb, answers), path)
        submitted[source.stem] = path
    return submitted


def profile_notebook(path: Path, confined: bool = False) -> dict:
    """Execute one submitted notebook with the JAX compile probe; returns times in seconds.

    ``confined``: in the grading kernel (:func:`autograder.confine.kernel.confined_kernel`: limits, its own
    user and network namespace as root, Landlock), else in an ordinary ``python3`` kernel.
    """
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PROBE))
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))
    # nbgrader sets NBGRADER_EXECUTION while autograding; notebooks skip student-only experiments on it
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde"}
    with confined_kernel(path.stem, Limits()) if confined else nullcontext(None) as km:
        client = NotebookClient(
            nb,
            km=km,
            timeout=600,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(path.parent)}},
        )
        start = time.perf_counter()
        with client.setup_kernel(env=env):
            started = time.perf_counter()
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            if confined:  # nbclient leaves the channels of a kernel manager it was given open
                client.kc.stop_channels()
        wall = time.perf_counter() - start
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    durations = json.loads(text.split("BENCH", 1)[1])
    trace = sum(durations.get(e, 0.0) for e in TRACE_EVENTS)
    backend = durations.get(BACKEND_EVENT, 0.0)
    return {
        "wall_s": wall,
        "kernel_start_s": started - start,
        "trace_lower_s": trace,
        "xla_compile_s": backend,
        "import_jax_s": max(wall - (started - start) - durations["total_after_probe"], 0.0),
        "rest_s": max(durations["total_after_probe"] - trace - backend, 0.0),
    }


def run(sections) -> dict:
    results = {}
    for section in sections:
        with tempfile.TemporaryDirectory() as tmp:
            course = scratch_course(Path(tmp) / "course", ROOT / "assignments")
            submitted = prepare(section, course)
            start = time.perf_counter()
            nbgrader(["autograde", section, "--student", "student", "--force"], course)
            autograde_s = time.perf_counter() - start
            notebooks = {
                exercise: {"plain": profile_notebook(path), "grading": profile_notebook(path, confined=True)}
                for exercise, path in submitted.items()
            }
        results[section] = {"nbgrader_autograde_s": autograde_s, "notebooks": notebooks}
        print(
            f"{section}: nbgrader autograde of one submission ({len(notebooks)} notebooks): {autograde_s:.1f} s",
            flush=True,
        )
    return results


def print_table(results: dict) -> None:
    print()
    print(
        f"{'notebook':<12} {'kernel':<10} {'wall s':>7} {'kernel':>7} {'import':>7} {'trace+lower':>12} "
        f"{'XLA compile':>12} {'rest':>7}  target <= {TARGET_S:g} s"
    )
    for res in results.values():
        for exercise, by_cache in res["notebooks"].items():
            for cache, t in by_cache.items():
                verdict = "PASS" if t["wall_s"] <= TARGET_S else "MISS"
                print(
                    f"{exercise:<12} {cache:<10} {t['wall_s']:7.1f} {t['kernel_start_s']:7.1f} {t['import_jax_s']:7.1f} "
                    f"{t['trace_lower_s']:12.1f} {t['xla_compile_s']:12.1f} {t['rest_s']:7.1f}  {verdict}"
                )
    for cache in ("plain", "grading"):
        worst = max((by[cache]["wall_s"], ex) for r in results.values() for ex, by in r["notebooks"].items())
        print(f"slowest notebook ({cache}): {worst[1]} {worst[0]:.1f} s")
    total = sum(r["nbgrader_autograde_s"] for r in results.values())
    print(f"nbgrader autograde of one student, all these sections: {total:.1f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sections", nargs="*", help=f"default: all ({', '.join(SECTIONS)})")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    results = run(args.sections or SECTIONS)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
