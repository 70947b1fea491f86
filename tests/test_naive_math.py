"""Finding the checks whose hidden inputs overflow a naive formula (autograder.authoring.naive_math).

The real registry is held to it by every regeneration (tests/test_grading_pipeline.py regenerates each
section): today it finds s04_4_ex2's two checks and s04_5_ex2's, the three with a non-finite hint.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder.authoring import naive_math
from autograder.authoring import regenerate as data
from autograder.authoring.cases import case_value
from autograder.authoring.registry import Check, Output


def _softplus_check(phis, hint=""):
    return Check(
        "force",
        cases=lambda: case_value([{"phi": np.asarray(p)} for p in phis], [{"phi": np.array([0.1])}]),
        reference=lambda phi: np.asarray(jax.nn.softplus(-500.0 * jnp.asarray(phi)) / 500.0),
        outputs=(Output("力"),),
        exercise="fake_ex",
        nonfinite_hint=hint,
    )


def test_a_check_reaching_the_overflow_needs_a_hint():
    check = _softplus_check([[0.01, -0.02], [-2.5, 0.3]])  # 500 * 2.5 = 1250 > 709
    assert naive_math.naive_overflows(check.reference, check.cases()) == [1]
    (problem,) = naive_math.hint_problems([check], {check.key: check.cases()})
    assert "fake_ex.force" in problem and "[1]" in problem and "nonfinite_hint" in problem
    hinted = _softplus_check([[0.01], [-2.5]], hint="用稳定写法")
    assert naive_math.hint_problems([hinted], {hinted.key: hinted.cases()}) == []


def test_a_hint_without_an_overflowing_case_is_refused():
    check = _softplus_check([[0.01, -0.02], [0.5, -0.3]], hint="用稳定写法")
    (problem,) = naive_math.hint_problems([check], {check.key: check.cases()})
    assert "no hidden case overflows" in problem
    plain = _softplus_check([[0.01], [0.5]])
    assert naive_math.hint_problems([plain], {plain.key: plain.cases()}) == []


def test_the_naive_formulas_overflow_where_the_stable_ones_do_not():
    x = jnp.array([-800.0, -1.0, 0.0, 2.0, 800.0])
    stable = [jax.nn.softplus(x), jax.nn.sigmoid(x), jnp.logaddexp(x, 0.0), np.logaddexp(np.asarray(x), 0.0)]
    with naive_math.naive_math():
        naive = [jax.nn.softplus(x), jax.nn.sigmoid(x), jnp.logaddexp(x, 0.0), np.logaddexp(np.asarray(x), 0.0)]
        grad = jax.grad(lambda t: jax.nn.softplus(t))(800.0)
    for s, n in zip(stable, naive):
        assert np.all(np.isfinite(s)) and not np.isfinite(np.asarray(n)[-1])
        np.testing.assert_allclose(np.asarray(n)[1:4], np.asarray(s)[1:4], rtol=1e-15)  # same values in range
    assert np.isnan(grad)  # exp(x) / (1 + exp(x)) = inf / inf


def test_naive_formulas_neither_meet_nor_outlive_a_traced_function():
    softplus_of = jax.jit(lambda t: jax.nn.softplus(t))  # looks the function up when it is traced
    ufunc = np.logaddexp
    assert softplus_of(800.0) == 800.0  # traced and cached before
    with naive_math.naive_math():
        assert not np.isfinite(softplus_of(800.0))  # traced again inside: the naive formula
    assert jax.nn.softplus is not naive_math._softplus and np.logaddexp is ufunc
    assert softplus_of(800.0) == 800.0  # and again after: the stable one


def test_regeneration_refuses_a_check_whose_hint_does_not_fit(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "hint_problems", lambda checks, cases: [f"{c.key}: invented" for c in checks])
    with pytest.raises(data.HintError, match="s04_3_ex1.amplification_factors: invented"):
        data.regenerate(["s04_3_ex1"], out_dir=tmp_path / "d", inputs_dir=tmp_path / "i", public_dir=tmp_path / "p")
    assert not (tmp_path / "d").exists()  # nothing written
