"""Confine a grading kernel with Linux Landlock: it reads only what running Python needs.

A student's code runs as the same OS user as the grader, so file permissions alone cannot
keep it from the reference data, the reference solutions, the gradebook or other students'
folders. Landlock (Linux >= 5.13, no root needed) lets a process give up filesystem
rights for itself and its children for good; :func:`confine` does so before ipykernel
starts. The kernel may then

* read and execute the interpreter, the virtual environment and system folders;
* read ``course_lib`` and the few ``autograder`` files a graded cell imports, including the
  hidden *inputs* (``autograder/kernel/inputs``), never the expected values (``autograder/data``)
  or the reference solutions (``autograder/authoring/reference``);
* read ``autograder/kernel_support/<exercise>.py`` (and ``<section>_common.py``; ``sweeps.py`` for all) for the one exercise it grades (named by the
  nbgrader process, :class:`autograder.confine.execute.SafeExecute`): code a hidden cell needs that is
  not an answer of that exercise, e.g. earlier stages' reference building blocks of the project;
* list folders of the repository (file names are not secret) but read no other file in it;
* write only inside its own private scratch folder (its HOME, TMPDIR and working folder).

With Landlock ABI >= 4 it cannot bind or connect any TCP socket (its kernel protocol runs over Unix
sockets), and with ABI >= 6 it cannot send signals to processes outside its sandbox (such as the
nbgrader process that grades it) nor reach abstract Unix sockets outside it. As root, the launcher
adds a user of its own and an empty network namespace (:mod:`autograder.confine.isolation`). The
syscalls are made through ctypes (no dependency).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same numbers on x86_64 and arm64
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4: handled without any rule, no TCP port at all

READ = READ_FILE | READ_DIR | EXECUTE
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a rule on a file may carry

ROOT = Path(__file__).resolve().parents[2]
#: repository files a grading kernel needs besides course_lib (the capture side of autograder)
KERNEL_READABLE = (
    "autograder/__init__.py",
    "course_check",
    "autograder/kernel",
    "course_lib",
    "autograder/kernel_support/__init__.py",
    "autograder/kernel_support/sweeps.py",  # the chapter's sweep arithmetic, shared by every exercise's support
)
SUPPORT_DIR = ROOT / "autograder" / "kernel_support"
# no /opt, /srv or /home: a course folder kept there would become readable (the interpreter and venv are added explicitly)
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys")
#: device files a kernel may open; never /dev as a whole (raw disks, /dev/shm shared between kernels)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)


def _syscall(number, *args) -> int:
    result = _libc.syscall(number, *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock syscall {number}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """Landlock ABI of the running Linux kernel; 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def _handled_rights(abi: int) -> int:
    rights = READ | WRITE_FILE | _MAKE_AND_REMOVE
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _add_rule(ruleset_fd: int, path: Path, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # e.g. /lib32 on a system without it
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = _PathBeneathAttr(rights & handled, fd)
        _syscall(
            _SYS_ADD_RULE,
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def support_module(exercise: str) -> tuple:
    """The kernel support modules the kernel grading ``exercise`` may read: ``<exercise>.py`` and the
    section's ``<section>_common.py`` (e.g. ``mini_diffsim_common.py`` for ``mini_diffsim_p3``), those that exist."""
    if not exercise.isidentifier():
        raise ValueError(f"not an exercise name: {exercise!r}")
    names = (f"{exercise}.py", f"{exercise.rsplit('_', 1)[0]}_common.py")
    return tuple(SUPPORT_DIR / n for n in names if (SUPPORT_DIR / n).is_file())


def readable_paths(extra: tuple = ()) -> list[Path]:
    """Everything a grading kernel may read (and execute), besides its scratch folder."""
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    return [*map(Path, SYSTEM_READABLE), *sorted(prefixes), *(ROOT / p for p in KERNEL_READABLE), *map(Path, extra)]


def confine(scratch: Path, extra_readable: tuple = ()) -> int:
    """Restrict this process (and every process it starts) for good; returns the Landlock ABI used.

    Raises OSError when Landlock is unavailable: grading without it would not be tamper-resistant.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available in this Linux kernel (needs Linux >= 5.13 with Landlock enabled)")
    handled = _handled_rights(abi)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0
    attr = _RulesetAttr(handled, net, (SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET) if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8  # older kernels reject fields they do not know
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path in readable_paths(extra_readable):
            _add_rule(ruleset, path, READ, handled)
        _add_rule(ruleset, ROOT, READ_DIR, handled)  # listing folders only; imports look files up by listing
        _add_rule(ruleset, Path("/dev"), READ_DIR, handled)
        for device in (*DEVICES, *sorted(map(str, Path("/dev").glob("nvidia*")))):  # a GPU grader's devices
            _add_rule(ruleset, Path(device), READ_FILE | WRITE_FILE | IOCTL_DEV, handled)
        _add_rule(ruleset, Path(scratch), handled, handled)  # its own folder: anything
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi
