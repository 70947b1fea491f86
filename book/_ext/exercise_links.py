"""``{exercise}`s04_4_ex1``: a download link to the exercise's student notebook.

Before Sphinx reads a page, every exercise of ``assignments/source`` is turned into its student
version (:func:`autograder.authoring.student_copy.student_notebook`: the nbgrader release steps, no
solutions, no hidden checks) under ``_build/student_notebooks``, and the release scan runs over them; a
finding fails the build. The role makes a Sphinx download reference to that file, so the HTML build
copies it to ``_downloads/`` and the link downloads it (``download`` attribute). An unknown exercise
id is a build error naming the known ones.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[2]
TITLE = "下载学生版 notebook（无答案），完成后按课程说明提交"


def _write_student_notebooks(app):
    if str(ROOT) not in sys.path:  # the book builds from the repository root, autograder/ is not installed
        sys.path.insert(0, str(ROOT))
    from autograder.authoring.student_copy import write_student_copies

    out = Path(app.outdir).parent / "student_notebooks"
    shutil.rmtree(out, ignore_errors=True)
    written, problems = write_student_copies(out)
    if problems:
        raise ExtensionError("student notebooks failed the release scan:\n" + "\n".join(problems))
    app.env.course_student_notebooks = {name: str(path) for name, path in written.items()}


def exercise_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    known = getattr(env, "course_student_notebooks", {})
    exercise = text.strip()
    if exercise not in known:
        msg = inliner.reporter.error(f"unknown exercise {exercise!r}; known: {', '.join(sorted(known))}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    # relative to the page's folder: the build folder may lie outside the sources (--path-output)
    target = os.path.relpath(known[exercise], Path(env.doc2path(env.docname)).parent)
    node = addnodes.download_reference(rawtext, "", reftarget=target, refdoc=env.docname, refexplicit=True)
    node["reftitle"] = TITLE
    node += nodes.literal(exercise, exercise, classes=["xref", "download"])
    return [node], []


def setup(app):
    app.connect("builder-inited", _write_student_notebooks)
    app.add_role("exercise", exercise_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
