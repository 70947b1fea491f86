#!/usr/bin/env python
"""Contact benchmarks for course_lib, side by side in one run.

1. ift_vs_unrolled  gradient of a hard-contact rollout (box pushed along the floor towards a wall,
                    complementarity solve every step) differentiated two ways: the implicit function
                    theorem at each solution (``gradient="implicit"``) and AD through every
                    projected Gauss-Seidel sweep (``gradient="unrolled"``), each for two iteration
                    counts. Time and compiled temporary memory
                    (``jax.jit(f).lower(...).compile().memory_analysis().temp_size_in_bytes``):
                    the IFT memory does not depend on the iteration count, the unrolled one grows with it.
2. throughput       batched soft-contact rollouts: ``vmap`` of a planar hopper rollout
                    (``hopper_step``, law ``softplus_both``, semi-implicit Euler, h = 1 ms) for
                    1, 64 and 1024 environments, jitted, warm-up excluded; steps per second.

Usage:
    python benchmarks/run_contact.py [--quick] [--repeats N] [--json PATH]

The exit status is 1 only when a correctness check fails: IFT and unrolled gradients disagree,
or a gradient or rollout is not finite. Timings never change it.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # gradients are compared in float64

from course_lib.contact_systems import (  # noqa: E402
    BoxWallParams,
    HopperParams,
    box_wall_step,
    hopper_step,
    rollout_with_record,
)
from course_lib.rollout import rollout  # noqa: E402
from run import fmt_bytes, fmt_time  # noqa: E402  (benchmarks/run.py: shared table formatting)

FULL = {
    "ift_vs_unrolled": {"steps": 200, "h": 0.005, "iterations": (20, 200)},
    "throughput": {"steps": 1000, "h": 0.001, "envs": (1, 64, 1024), "dtype": "float32"},
}
QUICK = {
    "ift_vs_unrolled": {"steps": 20, "h": 0.005, "iterations": (10, 40)},
    "throughput": {"steps": 50, "h": 0.001, "envs": (1, 8, 32), "dtype": "float32"},
}
# IFT vs unrolled, max |g_ift - g_unrolled| / max |g_unrolled|, float64. Once the box is pressed into the
# corner, wall normal and floor friction act on the same direction; their split is fixed only by the solver's
# relative regularisation (1e-6) and PGS barely moves it, so the two gradients may differ at that order.
GRAD_TOL = 1e-6


def compile_jit(fn, *args):
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def measure(compiled, args, repeats, min_repeat_s=0.05):
    """Median seconds per call (warm-up call excluded); each repeat lasts at least ``min_repeat_s``."""
    jax.block_until_ready(compiled(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    one = time.perf_counter() - t0
    number = max(1, min(1000, int(math.ceil(min_repeat_s / max(one, 1e-7)))))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(compiled(*args))
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def temp_bytes(compiled):
    try:
        ma = compiled.memory_analysis()
        return None if ma is None else int(ma.temp_size_in_bytes)
    except Exception:  # some backends do not implement it
        return None


# ----------------------------------------------------------------------------------------------
# 1. IFT vs unrolled


def bench_ift_vs_unrolled(cfg, repeats):
    n, h = cfg["steps"], cfg["h"]
    p = BoxWallParams()
    x0 = jnp.array([0.3, 0.15, 0.5, 0.0])  # drops 5 cm, lands, slides towards the wall at x = 0.9
    us = jnp.tile(jnp.array([[6.0, 0.0]]), (n, 1))  # push (6 N) beats floor friction (4.9 N)
    theta = (x0, jnp.asarray(p.floor_friction))

    def make_loss(gradient, iterations):
        step = box_wall_step(h, gradient=gradient, iterations=iterations)

        def loss(theta):
            x0_, mu = theta
            xs = rollout(step, x0_, us, p._replace(floor_friction=mu))
            return jnp.sum(xs[:, 0]) * h + xs[-1, 2] ** 2  # time-integrated position + final speed^2

        return loss

    rows, grads, checks = [], {}, []
    for gradient in ("implicit", "unrolled"):
        for iterations in cfg["iterations"]:
            grad_fn = jax.grad(make_loss(gradient, iterations))
            compiled, t_compile = compile_jit(grad_fn, theta)
            g = compiled(theta)
            flat = np.concatenate([np.ravel(leaf) for leaf in jax.tree_util.tree_leaves(g)])
            grads[(gradient, iterations)] = flat
            t = measure(compiled, (theta,), repeats)
            rows.append(
                {
                    "gradient": gradient,
                    "iterations": iterations,
                    "time_s": t,
                    "compile_s": t_compile,
                    "temp_bytes": temp_bytes(compiled),
                    "finite": bool(np.all(np.isfinite(flat))),
                }
            )
    # how many steps the box spends pressed against the wall (redundant contacts)
    xs, records = rollout_with_record(box_wall_step(h, with_record=True), x0, us, p)
    wall_steps = int(jnp.sum(records.mode[:, 1] > 0))
    for it in cfg["iterations"]:
        a, b = grads[("implicit", it)], grads[("unrolled", it)]
        rel = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
        checks.append(
            {
                "name": f"IFT vs unrolled gradient, {it} iterations",
                "value": rel,
                "tol": GRAD_TOL,
                "passed": bool(np.isfinite(rel) and rel <= GRAD_TOL),
            }
        )
    checks.append(
        {
            "name": "all gradients finite",
            "value": float(sum(not r["finite"] for r in rows)),
            "tol": 0.0,
            "passed": all(r["finite"] for r in rows),
        }
    )
    return {
        "key": "ift_vs_unrolled",
        "title": f"IFT vs unrolled PGS gradient, box_wall rollout {n} steps (2 contacts), float64",
        "rows": rows,
        "checks": checks,
        "notes": [
            f"loss = h*sum_k px_k + vx_N^2, gradient w.r.t. (x0 (4,), floor mu); final box x = {float(xs[-1, 0]):.4f} "
            f"(wall contact at {p.wall_position - p.half_width:.2f}); {wall_steps} of {n} steps pressed against the wall",
            "memory: temp_size_in_bytes of the compiled gradient (XLA scratch, excludes arguments and outputs)",
        ],
    }


# ----------------------------------------------------------------------------------------------
# 2. batched soft-contact throughput


def bench_throughput(cfg, repeats):
    n, h = cfg["steps"], cfg["h"]
    dtype = jnp.dtype(cfg["dtype"])
    p = HopperParams()
    step = hopper_step(h, law="softplus_both")
    base = jnp.array([0.0, 0.9, 0.0, 0.4, 0.3, 0.0, 0.3, 0.0], dtype)
    rng = np.random.default_rng(0)
    rows, checks = [], []
    for envs in cfg["envs"]:
        x0s = base + jnp.asarray(0.05 * rng.standard_normal((envs, 8)), dtype) * jnp.array(
            [1, 1, 1, 0, 1, 1, 1, 1], dtype
        )
        uss = jnp.asarray(rng.uniform(-1.0, 1.0, (envs, n, 2)), dtype)

        def batched(x0s, uss):
            return jax.vmap(lambda x0, us: rollout(step, x0, us, p)[-1])(x0s, uss)

        compiled, t_compile = compile_jit(batched, x0s, uss)
        out = compiled(x0s, uss)
        finite = bool(jnp.all(jnp.isfinite(out)))
        t = measure(compiled, (x0s, uss), repeats)
        rows.append(
            {
                "envs": envs,
                "steps": n,
                "time_s": t,
                "compile_s": t_compile,
                "steps_per_s": envs * n / t,
                "finite": finite,
                "dtype": str(dtype),
            }
        )
        checks.append(
            {"name": f"finite final states, {envs} envs", "value": float(not finite), "tol": 0.0, "passed": finite}
        )
    return {
        "key": "throughput",
        "title": f"batched soft-contact hopper rollouts, {n} steps, h = {h}, {dtype}",
        "rows": rows,
        "checks": checks,
        "notes": [
            "vmap(rollout(hopper_step(h, 'softplus_both'))) jitted; warm-up call excluded; steps/s = envs * steps / time"
        ],
    }


# ----------------------------------------------------------------------------------------------


def print_results(results):
    r1, r2 = results
    print(f"\n== {r1['title']}")
    print(f"{'gradient':<10} {'iters':>6} {'time':>10} {'compile':>10} {'temp memory':>12}")
    for row in r1["rows"]:
        print(
            f"{row['gradient']:<10} {row['iterations']:>6} {fmt_time(row['time_s']):>10} "
            f"{fmt_time(row['compile_s']):>10} {fmt_bytes(row['temp_bytes']):>12}"
        )
    for note in r1["notes"]:
        print("  " + note)
    print(f"\n== {r2['title']}")
    print(f"{'envs':>6} {'time/rollout batch':>20} {'steps/s':>14} {'compile':>10}")
    for row in r2["rows"]:
        print(
            f"{row['envs']:>6} {fmt_time(row['time_s']):>20} {row['steps_per_s']:>14.3g} {fmt_time(row['compile_s']):>10}"
        )
    for note in r2["notes"]:
        print("  " + note)
    print("\n== correctness checks")
    ok = True
    for r in results:
        for c in r["checks"]:
            ok &= c["passed"]
            print(f"  [{'ok' if c['passed'] else 'FAIL'}] {c['name']}: {c['value']:.3g} (tol {c['tol']:g})")
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (< 30 s), for smoke tests")
    parser.add_argument("--repeats", type=int, default=None, help="timing repeats (default 7, quick 3)")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeats = args.repeats or (3 if args.quick else 7)
    print(
        f"course_lib contact benchmarks ({'quick' if args.quick else 'full'}); jax {jax.__version__}, "
        f"backend {jax.default_backend()}, {platform.machine()}, repeats {repeats}"
    )
    t0 = time.perf_counter()
    results = [bench_ift_vs_unrolled(sizes["ift_vs_unrolled"], repeats), bench_throughput(sizes["throughput"], repeats)]
    ok = print_results(results)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s; {'all checks passed' if ok else 'CORRECTNESS FAILURE'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"quick": args.quick, "results": results}, fh, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
