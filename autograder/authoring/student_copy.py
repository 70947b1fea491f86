"""The student version of one exercise notebook, made in memory, for the book's download links.

``nbgrader generate_assignment`` makes the release a class works on; it needs the course folder and its
gradebook, and takes about ten seconds per section. The book links every exercise to its student
notebook and must build in minutes, so this module applies the same nbgrader preprocessors, in the same
order, with the course's own ``nbgrader_config.py`` (the solution stubs), to the notebook built from the
source: everything except ``SaveCells``, the step that writes the gradebook. The result is the
notebook ``generate_assignment`` releases (``tests/test_student_copy.py`` compares the two), and
:func:`autograder.authoring.release_scan.scan_release` checks it like any release.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jupytext
import nbformat
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    LockCells,
)

from autograder.authoring.release_scan import scan_release
from autograder.authoring.sources import COURSE_DIR, complete_metadata, source_notebooks
from autograder.course.course import Course

# nbgrader's GenerateAssignment.preprocessors, less IncludeHeaderFooter and InstantiateTests (the course
# configures neither a header nor autotests) and SaveCells (the gradebook).
_RELEASE_STEPS = (
    LockCells,
    ClearSolutions,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
)


def student_notebook(md_path: Path, course: Course | Path = COURSE_DIR) -> nbformat.NotebookNode:
    """The release version of the exercise whose source is ``md_path``: no solutions, no hidden checks."""
    return _release(complete_metadata(jupytext.read(md_path), md_path.name), md_path, Course.of(course))


def _release(source: nbformat.NotebookNode, md_path: Path, course: Course) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(source)  # a copy: the preprocessors change the notebook they are given
    resources = {"nbgrader": {"notebook": md_path.stem, "assignment": md_path.parent.name}}
    for step in _RELEASE_STEPS:
        nb, resources = step(config=course.config).preprocess(nb, resources)
    return nb


def write_student_copies(out: Path, course_dir: Path = COURSE_DIR) -> tuple[dict[str, Path], list[str]]:
    """Write every exercise's student notebook to ``out/<section>/<exercise>.ipynb`` and scan them.

    Returns ``({exercise: path}, problems)``; ``problems`` is what :func:`scan_release` finds (empty: clean).
    The scan compares with the source notebooks, written meanwhile to ``out/.source`` and removed after.
    """
    written, problems, course = {}, [], Course.load(course_dir)
    for md in source_notebooks(course):
        release, source_dir = out / md.parent.name, out / ".source" / md.parent.name
        release.mkdir(parents=True, exist_ok=True)
        source_dir.mkdir(parents=True, exist_ok=True)
        source = complete_metadata(jupytext.read(md), md.name)
        nbformat.write(source, source_dir / f"{md.stem}.ipynb")
        written[md.stem] = release / f"{md.stem}.ipynb"
        nbformat.write(_release(source, md, course), written[md.stem])
    for section in sorted({path.parent for path in written.values()}):
        problems += scan_release(section, out / ".source" / section.name, course.folder.parent / "autograder" / "data")
    shutil.rmtree(out / ".source", ignore_errors=True)
    return written, problems
