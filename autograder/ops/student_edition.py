"""``make student-edition``: the folder an instructor publishes each term as the course's public repository.

The edition is written from an allowlist (:func:`build_edition` names every file that goes in, and where),
never by deleting from a copy of this repository, then scanned (:mod:`autograder.authoring.leak_scan`); any
hit fails the command. Layout of ``_build/student-edition/``::

    README.md  LICENSE  requirements.txt  requirements-exercises.txt  runtime.txt  .python-version  .gitignore
    course_lib/                      the library and its own pyproject.toml (pip install ./course_lib)
    course_check/                    the public checks: scoring code, public cases, its own pyproject.toml
    book/<page>.md, book/<page>.ipynb  each page students read, and its notebook twin (Colab opens these)
    book/plotstyle.py, diagrams.py, ..., fonts/   the book's own modules the pages import, and the font
    exercises/<section>/<exercise>.ipynb     the release notebooks (autograder.authoring.student_copy)

``requirements.txt`` is the one install file: ``./course_lib``, ``./course_check`` and the student lock
(``edition/requirements.lock``, ``make student-lock``). Binder (repo2docker) and ``pip install -r`` read it.
``requirements-exercises.txt`` is the lighter install for a laptop that only does the exercises: the same
versions, without MuJoCo MJX and myst-nb, which only the book's pages import.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import yaml

from autograder.authoring import leak_scan
from autograder.authoring.student_copy import write_student_copies
from autograder.ops.twin_markdown import TwinText, glued_values

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "_build" / "student-edition"
EDITION_FILES = ROOT / "edition"
#: pages of the book that are for instructors only (their code needs the instructors' cluster tools)
INSTRUCTOR_PAGES = frozenset({"book/instructors"})
#: the font the figures draw their Chinese labels with (book/plotstyle.py registers it), and its licence
BOOK_FONTS = ("book/fonts/S04SansSC-Regular.otf", "book/fonts/OFL.txt")
_IMPORTED = re.compile(r"^\s*(?:from|import)\s+(\w+)", flags=re.MULTILINE)
PYTHON_VERSION = "3.11"
TWIN_MARK = "s04-edition-setup"


@dataclass
class Edition:
    folder: Path
    files: list[Path]
    problems: list[str]
    repository_url: str | None = None  # None: no Colab cells (nothing to install from), placeholders in the README


def toc_pages(root: Path = ROOT) -> list[str]:
    """Docnames of every page in ``_toc.yml``, in table-of-contents order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [re.sub(r"\.(md|ipynb)$", "", page) for page in pages]


def student_pages(root: Path = ROOT) -> list[str]:
    """Docnames of the book's pages that students receive, in table-of-contents order."""
    return [page for page in toc_pages(root) if page not in INSTRUCTOR_PAGES]


def book_helpers(root: Path = ROOT) -> list[str]:
    """The book's own modules (``book/<name>.py``) that the students' pages import, directly or through each
    other, and the font files; paths relative to the repository root."""
    sources = [
        cell.source
        for page in student_pages(root)
        for cell in jupytext.read(root / f"{page}.md").cells
        if cell.cell_type == "code"
    ]
    modules: set[str] = set()
    while sources:
        for name in _IMPORTED.findall(sources.pop()):
            helper = root / "book" / f"{name}.py"
            if helper.is_file() and name not in modules:
                modules.add(name)
                sources.append(helper.read_text(encoding="utf-8"))
    return [*(f"book/{name}.py" for name in sorted(modules)), *BOOK_FONTS]


#: what Colab must install beyond its own packages for a page twin: myst-nb for the pages' glue(), and MuJoCo
#: MJX where a page imports mujoco; compatible ranges (each holds the edition lock's pin), never exact pins,
#: so that pip keeps what Colab already has when it fits
COLAB_PAGE_EXTRAS = ("myst-nb>=1.4,<2",)
COLAB_MUJOCO = "mujoco-mjx>=3.17,<4"
#: Colab's packages the course's ranges may replace; a replaced one that the kernel already imported needs a restart
COLAB_REPLACEABLE = ("jax", "jaxlib", "numpy")


