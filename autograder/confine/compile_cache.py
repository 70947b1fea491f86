"""A JAX compilation cache that the instructor fills and grading kernels only read.

Every grading kernel compiles the same ``course_lib`` programs of the given cells again (integrators,
rollouts, their gradients). JAX can
keep compiled programs on disk (its *persistent compilation cache*), but a cache a kernel may write
is code execution for whoever writes it: the next student's kernel would load and run it. So:

* only the instructor's run writes it (``python -m autograder warm-cache``, :mod:`autograder.ops.warm_cache`),
  executing the *release* notebooks as students receive them, blank answers and all. Neither hidden
  inputs nor reference solutions run there: the cache is readable by every kernel, a student can print
  what their kernel reads into their own feedback, and a compiled program holds its constants and the
  structure of the code that made it;
* that run ends with :func:`seal`: entries read-only, and a manifest of their SHA-256 hashes written
  beside (not inside) the folder kernels read;
* before each grading kernel starts, the trusted side calls :func:`verified_entries`: the folder and the
  manifest must belong to the grader, be writable by nobody else, hold regular files only, exactly those
  the manifest names, with those hashes. Anything else and the kernel simply runs without the cache
  (slower, same marks), and the reason is logged;
* the kernel gets the folder read-only (Landlock grants it ``READ`` only; the kernel's own user owns
  nothing there) and JAX is told never to write (:data:`KERNEL_ENV`: a minimum compile time no program
  reaches). A student who turns that setting back gets a warning in their own output, nothing on disk.

Layout: ``<root>/entries/`` (JAX's cache folder, what kernels read) and ``<root>/manifest.json``. The
default root is ``<course>/.grading/compile-cache``. Standard library only (confine zone).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

ENTRIES = "entries"
MANIFEST = "manifest.json"
#: XLA's own caches beside JAX's (GPU autotuning results) stay off: they would be written by kernels, and their
#: folder, a path under the cache, enters every cache key (a cache filled in one folder would miss in another)
_NO_XLA_CACHES = {"JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none"}
#: what a grading kernel's JAX is told (besides JAX_COMPILATION_CACHE_DIR): read hits, never write a miss
KERNEL_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "1e9", **_NO_XLA_CACHES}
#: what the instructor's filling run is told: keep every program, however small or quick to compile
FILL_ENV = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    **_NO_XLA_CACHES,
}


def jax_settings(entries: Path, settings: dict = KERNEL_ENV) -> dict:
    """The environment variables that point JAX at ``entries`` (read-only by default; :data:`FILL_ENV` to fill)."""
    return {"JAX_COMPILATION_CACHE_DIR": str(entries), **settings}


#: the most the trusted side reads (and hashes) before each kernel: far above a course's few tens of MB
MAX_TOTAL_BYTES = 2 * 2**30


def default_root(course_dir: Path) -> Path:
    return Path(course_dir) / ".grading" / "compile-cache"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _trusted(st: os.stat_result) -> bool:
    """Owned by the grader (or root) and writable by nobody else."""
    return st.st_uid in (os.geteuid(), 0) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def seal(root: Path, filled: Path, facts: dict) -> Path:
    """Make the freshly filled cache folder ``filled`` the sealed cache of ``root``; returns the entries folder.

    ``facts`` (e.g. the JAX version and the XLA flags of the filling run) go into the manifest for the
    instructor to read. The old cache is replaced only once the new one is complete.
    """
    root, filled = Path(root), Path(filled)
    files = {}
    for path in sorted(filled.iterdir()):
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"unexpected entry in a fresh compilation cache: {path}")
        path.chmod(0o444)
        files[path.name] = {"sha256": _digest(path), "bytes": path.stat().st_size}
    filled.chmod(0o555)
    entries, old, manifest = root / ENTRIES, root / f"{ENTRIES}.old", root / MANIFEST
    (root / f"{MANIFEST}.tmp").write_text(json.dumps({"facts": facts, "files": files}, indent=1, sort_keys=True))
    manifest.unlink(missing_ok=True)  # no manifest while the folders swap: a kernel starting now gets no cache
    if entries.exists():
        entries.chmod(0o755)
        entries.rename(old)
    filled.rename(entries)
    os.replace(root / f"{MANIFEST}.tmp", manifest)
    if old.exists():
        old.chmod(0o755)
        shutil.rmtree(old)
    return entries


def verified_entries(root: Path) -> tuple[Path | None, str]:
    """``(entries folder, "")`` when the cache at ``root`` is exactly what the instructor sealed, else ``(None, why)``."""
    root = Path(root)
    entries, manifest = root / ENTRIES, root / MANIFEST
    try:
        for path in (root, entries, manifest):
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not _trusted(st):
                return None, f"{path} is a link, or not the grader's, or writable by others"
        listed = json.loads(manifest.read_text())["files"]
        present = {p.name: p for p in entries.iterdir()}
        if set(present) != set(listed):
            extra, missing = sorted(set(present) - set(listed)), sorted(set(listed) - set(present))
            return None, f"entries differ from the manifest (extra {extra[:3]}, missing {missing[:3]})"
        total = 0
        for name, path in present.items():
            st = os.lstat(path)
            total += st.st_size
            if not stat.S_ISREG(st.st_mode) or not _trusted(st) or st.st_size != listed[name]["bytes"]:
                return None, f"{name}: not a regular file of the grader's, writable by others, or resized"
            if total > MAX_TOTAL_BYTES:
                return None, f"larger than {MAX_TOTAL_BYTES} bytes"
            if _digest(path) != listed[name]["sha256"]:
                return None, f"{name}: contents differ from the manifest"
    except FileNotFoundError:
        return None, "no sealed cache (run: python -m autograder warm-cache)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable cache: {type(exc).__name__}: {exc}"
    return entries, ""
