"""The student notebooks the book links to hold nothing a release may not (that they are the release itself,
through nbgrader, is tests/test_grading_pipeline.py)."""

from __future__ import annotations


from autograder.authoring import sources
from autograder.authoring.student_copy import write_student_copies


def test_every_student_copy_passes_the_release_scan(tmp_path):
    written, problems = write_student_copies(tmp_path)
    assert set(written) == {md.stem for md in sources.source_notebooks()}
    assert not problems, "\n".join(problems)
