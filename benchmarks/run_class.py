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
* ``class x2 workers launched``: ``class x2`` with each grading worker started as its own interpreter (its own
  nbgrader import and its own kernel zygote) instead of forked from the run's
  :class:`~autograder.ops.worker.WorkerZygote`: what the worker zygote saves (issue 46, item 5);
* ``class x2 + cache``: the same after ``warm-cache`` sealed the section's cache (the warm-up is
  timed apart: an instructor pays it once per release, not per class);
* ``dask x1`` / ``dask x2``: the same jobs on a local Dask cluster of 1 / 2 single-threaded worker
  processes (kernels forked, no cache; the cluster's start is part of the time): how the Dask path scales
  from one worker to two;
* ``floor``: no grader at all. One process imports what a grading kernel's zygote imports
  (:data:`autograder.confine.zygote.PRELOAD`), then forks once per student; the child executes exactly the
  code cells grading runs of each of the student's notebooks (the source's cells with the student's solution
  cells in place, hidden tests included, ``skip-in-grading`` cells left out), in order, each notebook in a
  fresh namespace. Its CPU, counted from the first fork, is the cost of the students' own code: what no
  grader can avoid (:mod:`floor`). Issue 31's overhead is ``class x2`` CPU over ``floor`` CPU (target <= 1.2x);
* ``floor, every cell``: the same with the cells grading skips run too (public checks, exploration and
  plots): the floor before those cells were skipped;
* ``floor/notebook``: the floor with each notebook forked apart, as grading must run them (what the
  notebooks of one student share, compiled functions above all, is paid once per notebook).

With ``--twice`` every mode also grades a class twice as large, which splits its CPU into a fixed start-up
part and a part per extra student (what a class of 100 pays per student).

It prints seconds, students/minute, the extrapolated time for 100 students, the ratio of each mode
to ``plain launched`` and to ``plain``, and CPU seconds per submission: the CPU of this process and of every
process below it, counted per process (``getrusage``), so other load on the machine does not enter it. The
benchmark is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process whose parent ended first (a worker
or kernel left when its worker zygote or kernel zygote exits) comes to it and is waited for, so its CPU is counted too.
The machine's busy time over the mode (``/proc/stat``, which assumes an otherwise idle machine) is kept
in the JSON as ``machine_cpu_s``. From the CPU the time of a 100-student class on 16 cores is estimated
(16 workers, CPU-bound, no contention).
Targets (issue 14): class run >= 4x plain; 100 students of s04_1 <= 10 min. Reported, never asserted.

    python benchmarks/run_class.py [--section s04_1] [--students 6] [--modes ...] [--twice] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.ops.classrun import grade_class, phase_lines  # noqa: E402
from autograder.ops.worker import WorkerZygote  # noqa: E402
from autograder.ops.warm_cache import warm_cache  # noqa: E402
from autograder.authoring.reference import WRONG_ANSWERS  # noqa: E402
from autograder.ops.selftest import make_submission, release_section, scratch_course, solution_sources  # noqa: E402

TARGET_MIN_PER_100 = 10.0
TARGET_RATIO = 4.0
MODES = (
    "plain launched",
    "plain",
    "class x2 launched",
    "class x2",
    "class x2 workers launched",
    "class x2 + cache",
    "dask x1",
    "dask x2",
    "floor",
    "floor, every cell",
    "floor/notebook",
)
TARGET_OVERHEAD = 1.2  # class x2 CPU / floor CPU
LAUNCHED = ["--SafeExecute.fork_kernels=False"]


class _NoWorkerZygote(WorkerZygote):
    """The run's WorkerZygote, never started: every worker asks it for a fork, is refused, and launches itself
    (GradingWorker's own fallback), so each worker imports nbgrader and starts a kernel zygote of its own. A
    subclass, so that it keeps every method the executor calls (a stand-in without ``start`` broke this mode
    when the run's own thread began to start the worker zygote)."""

    def start(self) -> None:
        pass


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


_PR_SET_CHILD_SUBREAPER = 36


