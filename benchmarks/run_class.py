"""Class-grading throughput: one section, the same class graded several ways side by side in one run.

A class of N pseudo-students (the reference solutions, the blank release and the catalogued
wrong answers, repeated) hands in every notebook of one section. Each mode grades it in a fresh
scratch course (sandbox on, as for any entry point):

* ``plain launched``: ONE ``nbgrader autograde <section>`` for the whole class (nbgrader's own loop),
  every kernel started from nothing (``--SafeExecute.fork_kernels=False``: the course before kernels
  were forked, and the baseline of issue 14);
* ``plain``: the same with the course's default, kernels forked from a warm zygote
  (:mod:`autograder.confine.zygote`);
* ``class x2 launched``: ``grade_class`` with 2 long-lived grading workers, kernels started from nothing;
* ``class x2``: the same, kernels forked (the default);
* ``class x2 + cache``: the same after ``warm-cache`` sealed the section's cache (the warm-up is
  timed apart: an instructor pays it once per release, not per class);
* ``dask x1`` / ``dask x2``: the same jobs on a local Dask cluster of 1 / 2 single-threaded worker
  processes (kernels forked, no cache; the cluster's start is part of the time): how the Dask path scales
  from one worker to two.

It prints seconds, students/minute, the extrapolated time for 100 students, the ratio of each mode
to ``plain launched`` and to ``plain``, and CPU seconds per submission: the whole machine's busy time
over the mode (``/proc/stat``), so it counts every process (forked kernels are the zygote's children,
Dask's workers nobody's here) and assumes an otherwise idle machine. From it the time of a 100-student
class on 16 cores is estimated (16 workers, CPU-bound, no contention).
Targets (issue 14): class run >= 4x plain; 100 students of s04_1 <= 10 min. Reported, never asserted.

    python benchmarks/run_class.py [--section s04_1] [--students 6] [--modes ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
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
MODES = ("plain launched", "plain", "class x2 launched", "class x2", "class x2 + cache", "dask x1", "dask x2")
LAUNCHED = ["--SafeExecute.fork_kernels=False"]


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


def _machine_cpu() -> float:
    """CPU seconds the whole machine has been busy (user, nice, system, irq, softirq, steal) since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + sum(fields[5:8])
    return busy / os.sysconf("SC_CLK_TCK")


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
        extra = LAUNCHED if mode.endswith("launched") else []
        cpu0, start = _machine_cpu(), time.perf_counter()
        if mode.startswith("plain"):
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            subprocess.run(
                [str(Path(sys.executable).parent / "nbgrader"), "autograde", section, "--force", *extra],
                cwd=course,
                env=env,
                check=True,
                capture_output=True,
                timeout=7200,
            )
        else:
            scheduler = "local" if mode.startswith("dask") else None
            workers = int(mode.split(" x")[1][0])
            results = grade_class(
                course, [section], workers=workers, progress=False, scheduler=scheduler, extra_args=extra
            )
            failed = [r for r in results if r.status != "graded"]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} submissions failed: {failed[0].error}")
            queue = sum(r.phases.get("queue", 0.0) for r in results) / len(results)
            print(f"  {mode}: mean queue {queue:.1f} s; " + " ".join(phase_lines(results)), flush=True)
        return {"seconds": time.perf_counter() - start, "cpu_s": _machine_cpu() - cpu0, "warm_s": warm_s}


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
    launched, plain = (runs.get(m, {}).get("seconds") for m in ("plain launched", "plain"))
    print(
        f"\n{'mode':17s} {'s':>7s} {'stud/min':>9s} {'100 stud.':>10s} {'vs launched':>12s} {'vs plain':>9s}"
        f" {'CPU s/stud':>11s} {'16 cores, 100':>14s}"
    )
    for mode, r in runs.items():
        per_min = args.students / r["seconds"] * 60
        cpu_per = r["cpu_s"] / args.students
        ratios = [f"{base / r['seconds']:.2f}x" if base else "-" for base in (launched, plain)]
        print(
            f"{mode:17s} {r['seconds']:7.1f} {per_min:9.2f} {100 / per_min:8.1f} m {ratios[0]:>12s} {ratios[1]:>9s}"
            f" {cpu_per:11.1f} {100 * cpu_per / 16 / 60:12.1f} m"
        )
    print(f"targets: class run >= {TARGET_RATIO:g}x plain; 100 students <= {TARGET_MIN_PER_100:g} min on this machine")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"section": args.section, "students": args.students, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
