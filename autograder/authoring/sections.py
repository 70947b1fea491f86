"""The course's sections (nbgrader assignments), found without importing any reference solution.

A section is a module ``autograder/authoring/reference/<section>.py``; listing the folder is enough, so the
instructor commands that only need the names (``export``, ``collect``, ``term``, ...) start without JAX.
"""

import pkgutil
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"

#: nbgrader assignments (one per section) that have exercises, in chapter order.
SECTIONS = tuple(
    sorted(
        (m.name for m in pkgutil.iter_modules([str(REFERENCE_DIR)]) if not m.name.startswith("_")),
        key=lambda name: (not name.startswith("s04_"), name),
    )
)  # the project last
