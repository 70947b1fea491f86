"""Start an IPython kernel under resource limits (the grading kernel of :mod:`autograder.limits`).

``python -m autograder.kernel_launcher --memory-bytes N -f CONNECTION_FILE`` caps the
kernel's address space (RLIMIT_AS) and output-file size, then runs ipykernel as usual. A
submission that allocates without bound gets a MemoryError or dies, instead of taking the
grading machine down with it.
"""

from __future__ import annotations

import resource
import sys


def apply_limits(memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))  # no disk-filling writes
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault leaves no core file behind


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    memory = int(argv[argv.index("--memory-bytes") + 1])
    file_bytes = int(argv[argv.index("--file-bytes") + 1])
    kernel_args = [a for i, a in enumerate(argv) if a not in ("--memory-bytes", "--file-bytes")
                   and (i == 0 or argv[i - 1] not in ("--memory-bytes", "--file-bytes"))]
    apply_limits(memory, file_bytes)
    from ipykernel import kernelapp

    sys.argv = [sys.argv[0], *kernel_args]
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
