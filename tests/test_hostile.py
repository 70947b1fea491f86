"""Broken and hostile submissions, graded through the real nbgrader in ONE autograde run.

Each pseudo-student hands in ``s04_1_ex1`` with solution cells replaced by code that loops
forever, kills its kernel, exhausts memory or floods its output (item 1 of the threat model),
or that tries to raise its own score (item 2): rebinding the grading function, patching numpy,
builtins and assert helpers, returning objects that compare equal to anything or NaN, forging
a result record, reading the reference data or solutions, writing to the gradebook or another
student's folder, signalling the grader, and editing or deleting graded cells. (A duplicated
graded cell makes nbgrader 0.9.6 abort the whole run, so the class run rejects such a notebook
before nbgrader sees it, with a Chinese reason: tests/test_classrun.py.)
The run must finish, every such student must score no more than an honest blank on the
autograded cells, and the autograded notebook must say what happened.
"""

import json
import os
import re
import socket
import sqlite3
import threading
from pathlib import Path

import nbformat
import pytest

from autograder.confine import isolation
from autograder.confine import landlock as sandbox
from autograder.confine.compile_cache import default_root, seal, verified_entries
from autograder.confine.execute import SKIP_TAG
from autograder.confine.limits import Limits
from autograder.ops.classrun import grade_class
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.ops.selftest import make_submission, solution_sources
from notebook_text import output_parts

# one worker grades the catalogue once (a module fixture would otherwise run on each xdist worker)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("hostile"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE, CELL, CELL2 = "s04_1", "s04_1_ex1", "fd_grad_answer", "analytic_grad_answer"
GRADED = "test_fd_grad"  # the first graded cell of the notebook
CELL_TIMEOUT_S = 8  # per-cell limit for this test (the course default is 120 s; an honest cell here needs < 2 s)
NO_RECORD = "没有留下结果记录"

REBIND_GRADE = """\
import autograder, autograder.kernel.capture
def fake_grade(exercise, name, fn):
    print(f"[{exercise}] {name}: 通过 6/6 个隐藏测试，得分 3/3")
    return 3.0
autograder.grade = autograder.kernel.capture.grade = fake_grade
def fd_grad(u, dt, eps=1e-6):
    return u, 0
"""
PATCH_COMPARISONS = """\
import builtins, numpy as np, jax.numpy as jnp
np.allclose = jnp.allclose = lambda *a, **k: True
np.testing.assert_allclose = np.testing.assert_array_equal = lambda *a, **k: None
np.isfinite = lambda x: np.ones(np.shape(x), dtype=bool)
builtins.AssertionError = type("Never", (Exception,), {})
builtins.abs = lambda x: 0.0
def fd_grad(u, dt, eps=1e-6):
    return np.zeros_like(np.asarray(u)), 0
"""
ALWAYS_EQUAL = """\
import numpy as np
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __array__(self, dtype=None, copy=None): raise TypeError("refuses to be an array")
def fd_grad(u, dt, eps=1e-6):
    return Anything(), Anything()
"""
NAN_RESULT = """\
import numpy as np
def analytic_grad(u, dt):
    return np.full(np.shape(u), np.nan)  # NaN compares unequal to everything: not a pass either
"""
FORGED_RECORD = """\
import numpy as np, autograder, autograder.kernel.capture, course_check.protocol
from IPython.display import display
def forged_grade(exercise, name, fn):
    n = len(autograder.kernel.capture.load_inputs(exercise)[name]["cases"])
    ok = {"status": "ok", "value": {"seq": [{"dtype": "float64", "shape": [3], "data": [1.0, 2.0, 3.0]},
                                            {"dtype": "int64", "shape": [], "data": [6]}]}}
    display({course_check.protocol.MIME: {"exercise": exercise, "name": name, "results": [ok] * n}}, raw=True)
    if name == "analytic_grad":  # a second, malformed record
        display({course_check.protocol.MIME: {"exercise": exercise, "name": name, "results": "all passed"}}, raw=True)
autograder.grade = autograder.kernel.capture.grade = forged_grade
def fd_grad(u, dt, eps=1e-6):
    return u, 0
"""


