"""A student's machine: a clean virtual environment made from the student edition's install file alone.

Nothing from the instructors' lock or this repository's venv is in it: ``uv venv`` makes it, and uv installs
the edition's ``requirements.txt`` (``./course_lib``, ``./course_check`` and the student lock) from inside the
edition, as ``pip install -r requirements.txt`` does on a laptop and repo2docker does on Binder. Then, in that
environment's own Jupyter kernel, release notebooks of the edition run top to bottom with the reference
solution cells put back in (the setup and the 快速自检 cells must pass, and the public checks give full marks).

Only what this environment alone can show is run here. tests/test_public_checks.py already runs every public
cell after the reference solution in the instructors' environment, at the same pinned versions; what can differ
on a student's machine is what got installed: a module or submodule a notebook imports, or an exercise's public
cases in the installed ``course_check``. So the notebooks run here are the fewest whose imports (as dotted
names, solutions included, the standard library left out) cover every module any release notebook imports
(:func:`covering_notebooks`), and every exercise's public cases are loaded from the installed ``course_check``.
What a blank release does is tested where it is cheaper: its public checks in tests/test_public_checks.py, its
grading in tests/test_grading_pipeline.py. The install's time and size and the slowest notebook are printed
(``-s`` shows them); nothing asserts a time.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import pytest

from autograder.authoring.sources import complete_metadata, source_notebooks, source_path
from autograder.ops import student_edition
from course_check import PUBLIC_DIR

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("student_machine")]  # one edition and venv (module fixture)

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).parent / "uv"

#: runs inside the student's environment: one kernel per section, and before each notebook a cell that
#: clears what the previous one left (its variables, JAX's float64 switch, matplotlib's style), so that a
#: notebook that forgets a step fails as it would in a fresh kernel; a kernel start and JAX's import cost
#: seconds, 36 times over. Prints {path: outcome}.
RESET = "%reset -f\nimport jax, matplotlib\njax.config.update('jax_enable_x64', False)\nmatplotlib.rcdefaults()"
RUNNER = """
import json, sys, time
from pathlib import Path
import nbformat
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

def run(path, km, reset):
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(reset))
    began = time.perf_counter()
    client = NotebookClient(nb, km=km, timeout=600, kernel_name="python3")
    try:
        client.execute(cwd=str(Path(path).parent))
        outcome = {"error": None}
    except CellExecutionError as exc:
        outcome = {"error": exc.ename, "value": str(exc.evalue)[:300], "traceback": str(exc)[-1500:]}
    outcome["seconds"] = round(time.perf_counter() - began, 1)
    # what the public checks printed (course_check.check)
    outcome["public"] = "".join(
        o.get("text", "") for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "public_checks"
        for o in c.get("outputs", []) if o.get("output_type") == "stream"
    )
    return outcome

reset, paths = sys.argv[1], sys.argv[2:]
results = {}
for section in sorted({Path(p).parent for p in paths}):
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(section))
    try:
        for path in [p for p in paths if Path(p).parent == section]:
            results[path] = run(path, km, reset)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
print(json.dumps(results))
"""


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """(edition folder, the student's python): the edition built, its install file installed in a new venv."""
    tmp = tmp_path_factory.mktemp("student")
    edition = student_edition.build_edition(tmp / "edition")
    assert edition.problems == []
    git = ["git", "-C", str(edition.folder), "-c", "user.name=s04", "-c", "user.email=s04@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "edition"]):  # the repository students clone
        subprocess.run(git + args, check=True)
    venv = edition.folder / ".venv"  # where the README puts it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "UV_"))}
    began = time.perf_counter()
    subprocess.run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--python", str(python), "-r", "requirements.txt"],
        check=True,
        cwd=edition.folder,
        env=env,
        timeout=1200,
    )
    print(f"\nstudent install: {time.perf_counter() - began:.1f} s, {_du(venv) / 1e6:.0f} MB in the venv")
    # the install leaves nothing git would show (the edition's .gitignore: the venv, build/, *.egg-info)
    status = subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True, check=True).stdout
    assert status == "", status[:2000]
    return edition.folder, python


def test_the_student_environment_is_the_edition_and_nothing_more(student):
    _, python = student
    listed = subprocess.run(
        [str(UV), "pip", "freeze", "--python", str(python)], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].split(" @ ")[0].lower() for line in listed.splitlines() if line}
    assert {"s04-course-lib", "s04-course-check"} <= names
    for instructors_only in ("nbgrader", "jupyter-book", "distributed", "playwright", "s04-diffsim-course"):
        assert instructors_only not in names, instructors_only
    probe = "import course_lib, importlib.util as u; print(course_lib.__file__, u.find_spec('autograder'))"
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True, cwd="/").stdout
    assert "site-packages" in out and out.strip().endswith("None"), out


