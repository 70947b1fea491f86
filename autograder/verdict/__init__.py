"""The trusted side of grading: nbgrader preprocessors that score recorded results against the reference data.

Never imports :mod:`autograder.authoring` (reference solutions) or :mod:`autograder.ops`.
"""