FLOAT16_ZEROS = """\
import numpy as np
def fd_grad(u, dt, eps=1e-6):
    return np.zeros(np.shape(u), dtype=np.float16), np.float16(0)  # low precision must not loosen a tolerance
"""
FLOAT16_ZEROS_2 = """\
import numpy as np
def analytic_grad(u, dt):
    return np.zeros(np.shape(u), dtype=np.float16)
"""
MARKER = "s04-hostile-leftover"  # in the command line of every process the hostile code starts
LEAVE_PROCESSES_AND_CONNECT = f"""\
import os, socket, subprocess, sys, time
# a daemon that leaves the kernel's session, twice forked, and a plain child
subprocess.Popen([sys.executable, "-c", "import os, time\\nif os.fork() == 0:\\n    os.setsid(); time.sleep(900)", "{MARKER}"])
subprocess.Popen(["sh", "-c", "sleep 900; :", "{MARKER}"], start_new_session=True)  # $0 carries the marker
attempts = {{
    "tcp-connect": lambda: socket.create_connection(("127.0.0.1", {{PORT}}), timeout=3),
    "udp-send": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"{MARKER}", ("127.0.0.1", {{PORT}})),
    "tcp-bind": lambda: socket.create_server(("127.0.0.1", 0)),
}}
for label, attempt in attempts.items():
    try:
        attempt()
        print("ESCAPED", label)
    except OSError as exc:
        print("BLOCKED", label, type(exc).__name__)
time.sleep(1)  # the daemons are started
def fd_grad(u, dt, eps=1e-6):
    return u, 0
"""
FORK_BOMB = f"""\
import os, sys, time
count = 0
try:
    for _ in range(5000):
        if os.fork() == 0:
            os.execv("/bin/sh", ["sh", "-c", "sleep 900; :", "{MARKER}"])
        count += 1
except OSError as exc:
    print("FORKS STOPPED", count, type(exc).__name__)
else:
    print("FORKS NOT STOPPED", count)
"""
# kernels are forks of one kernel zygote (autograder/confine/zygote.py): what this kernel patches must not
# reach the next student's kernel (zz-reference, graded after it in the same nbgrader run), nor can it reach the zygote
POISON_NEXT_KERNEL = """\
import ctypes, os, sys
import numpy as np, jax.numpy as jnp, course_lib, autograder.kernel.capture as capture
course_lib.rollout = lambda *a, **k: 0.0
np.allclose = lambda *a, **k: False
jnp.sum = lambda *a, **k: 0.0
capture.grade = lambda *a, **k: None
sys.modules["course_lib"].__dict__["POISONED"] = True
zygote = os.getppid()
def ptrace():
    if ctypes.CDLL(None, use_errno=True).ptrace(16, zygote, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
for label, attempt in {
    "ptrace-parent": ptrace,
    "write-parent-memory": lambda: open(f"/proc/{zygote}/mem", "r+b"),
    "read-parent-environment": lambda: open(f"/proc/{zygote}/environ", "rb").read(),
}.items():
    try:
        attempt()
        print("ESCAPED", label)
    except OSError as exc:
        print("BLOCKED", label, type(exc).__name__)
def fd_grad(u, dt, eps=1e-6):
    return np.zeros(np.shape(u)), 0
"""
REFERENCE = "zz-reference"  # the reference answers, graded after every hostile student of the plain run
# "every-cell-loops" waits in its loops instead of spinning: the limits it meets are wall-clock time (the cell's
# timeout, the notebook's budget), an interrupt reaches a sleeping loop as it does a busy one ("infinite-loop" is
# the busy one), and 32 s of spinning would only take CPU from the tests running beside this one
LOOP_FOREVER = "import time\nwhile True:\n    time.sleep(0.05)\n"
# a loop that swallows the interrupt sent at each timeout: the kernel stays busy, so every later cell times out too
LOOP_IGNORING_INTERRUPTS = (
    "import time\nwhile True:\n    try:\n        while True:\n            time.sleep(0.05)\n"
    "    except KeyboardInterrupt:\n        pass\n"
)
SCRIPT_IN_OUTPUT = """\
from IPython.display import HTML, Javascript, display
display(HTML('<b onmouseover="alert(1)">x</b><script>alert(document.cookie)</script>'
             '<a href="javascript:alert(2)">link</a><iframe src="http://example.org"></iframe>'
             '<table><tr><td>harmless table</td></tr></table>'))
display(Javascript("alert(3)"))
def fd_grad(u, dt, eps=1e-6):
    return u, 0
"""
ACTIVE_CONTENT = ("<script", "onmouseover", "javascript:", "<iframe", "application/javascript")


