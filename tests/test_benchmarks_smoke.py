"""Smoke test of benchmarks/run.py: the quick sizes run, exit 0, and the gradients that must agree do.

Targets (PASS/MISS) are not asserted; they mean nothing at the quick sizes.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"
KEYS = {"grad_vs_forward", "adjoint_vs_fd", "vs_diffrax", "checkpointing"}


def _numbers(value, path="measured"):
    """Yield (path, number) for every number in a nested dict; None (memory 'n/a') is skipped."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        yield path, value


def test_quick_benchmarks(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"run.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    # the printed table is the JSON's, and each target's PASS/MISS is what its measured ratio gave
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["benchmark"] and line.split()[-1] == "result")
    printed = [line.split()[-1] for line in lines[head + 2 : head + 2 + len(doc["table"])]]
    assert printed == [row["result"] for row in doc["table"]]
    met = [t["met"] for b in doc["benchmarks"] for t in b["targets"]]
    assert [result for result in printed if result != "n/a"] == ["PASS" if m else "MISS" for m in met]
    assert doc["quick"] is True
    assert doc["correctness_ok"] is True
    benches = {b["key"]: b for b in doc["benchmarks"]}
    assert set(benches) == KEYS

    for key, b in benches.items():
        numbers = list(_numbers(b["measured"]))
        assert numbers, key
        for path, x in numbers:
            assert math.isfinite(x), f"{key}: {path} = {x}"
        assert b["targets"], key
        for t in b["targets"]:
            assert math.isfinite(t["ratio"]) and t["ratio"] > 0, (key, t)
            assert isinstance(t["met"], bool)
        assert b["checks"], key
        for c in b["checks"]:
            assert c["passed"], f"{key}: {c['name']} = {c['value']} (tol {c['tol']})"

    # the agreement checks the brief asks for are really recorded
    assert benches["adjoint_vs_fd"]["measured"]["max_rel_err_fd_vs_adjoint"] <= 1e-6
    assert benches["vs_diffrax"]["measured"]["max_rel_err_grad"] <= 1e-8
    assert benches["vs_diffrax"]["measured"]["diffrax_num_steps"] == benches["vs_diffrax"]["config"]["steps"]
    assert len(doc["table"]) >= 4


def test_quick_contact_benchmarks():
    """benchmarks/run_contact.py --quick: IFT and unrolled solver gradients agree, rollouts stay finite."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "run_contact.py"
    proc = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"run_contact.py --quick failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert "all checks passed" in proc.stdout


def _run_budget():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "run_budget.py"
    spec = importlib.util.spec_from_file_location("run_budget", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_budget_benchmark_times_what_grading_runs_with_an_honest_unjitted_jax():
    """benchmarks/run_budget.py: the cells it times are the ones grading runs, its un-jitted ``lax.scan``
    is the real one as a Python loop, and a whole notebook runs through it without error."""
    import jax
    import jax.numpy as jnp

    budget = _run_budget()
    cells = budget.running_cells("s04_7_ex1")
    labels = [label for label, _, _ in cells]
    assert "public_checks" not in labels and "selfcheck" not in labels
    assert {"setup", "adjoint_pass_answer", "test_adjoint_pass"} <= set(labels)
    assert [label for label, _, solution in cells if solution] == ["adjoint_pass_answer", "pendulum_adjoint_answer"]

    shim, lax = budget._unjitted_jax()
    f = lambda c, x: (c * 0.5 + x["a"], {"c": c, "x": x["a"] ** 2})  # noqa: E731
    xs = {"a": jnp.arange(5.0)}
    for reverse in (False, True):
        want, got = jax.lax.scan(f, 1.0, xs, reverse=reverse), lax.scan(f, 1.0, xs, reverse=reverse)
        assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.allclose(a, b)), want, got))
    assert shim.jit(f) is f and shim.jit(static_argnames="n")(f) is f and shim.vmap is jax.vmap

    for jit in (True, False):
        run = budget.time_one("s04_7_ex1", jit)
        assert run["error"] == "" and set(run["cells"]) == set(labels), run
