"""A student's machine: a clean virtual environment made from the student edition's install file alone.

Nothing from the instructors' lock or this repository's venv is in it: ``uv venv`` makes it, and uv installs
the edition's ``requirements.txt`` (``./course_lib``, ``./course_check`` and the student lock) from inside the
edition, as ``pip install -r requirements.txt`` does on a laptop and repo2docker does on Binder. Then, in that
environment's own Jupyter kernel, every release notebook of the edition runs top to bottom with the reference
solution cells put back in (the setup and the 快速自检 cells must pass, and the public checks give full marks).
What a blank release does is tested where it is cheaper: its public checks in tests/test_public_checks.py, its
grading in tests/test_grading_pipeline.py. The install's time and size and the slowest notebook are printed
(``-s`` shows them); nothing asserts a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import pytest

from autograder.authoring.sources import complete_metadata, source_notebooks
from autograder.ops import student_edition

pytestmark = [pytest.mark.slow]

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
    venv = tmp / "venv"
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


def test_every_release_notebook_runs_with_its_solution(student, tmp_path):
    folder, python = student
    probe = tmp_path / "probe.ipynb"
    code = "import sys, pathlib; assert pathlib.Path(sys.prefix) == pathlib.Path(%r), sys.prefix" % str(
        python.parent.parent
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), probe)
    solved = [probe]
    for md in source_notebooks():
        release_path = folder / "exercises" / md.parent.name / f"{md.stem}.ipynb"
        release = nbformat.read(release_path, as_version=4)
        source = complete_metadata(jupytext.read(md), md.name)
        solved.append(release_path.with_name(f"{md.stem}-solved.ipynb"))  # beside it: the same working folder
        nbformat.write(_solved(release, source), solved[-1])
    ran = _run(python, solved)
    failures = {p: r for p, r in ran.items() if r["error"]}
    assert not failures, json.dumps(failures, ensure_ascii=False, indent=1)[-6000:]
    # the public checks ran in the student's own kernel and gave the solved notebooks full marks
    for md in source_notebooks():
        calls = md.read_text(encoding="utf-8").count("\ncheck(")
        solved_run = ran[str(folder / "exercises" / md.parent.name / f"{md.stem}-solved.ipynb")]
        assert solved_run["public"].count("公开测试全部通过") == calls, (md.stem, solved_run["public"])
    seconds = {Path(p).name: r["seconds"] for p, r in ran.items() if p != str(probe)}
    slowest = max(seconds, key=seconds.__getitem__)
    print(f"\nsolved notebooks: {sum(seconds.values()):.0f} s in all, slowest {slowest} {seconds[slowest]:.1f} s")
