"""Build the book with Jupyter Book 1.x, executing several pages at a time.

``python book/build.py [--jobs N] [jupyter-book build options]`` is ``jupyter-book build .`` with the
same options (``make book``, ``make pdf`` and the test suite's book fixture all call it), plus two
changes, both to the read phase, where myst-nb executes each page:

* Sphinx runs with ``--jobs`` processes (default: one per CPU). Jupyter Book's command line has no such
  option and always reads one page after the other; executing the pages is most of a clean build.
* Sphinx's parallel read hands each process a fixed slice of the sorted page names (on this book, two
  slices of nine pages and one of one), so one process got most of the slow pages. Here every page is
  its own task, and the pages that run the most code start first: a process that finishes takes the
  next page, and the last page to start is a short one.

Everything else (configuration, the execution cache, warnings as errors) is Jupyter Book's own. The last line
says what the build cost: wall time and CPU time, the kernels included.
"""

import argparse
import functools
import os
import re
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import sphinx.builders

ROOT = Path(__file__).resolve().parents[1]
_CODE_CELL = re.compile(r"^```\{code-cell\}.*?^```", re.DOTALL | re.MULTILINE)


def code_size(docname: str) -> int:
    """Characters of executable code on a page: a static stand-in for how long it takes to run."""
    source = ROOT / f"{docname}.md"
    if not source.is_file():
        return 0
    return sum(len(cell.group()) for cell in _CODE_CELL.finditer(source.read_text(encoding="utf-8")))


def one_page_per_task(docnames: Sequence[str], nproc: int, maxbatch: int = 10) -> list[list[str]]:
    """Replacement for ``sphinx.util.parallel.make_chunks``: one page per task, most code first."""
    return [[name] for name in sorted(docnames, key=code_size, reverse=True)]


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pages executed at a time")
    ours, theirs = parser.parse_known_args(argv)
    import jupyter_book.sphinx
    from jupyter_book.cli.main import main as jupyter_book_cli

    # Sphinx 7.4 (pinned) reads and writes its parallel chunks through this module-level name.
    if not hasattr(sphinx.builders, "make_chunks"):
        raise SystemExit("book/build.py: sphinx.builders.make_chunks is gone in this Sphinx; update the script")
    sphinx.builders.make_chunks = one_page_per_task  # type: ignore[assignment]
    # jupyter-book's `build` command imports build_sphinx from here when it runs, and passes no jobs.
    jupyter_book.sphinx.build_sphinx = functools.partial(jupyter_book.sphinx.build_sphinx, jobs=max(1, ours.jobs))
    start = time.perf_counter()
    try:
        jupyter_book_cli.main(["build", str(ROOT), *theirs], prog_name="book/build.py")
    finally:  # click ends the command with SystemExit, success or not
        print(f"book/build.py: {elapsed(start)}", flush=True)


def elapsed(start: float) -> str:
    """Wall time since ``start`` and the CPU time of this process and of every process it waited for (the
    Sphinx readers and the pages' kernels): what a clean build or a one-page rebuild cost."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return f"{time.perf_counter() - start:.0f} s wall, {cpu:.0f} CPU s (with the page kernels and readers)"


if __name__ == "__main__":
    main(sys.argv[1:])
