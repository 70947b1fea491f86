"""Hidden cases new each term: ``[grading] salt`` in ``assignments/term.toml`` (autograder.authoring.cases).

* every check whose hidden cases draw random inputs draws other ones under another salt, and the same ones under
  the same salt; the public cases never move (students keep their public checks);
* the real regeneration with two salts writes other hidden inputs and expected values and identical public
  files, and the same salt gives the same bytes;
* every case function works under any salt (its guards redraw instead of asserting);
* no hidden case equals a public one: not its inputs, and not the expected values of its float outputs
  (a student who copied a public check's expected value would pass a hidden case that repeats it).

A check whose concept really needs fixed hidden settings would be listed in FIXED_ACROSS_TERMS, with its reason;
today every check's hidden cases move (the training runs draw their seeds and keep one only if it passes one-ulp
perturbations of the dynamics; the fixed rollouts and settings are drawn around the old ones, with their guards as
redraws).
"""

import json

import pytest

from autograder.authoring import regenerate as data
from autograder.authoring.cases import drawing_hidden
from autograder.authoring.registry import all_checks
from autograder.ops.term import load_term
from autograder.authoring.sources import COURSE_DIR
from autograder.kernel.capture import INPUTS_DIR
from autograder.verdict.data import DATA_DIR
from course_check import PUBLIC_DIR

#: checks whose hidden cases are fixed settings only (no random input), each with a one-line reason: none
FIXED_ACROSS_TERMS: set[str] = set()
SALTS = ("2027-spring", "2027-autumn")
OTHER_SALT = "2031-autumn"  # not the course's


def drawn(check, salt):
    with drawing_hidden(salt):
        return [json.loads(data.serialise(data._plain(case))) for case in check.cases()]


def canonical(inputs) -> str:
    return json.dumps(inputs, sort_keys=True)


@pytest.mark.parametrize("key", sorted(all_checks()))
def test_another_salt_draws_other_hidden_cases(key):
    # against the committed hidden inputs, drawn with the course's salt (test_grading_pipeline shows the committed
    # data is a fresh regeneration with it; the same salt gives the same bytes and the public cases ignore the
    # salt: the regeneration test below)
    check = all_checks()[key]
    committed = json.loads((INPUTS_DIR / f"{check.exercise}.json").read_text(encoding="utf-8"))[check.name]["cases"]
    assert load_term(COURSE_DIR).salt != OTHER_SALT
    moved = [canonical(a) != canonical(b) for a, b in zip(committed, drawn(check, OTHER_SALT))]
    if key in FIXED_ACROSS_TERMS:
        assert not all(moved), f"{key} moves with the salt now: take it off FIXED_ACROSS_TERMS"
    else:
        assert all(moved), f"{key}: hidden cases {[i for i, m in enumerate(moved) if not m]} ignore the salt"


def test_the_course_term_has_a_salt():
    assert load_term(COURSE_DIR).salt  # the instructors' page says to change it each term


#: (exercise, salt) pairs whose regeneration a guard once missed: the case function must redraw instead of
#: refusing the term (2027-autumn drew a 15-sweep PGS problem on which Jacobi met Gauss-Seidel to 1.8 tolerances;
#: 2027-autumn-check drew a directional sweep whose largest relative error moved by 3.6e-4 of itself between machines)
#: (measure: the refusal came from the spread measurement, so the regeneration measures as `make regenerate` does)
REFUSED_ONCE = [("s04_5_ex4", "2027-autumn", False), ("s04_8_ex1", "2027-autumn-check", True)]


@pytest.mark.parametrize(("exercise", "salt", "measure"), REFUSED_ONCE)
def test_a_new_term_regenerates_where_a_salt_once_failed(exercise, salt, measure, tmp_path):
    dirs = {k: tmp_path / k for k in ("out_dir", "inputs_dir", "public_dir")}
    (written,) = data.regenerate([exercise], salt=salt, measure=measure, **dirs)
    public = json.loads((dirs["public_dir"] / written.name).read_text(encoding="utf-8"))
    committed = json.loads((PUBLIC_DIR / written.name).read_text(encoding="utf-8"))
    # the public cases stay; a measurement may store other tolerances with them, a regeneration without one not
    assert {k: v["cases"] for k, v in public.items()} == {k: v["cases"] for k, v in committed.items()}
    assert measure or public == committed


def test_regeneration_with_a_new_salt_changes_hidden_data_only(tmp_path):
    exercise = "s04_6_ex1"  # a quick one; every exercise goes through the same regenerate()

    def regenerate(name, salt):
        dirs = {k: tmp_path / name / k for k in ("data", "inputs", "public")}
        data.regenerate(
            [exercise], out_dir=dirs["data"], inputs_dir=dirs["inputs"], public_dir=dirs["public"], salt=salt
        )
        return {k: (d / f"{exercise}.json").read_bytes() for k, d in dirs.items()}

    first, again, other = regenerate("a", SALTS[0]), regenerate("b", SALTS[0]), regenerate("c", SALTS[1])
    assert first == again
    assert first["public"] == other["public"]
    for check, spec in json.loads(first["data"]).items():
        changed = json.loads(other["data"])[check]
        for case, case_other in zip(spec["cases"], changed["cases"]):
            assert case["inputs"] != case_other["inputs"] and case["expected"] != case_other["expected"], check


def _holds_a_float(value) -> bool:
    if isinstance(value, list):
        return any(_holds_a_float(v) for v in value)
    return isinstance(value, float)


def float_expected(spec: dict, case: dict) -> str | None:
    """The expected values of a case's float outputs, canonical; None when it has none. Integer outputs (ranks,
    indices, counts, flags: kind "integer") and outputs holding no float (boolean masks) are exempt: they take
    their values from a small set, where hidden and public cases agree by necessity."""
    kept = [
        value
        for output, value in zip(spec["outputs"], case["expected"], strict=True)
        if output["kind"] != "integer" and _holds_a_float(value)
    ]
    return canonical(kept) if kept else None


@pytest.mark.parametrize("exercise", sorted({check.exercise for check in all_checks().values()}))
def test_no_hidden_case_equals_a_public_one(exercise):
    # on the committed data (test_grading_pipeline shows it is a fresh regeneration)
    hidden = json.loads((DATA_DIR / f"{exercise}.json").read_text(encoding="utf-8"))
    public = json.loads((PUBLIC_DIR / f"{exercise}.json").read_text(encoding="utf-8"))
    assert hidden.keys() == public.keys()
    problems = []
    for name, spec in hidden.items():
        shown = public[name]["cases"]
        public_inputs = {canonical(case["inputs"]): j for j, case in enumerate(shown)}
        public_expected = {float_expected(spec, case): j for j, case in enumerate(shown)}
        public_expected.pop(None, None)
        for i, case in enumerate(spec["cases"]):
            if canonical(case["inputs"]) in public_inputs:
                problems.append(
                    f"{name}: hidden case {i} has the inputs of public case {public_inputs[canonical(case['inputs'])]}"
                )
            expected = float_expected(spec, case)
            if expected in public_expected:
                problems.append(f"{name}: hidden case {i} expects what public case {public_expected[expected]} does")
    assert not problems, "\n".join(problems)
