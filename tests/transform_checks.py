"""The one jit/vmap/grad harness of the library tests (every public function must pass it).

:func:`check_transforms` asks three things of a function ``fn(z) -> pytree``:

* ``jit`` changes nothing: the jitted result equals the eager one;
* ``vmap`` is a loop: mapping over a batch of inputs gives, item by item, what single calls give;
* ``grad`` is right: the directional derivative of the sum of the float outputs agrees with central
  differences (skipped with ``differentiable=False``, e.g. for an optimisation loop's history).

Reference values come from the jitted function: an eager call of a function that holds ``lax.scan``
compiles on every call, so each case costs a few compilations only. Float64 throughout (tests/conftest.py):
in float32 the central differences could not resolve these tolerances (S04.8.2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from course_lib import relative_error

#: default probe direction (its first len(z) entries): fixed, so that a failure reproduces
DIRECTION = (0.5, -0.2, 0.3, 0.1, -0.4, 0.25)


def float_leaves(tree) -> list:
    """The floating-point leaves of a pytree, as arrays (integer modes and counts have no gradient)."""
    leaves = [jnp.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]
    return [leaf for leaf in leaves if jnp.issubdtype(leaf.dtype, jnp.floating)]


def _assert_trees_close(actual, expected, rtol, atol, what):
    actual, expected = jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} leaves, expected {len(expected)}"
    for a, b in zip(actual, expected):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


def check_transforms(
    fn,
    z,
    *,
    key=None,
    differentiable: bool = True,
    scales=(1.0, 0.5, -1.0),
    rtol: float = 1e-10,
    atol: float = 1e-12,
    vmap_rtol: float | None = None,
    grad_rtol: float = 1e-6,
    direction=None,
    eager: bool = True,
    eps: float = 1e-6,
):
    """Check ``jit``, ``vmap`` and ``grad`` of ``fn`` at the point ``z`` (a 1-D float array).

    Args:
        fn: ``fn(z)``, or ``fn(z, key)`` when ``key`` is given (a random estimator: ``vmap`` then maps over
            ``len(scales)`` keys split from ``key`` at the fixed ``z``, and ``jit``/``grad`` use ``key``).
        z: the point.
        differentiable: whether to check ``grad`` against central differences.
        scales: the batch for ``vmap`` is ``[s * z for s in scales]``.
        rtol, atol: jit-versus-eager tolerance (finite differences inside ``fn`` amplify the rounding
            differences of fused arithmetic: such functions need a looser one).
        vmap_rtol: vmap-versus-loop relative tolerance (default ``max(rtol, 1e-10)``).
        grad_rtol: bound on the chapter's relative error between ``grad . v`` and the central difference.
        direction: the probe direction ``v`` (default: the first ``len(z)`` entries of :data:`DIRECTION`).
        eager: compare with the eager call (off for a function whose eager call is itself one compiled scan).
        eps: the central-difference step.
    """
    z = jnp.asarray(z)
    single = fn if key is None else (lambda z_: fn(z_, key))
    jitted = jax.jit(single)
    if eager:
        _assert_trees_close(jitted(z), single(z), rtol, atol, "jit differs from eager")

    vmap_rtol = max(rtol, 1e-10) if vmap_rtol is None else vmap_rtol
    if key is None:
        batch = jnp.stack([s * z for s in scales])
        batched = jax.vmap(fn)(batch)
        expected = [jitted(item) for item in batch]
    else:
        keys = jax.random.split(key, len(scales))
        batched = jax.vmap(fn, in_axes=(None, 0))(z, keys)
        jitted_keyed = jax.jit(fn)
        expected = [jitted_keyed(z, k) for k in keys]
    for i, want in enumerate(expected):
        _assert_trees_close(
            jax.tree_util.tree_map(lambda leaf: leaf[i], batched), want, vmap_rtol, atol, f"vmap item {i}"
        )

    if differentiable:

        def total(out):
            return sum(jnp.sum(leaf) for leaf in float_leaves(out))

        g = jax.jit(jax.grad(lambda z_: total(single(z_))))(z)
        assert bool(jnp.all(jnp.isfinite(g))), g
        v = jnp.asarray(DIRECTION[: z.shape[0]] if direction is None else direction, dtype=z.dtype)
        fd = (total(jitted(z + eps * v)) - total(jitted(z - eps * v))) / (2 * eps)
        error = float(relative_error(jnp.dot(g, v), fd))
        assert error < grad_rtol, f"grad . v = {float(jnp.dot(g, v))!r}, central difference {float(fd)!r}"
