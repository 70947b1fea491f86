#!/usr/bin/env python
"""Benchmarks for course_lib: four claims of the chapter, measured side by side in one run.

1. grad_vs_forward  reverse-mode gradient / forward cost, 1024 batched RK4 pendulum rollouts (target <= 3x)
2. adjoint_vs_fd    hand-written adjoint vs central differences, 12 joints x 50 steps (target >= 300x faster)
3. vs_diffrax       course_lib vs diffrax, explicit midpoint, same 1000 fixed steps (target >= 10x faster)
4. checkpointing    checkpointed vs store-all, 10,000 RK4 steps (target memory <= 1/10, time <= 2x)

Usage:
    python benchmarks/run.py [--quick] [--json PATH] [--repeats N] [--timing-dtype float32|float64]

Every timed function is jitted and compiled first (compile time is reported apart), warmed up,
then called until ready (``block_until_ready``) in several repeats, the compared functions taking
turns inside each repeat. Times are medians over repeats; a ratio is the median over repeats of
the ratio of the two times measured in the same repeat (robust to a machine shared with others).
Targets are reported as PASS/MISS and never change the exit status. The exit status is 1
only when a correctness check fails (two gradients that should agree do not, or the
diffrax solve does not take exactly the same fixed steps).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from functools import partial
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

import course_lib as cl

# ----------------------------------------------------------------------------------------------
# sizes

FULL = {
    "grad_vs_forward": {"batch": 1024, "steps": 1000, "h": 0.01},
    "adjoint_vs_fd": {"joints": 12, "steps": 50, "h": 0.01},
    "vs_diffrax": {"steps": 1000, "dt": 0.01},
    "checkpointing": {"steps": 10_000, "h": 0.01},
}
QUICK = {
    "grad_vs_forward": {"batch": 8, "steps": 50, "h": 0.01},
    "adjoint_vs_fd": {"joints": 3, "steps": 10, "h": 0.01},
    "vs_diffrax": {"steps": 200, "dt": 0.01},
    "checkpointing": {"steps": 200, "h": 0.01},
}

# Correctness tolerances (these make the script exit 1; targets never do).
FD_TOL = 1e-6  # adjoint vs central differences, normwise relative, float64
DIFFRAX_TOL = 1e-8  # course_lib vs diffrax gradient, max elementwise relative, float64
CHECKPOINT_TOL = {"float32": 1e-4, "float64": 1e-10}  # checkpointed vs store-all gradient


# ----------------------------------------------------------------------------------------------
# timing helpers


def compile_jit(fn, *args):
    """``jax.jit(fn)`` lowered and compiled for ``args``; returns (compiled, seconds)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def time_interleaved(fns, repeats, min_repeat_s):
    """Seconds per call of already compiled functions, one sample per repeat and function.

    ``fns`` maps a label to ``(compiled, args)``. Each function is warmed up (called once) and
    calibrated first; then every repeat calls each function in turn ``number`` times (each call
    blocked until ready, ``number`` chosen so that one turn lasts at least ``min_repeat_s``).
    Interleaving makes a change in background load hit all compared functions alike.
    """
    numbers = {}
    for label, (compiled, args) in fns.items():
        jax.block_until_ready(compiled(*args))  # warm-up
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        one = time.perf_counter() - t0
        numbers[label] = max(1, min(10_000, int(math.ceil(min_repeat_s / max(one, 1e-7)))))
    samples = {label: [] for label in fns}
    for _ in range(repeats):
        for label, (compiled, args) in fns.items():
            t0 = time.perf_counter()
            for _ in range(numbers[label]):
                jax.block_until_ready(compiled(*args))
            samples[label].append((time.perf_counter() - t0) / numbers[label])
    return samples


def median(xs):
    return statistics.median(xs)


def paired_ratio(samples, num, den):
    """Median over repeats of samples[num][i] / samples[den][i] (both timed in the same repeat)."""
    return statistics.median(a / b for a, b in zip(samples[num], samples[den]))


def fastest(samples):
    return {label: min(v) for label, v in samples.items()}


def fmt_time(s):
    if s is None:
        return "n/a"
    if s >= 1.0:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def fmt_bytes(b):
    if b is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.3g} {unit}"
        b /= 1024


def target(metric, ratio, op, threshold, text):
    met = bool(ratio <= threshold) if op == "<=" else bool(ratio >= threshold)
    return {
        "metric": metric,
        "ratio": float(ratio),
        "op": op,
        "threshold": float(threshold),
        "target": text,
        "met": met,
    }


