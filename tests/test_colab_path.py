"""The Colab path, simulated: a student opens the edition's notebooks in Colab and runs their first cell.

What stands in for Colab here:

* the edition, built for an address (``file://`` of its own git repository, tagged with the term's branch), so
  that every notebook's first cell installs from it as it would from GitHub (``student_edition.colab_cell``);
* a fresh venv holding what Colab preinstalls and what matters to the course: NumPy, SciPy, matplotlib and
  ipykernel at the edition lock's versions (inside the course's ranges), and an **older JAX** (0.9.2, outside
  them), as a Colab image that lags the course would have; pip seeded, as in Colab. Colab runs Python 3.12;
  this machine has only 3.11, so the venv is 3.11;
* a ``google.colab`` module, imported by the kernel before anything else (Colab's kernels import it).

Then, as a student meets it: a session that had already imported JAX runs an exercise's first cell, which
installs ``course_lib`` and ``course_check`` from the edition, replaces JAX (out of range) and keeps NumPy (in
range), and stops with the Chinese note asking for a restart. After the restart one exercise per section runs
blank from its first cell: its public checks print 0 points with the grader's own messages, never an import
error. Two page twins run from their first cell, which clones the edition, installs the page's extras and
enters ``book/``.

Installing needs PyPI (pip fetches what Colab lacks: JAX 0.10.2, optax, equinox, myst-nb, ...), as Colab does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from notebook_text import output_parts

from autograder.authoring.sources import source_notebooks
from autograder.ops import student_edition

# one worker builds the simulated Colab once and runs the three steps on it (each worker would build its own)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("colab")]

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).parent / "uv"
BRANCH = "2027-spring"
OLD_JAX = "0.9.2"
#: Colab's own packages, as far as the course is concerned: the lock's versions of these, and the older JAX
COLAB_AT_LOCK = ("numpy", "scipy", "matplotlib", "ipykernel")
#: two page twins: the chapter's opening and the first page with gradients
TWINS = ("s04_0", "s04_1")
GOOGLE_COLAB = "import google.colab\n"


def _lock_pins() -> dict[str, str]:
    lock = (ROOT / "edition" / "requirements.lock").read_text(encoding="utf-8")
    return dict(line.split("==") for line in lock.splitlines() if "==" in line and not line.startswith("#"))


def _versions(python: Path) -> dict[str, str]:
    probe = (
        "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in ('jax', 'jaxlib', 'numpy')}))"
    )
    return json.loads(subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout)


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """``(edition folder, Colab's python, the folder a session starts in, JUPYTER_PATH with its kernel)``."""
    tmp = tmp_path_factory.mktemp("colab")
    edition = student_edition.build_edition(
        tmp / "edition", repository_url=f"file://{tmp / 'edition'}", branch=BRANCH, book_build=tmp / "no-book"
    )
    assert edition.problems == []
    git = ["git", "-C", str(edition.folder), "-c", "user.name=s04", "-c", "user.email=s04@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "edition"], ["tag", BRANCH]):
        subprocess.run(git + args, check=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "UV_"))}
    venv = tmp / "colab-venv"
    subprocess.run([str(UV), "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    pins = _lock_pins()
    preinstalled = [f"{name}=={pins[name]}" for name in COLAB_AT_LOCK] + [f"jax=={OLD_JAX}", f"jaxlib=={OLD_JAX}"]
    subprocess.run([str(UV), "pip", "install", "--quiet", "--python", str(python), *preinstalled], check=True, env=env)
    site = Path(
        subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "google" / "colab").mkdir(parents=True)
    (site / "google" / "colab" / "__init__.py").write_text('"""Stands in for Colab\'s own module."""\n')
    # JAX's debugger imports google.colab.output when google.colab is imported (jax/_src/debugger/colab_lib.py)
    (site / "google" / "colab" / "output.py").write_text('"""Stands in for Colab\'s output module."""\n')

    kernels = tmp / "jupyter"
    spec = kernels / "kernels" / "colab"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab", "language": "python"}))
    content = tmp / "content"  # Colab's working folder
    content.mkdir()
    return edition.folder, python, content, kernels


def _session(kernels: Path, cwd: Path):
    """A new Colab session (a kernel of the Colab venv, started in ``cwd``) with ``google.colab`` imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "JAX_", "XLA_"))}
    specs = KernelSpecManager()
    specs.kernel_dirs = [str(kernels / "kernels")]
    km = KernelManager(kernel_name="colab", kernel_spec_manager=specs)
    km.start_kernel(cwd=str(cwd), env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def _run(nb, km, cwd: Path, before: str = "") -> nbformat.NotebookNode:
    """Run ``nb`` (with ``before`` as an extra first cell) in the session, every cell even after an error."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    nb.cells.insert(0, nbformat.v4.new_code_cell(GOOGLE_COLAB + before))
    NotebookClient(nb, km=km, timeout=900, allow_errors=True).execute(cwd=str(cwd))
    return nb


def _text(cell) -> str:
    return "".join(output_parts(cell))


def _first_exercise_per_section(folder: Path) -> list[Path]:
    firsts = {}
    for md in source_notebooks():
        firsts.setdefault(md.parent.name, folder / "exercises" / md.parent.name / f"{md.stem}.ipynb")
    return [firsts[s] for s in sorted(firsts)]


def test_colab_installs_keeps_numpy_replaces_an_old_jax_and_asks_for_a_restart(colab):
    folder, python, content, kernels = colab
    numpy_before = _versions(python)["numpy"]
    exercise = nbformat.read(_first_exercise_per_section(folder)[0], as_version=4)
    km, kc = _session(kernels, content)
    try:
        # the student had already run something that imported Colab's JAX, then runs the first cell
        nb = _run(nbformat.v4.new_notebook(cells=[exercise.cells[0]]), km, content, before="import jax\n")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    said = _text(nb.cells[1])
    assert "SystemExit" in said and "重新启动会话" in said and f"jax {OLD_JAX} → 0.10.2" in said, said
    after = _versions(python)
    assert after["jax"] == after["jaxlib"] == "0.10.2" and after["numpy"] == numpy_before  # NumPy was in range


@pytest.fixture(scope="module")
def installed(colab):
    """The simulated Colab after a session ran an exercise's first cell with nothing imported before it (the
    install; a no-op when the restart test ran first): what a student finds after the restart."""
    folder, python, content, kernels = colab
    exercise = nbformat.read(_first_exercise_per_section(folder)[0], as_version=4)
    km, kc = _session(kernels, content)
    try:
        nb = _run(nbformat.v4.new_notebook(cells=[exercise.cells[0]]), km, content)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert "Colab 已准备好" in _text(nb.cells[1]), _text(nb.cells[1])
    return colab


def test_after_the_restart_every_sections_public_checks_run_blank(installed):
    folder, python, content, kernels = installed
    km, kc = _session(kernels, content)  # the restart: a new session; the first cell now installs nothing
    reset = "%reset -f\nimport jax, matplotlib\njax.config.update('jax_enable_x64', False)\nmatplotlib.rcdefaults()\n"
    problems = []
    try:
        for path in _first_exercise_per_section(folder):
            nb = _run(nbformat.read(path, as_version=4), km, content, before=reset)
            first = _text(nb.cells[1])
            if "Colab 已准备好" not in first:
                problems.append(f"{path.stem}: the first cell said {first!r}")
            everything = "\n".join(_text(c) for c in nb.cells)
            for broken in ("ModuleNotFoundError", "ImportError", "No module named"):
                if broken in everything:
                    problems.append(f"{path.stem}: {broken} in\n{everything[-1500:]}")
            public = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "public_checks"]
            if public:
                said = _text(public[0])
                scores = re.findall(r"个公开测试，得分 ([\d.]+)/", said)
                if not scores or any(float(x) != 0 for x in scores) or len(said.splitlines()) <= len(scores):
                    problems.append(f"{path.stem}: the public checks said {said[:600]!r}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("page", TWINS)
def test_a_page_twin_runs_from_its_first_cell(installed, page):
    folder, python, content, kernels = installed
    twin = nbformat.read(folder / "book" / f"{page}.ipynb", as_version=4)
    km, kc = _session(kernels, content)
    try:
        nb = _run(twin, km, content)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    errors = [
        f"cell {i}: {_text(c)[-800:]}"
        for i, c in enumerate(nb.cells)
        if any(o.output_type == "error" for o in c.get("outputs", []))
    ]
    assert not errors, "\n".join(errors)
    assert (content / "s04-edition" / "book" / f"{page}.md").is_file()  # the clone the first cell made