def _process_cpu() -> float:
    """CPU seconds of this process and of every process below it that has been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _children() -> list[int]:
    pids = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def _wait_for_descendants(timeout_s: float = 60.0) -> None:
    """Wait until every process a mode left below this one has ended and been reaped (as a subreaper, orphans
    come here), so that its CPU is in ``RUSAGE_CHILDREN``. ``multiprocessing``'s helper processes (Dask's
    resource tracker) live as long as this process and are left alone."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = []
        for pid in _children():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"multiprocessing" not in cmdline:
                left.append(pid)
        for pid in left:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0 and time.monotonic() > deadline:
                    print(f"  (process {pid} still running after the mode; its CPU so far is not counted)")
                    return
            except ChildProcessError:
                pass
        if not left:
            return
        time.sleep(0.05)


def floor_cells(course: Path, section: str, student: str, every_cell: bool) -> list[tuple[str, list[tuple[str, str]]]]:
    """``[(notebook, [(label, source), ...]), ...]``: the code cells grading runs of ``student``'s notebooks,
    as nbgrader runs them (locked and graded cells from the source, solution cells from the submission);
    ``every_cell``: the cells grading skips as well (public checks, exploration, plots)."""
    from autograder.confine.execute import skipped_when_grading

    out = []
    for submitted in sorted((course / "submitted" / student / section).glob("*.ipynb")):
        source = nbformat.read(course / "source" / section / submitted.name, as_version=4)
        answers = solution_sources(nbformat.read(submitted, as_version=4))
        cells = []
        for i, cell in enumerate(source.cells):
            if cell.cell_type != "code" or (skipped_when_grading(cell) and not every_cell):
                continue
            meta = cell.metadata.get("nbgrader", {})
            gid = meta.get("grade_id", f"cell {i}")
            cells.append((gid, answers.get(gid, cell.source) if meta.get("solution") else cell.source))
        out.append((submitted.stem, cells))
    return out


def run_floor(course: Path, section: str, tmp: Path, every_cell: bool, per_notebook: bool) -> dict:
    """The class's own code, with no grader: :mod:`floor` in a fresh process with a grading kernel's environment."""
    from autograder.confine.launcher import kernel_environment

    students = sorted(p.name for p in (course / "submitted").iterdir())
    work = {student: floor_cells(course, section, student, every_cell) for student in students}
    (tmp / "floor.json").write_text(json.dumps(work), encoding="utf-8")
    scratch = tmp / "floor-scratch"
    scratch.mkdir()
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("floor.py")), str(tmp / "floor.json")]
        + (["--per-notebook"] if per_notebook else []),
        cwd=scratch,
        env=kernel_environment(scratch),
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=7200,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    print(f"  floor: {result['errors']} cells failed (blank and wrong answers fail as in grading)", flush=True)
    return {**result, "warm_s": 0.0}


@contextlib.contextmanager
def _worker_zygote_replaced(replace: bool):
    from autograder.ops import executors

    original = executors.WorkerZygote
    if replace:
        executors.WorkerZygote = _NoWorkerZygote
        logging.getLogger("autograder.worker").setLevel(logging.ERROR)  # the refused fork is this mode's point
    try:
        yield
    finally:
        executors.WorkerZygote = original


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
        if mode.startswith("floor"):
            every_cell, per_notebook = mode.endswith("every cell"), mode.endswith("/notebook")
            return run_floor(course, section, Path(tmp), every_cell, per_notebook)
        _wait_for_descendants()
        cpu0, machine0, start = _process_cpu(), _machine_cpu(), time.perf_counter()
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
            with _worker_zygote_replaced(mode.endswith("workers launched")):
                results = grade_class(
                    course, [section], workers=workers, progress=False, scheduler=scheduler, extra_args=extra
                )
            failed = [r for r in results if r.status != "graded"]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} submissions failed: {failed[0].error}")
            queue = sum(r.phases.get("queue", 0.0) for r in results) / len(results)
            print(f"  {mode}: mean queue {queue:.1f} s; " + " ".join(phase_lines(results)), flush=True)
        seconds = time.perf_counter() - start
        _wait_for_descendants()
        return {
            "seconds": seconds,
            "cpu_s": _process_cpu() - cpu0,
            "machine_cpu_s": _machine_cpu() - machine0,
            "warm_s": warm_s,
        }


