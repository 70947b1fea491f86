"""Instructor-only reference solutions and the graded checks built on them, one module per section.

Every module ``autograder/authoring/reference/<section>.py`` is one nbgrader assignment: importing
it registers its checks and it exports ``WRONG_ANSWERS``. Sections are discovered, so
adding a section means adding its module (and its sources under assignments/source/).
"""

import importlib
import pkgutil

import course_lib as cl

# References are computed in float64, whatever imported them first.
cl.enable_float64()

#: nbgrader assignments (one per section) that have exercises, in chapter order.
SECTIONS = tuple(sorted((m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")),
                         key=lambda name: (not name.startswith("s04_"), name)))  # the project last

_MODULES = [importlib.import_module(f"{__name__}.{section}") for section in SECTIONS]

#: exercise id -> plausible wrong answers (pasted into a release by the self-test).
WRONG_ANSWERS = {}
for _module in _MODULES:
    # a module without WRONG_ANSWERS is caught by the test that every graded exercise has one
    for _exercise, _answers in getattr(_module, "WRONG_ANSWERS", {}).items():
        if _exercise in WRONG_ANSWERS:
            raise ValueError(f"wrong answers for {_exercise} defined in two reference modules")
        WRONG_ANSWERS[_exercise] = _answers
