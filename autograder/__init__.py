"""autograder: reference solutions, tolerant gradient comparison and instructor commands.

Graded notebook cells call :func:`grade`, which only records the student's results inside the
(sandboxed) kernel; the score is computed outside it (:mod:`autograder.verdict.preprocessors`).
Instructors use ``python -m autograder`` (see the README). The reference solutions under
``autograder/authoring/reference`` and the reference data under ``autograder/data`` are instructor-only:
they never go into a student release and a grading kernel cannot read them.
"""

from autograder.kernel.capture import grade

__all__ = ["grade"]
__version__ = "0.1.0"
