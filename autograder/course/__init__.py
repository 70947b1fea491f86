"""What makes an nbgrader course folder this course: :func:`configure`, called once by its ``nbgrader_config.py``,
and :class:`Course`, one course folder read once (its config, its term, nbgrader's paths).

Modules of ``autograder/`` import ``autograder.course.course`` itself: this package imports :func:`configure`,
whose machinery imports them.
"""

from autograder.course.configure import configure
from autograder.course.course import Course

__all__ = ["Course", "configure"]