def check(name, value, tol):
    value = float(value)
    return {"name": name, "value": value, "tol": float(tol), "passed": bool(np.isfinite(value) and value <= tol)}


def normwise_rel(a, b):
    """max|a - b| / max|b| over all entries."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), np.finfo(np.float64).tiny))


def elementwise_rel(a, b):
    """max_i |a_i - b_i| / max(|a_i|, |b_i|)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    den = np.maximum(np.maximum(np.abs(a), np.abs(b)), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(a - b) / den))


def squared_angle(x, u, p):
    return x[0] ** 2


def squared_angle_terminal(x, p):
    return x[0] ** 2


# ----------------------------------------------------------------------------------------------
# 1. reverse-mode gradient / forward cost


def bench_grad_vs_forward(cfg, repeats, min_repeat_s, dtype):
    batch, n, h = cfg["batch"], cfg["steps"], cfg["h"]
    p = cl.PendulumParams()
    step = cl.rk4(cl.pendulum, h)
    rng = np.random.default_rng(0)
    x0s = jnp.asarray(rng.uniform(-1.0, 1.0, (batch, 2)), dtype)
    uss = jnp.asarray(0.5 * rng.standard_normal((batch, n, 1)), dtype)

    def loss(x0, us):  # sum of squared angles theta_0^2 + ... + theta_N^2
        return cl.rollout_cost(step, x0, us, p, squared_angle, squared_angle_terminal)

    forward = jax.vmap(loss)
    gradient = jax.vmap(jax.grad(loss, argnums=1))
    # Where the gradient's time goes: the forward pass that stores the residuals (jax.vjp), and the
    # backward sweep alone (the pullback applied to stored residuals); compiled apart, XLA fuses less.
    with_residuals = jax.vmap(lambda x0, us: jax.vjp(lambda u: loss(x0, u), us))
    backward = jax.vmap(lambda pullback: pullback(jnp.ones((), dtype))[0])

    fwd_c, fwd_compile = compile_jit(forward, x0s, uss)
    grad_c, grad_compile = compile_jit(gradient, x0s, uss)
    res_c, _ = compile_jit(with_residuals, x0s, uss)
    pullbacks = res_c(x0s, uss)[1]
    bwd_c, _ = compile_jit(backward, pullbacks)
    g = grad_c(x0s, uss)
    samples = time_interleaved(
        {
            "forward_s": (fwd_c, (x0s, uss)),
            "gradient_s": (grad_c, (x0s, uss)),
            "forward_with_residuals_s": (res_c, (x0s, uss)),
            "backward_alone_s": (bwd_c, (pullbacks,)),
        },
        repeats,
        min_repeat_s,
    )
    t_fwd, t_grad = median(samples["forward_s"]), median(samples["gradient_s"])
    ratio = paired_ratio(samples, "gradient_s", "forward_s")
    split = {k: paired_ratio(samples, k, "forward_s") for k in ("forward_with_residuals_s", "backward_alone_s")}
    mins = fastest(samples)
    nonfinite = int(np.sum(~np.isfinite(np.asarray(g))))
    return {
        "key": "grad_vs_forward",
        "title": f"1 grad/forward, {batch} vmap RK4 pendulum x {n} steps",
        "config": {**cfg, "dtype": str(jnp.dtype(dtype)), "grad_shape": list(g.shape), "gradient_mode": "store_all"},
        "measured": {
            "forward_s": t_fwd,
            "gradient_s": t_grad,
            "forward_compile_s": fwd_compile,
            "gradient_compile_s": grad_compile,
            "forward_with_residuals_s": median(samples["forward_with_residuals_s"]),
            "backward_alone_s": median(samples["backward_alone_s"]),
            "min_times_s": mins,
        },
        "summary": f"fwd {fmt_time(t_fwd)}, grad {fmt_time(t_grad)}",
        "targets": [target("gradient / forward time", ratio, "<=", 3.0, "<= 3x")],
        "checks": [check("non-finite gradient entries", nonfinite, 0)],
        "details": [
            f"loss per rollout = sum_k theta_k^2 via rollout_cost(gradient='store_all'); grad wrt us {tuple(g.shape)}",
            f"compile: forward {fmt_time(fwd_compile)}, gradient {fmt_time(grad_compile)}",
            f"split: forward storing residuals {split['forward_with_residuals_s']:.2f}x forward, "
            f"backward sweep alone {split['backward_alone_s']:.2f}x forward (each compiled apart)",
            f"fastest repeats: fwd {fmt_time(mins['forward_s'])}, grad {fmt_time(mins['gradient_s'])} "
            f"(ratio {mins['gradient_s'] / mins['forward_s']:.2f}x)",
        ],
    }


