"""Shared fixtures, and the rule that keeps the test tiers honest.

All library tests run in float64: gradient checks are meaningless in float32 (S04.8.2).

Test tiers: each test module declares its own tier with ``pytestmark`` (``slow`` may also sit on one test
or one parameter, next to it); the markers are described in pyproject.toml. ``make test-fast`` deselects
every tier, ``make test`` runs everything. A module that runs nbgrader or a grading kernel, builds the book
or opens a browser must say so at module level, and two checks hold that:

* at collection, :func:`pytest_collection_modifyitems` fails the run when a module uses ``built_book``
  (book), ``released_course`` (nbgrader) or imports playwright (browser) without the module mark;
* while a test runs, :func:`_tier_guard` refuses to start nbgrader, a grading worker or kernel, the book
  build or a browser from a test whose module is not marked for it, so whatever the collection rule cannot
  see still fails ``make test`` with the fix in the message instead of landing in the fast tier.

Every test module has a row in tests/MAP.md saying what it proves and what it leaves to another module;
collection fails while a module is missing there or the map names a module that no longer exists.

``released_course`` releases each nbgrader section once per test run (shared by the xdist workers, like
the book) and hands each test its own copy: ``generate_assignment`` costs about 10 s a call, and a dozen
modules grade a released s04_1, s04_2 or s04_6.

``built_book`` builds the executable book once per test session with the real jupyter-book, through
book/build.py as ``make book`` does (execution on, warnings fatal); the tests that read it
(tests/test_book.py, tests/test_browser.py) carry ``@pytest.mark.xdist_group("book")`` so that under
``pytest -n 2 --dist loadgroup`` they all run on the worker that built it. The build writes the run's JAX
compilation cache (``page_compilation_cache``), and tests/test_page_seeds.py waits for it where the run builds
the book anyway: its reruns then load the pages' compiled programs. For local work on those tests only, ``S04_BOOK_HTML=<dir>`` points
the fixture at an existing ``_build/html`` instead of building (make test never sets it).
"""

import ast
import fcntl
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[1]

#: tiers that describe a whole module: what it starts (see pyproject.toml for each marker)
MODULE_TIERS = ("nbgrader", "book", "browser", "pdf")
#: fixtures that start something, and the tier a module using them needs
TIER_OF_FIXTURE = {"built_book": "book", "released_course": "nbgrader", "browser": "browser"}
#: imports that open something, and the tier
TIER_OF_IMPORT = {"playwright": "browser"}


def _module_tiers(module) -> set[str]:
    marks = getattr(module, "pytestmark", [])
    return {mark.name for mark in (marks if isinstance(marks, list) else [marks])}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


