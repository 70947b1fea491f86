"""The two nbgrader shortcuts (autograder/ops/nbgrader_speedups.py) decide exactly what nbgrader's own code does."""

import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError

from autograder.ops.nbgrader_speedups import SchemaCheckedOnce, alembic_head, install

GOOD = {
    "grade": True,
    "grade_id": "ex1",
    "locked": False,
    "points": 2,
    "schema_version": 3,
    "solution": True,
    "task": False,
}
BAD = [
    {**GOOD, "points": "two"},
    {**GOOD, "grade_id": 7},
    {**GOOD, "task": 1},
    {**GOOD, "solution": "yes"},
]


def test_the_schema_head_read_in_process_is_what_alembic_heads_prints():
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    # nbgrader's own function, in a process that has not loaded the course config (which installs ours)
    out = subprocess.run(
        [sys.executable, "-c", "from nbgrader.api import get_alembic_version; print(get_alembic_version())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert alembic_head() == out.stdout.strip() and len(alembic_head()) >= 8


@pytest.mark.parametrize("meta", [GOOD, *BAD])
def test_metadata_is_judged_as_jsonschema_validate_judges_it(meta):
    schema = MetadataValidator().schema
    checked = SchemaCheckedOnce()
    try:
        jsonschema.validate(meta, schema)
        expected = None
    except ValidationError as exc:
        expected = exc.message
    assert (expected is None) == (meta is GOOD)
    for _ in range(2):  # the first call checks the schema, the second reuses it
        try:
            checked.validate(meta, schema)
            got = None
        except ValidationError as exc:
            got = exc.message
        assert got == expected


def test_a_broken_schema_is_still_refused():
    with pytest.raises(jsonschema.SchemaError):
        SchemaCheckedOnce().validate({}, {"type": "no-such-type"})


def test_install_routes_nbgraders_validator_through_the_shortcuts_and_is_idempotent():
    import nbgrader.api
    import nbgrader.nbgraderformat.common as metadata

    install()
    first = metadata.jsonschema
    install()
    assert metadata.jsonschema is first and isinstance(first, SchemaCheckedOnce)
    assert nbgrader.api.get_alembic_version is alembic_head
    cell = {"cell_type": "code", "metadata": {"nbgrader": BAD[0]}, "source": ""}
    from nbformat import from_dict

    with pytest.raises(ValidationError):
        MetadataValidator().validate_cell(from_dict(cell))
