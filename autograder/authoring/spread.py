"""The numerical spread of correct answers across machines, measured when the reference data is generated.

A correct answer computed on another machine differs from the stored expected value in its last
digits. The sources, and how one machine imitates them:

* BLAS/LAPACK kernels: OpenBLAS picks one per CPU (numpy's and scipy's OpenBLAS, which jaxlib's
  CPU LAPACK calls use too); ``OPENBLAS_CORETYPE`` forces another one;
* the instruction set XLA compiles for (vector width and FMA decide the summation order of its
  reductions): ``XLA_FLAGS=--xla_cpu_max_isa=...``; and the one numpy dispatches its loops to:
  ``NPY_DISABLE_CPU_FEATURES``;
* other correct implementations, op-by-op evaluation, machines none of these settings imitate:
  inputs moved by a few ulps, which shows how much the computation amplifies rounding (see
  :data:`X86_VARIANTS`).

:func:`measure` re-runs the reference of each check on its STORED hidden inputs (the ones the
grading kernel reads) in one subprocess per variant of :data:`VARIANTS`, and returns per output the
largest deviation from the values computed here, relative to the expected value's largest magnitude
(the measure :func:`course_check.compare.compare` uses). The generator derives each stored
tolerance from it (:mod:`autograder.authoring.regenerate`).

A variant is a subprocess because these settings are read once, when numpy, OpenBLAS and XLA start,
and because reference modules cache compiled functions and results.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

#: read by the worker subprocess only: move every non-integer float input by up to this many ulps
PERTURB_ENV = "S04_SPREAD_PERTURB_ULPS"
#: the term's salt the hidden cases were drawn with (the drawing context of :func:`measure`'s caller): the worker
#: runs the references in the same context, since a reference may look up how its case was drawn (the true
#: parameters of a hidden experiment)
SALT_ENV = "S04_SPREAD_SALT"
#: Inputs moved by a few ulps stand in for the sources no setting reaches: another correct implementation
#: (a student's loop instead of lax.scan, np.linalg instead of a closed form), op-by-op evaluation, an
#: AVX-512 machine. Rounding differences anywhere in a computation grow like a perturbation of its inputs;
#: where the computation amplifies them (long rollouts, sensitivities, ill-conditioned products) this
#: variant measures that amplification. Measured on s04_3_ex2.grad_norm_sweep (implicit Euler, through
#: LAPACK solves): 7.6e-13 for the inputs moved by 4 ulps and 1.3e-12 for OpenBLAS's Nehalem kernels, where
#: an AVX-512 machine's notebook solution differed from the stored values by 4.7e-12.
_PERTURB = {"inputs moved by up to 4 ulps": {PERTURB_ENV: "4"}}
#: Environments imitating other x86-64 machines. Each combines several sources, so that few subprocesses
#: sample them all: an old SSE machine (Sandybridge BLAS kernels, XLA limited to SSE4.2, numpy without its
#: AVX2 loops) and an AVX machine with the oldest OpenBLAS kernels. JAX_DISABLE_JIT=1 (op-by-op
#: evaluation) is not among them: it runs the references 30 to 100 times slower (lax.scan becomes a
#: Python loop: 205 s instead of 6 s for mini_diffsim_p1.grad_norm_horizon), and on the eight exercises
#: where it was measured (s04_1_ex1, s04_2_ex1, s04_3_ex2, s04_4_ex2, s04_5, s04_6_ex1, s04_7_ex2) its
#: spread was at most 6e-16, below that of these variants.
X86_VARIANTS = {
    "sse4.2, OpenBLAS Sandybridge, numpy x86-64-v2": {
        "OPENBLAS_CORETYPE": "Sandybridge",
        "XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2",
        "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    },
    "avx, OpenBLAS Nehalem": {"OPENBLAS_CORETYPE": "Nehalem", "XLA_FLAGS": "--xla_cpu_max_isa=AVX"},
    **_PERTURB,
}
#: elsewhere (e.g. ARM) only the variant that needs no CPU-specific setting
VARIANTS = X86_VARIANTS if platform.machine().lower() in ("x86_64", "amd64") else dict(_PERTURB)

_WORKER_TIMEOUT_S = 3600


class SpreadError(RuntimeError):
    """A variant run failed or a check's reference is not reproducible on its stored inputs."""


def deviation(expected, value) -> float:
    """Largest ``|value - expected|`` relative to ``max|expected|`` (inf if shape or non-finite entries differ)."""
    e, v = np.asarray(expected, dtype=np.float64), np.asarray(value, dtype=np.float64)
    if e.shape != v.shape:
        return math.inf
    finite = np.isfinite(e)
    if not np.array_equal(finite, np.isfinite(v)) or not np.array_equal(e[~finite], v[~finite], equal_nan=True):
        return math.inf
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(e[finite]))), 1e-300)
    return float(np.max(np.abs(e[finite] - v[finite])) / scale)


