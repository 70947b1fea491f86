"""The student edition (autograder/ops/student_edition.py) and course_lib as its own package.

The edition is built once for the module into a scratch folder, with a public address and a term branch
as an instructor passes them, and checked as a student would meet it: what is in it, what is not, the
twins Colab opens, the release notebooks, the install file. A leak planted in what the edition is made
from fails the command.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from unittest import mock

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from autograder.authoring import leak_scan, sources
from autograder.authoring.registry import all_checks
from autograder.authoring.student_copy import student_notebook
from autograder.ops import cli, student_edition

#: one worker runs the module, so its module fixture is built once
pytestmark = pytest.mark.xdist_group("student_edition")

ROOT = Path(__file__).resolve().parents[1]
URL, BRANCH = "https://github.com/example-course/s04-student", "2027-spring"
#: course_lib's third-party imports, and the distributions that provide them (jaxlib: JAX's compiled half)
LIBRARY_IMPORTS = {"jax": "jax", "numpy": "numpy", "optax": "optax", "equinox": "equinox", "jaxtyping": "jaxtyping"}


def _pins(text: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, re.M)}


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edition")
    # without a built book (tests/test_book.py checks the twins' numbers against the built one)
    return student_edition.build_edition(
        folder / "student-edition", repository_url=URL, branch=BRANCH, book_build=folder / "no-book"
    )


def test_the_edition_is_clean_and_holds_only_the_allowlist(edition):
    assert edition.problems == []
    out = edition.folder
    assert {p.name for p in out.iterdir()} == {
        "README.md",
        "LICENSE",
        "requirements.txt",
        "requirements-exercises.txt",
        "runtime.txt",
        ".python-version",
        ".gitignore",
        "course_lib",
        "course_check",
        "book",
        "exercises",
    }
    names = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()]
    assert sorted(names) == sorted(str(p.relative_to(out)) for p in edition.files)
    instructors_side = {"autograder", "assignments", "reference", "source", "submitted", "data", "inputs", "tests"}
    assert not [n for n in names if instructors_side & set(Path(n).parts)]
    assert not [n for n in names if "gradebook" in n or n.endswith((".db", ".lock", ".jsonl"))]


def test_every_student_page_has_its_twin_and_the_instructors_page_stays_out(edition):
    pages = student_edition.student_pages()
    assert "book/instructors" not in pages and "book/s04_4" in pages
    for page in pages:
        shipped, source = (
            (edition.folder / f"{page}.md").read_text(encoding="utf-8"),
            (ROOT / f"{page}.md").read_text(encoding="utf-8"),
        )
        assert shipped == student_edition.student_text(source) and "instructors-only" not in shipped
        twin = nbformat.read(edition.folder / f"{page}.ipynb", as_version=4)
        first = twin.cells[0]
        if any(c.cell_type == "code" for c in twin.cells[1:]):
            assert student_edition.TWIN_MARK in first.metadata.get("tags", [])
            assert URL in first.source and repr(BRANCH) in first.source
            compile(first.source, page, "exec")
        assert all(not c.get("outputs") for c in twin.cells if c.cell_type == "code")
        markdown = "\n".join(c.source for c in twin.cells if c.cell_type == "markdown")
        # Jupyter and Colab render CommonMark: no MyST role or directive may reach the twin's text
        assert not re.findall(r"\{[a-z:-]+\}`|^```\{|^\([\w.:-]+\)=$", markdown, re.M), page
    assert not (edition.folder / "book" / "instructors.md").exists()
    assert "make book" in (ROOT / "book" / "index.md").read_text(encoding="utf-8")  # the web book keeps them
    assert "make book" not in (edition.folder / "book" / "index.md").read_text(encoding="utf-8")


def test_every_module_a_page_imports_is_in_the_edition(edition):
    """A twin run on a student's machine finds each of its imports: the standard library, a package of the
    edition's lock (or its own course_lib/course_check), or one of the book's modules beside the pages.
    Read from the twins' code, independently of how the edition picks the book's modules."""
    pins = _pins((edition.folder / "requirements.txt").read_text(encoding="utf-8"))
    twins = sorted((edition.folder / "book").glob("*.ipynb"))
    missing = _unprovided_imports(twins, pins, local=edition.folder / "book")
    assert not missing, "\n".join(missing)


def _unprovided_imports(notebooks, pins: dict, local: Path | None = None) -> list[str]:
    """``"<notebook>: import <name>"`` for each module a notebook's code imports that is neither the standard
    library, course_lib/course_check, a module beside it in ``local``, nor provided by a package of ``pins``."""
    import importlib.metadata

    providers = importlib.metadata.packages_distributions()
    missing = []
    for notebook in notebooks:
        code = "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")
        for name in sorted(set(re.findall(r"^\s*(?:from|import)\s+(\w+)", code, flags=re.M))):
            if name in sys.stdlib_module_names or name in ("course_lib", "course_check"):
                continue
            if local is not None and (local / f"{name}.py").is_file():
                continue
            dists = {d.lower().replace("_", "-") for d in providers.get(name, [])}
            if not dists & set(pins):
                missing.append(f"{notebook.name}: import {name} ({sorted(dists) or 'no installed package'})")
    return missing


def test_the_exercises_are_the_release_notebooks(edition):
    exercises = sorted((edition.folder / "exercises").rglob("*.ipynb"))
    expected = sources.source_notebooks()
    assert sorted(p.stem for p in exercises) == sorted(md.stem for md in expected)
    for md in expected:
        ours = nbformat.read(edition.folder / "exercises" / md.parent.name / f"{md.stem}.ipynb", as_version=4)
        colab, *release = ours.cells  # an edition built for an address: Colab's cell first, then the release
        assert [c.source for c in release] == [c.source for c in student_notebook(md).cells], md.stem
        assert student_edition.TWIN_MARK in colab.metadata.tags and "nbgrader" not in colab.metadata
        assert f"git+{URL}@{BRANCH}#subdirectory=course_check" in colab.source


def test_the_readme_names_the_editions_address_and_keeps_no_placeholder(edition):
    readme = (edition.folder / "README.md").read_text(encoding="utf-8")
    assert "<组织>" not in readme and "<分支>" not in readme and "占位符" not in readme
    assert (
        "https://colab.research.google.com/github/example-course/s04-student/blob/2027-spring/book/s04_1.ipynb"
        in readme
    )
    assert "!pip install" not in readme  # every notebook's first cell installs; nothing to copy by hand


def test_without_an_address_there_is_no_colab_cell_and_the_command_says_so(tmp_path, capsys):
    from autograder.ops import cli

    cli.main(["student-edition", "--out", str(tmp_path / "ed"), "--book-build", str(tmp_path / "no-book")])
    err = capsys.readouterr().err
    assert "Colab" in err and "repository" in err
    nb = nbformat.read(tmp_path / "ed" / "exercises" / "s04_1" / "s04_1_ex1.ipynb", as_version=4)
    assert student_edition.TWIN_MARK not in nb.cells[0].metadata.get("tags", [])
    assert "<组织>" in (tmp_path / "ed" / "README.md").read_text(encoding="utf-8")


def test_one_install_file_for_binder_and_pip(edition):
    requirements = (edition.folder / "requirements.txt").read_text(encoding="utf-8")
    lines = [line for line in requirements.splitlines() if line and not line.lstrip().startswith("#")]
    assert lines[:2] == ["./course_lib", "./course_check"]
    pins = _pins(requirements)
    instructors = _pins((ROOT / "requirements.lock").read_text(encoding="utf-8"))
    assert {"jax", "jaxlib", "numpy", "matplotlib", "jupyterlab", "myst-nb"} <= set(pins)
    # what `make lock` leaves out of the instructors' lock on purpose (Makefile, NOT_LOCKED); pip installs it
    # for students anyway, so their lock keeps its pin
    not_locked = set(re.findall(r"--no-emit-package (\S+)", (ROOT / "Makefile").read_text(encoding="utf-8")))
    assert not_locked == {"rfc3987-syntax", "lark"}
    assert {name: v for name, v in pins.items() if name not in not_locked and instructors.get(name) != v} == {}
    for heavy in ("nbgrader", "jupyter-book", "distributed", "psycopg2-binary", "playwright"):
        assert heavy not in pins, heavy
    assert (edition.folder / "runtime.txt").read_text() == "python-3.11\n"


def test_binder_builds_python_3_11_and_installs_the_requirements_with_the_whole_repository(edition):
    """What Binder builds from the edition, in repo2docker's own recipe: ``--no-build --debug`` prints the
    Dockerfile it would build, without Docker. Python 3.11 comes from runtime.txt. requirements.txt names
    ./course_lib and ./course_check, so it has to be installed after the repository is copied in: repo2docker
    installs it earlier, from requirements.txt alone (for its layer cache), unless a line names a local file."""
    repo2docker = Path(sys.executable).parent / "repo2docker"
    run = subprocess.run(
        [str(repo2docker), "--no-build", "--no-run", "--debug", str(edition.folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "Building conda environment for python=3.11" in log, log[:3000]
    copied = log.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    installs = [m.start() for m in re.finditer(r'pip install --no-cache-dir -r "requirements.txt"', log)]
    assert len(installs) == 1 and installs[0] > copied, log[-3000:]


def test_the_lighter_install_has_the_same_versions_and_everything_the_exercises_import(edition):
    """requirements-exercises.txt: a subset of requirements.txt at the same versions, without what only the pages
    need, and with a package for every module an exercise notebook imports (read from the notebooks' code)."""
    full = _pins((edition.folder / "requirements.txt").read_text(encoding="utf-8"))
    light_text = (edition.folder / "requirements-exercises.txt").read_text(encoding="utf-8")
    light = _pins(light_text)
    assert light_text.splitlines()[1:3] == ["./course_lib", "./course_check"]
    assert {name: v for name, v in light.items() if full.get(name) != v} == {}
    assert not {"myst-nb", "mujoco", "mujoco-mjx", "sphinx"} & set(light)
    missing = _unprovided_imports(sorted((edition.folder / "exercises").rglob("*.ipynb")), light)
    assert not missing, "\n".join(missing)


def test_the_install_files_name_no_file_of_the_instructors(edition):
    for name in ("requirements.txt", "requirements-exercises.txt"):
        text = (edition.folder / name).read_text(encoding="utf-8")
        comments = "\n".join(line for line in text.splitlines() if line.startswith("    #"))  # uv's "via" lines
        assert not re.search(r"-[cr] |\.lock\b|\.in\b|make ", comments), name
        for path in re.findall(r"\(([\w./-]+)\)", text):  # "s04-course-lib (course_lib/pyproject.toml)"
            assert (edition.folder / path).exists(), f"{name} names {path}"


def _ranges(requirements: list[str]) -> dict[str, SpecifierSet]:
    """``{name: version range}`` of a package's declared dependencies; each must be a bounded range."""
    out = {}
    for text in requirements:
        req = Requirement(text)
        assert any(s.operator == "<" for s in req.specifier) and any(s.operator == ">=" for s in req.specifier), text
        out[req.name.lower()] = req.specifier
    return out


def test_course_lib_declares_exactly_what_it_imports_in_ranges_holding_the_instructors_versions():
    project = tomllib.loads((ROOT / "course_lib" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = _ranges(project["dependencies"])
    imported = set()
    for path in (ROOT / "course_lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"course_lib", "__future__"}
    assert third_party == set(LIBRARY_IMPORTS)
    assert set(declared) == set(LIBRARY_IMPORTS.values()) | {"jaxlib"}
    instructors = _pins((ROOT / "requirements.lock").read_text(encoding="utf-8"))
    # a range, not a pin (Colab keeps its own JAX when it is in range); the grader's versions always inside it
    assert {name: str(r) for name, r in declared.items() if instructors[name] not in r} == {}


def _without(refused: set[str], code: str) -> str:
    """Run ``code`` in a fresh interpreter where the ``refused`` packages cannot be imported; its stdout."""
    prelude = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(refused)!r}:\n"
        "            raise ImportError('not on a student machine: ' + name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
    )
    proc = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_course_lib_imports_and_runs_without_the_instructors_tools():
    """A student's kernel has no autograder, nbgrader or jupyter-book: course_lib must not need them."""
    out = _without(
        {"autograder", "nbgrader", "jupyter_book", "distributed", "sphinx"},
        "import jax.numpy as jnp, course_lib as cl\n"
        "step = cl.make_integrator('rk4', cl.pendulum, 0.01)\n"
        "xs = cl.rollout(step, jnp.array([1.0, 0.0]), jnp.zeros((5, 1)), cl.PendulumParams())\n"
        "print(xs.shape)\n",
    )
    assert out.strip() == "(6, 2)"


def test_course_check_declares_numpy_only_and_ships_every_public_check(edition):
    project = tomllib.loads((ROOT / "course_check" / "pyproject.toml").read_text(encoding="utf-8"))
    declared = _ranges(project["project"]["dependencies"])
    assert list(declared) == ["numpy"] and _pins((ROOT / "requirements.lock").read_text())["numpy"] in declared["numpy"]
    shipped = {p.stem for p in (edition.folder / "course_check" / "public").glob("*.json")}
    assert shipped == {c.exercise for c in all_checks().values()}


def test_public_checks_run_without_the_instructors_tools():
    """In a student's kernel (no autograder, no nbgrader) check() scores with the grader's messages."""
    out = _without(
        {"autograder", "nbgrader", "jupyter_book", "distributed", "jax"},
        "import numpy as np\n"
        "from course_check import check\n"
        "def analytic_grad(controls, step):  # renamed parameters\n"
        "    n = len(controls)\n"
        "    v = np.cumsum(step * np.asarray(controls))\n"
        "    return (step * v.sum() - 1.0) * step**2 * (n - np.arange(n))\n"
        "check('s04_1_ex1', 'analytic_grad', analytic_grad)\n"
        "check('s04_1_ex1', 'analytic_grad', lambda u, dt: -analytic_grad(u, dt))\n",
    )
    first, second = out.split("[s04_1_ex1]")[1:]
    assert "通过 3/3 个公开测试，得分 3/3" in first
    assert "得分 0/3" in second and "只差一个负号" in second


def test_a_leak_in_what_the_edition_is_made_from_fails_the_command(tmp_path, monkeypatch):
    secrets = leak_scan.collect_secrets(leak_scan.course_public_texts())
    rubric = next(line for line, origin in secrets.lines.items() if origin.startswith("solution or rubric"))
    files = tmp_path / "edition-files"
    files.mkdir()
    (files / "README.md").write_text(f"# 学生版\n\n提示：{rubric}\n", encoding="utf-8")
    shutil.copy(student_edition.EDITION_FILES / "gitignore", files / "gitignore")
    monkeypatch.setattr(student_edition, "EDITION_FILES", files)
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), pytest.raises(SystemExit, match="NOT safe to publish"):
        with contextlib.redirect_stdout(io.StringIO()), mock.patch.object(cli, "COURSE", ROOT / "assignments"):
            cli.main(["student-edition", "--out", str(tmp_path / "out")])
    assert "README.md: solution or rubric of" in printed.getvalue()


#: what a page may name without the edition holding it: the student's own files and folders, Colab's and the
#: hub's, and what the install creates
_NOT_IN_THE_EDITION = {".venv", ".venv/", "submitted/", "feedback/", "Copy of", "/content", "build/", "*.egg-info"}


def _named_paths(text: str) -> set[str]:
    """Relative paths a page names in inline code: ``book/s04_1.ipynb``, ``course_check/``, ``requirements.txt``."""
    names = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,;:，。")
        if re.fullmatch(r"\.\w+", token):  # an extension (".ipynb"), not a file
            continue
        if re.fullmatch(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]*)*", token) and (
            "/" in token or re.search(r"\.(md|ipynb|txt|toml|py|lock|cfg)$", token)
        ):
            names.add(token)
    return names


