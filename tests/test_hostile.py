"""Broken and hostile submissions, graded through the real nbgrader in ONE autograde run.

Each pseudo-student hands in ``s04_1_ex1`` with one solution cell replaced by code that
loops forever, kills its kernel, exhausts memory or floods its output. The run must
finish, every such student must score no more than an honest blank on the autograded
cells, and the autograded notebook must say what happened.
"""

from pathlib import Path

import nbformat
import pytest

from autograder.nbgrader_run import gradebook_scores, nbgrader
from autograder.selftest import make_submission, scratch_course
from autograder.sources import build_all

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE, CELL = "s04_1", "s04_1_ex1", "fd_grad_answer"
CELL_TIMEOUT_S = 20  # per-cell limit for this test (the course default is 120 s)

#: student -> (code pasted into the first solution cell, text the autograded notebook must contain)
HOSTILE = {
    "infinite-loop": ("while True:\n    pass\n", "CellTimeoutError"),
    "os-exit": ("import os\nos._exit(3)\n", "内核在执行这个单元时意外退出"),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "内核在执行这个单元时意外退出"),
    "sys-exit": ("import sys\nsys.exit(0)\n", "SystemExit"),
    "memory-bomb": ("hog = bytearray(64 * 2**30)\n", "MemoryError"),
    "output-flood": ("for i in range(200_000):\n    print('通过 3/3 个隐藏测试，得分 3/3', i)\n", "通过"),
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
    for student, (code, _) in {**HOSTILE, "blank": ("", "")}.items():
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        nb = make_submission(release_nb, {CELL: code} if code else {})
        nbformat.write(nb, folder / f"{EXERCISE}.ipynb")
    # one nbgrader run for the whole catalogue: it must complete (nbgrader exits non-zero otherwise)
    nbgrader(["autograde", SECTION, "--force", f"--Execute.timeout={CELL_TIMEOUT_S}"], course, timeout=1800)
    return course, gradebook_scores(course, SECTION)


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_hostile_submission_is_stopped_scored_and_explained(graded, student):
    course, scores = graded
    blank_score = scores["blank"][EXERCISE]["auto"][0]
    score, total = scores[student][EXERCISE]["auto"]
    assert total > 0
    assert score <= blank_score, f"{student} scored {score} > blank {blank_score}"
    nb = nbformat.read(course / "autograded" / student / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    text = _outputs_text(nb)
    assert HOSTILE[student][1] in text, text[-2000:]
    if student == "output-flood":
        assert text.count("得分 3/3") < 1000  # nbgrader's LimitOutput cut the flood


def test_course_config_loads_with_the_limits():
    # nbgrader silently ignores a config file that fails to load: check it loads and says what we rely on
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.nbgrader_ext import SafeExecute

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "assignments")).load_config()
    assert config.Autograde.autograde_preprocessors[0] is SafeExecute
    assert config.Execute.timeout >= 60 and config.Execute.interrupt_on_timeout
    assert config.Execute.raise_on_iopub_timeout is False  # slow output must not fail a submission
    assert config.LimitOutput.max_lines <= 1000
