"""The only place this course changes nbgrader's own code: two costs that repeat for nothing.

* A new gradebook asks for the newest revision of nbgrader's schema by running ``alembic heads`` as a
  process (``nbgrader.api.get_alembic_version``): about 2 CPU s, mostly imports, for every new course,
  scratch course and test course. :func:`alembic_head` reads the same migration scripts in this process.
* nbgrader checks each cell's metadata with ``jsonschema.validate``, which first checks the *schema* itself,
  on every call: every cell of every notebook, several times per submission. :class:`SchemaCheckedOnce`
  checks each schema once and then validates exactly as ``jsonschema.validate`` does (the same best-match
  error). Its cache is keyed by the schema's content and holds a few schemas at most.

nbgrader offers no plugin point for either, so each is a :class:`Patch`: the attribute it replaces, and what it
assumes about nbgrader's code, checked by reading that code before the patch goes in (:func:`install`, called by
:func:`autograder.course.configure` and by :func:`autograder.ops.nbgrader_run.prepare_gradebook`). An nbgrader
upgrade that breaks an assumption leaves nbgrader's own code in place, with a warning: slower, never wrong.
``tests/test_nbgrader_patches.py`` compares each replacement with what it replaces and fails on such an upgrade.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@functools.cache
def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema (what ``alembic heads`` prints first)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()


@functools.lru_cache(maxsize=8)
def _validator(schema_json: str):
    """A validator of the schema (checked once), by the schema's content."""
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class SchemaCheckedOnce:
    """Stands in for the ``jsonschema`` module in nbgrader's metadata validator (it only calls ``validate``)."""

    def validate(self, instance, schema: dict) -> None:
        """``jsonschema.validate(instance, schema)``, the schema checked on its first use only."""
        from jsonschema.exceptions import best_match

        error = best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(instance))
        if error is not None:
            raise error


def _alembic_assumptions(original) -> list[str]:
    import nbgrader.api
    from nbgrader.dbutil import ALEMBIC_DIR

    problems = []
    if "get_alembic_version()" not in inspect.getsource(nbgrader.api.Gradebook.__init__):
        problems.append("Gradebook.__init__ no longer calls get_alembic_version() by its module-level name")
    if "heads" not in inspect.getsource(original):
        problems.append("get_alembic_version no longer asks alembic for its heads")
    if not (Path(ALEMBIC_DIR) / "versions").is_dir():
        problems.append(f"no migration scripts in {ALEMBIC_DIR}/versions")
    return problems


def _schema_assumptions(original) -> list[str]:
    import nbgrader.nbgraderformat.common as metadata

    used = set(re.findall(r"\bjsonschema\.(\w+)", inspect.getsource(metadata)))
    if used != {"validate"}:
        return [f"nbgrader's metadata validator uses jsonschema.{sorted(used)}, not only jsonschema.validate"]
    return []


@dataclass(frozen=True)
class Patch:
    """``module.attribute`` replaced by ``replacement``, if ``assumptions(original)`` finds no problem."""

    module: str
    attribute: str
    replacement: object
    assumptions: Callable[[object], list[str]]

    def original(self):
        return ORIGINALS.get((self.module, self.attribute)) or getattr(
            importlib.import_module(self.module), self.attribute
        )

    def problems(self) -> list[str]:
        return self.assumptions(self.original())


PATCHES = (
    Patch("nbgrader.api", "get_alembic_version", alembic_head, _alembic_assumptions),
    Patch("nbgrader.nbgraderformat.common", "jsonschema", SchemaCheckedOnce(), _schema_assumptions),
)
#: what each patched attribute was before :func:`install` replaced it
ORIGINALS: dict[tuple[str, str], object] = {}


def install() -> list[str]:
    """Put every patch whose assumptions hold in place (idempotent); the problems of those left out."""
    skipped = []
    for patch in PATCHES:
        key = (patch.module, patch.attribute)
        if key in ORIGINALS:
            continue
        problems = patch.problems()
        if problems:
            skipped.extend(f"{patch.module}.{patch.attribute}: {p}" for p in problems)
            continue
        module = importlib.import_module(patch.module)
        ORIGINALS[key] = getattr(module, patch.attribute)
        setattr(module, patch.attribute, patch.replacement)
    for problem in skipped:
        warnings.warn(f"nbgrader patch left out, nbgrader's own code used (upgrade?): {problem}", stacklevel=2)
    return skipped
