"""What makes an nbgrader course folder this course: :func:`configure`, called once by its ``nbgrader_config.py``."""

from autograder.course.configure import configure

__all__ = ["configure"]
