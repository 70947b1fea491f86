"""Instructor-only reference solutions and the exercise specs built on them, one module per section.

Every module ``autograder/authoring/reference/<section>.py`` is one nbgrader assignment and exports
``EXERCISES``, a sequence of :class:`autograder.authoring.registry.Exercise`. Sections are
discovered, so adding a section means adding its module (and its sources under assignments/source/).
"""

import importlib

import course_lib as cl
from autograder.authoring.sections import SECTIONS

# References are computed in float64, whatever imported them first.
cl.enable_float64()

__all__ = ["EXERCISES", "SECTIONS", "SHORTCUTS", "WRONG_ANSWERS"]

#: exercise id -> its spec
EXERCISES = {}
for _section in SECTIONS:
    for _spec in importlib.import_module(f"{__name__}.{_section}").EXERCISES:
        if _spec.id in EXERCISES:
            raise ValueError(f"exercise {_spec.id} declared twice")
        if not _spec.id.startswith(f"{_section}_"):
            raise ValueError(f"exercise {_spec.id} declared in the module of section {_section}")
        EXERCISES[_spec.id] = _spec

#: exercise id -> plausible wrong answers (pasted into a release by the self-test).
WRONG_ANSWERS = {exercise: spec.wrong_answers for exercise, spec in EXERCISES.items() if spec.wrong_answers}

#: exercise id -> submissions that skip the concept (pasted into a release by the self-test; each must lose points).
SHORTCUTS = {exercise: spec.shortcuts for exercise, spec in EXERCISES.items() if spec.shortcuts}
