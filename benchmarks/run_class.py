"""Class-grading throughput: students per minute for one section, 1 and 2 workers, and the cost of isolation.

A class of N pseudo-students (the reference solutions, the blank release and the catalogued
wrong answers, repeated) hands in every notebook of one section. The same class is graded
three times, each in a fresh scratch course:

* ``plain``: ONE ``nbgrader autograde <section>`` for the whole class (nbgrader's own loop; the
  course's config confines every kernel, as for any entry point);
* ``class x1``: ``autograder.ops.classrun.grade_class`` with 1 worker (one nbgrader process per
  student, ledger, limits, sandboxed kernels);
* ``class x2``: the same with 2 workers.

It prints students/minute, the extrapolated time for a 100-student class, and the ratio of
``class x1`` to ``plain`` (the class run's own cost: one nbgrader process per student, ledger). Target (issue "Grading an instructor can trust"): 100 students
of one section in at most 15 minutes on the 2-core development machine. Reported, never asserted.

    python benchmarks/run_class.py [--section s04_1] [--students 8] [--json PATH]
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

from autograder.ops.classrun import grade_class  # noqa: E402
from autograder.ops.nbgrader_run import nbgrader  # noqa: E402
from autograder.authoring.reference import WRONG_ANSWERS  # noqa: E402
from autograder.ops.selftest import solution_sources, make_submission, scratch_course  # noqa: E402
from autograder.authoring.sources import build_all  # noqa: E402

TARGET_MIN_PER_100 = 15.0


def make_class(course: Path, section: str, n_students: int) -> None:
    build_all(course, sections=[section])
    nbgrader(["generate_assignment", section, "--force"], course)
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


def timed(mode: str, section: str, n_students: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        course = scratch_course(Path(tmp) / "course", ROOT / "assignments")
        make_class(course, section, n_students)
        start = time.perf_counter()
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
            results = grade_class(course, [section], workers=int(mode[-1]), progress=False)
            failed = [r for r in results if r.status != "graded"]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} submissions failed: {failed[0].error}")
        return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", default="s04_1")
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    seconds = {}
    for mode in ("plain", "class x1", "class x2"):
        seconds[mode] = timed(mode, args.section, args.students)
        print(f"{mode:9s} {args.students} students of {args.section}: {seconds[mode]:.1f} s", flush=True)
    print(f"\n{'mode':9s} {'students/min':>13s} {'100 students':>13s}  target <= {TARGET_MIN_PER_100:g} min")
    for mode, s in seconds.items():
        per_min = args.students / s * 60
        minutes_100 = 100 / per_min
        verdict = "PASS" if minutes_100 <= TARGET_MIN_PER_100 else "MISS"
        print(f"{mode:9s} {per_min:13.1f} {minutes_100:11.1f} min  {verdict}")
    print(f"class run / plain nbgrader (x1): {seconds['class x1'] / seconds['plain']:.2f}x")
    if args.json:
        args.json.write_text(
            json.dumps({"section": args.section, "students": args.students, "seconds": seconds}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
