"""Running the real nbgrader commands on a course directory, and creating its gradebook before they run.

Where the gradebook is and what it holds: :mod:`autograder.ops.gradebook` (:func:`gradebook_url` is also
imported from here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autograder.confine.limits import require_sandbox
from autograder.course.course import Course
from autograder.ops.gradebook import gradebook_url, read_gradebook  # noqa: F401 (gradebook_url: API here too)


def nbgrader(args, course_dir: Course | Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` in the course folder ``course_dir``; raise with nbgrader's log if it fails.

    The interpreter's ``bin/`` goes first on PATH because nbgrader calls ``alembic`` by name;
    refuses (:func:`autograder.confine.limits.require_sandbox`) where grading kernels could not be sandboxed.
    """
    require_sandbox()
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(
        [os.path.join(bin_dir, "nbgrader"), *args],
        cwd=course_dir.folder if isinstance(course_dir, Course) else course_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def prepare_gradebook(course: Course | Path) -> None:
    """Create the course's gradebook tables and course row now, in this one process.

    nbgrader's ``Gradebook`` creates the tables, the alembic version and the course row whenever it
    finds them missing, with no lock: parallel grading jobs that all open a new gradebook (a deleted
    ``gradebook.db``, a new PostgreSQL database) at once fail with "table ... already exists" or a
    duplicate course. A class run calls this before it starts any job, so every job finds them made.
    """
    from nbgrader.api import Gradebook

    from autograder.ops.nbgrader_patches import install

    install()  # the schema revision read in this process, not by an `alembic heads` process
    course = Course.of(course)
    with Gradebook(course.gradebook_url, course_id=course.course_id or "default_course"):
        pass


def gradebook_scores(course: Course | Path, assignment: str) -> dict:
    """``{student: {notebook: {"auto": (score, max), "manual_max": max}}}`` from the gradebook
    (:func:`autograder.ops.gradebook.read_gradebook`); "manual" are the written answers."""
    submissions = read_gradebook(course, [assignment]).submissions(assignment)
    return {
        student: {
            name: {
                "auto": (sum(g.score for g in nb.automatic), sum(g.max_score for g in nb.automatic)),
                "manual_max": sum(g.max_score for g in nb.written),
            }
            for name, nb in sub.notebooks.items()
        }
        for student, sub in submissions.items()
        if sub.notebooks  # a submission without notebooks has no entry
    }