def round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded UP to ``digits`` significant digits (0, inf and nan unchanged): stable, readable numbers."""
    if x <= 0 or not math.isfinite(x):
        return float(x)
    exponent = math.floor(math.log10(x)) - (digits - 1)
    mantissa = math.ceil(round(x / 10.0**exponent, 9))
    return float(f"{mantissa}e{exponent}")


def spread_of(expected_cases, variant_cases) -> list[float]:
    """Per output, the largest :func:`deviation` over hidden cases and variants (rounded up).

    Args:
        expected_cases: ``[[value of each output] for each case]`` computed here.
        variant_cases: ``[expected_cases as another variant computed them]``.
    """
    n_outputs = len(expected_cases[0]) if expected_cases else 0
    worst = [0.0] * n_outputs
    for other in variant_cases:
        for case, case_other in zip(expected_cases, other, strict=True):
            for j in range(n_outputs):
                worst[j] = max(worst[j], deviation(case[j], case_other[j]))
    return [round_up(w) for w in worst]


def _run_variant(index: int, name: str, env: dict, request: Path) -> dict:
    out = request.with_name(f"variant-{index}.json")
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.authoring.spread", str(request), str(out)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=_WORKER_TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise SpreadError(f"spread variant {name!r} ({env}) failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def measure(inputs: dict, expected: dict, variants: dict | None = None, jobs: int | None = None) -> dict:
    """``{check key: [spread of each output]}`` of the checks in ``inputs``.

    Args:
        inputs: ``{check key: [stored raw inputs of each hidden case]}`` (JSON-ready, as the kernel reads them).
        expected: ``{check key: [[value of each output] for each case]}`` computed in this process.
        variants: ``{name: environment overrides}`` (default :data:`VARIANTS`).
        jobs: variant subprocesses run at once (default: all of them).

    Call it in the context the hidden cases were drawn in (:func:`autograder.authoring.cases.drawing_hidden`).
    """
    from autograder.authoring.cases import drawing_key

    salt = drawing_key()[1]
    variants = VARIANTS if variants is None else variants
    if not inputs or not variants:
        return {key: [0.0] * len(expected[key][0]) if expected[key] else [] for key in inputs}
    jobs = jobs or len(variants)
    with tempfile.TemporaryDirectory(prefix="s04-spread-") as tmp:
        request = Path(tmp) / "inputs.json"
        request.write_text(json.dumps(inputs), encoding="utf-8")
        with ThreadPoolExecutor(jobs) as pool:
            runs = list(
                pool.map(
                    lambda item: _run_variant(item[0], item[1][0], {**item[1][1], SALT_ENV: salt}, request),
                    enumerate(variants.items()),
                )
            )
    return {key: spread_of(expected[key], [run[key] for run in runs if run[key] is not None]) for key in inputs}


def perturbed(raw, rng, ulps: int):
    """``raw`` (JSON inputs) with every non-integer float moved by up to ``ulps`` units in the last place."""
    if isinstance(raw, dict):
        return {k: perturbed(v, rng, ulps) for k, v in raw.items()}
    if isinstance(raw, list):
        return [perturbed(v, rng, ulps) for v in raw]
    if isinstance(raw, float) and math.isfinite(raw) and raw != int(raw):
        return float(raw * (1.0 + float(rng.integers(-ulps, ulps + 1)) * np.finfo(np.float64).eps))
    return raw


def _reference_values(check, raw_inputs, rng=None, ulps: int = 0) -> list:
    """The reference's value of each output on one stored case, as JSON-ready float64 lists."""
    from course_check.calling import to_inputs

    if ulps:
        raw_inputs = perturbed(raw_inputs, rng, ulps)
    value = check.reference(**to_inputs(raw_inputs))
    parts = list(value) if len(check.outputs) > 1 else [value]
    return [np.asarray(p, dtype=np.float64).tolist() for p in parts]


def _worker(request: Path, out: Path) -> None:
    """Subprocess side of :func:`measure`: the references on the stored inputs, under this environment."""
    from autograder.authoring.cases import drawing_hidden
    from autograder.authoring.registry import all_checks

    checks = all_checks()
    inputs = json.loads(request.read_text(encoding="utf-8"))
    ulps = int(os.environ.get(PERTURB_ENV, "0"))
    results = {}
    with drawing_hidden(os.environ.get(SALT_ENV, "")):
        for key, cases in inputs.items():
            results[key] = _measured(checks[key], key, cases, ulps)
    out.write_text(json.dumps(results), encoding="utf-8")  # NaN/Infinity round-trip through Python's json


def _measured(check, key: str, cases: list, ulps: int):
    """The reference's values on the stored ``cases`` of one check (None: not measured under this variant)."""
    # seeded by the check alone, so that measuring one exercise or all of them moves the same inputs
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    try:
        return [_reference_values(check, raw, rng, ulps) for raw in cases]
    except Exception:  # noqa: BLE001
        if not ulps:
            raise
        # a reference that looks its answer up from the exact inputs (e.g. the true parameters of a
        # hidden experiment) cannot be moved: this variant does not measure it (null)
        return None


if __name__ == "__main__":
    _worker(Path(sys.argv[1]), Path(sys.argv[2]))
