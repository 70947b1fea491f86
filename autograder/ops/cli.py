"""Instructor commands: ``python -m autograder <command>`` (run from the repository root).

Each command wraps the real nbgrader commands on the course folder ``assignments/``, which it reads once
(:func:`_course`: its ``nbgrader_config.py``, its ``term.toml``) and passes on. A command imports what it
needs when it runs: JAX and the reference solutions only for the commands that compute with them
(``regenerate``, ``release``, ``selftest``, ...), so ``export``, ``collect``, ``term`` or ``--help`` start fast.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from autograder.authoring.sections import SECTIONS
from autograder.ops.nbgrader_run import nbgrader

COURSE = Path(__file__).resolve().parents[2] / "assignments"

#: name -> (function, help, arguments, actions): filled by :func:`command` where each command is written
COMMANDS: dict[str, tuple] = {}


def arg(*flags, **options) -> tuple:
    """One ``argparse`` argument of a command: ``add_argument(*flags, **options)``."""
    return flags, options


def command(name: str, help_: str, *arguments: tuple, actions: dict | None = None):
    """Declare ``python -m autograder <name>`` on the function that implements it.

    ``actions``: sub-commands (``regrade import|list|decide``), ``{action: (help, [arguments])}``.
    """

    def register(fn):
        COMMANDS[name] = (fn, help_, arguments, actions or {})
        return fn

    return register


SECTIONS_ARG = arg("sections", nargs="*", help=f"sections (default all: {', '.join(SECTIONS)})")


def _course(command: str):
    """The course folder :data:`COURSE`, read once for this command (:class:`autograder.course.course.Course`);
    a term file it cannot mean stops the command in one line, before anything is written."""
    from autograder.course.course import Course

    try:
        return Course.load(COURSE)
    except ValueError as exc:
        raise SystemExit(f"{command}: {exc}") from None


def _sections(args) -> list[str]:
    chosen = args.sections or list(SECTIONS)
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    return chosen


@command("build", "turn source .md files into the .ipynb files nbgrader reads", SECTIONS_ARG)
def cmd_build(args):
    _build(_course("build"), _sections(args))


def _build(course, sections) -> None:
    from autograder.authoring import sources

    for path in sources.build_all(course, sections):
        print(f"built {path.relative_to(course.folder.parent)}")


@command(
    "regenerate",
    "recompute reference data from the reference solutions, then build",
    SECTIONS_ARG,
    arg(
        "--keep-spread",
        action="store_true",
        help="keep the measured spread stored in autograder/data (measure only new or changed checks)",
    ),
)
def cmd_regenerate(args):
    from autograder.authoring import regenerate as data
    from autograder.authoring.registry import all_checks
    from autograder.verdict.data import load

    sections = _sections(args)
    exercises = sorted(
        {c.exercise for c in all_checks().values() if any(c.exercise.startswith(f"{s}_") for s in sections)}
    )
    if exercises and not args.keep_spread:
        print(
            f"measuring the spread of correct answers under {len(data.spread_.VARIANTS)} environments "
            f"({'; '.join(data.spread_.VARIANTS)}); this takes minutes"
        )
    written = (
        data.regenerate(exercises, measure=not args.keep_spread) if exercises else []
    )  # a written-only section has no data
    stored = {path.stem: load(path.stem, path.parent) for path in written}
    for path in written:
        print(f"wrote {path.relative_to(COURSE.parent)}")
    for check, label, spread, rtol, nearest in data.tolerance_rows(stored):
        if spread:
            print(f"  {check} [{label}]: spread {spread:.1e}, rtol {rtol:.1e}, nearest mistake {nearest:.1e}")
    for exercise, checks in sorted(stored.items()):
        for name, spec in sorted(checks.items()):
            for note in data.uncaught_mistakes(f"{exercise}.{name}", spec):
                print(f"  note: {note}")
    _build(_course("regenerate"), sections)


@command("release", "build, run nbgrader generate_assignment, and scan the release for leaks", SECTIONS_ARG)
def cmd_release(args):
    _release(_course("release"), _sections(args))


def _release(course, sections) -> None:
    from autograder.authoring import regenerate as data
    from autograder.authoring.release_scan import scan_release

    _build(course, sections)
    failed = False
    for section in sections:
        nbgrader(["generate_assignment", section, "--force"], course)
        problems = scan_release(course.release(section), course.source(section), data.DATA_DIR)
        for problem in problems:
            print(f"LEAK {section}: {problem}", file=sys.stderr)
        failed |= bool(problems)
        print(f"released {section} -> {course.release(section).relative_to(course.folder.parent)}")
    _apply_term(course)
    if failed:
        raise SystemExit("the release leaks instructor material; fix the sources before handing it out")


@command("warm-cache", "release, then fill and seal the JAX compilation cache grading kernels read", SECTIONS_ARG)
def cmd_warm_cache(args):
    from autograder.confine.compile_cache import verified_entries
    from autograder.ops.warm_cache import warm_cache

    course, sections = _course("warm-cache"), _sections(args)
    _release(course, sections)  # the cache is filled from what students receive: release first
    root = warm_cache(course, sections)
    entries, why = verified_entries(root)
    if entries is None:
        raise SystemExit(f"the compilation cache did not verify after sealing: {why}")
    count = sum(1 for _ in entries.iterdir())
    print(
        f"compilation cache sealed: {count} programs in {entries.relative_to(course.folder.parent)}; grading kernels read it"
    )


def _apply_term(course) -> None:
    """Due dates, extensions and late penalties into the gradebook (autograder/ops/term.py); late ones listed."""
    from autograder.ops.term import apply_term

    try:
        lines = apply_term(course)
    except ValueError as exc:  # a broken term.toml or extensions record: say which and where
        raise SystemExit(f"term: {exc}") from None
    for line in lines:
        print(line)


@command("term", "show due dates, late policy and extensions; write them and the late penalties to the gradebook")
def cmd_term(args):
    from autograder.ops.term import extensions

    course = _course("term")
    term = course.term
    print(f"截止时间（assignments/term.toml）；迟交规则：{term.policy.describe()}")
    for section in SECTIONS:
        due = term.due.get(section)
        print(f"  {section:14s} {due.isoformat() if due else '未设置'}")
    for (section, student), grant in sorted(extensions(course).items()):
        if grant.hours:
            print(
                f"  延期 {section} {student}：{grant.hours:g} 小时（{grant.reason}；{grant.granted_by}，{grant.granted_at}）"
            )
    _apply_term(course)


@command(
    "extend",
    "grant a student an extension on one section, with a reason (recorded)",
    arg("section", help="the assignment (section)"),
    arg("student", help="the student id"),
    arg("--hours", type=float, required=True, help="hours past the due date (0 withdraws)"),
    arg("--reason", required=True, help="why (kept in the audit trail)"),
    arg("--new-student", action="store_true", help="the student has handed in nothing yet (not in the gradebook)"),
)
def cmd_extend(args):
    from autograder.ops.term import grant_extension

    section = _sections(argparse.Namespace(sections=[args.section]))[0]
    course = _course("extend")
    try:
        grant = grant_extension(course, section, args.student, args.hours, args.reason, new_student=args.new_student)
    except ValueError as exc:
        raise SystemExit(f"extend: {exc}") from None
    done = f"延期 {grant.hours:g} 小时" if grant.hours else "撤销延期"
    print(f"{section} {grant.student}：{done}（{grant.reason}），已记入 assignments/.grading/audit/extensions.jsonl")


@command(
    "regrade",
    "regrade requests: import a form's CSV, list the open ones, decide one",
    actions={
        "import": ("read a form's CSV: student,section,cell,reason (or 学号,作业,单元,理由)", [arg("file")]),
        "list": ("the open requests, with each cell's score now", [arg("sections", nargs="*")]),
        "decide": (
            "close a request: --keep or --score X, with --reason",
            [
                arg("id", help="the request's id, e.g. r3"),
                arg("--score", type=float, help="the cell's new score (written as its manual score)"),
                arg("--keep", action="store_true", help="the score stands"),
                arg("--reason", required=True, help="why (the student reads it)"),
            ],
        ),
    },
)
def cmd_regrade(args):
    from autograder.ops.regrades import decide, import_requests, open_requests

    course = _course("regrade")
    try:
        if args.action == "import":
            imported = import_requests(course, Path(args.file))
            for r in imported.added:
                print(f"收到 {r.id}：{r.student} {r.section} {r.notebook}/{r.cell}")
            for problem in imported.problems:
                print(f"没有收下 {problem}")
            print(f"收下 {len(imported.added)} 条申请，{len(imported.problems)} 行有问题（见上）")
            if imported.problems:  # the valid rows are kept; the exit status tells a script some were not
                raise SystemExit(f"regrade: {len(imported.problems)} 行没有收下：改正这些行后单独再导入")
        elif args.action == "list":
            pending = open_requests(course, _sections(args) if args.sections else None)
            for o in pending:
                r = o.request
                print(
                    f"{r.id:5s} {r.section} {r.student} {r.notebook}/{r.cell} 现为 {o.score:g}/{o.max_score:g}：{r.reason}"
                )
            print(f"待复核 {len(pending)} 条")
        else:
            if (args.score is None) == (not args.keep):
                raise ValueError("decide needs exactly one of --score X and --keep")
            d = decide(course, args.id, None if args.keep else args.score, args.reason)
            kept = "维持原分" if d.score is None else f"{d.old_score:g} -> {d.score:g}"
            print(f"{d.id}：{kept}（{d.reason}）；学生下次的反馈（make feedback）里会看到")
    except ValueError as exc:
        raise SystemExit(f"regrade: {exc}") from None


@command(
    "autograde",
    "autograde the class in parallel, resumably (progress bar, summary)",
    SECTIONS_ARG,
    arg("--student", action="append", help="only this student (repeatable)"),
    arg("--force", action="store_true", help="regrade submissions already graded"),
    arg("--workers", type=int, default=1, help="submissions graded in parallel (default 1)"),
    arg(
        "--scheduler",
        help="grade on Dask: 'local' (a cluster of --workers processes here), a scheduler address "
        "(tcp://host:8786) or a scheduler file (*.json); the course folder must be shared by all workers",
    ),
)
def cmd_autograde(args):
    from autograder.ops.classrun import grade_class, summary_lines

    course = _course("autograde")
    _apply_term(course)  # nbgrader reads due dates and extensions from the gradebook
    results = grade_class(
        course,
        _sections(args),
        workers=args.workers,
        students=args.student,
        force=args.force,
        scheduler=args.scheduler,
    )
    if not results:
        print("nothing to grade: assignments/submitted/<student>/<section>/ is empty")
        return
    for line in summary_lines(course, results):
        print(line)


@command("feedback", "run nbgrader generate_feedback", SECTIONS_ARG)
def cmd_feedback(args):
    course = _course("feedback")
    for section in _sections(args):
        nbgrader(["generate_feedback", section, "--force"], course)
        print(f"feedback for {section} -> assignments/feedback/")


EXPORT_DEFAULT_TO = {"csv": "grades.csv", "canvas": "grades-canvas.csv", "moodle": "grades-moodle.csv"}


@command(
    "export",
    "export all grades: nbgrader's CSV, or Canvas's or Moodle's grade-import CSV",
    arg("sections", nargs="*", help="canvas/moodle only: these sections (default every assignment graded)"),
    arg(
        "--format",
        choices=sorted(EXPORT_DEFAULT_TO),
        default="csv",
        help="csv: nbgrader export (default); canvas, moodle: the LMS's grade-import CSV",
    ),
    arg("--to", help="CSV file to write (default grades.csv, grades-canvas.csv or grades-moodle.csv)"),
)
def cmd_export(args):
    to = args.to or EXPORT_DEFAULT_TO[args.format]
    target = Path(to).resolve()
    if target.is_dir() or not target.parent.is_dir():
        raise SystemExit(f"export: --to {to} must name a file in an existing folder")
    sections = _sections(args) if args.sections else None  # checked before anything is written
    course = _course("export")
    _apply_term(course)  # penalties from the scores as they are now, manual grades included
    if args.format == "csv":
        if args.sections:
            raise SystemExit(
                "--format csv is `nbgrader export`: it writes every assignment (choose sections with canvas or moodle)"
            )
        nbgrader(["export", "--to", str(Path(to).resolve())], course)
        print(f"grades -> {to}")
        return
    from autograder.ops.lms_grades import export_lines, write_canvas_csv, write_moodle_csv

    write = write_canvas_csv if args.format == "canvas" else write_moodle_csv
    for line in export_lines(write(course, Path(to), sections), args.format):
        print(line)


@command(
    "similarity",
    "students' code per exercise for MOSS, JPlag and Dolos (plagiarism checks)",
    SECTIONS_ARG,
    arg(
        "--out",
        default=str(COURSE / "similarity"),
        help="folder to write <exercise>/ into (default assignments/similarity)",
    ),
)
def cmd_similarity(args):
    from autograder.ops.similarity import similarity_export, similarity_lines

    for line in similarity_lines(similarity_export(_course("similarity"), _sections(args), Path(args.out))):
        print(line)


@command(
    "collect",
    "collect from the exchange (--exchange) or an LMS download (--zip) into submitted/",
    arg("section", help="the assignment (section) the download belongs to"),
    arg(
        "--exchange",
        action="store_true",
        help="collect from nbgrader's exchange (nbgrader collect --update), owner and times checked",
    ),
    arg("--zip", help="the zip downloaded from the LMS (copied into downloaded/<section>/archive/)"),
    arg("--force", action="store_true", help="replace submissions already in submitted/"),
)
def cmd_collect(args):
    section = _sections(argparse.Namespace(sections=[args.section]))[0]
    course = _course("collect")
    if args.exchange:
        if args.zip or args.force:
            raise SystemExit(
                "collect: --exchange takes neither --zip nor --force (newer submissions replace older ones)"
            )
        from autograder.ops.exchange_collect import collect_lines

        try:
            lines = collect_lines(course.folder, section)
        except RuntimeError as exc:  # nbgrader's own complaint (no exchange, no such course): its last line
            raise SystemExit(f"collect: {str(exc).strip().splitlines()[-1]}") from None
        for line in lines:
            print(line)
        return
    from autograder.ops.collect import collect, report_lines

    for line in report_lines(collect(course, section, Path(args.zip) if args.zip else None, force=args.force)):
        print(line)


@command(
    "report",
    "write scores.csv and overview.png, and check the feedback HTML for leaks",
    SECTIONS_ARG,
    arg("--out", default=str(COURSE / "reports"), help="folder for the reports (default assignments/reports)"),
)
def cmd_report(args):
    from autograder.ops.reports import make_reports

    written, problems = make_reports(_course("report"), _sections(args), Path(args.out))
    if len(written) == 1:
        print("成绩库中还没有这些作业的学生成绩：先收集、评分（make grade）")
    for path in written:
        print(f"wrote {path}")
    for problem in problems:
        print(f"反馈问题 {problem}", file=sys.stderr)
    print(f"反馈检查：{'发现 %d 个问题（见上）' % len(problems) if problems else '没有发现问题'}")
    if problems:
        raise SystemExit(1)


@command(
    "stats",
    "what the class got wrong: per check, mean score, passed, each mistake's count (stats.csv, stats.png)",
    SECTIONS_ARG,
    arg(
        "--out",
        default=str(COURSE / "reports"),
        help="folder for stats.csv and stats.png (default assignments/reports)",
    ),
)
def cmd_stats(args):
    from autograder.ops.stats import class_stats, table_lines, write_csv
    from autograder.ops.stats_figure import stats_figure

    try:
        stats = class_stats(COURSE, _sections(args))
    except ValueError as exc:  # a damaged line of a diagnoses journal: say which file and line
        raise SystemExit(f"stats: {exc}") from None
    if not stats:
        print("还没有评分记录：先评分（make grade），评分时会记下每个评分单元的诊断")
        return
    for line in table_lines(stats):
        print(line)
    out = Path(args.out)
    for path in (write_csv(stats, out / "stats.csv"), stats_figure(stats, out / "stats.png")):
        print(f"wrote {path}")


@command("selftest", "grade reference, blank, wrong-answer and shortcut pseudo-students through nbgrader", SECTIONS_ARG)
def cmd_selftest(args):
    from autograder.ops.selftest import contract_problems, run_section, scratch_course

    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for section in _sections(args):
            course = scratch_course(Path(tmp) / section, COURSE)
            report = run_section(section, course)
            for student, notebooks in sorted(report.scores.items()):
                for nb, v in sorted(notebooks.items()):
                    score, total = v["auto"]
                    print(f"{section:8s} {nb:14s} {student:28s} {score:5.1f}/{total:.1f}")
            problems += contract_problems(report, course)
    for problem in problems:
        print(problem)
    if problems:
        raise SystemExit("self-test failed: see the table and the problems above")
    print("self-test passed")


@command(
    "student-edition",
    "write the student edition (allowlist) and scan it for leaks",
    arg("--out", default=str(COURSE.parent / "_build" / "student-edition"), help="folder to write"),
    arg("--repository-url", help="the edition's public address (default: repository.url of _config.yml)"),
    arg("--branch", help="the term's branch or tag (default: repository.branch of _config.yml)"),
    arg(
        "--book-build",
        default=str(COURSE.parent / "_build"),
        help="the built book (make book), whose numbers the twins show",
    ),
)
def cmd_student_edition(args):
    from autograder.ops.student_edition import build_edition

    book_build = Path(args.book_build)
    if not (book_build / "jupyter_execute").is_dir():
        print(
            f"warning: no built book in {book_build} (make book): the page twins name each computed number instead "
            "of showing it",
            file=sys.stderr,
        )
    edition = build_edition(
        Path(args.out), repository_url=args.repository_url, branch=args.branch, book_build=book_build
    )
    size = sum(path.stat().st_size for path in edition.files)
    print(f"wrote {len(edition.files)} files ({size / 1e6:.1f} MB) into {edition.folder}")
    if not edition.repository_url:
        print(
            "WARNING: no repository address (--repository-url, or repository.url in _config.yml): the notebooks have "
            "no Colab cell, so in Colab no exercise can import course_check and no page its helpers; the README "
            "keeps the placeholders <组织>/<仓库> and <分支>. Build the edition you publish with its address.",
            file=sys.stderr,
        )
    for problem in edition.problems:
        print(f"LEAK {problem}", file=sys.stderr)
    if edition.problems:
        raise SystemExit(f"student edition NOT safe to publish: {len(edition.problems)} problem(s) above")
    print("leak scan: nothing instructor-only found")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_, arguments, actions) in COMMANDS.items():
        p = sub.add_parser(name, help=help_)
        p.set_defaults(fn=fn)
        for flags, options in arguments:
            p.add_argument(*flags, **options)
        if actions:
            chosen = p.add_subparsers(dest="action", required=True)
            for action, (action_help, action_arguments) in actions.items():
                a = chosen.add_parser(action, help=action_help)
                for flags, options in action_arguments:
                    a.add_argument(*flags, **options)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
