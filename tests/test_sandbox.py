"""The Landlock sandbox of grading kernels (autograder/sandbox.py), checked in a child process.

A confined process must still run Python, import JAX and course_lib and read the hidden inputs;
it must not read the reference data or solutions, not write anywhere but its scratch folder
(the gradebook, other students' folders, /tmp) and not signal the grader.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.confine import landlock as sandbox

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(sandbox.abi_version() < 1, reason="this Linux kernel has no Landlock")

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
    proc = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), str(scratch), str(outside)],
                          capture_output=True, text=True, timeout=300, cwd=scratch)
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
    proc = subprocess.run([sys.executable, "-c", probe, str(support), str(scratch)], capture_output=True, text=True,
                          timeout=120, cwd=scratch)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:3] == ["proj_p2.py ok", "proj_common.py ok", "proj_p1.py PermissionError"], proc.stdout
