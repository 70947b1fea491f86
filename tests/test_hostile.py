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

from pathlib import Path

import nbformat
import pytest

from autograder.confine import landlock as sandbox
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.ops.selftest import make_submission, scratch_course
from autograder.authoring.sources import build_all

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE, CELL, CELL2 = "s04_1", "s04_1_ex1", "fd_grad_answer", "analytic_grad_answer"
GRADED = "test_fd_grad"  # the first graded cell of the notebook
CELL_TIMEOUT_S = 20  # per-cell limit for this test (the course default is 120 s)
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
import numpy as np, autograder, autograder.kernel.capture
from IPython.display import display
def forged_grade(exercise, name, fn):
    n = len(autograder.kernel.capture.load_inputs(exercise)[name])
    ok = {"status": "ok", "value": {"seq": [{"dtype": "float64", "shape": [3], "data": [1.0, 2.0, 3.0]},
                                            {"dtype": "int64", "shape": [], "data": [6]}]}}
    display({autograder.protocol.MIME: {"exercise": exercise, "name": name, "results": [ok] * n}}, raw=True)
    if name == "analytic_grad":  # a second, malformed record
        display({autograder.protocol.MIME: {"exercise": exercise, "name": name, "results": "all passed"}}, raw=True)
autograder.grade = autograder.kernel.capture.grade = forged_grade
def fd_grad(u, dt, eps=1e-6):
    return u, 0
"""


def escape_attempts(course: Path) -> str:
    """Code that tries every way out of the sandbox and prints one line per attempt."""
    targets = {
        "read-data": f"open({str(ROOT / 'autograder' / 'data' / (EXERCISE + '.json'))!r}).read()",
        "import-reference": "__import__('autograder.authoring.reference.s04_1')",
        "read-solution": f"open({str(ROOT / 'assignments' / 'source' / SECTION / (EXERCISE + '.md'))!r}).read()",
        "write-gradebook": f"open({str(course / 'gradebook.db')!r}, 'ab').write(b'x')",
        "write-other-student": f"open({str(course / 'submitted' / 'blank' / SECTION / 'x.ipynb')!r}, 'w').write('x')",
        "signal-grader": "__import__('os').kill(__import__('os').getppid(), 9)",
    }
    if sandbox.abi_version() < 6:  # without signal scoping this would kill the test's nbgrader run
        del targets["signal-grader"]
    lines = [f"for label, attempt in {{{', '.join(f'{k!r}: lambda: {v}' for k, v in targets.items())}}}.items():",
             "    try:", "        attempt()", "        print('ESCAPED', label)",
             "    except Exception as exc:", "        print('BLOCKED', label, type(exc).__name__)"]
    return "\n".join(lines) + "\n"


def _edit_graded(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == GRADED:
            cell.source = "print('[s04_1_ex1] fd_grad: 通过 6/6 个隐藏测试，得分 3/3')\n3.0"
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
}


def _outputs_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type == "error":
                parts.append(f"{out.ename}: {out.evalue}")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = scratch_course(tmp_path_factory.mktemp("hostile") / "course", ROOT / "assignments")
    build_all(course, sections=[SECTION])
    nbgrader(["generate_assignment", SECTION, "--force"], course)
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    for student, (cells, transform, _) in {**HOSTILE, "blank": ({}, None, "")}.items():
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        nb = make_submission(release_nb, {CELL: escape_attempts(course)} if cells == "ESCAPE" else cells)
        nbformat.write(transform(nb) if transform else nb, folder / f"{EXERCISE}.ipynb")
    gradebook_before = (course / "gradebook.db").stat().st_size if (course / "gradebook.db").exists() else None
    # one nbgrader run for the whole catalogue: it must complete (nbgrader exits non-zero otherwise)
    nbgrader(["autograde", SECTION, "--force", f"--Execute.timeout={CELL_TIMEOUT_S}"], course, timeout=1800)
    return course, gradebook_scores(course, SECTION), gradebook_before


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_submission_is_stopped_scored_and_explained(graded, student):
    course, scores, _ = graded
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
        assert "[s04_1_ex1] fd_grad: 通过 0/3" in text, text[-2000:]
    if student in ("rebind-grade", "edit-graded-cell"):
        assert "得分 3/3" not in text.replace("得分 0/3", "")  # the imitated pass is gone from the graded cell


def test_no_attempt_escapes_the_sandbox(graded):
    course, _, _ = graded
    nb = nbformat.read(course / "autograded" / "escape-sandbox" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    text = _outputs_text(nb)
    assert "ESCAPED" not in text, text[-3000:]
    expected = ["read-data", "import-reference", "read-solution", "write-gradebook", "write-other-student"]
    if sandbox.abi_version() >= 6:
        expected.append("signal-grader")
    for label in expected:
        assert f"BLOCKED {label} PermissionError" in text, text[-3000:]
    assert not (course / "submitted" / "blank" / SECTION / "x.ipynb").exists()


def test_course_config_loads_with_the_limits():
    # nbgrader silently ignores a config file that fails to load: check it loads and says what we rely on
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.confine.execute import SafeExecute
    from autograder.verdict.preprocessors import ExternalVerdict

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "assignments")).load_config()
    assert config.Autograde.autograde_preprocessors[:2] == [SafeExecute, ExternalVerdict]
    assert config.Execute.timeout >= 60 and config.Execute.interrupt_on_timeout
    assert config.Execute.raise_on_iopub_timeout is False  # slow output must not fail a submission
    assert config.LimitOutput.max_lines <= 1000
