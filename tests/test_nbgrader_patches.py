"""nbgrader's two patches (autograder/ops/nbgrader_patches.py) decide exactly what nbgrader's own code does, what
each assumes about nbgrader's code still holds (an upgrade that breaks it fails here), and a patch whose
assumption fails is left out."""

import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError

from autograder.ops import nbgrader_patches
from autograder.ops.nbgrader_patches import PATCHES, Patch, SchemaCheckedOnce, alembic_head, install

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


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: f"{p.module}.{p.attribute}")
def test_what_each_patch_assumes_about_nbgraders_code_holds(patch):
    assert patch.problems() == []


def test_a_patch_whose_assumption_fails_is_left_out(monkeypatch):
    import types

    target = types.ModuleType("fake_nbgrader_part")
    target.thing = original = object()
    monkeypatch.setitem(sys.modules, "fake_nbgrader_part", target)
    broken = Patch("fake_nbgrader_part", "thing", object(), lambda original: ["it changed"])
    monkeypatch.setattr(nbgrader_patches, "PATCHES", (broken,))
    with pytest.warns(UserWarning, match="it changed"):
        assert install() == ["fake_nbgrader_part.thing: it changed"]
    assert target.thing is original


def test_the_schema_cache_is_keyed_by_content_and_bounded():
    schema = MetadataValidator().schema
    checked = SchemaCheckedOnce()
    for n in range(20):  # equal schemas in new objects: one entry, not one per object
        checked.validate(GOOD, dict(schema))
    info = nbgrader_patches._validator.cache_info()
    assert info.maxsize == 8 and info.currsize <= 8
    for n in range(20):  # twenty different schemas: never more than eight kept
        checked.validate({"n": n}, {"type": "object", "title": f"schema {n}"})
    assert nbgrader_patches._validator.cache_info().currsize == 8
