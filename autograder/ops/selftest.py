"""Grade pseudo-students through the real nbgrader pipeline: the contract every exercise meets.

For each section (nbgrader assignment) this builds the sources, generates the
student release, submits three kinds of pseudo-student — ``reference`` (the
instructor's solutions pasted into the release), ``blank`` (the release untouched)
and one per known wrong answer — autogrades the whole section in ONE nbgrader run,
and reads scores from the gradebook and feedback from the autograded notebooks.
"""

from __future__ import annotations

import ast

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.authoring.reference import SHORTCUTS, WRONG_ANSWERS
from autograder.authoring.sources import build_all
from autograder.course import Course
from autograder.ops.nbgrader_run import gradebook_scores, nbgrader


@dataclass
class SectionReport:
    section: str
    scores: dict  # student -> notebook -> {"auto": (score, max), ...}
    feedback: dict = field(default_factory=dict)  # student -> notebook -> printed text of graded cells


def solution_sources(source_nb) -> dict:
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in source_nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def reference_solutions(course: Course | Path, section: str) -> dict:
    """``{exercise: {grade_id: source}}``: the instructor's solution cells of a built section (the
    ``reference`` pseudo-student's answers; paste them into a release notebook with :func:`make_submission`)."""
    return {
        p.stem: solution_sources(nbformat.read(p, as_version=4))
        for p in sorted(Course.of(course).source(section).glob("*.ipynb"))
    }


class _Rename(ast.NodeTransformer):
    def visit_FunctionDef(self, node):
        names = {a.arg: f"{a.arg}_renamed" for a in node.args.args}
        for a in node.args.args:
            a.arg = names[a.arg]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in names:
                sub.id = names[sub.id]
        return node


def renamed_parameters(source: str) -> str:
    """A solution cell whose top-level functions have every parameter renamed (and its uses): a correct
    answer written differently, which must keep full marks (grading calls positionally, course_check.calling).
    A written answer (markdown) comes back unchanged."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    tree.body = [_Rename().visit(n) if isinstance(n, ast.FunctionDef) else n for n in tree.body]
    return ast.unparse(tree)


def make_submission(release_nb, replacements: dict):
    """Copy of a release notebook whose solution cells (by grade_id) hold the given sources."""
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in replacements:
            cell.source = replacements[gid]
    return nb


def printed_parts(cell) -> list[str]:
    """A cell's printed text and its errors (``ename: evalue``), in order; displays and results left out."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return parts


def graded_cell_text(nb) -> dict:
    """``{grade_id: text output}`` of the graded code cells of an autograded notebook."""
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and cell.cell_type == "code":
            out[meta["grade_id"]] = "".join(printed_parts(cell))
    return out


def release_section(section: str, course: Course | Path) -> Path:
    """Build ``section``'s source notebooks in ``course`` and generate its student release; returns the release."""
    course = Course.of(course)
    build_all(course, sections=[section])
    nbgrader(["generate_assignment", section, "--force"], course)
    return course.release(section)


def hand_in(
    section: str,
    course: Course | Path,
    wrong_answers: bool = True,
    released: bool = False,
    exercises: list[str] | None = None,
) -> dict[str, list[str]]:
    """Hand in ``section``'s pseudo-students in ``course``, first releasing it unless ``released``.

    ``reference`` and ``blank`` hand in every notebook of the section (or only ``exercises``), each wrong-answer
    and shortcut student (with ``wrong_answers``) only the notebook its answer belongs to. Returns
    ``{student: [exercise, ...]}``.
    """
    course = Course.of(course)
    if not released:
        release_section(section, course)
    release = course.release(section)
    sources = reference_solutions(course, section)
    if exercises is not None:
        unknown = set(exercises) - set(sources)
        if unknown:
            raise ValueError(f"{section} has no notebook {sorted(unknown)}")
        sources = {exercise: sources[exercise] for exercise in exercises}
    students = {"reference": sources, "blank": {}}
    for exercise in sources:
        for kind, catalogue in (("wrong", WRONG_ANSWERS), ("shortcut", SHORTCUTS)):
            for k, wrong in enumerate(catalogue.get(exercise, []) if wrong_answers else []):
                students.setdefault(f"{kind}-{exercise}-{k}", {})[exercise] = wrong.cells
    handed_in = {}
    for student, replacements_by_nb in students.items():
        folder = course.submitted(student, section)
        folder.mkdir(parents=True, exist_ok=True)
        # A wrong-answer or shortcut student hands in only the notebook its answer belongs to.
        handed_in[student] = list(sources if student in ("reference", "blank") else replacements_by_nb)
        for exercise in handed_in[student]:
            release_nb = nbformat.read(release / f"{exercise}.ipynb", as_version=4)
            nbformat.write(
                make_submission(release_nb, replacements_by_nb.get(exercise, {})), folder / f"{exercise}.ipynb"
            )
    return handed_in


