"""Every exercise spec says only what its notebook does not, and agrees with it (no nbgrader: seconds).

The notebook is the one place for points (its graded cells) and for the constants a student sees
(its setup cell); a spec's wrong answers are exact-once edits of the notebook's own solution cells.
"""

import ast
import re
from pathlib import Path

import jupytext
import numpy as np
import pytest

from autograder.authoring import sources
from autograder.authoring.reference import EXERCISES, WRONG_ANSWERS
from autograder.authoring.registry import Check, Mistake, Variant

REFERENCE_DIR = Path(sources.__file__).parent / "reference"
NOTEBOOKS = [md.stem for md in sources.source_notebooks()]


def _equal(a, b) -> bool:
    if isinstance(a, tuple) and hasattr(a, "_fields"):  # a course_lib parameter set
        return type(a) is type(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def test_every_graded_notebook_has_a_spec_with_a_wrong_answer():
    assert set(EXERCISES) <= set(NOTEBOOKS)
    for exercise in NOTEBOOKS:
        if sources.check_points(exercise):
            assert exercise in EXERCISES, f"{exercise} has graded cells but no spec"
            assert WRONG_ANSWERS.get(exercise), f"{exercise} has no plausible wrong answer"


@pytest.mark.parametrize("exercise", NOTEBOOKS)
def test_no_notebook_cell_reaches_for_instructor_files(exercise):
    # the sandboxed grading kernel cannot read these (autograder/confine/landlock.py); a cell that
    # tries would fail for every student
    for i, cell in enumerate(jupytext.read(sources.source_path(exercise)).cells):
        if cell.cell_type == "code":
            for unreadable in ("autograder.authoring", "autograder.data", "autograder/data", "autograder/authoring"):
                assert unreadable not in cell.source, f"{exercise} cell {i} uses {unreadable}"


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_points_come_from_the_graded_cells(exercise):
    # check_points raises on a graded code cell that calls no check, several, or another exercise's
    points = sources.check_points(exercise)
    assert set(points) == {c.name for c in EXERCISES[exercise].checks}, "graded cells and checks differ"
    assert all(p > 0 for p in points.values())


@pytest.mark.parametrize("exercise", sorted(e for e in EXERCISES if EXERCISES[e].constants))
def test_constants_agree_with_the_setup_cell(exercise):
    setup = sources.setup_constants(exercise)
    for name, value in EXERCISES[exercise].constants.items():
        assert name in setup, f"{exercise}: the setup cell defines no constant {name}"
        assert _equal(setup[name], value), (
            f"{exercise}: {name} is {setup[name]!r} in the setup cell, {value!r} in the spec"
        )


def test_setup_constants_reads_literals_and_parameter_sets(tmp_path, monkeypatch):
    course = tmp_path / "course"
    (course / "source" / "s99").mkdir(parents=True)
    (course / "source" / "s99" / "s99_ex1.md").write_text(
        "---\njupytext: {text_representation: {extension: .md, format_name: myst}}\n"
        "kernelspec: {display_name: Python 3, language: python, name: python3}\n---\n\n"
        "```{code-cell} ipython3\n---\nnbgrader: {grade_id: setup, locked: true}\n---\n"
        "import course_lib as cl\nG = 9.81\nDT, N = 0.03, 100\nP = cl.PendulumParams(damping=0.2)\n"
        "XS = cl.rollout\nK = -2.5\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sources, "COURSE_DIR", course)
    found = sources.setup_constants("s99_ex1")
    assert found.keys() == {"G", "DT", "N", "P", "K"}
    assert found["P"].damping == 0.2 and found["N"] == 100 and found["K"] == -2.5


@pytest.mark.parametrize("exercise", sorted(WRONG_ANSWERS))
def test_wrong_answers_are_exact_once_edits_of_the_solution_cells(exercise):
    source_cells = sources._cells(sources.source_path(exercise))
    solution_cells = {gid for gid, (_, meta) in source_cells.items() if meta.get("solution")}
    for wrong in WRONG_ANSWERS[exercise]:
        assert wrong.edits and set(wrong.edits) | set(wrong.keep) <= solution_cells
        cells = wrong.cells  # raises unless every `old` occurs exactly once
        for gid in wrong.edits:
            assert cells[gid] != sources.solution_cell(exercise, gid), f"{exercise}/{gid}: the edit changes nothing"
            compile(cells[gid], f"{exercise}/{gid}", "exec")  # a plausible submission is valid Python


def test_an_edit_must_match_exactly_once():
    exercise = next(iter(WRONG_ANSWERS))
    gid = next(iter(WRONG_ANSWERS[exercise][0].edits))
    with pytest.raises(ValueError, match="occurs 0 times"):
        sources.edited_solution(exercise, gid, [("this text is in no solution cell", "")])


def _code_like(text: str) -> bool:
    """A string literal that holds a function, a class or a block of four statements or more."""
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in body) or len(body) >= 4


def test_no_solution_code_inside_string_literals():
    for path in sorted(REFERENCE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value.strip():
                assert not _code_like(node.value), f"{path.name}:{node.lineno} holds code in a string literal"


def test_every_mistake_carries_its_own_message():
    for spec in EXERCISES.values():
        for check in spec.checks:
            for name, mistake in check.mistakes.items():
                assert isinstance(mistake, Mistake) and mistake.message.strip(), f"{check.key}: {name}"
                assert any("\u4e00" <= ch <= "\u9fff" for ch in mistake.message), f"{check.key}: {name} is not Chinese"
    with pytest.raises(ValueError):
        Mistake("  ", lambda: 0)


#: working-time estimates not derived from stars (30 minutes a star): the project stages and chapter-end ones
UNSTARRED_MINUTES = {
    "mini_diffsim_p1": 90,
    "mini_diffsim_p2": 90,
    "mini_diffsim_p3": 90,
    "mini_diffsim_p4": 60,
    "s04_end_exA": 60,
    "s04_end_exB": 60,
    "s04_end_exC": 90,
}


@pytest.mark.parametrize("md", sources.source_notebooks(), ids=lambda p: p.stem)
def test_every_notebook_header_states_a_time_estimate(md):
    text = md.read_text(encoding="utf-8")
    title = re.search(r"^# .*$", text, re.M)
    assert title, md.name
    estimate = re.search(r"预计用时：约 (\d+) 分钟", text[title.end() : title.end() + 200])
    assert estimate, f"{md.name}: the header needs **预计用时：约 N 分钟** right under the title"
    stars = title.group(0).count("★")
    assert int(estimate.group(1)) == UNSTARRED_MINUTES.get(md.stem, 30 * stars), md.name


def _numbers(value):
    if isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    else:
        yield value


def test_counts_indices_and_modes_are_compared_as_integers():
    # an output whose reference is integers on every case (a count, an index, a mode) is compared by
    # equality, and its feedback names how many entries differ and where, and the mistake it matches,
    # instead of a relative error against a float tolerance
    from autograder.verdict import data

    for exercise in EXERCISES:
        for name, spec in data.load(exercise).items():
            for j, output in enumerate(spec["outputs"]):
                values = [v for case in spec["cases"] for v in _numbers(case["expected"][j])]
                integers = bool(values) and all(type(v) is int for v in values)
                assert integers == (output["kind"] == "integer"), f"{exercise}.{name}: {output['label']}"


def test_a_variant_is_the_reference_with_other_keywords():
    def scaled(x, factor=1.0, shift=0.0):
        return factor * x + shift

    check = Check(
        "f",
        lambda: [{"x": 2.0}],
        reference=lambda x: scaled(x),
        variant_of=scaled,
        mistakes={"doubled": Variant("乘了两次。", factor=2.0), "own": Mistake("加了一。", lambda x: x + 1)},
    )
    assert all(isinstance(m, Mistake) for m in check.mistakes.values())
    assert check.mistakes["doubled"].fn(x=2.0) == 4.0 and check.mistakes["doubled"].message == "乘了两次。"
    assert check.mistakes["own"].fn(x=2.0) == 3.0
    # without variant_of a Variant switches the reference itself
    plain = Check("g", lambda: [], reference=scaled, mistakes={"shifted": Variant("多加了常数。", shift=1.0)})
    assert plain.mistakes["shifted"].fn(x=2.0) == 3.0


@pytest.mark.parametrize("md", sources.source_notebooks(), ids=lambda p: p.stem)
def test_points_stated_in_the_text_are_the_points_awarded(md):
    """A heading like 简答题（4 分，人工评分） or 第 1 题（2 分） states the points of the written answer after it."""
    cells = jupytext.read(md).cells
    for before, cell in zip(cells, cells[1:]):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("grade") and meta.get("solution"):
            stated = re.findall(r"（(\d+(?:\.\d+)?) 分[，）]", before.source)
            if stated:
                assert float(stated[-1]) == float(meta["points"]), (md.stem, meta["grade_id"], stated, meta["points"])


def test_the_time_limits_students_read_are_the_ones_grading_applies():
    from autograder.confine.limits import Limits

    config = (sources.COURSE_DIR / "nbgrader_config.py").read_text(encoding="utf-8")
    cell_timeout = int(re.search(r"c\.Execute\.timeout = (\d+)", config).group(1))
    stated = f"每个单元 {cell_timeout} 秒，一个笔记本的所有单元合计 {Limits.notebook_budget_s:g} 秒，同一节的所有笔记本合计 {Limits.submission_budget_s:g} 秒"
    with_public_cell = [
        md for md in sources.source_notebooks() if "public_checks_intro" in md.read_text(encoding="utf-8")
    ]
    assert len(with_public_cell) >= 29
    for md in with_public_cell:
        assert stated in md.read_text(encoding="utf-8"), md.stem
    index = (sources.COURSE_DIR.parent / "book" / "index.md").read_text(encoding="utf-8")
    assert (
        f"每个单元 {cell_timeout} 秒，一个笔记本合计 {Limits.notebook_budget_s:g} 秒，"
        f"同一份作业的所有笔记本合计 {Limits.submission_budget_s:g} 秒" in index
    )
