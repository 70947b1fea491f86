"""``make student-edition``: the folder an instructor publishes each term as the course's public repository.

The edition is written from an allowlist (:func:`build_edition` names every file that goes in, and where),
never by deleting from a copy of this repository, then scanned (:mod:`autograder.authoring.leak_scan`); any
hit fails the command. Layout of ``_build/student-edition/``::

    README.md  LICENSE  requirements.txt  runtime.txt  .python-version  .gitignore
    course_lib/                      the library and its own pyproject.toml (pip install ./course_lib)
    course_check/                    the public checks: scoring code, public cases, its own pyproject.toml
    book/<page>.md, book/<page>.ipynb  each page students read, and its notebook twin (Colab opens these)
    book/plotstyle.py, diagrams.py, ..., fonts/   the book's own modules the pages import, and the font
    exercises/<section>/<exercise>.ipynb     the release notebooks (autograder.authoring.student_copy)

``requirements.txt`` is the one install file: ``./course_lib``, ``./course_check`` and the student lock
(``edition/requirements.lock``, ``make student-lock``). Binder (repo2docker) and ``pip install -r`` read it.
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


def setup_cell(repository_url: str, branch: str) -> nbformat.NotebookNode:
    """The twin's first cell: in Colab, clone the edition at the term's branch, install it, enter book/."""
    source = (
        "# 在 Colab 中第一次运行时：取回本课程的学生版仓库、安装依赖并进入 book/ 目录（本地与 Binder 中什么也不做）\n"
        "import os, subprocess, sys\n"
        'if "google.colab" in sys.modules and not os.path.isdir("/content/s04-edition"):\n'
        f'    subprocess.check_call(["git", "clone", "--depth", "1", "--branch", {branch!r}, {repository_url!r}, "/content/s04-edition"])\n'
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "-r", "requirements.txt"], cwd="/content/s04-edition")\n'
        'if "google.colab" in sys.modules:\n'
        '    os.chdir("/content/s04-edition/book")\n'
        '    sys.path.insert(0, "/content/s04-edition/book")'
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": [TWIN_MARK]})


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
        nb.cells.insert(0, setup_cell(repository_url, branch))
    return nb


def repository_settings(root: Path = ROOT) -> tuple[str | None, str]:
    """``repository.url`` and ``repository.branch`` of ``_config.yml`` (the edition's public address)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    repository = config.get("repository") or {}
    return (repository.get("url") or None), (repository.get("branch") or "main")


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

    _copy(EDITION_FILES / "README.md", out / "README.md", files)
    _copy(EDITION_FILES / "gitignore", out / ".gitignore", files)  # the venv and build leftovers of an install
    _copy(root / "LICENSE", out / "LICENSE", files)
    lock = (root / "edition" / "requirements.lock").read_text(encoding="utf-8")
    (out / "requirements.txt").write_text(
        "# 学生版的安装文件（Binder 与 pip install -r requirements.txt 都读它）：课程库本身，以及每个依赖的确切版本\n"
        "./course_lib\n./course_check\n" + lock,
        encoding="utf-8",
    )
    (out / "runtime.txt").write_text(f"python-{PYTHON_VERSION}\n", encoding="utf-8")
    (out / ".python-version").write_text(f"{PYTHON_VERSION}\n", encoding="utf-8")
    files += [out / "requirements.txt", out / "runtime.txt", out / ".python-version"]

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

    problems += leak_scan.scan(out, leak_scan.collect_secrets(leak_scan.course_public_texts(root), root))
    unlisted = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p not in files)
    problems += [f"{name}: written but not on the allowlist" for name in unlisted]
    return Edition(out, files, problems)
