"""A page's claims about random draws hold at other seeds, not only at the one the book is built with.

A page that reads its seed from ``S04_PAGE_SEED`` (default 0, the book's) derives every PRNG key of the
listed section from it, and its hidden ``remove-cell`` asserts check what the prose says: analytic
probabilities and distributions over replicates, never one lucky draw. Here each listed section runs
again, after its page's setup cells (the code above the page's first ``## `` heading), under two other
seeds, in a fresh interpreter; every assert must still pass and every value the section's prose
``{glue:text}``-reads must still be glued. ``glue`` is stubbed and figures go to the Agg backend.

To cover another section, give its page the seed (``S04_PAGE_SEED``) and add ``(page, heading)`` to
:data:`SECTIONS`.
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

# one worker runs the seeds in turn, so the second reuses the first one's compiled programs (jax_cache)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("page_seeds")]

BOOK = Path(__file__).resolve().parents[1] / "book"
#: (page under book/, its section heading line as written in the source)
SECTIONS = [("s04_4b.md", "## S04.4.5 FoBG 偏差的直觉")]
#: seeds other than the book's 0
SEEDS = (1, 2)
GLUE_READ = re.compile(r"\{glue(?::text|:)?\}`([A-Za-z0-9_]+)")

#: runs the cells in one namespace with glue stubbed; prints the glued names as JSON
RUNNER = """
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import myst_nb
glued = {}
myst_nb.glue = lambda name, value, display=True: glued.__setitem__(name, repr(value))
ns = {"__name__": "__main__"}
for where, source in json.load(open(sys.argv[1], encoding="utf-8")):
    exec(compile(source, f"<{where}>", "exec"), ns)
    plt.close("all")
print("GLUED=" + json.dumps(sorted(glued)))
"""


def section_cells(page: str, heading: str) -> tuple[list[tuple[str, str]], str]:
    """``([(label, source)], prose)``: the page's setup cells then the section's code cells, and the section's prose."""
    cells, prose, where = [], [], "setup"  # "setup" until the page's first `## `, then "in" or "out" of the section
    for index, cell in enumerate(jupytext.read(BOOK / page).cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    where = "in" if line.strip() == heading.strip() else "out"
                if where == "in":
                    prose.append(line)
        elif cell.cell_type == "code" and where in ("setup", "in"):
            cells.append((f"{page} cell {index}", cell.source))
    assert prose, f"{page}: no section headed {heading!r}"
    return cells, "\n".join(prose)


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """A compilation cache the seeds share: most of the pages' programs take their keys as arguments, so
    the second seed's run skips most of the compiling."""
    path = tmp_path_factory.mktemp("jax-cache")
    return {"JAX_COMPILATION_CACHE_DIR": str(path), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("page", "heading"), SECTIONS, ids=[f"{p}:{h.split()[1]}" for p, h in SECTIONS])
def test_section_claims_hold_at_another_seed(page, heading, seed, tmp_path, jax_cache):
    cells, prose = section_cells(page, heading)
    assert any("S04_PAGE_SEED" in source for _, source in cells), f"{page} does not read S04_PAGE_SEED"
    cells_file = tmp_path / "cells.json"
    cells_file.write_text(json.dumps(cells), encoding="utf-8")
    env = {**os.environ, "S04_PAGE_SEED": str(seed), "MPLBACKEND": "Agg", **jax_cache}
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, str(cells_file)], cwd=BOOK, env=env, capture_output=True, text=True, timeout=600
    )
    elapsed = time.monotonic() - start
    assert run.returncode == 0, f"{heading} at S04_PAGE_SEED={seed} ({elapsed:.0f} s):\n{run.stderr[-4000:]}"
    glued = set(json.loads(run.stdout.rsplit("GLUED=", 1)[1]))
    missing = set(GLUE_READ.findall(prose)) - glued
    assert not missing, f"{heading} at S04_PAGE_SEED={seed}: the prose reads values no cell glued: {sorted(missing)}"
    print(f"{page} {heading} at seed {seed}: {elapsed:.1f} s")
