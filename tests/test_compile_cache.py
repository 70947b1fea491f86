"""The instructor's compilation cache: sealed once, then used only while it is exactly what was sealed.

What a grading kernel may do to it is tested through the real nbgrader in tests/test_hostile.py
(escape attempts); that every section's reference still gets full marks from kernels reading a cache
filled by ``warm-cache`` is part of every contract in tests/test_grading_pipeline.py. Here: the seal and
the verification the trusted side runs before each kernel, in milliseconds.
"""

import json
import os
import stat

import pytest

from autograder.confine.compile_cache import ENTRIES, KERNEL_ENV, MANIFEST, seal, verified_entries
from autograder.confine.launcher import kernel_environment


@pytest.fixture
def sealed(tmp_path):
    root = tmp_path / "cache"
    filled = root / "entries.new"
    filled.mkdir(parents=True)
    for name, data in {"jit_a-cache": b"alpha", "jit_b-cache": b"beta" * 1000}.items():
        (filled / name).write_bytes(data)
    entries = seal(root, filled, {"jax": "test"})
    yield root, entries
    for path in (entries, *entries.iterdir()):  # let pytest remove it
        path.chmod(0o755)


def test_a_sealed_cache_verifies_and_is_read_only(sealed):
    root, entries = sealed
    assert verified_entries(root) == (entries, "")
    assert not (root / "entries.new").exists()
    for path in entries.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert stat.S_IMODE(entries.stat().st_mode) == 0o555
    assert json.loads((root / MANIFEST).read_text())["facts"] == {"jax": "test"}


def _writable(entries):
    entries.chmod(0o755)
    for path in entries.iterdir():
        path.chmod(0o644)


@pytest.mark.parametrize(
    "tamper",
    [
        "changed-entry",
        "same-size-change",
        "planted-entry",
        "removed-entry",
        "entry-is-a-link",
        "group-writable-entry",
        "world-writable-folder",
        "manifest-missing",
        "manifest-corrupt",
        "folder-is-a-link",
    ],
)
def test_any_change_after_sealing_means_no_cache(sealed, tamper, tmp_path):
    root, entries = sealed
    _writable(entries)
    a = entries / "jit_a-cache"
    if tamper == "changed-entry":
        a.write_bytes(b"alpha, and code")
    elif tamper == "same-size-change":
        a.write_bytes(b"ALPHA")
    elif tamper == "planted-entry":
        (entries / "jit_c-cache").write_bytes(b"x")
    elif tamper == "removed-entry":
        a.unlink()
    elif tamper == "entry-is-a-link":
        (tmp_path / "elsewhere").write_bytes(b"alpha")
        a.unlink()
        a.symlink_to(tmp_path / "elsewhere")
    elif tamper == "group-writable-entry":
        for path in entries.iterdir():
            path.chmod(0o444)
        a.chmod(0o464)
    elif tamper == "world-writable-folder":
        for path in entries.iterdir():
            path.chmod(0o444)
        entries.chmod(0o777)
    elif tamper == "manifest-missing":
        (root / MANIFEST).unlink()
    elif tamper == "manifest-corrupt":
        (root / MANIFEST).write_text("{not json")
    elif tamper == "folder-is-a-link":
        moved = tmp_path / "moved"
        entries.rename(moved)
        entries.symlink_to(moved)
    if tamper not in ("group-writable-entry", "world-writable-folder"):
        for path in entries.iterdir():
            if not path.is_symlink():
                path.chmod(0o444)
        if not entries.is_symlink():
            entries.chmod(0o555)
    found, why = verified_entries(root)
    assert found is None and why, tamper
    if tamper == "folder-is-a-link":
        entries.unlink()
        (tmp_path / "moved").rename(entries)


def test_resealing_replaces_the_cache_whole(sealed):
    root, entries = sealed
    filled = root / "entries.new"
    filled.mkdir()
    (filled / "jit_new-cache").write_bytes(b"new")
    assert seal(root, filled, {}) == entries
    assert verified_entries(root)[0] == entries
    assert [p.name for p in entries.iterdir()] == ["jit_new-cache"]
    assert not (root / f"{ENTRIES}.old").exists()


def test_no_cache_at_all_is_a_plain_reason(tmp_path):
    found, why = verified_entries(tmp_path / "nothing")
    assert found is None and "warm-cache" in why


def test_a_grading_kernel_reads_the_cache_and_may_not_write_it(tmp_path, monkeypatch):
    """Only the verified folder reaches the kernel, with JAX told never to write; the instructor's own settings
    (a writable cache of their own, a zero minimum compile time) never do."""
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/home/instructor/.cache/jax")
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env = kernel_environment(tmp_path, None)
    assert "JAX_COMPILATION_CACHE_DIR" not in env and "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in env
    env = kernel_environment(tmp_path, tmp_path / "entries")
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "entries")
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == KERNEL_ENV["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]
    assert float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) > 1e8
    assert env["JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES"] == "none"  # XLA's GPU caches would write
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == "/home/instructor/.cache/jax"  # computed, not applied
