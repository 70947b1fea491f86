"""Shared fixtures.

All library tests run in float64: gradient checks are meaningless in float32 (S04.8.2).

Test tiers: every module's tier is declared in :data:`TIERS` (a module not named there is a fast unit
test); ``make test-fast`` deselects the marked ones, ``make test`` runs everything.

``released_course`` releases each nbgrader section once per test run (shared by the xdist workers, like
the book) and hands each test its own copy: ``generate_assignment`` costs about 10 s a call, and a dozen
modules grade a released s04_1, s04_2 or s04_6.

``built_book`` builds the executable book once per test session with the real jupyter-book, through
book/build.py as ``make book`` does (execution on, warnings fatal); the tests that read it
(tests/test_book.py, tests/test_browser.py) carry ``@pytest.mark.xdist_group("book")`` so that under
``pytest -n 2 --dist loadgroup`` they all run on the worker that built it. For local work on those tests only, ``S04_BOOK_HTML=<dir>`` points
the fixture at an existing ``_build/html`` instead of building (make test never sets it).
"""

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[1]

#: module -> markers of all its tests (see pyproject.toml for what each means)
TIERS = {
    "test_grading_pipeline.py": ("nbgrader", "slow"),
    "test_hostile.py": ("nbgrader", "slow"),
    "test_classrun.py": ("nbgrader", "slow"),
    "test_collect_reports.py": ("nbgrader", "slow"),
    "test_postgres_gradebook.py": ("nbgrader", "slow"),
    "test_dask_grading.py": ("nbgrader", "slow"),
    "test_exchange.py": ("nbgrader", "slow"),
    "test_untrusted_outputs.py": ("nbgrader",),
    "test_sandbox.py": ("nbgrader",),
    "test_zygote.py": ("nbgrader",),
    "test_book.py": ("book", "slow"),
    "test_browser.py": ("book", "browser", "slow"),
    "test_benchmarks_smoke.py": ("slow",),
    "test_pdf.py": ("pdf",),  # make test-pdf only: reads the PDF that make pdf builds
}


#: test functions (in any module) in the slow tier: the jit/vmap/grad harness compiles every public
#: function three times, and diffrax is the independent implementation the integrators are compared with
SLOW_FUNCTIONS = {"test_jit_vmap_grad", "test_agrees_with_diffrax"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in TIERS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))
        if item.originalname in SLOW_FUNCTIONS:
            item.add_marker(pytest.mark.slow)


def _run_root(tmp_path_factory) -> Path:
    """A folder shared by all xdist workers of this test run."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


@pytest.fixture(scope="session")
def released_course(tmp_path_factory):
    """``released_course(section, dst) -> dst``: a scratch copy of assignments/ in ``dst`` with ``section``'s
    source notebooks built and its student release generated (gradebook included), as
    :func:`autograder.ops.selftest.release_section` leaves it; nothing handed in yet."""
    from autograder.ops.selftest import release_section, scratch_course

    shared = _run_root(tmp_path_factory) / "released"
    shared.mkdir(exist_ok=True)

    def make(section: str, dst: Path) -> Path:
        done = shared / section
        with open(shared / f"{section}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (done / "RELEASED").exists():
                shutil.rmtree(done, ignore_errors=True)
                release_section(section, scratch_course(done / "course", ROOT / "assignments"))
                (done / "RELEASED").write_text("")
        shutil.copytree(done / "course", dst, symlinks=True)
        return Path(dst)

    return make


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    prebuilt = os.environ.get("S04_BOOK_HTML")
    if prebuilt:
        html = Path(prebuilt).resolve()
        assert (html / "book" / "index.html").is_file(), f"S04_BOOK_HTML={prebuilt} is not a built book"
        return html
    # One build per test run, whichever worker asks first: the others wait on the lock and reuse it
    # (the xdist group keeps the book tests together; the lock makes a second build impossible).
    root = _run_root(tmp_path_factory)
    out = root / "book_build"
    with open(root / "book_build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "BUILD_SUCCEEDED").exists():
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
            build = [sys.executable, str(ROOT / "book" / "build.py")]  # what make book runs
            proc = subprocess.run(
                [*build, "--path-output", str(out), "--warningiserror", "--keep-going"],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
            )
            assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
            (out / "BUILD_SUCCEEDED").write_text("")
    return out / "_build" / "html"