# ----------------------------------------------------------------------------------------------
# 2. hand-written adjoint vs central differences on a 12-joint chain


class ChainParams(NamedTuple):
    """A chain of damped pendulums; neighbours are joined by a weak torsional spring."""

    mass: float = 1.0
    length: float = 0.5
    gravity: float = 9.81
    damping: float = 0.05
    coupling: float = 0.5


def pendulum_chain(n_joints):
    """``f(x, u, p)`` for ``n_joints`` damped pendulums, ``x = (q, v)`` of shape (2n,), ``u`` (n,)."""

    def f(x, u, p):
        q, v = x[:n_joints], x[n_joints:]
        dq = jnp.diff(q)  # q_{i+1} - q_i
        spring = p.coupling * (jnp.pad(dq, (0, 1)) - jnp.pad(dq, (1, 0)))
        inertia = p.mass * p.length**2
        acc = (-p.mass * p.gravity * p.length * jnp.sin(q) - p.damping * v + spring + u) / inertia
        return jnp.concatenate([v, acc])

    return f


def bench_adjoint_vs_fd(cfg, repeats, min_repeat_s):
    nj, n, h = cfg["joints"], cfg["steps"], cfg["h"]
    dim = n * nj
    eps = 1e-6
    p = ChainParams()
    step = cl.semi_implicit_euler(pendulum_chain(nj), h)
    x0 = jnp.zeros(2 * nj, jnp.float64)
    q_target = jnp.linspace(0.2, 0.6, nj)
    rng = np.random.default_rng(1)
    us = jnp.asarray(0.5 * rng.standard_normal((n, nj)), jnp.float64)

    def effort(x, u, p):
        return 1e-3 * h * jnp.sum(u**2)

    def tracking(x, p):
        return 0.5 * jnp.sum((x[:nj] - q_target) ** 2) + 0.05 * jnp.sum(x[nj:] ** 2)

    def loss(us, mode):
        return cl.rollout_cost(step, x0, us, p, effort, tracking, gradient=mode)

    adjoint_grad = jax.grad(partial(loss, mode="adjoint"))
    ad_grad = jax.grad(partial(loss, mode="store_all"))

    def fd_grad(us):
        # central differences: all 2*dim perturbed loss evaluations in one vmapped call
        dirs = jnp.eye(dim, dtype=us.dtype).reshape(dim, n, nj)
        batch = jnp.concatenate([us + eps * dirs, us - eps * dirs])
        losses = jax.vmap(partial(loss, mode="store_all"))(batch)
        return ((losses[:dim] - losses[dim:]) / (2 * eps)).reshape(n, nj)

    adj_c, adj_compile = compile_jit(adjoint_grad, us)
    ad_c, ad_compile = compile_jit(ad_grad, us)
    fd_c, fd_compile = compile_jit(fd_grad, us)
    g_adj, g_ad, g_fd = adj_c(us), ad_c(us), fd_c(us)
    samples = time_interleaved(
        {"adjoint_s": (adj_c, (us,)), "store_all_ad_s": (ad_c, (us,)), "central_fd_s": (fd_c, (us,))},
        repeats,
        min_repeat_s,
    )
    t_adj, t_ad, t_fd = (median(samples[k]) for k in ("adjoint_s", "store_all_ad_s", "central_fd_s"))
    speedup = paired_ratio(samples, "central_fd_s", "adjoint_s")
    mins = fastest(samples)
    rel_fd = normwise_rel(g_fd, g_adj)
    chapter_rel = float(jnp.max(cl.relative_error(g_adj, g_fd)))
    rel_ad = normwise_rel(g_ad, g_adj)
    return {
        "key": "adjoint_vs_fd",
        "title": f"2 adjoint vs central FD, {nj} joints x {n} steps ({dim} dims)",
        "config": {**cfg, "control_dims": dim, "fd_evaluations": 2 * dim, "fd_eps": eps, "dtype": "float64"},
        "measured": {
            "adjoint_s": t_adj,
            "central_fd_s": t_fd,
            "store_all_ad_s": t_ad,
            "adjoint_compile_s": adj_compile,
            "central_fd_compile_s": fd_compile,
            "store_all_ad_compile_s": ad_compile,
            "max_rel_err_fd_vs_adjoint": rel_fd,
            "max_chapter_relerr_fd_vs_adjoint": chapter_rel,
            "max_rel_err_store_all_vs_adjoint": rel_ad,
            "grad_inf_norm": float(jnp.max(jnp.abs(g_adj))),
            "min_times_s": mins,
        },
        "summary": f"adjoint {fmt_time(t_adj)}, FD {fmt_time(t_fd)}",
        "targets": [target("FD time / adjoint time", speedup, ">=", 300.0, ">= 300x")],
        "checks": [
            check("adjoint vs central FD, max|g_fd - g_adj| / max|g_adj|", rel_fd, FD_TOL),
            check("adjoint vs store_all AD, normwise relative", rel_ad, 1e-10),
        ],
        "details": [
            f"system: {nj} damped pendulums + neighbour springs, state ({2 * nj},), input ({nj},), semi-implicit Euler h={h}",
            "loss: terminal tracking 0.5|q_N - q*|^2 + 0.05|v_N|^2 + effort 1e-3*h*sum|u_k|^2",
            f"FD: {2 * dim} loss evaluations (eps={eps:g}) in one jitted vmap; compile {fmt_time(fd_compile)}",
            f"adjoint: rollout_cost(gradient='adjoint'); compile {fmt_time(adj_compile)}; "
            f"plain store_all AD for reference {fmt_time(t_ad)}",
            f"agreement: normwise rel err {rel_fd:.2e} (tol {FD_TOL:g}); chapter relerr max {chapter_rel:.2e}; "
            f"|g|_inf = {float(jnp.max(jnp.abs(g_adj))):.3e}",
            f"fastest repeats: adjoint {fmt_time(mins['adjoint_s'])}, FD {fmt_time(mins['central_fd_s'])} "
            f"(ratio {mins['central_fd_s'] / mins['adjoint_s']:.0f}x)",
        ],
    }


