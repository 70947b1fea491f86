"""The limits cross from the grader to the launcher as one serialised object (autograder/confine/limits.py).

What the launcher parses must be exactly what the grader meant: every field, none unknown, none of the wrong
type, and no default filled in on the launcher's side (a missing ``sandbox`` must not turn the sandbox on or off).
"""

import dataclasses
import json

import pytest

from autograder.confine import launcher
from autograder.confine.kernel import launcher_argv
from autograder.confine.limits import Limits

ODD = dataclasses.replace(Limits(), cpu_seconds=60, max_processes=64, notebook_budget_s=30, sandbox=False)


@pytest.mark.parametrize("limits", [Limits(), ODD, dataclasses.replace(ODD, sandbox=True)])
def test_the_launcher_reads_back_what_the_grader_wrote(tmp_path, limits):
    argv = launcher_argv(tmp_path, 1_900_000_001, "s04_1_ex1", limits, compile_cache=tmp_path / "cache")
    assert argv[1:3] == ["-m", "autograder.confine.launcher"]
    opts, rest = launcher.parse([*argv[3:], "-f", str(tmp_path / "connection.json"), "--Session.key=x"])
    assert opts.limits == limits and type(opts.limits.notebook_budget_s) is type(limits.notebook_budget_s)
    assert (opts.scratch, opts.uid, opts.exercise, opts.compile_cache) == (
        tmp_path,
        1_900_000_001,
        "s04_1_ex1",
        tmp_path / "cache",
    )
    assert opts.connection_file == tmp_path / "connection.json" and rest == ["--Session.key=x"]
    flags = [a for a in argv if a.startswith("--")]
    assert flags == ["--scratch", "--uid", "--exercise", "--compile-cache", "--limits"]  # all limits: one value


def _with(**changes) -> str:
    values = {**dataclasses.asdict(Limits()), **changes}
    return json.dumps({k: v for k, v in values.items() if v is not ...})


REFUSED = [
    (_with(wall_seconds=5), "unknown field 'wall_seconds'"),
    (_with(sandbox=...), "missing field 'sandbox'"),
    (_with(memory_bytes=...), "missing field 'memory_bytes'"),
    (_with(memory_bytes=4.5e9), "memory_bytes must be int"),
    (_with(max_processes=True), "max_processes must be int"),
    (_with(sandbox=1), "sandbox must be bool"),
    (_with(sandbox="off"), "sandbox must be bool"),
    (_with(notebook_budget_s="150"), "notebook_budget_s must be float"),
    ("[1, 2]", "must be a JSON object"),
    ("sandbox=off", "Expecting value"),
]


@pytest.mark.parametrize("text,message", REFUSED, ids=[f"{i}-{m}" for i, (_, m) in enumerate(REFUSED)])
def test_limits_that_are_not_exactly_limits_are_refused(text, message, capsys):
    with pytest.raises(ValueError, match=message):
        Limits.from_json(text)
    with pytest.raises(SystemExit):  # the launcher stops before any limit or confinement step
        launcher.parse(["--scratch", "/tmp", "--limits", text, "-f", "/tmp/connection.json"])
    assert message in capsys.readouterr().err


def test_the_launcher_refuses_to_start_without_limits(capsys):
    with pytest.raises(SystemExit):
        launcher.parse(["--scratch", "/tmp", "-f", "/tmp/connection.json"])
    assert "--limits" in capsys.readouterr().err


def test_the_sandbox_switch_is_read_when_limits_are_made_not_at_import(monkeypatch):
    # a long-lived process (a class run, a formgrader server) follows the environment it has now
    monkeypatch.setenv("S04_GRADING_SANDBOX", "off")
    assert Limits().sandbox is False
    monkeypatch.setenv("S04_GRADING_SANDBOX", "on")
    assert Limits().sandbox is True
    monkeypatch.delenv("S04_GRADING_SANDBOX")
    assert Limits().sandbox is True