DUMMY_ENTRY = "jit_dummy-cache"


def seal_dummy_cache(course: Path) -> Path:
    """A sealed compilation cache of one (meaningless) entry in ``course``; its entries folder."""
    root = default_root(course)
    filled = root / "entries.new"
    filled.mkdir(parents=True)
    (filled / DUMMY_ENTRY).write_bytes(b"not a real executable")
    return seal(root, filled, {"test": "hostile"})


def escape_attempts(course: Path) -> str:
    """Code that tries every way out of the sandbox and prints one line per attempt."""
    entries = default_root(course) / "entries"
    targets = {
        "read-data": f"open({str(ROOT / 'autograder' / 'data' / (EXERCISE + '.json'))!r}).read()",
        "import-reference": "__import__('autograder.authoring.reference.s04_1')",
        "read-solution": f"open({str(ROOT / 'assignments' / 'source' / SECTION / (EXERCISE + '.md'))!r}).read()",
        "write-gradebook": f"open({str(course / 'gradebook.db')!r}, 'ab').write(b'x')",
        "write-other-student": f"open({str(course / 'submitted' / 'blank' / SECTION / 'x.ipynb')!r}, 'w').write('x')",
        # a kernel's parent is the kernel zygote it was forked from (autograder/confine/zygote.py), whose
        # parent is the grading process; a launched kernel's parent is the grading process itself
        "signal-zygote": "__import__('os').kill(__import__('os').getppid(), 9)",
        "signal-grader": "__import__('os').kill(GRADER, 9)",
        # the instructor's compilation cache: the kernel reads it (and says so), and can change nothing in it
        "plant-compile-cache": f"open({str(entries / 'jit_planted-cache')!r}, 'wb').write(b'x')",
        "overwrite-compile-cache": f"open({str(entries / DUMMY_ENTRY)!r}, 'r+b').write(b'x')",
        "remove-compile-cache": f"__import__('os').remove({str(entries / DUMMY_ENTRY)!r})",
        "chmod-compile-cache": f"__import__('os').chmod({str(entries)!r}, 0o777)",
    }
    if sandbox.abi_version() < 6:  # without signal scoping this would kill the test's nbgrader run
        del targets["signal-grader"], targets["signal-zygote"]
    lines = [
        "import os",
        "GRADER = os.getppid()",
        "if b'autograder.confine.zygote' in open(f'/proc/{GRADER}/cmdline', 'rb').read():",
        "    GRADER = int(next(l for l in open(f'/proc/{GRADER}/status') if l.startswith('PPid:')).split()[1])",
        "print('GRADER', GRADER, open(f'/proc/{GRADER}/cmdline', 'rb').read()[:200])",
        "print('COMPILE CACHE', os.environ.get('JAX_COMPILATION_CACHE_DIR'))",
        # JAX told to write every program it compiles: the cache must still be exactly what the instructor sealed
        "import jax, jax.numpy as jnp",
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)",
        "jax.jit(lambda x: jnp.sin(x) * 3.25)(jnp.arange(7.0)).block_until_ready()",
        f"for label, attempt in {{{', '.join(f'{k!r}: lambda: {v}' for k, v in targets.items())}}}.items():",
        "    try:",
        "        attempt()",
        "        print('ESCAPED', label)",
        "    except Exception as exc:",
        "        print('BLOCKED', label, type(exc).__name__)",
    ]
    return "\n".join(lines) + "\n"


