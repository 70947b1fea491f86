"""Operating-system isolation of a grading kernel beyond Landlock: its own user, no network, no leftovers.

When grading runs as root (containers, CI), each kernel gets a user id of its own, drawn from a range no
account uses (:func:`pick_uid`). That id

* owns nothing on the machine, so the kernel cannot use root's rights (raw disks in ``/dev``, ``/etc/shadow``,
  kernel modules, other users' processes), whatever Landlock grants;
* names every process the kernel starts, even one that calls ``setsid`` and forks twice: when the notebook
  ends, :func:`autograder.confine.reaper.kill_user` ends them all, and ``RLIMIT_NPROC`` (counted per user)
  stops a fork bomb.

Before dropping to it, the launcher moves the kernel into a new network namespace, which has no interface
but a down loopback (no TCP, no UDP, not even to localhost; the kernel talks to nbgrader over Unix sockets
in its scratch folder), and into a new mount namespace in which folders that only root may enter (such as
``/root`` holding the interpreter) are replaced by a traversable stand-in that shows only the needed
entries (:func:`make_traversable`). Everything here is Linux-only and needs root; the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import random
import stat
import tempfile
from pathlib import Path

from autograder.confine import reaper

_CLONE_NEWNS, _CLONE_NEWNET = 0x00020000, 0x40000000
_MS_BIND, _MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 4096, 16384, 1 << 18, 2, 4
_MNT_DETACH = 2
#: user ids of grading kernels: far above any account and below the 32-bit "no user" values
UID_RANGE = (1_900_000_000, 2_000_000_000)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def is_root() -> bool:
    return os.geteuid() == 0


def pick_uid() -> int:
    """A kernel user id no process uses now (the trusted side picks it before starting the kernel)."""
    rng = random.SystemRandom()
    for _ in range(100):
        uid = rng.randrange(*UID_RANGE)
        if not reaper.processes_of(uid):
            return uid
    raise RuntimeError("no free grading user id")  # 100 collisions in 10^8 ids: something is wrong


def prepare_scratch(uid: int | None) -> Path:
    """The kernel's private folder (HOME, TMPDIR, working folder, its Unix sockets), owned by its user."""
    scratch = Path(tempfile.mkdtemp(prefix="s04-kernel-"))
    if uid is not None:
        os.chown(scratch, uid, uid)
    return scratch


def _can_enter(path: Path, uid: int) -> bool:
    info = path.stat()
    return bool(info.st_mode & (stat.S_IXUSR if info.st_uid == uid else stat.S_IXOTH))


def _blocked_ancestor(path: Path, uid: int) -> Path | None:
    """The outermost folder on the way to ``path`` that user ``uid`` (in no group) may not enter."""
    for ancestor in reversed(Path(path).parents):
        if not _can_enter(ancestor, uid):
            return ancestor
    return None


def make_traversable(paths, uid: int) -> None:
    """In this mount namespace, let user ``uid`` reach ``paths`` through folders only root may enter.

    A folder such as ``/root`` (mode 0700) on the way to the interpreter is covered by an empty tmpfs
    (mode 0711: enter, not list) into which only the entries leading to ``paths`` are bound back; the
    rest of the folder disappears from this kernel's view. Call after ``unshare(CLONE_NEWNS)``.
    """
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    for _ in range(16):  # each round uncovers one level; deeper than 16 would be a strange system
        blocked: dict[Path, set[str]] = {}
        for path in map(Path, paths):
            ancestor = _blocked_ancestor(path, uid) if path.exists() else None
            if ancestor is not None:
                blocked.setdefault(ancestor, set()).add(path.relative_to(ancestor).parts[0])
        if not blocked:
            return
        folder = min(blocked, key=lambda p: len(p.parts))
        stash = Path(tempfile.mkdtemp(prefix="s04-stash-"))
        _check(_libc.mount(str(folder).encode(), str(stash).encode(), None, _MS_BIND | _MS_REC, None), f"bind {folder}")
        _check(
            _libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0711"),
            f"tmpfs over {folder}",
        )
        for name in sorted(blocked[folder]):
            original, mount_point = stash / name, folder / name
            if original.is_dir():
                mount_point.mkdir()
            else:
                mount_point.touch()
            _check(
                _libc.mount(str(original).encode(), str(mount_point).encode(), None, _MS_BIND | _MS_REC, None),
                f"bind {mount_point}",
            )
        _check(_libc.umount2(str(stash).encode(), _MNT_DETACH), f"umount {stash}")
        stash.rmdir()
    raise OSError(f"could not make {paths} reachable for an unprivileged user")


def enter_namespaces() -> None:
    """A new mount namespace (for :func:`make_traversable`) and a new, empty network namespace."""
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare(CLONE_NEWNS | CLONE_NEWNET)")


def become(uid: int) -> None:
    """Drop root for good: no supplementary groups, group and user ``uid`` (all capabilities go with it)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getegid() == 0:
        raise OSError("still root after setresuid")
