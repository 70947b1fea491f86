"""Tolerances that belong to the check: the measured spread of correct answers and what the generator derives from it.

The measurement itself runs on one small exercise (s04_2_ex1: a few seconds per variant); the full
measurement is ``python -m autograder regenerate`` (make regenerate).
"""

import json
import math

import numpy as np
import pytest

from autograder.authoring import regenerate as data
from autograder.authoring import spread
from autograder.authoring.cases import case_value
from autograder.authoring.registry import Check, Mistake, Output
from course_check.compare import tolerance
from autograder.verdict.data import DATA_DIR

#: one worker runs the module, so its module fixture is built once
pytestmark = pytest.mark.xdist_group("spread")

SMALL = "s04_2_ex1"


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """``s04_2_ex1`` regenerated with its spread measured under every variant, in a scratch folder."""
    root = tmp_path_factory.mktemp("spread")
    [path] = data.regenerate(
        [SMALL], out_dir=root / "data", inputs_dir=root / "inputs", public_dir=root / "public", measure=True
    )
    return root, json.loads(path.read_text(encoding="utf-8"))


def test_measured_spread_is_covered_by_the_committed_tolerance(measured):
    """Correct answers under this machine's variants pass the committed data, with the safety margin."""
    _, fresh = measured
    committed = json.loads((DATA_DIR / f"{SMALL}.json").read_text(encoding="utf-8"))
    for name, spec in fresh.items():
        for new, old in zip(spec["outputs"], committed[name]["outputs"], strict=True):
            assert math.isfinite(new["spread"]) and new["spread"] >= 0.0
            assert new["rtol"] >= max(tolerance(new["kind"]), data.SAFETY * new["spread"])
            assert data.SAFETY * new["spread"] <= old["rtol"], (name, new["label"], new["spread"], old["rtol"])


def test_a_plain_regeneration_keeps_the_stored_spread_and_measures_nothing(measured, monkeypatch, tmp_path):
    root, _ = measured
    monkeypatch.setattr(
        spread, "measure", lambda inputs, expected, variants=None: pytest.fail(f"measured {list(inputs)}")
    )
    [again] = data.regenerate(
        [SMALL],
        out_dir=tmp_path / "data",
        inputs_dir=tmp_path / "inputs",
        public_dir=tmp_path / "public",
        spread_from=root / "data",
    )
    assert again.read_bytes() == (root / "data" / again.name).read_bytes()  # deterministic on one machine
    assert (tmp_path / "inputs" / again.name).read_bytes() == (root / "inputs" / again.name).read_bytes()


def test_a_check_without_stored_spread_is_measured(monkeypatch, tmp_path):
    asked = []

    def fake_measure(inputs, expected, variants=None):
        asked.extend(inputs)
        return {key: [0.0] * len(expected[key][0]) for key in inputs}

    monkeypatch.setattr(spread, "measure", fake_measure)
    data.regenerate(
        [SMALL], out_dir=tmp_path, inputs_dir=tmp_path, public_dir=tmp_path, spread_from=tmp_path / "nothing-stored"
    )
    assert sorted(asked) == [f"{SMALL}.ab_explicit", f"{SMALL}.ab_semi_implicit"]


def test_the_reference_reproduces_itself_on_the_stored_inputs():
    """A variant without any setting measures zero: the references are deterministic on the stored inputs."""
    spec = json.loads((DATA_DIR / f"{SMALL}.json").read_text(encoding="utf-8"))["ab_explicit"]
    key = f"{SMALL}.ab_explicit"
    got = spread.measure(
        {key: [c["inputs"] for c in spec["cases"]]},
        {key: [c["expected"] for c in spec["cases"]]},
        variants={"same machine": {}},
    )
    assert got == {key: [0.0, 0.0]}


def test_deviation_and_spread_of():
    e = [[np.array([1.0, -4.0]), np.array(2.0)]]
    assert spread.spread_of(e, [e]) == [0.0, 0.0]
    other = [[np.array([1.0, -4.0 + 4e-15]), np.array(2.0)]]
    assert spread.spread_of(e, [other, e]) == [1.0e-15, 0.0]
    assert spread.deviation([1.0, np.nan], [1.0, np.nan]) == 0.0
    assert spread.deviation([1.0, 2.0], [1.0, np.nan]) == math.inf
    assert spread.deviation([1.0, 2.0], [1.0, 2.0, 3.0]) == math.inf


def test_round_up_keeps_two_digits_and_never_rounds_down():
    assert spread.round_up(4.71e-13) == 4.8e-13
    assert spread.round_up(4.7e-13) == 4.7e-13
    assert spread.round_up(0.0) == 0.0
    for x in np.random.default_rng(0).uniform(1e-17, 1e-3, 200):
        assert x <= spread.round_up(x) <= x * 1.11


def test_perturbed_inputs_move_only_non_integer_floats():
    rng = np.random.default_rng(1)
    raw = {"x": [0.1, 2.0, -3.3], "n": 5, "p": {"k": 0.7}, "name": 2}
    moved = spread.perturbed(raw, rng, 4)
    assert moved["n"] == 5 and moved["name"] == 2 and moved["x"][1] == 2.0
    for a, b in ((raw["x"][0], moved["x"][0]), (raw["x"][2], moved["x"][2]), (raw["p"]["k"], moved["p"]["k"])):
        assert abs(b - a) <= 4.5 * np.finfo(np.float64).eps * abs(a)


def _check(mistake_offset):
    ref = lambda x: np.array([x, 2.0 * x])  # noqa: E731
    return Check(
        "fn",
        cases=lambda: case_value([{"x": 1.5}, {"x": -0.25}], [{"x": 0.75}]),
        reference=ref,
        exercise="fake_ex",
        mistakes={"near": Mistake("差一点", lambda x: ref(x) * (1.0 + mistake_offset))},
    )


CONVENTION = {"params": ["x"], "signature": "fn(x)"}


def _entries(check, spreads):
    """``(hidden entry, public entry)`` of a check outside any notebook."""
    return data.check_data(
        check, data.compute_cases(check), spreads, 1.0, data.compute_cases(check, public=True), CONVENTION
    )


def test_derived_tolerance_widens_with_the_spread():
    exact = Output("梯度")
    assert data.derived_rtol("k", exact, 0.0) == tolerance("exact")
    assert data.derived_rtol("k", exact, 4.7e-13) == pytest.approx(4.7e-11)
    assert data.derived_rtol("k", Output("带", rtol=1e-6), 4.7e-13) == 1e-6
    with pytest.raises(data.ToleranceError, match="k, output"):
        data.derived_rtol("k", Output("编号", "integer"), 1e-16)
    with pytest.raises(data.ToleranceError, match="make the check stable"):
        data.derived_rtol("k", exact, 1e-3)


@pytest.mark.parametrize("offset, spreads", [(5e-12, [0.0]), (1e-12, [0.0]), (5e-10, [1e-12]), (3e-12, [1e-13])])
def test_generator_refuses_a_mistake_within_a_factor_ten_of_the_tolerance(offset, spreads):
    check = _check(offset)
    with pytest.raises(data.ToleranceError, match="fake_ex.fn") as err:
        _entries(check, spreads)
    assert "'near'" in str(err.value) and "hidden case 1" in str(err.value)


@pytest.mark.parametrize("offset, spreads", [(1e-3, [0.0]), (1e-8, [1e-12]), (1e-14, [0.0]), (0.0, [0.0])])
def test_generator_accepts_mistakes_clearly_apart(offset, spreads):
    check = _check(offset)
    entry, shown = _entries(check, spreads)
    assert [case["inputs"] for case in shown["cases"]] == [{"x": 0.75}] and "spread" not in shown["outputs"][0]
    assert entry["outputs"][0]["spread"] == spreads[0] and entry["outputs"][0]["stated_rtol"] is None


def test_disagreements_allow_rounding_within_the_tolerance_only():
    check = _check(1e-3)
    committed = {"fn": _entries(check, [0.0])[0]}
    rtol = committed["fn"]["outputs"][0]["rtol"]
    fresh = json.loads(json.dumps(committed))
    assert data.disagreements(committed, fresh) == []
    fresh["fn"]["cases"][0]["expected"][0][1] *= 1 + 0.5 * rtol
    fresh["fn"]["outputs"][0]["spread"] = 1e-16  # measured elsewhere: not compared
    assert data.disagreements(committed, fresh) == []
    fresh["fn"]["cases"][0]["expected"][0][1] *= 1 + 3 * rtol
    assert "beyond rtol" in data.disagreements(committed, fresh)[0]
    fresh = json.loads(json.dumps(committed))
    fresh["fn"]["cases"][1]["inputs"]["x"] = -0.26
    assert "inputs differ" in data.disagreements(committed, fresh)[0]
    fresh = json.loads(json.dumps(committed))
    fresh["fn"]["points"] = 2.0
    assert data.disagreements(committed, fresh)


def test_the_measurement_of_a_check_does_not_depend_on_the_others_measured_with_it():
    """Each check seeds its own perturbation: `make regenerate` (all checks) and a regeneration of one
    exercise store the same spread."""
    spec = json.loads((DATA_DIR / f"{SMALL}.json").read_text(encoding="utf-8"))
    request = {
        f"{SMALL}.{n}": ([c["inputs"] for c in spec[n]["cases"]], [c["expected"] for c in spec[n]["cases"]])
        for n in ("ab_semi_implicit", "ab_explicit")
    }
    perturb = {name: env for name, env in spread.VARIANTS.items() if spread.PERTURB_ENV in env}
    both = spread.measure({k: v[0] for k, v in request.items()}, {k: v[1] for k, v in request.items()}, perturb)
    key = f"{SMALL}.ab_explicit"
    alone = spread.measure({key: request[key][0]}, {key: request[key][1]}, perturb)
    assert alone[key] == both[key] and max(alone[key]) > 0.0


def test_generator_refuses_an_all_zero_float_reference_without_an_absolute_tolerance():
    def zero_check(atol):
        return Check(
            "fn",
            cases=lambda: case_value([{"x": 1.5}], [{"x": 0.75}]),
            reference=lambda x: np.zeros(2),  # e.g. the force of a contact that carries no load
            outputs=(Output("力", atol=atol),),
            exercise="fake_ex",
        )

    with pytest.raises(data.ToleranceError, match="all zeros and the output has no atol"):
        _entries(zero_check(0.0), [0.0])
    entry, _ = _entries(zero_check(1e-12), [0.0])
    assert entry["outputs"][0]["atol"] == 1e-12