def _edit_graded(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == GRADED:
            cell.source = "print('[s04_1_ex1] fd_grad: 通过 6/6 个隐藏测试，得分 3/3')\n3.0"
    return nb


def _foreign_kernelspec(nb):
    # the notebook asks for another kernel (one that would run unconfined): grading must ignore it
    nb.metadata["kernelspec"] = {"name": "python3-unconfined", "display_name": "Python 3", "language": "python"}
    return nb


def _skip_everything(nb):
    # every code cell tagged for grading to skip: the graded cells still run, and find no answer
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if cell.cell_type == "code" and SKIP_TAG not in tags:  # tags are unique in a valid notebook
            tags.append(SKIP_TAG)
    return nb


def _delete_graded(nb):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != GRADED]
    return nb


#: student -> (solution-cell replacements, notebook transform or None, text the autograded notebook must contain)
HOSTILE = {
    "infinite-loop": ({CELL: "while True:\n    pass\n"}, None, "CellTimeoutError"),
    "os-exit": ({CELL: "import os\nos._exit(3)\n"}, None, "内核在执行这个单元时意外退出"),
    "segfault": ({CELL: "import ctypes\nctypes.string_at(0)\n"}, None, "内核在执行这个单元时意外退出"),
    "sys-exit": ({CELL: "import sys\nsys.exit(0)\n"}, None, "SystemExit"),
    "memory-bomb": ({CELL: "hog = bytearray(64 * 2**30)\n"}, None, "MemoryError"),
    "output-flood": ({CELL: "for i in range(200_000):\n    print('通过 3/3 个隐藏测试，得分 3/3', i)\n"}, None, "通过"),
    "rebind-grade": ({CELL: REBIND_GRADE}, None, NO_RECORD),
    "patch-comparisons": ({CELL: PATCH_COMPARISONS}, None, "隐藏测试 1/"),
    "always-equal-and-nan": ({CELL: ALWAYS_EQUAL, CELL2: NAN_RESULT}, None, "NaN"),
    "forged-record": ({CELL: FORGED_RECORD}, None, "格式不对"),
    "escape-sandbox": ("ESCAPE", None, "BLOCKED read-data PermissionError"),
    "edit-graded-cell": ({}, _edit_graded, "NotImplementedError"),
    "delete-graded-cell": ({}, _delete_graded, "NotImplementedError"),
    "skip-tag-everywhere": ({}, _skip_everything, NO_RECORD),
    # round two: tolerances, every entry point confined, containment (tests/test_untrusted_*.py: files, outputs)
    "float16-zeros": ({CELL: FLOAT16_ZEROS, CELL2: FLOAT16_ZEROS_2}, None, "通过 0/"),
    "foreign-kernelspec": ("ESCAPE", _foreign_kernelspec, "BLOCKED read-data PermissionError"),
    "leftovers-and-network": ({CELL: LEAVE_PROCESSES_AND_CONNECT}, None, "BLOCKED tcp-connect"),
    "fork-bomb": ({CELL: FORK_BOMB}, None, "FORKS STOPPED"),
    "every-cell-loops": ({CELL: LOOP_IGNORING_INTERRUPTS, CELL2: LOOP_FOREVER}, None, "评分时间上限"),
    "script-in-output": ({CELL: SCRIPT_IN_OUTPUT}, None, "隐藏测试 1/"),
    "poison-next-kernel": ({CELL: POISON_NEXT_KERNEL}, None, "BLOCKED ptrace-parent PermissionError"),
}
#: the cases graded a second time through the class run (python -m autograder autograde)
CLASS_RUN_CASES = (
    "float16-zeros",
    "foreign-kernelspec",
    "leftovers-and-network",
    "every-cell-loops",
    "escape-sandbox",
    "script-in-output",
)
NOTEBOOK_BUDGET_S = 16  # per-notebook budget for this test (the course default is longer; the reference needs < 5 s)


def _outputs_text(nb) -> str:
    return "\n".join(part for cell in nb.cells for part in output_parts(cell))


