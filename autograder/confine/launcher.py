"""Start an IPython kernel under resource limits and in a sandbox (the grading kernel of :mod:`autograder.confine.limits`).

``python -m autograder.confine.launcher --memory-bytes N --file-bytes M [--no-sandbox] -f CONNECTION_FILE
[--S04Grading.exercise=NAME]``
caps the kernel's address space (RLIMIT_AS) and output-file size, moves it into a private
scratch folder, confines it with Landlock (:mod:`autograder.confine.landlock`: no access to reference
data, reference solutions, the gradebook or other students' folders; no signals to the
grader), then runs ipykernel as usual.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

from autograder.confine import landlock as sandbox

_OPTIONS_WITH_VALUE = ("--memory-bytes", "--file-bytes")


def apply_limits(memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))  # no disk-filling writes
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault leaves no core file behind


def enter_scratch_folder() -> Path:
    """A fresh private folder as HOME, TMPDIR and working folder: the only place the kernel may write."""
    scratch = Path(tempfile.mkdtemp(prefix="s04-grading-kernel-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    for var in ("HOME", "TMPDIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ[var] = str(scratch)
    # The shared XLA cache is a file other students' kernels would load: a sandboxed kernel neither reads nor writes it.
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    os.environ.pop("S04_GRADEBOOK_URL", None)  # a server gradebook's password (book page 教师指南) is not for students
    os.chdir(scratch)
    return scratch


def _split_args(argv: list[str]) -> tuple[dict, list[str]]:
    options, rest, i = {}, [], 0
    while i < len(argv):
        if argv[i] in _OPTIONS_WITH_VALUE:
            options[argv[i]] = int(argv[i + 1])
            i += 2
        elif argv[i] == "--no-sandbox":
            options["--no-sandbox"] = True
            i += 1
        elif argv[i].startswith(sandbox.EXERCISE_ARGUMENT):
            options["exercise"] = argv[i][len(sandbox.EXERCISE_ARGUMENT):]
            i += 1
        else:
            rest.append(argv[i])
            i += 1
    return options, rest


def main(argv=None) -> None:
    options, kernel_args = _split_args(list(sys.argv[1:] if argv is None else argv))
    apply_limits(options["--memory-bytes"], options["--file-bytes"])
    if not options.get("--no-sandbox"):
        connection_file = kernel_args[kernel_args.index("-f") + 1]
        scratch = enter_scratch_folder()
        support = sandbox.support_module(options["exercise"]) if "exercise" in options else ()
        sandbox.confine(scratch, extra_readable=(Path(connection_file).resolve(), *support))
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *kernel_args]
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
