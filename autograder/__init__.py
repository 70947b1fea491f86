"""autograder: reference solutions, tolerant gradient comparison and instructor commands.

The grading pipeline is built on top of ``course_lib``; this package is installed
alongside it so that nbgrader's graded cells can import it.
"""

__version__ = "0.1.0"
