"""Running the real nbgrader commands on a course directory and reading its gradebook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autograder.confine.limits import require_sandbox


def nbgrader(args, course_dir: Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` in ``course_dir``; raise with nbgrader's log if it fails.

    The interpreter's ``bin/`` goes first on PATH because nbgrader calls ``alembic`` by name;
    refuses (:func:`autograder.confine.limits.require_sandbox`) where grading kernels could not be sandboxed.
    """
    require_sandbox()
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(
        [os.path.join(bin_dir, "nbgrader"), *args],
        cwd=course_dir,
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


def _course_directory_config(course_dir: Path) -> dict:
    """The ``CourseDirectory`` section of the course's ``nbgrader_config.py`` (empty without one)."""
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(Path(course_dir).resolve())).load_config()
    except ConfigFileNotFound:
        return {}
    return dict(config["CourseDirectory"]) if "CourseDirectory" in config else {}


def gradebook_url(course_dir: Path, config: dict | None = None) -> str:
    """The gradebook nbgrader uses for this course: ``CourseDirectory.db_url`` from the course's
    ``nbgrader_config.py`` (e.g. a PostgreSQL server), else nbgrader's default ``gradebook.db``.
    ``config``: that ``CourseDirectory`` section, when the caller has read it already."""
    url = (_course_directory_config(course_dir) if config is None else config).get("db_url")
    return url or f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}"


def prepare_gradebook(course_dir: Path) -> None:
    """Create the course's gradebook tables and course row now, in this one process.

    nbgrader's ``Gradebook`` creates the tables, the alembic version and the course row whenever it
    finds them missing, with no lock: parallel grading jobs that all open a new gradebook (a deleted
    ``gradebook.db``, a new PostgreSQL database) at once fail with "table ... already exists" or a
    duplicate course. A class run calls this before it starts any job, so every job finds them made.
    """
    from nbgrader.api import Gradebook

    config = _course_directory_config(course_dir)
    with Gradebook(gradebook_url(course_dir, config), course_id=config.get("course_id") or "default_course"):
        pass


def gradebook_scores(course_dir: Path, assignment: str) -> dict:
    """``{student: {notebook: {"auto": (score, max), "manual_max": max}}}`` from the gradebook."""
    from nbgrader.api import Gradebook

    out: dict = {}
    with Gradebook(gradebook_url(course_dir)) as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                auto = [g for g in nb.grades if g.cell.cell_type == "code"]
                manual = [g for g in nb.grades if g.cell.cell_type == "markdown"]
                out.setdefault(sub.student.id, {})[nb.name] = {
                    "auto": (sum(g.score for g in auto), sum(g.max_score for g in auto)),
                    "manual_max": sum(g.max_score for g in manual),
                }
    return out