# ----------------------------------------------------------------------------------------------
# 3. course_lib vs diffrax, same fixed-step explicit midpoint


def bench_vs_diffrax(cfg, repeats, min_repeat_s, extras=True):
    import diffrax

    n, dt = cfg["steps"], cfg["dt"]
    t1 = n * dt
    x0 = jnp.array([1.0, 0.0], jnp.float64)
    theta = (cl.PendulumParams(*(jnp.asarray(v, jnp.float64) for v in cl.PendulumParams())), jnp.asarray(0.3))
    step = cl.explicit_midpoint(cl.pendulum, dt)

    def terminal(x):
        return (x[0] - 0.5) ** 2 + 0.1 * x[1] ** 2

    def no_stage(x, u, p):
        return jnp.zeros((), x.dtype)

    def cl_loss(theta, mode="store_all"):
        p, torque = theta
        us = jnp.broadcast_to(torque, (n, 1))
        return cl.rollout_cost(step, x0, us, p, no_stage, lambda x, p: terminal(x), gradient=mode)

    term = diffrax.ODETerm(lambda t, y, args: cl.pendulum(y, jnp.reshape(args[1], (1,)), args[0]))

    def dfx_solve(theta, adjoint):
        return diffrax.diffeqsolve(
            term,
            diffrax.Midpoint(),
            t0=0.0,
            t1=t1,
            dt0=dt,
            y0=x0,
            args=theta,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.ConstantStepSize(),
            adjoint=adjoint,
            max_steps=n,
        )

    default_adjoint = diffrax.RecursiveCheckpointAdjoint()  # diffrax's default: checkpoints=None -> ~log(max_steps)

    def dfx_loss(theta, adjoint=default_adjoint):
        return terminal(dfx_solve(theta, adjoint).ys[-1])

    def dfx_forward(theta):  # the loss, plus what the same-steps check needs (negligible extra output)
        sol = dfx_solve(theta, default_adjoint)
        return terminal(sol.ys[-1]), sol.ys[-1], sol.stats["num_steps"], sol.stats["num_accepted_steps"]

    cl_grad_c, cl_compile = compile_jit(jax.grad(cl_loss), theta)
    cl_ck_c, cl_ck_compile = compile_jit(jax.grad(partial(cl_loss, mode="checkpointed")), theta)
    dfx_grad_c, dfx_compile = compile_jit(jax.grad(dfx_loss), theta)
    cl_fwd_c, _ = compile_jit(cl_loss, theta)
    dfx_fwd_c, _ = compile_jit(dfx_forward, theta)

    # Same steps? diffrax must take exactly n accepted steps, and reach the same final state.
    _, y_dfx, num_steps, num_accepted = dfx_fwd_c(theta)
    num_steps, num_accepted = int(num_steps), int(num_accepted)
    x_cl = cl.rollout(step, x0, jnp.broadcast_to(theta[1], (n, 1)), theta[0])[-1]
    state_rel = normwise_rel(y_dfx, x_cl)

    g_cl = jax.tree_util.tree_leaves(cl_grad_c(theta))
    g_dfx = jax.tree_util.tree_leaves(dfx_grad_c(theta))
    g_cl_ck = jax.tree_util.tree_leaves(cl_ck_c(theta))
    rel = elementwise_rel(g_cl, g_dfx)
    rel_ck = elementwise_rel(g_cl_ck, g_dfx)

    fns = {
        "course_lib_grad_s": (cl_grad_c, (theta,)),
        "diffrax_grad_s": (dfx_grad_c, (theta,)),
        "course_lib_checkpointed_grad_s": (cl_ck_c, (theta,)),
        "course_lib_forward_s": (cl_fwd_c, (theta,)),
        "diffrax_forward_s": (dfx_fwd_c, (theta,)),
    }
    if extras:  # diffrax storing every step, for context (skipped in --quick: another ~5 s compile)
        full_store = diffrax.RecursiveCheckpointAdjoint(checkpoints=n)
        dfx_full_c, _ = compile_jit(jax.grad(partial(dfx_loss, adjoint=full_store)), theta)
        rel_full = elementwise_rel(jax.tree_util.tree_leaves(dfx_full_c(theta)), g_dfx)
        fns["diffrax_grad_checkpoints_eq_steps_s"] = (dfx_full_c, (theta,))
    samples = time_interleaved(fns, repeats, min_repeat_s)
    med = {k: median(v) for k, v in samples.items()}
    mins = fastest(samples)
    t_cl, t_dfx, t_cl_ck = med["course_lib_grad_s"], med["diffrax_grad_s"], med["course_lib_checkpointed_grad_s"]
    t_cl_fwd, t_dfx_fwd = med["course_lib_forward_s"], med["diffrax_forward_s"]
    speedup = paired_ratio(samples, "diffrax_grad_s", "course_lib_grad_s")
    if extras:
        t_dfx_full = med["diffrax_grad_checkpoints_eq_steps_s"]
        full_line = (
            f"diffrax RecursiveCheckpointAdjoint(checkpoints={n}) {fmt_time(t_dfx_full)} "
            f"(ratio {paired_ratio(samples, 'diffrax_grad_checkpoints_eq_steps_s', 'course_lib_grad_s'):.1f}x "
            "vs course_lib store_all)"
        )
    else:
        rel_full = t_dfx_full = None
        full_line = f"diffrax RecursiveCheckpointAdjoint(checkpoints={n}) skipped in --quick"
    names = [f"d/d{k}" for k in cl.PendulumParams._fields] + ["d/dtorque"]
    return {
        "key": "vs_diffrax",
        "title": f"3 course_lib vs diffrax, midpoint {n} fixed steps, grad wrt params",
        "config": {
            **cfg,
            "dtype": "float64",
            "diffrax_version": diffrax.__version__,
            "diffrax_adjoint": "RecursiveCheckpointAdjoint() (default, checkpoints=None)",
            "diffrax_solver": "Midpoint() + ConstantStepSize(), SaveAt(t1=True), max_steps=steps",
            "course_lib": "explicit_midpoint + rollout_cost(gradient='store_all')",
        },
        "measured": {
            "course_lib_grad_s": t_cl,
            "diffrax_grad_s": t_dfx,
            "course_lib_checkpointed_grad_s": t_cl_ck,
            "diffrax_grad_checkpoints_eq_steps_s": t_dfx_full,
            "course_lib_forward_s": t_cl_fwd,
            "diffrax_forward_s": t_dfx_fwd,
            "course_lib_grad_compile_s": cl_compile,
            "diffrax_grad_compile_s": dfx_compile,
            "diffrax_num_steps": num_steps,
            "diffrax_num_accepted_steps": num_accepted,
            "final_state_rel_diff": state_rel,
            "max_rel_err_grad": rel,
            "max_rel_err_grad_checkpointed": rel_ck,
            "max_rel_err_diffrax_adjoints": rel_full,
            "min_times_s": mins,
        },
        "summary": f"course_lib {fmt_time(t_cl)}, diffrax {fmt_time(t_dfx)}",
        "summary_by_metric": [
            f"course_lib {fmt_time(t_cl)}, diffrax {fmt_time(t_dfx)}",
            f"course_lib grad {fmt_time(t_cl)}, forward {fmt_time(t_cl_fwd)}",
        ],
        "targets": [
            target("diffrax grad time / course_lib grad time", speedup, ">=", 10.0, ">= 10x"),
            # issue 16: the gradient w.r.t. the parameters within 4x of the forward pass
            target(
                "course_lib grad wrt params / course_lib forward",
                paired_ratio(samples, "course_lib_grad_s", "course_lib_forward_s"),
                "<=",
                4.0,
                "<= 4x",
            ),
        ],
        "checks": [
            check(
                "diffrax took exactly `steps` steps (|num_steps - steps|)",
                abs(num_steps - n) + abs(num_accepted - n),
                0,
            ),
            check("final state, normwise relative difference", state_rel, DIFFRAX_TOL),
            check("gradient, max elementwise relative error", rel, DIFFRAX_TOL),
            check("gradient (course_lib checkpointed), max elementwise relative error", rel_ck, DIFFRAX_TOL),
        ],
        "details": [
            "diffrax adjoint: RecursiveCheckpointAdjoint() -- diffrax's default (checkpoints=None, i.e. ~log(max_steps) "
            "checkpoints, O(n log n) recomputation)",
            f"diffrax: Midpoint(), ConstantStepSize(), dt0={dt}, t1={t1:g}, SaveAt(t1=True), max_steps={n}; "
            f"took {num_steps} steps ({num_accepted} accepted)",
            "loss: (theta_N - 0.5)^2 + 0.1 omega_N^2, x0 = (1, 0), constant torque 0.3; "
            "gradient wrt (mass, length, gravity, damping, torque)",
            "gradient course_lib: " + ", ".join(f"{k}={float(v):.6e}" for k, v in zip(names, g_cl)),
            f"agreement: max elementwise rel err {rel:.2e} (tol {DIFFRAX_TOL:g}); final state rel diff {state_rel:.2e}",
            f"compile: course_lib {fmt_time(cl_compile)}, diffrax {fmt_time(dfx_compile)}",
            f"forward only: course_lib {fmt_time(t_cl_fwd)}, diffrax {fmt_time(t_dfx_fwd)} "
            f"(ratio {paired_ratio(samples, 'diffrax_forward_s', 'course_lib_forward_s'):.1f}x)",
            f"other modes: course_lib checkpointed {fmt_time(t_cl_ck)} "
            f"(ratio {paired_ratio(samples, 'diffrax_grad_s', 'course_lib_checkpointed_grad_s'):.1f}x vs diffrax default); "
            + full_line,
            f"fastest repeats: course_lib {fmt_time(mins['course_lib_grad_s'])}, diffrax {fmt_time(mins['diffrax_grad_s'])} "
            f"(ratio {mins['diffrax_grad_s'] / mins['course_lib_grad_s']:.1f}x)",
        ],
    }


