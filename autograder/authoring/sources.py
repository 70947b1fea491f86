"""Build nbgrader source notebooks from the MyST markdown sources.

``assignments/source/<section>/<exercise>.md`` is the file authors edit (readable diffs);
this module writes ``<exercise>.ipynb`` beside it with jupytext and completes each
cell's nbgrader metadata with nbgrader's defaults, so a source only states what
matters (``grade_id``, ``solution``, ``grade``, ``points``, ``locked``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import jupytext
import nbformat

from autograder.course.course import Course
from autograder.verdict.preprocessors import GRADE_CALL  # how a graded cell names its check

COURSE_DIR = Path(__file__).resolve().parents[2] / "assignments"

_DEFAULTS = {"grade": False, "locked": False, "schema_version": 3, "solution": False, "task": False}


def _complete(meta: dict, where: str) -> dict:
    full = {**_DEFAULTS, **meta}
    if "grade_id" not in full:
        raise ValueError(f"{where}: nbgrader metadata needs a grade_id")
    if full["grade"] and "points" not in full:
        raise ValueError(f"{where}: graded cell {full['grade_id']} needs points")
    if full["grade"] or full["solution"]:
        full["locked"] = False if full["solution"] else full["locked"]
    return full


def complete_metadata(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """``nb`` (read from the source ``name``) with every cell's nbgrader metadata completed, in place."""
    seen = set()
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        cell.metadata["nbgrader"] = _complete(dict(meta), f"{name} cell {i}")
        gid = cell.metadata["nbgrader"]["grade_id"]
        if gid in seen:
            raise ValueError(f"{name}: duplicate grade_id {gid}")
        seen.add(gid)
    nb.metadata.pop("jupytext", None)
    return nb


def build_notebook(md_path: Path) -> Path:
    """Convert one source ``.md`` into the ``.ipynb`` nbgrader reads; returns its path."""
    out = md_path.with_suffix(".ipynb")
    nbformat.write(complete_metadata(jupytext.read(md_path), md_path.name), out)
    return out


def source_notebooks(course: Course | Path = COURSE_DIR, sections=None) -> list[Path]:
    """All source ``.md`` files, optionally only those of the given sections (assignments): in each section's
    nbgrader source folder, where the built ``.ipynb`` must be for nbgrader to read it."""
    folders = Course.of(course).source_folders()
    return sorted(
        p for section, folder in folders.items() if sections is None or section in sections for p in folder.glob("*.md")
    )


def build_all(course: Course | Path = COURSE_DIR, sections=None) -> list[Path]:
    return [build_notebook(p) for p in source_notebooks(course, sections)]


# --- reading a source notebook: what exercise specs refer to instead of repeating it ---------------

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def source_path(exercise: str, course: Course | Path | None = None) -> Path:
    """``assignments/source/<section>/<exercise>.md``."""
    paths = [path for path in source_notebooks(course or COURSE_DIR) if path.stem == exercise]
    if len(paths) != 1:
        raise KeyError(f"no single source notebook for exercise {exercise!r}: {paths}")
    return paths[0]


@functools.lru_cache(maxsize=None)
def _cells(path: Path) -> dict[str, tuple[str, dict]]:
    """``{grade_id: (source, nbgrader metadata and the cell type)}`` of one source ``.md``."""
    nb = jupytext.read(path)
    return {
        cell.metadata["nbgrader"]["grade_id"]: (cell.source, {**cell.metadata["nbgrader"], "cell_type": cell.cell_type})
        for cell in nb.cells
        if "nbgrader" in cell.metadata
    }


def cell_source(exercise: str, grade_id: str) -> str:
    cells = _cells(source_path(exercise))
    if grade_id not in cells:
        raise KeyError(f"{exercise}: no cell {grade_id}; cells: {', '.join(cells)}")
    return cells[grade_id][0]


def solution_cell(exercise: str, grade_id: str) -> str:
    """The solution cell ``grade_id`` of the source notebook, without the solution markers."""
    if not _cells(source_path(exercise)).get(grade_id, ("", {}))[1].get("solution"):
        raise KeyError(f"{exercise}: {grade_id} is not a solution cell")
    lines = cell_source(exercise, grade_id).splitlines(keepends=True)
    return "".join(line for line in lines if line.strip() not in SOLUTION_MARKERS)


