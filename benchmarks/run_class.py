"""Class-grading throughput: one section, the same class graded several ways side by side in one run.

A class of N pseudo-students (the reference solutions, the blank release and the catalogued
wrong answers, repeated) hands in every notebook of one section. Each mode grades it in a fresh
scratch course (sandbox on, as for any entry point):

* ``plain``: ONE ``nbgrader autograde <section>`` for the whole class (nbgrader's own loop);
* ``class x2``: ``grade_class`` with 2 long-lived grading workers, no compilation cache;
* ``class x2 + cache``: the same after ``warm-cache`` sealed the section's cache (the warm-up is
  timed apart: an instructor pays it once per release, not per class);
* ``dask x2 + cache``: the same jobs on a local Dask cluster of 2 worker processes.

It prints seconds, students/minute, the extrapolated time for 100 students, the ratio of each mode
to ``plain``, and CPU seconds per submission (all processes, from ``RUSAGE_CHILDREN``; not for Dask,
whose worker processes are not children of this one), from which
the time of a 100-student class on 16 cores is estimated (16 workers, CPU-bound, no contention).
Targets (issue 14): class run >= 4x plain; 100 students of s04_1 <= 10 min. Reported, never asserted.

    python benchmarks/run_class.py [--section s04_1] [--students 6] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.ops.classrun import grade_class, phase_lines  # noqa: E402
from autograder.ops.warm_cache import warm_cache  # noqa: E402
from autograder.authoring.reference import WRONG_ANSWERS  # noqa: E402
from autograder.ops.selftest import make_submission, release_section, scratch_course, solution_sources  # noqa: E402

TARGET_MIN_PER_100 = 10.0
TARGET_RATIO = 4.0
MODES = ("plain", "class x2", "class x2 + cache", "dask x2 + cache")


def make_class(course: Path, section: str, n_students: int) -> None:
    release_section(section, course)
    sources = sorted((course / "source" / section).glob("*.ipynb"))
    kinds = ["reference", "blank"] + [f"wrong{k}" for k in range(3)]
    for i in range(n_students):
        kind = kinds[i % len(kinds)]
        folder = course / "submitted" / f"student{i:03d}" / section
        folder.mkdir(parents=True)
        for source in sources:
            release_nb = nbformat.read(course / "release" / section / source.name, as_version=4)
            if kind == "reference":
                cells = solution_sources(nbformat.read(source, as_version=4))
            elif kind.startswith("wrong") and WRONG_ANSWERS.get(source.stem):
                wrongs = WRONG_ANSWERS[source.stem]
                cells = wrongs[int(kind[5:]) % len(wrongs)].cells
            else:
                cells = {}
            nbformat.write(make_submission(release_nb, cells), folder / source.name)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(mode: str, section: str, n_students: int) -> dict:
    """``{"seconds", "cpu_s", "warm_s"}`` of grading the class once in ``mode``."""
    with tempfile.TemporaryDirectory() as tmp:
        course = scratch_course(Path(tmp) / "course", ROOT / "assignments")
        make_class(course, section, n_students)
        warm_s = 0.0
        if mode.endswith("+ cache"):
            start = time.perf_counter()
            warm_cache(course, [section], log=lambda line: None)
            warm_s = time.perf_counter() - start
        cpu0, start = _children_cpu(), time.perf_counter()
        if mode == "plain":
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            subprocess.run(
                [str(Path(sys.executable).parent / "nbgrader"), "autograde", section, "--force"],
                cwd=course,
                env=env,
                check=True,
                capture_output=True,
                timeout=7200,
            )
        else:
            scheduler = "local" if mode.startswith("dask") else None
            results = grade_class(course, [section], workers=2, progress=False, scheduler=scheduler)
            failed = [r for r in results if r.status != "graded"]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} submissions failed: {failed[0].error}")
            if mode == "class x2 + cache":
                print("  " + "\n  ".join(phase_lines(results)), flush=True)
        return {"seconds": time.perf_counter() - start, "cpu_s": _children_cpu() - cpu0, "warm_s": warm_s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", default="s04_1")
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores", flush=True)
    runs = {}
    for mode in args.modes:
        runs[mode] = timed(mode, args.section, args.students)
        r = runs[mode]
        warm = f" (warm-up {r['warm_s']:.1f} s apart)" if r["warm_s"] else ""
        print(f"{mode:17s} {args.students} students of {args.section}: {r['seconds']:.1f} s{warm}", flush=True)
    base = runs.get("plain", {}).get("seconds")
    print(
        f"\n{'mode':17s} {'s':>7s} {'stud/min':>9s} {'100 stud.':>10s} {'vs plain':>9s} {'CPU s/stud':>11s} {'16 cores, 100':>14s}"
    )
    for mode, r in runs.items():
        per_min = args.students / r["seconds"] * 60
        # Dask's worker processes are not this process's children: their CPU time is not counted here
        cpu_per = r["cpu_s"] / args.students if not mode.startswith("dask") else float("nan")
        ratio = f"{base / r['seconds']:.2f}x" if base else "-"
        print(
            f"{mode:17s} {r['seconds']:7.1f} {per_min:9.2f} {100 / per_min:8.1f} m {ratio:>9s} {cpu_per:11.1f}"
            f" {100 * cpu_per / 16 / 60:12.1f} m"
        )
    print(f"targets: class run >= {TARGET_RATIO:g}x plain; 100 students <= {TARGET_MIN_PER_100:g} min on this machine")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"section": args.section, "students": args.students, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