# ----------------------------------------------------------------------------------------------
# 4. checkpointed vs store-all


def memory_stats(compiled):
    try:
        ma = compiled.memory_analysis()
    except Exception:  # some backends do not implement it
        ma = None
    fields = (
        "temp_size_in_bytes",
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "generated_code_size_in_bytes",
    )
    if ma is None:
        return {k: None for k in fields}
    return {k: (int(getattr(ma, k)) if getattr(ma, k, None) is not None else None) for k in fields}


def bench_checkpointing(cfg, repeats, min_repeat_s, dtype):
    n, h = cfg["steps"], cfg["h"]
    p = cl.PendulumParams()
    step = cl.rk4(cl.pendulum, h)
    rng = np.random.default_rng(2)
    x0 = jnp.asarray([1.0, 0.0], dtype)
    us = jnp.asarray(0.5 * rng.standard_normal((n, 1)), dtype)
    plan = cl.checkpoint_plan(n)

    def grad_fn(mode):
        def loss(us, x0):
            return cl.rollout_cost(step, x0, us, p, squared_angle, squared_angle_terminal, gradient=mode)

        return lambda x0, us: jax.grad(loss)(us, x0)

    sa_c, sa_compile = compile_jit(grad_fn("store_all"), x0, us)
    ck_c, ck_compile = compile_jit(grad_fn("checkpointed"), x0, us)
    mem_sa, mem_ck = memory_stats(sa_c), memory_stats(ck_c)
    g_sa, g_ck = sa_c(x0, us), ck_c(x0, us)
    rel = normwise_rel(g_ck, g_sa)
    samples = time_interleaved(
        {"store_all_s": (sa_c, (x0, us)), "checkpointed_s": (ck_c, (x0, us))}, repeats, min_repeat_s
    )
    t_sa, t_ck = median(samples["store_all_s"]), median(samples["checkpointed_s"])
    time_ratio = paired_ratio(samples, "checkpointed_s", "store_all_s")
    mins = fastest(samples)
    targets = []
    temp_sa, temp_ck = mem_sa["temp_size_in_bytes"], mem_ck["temp_size_in_bytes"]
    if temp_sa is not None and temp_ck is not None and temp_sa > 0:
        mem_ratio = temp_ck / temp_sa
        targets.append(target("temp memory checkpointed / store_all", mem_ratio, "<=", 0.1, "<= 1/10"))
        mem_summary = f"temp {fmt_bytes(temp_ck)} vs {fmt_bytes(temp_sa)}"
    else:
        mem_ratio = None
        mem_summary = "temp memory n/a"
    targets.append(target("time checkpointed / store_all", time_ratio, "<=", 2.0, "<= 2x"))
    tol = CHECKPOINT_TOL[str(jnp.dtype(dtype))]

    def mem_line(name, m):
        return (
            f"{name}: temp {fmt_bytes(m['temp_size_in_bytes'])}, arguments {fmt_bytes(m['argument_size_in_bytes'])}, "
            f"outputs {fmt_bytes(m['output_size_in_bytes'])}, aliased {fmt_bytes(m['alias_size_in_bytes'])}"
        )

    return {
        "key": "checkpointing",
        "title": f"4 checkpointed vs store_all, RK4 pendulum {n} steps",
        "config": {**cfg, "dtype": str(jnp.dtype(dtype)), "checkpoint_plan": plan._asdict()},
        "measured": {
            "store_all_s": t_sa,
            "checkpointed_s": t_ck,
            "store_all_compile_s": sa_compile,
            "checkpointed_compile_s": ck_compile,
            "store_all_memory": mem_sa,
            "checkpointed_memory": mem_ck,
            "memory_ratio": mem_ratio,
            "max_rel_err_checkpointed_vs_store_all": rel,
            "min_times_s": mins,
        },
        "summary_by_metric": [mem_summary, f"ckpt {fmt_time(t_ck)}, store {fmt_time(t_sa)}"],
        "targets": targets,
        "checks": [check("checkpointed vs store_all gradient, normwise relative", rel, tol)],
        "details": [
            f"checkpoint_plan({n}) = {plan}",
            "memory from jax.jit(grad).lower(x0, us).compile().memory_analysis():",
            "  " + mem_line("store_all   ", mem_sa),
            "  " + mem_line("checkpointed", mem_ck),
            "  temp per step: "
            + (
                f"store_all {temp_sa / n:.1f} B, checkpointed {temp_ck / n:.1f} B "
                f"(the control sequence us itself is {us.dtype.itemsize * us.shape[1]} B/step)"
                if temp_sa is not None and temp_ck is not None
                else "n/a"
            ),
            f"time: store_all {fmt_time(t_sa)}, checkpointed {fmt_time(t_ck)}; "
            f"compile {fmt_time(sa_compile)} / {fmt_time(ck_compile)}",
            f"fastest repeats: store_all {fmt_time(mins['store_all_s'])}, checkpointed {fmt_time(mins['checkpointed_s'])} "
            f"(ratio {mins['checkpointed_s'] / mins['store_all_s']:.2f}x)",
        ],
    }