def run_section(section: str, course: Course | Path, warm_cache: bool = True, released: bool = False) -> SectionReport:
    """Run the contract for one section inside ``course`` (a scratch copy of assignments/, in which the
    section is already released if ``released``).

    With ``warm_cache`` the section's compilation cache is filled first (:mod:`autograder.ops.warm_cache`),
    as an instructor does before grading, so the contract also holds for kernels that read it.
    """
    course = Course.of(course)
    handed_in = hand_in(section, course, released=released)
    if warm_cache:
        from autograder.ops.warm_cache import warm_cache as fill

        fill(course, [section], log=lambda line: None)
    nbgrader(["autograde", section, "--force"], course)
    report = SectionReport(section, gradebook_scores(course, section))
    for student, exercises in handed_in.items():
        for exercise in exercises:
            path = course.autograded(student, section) / f"{exercise}.ipynb"
            report.feedback.setdefault(student, {})[exercise] = graded_cell_text(nbformat.read(path, as_version=4))
    return report


def contract_problems(report: SectionReport, course: Course | Path) -> list[str]:
    """What breaks the grading contract in a section's report (empty when it holds): the reference keeps full
    marks, the blank release scores zero with readable feedback, every wrong answer loses points and its feedback
    names its bug, every shortcut loses at least the points of the concept it skips, and the release leaks
    nothing. The self-test command and the section contract test both read this list."""
    from autograder.authoring import regenerate as data
    from autograder.authoring.release_scan import scan_release

    problems = []
    for exercise, v in report.scores["reference"].items():
        (score, total), manual_max = v["auto"], v["manual_max"]
        if total <= 0 and manual_max <= 0:
            problems.append(f"{exercise}: no autograded and no manual points")
        if abs(score - total) > 1e-9:
            problems.append(
                f"{exercise}: the reference scored {score}/{total}: {report.feedback['reference'][exercise]}"
            )
    for exercise, v in report.scores["blank"].items():
        if v["auto"][0] != 0:
            problems.append(f"{exercise}: the blank release scored {v['auto'][0]}")
        if not all(text.strip() for text in report.feedback["blank"][exercise].values()):
            problems.append(f"{exercise}: a graded cell of the blank release printed nothing")
    for exercise in report.scores["reference"]:
        for kind, catalogue in (("wrong", WRONG_ANSWERS), ("shortcut", SHORTCUTS)):
            for k, wrong in enumerate(catalogue.get(exercise, [])):
                student = f"{kind}-{exercise}-{k}"
                score, total = report.scores[student][exercise]["auto"]
                must_lose = getattr(wrong, "loses", 0.0)
                if score >= total or score > total - must_lose + 1e-9:
                    problems.append(f"{student}: scored {score}/{total}, must lose at least {must_lose or 'a point'}")
                feedback = "\n".join(report.feedback[student][exercise].values())
                if wrong.feedback_contains not in feedback:
                    problems.append(f"{student}: the feedback lacks {wrong.feedback_contains!r}:\n{feedback}")
    section = report.section
    course = Course.of(course)
    leaks = scan_release(course.release(section), course.source(section), data.DATA_DIR)
    problems += [f"LEAK {section}: {leak}" for leak in leaks]
    return problems


def scratch_course(dst: Path, src: Path) -> Path:
    """Copy the course folder (sources and config only) to ``dst``: not the folders of nbgrader's steps after
    the source (as the course's config names them), downloads, reports, the gradebook and grading state."""
    steps = Course.load(src).directory
    made = [getattr(steps, f"{step}_directory") for step in ("release", "submitted", "autograded", "feedback")] + [
        "downloaded",
        "reports",
        "gradebook.db",
        ".grading",
        "*.ipynb",
    ]
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*made))
    return dst