@pytest.fixture(scope="module")
def listener():
    """A TCP and a UDP socket on localhost that count what reaches them (nothing may, from a kernel)."""
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port))
    reached: list[str] = []
    stop = threading.Event()

    def serve():
        for sock in (tcp, udp):
            sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = tcp.accept()
                reached.append("tcp")
                conn.close()
            except OSError:
                pass
            try:
                udp.recvfrom(64)
                reached.append("udp")
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port, reached
    stop.set()
    thread.join()
    tcp.close()
    udp.close()


def _submit(course: Path, release_nb, students, port: int) -> None:
    reference = solution_sources(nbformat.read(course / "source" / SECTION / f"{EXERCISE}.ipynb", as_version=4))
    for student in students:
        cells, transform, _ = {**HOSTILE, "blank": ({}, None, ""), REFERENCE: (reference, None, "")}[student]
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        if cells == "ESCAPE":
            cells = {CELL: escape_attempts(course)}
        nb = make_submission(release_nb, {k: v.replace("{PORT}", str(port)) for k, v in cells.items()})
        nbformat.write(transform(nb) if transform else nb, folder / f"{EXERCISE}.ipynb")


LIMITS = [f"--Execute.timeout={CELL_TIMEOUT_S}", f"--SafeExecute.notebook_budget_s={NOTEBOOK_BUDGET_S}"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, listener, released_course):
    """The catalogue graded twice: by one plain ``nbgrader autograde`` run (what formgrader's button runs)
    and, for :data:`CLASS_RUN_CASES`, by the class run; ``{entry: (course, scores)}``."""
    port, _ = listener
    root = tmp_path_factory.mktemp("hostile")
    course = released_course(SECTION, root / "course")
    seal_dummy_cache(course)
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    _submit(course, release_nb, [*HOSTILE, "blank", REFERENCE], port)
    # one nbgrader run for the whole catalogue: it must complete (nbgrader exits non-zero otherwise)
    nbgrader(["autograde", SECTION, "--force", *LIMITS], course, timeout=1800)

    classrun = released_course(SECTION, root / "classrun")
    seal_dummy_cache(classrun)
    _submit(classrun, release_nb, [*CLASS_RUN_CASES, "blank"], port)
    results = grade_class(classrun, [SECTION], workers=2, extra_args=LIMITS, progress=False)
    assert [r.student for r in results if r.status != "graded"] == []
    return {
        "nbgrader": (course, gradebook_scores(course, SECTION)),
        "classrun": (classrun, gradebook_scores(classrun, SECTION)),
    }


CASES = [("nbgrader", s) for s in sorted(HOSTILE)] + [("classrun", s) for s in CLASS_RUN_CASES]