def test_the_editions_own_text_names_only_what_the_edition_holds(edition):
    # a student follows the README and the pages literally: every file or folder they name must be there,
    # and no instructor-only command (make, python -m autograder) is a step they are asked to take; a page's
    # passages for instructors are marked and left out of the edition (student_edition.student_text)
    missing, edition = [], edition.folder
    texts = [edition / "README.md", *sorted((edition / "book").glob("*.md"))]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        for name in _named_paths(text) - _NOT_IN_THE_EDITION:
            if name.startswith(("http", "/")) or "*" in name:
                continue
            held = (edition / name).exists() or (path.parent / name).exists()
            if not held and "/" not in name:  # a bare file name: an exercise notebook, say, wherever it lives
                held = any(edition.rglob(name))
            if not held:
                missing.append(f"{path.relative_to(edition)} names {name!r}")
        for command in ("make book", "make test", "python -m autograder", "make venv"):
            if command in text:
                missing.append(f"{path.relative_to(edition)} asks for {command!r}")
    assert not missing, "\n".join(missing)


def test_an_exercise_newer_than_the_install_says_how_to_update(tmp_path):
    """After a git pull without a reinstall, a new exercise's public checks are not installed yet: the student reads
    what to do, in Chinese, for a laptop and for Colab (whose first cell installs once per runtime)."""
    from course_check import load_public

    with pytest.raises(FileNotFoundError) as raised:
        load_public("s04_4_ex9", public_dir=tmp_path)
    said = str(raised.value)
    assert "git pull" in said and "pip install -r requirements.txt" in said and "删除运行时" in said
