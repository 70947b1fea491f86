"""The public checks (course_check) a student runs before the deadline: the grader's machinery on public cases.

Each notebook's ``public_checks`` cell is executed in-process, after the notebook's earlier cells with the
reference solution, with each catalogued wrong answer, or with parameters renamed. Float64 throughout (the
notebooks' setup cells call ``cl.enable_float64()``). What grading does with the same answers on the hidden
cases is the section contract of tests/test_grading_pipeline.py; the renamed-parameter student graded by
real nbgrader is in tests/test_classrun.py; the reference's full marks through ``check`` are asserted where a
student sees them, in the student edition's own environment (tests/test_student_machine.py).
"""

from __future__ import annotations

import functools
import io
import json
from contextlib import redirect_stdout

import jupytext
import pytest

import course_check
from autograder.authoring.reference import SHORTCUTS, WRONG_ANSWERS
from autograder.authoring.registry import exercises
from autograder.authoring.sources import solution_cell, source_path
from autograder.authoring.student_copy import student_notebook
from autograder.ops.selftest import renamed_parameters
from course_check import GRADING_KERNEL_ENV, load_public, public_result

pytestmark = pytest.mark.slow

WITH_PUBLIC_CELL = sorted(e for e in exercises() if "public_checks" in source_path(e).read_text(encoding="utf-8"))