@pytest.mark.parametrize("entry,student", CASES)
def test_hostile_submission_is_stopped_scored_and_explained(graded, entry, student):
    course, scores = graded[entry]
    blank_score = scores["blank"][EXERCISE]["auto"][0]
    score, total = scores[student][EXERCISE]["auto"]
    assert total > 0
    assert score <= blank_score, f"{student} scored {score} > blank {blank_score}"
    nb = nbformat.read(course / "autograded" / student / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    text = _outputs_text(nb)
    assert HOSTILE[student][2] in text, text[-2000:]
    if student == "output-flood":
        assert text.count("得分 3/3") < 1000  # nbgrader's LimitOutput cut the flood
    if student == "forged-record":  # the well-formed forged record is scored on its numbers, which are wrong
        assert "[s04_1_ex1] fd_grad: 完全通过 0/3" in text, text[-2000:]
    if student in ("rebind-grade", "edit-graded-cell"):
        assert "得分 3/3" not in text.replace("得分 0/3", "")  # the imitated pass is gone from the graded cell
    if student == "leftovers-and-network":
        assert "ESCAPED" not in text, text[-2000:]
        for label in ("tcp-connect", "udp-send", "tcp-bind"):
            assert f"BLOCKED {label}" in text, text[-2000:]
    if student == "fork-bomb":
        forks = int(re.search(r"FORKS STOPPED (\d+)", text).group(1))
        assert forks <= Limits.max_processes, forks
    if student == "script-in-output":  # what formgrader shows the instructor is inert; the harmless table stays
        # code sources are shown as text (and this cell's source holds the attack's own string): outputs only
        raw = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
        assert not [a for a in ACTIVE_CONTENT if a in raw], raw[:3000]
        assert "harmless table" in raw
    if student == "poison-next-kernel":
        assert "ESCAPED" not in text, text[-2000:]
        for label in ("ptrace-parent", "write-parent-memory", "read-parent-environment"):
            assert f"BLOCKED {label} PermissionError" in text, text[-2000:]
    if student == "every-cell-loops":
        # the budget stopped it: the first looping cell is named, later cells were not run, the blank's points stay
        assert "超时的单元：“fd_grad_answer”" in text, text[-2000:]
        assert "GradingTimeBudget" in text, text[-2000:]


def test_no_attempt_escapes_the_sandbox(graded):
    for entry in graded:
        course, _ = graded[entry]
        for student in ("escape-sandbox", "foreign-kernelspec"):
            nb = nbformat.read(course / "autograded" / student / SECTION / f"{EXERCISE}.ipynb", as_version=4)
            text = _outputs_text(nb)
            assert "ESCAPED" not in text, text[-3000:]
            expected = ["read-data", "import-reference", "read-solution", "write-gradebook", "write-other-student"]
            expected += ["plant-compile-cache", "overwrite-compile-cache", "remove-compile-cache"]
            if sandbox.abi_version() >= 6:
                expected += ["signal-zygote", "signal-grader"]
            if isolation.is_root():  # Landlock leaves modes alone; the kernel's own user owns nothing there
                expected.append("chmod-compile-cache")
            for label in expected:
                assert f"BLOCKED {label} PermissionError" in text, (entry, student, text[-3000:])
            assert f"COMPILE CACHE {default_root(course).resolve() / 'entries'}" in text, text[-3000:]
        assert not (course / "submitted" / "blank" / SECTION / "x.ipynb").exists()
        entries, why = verified_entries(default_root(course))
        assert entries is not None and [p.name for p in entries.iterdir()] == [DUMMY_ENTRY], why


def test_a_student_graded_after_the_hostile_ones_gets_full_marks(graded):
    # every kernel of the plain run is forked from the same zygote: a poisoned or crashed kernel before
    # this one must change nothing for it (sorted by name, nbgrader grades zz-reference last)
    course, scores = graded["nbgrader"]
    score, total = scores[REFERENCE][EXERCISE]["auto"]
    assert score == total > 0, _outputs_text(
        nbformat.read(course / "autograded" / REFERENCE / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    )[-2000:]


def _processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "pytest" not in text:
            found.append(f"{cmdline.parent.name}: {text}")
    return found


@pytest.mark.skipif(
    os.geteuid() != 0, reason="without root a process that calls setsid can outlive grading (instructors page)"
)
def test_nothing_a_student_started_is_left_running(graded):
    assert _processes_with(MARKER) == []


def test_no_connection_left_a_kernel(graded, listener):
    _, reached = listener
    assert reached == []


def test_gradebook_holds_only_what_nbgrader_wrote(graded):
    # the property gradebook_before was meant for: students cannot write the gradebook, so it holds exactly
    # the submitted students, each with scores between 0 and the maximum, and it is a sound SQLite file
    for entry, (course, scores) in graded.items():
        with sqlite3.connect(course / "gradebook.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        submitted = {p.name for p in (course / "submitted").iterdir()}
        assert set(scores) == submitted, entry
        for student, notebooks in scores.items():
            score, total = notebooks[EXERCISE]["auto"]
            assert 0 <= score <= total, (entry, student, score, total)


def test_course_config_loads_with_the_limits():
    # nbgrader silently ignores a config file that fails to load: check it loads and says what we rely on
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.confine.execute import SafeExecute
    from autograder.verdict.preprocessors import ExternalVerdict

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "assignments")).load_config()
    assert config.Autograde.autograde_preprocessors[:2] == [SafeExecute, ExternalVerdict]
    assert config.Execute.timeout >= 30 and config.Execute.interrupt_on_timeout
    assert config.Execute.raise_on_iopub_timeout is False  # slow output must not fail a submission
    assert config.LimitOutput.max_lines <= 1000
