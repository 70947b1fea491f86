"""One nbgrader course folder, read once: its config, its term, and every path nbgrader gives its files.

A :class:`Course` executes the folder's ``nbgrader_config.py`` once (as nbgrader does, with traitlets'
``PyFileConfigLoader``), takes the term (``term.toml``) that the config's ``configure(c, here)`` call read
(or reads it once, for a folder without that call), and builds nbgrader's own ``CourseDirectory`` from the
config. Every path of nbgrader's steps comes from ``CourseDirectory.format_path``, so a course whose config
sets its own ``directory_structure`` or step folder names (``submitted_directory``, ...) is read where
nbgrader writes. The course's own files (``term.toml``, ``.grading/``) stay in :attr:`Course.folder`.

A command builds one Course and passes it on; nothing keeps one between commands or processes.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

from autograder.course.term import Term, load_term

CONFIG_FILE = "nbgrader_config.py"
#: where ``configure(c, here)`` leaves the term it read: ``c.Course.term`` (no nbgrader class is named Course)
TERM_SECTION, TERM_KEY = "Course", "term"
#: the student id nbgrader formats into the paths of the steps no student owns (source, release)
NO_STUDENT = "."
#: stand for "any student" and "any section" while a path is turned into a glob and a pattern (no path holds them)
_STUDENT, _SECTION = "\x00", "\x01"
_GROUPS = {_STUDENT: "student", _SECTION: "section"}


def read_config(folder: Path) -> Config:
    """``<folder>/nbgrader_config.py`` as nbgrader reads it (an empty config where there is none)."""
    try:
        return PyFileConfigLoader(CONFIG_FILE, path=str(folder)).load_config()
    except ConfigFileNotFound:
        return Config()


@dataclass(frozen=True, eq=False)
class Course:
    """An nbgrader course folder with its config and term, read once (:meth:`load`)."""

    folder: Path  # the course folder (absolute): nbgrader_config.py, term.toml, .grading/
    config: Config  # nbgrader_config.py, executed once
    term: Term
    directory: CourseDirectory  # nbgrader's, configured by ``config``

    @classmethod
    def load(cls, folder) -> Course:
        """Read the course in ``folder``: its config once, its term once. A broken ``term.toml`` is a ValueError."""
        folder = Path(folder).resolve()
        config = read_config(folder)
        term = config[TERM_SECTION].get(TERM_KEY) if TERM_SECTION in config else None
        directory = CourseDirectory(config=config)
        if "CourseDirectory.root" not in config:  # nbgrader runs in the course folder: its root is the folder
            directory.root = str(folder)
        return cls(folder, config, term if isinstance(term, Term) else load_term(folder), directory)

    @classmethod
    def of(cls, course) -> Course:
        """``course`` itself, or the Course of the folder ``course`` names (read now)."""
        return course if isinstance(course, Course) else cls.load(course)

    # --- what the config says ------------------------------------------------------------------------

    @property
    def course_id(self) -> str:
        return self.directory.course_id

    @property
    def gradebook_url(self) -> str:
        """The gradebook nbgrader uses: ``CourseDirectory.db_url`` (e.g. a PostgreSQL server), else its
        default ``gradebook.db`` in the course root."""
        return self.directory.db_url

    # --- nbgrader's paths -----------------------------------------------------------------------------

    def path(self, step: str, student: str, section: str) -> Path:
        """nbgrader's folder of ``step`` (a folder name such as ``directory.submitted_directory``) for
        ``student`` and ``section``: ``CourseDirectory.format_path``."""
        return Path(self.directory.format_path(step, student, section))

    def source(self, section: str) -> Path:
        return self.path(self.directory.source_directory, NO_STUDENT, section)

    def release(self, section: str) -> Path:
        return self.path(self.directory.release_directory, NO_STUDENT, section)

    def submitted(self, student: str, section: str) -> Path:
        return self.path(self.directory.submitted_directory, student, section)

    def autograded(self, student: str, section: str) -> Path:
        return self.path(self.directory.autograded_directory, student, section)

    def feedback(self, student: str, section: str) -> Path:
        return self.path(self.directory.feedback_directory, student, section)

    def submitters(self, section: str | None = None) -> list[str]:
        """The students with anything (a folder, a file, a link) at :meth:`submitted` of ``section``, or of
        any section when None; sorted."""
        return sorted({student for student, _ in self._found(self.directory.submitted_directory, None, section)})

    def feedback_folders(self, section: str) -> dict[str, Path]:
        """``{student: folder}`` of every feedback folder of ``section``."""
        found = self._found(self.directory.feedback_directory, None, section)
        return {student: path for (student, _), path in sorted(found.items())}

    def source_folders(self) -> dict[str, Path]:
        """``{section: folder}`` of every section with a source folder."""
        found = self._found(self.directory.source_directory, NO_STUDENT, None)
        return {section: path for (_, section), path in sorted(found.items())}

    def named_folders(self, step: str, student: str, section: str) -> list[Path]:
        """The folders of :meth:`path` that the student or the section names, outermost first, down to the
        step's own folder for them (``submitted/<student>``, ``submitted/<student>/<section>`` in nbgrader's
        default layout): a check that nothing on the way is a link looks at exactly these."""
        marked = Path(self.directory.format_path(step, _STUDENT, _SECTION)).parts
        first = next((i for i, part in enumerate(marked) if _STUDENT in part or _SECTION in part), len(marked) - 1)
        parts = self.path(step, student, section).parts
        return [Path(*parts[: i + 1]) for i in range(first, len(parts))]

    def _found(self, step: str, student: str | None, section: str | None) -> dict[tuple[str, str], Path]:
        """``{(student, section): path}`` of what exists at :meth:`path`; None: any student, any section."""
        template = self.directory.format_path(
            step, _STUDENT if student is None else student, _SECTION if section is None else section
        )
        wild = glob.escape(template).replace(_STUDENT, "*").replace(_SECTION, "*")
        pattern = _pattern(template)
        found = {}
        for path in glob.glob(wild, include_hidden=True):
            match = pattern.fullmatch(path)
            if match:
                named = match.groupdict()
                found[(named.get("student", student), named.get("section", section))] = Path(path)
        return found


def _pattern(template: str) -> re.Pattern:
    """``template`` (a path with wildcards) as a regular expression: each wildcard one path component, in a
    group named ``student`` or ``section``; a layout that names one twice must name the same both times."""
    regex, seen = [], set()
    for piece in re.split(f"({_STUDENT}|{_SECTION})", template):
        name = _GROUPS.get(piece)
        if name is None:
            regex.append(re.escape(piece))
        else:
            regex.append(f"(?P={name})" if name in seen else f"(?P<{name}>[^{re.escape(os.sep)}]+)")
            seen.add(name)
    return re.compile("".join(regex))
