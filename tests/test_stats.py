"""``python -m autograder stats`` on a class graded through the real class run: every count exact.

A small class hands in ``s04_1_ex1``, each student with known mistakes (the catalogued wrong answers of the
exercise's spec, and edits of the solution written here), and is graded once with ``grade_class`` (real
``nbgrader autograde``, two workers). The diagnoses the verdict recorded while grading are then counted by
``stats`` and compared with what each submission was built to do, and with the gradebook. Last, one student
resubmits and is regraded: the new grading replaces the old one's diagnoses. The aggregation alone, on
hand-made records, is tested in tests/test_stats_aggregate.py (fast tier).
"""

import contextlib
import csv
import io
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.reference import WRONG_ANSWERS
from autograder.authoring.sources import edited_solution, solution_cell
from autograder.ops import cli
from autograder.ops.classrun import grade_class
from autograder.ops.gradebook import read_gradebook
from autograder.ops.selftest import make_submission, renamed_parameters
from autograder.verdict import diagnoses, journal

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.xdist_group("stats")]

SECTION, EXERCISE = "s04_1", "s04_1_ex1"
FD, ANALYTIC = f"{EXERCISE}.fd_grad", f"{EXERCISE}.analytic_grad"
FD_CELL, ANALYTIC_CELL = "fd_grad_answer", "analytic_grad_answer"
COUNT_N = ("calls += 2", "calls += 1")  # counts N rollouts instead of 2N
SIGN = ("return (q_n - 1.0) * dt**2", "return (1.0 - q_n) * dt**2")  # the residual's sign flipped
NOISE = ("* (n - np.arange(n))", "* (n - np.arange(n)) + 1e-3 * np.cos(np.arange(n))")  # wrong, no pattern


def _class() -> dict[str, dict[str, str]]:
    """``{student: {solution cell: source}}``: what each student hands in (cells not named stay blank)."""
    fd, analytic = solution_cell(EXERCISE, FD_CELL), solution_cell(EXERCISE, ANALYTIC_CELL)
    return {
        "honest": {FD_CELL: renamed_parameters(fd), ANALYTIC_CELL: renamed_parameters(analytic)},
        "blank": {},
        "wrong-0": WRONG_ANSWERS[EXERCISE][0].cells,  # N rollouts; explicit Euler with the horizon cut by one
        "wrong-1": WRONG_ANSWERS[EXERCISE][1].cells,  # one rollout counted; the residual dropped
        "sign": {
            FD_CELL: edited_solution(EXERCISE, FD_CELL, [COUNT_N]),
            ANALYTIC_CELL: edited_solution(EXERCISE, ANALYTIC_CELL, [SIGN]),
        },
        "noise": {FD_CELL: fd, ANALYTIC_CELL: edited_solution(EXERCISE, ANALYTIC_CELL, [NOISE])},
    }


#: what ``stats`` must count, per check: (passed fully, failed with a catalogued mistake, failed with a rule only,
#: undiagnosed, {diagnosis: submissions}); the students behind each number in the comments
EXPECTED = {
    FD: (
        2,  # honest, noise
        3,  # wrong-0, sign (rollouts_n), wrong-1 (rollouts_one)
        1,  # blank (not implemented)
        0,
        {"rollouts_n": 2, "rollouts_one": 1, "not_implemented": 1},
    ),
    ANALYTIC: (
        1,  # honest
        2,  # wrong-0 (explicit Euler), wrong-1 (no residual)
        2,  # blank (not implemented), sign
        1,  # noise
        {"explicit_euler": 1, "no_residual": 1, "not_implemented": 1, "sign": 1},
    ),
}


def _hand_in(course: Path, student: str, cells: dict[str, str]) -> None:
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    folder = course / "submitted" / student / SECTION
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(make_submission(release_nb, cells), folder / f"{EXERCISE}.ipynb")