# ----------------------------------------------------------------------------------------------
# report


def environment():
    def version(mod):
        try:
            return __import__(mod).__version__
        except Exception:
            return "not installed"

    import jaxlib

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus_available": cpus,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "diffrax": version("diffrax"),
        "equinox": version("equinox"),
        "numpy": np.__version__,
        "course_lib": cl.__version__,
        "x64_enabled": bool(jax.config.jax_enable_x64),
        "loadavg_at_start": _loadavg(),
    }


def _loadavg():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def table_rows(results):
    rows = []
    for r in results:
        summaries = r.get("summary_by_metric") or [r["summary"]] * len(r["targets"])
        for i, (t, s) in enumerate(zip(r["targets"], summaries)):
            name = r["title"] if i == 0 else "  (same benchmark)"
            rows.append((name, s, f"{t['ratio']:.3g}x", t["target"], "PASS" if t["met"] else "MISS"))
        if not r["targets"]:
            rows.append((r["title"], r["summary"], "n/a", "n/a", "n/a"))
    return rows


def print_table(rows):
    head = ("benchmark", "measured", "ratio", "target", "result")
    widths = [max(len(str(row[i])) for row in rows + [head]) for i in range(5)]
    line = "  ".join("{:<%d}" % w for w in widths)
    print(line.format(*head))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line.format(*row))


