"""The Landlock sandbox of grading kernels (autograder/sandbox.py), checked in a child process.

A confined process must still run Python, import JAX and course_lib and read the hidden inputs;
it must not read the reference data or solutions, not write anywhere but its scratch folder
(the gradebook, other students' folders, /tmp) and not signal the grader.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.confine import landlock as sandbox

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.skipif(sandbox.abi_version() < 1, reason="this Linux kernel has no Landlock"),
]

PROBE = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from autograder.confine import landlock as sandbox
    root, scratch, outside = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    sandbox.confine(scratch)
    report = {}

    def attempt(key, fn):
        try:
            fn()
            report[key] = "ok"
        except OSError as exc:
            report[key] = type(exc).__name__

    attempt("import_jax_course_lib", lambda: __import__("course_lib").enable_float64())
    attempt("read_inputs", lambda: (root / "autograder" / "kernel" / "inputs" / "s04_1_ex1.json").read_text())
    attempt("import_capture", lambda: __import__("autograder.kernel.capture"))
    attempt("read_data", lambda: (root / "autograder" / "data" / "s04_1_ex1.json").read_text())
    attempt("read_reference", lambda: (root / "autograder" / "authoring" / "reference" / "__init__.py").read_text())
    attempt("read_source", lambda: (root / "assignments" / "source" / "s04_1" / "s04_1_ex1.md").read_text())
    attempt("list_data_folder", lambda: os.listdir(root / "autograder" / "data"))
    attempt("write_scratch", lambda: (scratch / "x.txt").write_text("mine"))
    attempt("write_outside", lambda: (outside / "gradebook.db").write_text("forged"))
    attempt("append_outside", lambda: open(outside / "existing.txt", "a").write("forged"))
    attempt("write_tmp", lambda: Path("/tmp/s04-sandbox-probe.txt").write_text("x"))
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    print(json.dumps(report))
""")


def test_confined_process_reads_only_what_it_needs(tmp_path):
    scratch, outside = tmp_path / "scratch", tmp_path / "course"
    scratch.mkdir()
    outside.mkdir()
    (outside / "existing.txt").write_text("grade: 0\n")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), str(scratch), str(outside)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=scratch,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    allowed = ("import_jax_course_lib", "read_inputs", "import_capture", "list_data_folder", "write_scratch")
    denied = ("read_data", "read_reference", "read_source", "write_outside", "append_outside", "write_tmp")
    assert {k: report[k] for k in allowed} == dict.fromkeys(allowed, "ok"), report
    assert {k: report[k] for k in denied} == dict.fromkeys(denied, "PermissionError"), report
    assert (outside / "existing.txt").read_text() == "grade: 0\n"
    assert not (outside / "gradebook.db").exists()
    if sandbox.abi_version() >= 6:  # signal scoping: the grader cannot be killed from the kernel
        assert report["signal_parent"] == "PermissionError", report


