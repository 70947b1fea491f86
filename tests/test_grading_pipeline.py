"""The grading contract, through the real nbgrader (generate_assignment, autograde, gradebook).

For every section: the reference solution scores full marks on autograded cells, the blank
release scores zero without crashing, every catalogued wrong answer loses points with
feedback that names its bug, every shortcut loses the points of the concept it skips (one list,
autograder.ops.selftest.contract_problems, that `python -m autograder selftest` prints too), and the
release leaks no solution, reference data or hidden
input. The reference data was regenerated from today's sources (autograder.authoring.provenance), and a
regeneration gives identical bytes.
"""

import json
from pathlib import Path

import nbformat

import pytest

from autograder.authoring import provenance
from autograder.authoring import regenerate as data
from autograder.authoring import sources
from autograder.authoring.student_copy import student_notebook
from autograder.kernel.capture import INPUTS_DIR
from course_check import PUBLIC_DIR
from autograder.verdict.data import load
from autograder.authoring.reference import SECTIONS
from autograder.authoring.registry import all_checks
from autograder.confine.compile_cache import verified_entries
from autograder.ops.warm_cache import warm_cache
from autograder.ops.selftest import contract_problems, release_section, run_section, scratch_course

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "assignments"


#: The contracts grade on "another machine": other BLAS kernels and another instruction set for XLA than
#: the committed data was generated with (the native ones; the spread measurement of
#: autograder.authoring.spread runs the references under neither of these combinations). The grading
#: kernel's environment must pass these variables through.
GRADING_MACHINE = {"OPENBLAS_CORETYPE": "Sandybridge", "XLA_FLAGS": "--xla_cpu_max_isa=AVX"}


#: the one section whose contract grades with the sealed JAX compilation cache filled first, as an instructor
#: may (make warm-cache): a cached program computes what a compiled one does, and filling the cache executes
#: every release notebook of a section once more (12-16 s a section); the cache's own guarantees (it runs only
#: the release, kernels only read it, a tampered entry is refused) are tested in this file and test_compile_cache
CACHED_SECTION = "s04_9"


@pytest.mark.parametrize("section", SECTIONS)
def test_section_contract(section, tmp_path, monkeypatch, released_course):
    course = released_course(section, tmp_path / "course")
    for name, value in GRADING_MACHINE.items():
        monkeypatch.setenv(name, value)
    report = run_section(section, course, released=True, warm_cache=section == CACHED_SECTION)
    assert contract_problems(report, course) == []


#: the section whose data is regenerated in every run (draws, public cases, naive-formula hints, estimators; 9 CPU
#: seconds); the others are fresh by provenance (test below), which every regeneration records
REGENERATED_SECTION = "s04_4"


def test_the_committed_data_was_regenerated_from_the_current_sources():
    # the content hashes of everything each exercise's data was computed from, recorded by the regeneration that
    # wrote it, against today's files, and the parts taken from the notebooks against the notebooks
    exercises = sorted({c.exercise for c in all_checks().values()})
    problems = provenance.stale(exercises) + data.notebook_problems(exercises)
    assert not problems, "\n".join(problems)


def test_reference_data_regenerates_identically(tmp_path):
    # The committed files were written by an earlier run (another process, often another machine), so one fresh
    # regeneration equal to them shows determinism, and with the provenance test, that the same sources give the
    # same data. On the machine that wrote them the bytes are equal; on another one the last digits of computed
    # values may differ, so there the files must agree within each output's committed tolerance
    # (data.disagreements; why not rounding to stable digits instead: see the comment at data.INPUT_RTOL).
    section = REGENERATED_SECTION
    manifest = provenance.MANIFEST.read_bytes()
    exercises = sorted({c.exercise for c in all_checks().values() if c.exercise.startswith(f"{section}_")})
    fresh = data.regenerate(
        exercises, out_dir=tmp_path / "data", inputs_dir=tmp_path / "inputs", public_dir=tmp_path / "public"
    )
    for path in fresh:
        for committed, written in (
            (data.DATA_DIR / path.name, path),
            (PUBLIC_DIR / path.name, tmp_path / "public" / path.name),  # the public checks students receive
        ):
            same = committed.read_bytes() == written.read_bytes() and (
                (INPUTS_DIR / path.name).read_bytes() == (tmp_path / "inputs" / path.name).read_bytes()
            )
            if not same:
                problems = data.disagreements(
                    json.loads(committed.read_text(encoding="utf-8")), json.loads(written.read_text(encoding="utf-8"))
                )
                assert not problems, f"{committed} differs: run `python -m autograder regenerate`\n" + "\n".join(
                    problems[:20]
                )
    committed_inputs = sorted(p.name for p in INPUTS_DIR.glob(f"{section}_*.json"))
    assert committed_inputs == sorted(p.name for p in fresh)  # no orphaned inputs
    assert provenance.MANIFEST.read_bytes() == manifest  # a regeneration elsewhere records nothing


