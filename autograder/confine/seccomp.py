"""A seccomp filter that stops a grading kernel from connecting any socket: the last step of its confinement.

Landlock and the empty network namespace stop TCP and UDP, but not ``connect(2)`` to a *pathname* Unix
socket: those are files, outside the network namespace, and Landlock (up to ABI 7) does not check them.
Local services listen on such sockets for anyone on the machine: ``munged`` on a Slurm node (a kernel
could mint a credential for its own user and submit jobs with it: ``tests/test_slurm_grading.py`` saw
``slurmctld`` accept one), the PostgreSQL gradebook's socket, D-Bus, nscd. A grading kernel never
connects a socket (ipykernel *binds* its ZMQ sockets, and the grader connects to them), so the filter
makes ``connect`` fail with ``EACCES`` for every socket family.

It also refuses every system call made with another architecture's calling convention (``int 0x80`` on
x86-64 reaches the 32-bit ``connect``), and only knows x86-64 and AArch64: elsewhere :func:`deny_connect`
raises, as grading without it would leave the hole open. ``sendto`` with an address on an unconnected
datagram socket still works; no service the grader depends on listens on a datagram socket.

Needs ``PR_SET_NO_NEW_PRIVS``, which :func:`autograder.confine.landlock.confine` sets first.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
_ARCH_OFFSET, _NR_OFFSET = 4, 0  # struct seccomp_data: int nr; __u32 arch; ...
_X32_BIT = 0x40000000
#: machine -> (AUDIT_ARCH_*, connect's system-call numbers in that convention)
_ARCHES = {
    "x86_64": (0xC000003E, (42, _X32_BIT | 42)),
    "aarch64": (0xC00000B7, (203,)),
}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``platform.machine()``) as ``(code, jt, jf, k)`` instructions."""
    if machine not in _ARCHES:
        raise OSError(f"no seccomp filter for this machine ({machine}): grading kernels could reach local sockets")
    arch, numbers = _ARCHES[machine]
    deny = _RET_ERRNO | errno.EACCES
    code = [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, deny), (_LD_W_ABS, 0, 0, _NR_OFFSET)]
    for i, number in enumerate(numbers):
        to_deny = len(numbers) - i  # past the remaining comparisons and the allow
        code.append((_JEQ_K, to_deny, 0, number))
    return [*code, (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, deny)]


def deny_connect() -> None:
    """Install the filter in this process and everything it starts, for good."""
    instructions = program(platform.machine())
    array = (_Instruction * len(instructions))(*(_Instruction(*ins) for ins in instructions))
    prog = _Program(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP) failed: {errno.errorcode.get(err, err)}")
