"""The instructors page's Slurm configuration (dask-jobqueue) renders the job script it promises.

The page's code block is the source: its ``SLURMCluster(...)`` keywords are read from book/instructors.md
and the cluster is built from them (dask-jobqueue starts a local scheduler and renders the ``sbatch``
script without any Slurm), so the documented configuration cannot drift from what it claims: one Dask
worker thread per job (one submission at a time), 4 CPUs booked for the grading kernel's XLA threads, and
the shared venv's interpreter.
"""

import shlex

from slurm_cluster import documented_slurm_kwargs


def test_the_documented_slurm_configuration_books_cpus_for_one_single_threaded_worker():
    from dask_jobqueue import SLURMCluster

    kwargs = documented_slurm_kwargs()
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
