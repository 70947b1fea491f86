"""A real one-node Slurm cluster for the tests, from Debian's ``slurm-wlm`` and ``munge`` packages.

:func:`slurm_cluster` (a context manager) starts, in a fresh temporary folder:

* ``munged`` with a random key, its socket in that folder (never ``/run/munge``);
* ``slurmctld`` and ``slurmd`` on free localhost ports, with a ``slurm.conf`` written there: one node, one
  partition, no accounting, no cgroups (``proctrack/linuxproc``, ``task/none``: a container has no
  writable cgroup tree), every daemon and job as the user running the tests.

It sets ``SLURM_CONF`` in ``os.environ`` (``sbatch``, ``squeue`` and ``scancel``, which dask-jobqueue calls,
read it; jobs inherit it), yields a :class:`Cluster`, and on the way out cancels every job, stops the
daemons and removes the folder.

The node declares :data:`NODE_CPUS` CPUs whatever the machine has (``SlurmdParameters=config_overrides``),
so that the instructors page's configuration, which books 4 CPUs a job, can place two jobs on a 2-core CI
machine: Slurm only schedules, the kernel still shares the real cores.

Without the programs the test is skipped, or fails when the environment variable ``CI`` is set
(``.ci/run`` installs the packages).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTRUCTORS_PAGE = Path(__file__).resolve().parents[1] / "book" / "instructors.md"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")
NODE_CPUS, NODE_MEMORY_MB = 8, 20_000
PARTITION = "grading"


@dataclass(frozen=True)
class Cluster:
    folder: Path
    conf: Path  # slurm.conf; also in os.environ["SLURM_CONF"] while the cluster runs
    node: str

    def jobs(self) -> dict[str, str]:
        """``{job id: state}`` of the jobs Slurm knows now (pending, running, completing)."""
        out = _run(["squeue", "--noheader", "--format=%i %T"]).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def cancel(self, job_id: str) -> None:
        _run(["scancel", job_id])

    def log(self) -> str:
        """The tail of both daemons' logs, for an assertion's message."""
        return "\n".join(
            f"--- {name}\n{(self.folder / name).read_text(errors='replace')[-3000:]}"
            for name in ("slurmctld.log", "slurmd.log")
            if (self.folder / name).is_file()
        )


def documented_slurm_kwargs() -> dict:
    """The keywords of the ``SLURMCluster(...)`` call in the instructors page's code block (the page is the source)."""
    blocks = re.findall(r"```python\n(.*?)```", INSTRUCTORS_PAGE.read_text(encoding="utf-8"), flags=re.S)
    block = next(b for b in blocks if "SLURMCluster(" in b)
    calls = [
        node
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SLURMCluster"
    ]
    assert len(calls) == 1 and not calls[0].args
    return {kw.arg: ast.literal_eval(kw.value) for kw in calls[0].keywords}


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI is set: .ci/run installs Debian's slurm-wlm and munge)")
    pytest.skip(why)


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _config(folder: Path, host: str, node: str, ctld_port: int, slurmd_port: int) -> str:
    user = "root" if os.geteuid() == 0 else os.environ.get("USER") or str(os.geteuid())
    return f"""\
ClusterName=s04test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
PlugStackConfig={folder}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stop(pid: int | None, timeout: float = 30) -> None:
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def slurm_cluster():
    """Start munge, slurmctld and slurmd in a temporary folder; yield the :class:`Cluster`."""
    missing = [p for p in PROGRAMS if shutil.which(p, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") is None]
    if missing:
        _unavailable(f"no Slurm/munge programs: {', '.join(missing)}")
    sbin = {p: shutil.which(p, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") for p in PROGRAMS}
    folder = Path(tempfile.mkdtemp(prefix="s04-slurm-"))
    folder.chmod(0o755)  # munged wants a socket folder others may traverse (it warns otherwise)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    (folder / "plugstack.conf").write_text("")
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    host, node = socket.gethostname().split(".")[0], "s04node"
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, host, node, *_free_ports(2)))
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    munge_pid = folder / "munged.pid"
    try:
        _run(
            [
                sbin["munged"],
                "--force",  # as root, and with a key folder that is not /etc/munge
                f"--socket={folder}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={munge_pid}",
                f"--log-file={folder}/munged.log",
                f"--seed-file={folder}/munged.seed",
            ]
        )
        _run([sbin["slurmctld"], "-f", str(conf), "-i"])  # -i: ignore (absent) saved state
        _run([sbin["slurmd"], "-f", str(conf), "-N", node])
        cluster = Cluster(folder=folder, conf=conf, node=node)
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                state = _run(["sinfo", "--noheader", "--format=%T", "--nodes", node]).stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the Slurm node never became idle (state {state!r}):\n{cluster.log()}")
        yield cluster
    finally:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, FileNotFoundError):
            _run(["scancel", "--partition", PARTITION])
        # slurmd kills what is left of its jobs when it stops; give the cancelled jobs a moment to end first
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if not _run(["squeue", "--noheader"]).stdout.strip():
                    break
            except (RuntimeError, subprocess.TimeoutExpired, FileNotFoundError):
                break
            time.sleep(0.5)
        for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            _stop(_pid(folder / name))
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        shutil.rmtree(folder, ignore_errors=True)