def test_a_changed_source_or_a_hand_edited_output_makes_the_data_stale(tmp_path):
    exercise = "s04_6_ex1"
    manifest = tmp_path / "provenance.json"
    manifest.write_text(json.dumps({exercise: json.loads(provenance.MANIFEST.read_text(encoding="utf-8"))[exercise]}))
    assert provenance.stale([exercise], manifest) == []
    entry = json.loads(manifest.read_text(encoding="utf-8"))
    entry[exercise]["sources"]["course_lib/integrators.py"] = "0" * 16  # as if recorded before an edit
    manifest.write_text(json.dumps(entry))
    (problem,) = provenance.stale([exercise], manifest)
    assert "course_lib/integrators.py changed" in problem and provenance.FIX in problem
    entry[exercise]["sources"] = provenance.sources("s04_6")
    (output,) = [p for p in entry[exercise]["outputs"] if p.startswith("autograder/data/")]
    entry[exercise]["outputs"][output] = "0" * 16  # the data file is not what the regeneration wrote
    manifest.write_text(json.dumps(entry))
    (problem,) = provenance.stale([exercise], manifest)
    assert f"{output} differ from what the regeneration wrote" in problem
    assert "s04_6_ex2" in provenance.stale(["s04_6_ex2"], manifest)[0]  # never recorded


def test_the_data_agrees_with_what_it_takes_from_the_notebook(monkeypatch):
    from autograder.authoring import sources

    exercise = "s04_6_ex1"
    assert data.notebook_problems([exercise]) == []
    points = sources.check_points(exercise)
    name = sorted(points)[0]
    monkeypatch.setattr(sources, "check_points", lambda ex: {**points, name: points[name] + 1})
    (problem,) = data.notebook_problems([exercise])
    assert problem.startswith(f"{exercise}.{name}: the data says") and "'points'" in problem


def test_no_orphaned_data_or_inputs():
    exercises = {c.exercise for c in all_checks().values()}
    assert {p.stem for p in INPUTS_DIR.glob("*.json")} == exercises
    assert {p.stem for p in data.DATA_DIR.glob("*.json")} == exercises
    assert {p.stem for p in PUBLIC_DIR.glob("*.json")} == exercises


def test_kernel_inputs_hold_no_expected_values():
    for path in INPUTS_DIR.glob("*.json"):
        full = load(path.stem)
        assert json.loads(path.read_text(encoding="utf-8")) == data.inputs_only(full)


def test_warm_cache_runs_the_release_and_no_solution(tmp_path):
    """The compilation cache is readable by every grading kernel (and so, through a student's own output, by
    every student): the instructor's filling run must execute what students receive, never a reference answer."""
    section, marker = "s04_6", tmp_path / "a-solution-ran"
    course = scratch_course(tmp_path / "course", COURSE)
    source = course / "source" / section / f"{section}_ex1.md"
    text = source.read_text(encoding="utf-8")
    assert "### BEGIN SOLUTION\n" in text
    # every solution of the exercise leaves a trace when it runs
    source.write_text(text.replace("### BEGIN SOLUTION\n", f"### BEGIN SOLUTION\n    open({str(marker)!r}, 'w')\n"))
    release_section(section, course)
    log = []
    root = warm_cache(course, [section], log=log.append)
    assert not marker.exists(), "the filling run executed a reference solution"
    entries, why = verified_entries(root)
    assert entries is not None and any(entries.iterdir()), why  # the given cells did compile and fill it
    assert not [line for line in log if line.startswith("WARNING")], log  # only blank answers raised


def _cells(nb):
    return [(cell.cell_type, cell.source, cell.metadata.get("nbgrader")) for cell in nb.cells]


@pytest.mark.parametrize("section", ["s04_1", "s04_6"])  # the sections other tests release anyway
def test_the_student_copy_is_what_nbgrader_releases(section, released_course, tmp_path):
    """The student notebooks the book links to (autograder.authoring.student_copy) are the release."""
    course = released_course(section, tmp_path / "course")
    released = sorted((course / "release" / section).glob("*.ipynb"))
    assert released
    for path in released:
        ours = student_notebook(sources.source_path(path.stem))
        assert _cells(ours) == _cells(nbformat.read(path, as_version=4)), path.name
