"""Start several processes at the same instant and collect what went wrong in each.

Races on creating a shared file (an SQLite database, a cache folder) show only when two processes reach
the creation together: each process here imports everything first, then waits on one barrier, so all of
them act within microseconds of each other. Processes are forked, as Sphinx's parallel readers are.
"""

from __future__ import annotations

import multiprocessing
import traceback
import warnings
from collections.abc import Callable, Sequence


def _run(target: Callable, args: tuple, barrier, errors) -> None:
    try:
        barrier.wait(timeout=60)
        target(*args)
    except BaseException:  # noqa: BLE001 - every failure goes back to the parent
        errors.put(f"{getattr(target, '__name__', target)}{args}: {traceback.format_exc()}")


def failures_at_once(target: Callable, calls: Sequence[tuple], timeout: float = 120) -> list[str]:
    """Run ``target(*args)`` for every ``args`` in ``calls``, each in its own process, all released
    together; return one traceback per process that raised or did not exit cleanly."""
    context = multiprocessing.get_context("fork")
    barrier, errors = context.Barrier(len(calls)), context.Queue()
    processes = [context.Process(target=_run, args=(target, args, barrier, errors)) for args in calls]
    with warnings.catch_warnings():
        # the test process has imported JAX, whose threads the children never touch: they only open files
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        for process in processes:
            process.start()
    for process in processes:
        process.join(timeout=timeout)
    failures = []
    for process in processes:
        if process.is_alive():
            process.kill()
            failures.append(f"process {process.pid} still running after {timeout} s")
        elif process.exitcode != 0:
            failures.append(f"process {process.pid} exited with {process.exitcode}")
    while not errors.empty():
        failures.append(errors.get())
    return failures
