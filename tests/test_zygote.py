"""Kernels forked from the warm zygote (autograder/confine/zygote.py) are confined like launched ones and share nothing.

A forked kernel must see what a kernel started from nothing sees (its user, folder, environment, what it
may read and reach), hold no way back to the zygote, and leave nothing behind for the next kernel: a
student who patches course_lib, numpy or JAX in their kernel, or tries to trace, signal or read the
zygote, changes nothing for the next student. The zygote must refuse to hold code a kernel may not read,
its kernels must die with it, a dead zygote must be replaced, and it must end with the grader.
The same guarantees through real nbgrader are in tests/test_hostile.py ("poison-next-kernel").
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.utils import run_sync
from nbclient import NotebookClient

from autograder.confine import fork_server, isolation, zygote
from autograder.confine.zygote_registry import (
    KERNEL_ZYGOTES,
    MAX_RETRY_AFTER_S,
    RETRY_AFTER_S,
    StartFailures,
    ZygoteRegistry,
)
from autograder.confine import landlock as sandbox
from autograder.confine.kernel import confined_kernel
from autograder.confine.limits import Limits

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "s04_1_ex1"

pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.skipif(sandbox.abi_version() < 1, reason="this Linux kernel has no Landlock"),
    pytest.mark.skipif(not fork_server.available(), reason="no pidfds or SOCK_SEQPACKET here"),
]

PROBE = textwrap.dedent(f"""
    import json, os, socket, sys
    def attempt(fn):
        try:
            fn()
            return "ok"
        except OSError as exc:
            return type(exc).__name__
    links = {{}}
    for fd in os.listdir("/proc/self/fd"):
        try:
            links[fd] = os.readlink(f"/proc/self/fd/{{fd}}")
        except OSError:  # the descriptor of the listing itself
            pass
    print(json.dumps({{
        "kernel_user": os.getuid() >= {isolation.UID_RANGE[0]} if os.getuid() else "root",
        "cwd_is_home": os.getcwd() == os.environ["HOME"] == os.environ["TMPDIR"],
        "env": sorted(os.environ),
        "read_data": attempt(lambda: open({str(ROOT / "autograder" / "data" / (EXERCISE + ".json"))!r}).read()),
        "read_inputs": attempt(lambda: open({str(ROOT / "autograder" / "kernel" / "inputs" / (EXERCISE + ".json"))!r}).read()),
        "write_tmp": attempt(lambda: open("/tmp/s04-zygote-probe.txt", "w")),
        "tcp": attempt(lambda: socket.create_connection(("127.0.0.1", 9), timeout=2)),
        "sockets": sorted(v for v in links.values() if v.startswith("socket:")),
        "jax_loaded": "jax" in sys.modules,
    }}))
""")

POISON = textwrap.dedent("""
    import ctypes, json, os, sys
    import numpy as np, jax.numpy as jnp, course_lib, autograder.kernel.capture as capture
    course_lib.rollout = lambda *a, **k: 0.0
    capture.grade = lambda *a, **k: 3.0
    np.pi = 3.0
    jnp.sum = lambda *a, **k: 0.0
    sys.modules["course_lib"].__dict__["POISONED"] = True
    zygote = os.getppid()
    def attempt(fn):
        try:
            fn()
            return "ESCAPED"
        except OSError as exc:
            return type(exc).__name__
    def ptrace():
        if ctypes.CDLL(None, use_errno=True).ptrace(16, zygote, 0, 0) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), "ptrace")
    print(json.dumps({"zygote": zygote, "draw": float(np.random.rand()), "attempts": {
        "read-zygote-memory": attempt(lambda: open(f"/proc/{zygote}/mem", "rb").read(1)),
        "write-zygote-memory": attempt(lambda: open(f"/proc/{zygote}/mem", "r+b")),
        "ptrace-zygote": attempt(ptrace),
        "zygote-environment": attempt(lambda: open(f"/proc/{zygote}/environ", "rb").read()),
    }}))
""")

CHECK = textwrap.dedent("""
    import json, os, numpy as np, jax.numpy as jnp, course_lib, autograder.kernel.capture as capture
    print(json.dumps({"zygote": os.getppid(), "draw": float(np.random.rand()), "clean": [
        course_lib.rollout.__module__.startswith("course_lib"),
        capture.grade.__module__ == "autograder.kernel.capture",
        np.pi == 3.141592653589793,
        float(jnp.sum(jnp.ones(3))) == 3.0,
        "POISONED" not in vars(course_lib),
    ]}))
