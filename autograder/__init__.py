"""autograder: reference solutions, tolerant gradient comparison and instructor commands.

Graded notebook cells call :func:`grade`; instructors use ``python -m autograder``
(see the README). The reference solutions under ``autograder/reference`` and the
reference data under ``autograder/data`` are instructor-only: they never go into a
student release.
"""

from autograder.grading import grade

__all__ = ["grade"]
__version__ = "0.1.0"