#: modules whose tests each take minutes alone (the --durations of `make test` name them)
LONG_FIRST = ("test_student_machine.py", "test_hostile.py")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``S04_TEST_TIMELINE=<file>``, one line per test (setup and teardown included): xdist worker, start and
    end (epoch seconds), node id, CPU seconds. ``benchmarks/timeline.py <file>`` says where a run's minutes went.

    The CPU seconds are this process's and those of the child processes it waited for during the test (nbgrader,
    the book build, grading kernels reaped through them); a server the test leaves running is not counted."""
    start, cpu = time.time(), _cpu_seconds()
    yield
    timeline = os.environ.get("S04_TEST_TIMELINE")
    if timeline:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(timeline, "a", encoding="utf-8") as out:  # one short append per test: lines do not interleave
            out.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\t{_cpu_seconds() - cpu:.2f}\n")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_collection_modifyitems(config, items):
    modules = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
        for name in {mark.name for mark in item.iter_markers()} & set(MODULE_TIERS):
            if name not in _module_tiers(item.module):
                raise pytest.UsageError(
                    f"{item.nodeid}: the '{name}' tier is a module's, not a test's: set pytestmark in {item.path.name}"
                )
    problems = []
    for path, module_items in modules.items():
        declared = _module_tiers(module_items[0].module)
        needed = {TIER_OF_IMPORT[root] for root in _imported_roots(path) & set(TIER_OF_IMPORT)}
        for item in module_items:
            needed |= {TIER_OF_FIXTURE[f] for f in getattr(item, "fixturenames", ()) if f in TIER_OF_FIXTURE}
        if needed - declared:
            problems.append(f"{path.name}: add pytestmark = [{', '.join(f'pytest.mark.{t}' for t in sorted(needed))}]")
    if problems:
        raise pytest.UsageError("test modules not marked for what they start:\n  " + "\n  ".join(problems))
    text = (ROOT / "tests" / "MAP.md").read_text(encoding="utf-8")
    # a module is mapped by a row that names it in its first cell (a row may hold a few related modules)
    rows = {
        name for cell in re.findall(r"^\| (test_[^|]*)\|", text, re.MULTILINE) for name in re.findall(r"test_\w+", cell)
    }
    unmapped = sorted(path.stem for path in modules if path.stem not in rows)
    # every module the map names, in a row or a "leaves to" cell, exists
    stale = sorted(
        name for name in set(re.findall(r"\btest_\w+", text)) if not (ROOT / "tests" / f"{name}.py").is_file()
    )
    if unmapped or stale:
        raise pytest.UsageError(
            f"tests/MAP.md is out of date: add a row for {unmapped}, remove the rows of {stale} (no such module)"
        )
    # the longest single tests start first: collected in file order they came last, and one worker idled
    # while the other finished them (longest first is the classic rule for two machines)
    items.sort(key=lambda item: item.path.name not in LONG_FIRST)


#: what a test may only start when its module carries the tier: (tier, test on the command line)
_STARTS = (
    ("nbgrader", lambda argv: Path(argv[0]).name == "nbgrader" or argv[1:3] == ["-m", "nbgrader"]),
    # a grading worker, a confined grading kernel or the zygote it is forked from
    ("nbgrader", lambda argv: any(arg.startswith(("autograder.ops.worker", "autograder.confine.")) for arg in argv)),
    ("book", lambda argv: any(arg.endswith("book/build.py") or Path(arg).name == "jupyter-book" for arg in argv)),
    ("browser", lambda argv: any("chrom" in Path(arg).name or "playwright" in arg for arg in argv[:2])),
)


@pytest.fixture(autouse=True)
def _tier_guard(request, monkeypatch):
    """Refuse, with the fix in the message, a subprocess a test's module is not marked for."""
    declared = _module_tiers(request.module)
    if {"nbgrader", "book", "browser"} <= declared:
        yield
        return
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def checked(self, args, *rest, **kwargs):
        argv = [os.fsdecode(a) for a in ([args] if isinstance(args, (str, bytes, os.PathLike)) else args)]
        for tier, starts in _STARTS:
            if tier not in declared and argv and starts(argv):
                raise RuntimeError(
                    f"{request.node.nodeid} starts {' '.join(argv)[:200]!r}, which belongs to the '{tier}' tier: "
                    f"add pytest.mark.{tier} to pytestmark in {request.path.name} (tests/conftest.py)"
                )
        return original(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", checked)
    yield


def _run_root(tmp_path_factory) -> Path:
    """A folder shared by all xdist workers of this test run."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def _compilation_cache(tmp_path_factory) -> Path:
    return _run_root(tmp_path_factory) / "jax-compilation-cache"


#: every program kept in the cache, however quick to compile (most here compile in < 1 s)
_CACHE_MIN_COMPILE_TIME_S = 0


@pytest.fixture(scope="session", autouse=True)
def _shared_compilation_cache(tmp_path_factory):
    """One JAX compilation cache for the trusted processes of this run: the xdist workers, the book's page kernels
    and the page-seed reruns (:func:`page_compilation_cache`).

    The same programs compile in many tests (a check's reference in the regeneration, the other-salt draws, the
    witnesses, the public checks; a page's sections rerun at other seeds); each process compiled each again, and
    compiling was most of their CPU time. A cached program computes what a fresh compilation does. Grading kernels
    never see it: the kernel launcher strips JAX's cache variables, and they read only the instructor's sealed
    cache (autograder/confine/compile_cache.py). A new folder per run, so no run reads another's."""
    jax.config.update("jax_compilation_cache_dir", str(_compilation_cache(tmp_path_factory)))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(_CACHE_MIN_COMPILE_TIME_S))


@pytest.fixture(scope="session")
def page_compilation_cache(tmp_path_factory) -> dict:
    """The environment that points a page's interpreter at the run's compilation cache.

    The book build writes it (measured on this book: a clean build that writes the cache costs what one without
    it does, 352 CPU s both); a page's sections rerun at another seed then load most of their programs from it,
    since the pages pass their PRNG keys as arguments."""
    return {
        "JAX_COMPILATION_CACHE_DIR": str(_compilation_cache(tmp_path_factory)),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(_CACHE_MIN_COMPILE_TIME_S),
    }


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
def built_book(tmp_path_factory, page_compilation_cache):
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
            env = {
                **os.environ,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                **page_compilation_cache,
            }
            build = [sys.executable, str(ROOT / "book" / "build.py")]  # what make book runs
            proc = subprocess.run(
                # two readers at least, so that every run exercises the parallel read (and its cache)
                [
                    *build,
                    "--jobs",
                    str(max(2, os.cpu_count() or 1)),
                    "--path-output",
                    str(out),
                    "--warningiserror",
                    "--keep-going",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
            )
            assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
            (out / "BUILD_SUCCEEDED").write_text("")
    return out / "_build" / "html"


# --- Debian's chromium, driven by Playwright (tests/test_browser.py, tests/test_formgrader_browser.py) ---


def _find_chromium():
    if os.environ.get("CHROMIUM"):  # an explicit choice; CHROMIUM=none tests the message below
        candidates = [os.environ["CHROMIUM"]]
    else:  # Debian's binary itself first: its /usr/bin/chromium wrapper only adds shell noise
        candidates = ["/usr/lib/chromium/chromium", shutil.which("chromium"), "/usr/bin/chromium"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
def chromium_path():
    executable = _find_chromium()
    if executable is None:
        message = (
            "browser tests need Debian's chromium (apt-get install --no-install-recommends chromium; "
            ".ci/run installs it), or CHROMIUM=/path/to/chromium"
        )
        if os.environ.get("CI"):
            pytest.fail(message + " -- CI is set, so these tests may not skip")
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path)
        yield chromium
        chromium.close()