def test_kernel_reads_only_its_own_exercise_support(tmp_path, monkeypatch):
    support = tmp_path / "kernel_support"
    support.mkdir()
    for name in ("proj_p1.py", "proj_p2.py", "proj_common.py"):
        (support / name).write_text("VALUE = 1\n")
    monkeypatch.setattr(sandbox, "SUPPORT_DIR", support)
    assert sandbox.support_module("proj_p2") == (support / "proj_p2.py", support / "proj_common.py")
    assert sandbox.support_module("other_ex1") == ()
    with pytest.raises(ValueError):
        sandbox.support_module("../data/s04_1_ex1")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    probe = textwrap.dedent("""
        import sys
        from pathlib import Path
        from autograder.confine import landlock as sandbox
        support, scratch = Path(sys.argv[1]), Path(sys.argv[2])
        sandbox.confine(scratch, extra_readable=(support / "proj_p2.py", support / "proj_common.py"))
        for name in ("proj_p2.py", "proj_common.py", "proj_p1.py"):
            try:
                (support / name).read_text()
                print(name, "ok")
            except PermissionError:
                print(name, "PermissionError")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(support), str(scratch)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=scratch,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:3] == ["proj_p2.py ok", "proj_common.py ok", "proj_p1.py PermissionError"], (
        proc.stdout
    )


def test_every_entry_point_refuses_without_landlock(monkeypatch):
    # SafeExecute (plain nbgrader autograde, formgrader, the class run) starts kernels through confined_kernel
    from autograder.confine import kernel, limits

    monkeypatch.setattr(sandbox, "abi_version", lambda: 0)
    with pytest.raises(RuntimeError, match="Landlock"):
        with kernel.confined_kernel("s04_1_ex1", limits.Limits(sandbox=True)):
            pass
    with pytest.raises(RuntimeError, match="S04_GRADING_SANDBOX=off"):
        limits.require_sandbox(limits.Limits(sandbox=True))
    with kernel.confined_kernel("s04_1_ex1", limits.Limits(sandbox=False)) as km:  # explicitly turned off
        assert limits.Limits.from_json(km.launcher_argv[km.launcher_argv.index("--limits") + 1]).sandbox is False


ISOLATION_PROBE = textwrap.dedent("""
    import os, socket, subprocess, sys, time
    report = {"uid": os.getuid(), "groups": os.getgroups()}
    for label, attempt in {
        "tcp": lambda: socket.create_connection(("127.0.0.1", 22), timeout=2),
        "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 53)),
        "raw_disk": lambda: open("/dev/" + sorted(p for p in os.listdir("/dev") if p.startswith(("vd", "sd", "nvme")))[0], "rb"),
        "shadow": lambda: open("/etc/shadow").read(),
        "unix": lambda: socket.socket(socket.AF_UNIX).connect(SERVICE),  # a local service's socket, open to all
    }.items():
        try:
            attempt()
            report[label] = "ok"
        except (OSError, IndexError) as exc:
            report[label] = type(exc).__name__
    subprocess.Popen([sys.executable, "-c", "import os, time\\nif os.fork() == 0:\\n    os.setsid(); time.sleep(600)"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(report, flush=True)
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="a kernel user of its own and network namespaces need root")
@pytest.mark.parametrize("with_seccomp", [True, False])
def test_root_grading_kernel_runs_as_its_own_user_without_network(tmp_path, with_seccomp):
    # the launcher's confinement, without ipykernel: its own user, no root, no network, nothing left behind;
    # without the seccomp step (the control) the kernel's user can reach a local service's Unix socket
    from autograder.confine import isolation, launcher, reaper
    from autograder.confine.limits import Limits

    service = tmp_path / "service" / "service.sock"  # like /run/munge/munge.socket.2: any user may connect
    service.parent.mkdir()
    for folder in (service.parent, *service.parent.parents):
        if folder != Path("/"):
            folder.chmod(folder.stat().st_mode | 0o055)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(service))
    service.chmod(0o777)
    listener.listen()

    uid = isolation.pick_uid()
    scratch = isolation.prepare_scratch(uid)
    connection = scratch / "connection.json"
    connection.write_text("{}")
    args = [
        "--scratch",
        str(scratch),
        "--uid",
        str(uid),
        "--limits",
        Limits(cpu_seconds=60, max_processes=64, sandbox=True).to_json(),
        "-f",
        str(connection),
    ]
    code = (
        "import sys\nfrom autograder.confine import launcher\nopts, _ = launcher.parse(sys.argv[1:])\n"
        f"SERVICE = {str(service)!r}\n"
        + ("" if with_seccomp else "launcher.seccomp.deny_connect = lambda: None\n")
        + "launcher.apply_limits(opts)\nlauncher.confine(opts)\n"
        + ISOLATION_PROBE
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = eval(proc.stdout.strip().splitlines()[-1])  # noqa: S307 - our own probe's dict
    assert report["uid"] == uid and report["groups"] == []
    assert report["tcp"] == "PermissionError" and report["udp"] == "OSError"  # Landlock, then an empty netns
    assert report["unix"] == ("PermissionError" if with_seccomp else "ok")
    assert report["raw_disk"] in ("PermissionError", "IndexError") and report["shadow"] == "PermissionError"
    time.sleep(1)  # the daemon has forked and left its session
    daemons = reaper.processes_of(uid)
    assert daemons, "the probe's daemon should still run until the grader ends it"
    reaped = reaper.kill_user(uid)
    assert reaped.left == () and {p.pid for p in reaped.killed} >= set(daemons)
    assert reaper.processes_of(uid) == []
    launcher_source = Path(launcher.__file__).read_text()
    assert "S04_GRADEBOOK_URL" not in launcher.ENV_ALLOWED and "S04_GRADEBOOK_URL" not in launcher_source


def test_grader_refuses_huge_kernel_messages():
    # a student can display anything: above MAX_MESSAGE_BYTES the trusted side drops the message, never holds it
    import zmq

    from autograder.confine import kernel, limits

    with kernel.confined_kernel("s04_1_ex1", limits.Limits(sandbox=False)) as km:
        client = km.client()
        assert km._client_contexts[-1].getsockopt(zmq.MAXMSGSIZE) == kernel.MAX_MESSAGE_BYTES
        assert kernel.MAX_MESSAGE_BYTES > 25 * 2**20  # a legitimate record (10^6 numbers per array) fits
        client.stop_channels()