def _solved(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release with every solution cell's source taken from the source notebook."""
    solutions = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    solved = nbformat.from_dict(release)
    for cell in solved.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            cell.source = solutions[grade_id]
    return solved


def _answers(nb: nbformat.NotebookNode) -> dict[str, str]:
    """``{grade_id: source}`` of a notebook's solution code cells: what a student writes."""
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    }


def _run(python: Path, notebooks: list[Path]) -> dict:
    """Execute ``notebooks`` in the student environment's own kernels (see :data:`RUNNER`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env["PATH"] = os.pathsep.join([str(python.parent), "/usr/local/bin", "/usr/bin", "/bin"])
    proc = subprocess.run(
        [str(python), "-c", RUNNER, RESET, *map(str, notebooks)],
        capture_output=True,
        text=True,
        timeout=3000,
        cwd="/",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def imported_modules(nb: nbformat.NotebookNode) -> set[str]:
    """Every installed, non-standard-library module a notebook's code cells import, with each parent package
    (``mujoco.mjx`` -> ``mujoco``); ``from a import b`` counts ``a.b`` only when ``b`` is a module."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(
                    f"{node.module}.{alias.name}" for alias in node.names if _is_module(f"{node.module}.{alias.name}")
                )
    every = {".".join(name.split(".")[:k]) for name in names for k in range(1, name.count(".") + 2)}
    return {name for name in every if name.split(".")[0] not in sys.stdlib_module_names}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def covering_notebooks(notebooks: dict[str, tuple[int, set[str]]]) -> list[str]:
    """The fewest notebooks (greedy set cover, the shorter first among equals) whose imports cover every
    notebook's. ``notebooks``: ``{name: (lines of code, imported modules)}``."""
    need = {m for _, modules in notebooks.values() for m in modules}
    chosen = []
    while need:
        best = max(sorted(notebooks), key=lambda name: (len(notebooks[name][1] & need), -notebooks[name][0]))
        chosen.append(best)
        need -= notebooks[best][1]
    return chosen


def test_covering_notebooks_covers_every_module_with_the_fewest_and_shortest():
    notebooks = {
        "a1": (30, {"jax", "numpy"}),
        "a2": (10, {"jax", "numpy"}),
        "a3": (50, {"mujoco", "mujoco.mjx"}),
        "b1": (5, {"jax"}),
    }
    assert sorted(covering_notebooks(notebooks)) == ["a2", "a3"]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "%matplotlib inline\nimport math, jax.numpy as jnp\nfrom jax import scipy, jit\nfrom typing import NamedTuple"
            )
        ]
    )
    assert imported_modules(nb) == {"jax", "jax.numpy", "jax.scipy"}  # jit is a function; math, typing stdlib


def test_every_exercise_has_its_public_cases_in_the_installed_course_check(student):
    _, python = student
    exercises = sorted(p.stem for p in PUBLIC_DIR.glob("*.json"))  # written-only exercises have none
    assert len(exercises) > 30
    probe = "import sys, course_check as c; [c.load_public(e) for e in sys.argv[1:]]; print(c.PUBLIC_DIR)"
    out = subprocess.run([str(python), "-c", probe, *exercises], capture_output=True, text=True, cwd="/", check=False)
    assert out.returncode == 0 and "site-packages" in out.stdout, out.stderr[-2000:]


def test_the_release_notebooks_run_with_their_solutions(student, tmp_path):
    folder, python = student
    probe = tmp_path / "probe.ipynb"
    code = "import sys, pathlib; assert pathlib.Path(sys.prefix) == pathlib.Path(%r), sys.prefix" % str(
        python.parent.parent
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), probe)
    solved, imports = {}, {}
    for md in source_notebooks():
        release_path = folder / "exercises" / md.parent.name / f"{md.stem}.ipynb"
        release = nbformat.read(release_path, as_version=4)
        source = complete_metadata(jupytext.read(md), md.name)
        solved[md.stem] = (md, release_path.with_name(f"{md.stem}-solved.ipynb"), _solved(release, source))
        code = sum(len(c.source.splitlines()) for c in solved[md.stem][2].cells if c.cell_type == "code")
        imports[md.stem] = (code, imported_modules(solved[md.stem][2]))
    chosen = covering_notebooks(imports)
    print(f"\nrunning {len(chosen)} of {len(solved)} solved notebooks: {', '.join(sorted(chosen))}")
    for stem in chosen:  # beside the release: the same working folder
        nbformat.write(solved[stem][2], solved[stem][1])
    ran = _run(python, [probe] + [solved[stem][1] for stem in chosen])
    failures = {p: r for p, r in ran.items() if r["error"]}
    assert not failures, json.dumps(failures, ensure_ascii=False, indent=1)[-6000:]
    # the public checks ran in the student's own kernel and gave the solved notebooks full marks
    for md in (solved[stem][0] for stem in chosen):
        calls = md.read_text(encoding="utf-8").count("\ncheck(")
        solved_run = ran[str(folder / "exercises" / md.parent.name / f"{md.stem}-solved.ipynb")]
        assert solved_run["public"].count("公开测试全部通过") == calls, (md.stem, solved_run["public"])
    seconds = {Path(p).name: r["seconds"] for p, r in ran.items() if p != str(probe)}
    slowest = max(seconds, key=seconds.__getitem__)
    print(f"\nsolved notebooks: {sum(seconds.values()):.0f} s in all, slowest {slowest} {seconds[slowest]:.1f} s")


