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

Checked statically (every ``import`` statement, also those inside functions), in milliseconds.
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
    others = {p for d in ("authoring", "ops") for p in (AG / d).rglob("*.py")} | {AG / "__main__.py"}
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