def edited_solution(exercise: str, grade_id: str, edits) -> str:
    """The solution cell with each ``(old, new)`` replacement made; ``old`` must occur exactly once."""
    source = solution_cell(exercise, grade_id)
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{exercise}/{grade_id}: {old!r} occurs {source.count(old)} times")
        source = source.replace(old, new)
    return source


def check_points(exercise: str) -> dict[str, float]:
    """``{check name: points}`` from the graded cells of the source notebook (the one place points are set).

    Raises if a graded code cell calls no check, or more than one, or a check is called twice.
    """
    points = {}
    for gid, (source, meta) in _cells(source_path(exercise)).items():
        if not (meta.get("grade") and meta["cell_type"] == "code"):
            continue
        calls = GRADE_CALL.findall(source)
        if len(calls) != 1 or calls[0][0] != exercise:
            raise ValueError(
                f"{exercise}/{gid}: a graded cell calls exactly one check of its own exercise, found {calls}"
            )
        name = calls[0][1]
        if name in points:
            raise ValueError(f"{exercise}: check {name} is graded in two cells")
        points[name] = float(meta["points"])
    return points


def _constant(node: ast.expr):
    """The value of a literal, or of ``cl.SomeParams(<literal keywords>)``; ``ValueError`` otherwise."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "cl"
    ):
        import course_lib

        args = [ast.literal_eval(a) for a in node.args]
        return getattr(course_lib, node.func.attr)(*args, **{k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return ast.literal_eval(node)


def setup_constants(exercise: str) -> dict[str, object]:
    """Constants of the notebook's ``setup`` cell (``{}`` without one): its top-level assignments of a
    literal or of a ``course_lib`` parameter set built from literals (``P = cl.PendulumParams()``);
    tuple assignments (``DT, N = 0.03, 100``) count name by name."""
    cells = _cells(source_path(exercise))
    if "setup" not in cells:
        return {}
    constants = {}
    for node in ast.parse(cells["setup"][0]).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for name, expr in pairs:
            if isinstance(name, ast.Name):
                try:
                    constants[name.id] = _constant(expr)
                except (ValueError, TypeError, SyntaxError):  # computed, not a constant
                    pass
    return constants


def _definitions(exercise: str, name: str) -> list[ast.FunctionDef]:
    found = []
    for source, meta in _cells(source_path(exercise)).values():
        if meta["cell_type"] != "code" or not meta.get("solution"):
            continue
        text = "".join(line for line in source.splitlines(keepends=True) if line.strip() not in SOLUTION_MARKERS)
        found += [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def defines(exercise: str, name: str) -> bool:
    """Whether the notebook's solution cells define a function ``name``."""
    return bool(_definitions(exercise, name))


def template_signature(exercise: str, name: str) -> tuple[list[str], str]:
    """``(parameter names, "name(a, b, c=1.0)")`` of the function ``name`` the notebook asks students to write.

    The grader calls a student's function positionally in this order (course_check.calling), so a
    student who renames a parameter keeps full marks; the text is what the feedback shows when a
    submission takes other arguments. Read from the ``def`` in the notebook's solution cells.
    """
    found = _definitions(exercise, name)
    if len(found) != 1:
        raise ValueError(f"{exercise}: the solution cells define {name}() {len(found)} times, expected once")
    args = found[0].args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg:
        raise ValueError(f"{exercise}: {name}() must take plain positional parameters")
    return [a.arg for a in args.args], f"{name}({ast.unparse(args)})"


def graded_callable(exercise: str, name: str) -> str:
    """The source of what the graded cell of check ``name`` hands to ``autograder.grade``: the student's
    function itself (``"fd_grad"``) or an adapter around it (a lambda, a kernel-support wrapper)."""
    for source, meta in _cells(source_path(exercise)).values():
        if not (meta.get("grade") and meta["cell_type"] == "code"):
            continue
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "autograder.grade"
                and len(node.args) == 3
                and ast.literal_eval(node.args[1]) == name
            ):
                return ast.unparse(node.args[2])
    raise KeyError(f"{exercise}: no graded cell calls autograder.grade(..., {name!r}, fn)")
