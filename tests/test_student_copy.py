"""The student notebooks the book links to are the release, and hold nothing a release may not."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

from autograder.authoring import sources
from autograder.authoring.release_scan import scan_release
from autograder.authoring.student_copy import student_notebook

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "autograder" / "data"


def _cells(nb):
    return [(cell.cell_type, cell.source, cell.metadata.get("nbgrader")) for cell in nb.cells]


@pytest.mark.nbgrader
@pytest.mark.parametrize("section", ["s04_1", "s04_6"])  # the sections other tests release anyway
def test_the_student_copy_is_what_nbgrader_releases(section, released_course, tmp_path):
    course = released_course(section, tmp_path / "course")
    released = sorted((course / "release" / section).glob("*.ipynb"))
    assert released
    for path in released:
        ours = student_notebook(sources.source_path(path.stem))
        assert _cells(ours) == _cells(nbformat.read(path, as_version=4)), path.name


def test_every_student_copy_passes_the_release_scan(tmp_path):
    problems = []
    for md in sources.source_notebooks():
        release, source = tmp_path / "release" / md.stem, tmp_path / "source" / md.stem
        release.mkdir(parents=True)
        source.mkdir(parents=True)
        nbformat.write(student_notebook(md), release / f"{md.stem}.ipynb")
        # the scan compares with the source notebook, solutions included
        nbformat.write(sources.complete_metadata(jupytext.read(md), md.name), source / f"{md.stem}.ipynb")
        problems += scan_release(release, source, DATA)
    assert not problems, "\n".join(problems)
