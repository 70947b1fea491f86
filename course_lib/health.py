r"""The training-health log of S04.8.4: one record per iteration (or per time step).

The chapter asks every training loop to log, at least,

=====================  ====================================  =========================================
field                  meaning                               warning sign
=====================  ====================================  =========================================
``loss``               objective                             turns NaN, oscillates
``loss_terms``         the loss split into its terms         one term dominates the gradient
``grad_norm``          :math:`\|\nabla_\theta L\|_2`         explodes, or stays at 0
``max_abs_grad``       :math:`\max_j |\partial L/\partial\theta_j|`  a single parameter spikes
``contact_count``      active contacts                       changes together with gradient spikes
``max_penetration``    deepest penetration                   soft contact being exploited
``solver_residual``    contact / constraint solver residual  the forward solution is unreliable
``step_size``          size of the optimiser's update        updates large enough to jump modes
=====================  ====================================  =========================================

:func:`health_record` builds one :class:`TrainingHealth` from the quantities at hand; it is
pure JAX, so it runs inside a jitted update or a ``lax.scan`` over iterations (which stacks
the records for free). :func:`stack_records` stacks records gathered in a Python loop, so a
plot is ``plt.plot(records.grad_norm)``. For a per-time-step log, ``vmap`` :func:`health_record`
over the steps (e.g. with the adjoints :math:`\lambda_k` as the "gradient").
:func:`first_nonfinite_record` finds the first broken record with
:func:`course_lib.diagnostics.first_nonfinite_step`.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, cast

import jax
import jax.numpy as jnp
import optax

from course_lib._types import Array, ArrayLike, Float, Int, IntScalar, PyTree, Scalar, ScalarLike
from course_lib.diagnostics import first_nonfinite_step


class TrainingHealth(NamedTuple):
    """One health record (S04.8.4); stacked records carry a leading iteration axis ``(T,)`` on every field.

    Attributes:
        loss: total loss, scalar.
        loss_terms: the loss terms, a dict of scalars or an array ``(n_terms,)``.
        grad_norm: global 2-norm of the gradient pytree, scalar.
        max_abs_grad: largest absolute gradient entry, scalar.
        contact_count: number of active contacts (integer scalar; 0 when the task has no contact).
        max_penetration: deepest penetration :math:`\\max(0, -\\min\\phi)`, scalar (0 without contact).
        solver_residual: residual of an inner solver, scalar (0 when there is none).
        step_size: size of the parameter update, scalar (global norm of the update pytree).
    """

    loss: Float[Array, "*T"]
    loss_terms: dict[str, Float[Array, "*T"]] | Float[Array, "*T n_terms"]
    grad_norm: Float[Array, "*T"]
    max_abs_grad: Float[Array, "*T"]
    contact_count: Int[Array, "*T"]
    max_penetration: Float[Array, "*T"]
    solver_residual: Float[Array, "*T"]
    step_size: Float[Array, "*T"]


def contact_summary(gaps: Float[ArrayLike, "..."]) -> tuple[IntScalar, Scalar]:
    r"""Active-contact count and maximum penetration from signed gaps :math:`\phi` (any shape).

    A contact is active where :math:`\phi < 0`; the penetration is :math:`\max(0, -\min\phi)`.

    Returns:
        ``(count, max_penetration)``: integer scalar and float scalar.
    """
    gaps = jnp.asarray(gaps)
    if gaps.size == 0:
        return jnp.zeros((), int), jnp.zeros((), jnp.result_type(gaps, float))
    return jnp.sum(gaps < 0), jnp.maximum(0.0, -jnp.min(gaps))


def _max_abs(tree, dtype):
    leaves = [jnp.max(jnp.abs(leaf)) for leaf in jax.tree_util.tree_leaves(tree) if jnp.size(leaf)]
    return jnp.max(jnp.stack(leaves)).astype(dtype) if leaves else jnp.zeros((), dtype)


def _as_step_size(step_size, dtype):
    leaves = jax.tree_util.tree_leaves(step_size)
    if len(leaves) == 1 and jnp.ndim(leaves[0]) == 0:
        return jnp.asarray(leaves[0], dtype)
    return optax.tree.norm(step_size).astype(dtype)


def health_record(
    loss_terms: dict[str, ScalarLike] | Float[ArrayLike, "*n_terms"],
    grads: PyTree,
    *,
    loss: ScalarLike | None = None,
    contact_count: int | Int[Array, ""] = 0,
    max_penetration: ScalarLike = 0.0,
    solver_residual: ScalarLike = 0.0,
    step_size: ScalarLike | PyTree = 0.0,
) -> TrainingHealth:
    r"""Build one :class:`TrainingHealth` record (works under ``jit``, ``vmap`` and ``lax.scan``).

    Args:
        loss_terms: dict of scalar terms, an array of terms ``(n_terms,)``, or a single scalar.
        grads: gradient pytree (any structure, e.g. the policy's parameters).
        loss: total loss; by default the sum of ``loss_terms``.
        contact_count: number of active contacts (see :func:`contact_summary`).
        max_penetration: deepest penetration, :math:`\ge 0`.
        solver_residual: inner-solver residual norm.
        step_size: a scalar (a learning rate), or the update pytree, whose global norm
            :math:`\|\Delta\theta\|_2` is recorded.

    Returns:
        :class:`TrainingHealth` with scalar fields.
    """
    if isinstance(loss_terms, dict):
        if not loss_terms:
            raise ValueError("health_record: loss_terms is an empty dict")
        terms = {name: jnp.asarray(value) for name, value in loss_terms.items()}
        for name, value in terms.items():
            if value.shape != ():
                raise ValueError(f"health_record: loss term {name!r} must be a scalar, got shape {value.shape}")
        # the dict is not empty, so sum() never returns its start value 0 (which is all typeshed promises)
        total = cast(Array, sum(terms.values()))
    else:
        terms = jnp.asarray(loss_terms)
        if terms.ndim > 1:
            raise ValueError(
                f"health_record: loss_terms must be a dict, a scalar or a 1-D array, got shape {terms.shape}"
            )
        total = jnp.sum(terms)
    loss = total if loss is None else jnp.asarray(loss)
    if jnp.shape(loss) != ():
        raise ValueError(f"health_record: loss must be a scalar, got shape {jnp.shape(loss)}")
    dtype = jnp.result_type(loss, float)
    return TrainingHealth(
        loss=loss.astype(dtype),
        loss_terms=terms,
        grad_norm=optax.tree.norm(grads).astype(dtype),
        max_abs_grad=_max_abs(grads, dtype),
        contact_count=jnp.asarray(contact_count).astype(int),
        max_penetration=jnp.asarray(max_penetration, dtype),
        solver_residual=jnp.asarray(solver_residual, dtype),
        step_size=_as_step_size(step_size, dtype),
    )


def stack_records(records: Sequence[TrainingHealth]) -> TrainingHealth:
    """Stack per-iteration records into one :class:`TrainingHealth` of arrays with leading axis ``(T,)``."""
    records = list(records)
    if not records:
        raise ValueError("stack_records: no records to stack")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *records)


def first_nonfinite_record(records: TrainingHealth) -> IntScalar:
    """Index of the first stacked record whose loss, a loss term, the gradient norm or ``max |gradient|`` is NaN/Inf; -1 if none.

    The first broken iteration is where to look for the contact event, the division by zero
    or the solver failure that caused it (S04.8.5); it uses
    :func:`course_lib.diagnostics.first_nonfinite_step`.
    """
    columns = [records.loss, records.grad_norm, records.max_abs_grad]
    n = jnp.shape(records.loss)[0] if jnp.ndim(records.loss) else None
    if n is None:
        raise ValueError("first_nonfinite_record: records must be stacked (leading iteration axis)")
    columns += [jnp.reshape(t, (n, -1)) for t in jax.tree_util.tree_leaves(records.loss_terms)]
    table = jnp.concatenate([jnp.reshape(c, (n, -1)) for c in columns], axis=1)
    return first_nonfinite_step(table)
