"""The student notebooks the book links to are the release, and hold nothing a release may not."""

from __future__ import annotations


import nbformat
import pytest

from autograder.authoring import sources
from autograder.authoring.student_copy import student_notebook, write_student_copies


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
    written, problems = write_student_copies(tmp_path)
    assert set(written) == {md.stem for md in sources.source_notebooks()}
    assert not problems, "\n".join(problems)