def colab_cell(
    repository_url: str, branch: str, page: str | None = None, mujoco: bool = False
) -> nbformat.NotebookNode:
    """The first cell of every notebook of an edition built for an address: in Colab (``google.colab`` imported),
    install ``course_lib`` and ``course_check`` from the edition at the term's branch (for a page twin, ``page``:
    clone the edition, install from the clone with the page's extras and enter ``book/``); keep Colab's JAX and
    NumPy when they are in the course's ranges (``pip install`` without ``-U``), and stop with a Chinese note when
    it replaced one that the kernel had already imported (a restart is needed). Elsewhere (a laptop, Binder, a hub,
    grading) it does nothing. Run again in the same session, it installs nothing twice."""
    extras = [*COLAB_PAGE_EXTRAS, *([COLAB_MUJOCO] if mujoco else [])] if page else []
    if page:
        install = (
            '    edition = os.environ.setdefault("S04_EDITION", os.path.abspath("s04-edition"))\n'
            "    if not os.path.isdir(edition):\n"
            f'        subprocess.check_call(["git", "clone", "-q", "--depth", "1", "--branch", {branch!r}, {repository_url!r}, edition])\n'
            f'    wanted = [os.path.join(edition, "course_lib"), os.path.join(edition, "course_check"), *{extras!r}]\n'
        )
    else:
        install = (
            "    wanted = [\n"
            f'        "s04-course-lib @ git+{repository_url}@{branch}#subdirectory=course_lib",\n'
            f'        "s04-course-check @ git+{repository_url}@{branch}#subdirectory=course_check",\n'
            "    ]\n"
        )
    source = (
        "# Colab 准备单元：只在 Colab 中才安装课程库 course_lib 和公开检查 course_check"
        + ("（并取回本页要导入的辅助文件）" if page else "")
        + "；\n# 在本地、Binder、JupyterHub 和评分时什么也不做。请保留这一格，提交时也不用删。\n"
        "import os, subprocess, sys\n"
        'if "google.colab" in sys.modules:\n'
        "    import importlib.metadata, importlib.util\n" + install + "    def _versions():\n"
        "        found = {}\n"
        f"        for name in {COLAB_REPLACEABLE!r}:\n"
        "            try:\n"
        "                found[name] = importlib.metadata.version(name)\n"
        "            except importlib.metadata.PackageNotFoundError:\n"
        "                found[name] = None\n"
        "        return found\n"
        '    if not all(importlib.util.find_spec(m) for m in ("course_lib", "course_check"'
        + (', "myst_nb"' if page else "")
        + ")):\n"
        "        before = _versions()\n"
        '        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *wanted])\n'
        '        replaced = [f"{n} {before[n]} → {v}" for n, v in _versions().items() if before[n] and v != before[n]]\n'
        "        if any(n.split()[0] in sys.modules for n in replaced):\n"
        "            raise SystemExit(\n"
        '                "Colab 自带的版本不在课程支持的范围内，已换成课程的版本（" + "，".join(replaced) + "）。"\n'
        '                "请点菜单“运行时 → 重新启动会话”，然后从这一格开始重新运行。"\n'
        "            )\n"
        + (
            '    os.chdir(os.path.join(os.environ["S04_EDITION"], "book"))\n    sys.path.insert(0, os.getcwd())'
            if page
            else '    print("Colab 已准备好：course_lib 和 course_check 都能导入。")'
        )
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": [TWIN_MARK, "skip-in-grading"]})


#: a page's passages for instructors and maintainers (how to build the book, set the launch buttons) sit between
#: these two lines; the web book shows them, the edition's copy of the page (and its twin) leaves them out
INSTRUCTORS_ONLY = re.compile(r"\n?<!-- instructors-only -->\n.*?<!-- /instructors-only -->\n", re.S)


def student_text(md_text: str) -> str:
    """A page's source as the edition ships it: without its instructors-only passages."""
    return INSTRUCTORS_ONLY.sub("\n", md_text)


def page_twin(
    md_path: Path, repository_url: str | None, branch: str, text: TwinText, glued: dict[str, str]
) -> nbformat.NotebookNode:
    """The page as a notebook without outputs, its markdown as Jupyter renders it (:mod:`autograder.ops.twin_markdown`,
    ``glued``: the values the book's build glued); with a repository address, Colab's setup cell first."""
    nb = jupytext.reads(student_text(md_path.read_text(encoding="utf-8")), fmt="md:myst")
    nb.metadata.pop("jupytext", None)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = text.markdown(cell.source, glued)
    if repository_url and any(cell.cell_type == "code" for cell in nb.cells):
        imports_mujoco = any(
            re.search(r"^\s*(from|import)\s+mujoco", c.source, re.M) for c in nb.cells if c.cell_type == "code"
        )
        nb.cells.insert(0, colab_cell(repository_url, branch, page=md_path.stem, mujoco=imports_mujoco))
    return nb


def repository_settings(root: Path = ROOT) -> tuple[str | None, str]:
    """``repository.url`` and ``repository.branch`` of ``_config.yml`` (the edition's public address)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    repository = config.get("repository") or {}
    return (repository.get("url") or None), (repository.get("branch") or "main")


def student_lock(lock: str) -> str:
    """A lock as the edition ships it: the pins and which package needs each, without uv's header (an instructors'
    command) and the lines naming the files it was compiled from (``-c``/``-r``: the instructors' repository)."""
    lines = [line for line in lock.splitlines() if not line.startswith("#") and not re.match(r"\s*#\s+-[cr] ", line)]
    lines = [
        line
        for i, line in enumerate(lines)
        if line.strip() != "# via" or lines[i + 1 : i + 2] and lines[i + 1].startswith("    #   ")
    ]
    return "\n".join(lines) + "\n"


_GITHUB = re.compile(r"^https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


def readme(repository_url: str | None, branch: str) -> str:
    """The edition's README: for an edition on GitHub, its links name the real repository and branch; otherwise
    they keep the placeholders ``<组织>/<仓库>`` and ``<分支>`` (and ``make student-edition`` warns)."""
    text = (EDITION_FILES / "README.md").read_text(encoding="utf-8")
    github = _GITHUB.match(repository_url or "")
    if not github:
        return text
    text = text.replace(PLACEHOLDER_NOTE, "")
    return (
        text.replace("<组织>/<仓库>", github.group(1))
        .replace("<仓库>", github.group(1).split("/")[1])
        .replace("<分支>", branch)
    )


#: the README's sentence about its placeholders, left out once they are filled in
PLACEHOLDER_NOTE = (
    "下面的链接里，`<组织>/<仓库>` 和 `<分支>` 都是占位符，真实地址以教师通知为准。\n"
    "`<分支>` 一般是本学期的标签，或者 `main`。\n"
)


def _copy(src: Path, dst: Path, files: list[Path]) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    files.append(dst)


def build_edition(
    out: Path = OUT,
    root: Path = ROOT,
    repository_url: str | None = None,
    branch: str | None = None,
    book_build: Path | None = None,
) -> Edition:
    """Write the student edition into ``out`` (replacing it) and scan it; see the module docstring.
    ``book_build``: the book's build folder (default ``root/_build``), whose glued values the twins show."""
    configured_url, configured_branch = repository_settings(root)
    repository_url, branch = repository_url or configured_url, branch or configured_branch
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    files: list[Path] = []

    (out / "README.md").write_text(readme(repository_url, branch), encoding="utf-8")
    files.append(out / "README.md")
    _copy(EDITION_FILES / "gitignore", out / ".gitignore", files)  # the venv and build leftovers of an install
    _copy(root / "LICENSE", out / "LICENSE", files)
    for name, lock, what in (
        (
            "requirements.txt",
            "requirements.lock",
            "学生版的安装文件（Binder 与 pip install -r requirements.txt 都读它）",
        ),
        (
            "requirements-exercises.txt",
            "requirements-exercises.lock",
            "只做练习时的轻量安装（书页还需要 MuJoCo MJX 和 myst-nb，请用 requirements.txt）",
        ),
    ):
        (out / name).write_text(
            f"# {what}：课程库本身，以及每个依赖的确切版本\n./course_lib\n./course_check\n"
            + student_lock((root / "edition" / lock).read_text(encoding="utf-8")),
            encoding="utf-8",
        )
        files.append(out / name)
    (out / "runtime.txt").write_text(f"python-{PYTHON_VERSION}\n", encoding="utf-8")
    (out / ".python-version").write_text(f"{PYTHON_VERSION}\n", encoding="utf-8")
    files += [out / "runtime.txt", out / ".python-version"]

    for package, data in (("course_lib", ()), ("course_check", ("public/*.json",))):
        folder = root / package
        shipped = [*folder.rglob("*.py"), folder / "pyproject.toml", *(p for g in data for p in folder.glob(g))]
        for src in sorted(shipped):
            if "__pycache__" not in src.parts:
                _copy(src, out / src.relative_to(root), files)

    for helper in book_helpers(root):
        _copy(root / helper, out / helper, files)
    twin_text, book_build = TwinText.of_course(root, toc_pages(root)), book_build or root / "_build"
    for page in student_pages(root):
        md = root / f"{page}.md"
        (out / f"{page}.md").parent.mkdir(parents=True, exist_ok=True)
        (out / f"{page}.md").write_text(student_text(md.read_text(encoding="utf-8")), encoding="utf-8")
        files.append(out / f"{page}.md")
        twin = out / f"{page}.ipynb"
        nbformat.write(page_twin(md, repository_url, branch, twin_text, glued_values(book_build, page)), twin)
        files.append(twin)

    written, problems = write_student_copies(out / "exercises", root / "assignments")
    files += list(written.values())
    if repository_url:  # Colab opens an exercise as it is: its first cell installs what its checks import
        for path in written.values():
            nb = nbformat.read(path, as_version=4)
            nb.cells.insert(0, colab_cell(repository_url, branch))
            nbformat.write(nb, path)

    problems += leak_scan.scan(out, leak_scan.collect_secrets(leak_scan.course_public_texts(root), root))
    unlisted = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p not in files)
    problems += [f"{name}: written but not on the allowlist" for name in unlisted]
    return Edition(out, files, problems, repository_url)
