"""Cells that grading does not run (autograder.confine.execute.SKIP_TAG): the right ones, and safely.

Grading skips the public checks, the self-checks and the exploration and plot cells, so that a student's
time budget pays for the answer and the graded cells only. That is safe only if no cell that still runs
reads a name that only a skipped cell defines; and it is complete only if every ungraded cell that still
runs is needed by a later one. Both are read from the source notebooks' code (AST), so a new exploration
cell that forgets the tag, or a tagged cell that a graded cell depends on, fails here, not in a term.
"""

from __future__ import annotations

import ast
import builtins

import jupytext
import pytest
from nbformat.notebooknode import NotebookNode

from autograder.authoring.sources import complete_metadata, source_notebooks
from autograder.confine.execute import SKIP_TAG, skipped_when_grading

SOURCES = source_notebooks()
#: cells that always run and need no later reader: the student's answers, the graded cells, the setup
ALWAYS_NEEDED = ("setup", "task", "tables")


def _code(cell) -> ast.Module:
    # IPython magics and shell lines are not Python; none of the sources should need them
    lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _bound(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _read(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _code_cells(md):
    nb = complete_metadata(jupytext.read(md), md.name)
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("md", SOURCES, ids=[p.stem for p in SOURCES])
def test_no_cell_that_runs_needs_a_skipped_one(md):
    only_skipped: dict[str, int] = {}  # name -> index of the skipped cell that defines it
    for i, cell in enumerate(_code_cells(md)):
        tree = _code(cell)
        if skipped_when_grading(cell):
            only_skipped.update(dict.fromkeys(_bound(tree), i))
            continue
        # a name the cell binds itself (a loop variable, a local) is its own, wherever it is read
        needs = {n: only_skipped[n] for n in _read(tree) - _bound(tree) if n in only_skipped}
        assert not needs, f"{md.name}: code cell {i} runs when grading but reads {needs} (name: skipped cell)"
        for name in _bound(tree):
            only_skipped.pop(name, None)


@pytest.mark.parametrize("md", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_ungraded_cell_that_runs_is_needed(md):
    cells = _code_cells(md)
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if skipped_when_grading(cell) or meta.get("grade") or meta.get("solution"):
            continue
        if meta.get("grade_id") in ALWAYS_NEEDED:
            continue
        assert meta.get("grade_id") not in ("public_checks", "selfcheck"), f"{md.name}: {meta['grade_id']} runs"
        running_later = [_read(_code(c)) for c in cells[i + 1 :] if not skipped_when_grading(c)]
        readers = set().union(*running_later) if running_later else set()
        assert _bound(_code(cell)) & readers, (
            f"{md.name}: code cell {i} runs when grading but nothing graded needs it; tag it {SKIP_TAG!r}:\n"
            + cell.source[:200]
        )


def _cell(tags=(), **nbgrader) -> NotebookNode:
    meta = {"tags": list(tags)}
    if nbgrader:
        meta["nbgrader"] = nbgrader
    return NotebookNode(cell_type="code", source="x = 1", metadata=meta, outputs=[])


def test_a_tag_never_skips_a_graded_cell():
    assert skipped_when_grading(_cell([SKIP_TAG]))
    assert skipped_when_grading(_cell([SKIP_TAG], grade_id="selfcheck", locked=True))
    assert skipped_when_grading(_cell([SKIP_TAG], grade_id="x_answer", solution=True))  # the student's loss
    assert not skipped_when_grading(_cell())
    # a submission that tags its graded cells gains nothing: they run; tagging an answer only loses it
    # (tests/test_hostile.py)
    assert not skipped_when_grading(_cell([SKIP_TAG], grade_id="test_x", grade=True, points=3))
    markdown = NotebookNode(cell_type="markdown", source="", metadata={"tags": [SKIP_TAG]})
    assert not skipped_when_grading(markdown)


def test_builtins_are_not_mistaken_for_notebook_names():
    # the AST reading above counts only names a cell binds; a builtin read (print, range) binds nothing
    assert not _bound(ast.parse("print(range(3))")) & set(dir(builtins))
