"""The training-health log of S04.8.4."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from transform_checks import check_transforms
from course_lib.health import TrainingHealth, contact_summary, first_nonfinite_record, health_record, stack_records

GRADS = {"w": jnp.array([[3.0, -4.0]]), "b": jnp.array([12.0])}


def test_record_fields():
    rec = health_record(
        {"track": 1.5, "effort": 0.25},
        GRADS,
        contact_count=2,
        max_penetration=0.01,
        solver_residual=1e-9,
        step_size=1e-3,
    )
    assert isinstance(rec, TrainingHealth)
    assert float(rec.loss) == 1.75  # the sum of the terms by default
    assert float(rec.grad_norm) == 13.0 and float(rec.max_abs_grad) == 12.0
    assert int(rec.contact_count) == 2 and float(rec.max_penetration) == 0.01
    assert float(rec.solver_residual) == 1e-9 and float(rec.step_size) == 1e-3
    # an update pytree gives its global norm; an array of terms works too
    rec = health_record(jnp.array([1.0, 2.0]), GRADS, loss=10.0, step_size={"w": jnp.array([0.3, 0.4])})
    assert float(rec.loss) == 10.0 and float(rec.step_size) == pytest.approx(0.5)


def test_contact_summary():
    count, depth = contact_summary(jnp.array([[0.1, -0.02], [-0.005, 0.3]]))
    assert int(count) == 2 and float(depth) == pytest.approx(0.02)
    count, depth = contact_summary(jnp.array([0.1, 0.2]))
    assert int(count) == 0 and float(depth) == 0.0
    count, depth = contact_summary(jnp.zeros((3, 0)))
    assert int(count) == 0 and float(depth) == 0.0


def _train(n_steps, poison_at=None):
    """A jitted optax loop that logs a record per iteration through lax.scan."""
    target = jnp.array([1.0, -2.0])
    opt = optax.sgd(0.1)

    def body(carry, i):
        theta, state = carry

        def loss_terms(t):
            return {"fit": jnp.sum((t - target) ** 2), "reg": 0.01 * jnp.sum(t**2)}

        terms, vjp = jax.vjp(loss_terms, theta)
        grads = vjp({"fit": 1.0, "reg": 1.0})[0]
        if poison_at is not None:
            grads = jnp.where(i >= poison_at, jnp.nan, grads)
        updates, state = opt.update(grads, state)
        gaps = jnp.array([theta[0] - 0.5])
        count, depth = contact_summary(gaps)
        record = health_record(terms, grads, contact_count=count, max_penetration=depth, step_size=updates)
        return (theta + updates, state), record

    theta0 = jnp.zeros(2)
    return jax.lax.scan(body, (theta0, opt.init(theta0)), jnp.arange(n_steps))[1]


def test_scan_stacks_records_for_plotting():
    records = jax.jit(_train, static_argnums=0)(30)
    assert records.grad_norm.shape == (30,) and records.loss_terms["fit"].shape == (30,)
    assert float(records.loss[-1]) < 0.05 * float(records.loss[0])
    assert int(records.contact_count[0]) == 1 and int(records.contact_count[-1]) == 0
    assert int(first_nonfinite_record(records)) == -1
    # the same records built in a Python loop and stacked
    stacked = stack_records([jax.tree_util.tree_map(lambda a: a[i], records) for i in range(30)])
    for a, b in zip(jax.tree_util.tree_leaves(stacked), jax.tree_util.tree_leaves(records)):
        np.testing.assert_array_equal(a, b)


def test_first_nonfinite_record_finds_the_broken_iteration():
    records = _train(12, poison_at=7)
    assert int(first_nonfinite_record(records)) == 7


def test_per_step_records_by_vmap():
    terms = jnp.arange(5.0)[:, None] * jnp.ones((5, 2))
    lambdas = jnp.arange(10.0).reshape(5, 2)
    records = jax.vmap(lambda t, g: health_record(t, g))(terms, lambdas)
    np.testing.assert_allclose(records.grad_norm, jnp.linalg.norm(lambdas, axis=1))
    np.testing.assert_allclose(records.loss, 2 * jnp.arange(5.0))


@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad():
    def fn(z):
        rec = health_record({"a": z[0] ** 2, "b": z[1]}, {"g": z * 3.0}, max_penetration=z[2], step_size=z[:2])
        return rec.loss + rec.grad_norm + rec.max_penetration + rec.step_size

    check_transforms(fn, jnp.array([0.5, -1.5, 0.2]), scales=(1.0, 2.0), rtol=1e-12, direction=[0.3, 0.1, -0.7])


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="health_record: loss term 'a' must be a scalar"):
        health_record({"a": jnp.ones(2)}, GRADS)
    with pytest.raises(ValueError, match="health_record: loss_terms must be a dict, a scalar or a 1-D array"):
        health_record(jnp.ones((2, 2)), GRADS)
    with pytest.raises(ValueError, match="stack_records: no records"):
        stack_records([])
    with pytest.raises(ValueError, match="first_nonfinite_record: records must be stacked"):
        first_nonfinite_record(health_record(1.0, GRADS))