def _stats(course: Path, out: Path) -> str:
    """``python -m autograder stats s04_1 --out <out>`` on ``course``, through the command's own ``main``."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        previous, cli.COURSE = cli.COURSE, course
        try:
            cli.main(["stats", SECTION, "--out", str(out)])
        finally:
            cli.COURSE = previous
    return printed.getvalue()


def _csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("stats") / "course")
    for student, cells in _class().items():
        _hand_in(course, student, cells)
    results = grade_class(course, [SECTION], workers=2, progress=False)
    assert {r.student: r.status for r in results} == dict.fromkeys(_class(), "graded")
    out = course / "reports"
    printed = _stats(course, out)
    print(printed)  # the sample in the report: pytest -s shows it
    return course, out, printed


def test_stats_counts_each_known_mistake_exactly(graded):
    course, out, printed = graded
    rows = _csv(out / "stats.csv")
    checks = {r["check"]: r for r in rows if r["kind"] == "check"}
    assert set(checks) == {FD, ANALYTIC}
    for check, (passed, mistake, rule, undiagnosed, fired) in EXPECTED.items():
        row = checks[check]
        assert row["submissions"] == "6"
        got = [int(row[k]) for k in ("passed_fully", "failed_mistake", "failed_rule", "undiagnosed")]
        assert got == [passed, mistake, rule, undiagnosed], (check, row)
        counts = {r["diagnosis"]: int(r["matched"]) for r in rows if r["check"] == check and r["kind"] != "check"}
        # every catalogued mistake of the check has a row, zero where no student made it
        catalogued = {r["diagnosis"] for r in rows if r["check"] == check and r["kind"] == "mistake"}
        assert catalogued >= {"explicit_euler"} and all(counts[m] == 0 for m in catalogued - set(fired))
        assert {k: v for k, v in counts.items() if v} == fired, check
    # a mistake's row carries the first line of its Chinese message; a rule's an English description
    row = next(r for r in rows if r["check"] == FD and r["diagnosis"] == "rollouts_n")
    assert row["kind"] == "mistake" and row["message"].startswith("只数了 N 次仿真")
    row = next(r for r in rows if r["check"] == ANALYTIC and r["diagnosis"] == "sign")
    assert row["kind"] == "rule" and row["message"] == "flipped sign"
    assert (out / "stats.png").stat().st_size > 10_000
    assert "rollouts_n" in printed and "只数了 N 次仿真" in printed and f"wrote {out / 'stats.csv'}" in printed


def test_stats_rows_are_what_the_gradebook_says(graded):
    course, out, _ = graded
    rows = {r["cell"]: r for r in _csv(out / "stats.csv") if r["kind"] == "check"}
    submissions = read_gradebook(course, [SECTION]).submissions(SECTION)
    for cell, row in rows.items():
        grades = [
            g for sub in submissions.values() for nb in sub.notebooks.values() if nb.name == EXERCISE for g in nb.grades
        ]
        grades = [g for g in grades if g.name == cell]
        assert int(row["submissions"]) == len(grades) == 6
        assert float(row["points"]) == grades[0].max_score
        assert float(row["mean_score"]) == pytest.approx(sum(g.auto_score for g in grades) / 6, abs=1e-4)
        assert int(row["passed_fully"]) == sum(g.auto_score == g.max_score for g in grades)


def test_a_regrade_replaces_the_students_diagnoses(graded, tmp_path):
    """Last in this module: "noise" resubmits the honest solution, and only its new grading counts."""
    course, _, _ = graded
    _hand_in(course, "noise", {c: solution_cell(EXERCISE, c) for c in (FD_CELL, ANALYTIC_CELL)})
    [result] = grade_class(course, [SECTION], students=["noise"], force=True, progress=False)
    assert result.status == "graded"
    records = journal.read(course, diagnoses.journal_name(SECTION))
    assert sum(r["student"] == "noise" for _, r in records) == 2  # the journal keeps both gradings
    assert len(diagnoses.latest(course, SECTION)) == 6  # one submission per student is counted
    _stats(course, tmp_path)
    rows = _csv(tmp_path / "stats.csv")
    analytic = next(r for r in rows if r["check"] == ANALYTIC and r["kind"] == "check")
    assert (analytic["submissions"], analytic["passed_fully"], analytic["undiagnosed"]) == ("6", "2", "0")
