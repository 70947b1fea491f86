"""Instructor-only reference solutions and the graded checks built on them, one module per section."""

import course_lib as cl

# References are computed in float64, whatever imported them first.
cl.enable_float64()

from autograder.reference import s04_1, s04_2, s04_3  # noqa: E402

#: nbgrader assignments (one per section) that have exercises.
SECTIONS = ("s04_1", "s04_2", "s04_3")

#: exercise id -> plausible wrong answers (pasted into a release by the self-test).
WRONG_ANSWERS = {**s04_1.WRONG_ANSWERS, **s04_2.WRONG_ANSWERS, **s04_3.WRONG_ANSWERS}
