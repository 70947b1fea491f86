"""A page's claims about random draws hold at other seeds, not only at the one the book is built with.

A page that reads its seed from ``S04_PAGE_SEED`` (default 0, the book's) derives every PRNG key of the
listed sections from it, and its hidden ``remove-cell`` asserts check what the prose says: analytic
probabilities and distributions over replicates, never one lucky draw. Here each listed entry runs
again, its page's setup cells (the code above the page's first ``## `` heading) and then the code cells
of the entry's sections in page order, under two other seeds; every assert must still pass and every value
those sections' prose ``{glue:text}``-reads must still be glued. ``glue`` is stubbed and figures go to the Agg
backend. One fresh interpreter runs an entry at both seeds, each seed in a fresh namespace, one after the other
as a reader reruns a page in one kernel: the second seed reuses the library's compiled programs in memory
(measured on the six entries, cache warm: 104-106 CPU s in two interpreters each, 78-89 s in one).

To cover another section, give its page the seed (``S04_PAGE_SEED``) and add ``(page, heading)`` to
:data:`SECTIONS`; a section that uses what an earlier one defines is listed with it, ``(page, heading,
later_heading)``, and runs in the same interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import pytest

# one worker runs the entries in turn, so only one worker waits for the book build (jax_cache); the book tier
# because a run that builds the book anyway may build it here
pytestmark = [pytest.mark.slow, pytest.mark.book, pytest.mark.xdist_group("page_seeds")]

BOOK = Path(__file__).resolve().parents[1] / "book"
#: (page under book/, then one or more of its section heading lines as written in the source)
SECTIONS = [
    ("s04_4b.md", "## S04.4.5 FoBG 偏差的直觉"),
    ("s04_1.md", "## S04.1.2 如果不用导数会怎样"),
    ("s04_6.md", "## S04.6.3 为什么还要手推解析导数", "## S04.6.4 有限差分最该用在哪里：检查梯度"),
    ("s04_8.md", "## S04.8.1 梯度检查的最低要求", "## S04.8.2 中心差分的步长该取多大", "## S04.8.3 动手写方向导数检查"),
    ("s04_7b.md", "## S04.7.4 混沌：精确的梯度也可能没有用"),
    ("s04_7b.md", "## S04.7.5 SHAC 的短时域思想"),
]
#: seeds other than the book's 0
SEEDS = (1, 2)
GLUE_READ = re.compile(r"\{glue(?::text|:)?\}`([A-Za-z0-9_]+)")

#: runs the cells at each seed given, each seed in a fresh namespace with glue stubbed; prints per seed the glued
#: names or the traceback that stopped it, as JSON
RUNNER = """
import json, os, sys, traceback
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import myst_nb
cells = json.load(open(sys.argv[1], encoding="utf-8"))
results = {}
for seed in sys.argv[2:]:
    os.environ["S04_PAGE_SEED"] = seed  # the page's setup cell reads it
    glued = {}
    myst_nb.glue = lambda name, value, display=True: glued.__setitem__(name, repr(value))
    ns = {"__name__": "__main__"}
    try:
        for where, source in cells:
            exec(compile(source, f"<{where}>", "exec"), ns)
            plt.close("all")
        results[seed] = {"glued": sorted(glued)}
    except Exception:
        results[seed] = {"error": traceback.format_exc()[-4000:]}
    plt.close("all")
print("RESULTS=" + json.dumps(results))
"""


def section_cells(page: str, headings: tuple[str, ...]) -> tuple[list[tuple[str, str]], str]:
    """``([(label, source)], prose)``: the page's setup cells then the sections' code cells, and the sections' prose."""
    wanted = {heading.strip() for heading in headings}
    cells, prose, found, where = [], [], set(), "setup"  # "setup" until the first `## `, then "in" or "out"
    for index, cell in enumerate(jupytext.read(BOOK / page).cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    where = "in" if line.strip() in wanted else "out"
                    found.add(line.strip())
                if where == "in":
                    prose.append(line)
        elif cell.cell_type == "code" and where in ("setup", "in"):
            cells.append((f"{page} cell {index}", cell.source))
    assert wanted <= found, f"{page}: no section headed {sorted(wanted - found)}"
    return cells, "\n".join(prose)


@pytest.fixture(scope="module")
def jax_cache(request, page_compilation_cache):
    """The run's compilation cache (tests/conftest.py). Where this run builds the book anyway, the reruns come
    after the build and load most of their page's programs from what it compiled at seed 0 (S04.4.5 at seed 1:
    24.7 CPU s cold, 7.6 s after seed 0); the second seed finds them in memory either way."""
    if any("built_book" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("built_book")  # built once per run: by this worker or the one this waits for
    return page_compilation_cache


@pytest.mark.parametrize("entry", SECTIONS, ids=[f"{p}:{'+'.join(h.split()[1] for h in hs)}" for p, *hs in SECTIONS])
def test_section_claims_hold_at_other_seeds(entry, tmp_path, jax_cache):
    page, *headings = entry
    heading = " + ".join(h.split()[1] for h in headings)
    cells, prose = section_cells(page, tuple(headings))
    assert any("S04_PAGE_SEED" in source for _, source in cells), f"{page} does not read S04_PAGE_SEED"
    cells_file = tmp_path / "cells.json"
    cells_file.write_text(json.dumps(cells), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", **jax_cache}  # the runner sets S04_PAGE_SEED for each seed
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, str(cells_file), *map(str, SEEDS)],
        cwd=BOOK,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    elapsed = time.monotonic() - start
    assert run.returncode == 0 and "RESULTS=" in run.stdout, f"{heading} ({elapsed:.0f} s):\n{run.stderr[-4000:]}"
    results = json.loads(run.stdout.rsplit("RESULTS=", 1)[1])
    assert sorted(results) == sorted(map(str, SEEDS))
    read = set(GLUE_READ.findall(prose))
    problems = []
    for seed, result in results.items():
        if "error" in result:
            problems.append(f"{heading} at S04_PAGE_SEED={seed}:\n{result['error']}")
        elif missing := sorted(read - set(result["glued"])):
            problems.append(f"{heading} at S04_PAGE_SEED={seed}: the prose reads values no cell glued: {missing}")
    assert not problems, "\n\n".join(problems)
    print(f"{page} {heading} at seeds {', '.join(map(str, SEEDS))}: {elapsed:.1f} s")
