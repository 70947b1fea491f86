"""The floor of grading: the students' own code, run with no grader around it (``run_class.py``'s ``floor`` mode).

``python benchmarks/floor.py WORK.json [--per-notebook]`` runs in a grading kernel's environment
(:func:`autograder.confine.launcher.kernel_environment`). It imports what a grading kernel's zygote
imports (:data:`autograder.confine.zygote.PRELOAD`) and nothing else: a process that has compiled anything
with XLA holds thread pools that do not survive ``fork``, so the cells to run come in as JSON, prepared by
the parent. It then forks once per student (``--per-notebook``: once per notebook, as grading isolates
notebooks); the child executes each notebook's cells in order, each notebook in a fresh namespace, output
discarded. It prints one JSON line: ``{"cpu_s", "seconds", "errors"}``, CPU of
this process tree (children included) from the first fork to the last child's end.

WORK.json: ``{student: [[notebook, [[label, source], ...]], ...]}``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import io
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.confine.zygote import PRELOAD  # noqa: E402

STUDENT_TIMEOUT_S = 900  # a hung child is reported and ended, never waited for forever


def _student(notebooks: list) -> int:
    """In the forked child: run every cell; the number of cells that raised (blank and wrong answers do)."""
    faulthandler.dump_traceback_later(STUDENT_TIMEOUT_S)  # where it hangs, on the real stderr
    signal.alarm(STUDENT_TIMEOUT_S + 5)  # then SIGALRM ends it (nothing in Python handles that signal)
    failed = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for notebook, cells in notebooks:
            namespace: dict = {"__name__": "__main__"}
            for label, source in cells:
                try:
                    exec(compile(source, f"{notebook}:{label}", "exec"), namespace)
                except BaseException:  # noqa: BLE001 - a wrong or blank answer fails, as in grading
                    failed += 1
    return failed


def _run(notebooks: list) -> int:
    """Fork, run ``notebooks`` in the child, wait: the number of cells that raised."""
    pid = os.fork()
    if pid == 0:
        os._exit(min(_student(notebooks), 255))
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code < 0:
        raise SystemExit(f"floor: a child ended by signal {-code} (hung past {STUDENT_TIMEOUT_S} s?)")
    return code


def main(work_file: str, per_notebook: bool) -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    work = json.loads(Path(work_file).read_text(encoding="utf-8"))
    errors = 0
    cpu0, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    for notebooks in work.values():
        if per_notebook:  # each notebook in a process of its own, as grading isolates them
            errors += sum(_run([notebook]) for notebook in notebooks)
        else:  # the student's notebooks one after another in one process: what they share is paid once
            errors += _run(notebooks)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "seconds": time.perf_counter() - start, "errors": errors}))


if __name__ == "__main__":
    main(sys.argv[1], per_notebook="--per-notebook" in sys.argv[2:])
