"""The instructors page's Slurm configuration (dask-jobqueue) renders the job script it promises.

The page's code block is the source: its ``SLURMCluster(...)`` keywords are read from book/instructors.md
and the cluster is built from them (dask-jobqueue starts a local scheduler and renders the ``sbatch``
script without any Slurm), so the documented configuration cannot drift from what it claims: one Dask
worker thread per job (one submission at a time), 4 CPUs booked for the grading kernel's XLA threads, and
the shared venv's interpreter.
"""

import ast
import re
import shlex
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "book" / "instructors.md"


def _documented_kwargs() -> dict:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    block = next(b for b in blocks if "SLURMCluster(" in b)
    calls = [
        node
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SLURMCluster"
    ]
    assert len(calls) == 1 and not calls[0].args
    return {kw.arg: ast.literal_eval(kw.value) for kw in calls[0].keywords}


def test_the_documented_slurm_configuration_books_cpus_for_one_single_threaded_worker():
    from dask_jobqueue import SLURMCluster

    kwargs = _documented_kwargs()
    cluster = SLURMCluster(**kwargs)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH --cpus-per-task=4" in script
    assert "#SBATCH --mem=8G" in script
    worker = next(line for line in script.splitlines() if "distributed.cli.dask_worker" in line)
    argv = shlex.split(worker)
    assert argv[0] == kwargs["python"] == "/shared/s04/.venv/bin/python"
    assert argv.count("--nthreads") == 1 and argv[argv.index("--nthreads") + 1] == "1", worker
    assert argv[argv.index("distributed.cli.dask_worker") + 1].startswith("tcp://")