def floor_pairs(modes) -> list[tuple[str, str]]:
    """``(mode, floor mode)`` for every grading mode against every floor mode among ``modes``."""
    floors = [m for m in modes if m.startswith("floor")]
    return [(mode, floor) for floor in floors for mode in modes if not mode.startswith("floor")]


def marginal_costs(args, runs: dict) -> dict:
    """Grade 2N students in every mode; print each mode's CPU split into fixed start-up (workers, zygotes,
    the floor's first compilations) and CPU per extra student, and the overhead on the latter alone: what
    a class of 100 pays per student. Returns the 2N runs."""
    n = args.students
    double = {}
    for mode in runs:
        double[mode] = timed(mode, args.section, 2 * n)
        print(f"{mode:17s} {2 * n} students of {args.section}: {double[mode]['seconds']:.1f} s", flush=True)
    print(f"\n{'mode':17s} {f'CPU {n}':>8s} {f'CPU {2 * n}':>8s} {'fixed s':>8s} {'s/extra student':>16s}")
    extra = {}
    for mode in runs:
        one, two = runs[mode]["cpu_s"], double[mode]["cpu_s"]
        extra[mode] = (two - one) / n
        print(f"{mode:17s} {one:8.1f} {two:8.1f} {2 * one - two:8.1f} {extra[mode]:16.2f}")
    for mode, floor_mode in floor_pairs(extra):
        print(f"overhead per extra student, {mode} / {floor_mode}: {extra[mode] / extra[floor_mode]:.2f}x")
    return double


def interleaved(args) -> int:
    """``--repeat``: every mode ``args.repeat`` times, interleaved; CPU and wall per run, medians, and each
    round's CPU difference to the first mode (paired: the rounds share the machine's state)."""
    runs = {mode: [] for mode in args.modes}
    for k in range(args.repeat):
        for mode in args.modes if k % 2 == 0 else args.modes[::-1]:
            runs[mode].append(timed(mode, args.section, args.students))
            r = runs[mode][-1]
            print(f"round {k + 1} {mode:26s} {r['seconds']:7.1f} s  CPU {r['cpu_s']:7.1f} s", flush=True)
    first = args.modes[0]
    print(f"\n{args.students} students of {args.section}, {args.repeat} interleaved rounds")
    print(f"{'mode':26s} {'CPU s per round':40s} {'median':>7s} {'wall median':>11s} {'CPU - ' + first:>24s}")
    for mode, rs in runs.items():
        cpu = [r["cpu_s"] for r in rs]
        diffs = [r["cpu_s"] - f["cpu_s"] for r, f in zip(rs, runs[first])]
        print(
            f"{mode:26s} {' '.join(f'{c:.1f}' for c in cpu):40s} {statistics.median(cpu):7.1f}"
            f" {statistics.median(r['seconds'] for r in rs):11.1f}"
            f" {' '.join(f'{d:+.1f}' for d in diffs):>24s}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"section": args.section, "students": args.students, "rounds": runs}, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", default="s04_1")
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--twice",
        action="store_true",
        help="also grade a class twice as large in every mode: fixed start-up CPU and CPU per extra student",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="grade the class this many times in every mode, interleaved (the modes' order reversed every other "
        "round), and print each mode's runs, median and the paired CPU differences to the first mode",
    )
    args = parser.parse_args(argv)
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans below come here: their CPU counts
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores", flush=True)
    if args.repeat > 1:
        return interleaved(args)
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
    for mode, floor_mode in floor_pairs(runs):
        cpu, floor = runs[mode]["cpu_s"], runs[floor_mode]["cpu_s"]
        print(f"overhead {mode} / {floor_mode}: CPU {cpu:.1f} s / {floor:.1f} s = {cpu / floor:.2f}x")
    if "floor" in runs:
        print(f"target: class x2 CPU <= {TARGET_OVERHEAD:g}x floor")
    if args.twice:
        runs = {"n": runs, "2n": marginal_costs(args, runs)}
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"section": args.section, "students": args.students, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
