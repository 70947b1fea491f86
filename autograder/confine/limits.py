"""Limits and sandbox every grading kernel runs under, and the environment nbgrader is started with.

* time: nbgrader's per-cell timeout (``Execute.timeout``, set in ``assignments/nbgrader_config.py``)
  plus a per-submission wall-clock limit enforced by :mod:`autograder.ops.classrun`;
* memory and file size: a kernelspec named ``python3`` written into the course folder whose
  launcher applies RLIMIT_AS / RLIMIT_FSIZE (:mod:`autograder.confine.launcher`). It shadows the
  ordinary ``python3`` kernel because its folder comes first on ``JUPYTER_PATH``;
* sandbox: the same launcher confines the kernel with Landlock (:mod:`autograder.confine.landlock`), so
  student code cannot read the reference data or solutions, nor write outside its scratch folder.
  ``S04_GRADING_SANDBOX=off`` grades without it (only for a machine without Landlock; the
  grading is then NOT tamper-resistant, and the class run says so).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.confine import landlock as sandbox


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * 2**30  # address space; JAX on CPU grades comfortably within 3 GiB
    file_bytes: int = 64 * 2**20  # largest file a kernel may write
    submission_timeout_s: float = 900.0  # one student's whole section, all notebooks
    sandbox: bool = os.environ.get("S04_GRADING_SANDBOX", "on") != "off"


DEFAULT_LIMITS = Limits()


def install_grading_kernel(course_dir: Path, limits: Limits = DEFAULT_LIMITS) -> Path:
    """Write the limited ``python3`` kernelspec under ``<course>/.grading/jupyter``; returns that folder."""
    root = Path(course_dir).resolve() / ".grading" / "jupyter"
    spec_dir = root / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "autograder.confine.launcher",
                 "--memory-bytes", str(limits.memory_bytes), "--file-bytes", str(limits.file_bytes),
                 *([] if limits.sandbox else ["--no-sandbox"]), "-f", "{connection_file}"],
        "display_name": "Python 3 (grading, limited)",
        "language": "python",
    }
    text = json.dumps(spec, indent=1) + "\n"
    path = spec_dir / "kernel.json"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return root


def grading_env(course_dir: Path, limits: Limits = DEFAULT_LIMITS) -> dict:
    """Environment variables for nbgrader runs on ``course_dir`` (the limited, sandboxed kernel)."""
    if limits.sandbox and sandbox.abi_version() < 1:
        raise RuntimeError("this Linux kernel has no Landlock, so grading kernels cannot be sandboxed and student "
                           "code could read the reference data. Grade on Linux >= 5.13 with Landlock, or set "
                           "S04_GRADING_SANDBOX=off to grade WITHOUT tamper resistance.")
    return {"JUPYTER_PATH": str(install_grading_kernel(course_dir, limits))}
