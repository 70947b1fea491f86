"""The autograder's folders are trust zones (ARCHITECTURE.md, "Trust zones"); their imports must say so.

* kernel (``autograder/__init__.py``, ``autograder/kernel/``, ``autograder/kernel_support/``) runs inside the
  sandboxed grading kernel, next to the student's code: numpy, the standard library, course_lib (and JAX,
  which course_lib is built on), IPython's display and the protocol; nothing of the trusted side.
* public checks (``course_check/``: the protocol, the comparison, the scoring and the call convention) are read
  by both sides and ship to students: numpy and the standard library only.
* confine (``autograder/confine/``) runs before any student byte: the standard library, the kernel machinery
  it starts and drives (ipykernel, jupyter_client, nbclient, nbgrader's Execute) and itself.
* verdict (``autograder/verdict/``) runs in the trusted nbgrader process: it never imports the reference
  solutions or the authoring tools (which import everything), nor the instructor commands.

Checked statically (every ``import`` statement, also those inside functions), in milliseconds; so is the
absence of import cycles in ``autograder/`` (a lazy import that closes a cycle works only while it stays lazy).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AG = ROOT / "autograder"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

ZONES = {
    "kernel": (
        [AG / "__init__.py", *sorted((AG / "kernel").rglob("*.py")), *sorted((AG / "kernel_support").rglob("*.py"))],
        {"numpy", "course_lib", "course_check", "jax", "IPython"},
        {"autograder", "autograder.kernel", "autograder.kernel_support"},
    ),
    "public checks": (sorted((ROOT / "course_check").rglob("*.py")), {"numpy", "course_check"}, set()),
    "confine": (
        sorted((AG / "confine").rglob("*.py")),
        {"ipykernel", "jupyter_client", "nbclient", "nbformat", "nbgrader", "traitlets", "zmq"},
        {"autograder.confine"},
    ),
    "verdict": (
        sorted((AG / "verdict").rglob("*.py")),
        {
            "numpy",
            "course_check",
            "nbgrader",
            "nbformat",
            "nbclient",
            "nbconvert",
            "traitlets",
            "jupyter_client",
            "bleach",
        },
        {"autograder.verdict", "autograder.confine"},
    ),
}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            if node.module == "autograder":  # "from autograder import x" imports the submodule x
                names.update(f"autograder.{alias.name}" for alias in node.names)
    return names


def _allowed(module: str, third_party: set, own: set) -> bool:
    top = module.split(".")[0]
    if top == "autograder":
        return (
            module == "autograder"
            and "autograder" in own
            or any(module == o or module.startswith(o + ".") for o in own if o != "autograder")
        )
    return top in STDLIB or top in third_party


@pytest.mark.parametrize("zone", sorted(ZONES))
def test_zone_imports_stay_inside_the_zone(zone):
    files, third_party, own = ZONES[zone]
    assert files, f"zone {zone} has no files"
    bad = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in files
        for module in sorted(imported_modules(path))
        if not _allowed(module, third_party, own)
    ]
    assert bad == [], "\n".join(bad)


def test_every_autograder_module_is_in_exactly_one_zone():
    zoned = {p for files, _, _ in ZONES.values() for p in files}
    others = {p for d in ("authoring", "ops", "course") for p in (AG / d).rglob("*.py")} | {AG / "__main__.py"}
    every = set(AG.rglob("*.py"))
    assert every - zoned - others == set(), "modules outside every zone: put them in a zone folder"
    assert not zoned & others


def test_the_checker_sees_a_forbidden_import(tmp_path):
    # the test above must be able to fail: a verdict module importing the reference solutions is caught
    bad = tmp_path / "leak.py"
    bad.write_text("def f():\n    from autograder.authoring.reference import s04_1\n    import autograder.ops.cli\n")
    _, third_party, own = ZONES["verdict"]
    found = {m for m in imported_modules(bad) if not _allowed(m, third_party, own)}
    assert found == {"autograder.authoring.reference", "autograder.ops.cli"}


def test_instructor_commands_start_without_jax_or_the_references():
    # `python -m autograder export --help` took 4.1 s when the CLI imported every reference module (and JAX)
    # at start-up; a command imports them when it runs (autograder/ops/cli.py)
    probe = (
        "import sys; from autograder.ops import cli; "
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('autograder.authoring.reference')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_main_guard(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` but those under ``if __name__ == "__main__":``: run as a script, the module is
    ``__main__``, so importing itself by name there (autograder/ops/worker.py) loads it once more, no cycle."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not _is_main_guard(child))


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (below ``root``) -> the modules of ``package`` it imports.

    Every ``import`` and ``from ... import`` statement counts, also those inside functions (a lazy import
    only hides a cycle until the day both modules are imported at the top); relative imports are resolved.
    ``from p import x`` imports the module ``p.x`` when there is one, else ``p``; a name that is no module
    of its own counts as its nearest enclosing module."""
    files = {_module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}

    def owner(name: str) -> str | None:  # the longest prefix of ``name`` that is a module of the package
        parts = name.split(".")
        return next((m for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if m in files), None)

    graph = {}
    for module, path in files.items():
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]  # what a relative import starts from
        targets = set()
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(owner(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                    base = f"{anchor}.{base}" if base else anchor
                targets.update(owner(f"{base}.{alias.name}") for alias in node.names)
        graph[module] = targets - {None}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` through each strongly connected group of modules (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # the shortest way from the group's first module back to itself, inside the group
        start = min(group)
        paths, seen = [[start]], set()
        while paths:
            path = paths.pop(0)
            nxt = sorted(w for w in graph[path[-1]] if w in group)
            if start in nxt:
                cycles.append([*path, start])
                break
            for w in nxt:
                if w not in seen:
                    seen.add(w)
                    paths.append([*path, w])
    return sorted(cycles)


def test_autograder_has_no_import_cycle():
    # a cycle works only while one side imports lazily, and breaks (a half-initialised module) when it does not
    cycles = import_cycles(import_graph(ROOT, "autograder"))
    assert cycles == [], "import cycles in autograder/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_sees_a_lazy_relative_cycle(tmp_path):
    # the test above must be able to fail: a -> b at the top, b -> a inside a function, relatively
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("import os\nfrom pkg.sub.b import X\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("X = 1\n\n\ndef f():\n    from ..a import Y\n")
    (tmp_path / "pkg" / "c.py").write_text("from . import a\nfrom pkg import sub\n")
    (tmp_path / "pkg" / "d.py").write_text('if __name__ == "__main__":\n    from pkg.d import X\n')
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a", "pkg.sub"}
    assert graph["pkg.d"] == set()  # run as a script it is __main__: importing itself by name is no cycle
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]
