"""Grading a class: parallel, resumable after SIGKILL, deterministic, and robust to malformed notebooks.

A small class hands in ``s04_1_ex1``: an honest full answer, a blank, a typical wrong
answer, and four malformed notebooks. It is graded once without interruption (course A)
and once killed with SIGKILL as soon as the first submission is recorded, then resumed
(course B). Both runs go through the real ``nbgrader autograde`` with two workers.
Course A also holds hostile files (tests/test_untrusted_files.py checks them one by one): a
FIFO, a link to another student's notebook, a folder named like the notebook, JSON nested too
deep, bytes that are not UTF-8, a student folder that links to another's; each fails alone.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder.ops.classrun import fingerprint, grade_class, read_ledger
from autograder.ops.nbgrader_run import gradebook_scores
from autograder.authoring.reference import WRONG_ANSWERS
from autograder.ops.selftest import graded_cell_text, make_submission, renamed_parameters, solution_sources
from autograder.ops.submission_lock import graded_alone

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.slow,
    pytest.mark.xdist_group("classrun"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE = "s04_1", "s04_1_ex1"


#: student -> how their submission folder is made hostile, and a fragment of the reason it fails with
HOSTILE_FILES = {
    "fifo": (lambda f: os.mkfifo(f / f"{EXERCISE}.ipynb"), "不是普通文件"),
    "symlink": (
        lambda f: (f / f"{EXERCISE}.ipynb").symlink_to(f.parents[1] / "honest" / SECTION / f"{EXERCISE}.ipynb"),
        "符号链接",
    ),
    "folder-notebook": (lambda f: (f / f"{EXERCISE}.ipynb").mkdir(), "不是普通文件"),
    "deep-json": (lambda f: (f / f"{EXERCISE}.ipynb").write_text("[" * 100_000 + "]" * 100_000), "嵌套"),
    "not-utf8": (lambda f: (f / f"{EXERCISE}.ipynb").write_bytes(b'{"cells": "\xff"}'), "UTF-8"),
}


def _add_hostile_files(course: Path) -> None:
    for student, (make, _) in HOSTILE_FILES.items():
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        make(folder)
    (course / "submitted" / "copycat").symlink_to(course / "submitted" / "honest")  # a whole student, linked


def _make_class(course: Path) -> None:
    """Hand in the class into ``course``, a released copy of the course (the ``released_course`` fixture)."""
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    source_nb = nbformat.read(course / "source" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    notebooks = {
        # the reference with every parameter renamed: a correct answer written differently keeps full marks
        "honest": make_submission(
            release_nb, {gid: renamed_parameters(src) for gid, src in solution_sources(source_nb).items()}
        ),
        "blank": make_submission(release_nb, {}),
        "wrong": make_submission(release_nb, WRONG_ANSWERS[EXERCISE][0].cells),
    }
    no_meta = make_submission(release_nb, solution_sources(source_nb))
    for cell in no_meta.cells:
        cell.metadata.pop("nbgrader", None)
    notebooks["no-metadata"] = no_meta
    dup = make_submission(release_nb, solution_sources(source_nb))
    dup.cells.append(nbformat.from_dict(json.loads(json.dumps(dup.cells[-1]))))  # same id twice
    notebooks["duplicate-ids"] = dup
    kernel = make_submission(release_nb, solution_sources(source_nb))
    kernel.metadata["kernelspec"] = {"name": "julia-1.9", "display_name": "Julia", "language": "julia"}
    notebooks["wrong-kernel"] = kernel
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        path = folder / f"{EXERCISE}.ipynb"
        if student == "duplicate-ids":
            path.write_text(json.dumps(nb, ensure_ascii=False))  # nbformat.write would refuse duplicate ids
        else:
            nbformat.write(nb, path)
    bad = course / "submitted" / "bad-json" / SECTION
    bad.mkdir(parents=True)
    (bad / f"{EXERCISE}.ipynb").write_text('{"cells": [', encoding="utf-8")


def _feedback(course: Path) -> dict:
    out = {}
    for path in sorted((course / "autograded").glob(f"*/{SECTION}/{EXERCISE}.ipynb")):
        out[path.parts[-3]] = graded_cell_text(nbformat.read(path, as_version=4))
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("class_a") / "course")
    _make_class(course)
    _add_hostile_files(course)
    results = grade_class(course, [SECTION], workers=2, progress=False)
    return course, {r.student: r for r in results}


def test_class_run_survives_malformed_notebooks(uninterrupted):
    course, results = uninterrupted
    assert results["bad-json"].status == "failed"
    assert "JSON" in results["bad-json"].error
    assert results["duplicate-ids"].status == "failed" and "复制" in results["duplicate-ids"].error
    scores = gradebook_scores(course, SECTION)
    honest, total = scores["honest"][EXERCISE]["auto"]
    assert honest == total > 0
    assert scores["blank"][EXERCISE]["auto"][0] == 0
    # fd_grad counts N rollouts (its gradient is right: 2 of 3 points, the weights of the spec) and
    # analytic_grad has an off-by-one horizon (0 of 3): partial credit per output, through nbgrader
    assert scores["wrong"][EXERCISE]["auto"] == (2.0, total)
    # metadata stripped: nbgrader recognises none of the graded cells, so the submission is graded with 0
    assert results["no-metadata"].status == "graded", results["no-metadata"].error
    assert scores["no-metadata"][EXERCISE]["auto"] == (0, total)
    for student in ("honest", "blank", "wrong", "wrong-kernel"):
        assert results[student].status == "graded", (student, results[student].error)


def test_class_run_survives_hostile_files(uninterrupted):
    course, results = uninterrupted
    for student, (_, fragment) in HOSTILE_FILES.items():
        assert results[student].status == "failed" and fragment in results[student].error, (student, results[student])
    assert results["copycat"].status == "failed" and "符号链接" in results["copycat"].error
    assert not (course / "autograded" / "symlink").exists() and not (course / "autograded" / "copycat").exists()
    assert gradebook_scores(course, SECTION)["honest"][EXERCISE]["auto"][0] > 0  # the others were graded


def test_rerun_skips_what_was_graded(uninterrupted):
    course, _ = uninterrupted
    again = {r.student: r for r in grade_class(course, [SECTION], workers=2, progress=False)}
    assert again["honest"].status == "skipped"
    assert again["bad-json"].status == "failed"  # failures are tried again
    entry = read_ledger(course, SECTION, "honest")
    assert entry["fingerprint"] == fingerprint(course / "submitted" / "honest" / SECTION)


def test_sigkill_midway_then_resume_equals_uninterrupted_run(uninterrupted, tmp_path, released_course):
    course_a, _ = uninterrupted
    course_b = released_course(SECTION, tmp_path / "course")
    _make_class(course_b)
    script = (
        "import sys; from pathlib import Path; from autograder.ops.classrun import grade_class; "
        f"grade_class(Path(sys.argv[1]), [{SECTION!r}], workers=2, progress=False)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(course_b)], env={**os.environ})
    ledger = course_b / ".grading" / "ledger" / SECTION
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        if ledger.is_dir() and any(ledger.glob("*.json")):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the class run finished before it could be killed; grow the class"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    graded_before = {p.stem for p in ledger.glob("*.json")}
    assert 0 < len(graded_before) < 7

    resumed = {r.student: r for r in grade_class(course_b, [SECTION], workers=2, progress=False)}
    assert {s for s, r in resumed.items() if r.status == "skipped"} <= graded_before
    assert gradebook_scores(course_b, SECTION) == gradebook_scores(course_a, SECTION)
    assert _feedback(course_b) == _feedback(course_a)  # same submission, same score and feedback


def test_a_regrade_leaves_an_audit_trail_and_flags_an_unexplained_change(uninterrupted):
    """Last in this module: it changes the class the tests above read."""
    from nbgrader.api import Gradebook

    from autograder.ops.nbgrader_run import gradebook_url

    course, _ = uninterrupted
    # "wrong" hands in the honest notebook again: its cells change, explained by the resubmission
    honest_nb = course / "submitted" / "honest" / SECTION / f"{EXERCISE}.ipynb"
    (course / "submitted" / "wrong" / SECTION / f"{EXERCISE}.ipynb").write_bytes(honest_nb.read_bytes())
    # one of "honest"'s scores is edited by hand: a byte-identical regrade restores it, with no reason to
    with Gradebook(gradebook_url(course)) as gb:
        grade = gb.find_grade("test_fd_grad", EXERCISE, SECTION, "honest")
        full = grade.auto_score
        grade.auto_score = 0.0
        gb.db.commit()
    results = {
        r.student: r for r in grade_class(course, [SECTION], students=["honest", "wrong"], force=True, progress=False)
    }
    lines = [json.loads(line) for line in (course / ".grading" / "audit" / f"{SECTION}.jsonl").read_text().splitlines()]
    mine = {(x["student"], x["cell"]): x for x in lines}
    flagged = mine["honest", f"{EXERCISE}/test_fd_grad"]
    assert flagged["old"][0] == 0.0 and flagged["new"][0] == full and flagged["why"] == [] and flagged["flagged"]
    assert [c for (s, c) in mine if s == "honest"] == [f"{EXERCISE}/test_fd_grad"]  # nothing else moved
    resubmitted = [x for (s, _), x in mine.items() if s == "wrong"]
    assert resubmitted and all(x["why"] == ["resubmission"] and not x["flagged"] for x in resubmitted)
    # a written answer's automatic score goes from 0 (left blank) to None (to be graded by hand): compare numbers
    assert any((x["new"][0] or 0) > (x["old"][0] or 0) for x in resubmitted)
    assert results["honest"].flagged_cells == 1 and results["wrong"].changed_cells == len(resubmitted)
    assert set(read_ledger(course, SECTION, "honest")["inputs"]) == {"data", "tolerance"}


def test_a_submission_another_process_is_grading_is_waited_for(released_course, tmp_path):
    """While another grading holds the submission's lock (a killed Dask driver's job still running, a second
    class run), the job neither starts nbgrader nor writes its ledger; it grades once the lock is free, and
    counts the wait as queueing."""
    course = released_course(SECTION, tmp_path / "course")
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    folder = course / "submitted" / "blank" / SECTION
    folder.mkdir(parents=True)
    nbformat.write(make_submission(release_nb, {}), folder / f"{EXERCISE}.ipynb")
    results = []
    with graded_alone(course, SECTION, "blank", wait_s=0):
        thread = threading.Thread(target=lambda: results.extend(grade_class(course, [SECTION], progress=False)))
        thread.start()
        time.sleep(8)  # long enough for nbgrader to have started and written the autograded copy
        assert thread.is_alive()
        assert not (course / "autograded" / "blank").exists()
        assert read_ledger(course, SECTION, "blank") is None
    thread.join(600)
    assert [(r.student, r.status) for r in results] == [("blank", "graded")]
    # the lock was held 8 s from the thread's start; the job asks for it only after the run's own start-up
    # (ledger, grading worker), 0.13 s on a slow day here, so at least 6 s of it must count as queueing
    assert results[0].phases["queue"] >= 6
    assert (course / "autograded" / "blank" / SECTION / f"{EXERCISE}.ipynb").is_file()