def _gid(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


@functools.lru_cache(maxsize=None)
def _after_setup(exercise: str) -> tuple[dict, int]:
    """The namespace after the notebook's setup cell, and how many code cells that was: run once per
    exercise, so the setup's jitted helpers compile once for all the answers tried on it."""
    namespace: dict = {"__name__": "__main__"}
    cells = [c for c in jupytext.read(source_path(exercise)).cells if c.cell_type == "code"]
    n = next((i + 1 for i, c in enumerate(cells) if _gid(c) == "setup"), 0)
    for cell in cells[:n]:
        exec(compile(cell.source, f"{exercise}:{_gid(cell)}", "exec"), namespace)
    return namespace, n


def run_public_checks(exercise: str, answers: dict[str, str]) -> dict[str, course_check.Scored]:
    """Execute the notebook up to and including its public-check cell, in this process.

    ``answers``: ``{grade_id: source}`` of the solution cells handed in; the other solution cells stay as
    released (blank). Returns ``{check name: what check() scored}``.
    """
    released = {_gid(c): c.source for c in student_notebook(source_path(exercise)).cells}
    base, done = _after_setup(exercise)
    namespace = dict(base)  # the answers' own definitions never reach the cached namespace
    scored = {}

    def recording_check(ex, name, fn):
        scored[name] = public_result(ex, name, fn)

    for i, cell in enumerate([c for c in jupytext.read(source_path(exercise)).cells if c.cell_type == "code"]):
        if i < done:
            continue
        gid = _gid(cell)
        source = answers.get(gid, released.get(gid, cell.source)) if gid else cell.source
        if gid == "public_checks":
            original, course_check.check = course_check.check, recording_check
            try:
                exec(compile(source, f"{exercise}:{gid}", "exec"), namespace)
            finally:
                course_check.check = original
            return scored
        try:  # a blank or wrong earlier stage may raise here; the student runs on, as grading does
            exec(compile(source, f"{exercise}:{gid or i}", "exec"), namespace)
        except Exception:  # noqa: BLE001
            pass
    raise AssertionError(f"{exercise} has no public_checks cell")


def reference_answers(exercise: str) -> dict[str, str]:
    nb = jupytext.read(source_path(exercise))
    return {
        _gid(c): solution_cell(exercise, _gid(c))
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    }


def test_every_notebook_with_autograded_checks_has_a_public_cell_calling_each_check():
    for exercise, spec in exercises().items():
        assert exercise in WITH_PUBLIC_CELL, exercise
        text = source_path(exercise).read_text(encoding="utf-8")
        for check in spec.checks:
            assert f'check("{exercise}", "{check.name}", ' in text, (exercise, check.name)


def test_public_cases_differ_from_the_hidden_ones_and_keep_the_call_convention():
    for exercise, spec in exercises().items():
        public = load_public(exercise)
        hidden = json.loads(
            (course_check.PUBLIC_DIR.parents[1] / "autograder" / "data" / f"{exercise}.json").read_text()
        )
        for check in spec.checks:
            shown, kept = public[check.name], hidden[check.name]
            assert shown["cases"], check.key
            assert shown["params"] == kept["params"] and shown["signature"] == kept["signature"]
            seen = {json.dumps(c["inputs"], sort_keys=True) for c in kept["cases"]}
            assert not [c for c in shown["cases"] if json.dumps(c["inputs"], sort_keys=True) in seen], check.key
            assert set(shown) - {"credit"} == {"points", "params", "signature", "messages", "outputs", "cases"}
            assert shown.get("credit") == kept.get("credit") == (None if check.credit == "per_case" else check.credit)


@pytest.mark.parametrize("exercise", WITH_PUBLIC_CELL)
def test_a_blank_notebook_scores_zero_through_check_and_is_told_what_is_missing(exercise):
    scored = run_public_checks(exercise, {})
    assert set(scored) == {c.name for c in exercises()[exercise].checks}
    for result in scored.values():
        assert result.earned == 0 and "还没有实现" in result.feedback, result.feedback


@pytest.mark.parametrize("exercise", [e for e in WITH_PUBLIC_CELL if WRONG_ANSWERS.get(e) or SHORTCUTS.get(e)])
def test_every_wrong_answer_and_shortcut_loses_points_through_check_with_the_graders_message(exercise):
    # a shortcut's points lost at least are the hidden cases' (the section contract); here: it loses, and says why
    for k, wrong in enumerate([*WRONG_ANSWERS.get(exercise, ()), *SHORTCUTS.get(exercise, ())]):
        scored = run_public_checks(exercise, wrong.cells)
        earned = sum(s.earned for s in scored.values())
        total = sum(s.points for s in scored.values())
        feedback = "\n".join(s.feedback for s in scored.values())
        assert earned < total, (k, feedback)
        assert wrong.feedback_contains in feedback, (k, wrong.feedback_contains, feedback)


def test_renamed_parameters_keep_full_marks_and_a_wrong_arity_names_the_template():
    answers = {gid: renamed_parameters(src) for gid, src in reference_answers("s04_1_ex1").items()}
    assert "u_renamed" in answers["fd_grad_answer"]
    scored = run_public_checks("s04_1_ex1", answers)
    assert all(s.earned == s.points for s in scored.values()), [s.feedback for s in scored.values()]

    answers["analytic_grad_answer"] = "def analytic_grad(u):\n    return u\n"
    feedback = run_public_checks("s04_1_ex1", answers)["analytic_grad"].feedback
    assert "得分 0/3" in feedback and "analytic_grad(u, dt)" in feedback and "参数可以改名" in feedback


def test_one_wrong_output_of_a_tuple_earns_partial_credit_and_says_which():
    answers = reference_answers("s04_1_ex1")
    answers["fd_grad_answer"] = answers["fd_grad_answer"].replace("calls += 2", "calls += 1")
    result = run_public_checks("s04_1_ex1", answers)["fd_grad"]
    assert 0 < result.earned < result.points
    assert "中心差分梯度 3/3" in result.feedback and "仿真次数 0/3" in result.feedback
    assert "只数了 N 次仿真" in result.feedback  # the catalogued mistake's message, as grading prints it


def test_in_a_grading_kernel_check_prints_one_line_and_runs_nothing(monkeypatch):
    monkeypatch.setenv(GRADING_KERNEL_ENV, "1")
    calls = []
    out = io.StringIO()
    with redirect_stdout(out):
        course_check.check("s04_1_ex1", "fd_grad", lambda *a: calls.append(a))
    assert calls == [] and out.getvalue().count("\n") == 1 and "评分时不运行公开检查" in out.getvalue()


def test_every_grading_kernel_has_the_variable_check_reads(tmp_path):
    from autograder.confine.launcher import kernel_environment

    assert kernel_environment(tmp_path)[GRADING_KERNEL_ENV] == "1"
