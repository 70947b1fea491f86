#!/usr/bin/env bash
# `make bench-gpu`: run benchmarks/run.py on an NVIDIA GPU (e.g. H200) with the CUDA build of jaxlib.
# Builds its own venv (the project's venv stays CPU-only): requirements.lock first, then the
# CUDA 12 plugin pinned to the lock's jax version (jax 0.10.2 declares the extra `cuda12`),
# then the repo itself without dependencies. Needs Python 3.11, network access and a driver for CUDA 12.
# Extra arguments go to run.py, e.g. `bash benchmarks/run_gpu.sh --quick`.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${GPU_VENV:-/tmp/s04-gpu-venv}
JAX_VERSION=$(sed -n 's/^jax==//p' requirements.lock)
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"need Python 3.11, got {sys.version}"'
"$PY" -m venv "$VENV"
"${PIP[@]}" -r requirements.lock
"${PIP[@]}" "jax[cuda12]==${JAX_VERSION}" "jaxlib==${JAX_VERSION}"
"${PIP[@]}" --no-deps --no-build-isolation -e .

nvidia-smi
# JAX_PLATFORMS=cuda: fail loudly instead of silently falling back to the CPU.
export JAX_PLATFORMS=cuda
"$VENV/bin/python" -c 'import jax; print("jax", jax.__version__, "devices", jax.devices())'
"$VENV/bin/python" benchmarks/run.py --json benchmarks/results-gpu.json "$@"
