"""Two of nbgrader's costs that repeat for nothing, removed without changing what nbgrader decides.

* A new gradebook asks for the newest revision of nbgrader's schema by running ``alembic heads`` as a
  process (``nbgrader.api.get_alembic_version``): about 2 CPU s, mostly imports, for every new course,
  scratch course and test course. :func:`alembic_head` reads the same migration scripts in this process.
* nbgrader checks each cell's metadata with ``jsonschema.validate``, which first checks the *schema* itself,
  on every call: every cell of every notebook, several times per submission. :class:`SchemaCheckedOnce`
  checks each schema once and then validates exactly as ``jsonschema.validate`` does (the same best-match error).

:func:`install` puts both in place. The course's nbgrader config calls it, so every nbgrader command, formgrader
and the grading workers use them, and so does :func:`autograder.ops.nbgrader_run.prepare_gradebook`.
``tests/test_nbgrader_speedups.py`` compares each with what it replaces.
"""

from __future__ import annotations

import functools
import threading


@functools.cache
def alembic_head() -> str:
    """The newest revision of nbgrader's gradebook schema (what ``alembic heads`` prints first)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()


class SchemaCheckedOnce:
    """Stands in for the ``jsonschema`` module in nbgrader's metadata validator (it only calls ``validate``)."""

    def __init__(self):
        self._validators: dict[int, tuple] = {}  # id(schema) -> (schema, validator); the schema keeps its id
        self._lock = threading.Lock()

    def _validator(self, schema: dict):
        entry = self._validators.get(id(schema))
        if entry is None or entry[0] is not schema:
            import jsonschema

            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            entry = (schema, cls(schema))
            with self._lock:
                self._validators[id(schema)] = entry
        return entry[1]

    def validate(self, instance, schema: dict) -> None:
        """``jsonschema.validate(instance, schema)``, the schema checked on its first use only."""
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(schema).iter_errors(instance))
        if error is not None:
            raise error


def install() -> None:
    """Replace nbgrader's ``alembic heads`` process and per-cell schema check in this process (idempotent)."""
    import nbgrader.api
    import nbgrader.nbgraderformat.common as metadata

    nbgrader.api.get_alembic_version = alembic_head
    if not isinstance(metadata.jsonschema, SchemaCheckedOnce):
        metadata.jsonschema = SchemaCheckedOnce()