def test_a_hub_link_pulls_the_edition_and_the_next_click_keeps_the_answers(student, tmp_path):
    """The campus hub (the edition README's section 3): the course's git-pull link, as nbgitpuller serves it.

    nbgitpuller's own ``GitPuller`` does the pulls (its ``/git-pull`` handler runs exactly this), from a bare copy of
    the edition playing the published repository, into a home folder. The hub's kernel is the student environment
    above: a hub's image installs the same ``requirements.txt``. The student answers an exercise; the instructors
    then publish a correction to that notebook's text and to the README; the student's next click merges both and
    keeps the answers, and the notebook runs from the pulled folder with full public marks."""
    from nbgitpuller.pull import GitPuller

    folder, python = student
    exercise, section = "s04_1_ex1", "s04_1"
    identity = ["-c", "user.name=instructor", "-c", "user.email=instructor@example.invalid"]
    branch = subprocess.run(
        ["git", "-C", str(folder), "branch", "--show-current"], capture_output=True, text=True, check=True
    ).stdout.strip()
    published = tmp_path / "s04.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(folder), str(published)], check=True)
    home = tmp_path / "home"
    pulled = home / "s04"  # nbgitpuller puts the repository at ~/<its name>

    def click():  # one visit of the link: clone the first time, then fetch and merge, keeping local changes
        return "".join(GitPuller(published.as_uri(), str(pulled), branch=branch).pull())

    click()
    notebook = pulled / "exercises" / section / f"{exercise}.ipynb"
    md = source_path(exercise)
    answered = _solved(nbformat.read(notebook, as_version=4), complete_metadata(jupytext.read(md), md.name))
    answers = _answers(answered)
    assert len(answers) == 2
    nbformat.write(answered, notebook)  # as Jupyter saves it

    instructor = tmp_path / "instructor"
    subprocess.run(["git", "clone", "-q", str(published), str(instructor)], check=True)
    corrected = nbformat.read(instructor / notebook.relative_to(pulled), as_version=4)
    first_text = next(c for c in corrected.cells if c.cell_type == "markdown")
    first_text.source += "\n\n（勘误：本题的说明已更新。）"
    nbformat.write(corrected, instructor / notebook.relative_to(pulled))
    with open(instructor / "README.md", "a", encoding="utf-8") as readme:
        readme.write("\n更新：第 1 节的说明有勘误。\n")
    for args in (["commit", "-q", "-am", "correction"], ["push", "-q"]):
        subprocess.run(["git", "-C", str(instructor), *identity, *args], check=True)

    log = click()
    merged = nbformat.read(notebook, as_version=4)
    assert _answers(merged) == answers, log[-2000:]
    first_text = next(c for c in merged.cells if c.cell_type == "markdown").source
    assert "（勘误：本题的说明已更新。）" in first_text, log[-2000:]
    assert "第 1 节的说明有勘误" in (pulled / "README.md").read_text(encoding="utf-8")

    ran = _run(python, [notebook])[str(notebook)]
    assert ran["error"] is None, ran
    assert ran["public"].count("公开测试全部通过") == 2, ran["public"]


def test_the_lighter_install_imports_everything_an_exercise_imports(student, tmp_path):
    """requirements-exercises.txt, installed alone into a new venv, provides every module any release notebook
    imports (its size is printed beside the full install's; `-s` shows it)."""
    folder, _ = student
    venv = tmp_path / "light"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "UV_"))}
    subprocess.run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--python", str(python), "-r", "requirements-exercises.txt"],
        check=True,
        cwd=folder,
        env=env,
        timeout=1200,
    )
    print(f"\nlighter install: {_du(venv) / 1e6:.0f} MB in the venv")
    modules = sorted(
        {
            name
            for notebook in (folder / "exercises").rglob("*.ipynb")
            for cell in nbformat.read(notebook, as_version=4).cells
            if cell.cell_type == "code"
            for name in re.findall(r"^\s*(?:from|import)\s+([\w.]+)", cell.source, flags=re.M)
        }
    )
    assert "course_check" in modules and "jax" in modules
    probe = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\nprint('ok')"
    out = subprocess.run([str(python), "-c", probe, *modules], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    blocked = subprocess.run([str(python), "-c", "import myst_nb"], capture_output=True, text=True, cwd="/")
    assert blocked.returncode != 0  # what only the pages need is not in it
