r"""Rollouts with ``lax.scan``, and how their gradient is computed as an argument.

:func:`rollout` returns the trajectory. :func:`rollout_cost` returns the scalar
objective :math:`L = \ell_N(x_N, p) + \sum_{k<N} \ell(x_k, u_k, p)`; its
``gradient`` argument picks how reverse mode differentiates it, without changing
the forward computation (diffrax's ``adjoint=``):

* ``"store_all"``: plain AD through ``scan``; every step's intermediates are kept.
* ``"checkpointed"``: the horizon is cut into segments of ``segment_length`` steps;
  only the segment boundary states are kept, and each segment is recomputed once
  during the backward pass (:func:`checkpoint_plan` says how many steps).
* ``"adjoint"``: the hand-written adjoint recursion of :mod:`course_lib.adjoint`
  as a custom VJP (S04.7).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from course_lib._types import Controls, Params, Scalar, StageCost, State, States, Step, TerminalCost
from course_lib._costs import cost_scan, zero_terminal_cost
from course_lib._params import loop_params
from course_lib._validate import check_finite, lookup
from course_lib.adjoint import backward_pass, forward_pass


def _check_rollout_inputs(step, x0, us, p, owner):
    """``(x0, us, p)``, checked: shapes now, finiteness now or (traced) when the program runs."""
    if jnp.ndim(x0) != 1:
        raise ValueError(f"{owner}: x0 must be a state vector of shape (nx,), got shape {jnp.shape(x0)}")
    if jnp.ndim(us) != 2:
        raise ValueError(f"{owner}: us must have shape (N, nu), got shape {jnp.shape(us)}")
    out = jax.eval_shape(step, x0, us[0], p)
    if out.shape != jnp.shape(x0):
        raise ValueError(f"{owner}: step maps a state of shape {jnp.shape(x0)} to shape {out.shape}")
    return check_finite((x0, us, p), "x0, us or p", owner)


def rollout(step: Step, x0: State, us: Controls, p: Params) -> States:
    """Trajectory ``xs`` of shape ``(N+1, nx)`` with ``xs[0] = x0`` and ``xs[k+1] = step(xs[k], us[k], p)``."""
    x0, us, p = _check_rollout_inputs(step, x0, us, p, "rollout")

    packed, rebuild = loop_params(p)

    def body(x, u):
        x_next = step(x, u, rebuild(packed))
        return x_next, x_next

    _, xs = jax.lax.scan(body, x0, us)
    return jnp.concatenate([x0[None], xs], axis=0)


class CheckpointPlan(NamedTuple):
    """What checkpointing a rollout of ``n_steps`` costs.

    Attributes:
        segment_length: steps per segment.
        n_segments: number of segments (the last one may be shorter).
        stored_states: states kept from the forward pass (segment starts).
        recomputed_steps: step evaluations the backward pass adds (every step once).
    """

    segment_length: int
    n_segments: int
    stored_states: int
    recomputed_steps: int


def checkpoint_plan(n_steps: int, segment_length: Optional[int] = None) -> CheckpointPlan:
    """Segment layout used by ``gradient="checkpointed"``; the default segment is about sqrt(N)."""
    if n_steps < 1:
        raise ValueError(f"checkpoint_plan: n_steps must be >= 1, got {n_steps}")
    seg = max(1, round(math.sqrt(n_steps))) if segment_length is None else int(segment_length)
    if seg < 1:
        raise ValueError(f"checkpoint_plan: segment_length must be >= 1, got {segment_length}")
    seg = min(seg, n_steps)
    n_segments = -(-n_steps // seg)
    return CheckpointPlan(seg, n_segments, n_segments, n_steps)


def _cost_scan(step, stage_cost, x, us, p):
    x_last, total, _ = cost_scan(step, stage_cost, x, us, p)
    return x_last, total


def _store_all(step, stage_cost, terminal_cost, x0, us, p, segment_length):
    x_last, total = _cost_scan(step, stage_cost, x0, us, p)
    return total + terminal_cost(x_last, p)


def _checkpointed(step, stage_cost, terminal_cost, x0, us, p, segment_length):
    plan = checkpoint_plan(us.shape[0], segment_length)
    seg = plan.segment_length
    n_full = us.shape[0] // seg

    # Only a segment's start state survives the forward pass; its inside is
    # recomputed. The segment slices ``us`` itself (``us`` is loop-invariant and
    # kept once) so that no per-segment copy of the inputs is stored.
    packed, rebuild = loop_params(p)  # the loop over segments closes over one vector, too

    @jax.checkpoint
    def segment(x, index, us_all):
        seg_us = jax.lax.dynamic_slice_in_dim(us_all, index * seg, seg)
        return _cost_scan(step, stage_cost, x, seg_us, rebuild(packed))

    def body(carry, index):
        x, total = carry
        x, seg_total = segment(x, index, us)
        return (x, total + seg_total), None

    (x, total), _ = jax.lax.scan(body, (x0, jnp.zeros((), jnp.result_type(x0, float))), jnp.arange(n_full))
    if n_full * seg < us.shape[0]:
        x, tail_total = jax.checkpoint(partial(_cost_scan, step, stage_cost))(x, us[n_full * seg :], p)
        total = total + tail_total
    return total + terminal_cost(x, p)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _adjoint_cost(step, stage_cost, terminal_cost, x0, us, p):
    return forward_pass(step, stage_cost, terminal_cost, x0, us, p)[0]


def _adjoint_cost_fwd(step, stage_cost, terminal_cost, x0, us, p):
    loss, xs = forward_pass(step, stage_cost, terminal_cost, x0, us, p)
    return loss, (xs, us, p)


def _adjoint_cost_bwd(step, stage_cost, terminal_cost, residuals, g):
    xs, us, p = residuals
    lambdas, grad_us, grad_p = backward_pass(step, stage_cost, terminal_cost, xs, us, p, scale=g)
    return lambdas[0], grad_us, grad_p


_adjoint_cost.defvjp(_adjoint_cost_fwd, _adjoint_cost_bwd)


def _adjoint(step, stage_cost, terminal_cost, x0, us, p, segment_length):
    return _adjoint_cost(step, stage_cost, terminal_cost, x0, us, p)


GRADIENT_MODES = {"store_all": _store_all, "checkpointed": _checkpointed, "adjoint": _adjoint}


def rollout_cost(
    step: Step,
    x0: State,
    us: Controls,
    p: Params,
    stage_cost: StageCost,
    terminal_cost: TerminalCost = zero_terminal_cost,
    *,
    gradient: str = "store_all",
    segment_length: Optional[int] = None,
) -> Scalar:
    r"""Scalar objective of a rollout, differentiable in ``x0``, ``us`` and ``p``.

    Args:
        step: ``step(x, u, p) -> x_next``.
        x0: initial state ``(nx,)``.
        us: inputs ``(N, nu)``.
        p: parameter pytree.
        stage_cost: ``ell(x_k, u_k, p) -> scalar``.
        terminal_cost: ``ell_N(x_N, p) -> scalar`` (zero by default).
        gradient: ``"store_all"``, ``"checkpointed"`` or ``"adjoint"`` (see module doc).
        segment_length: steps per checkpoint segment (``"checkpointed"`` only).

    Returns:
        :math:`L = \ell_N(x_N, p) + \sum_{k=0}^{N-1} \ell(x_k, u_k, p)`.
    """
    mode = lookup(GRADIENT_MODES, gradient, "gradient mode")
    x0, us, p = _check_rollout_inputs(step, x0, us, p, "rollout_cost")
    return mode(step, stage_cost, terminal_cost, x0, us, p, segment_length)