""")


def run_cells(sources, fork=True):
    """Run ``sources`` as one notebook in a grading kernel; the last JSON line each cell printed."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    with confined_kernel(EXERCISE, Limits(), fork=fork) as km:
        client = NotebookClient(nb, km=km, timeout=120)
        try:
            client.execute()
        finally:  # as SafeExecute does: nbclient leaves the channels of a kernel it did not start open
            if client.kc is not None:
                client.kc.stop_channels()
    results = []
    for cell in nb.cells:
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        assert not errors, errors
        results.append(json.loads(text.strip().splitlines()[-1]))
    return results


def _socket_links(pid: int) -> set[str]:
    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            links.add(link)
    return links


def _gone(pid: int, timeout_s: float) -> bool:
    """Whether ``pid`` ended (or is a zombie) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as status:
                if any(line.startswith("State:") and line.split()[1] in ("Z", "X") for line in status):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_forked_kernel_is_confined_like_a_launched_one():
    (forked,) = run_cells([PROBE], fork=True)
    (launched,) = run_cells([PROBE], fork=False)
    assert forked["jax_loaded"] and not launched["jax_loaded"]  # the one intended difference
    same = ("kernel_user", "cwd_is_home", "env", "read_data", "read_inputs", "write_tmp", "tcp")
    assert {k: forked[k] for k in same} == {k: launched[k] for k in same}
    assert forked["read_data"] == "PermissionError" and forked["read_inputs"] == "ok"
    assert forked["write_tmp"] == "PermissionError" and forked["tcp"] != "ok"
    assert forked["cwd_is_home"] and (forked["kernel_user"] is True or not isolation.is_root())
    # none of the kernel's sockets is one the zygote holds: it has no way back to ask for anything
    if isolation.is_root():
        assert not set(forked["sockets"]) & _socket_links(KERNEL_ZYGOTES.current.process.pid)


def test_what_a_kernel_changes_never_reaches_the_next_one():
    (poisoned,) = run_cells([POISON])
    (after,) = run_cells([CHECK])
    assert after["zygote"] == poisoned["zygote"]  # the same zygote served both, and it survived
    assert set(poisoned["attempts"].values()) == {"PermissionError"}, poisoned["attempts"]
    assert all(after["clean"]), after["clean"]
    assert after["draw"] != poisoned["draw"]  # numpy's global stream is reseeded in every kernel


def test_zygote_refuses_to_hold_code_a_kernel_may_not_read():
    with pytest.raises(RuntimeError, match="modules a kernel may not read.*mini_diffsim_p3"):
        zygote.Zygote(None, extra_preload=("autograder.kernel_support.mini_diffsim_p3",))


def test_kernels_die_with_their_zygote_and_a_new_one_takes_over():
    with confined_kernel(EXERCISE, Limits(), fork=True) as km:
        run_sync(km.start_kernel)()
        kernel_pid, first = km.provisioner.pid, KERNEL_ZYGOTES.current.process.pid
        assert kernel_pid != first and os.getpgid(kernel_pid) == kernel_pid
        os.kill(first, signal.SIGKILL)
        assert _gone(kernel_pid, 10), "a kernel outlived its zygote"
    (after,) = run_cells([CHECK])
    assert after["zygote"] != first and all(after["clean"])


def test_a_shared_zygote_ends_the_kernels_of_a_grader_that_died_and_serves_the_others():
    """A class run's workers share one zygote (autograder/ops/worker.py), each through a connection of its own.
    A worker killed past its time limit takes its kernel with it, as a zygote of its own did."""
    shared = zygote.Zygote(None)
    try:
        KERNEL_ZYGOTES.adopt(zygote.Zygote.attached(shared.connect(), None, shared.code))  # a first worker's
        with confined_kernel(EXERCISE, Limits(), fork=True) as km:
            run_sync(km.start_kernel)()
            kernel_pid = km.provisioner.pid
            KERNEL_ZYGOTES.current._conn.close()  # that worker dies: its end of the connection closes
            assert _gone(kernel_pid, 10), "a kernel outlived the grading process that asked for it"
        assert shared.alive()
        KERNEL_ZYGOTES.adopt(zygote.Zygote.attached(shared.connect(), None, shared.code))  # another worker's
        (after,) = run_cells([CHECK])
        assert after["zygote"] == shared.process.pid and all(after["clean"])
    finally:
        KERNEL_ZYGOTES.close()
        shared.close()


def test_zygote_ends_with_the_grader():
    script = (
        "import os, signal\nfrom autograder.confine.zygote_registry import KERNEL_ZYGOTES\n"
        "print(KERNEL_ZYGOTES.get(None).process.pid, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert _gone(int(proc.stdout.strip()), 10), "the zygote outlived the grading process that started it"


GRADER_KILLED_WITH_A_KERNEL = f"""
import os, signal
from jupyter_client.utils import run_sync
from autograder.confine.kernel import confined_kernel
from autograder.confine.limits import Limits
from autograder.confine.zygote_registry import KERNEL_ZYGOTES
with confined_kernel({EXERCISE!r}, Limits(), fork=True) as km:
    run_sync(km.start_kernel)()
    zygote = KERNEL_ZYGOTES.current
    print(zygote.process.pid, zygote.home, km.provisioner.pid, os.path.dirname(km.connection_file), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a worker killed past its time limit: nothing of ours cleans up
"""


def test_a_killed_grader_leaves_no_folder_of_its_kernel_or_zygote_behind():
    """The kernel's scratch folder (the student's files) and the zygote's HOME are removed by the zygote when the
    grading process that made them dies; over a term, every worker killed past its limit would otherwise leave both
    in /tmp."""
    proc = subprocess.run(
        [sys.executable, "-c", GRADER_KILLED_WITH_A_KERNEL], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    zygote_pid, home, kernel_pid, scratch = proc.stdout.split()
    assert Path(home).name.startswith("s04-zygote-") and Path(scratch).name.startswith("s04-kernel-")
    assert _gone(int(kernel_pid), 10) and _gone(int(zygote_pid), 10)
    deadline = time.monotonic() + 10
    while (Path(home).exists() or Path(scratch).exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(scratch).exists(), "the kernel's scratch folder outlived its grader"
    assert not Path(home).exists(), "the zygote's HOME outlived its grader"


def test_a_notebook_without_code_starts_no_kernel_and_an_added_code_cell_still_runs(monkeypatch):
    from autograder.confine import execute

    started = []
    real = execute.confined_kernel
    monkeypatch.setattr(execute, "confined_kernel", lambda *a, **k: started.append(a) or real(*a, **k))
    written = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("我的回答：……")])
    execute.SafeExecute().preprocess(written, {"metadata": {"name": "s04_1_ex3"}})
    assert started == []
    written.cells.append(nbformat.v4.new_code_cell("print('a student added this cell')"))
    execute.SafeExecute().preprocess(written, {"metadata": {"name": "s04_1_ex3"}})
    assert len(started) == 1
    assert "a student added this cell" in written.cells[-1].outputs[0]["text"]


def test_a_changed_course_lib_gets_a_new_zygote():
    # formgrader's server lives for days: after an instructor edits course_lib, kernels must run the new code
    code = [zygote.code_fingerprint()]
    registry = ZygoteRegistry(fingerprint=lambda: code[0])
    try:
        first = registry.get(None)
        assert registry.get(None) is first
        code[0] = first.code + (("edited", 1),)
        second = registry.get(None)
        assert second is not first and not first.alive()
    finally:
        registry.close()


def test_start_failures_back_off_exponentially_up_to_a_cap():
    failures = StartFailures()
    assert failures.due(0.0)
    failures.failed("RuntimeError: no answer", 100.0)
    assert not failures.due(100.0 + RETRY_AFTER_S - 1) and failures.due(100.0 + RETRY_AFTER_S)
    failures.failed("RuntimeError: no answer", 200.0)
    assert not failures.due(200.0 + 2 * RETRY_AFTER_S - 1) and failures.due(200.0 + 2 * RETRY_AFTER_S)
    for _ in range(20):
        failures.failed("RuntimeError: no answer", 300.0)
    assert failures.due(300.0 + MAX_RETRY_AFTER_S)


def test_a_zygote_that_failed_to_start_is_tried_again_later():
    # formgrader's server lives for days: one failed start must not disable forked kernels for its whole life
    attempts = []

    class FlakyZygote:
        def __init__(self, compile_cache):
            attempts.append(compile_cache)
            if len(attempts) == 1:
                raise RuntimeError("the kernel zygote did not answer")
            self.compile_cache, self.code = compile_cache, zygote.code_fingerprint()

        def alive(self):
            return True

        def close(self):
            pass

    registry = ZygoteRegistry(start=FlakyZygote)
    assert registry.get(None) is None and len(attempts) == 1
    assert registry.get(None) is None and len(attempts) == 1  # within the backoff: launched kernels
    registry.failures.last -= RETRY_AFTER_S  # the backoff has passed
    retried = registry.get(None)
    assert isinstance(retried, FlakyZygote) and len(attempts) == 2 and registry.failures.count == 0
    assert registry.get(None) is retried