def main(argv=None):
    cl.enable_float64()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test); targets are not meaningful")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--repeats", type=int, default=None, help="timing repeats (median); default 11, quick 3")
    parser.add_argument(
        "--timing-dtype",
        choices=("float32", "float64"),
        default="float32",
        help="dtype of the timing-only benchmarks 1 and 4 (2 and 3 always use float64)",
    )
    args = parser.parse_args(argv)

    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or (3 if args.quick else 11)
    min_repeat_s = 0.005 if args.quick else 0.1
    dtype = jnp.dtype(args.timing_dtype)

    env = environment()
    print(f"course_lib benchmarks ({'QUICK: tiny sizes, targets not meaningful' if args.quick else 'full sizes'})")
    print(f"  backend {env['backend']}, devices {env['devices']} ({env['device_kind']}), {env['cpus_available']} CPUs")
    print(
        f"  jax {env['jax']}, jaxlib {env['jaxlib']}, diffrax {env['diffrax']}, equinox {env['equinox']}, "
        f"numpy {env['numpy']}, python {env['python']}"
    )
    print(
        f"  {env['platform']}; x64 enabled: {env['x64_enabled']}; {env['date_utc']} UTC; "
        f"load average {env['loadavg_at_start']}"
    )
    print(
        f"  timing: jit + compile first, {repeats} interleaved repeats; times = medians, ratios = median of "
        f"per-repeat ratios; benchmarks 1 and 4 in {dtype.name}, 2 and 3 in float64"
    )
    print(flush=True)

    results = []
    runs = [
        lambda: bench_grad_vs_forward(sizes["grad_vs_forward"], repeats, min_repeat_s, dtype),
        lambda: bench_adjoint_vs_fd(sizes["adjoint_vs_fd"], repeats, min_repeat_s),
        lambda: bench_vs_diffrax(sizes["vs_diffrax"], repeats, min_repeat_s, extras=not args.quick),
        lambda: bench_checkpointing(sizes["checkpointing"], repeats, min_repeat_s, dtype),
    ]
    t_start = time.perf_counter()
    for run in runs:
        t0 = time.perf_counter()
        r = run()
        r["wall_s"] = time.perf_counter() - t0
        results.append(r)
        print(f"[{r['title']}]  ({r['wall_s']:.1f} s)")
        for d in r["details"]:
            print(f"  {d}")
        for c in r["checks"]:
            print(f"  check {'ok  ' if c['passed'] else 'FAIL'} {c['name']}: {c['value']:.3g} (tol {c['tol']:g})")
        print(flush=True)

    print_table(table_rows(results))
    failed = [(r["key"], c["name"]) for r in results for c in r["checks"] if not c["passed"]]
    print()
    env["loadavg_at_end"] = _loadavg()
    print(
        f"total {time.perf_counter() - t_start:.1f} s; load average at end {env['loadavg_at_end']}; "
        "targets are reported, not asserted" + ("; QUICK sizes, so PASS/MISS means nothing here" if args.quick else "")
    )
    if failed:
        print("CORRECTNESS FAILURES:")
        for key, name in failed:
            print(f"  {key}: {name}")

    if args.json:
        doc = {
            "quick": bool(args.quick),
            "repeats": repeats,
            "environment": env,
            "benchmarks": [{k: v for k, v in r.items() if k not in ("summary_by_metric",)} for r in results],
            "table": [
                dict(zip(("benchmark", "measured", "ratio", "target", "result"), row)) for row in table_rows(results)
            ],
            "correctness_ok": not failed,
        }
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=2)
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
