"""Students' code for plagiarism checkers: :func:`similarity_export` writes the code cells of every exercise
per student, laid out for MOSS, JPlag and Dolos, with the release's stub code as the base code to discount.

Submissions are student-controlled files: a link, a folder or device in place of a notebook, an oversized or
corrupt notebook, or a student folder name that cannot be a folder name is reported and skipped, never
followed. The student id in Dolos' ``info.csv`` is written through :mod:`autograder.ops.safe_csv`.

Where the layouts come from (the tools' source code, read for this module):

* MOSS, the ``moss.pl`` submission script: ``-l python``, ``-b`` base file, ``-d`` (files in one
  directory are one submission).
* JPlag, ``core/src/main/java/de/jplag/SubmissionSetBuilder.java`` (jplag/JPlag, a 4.3-or-later source):
  every entry of the root folder is a submission, files with other suffixes (``info.csv``) are
  ignored, and a base-code folder inside the root is removed from the submissions; CLI options
  ``-l python3`` and ``-bc``/``--base-code``.
* Dolos, ``docs/guide/adding-metadata.md`` and ``cli/src/cli/commands/run.ts`` (dodona-edu/dolos):
  ``info.csv`` needs a ``filename`` column (paths relative to the csv file); ``full_name`` and
  ``label`` are optional, as is the timestamp ``created_at``, left out here because the only time
  nbgrader keeps for a submission is the student's own ``timestamp.txt`` (or none); ``-i``/``--ignore``
  takes the template file.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course.course import Course
from autograder.ops.safe_csv import csv_text, neutral
from autograder.ops.submission_files import MAX_NOTEBOOK_BYTES, name_problem, notebook_problem, read_regular, shown

RESERVED = {"base", "info.csv"}  # names the layout itself uses inside <out>/<exercise>/
INFO_FIELDS = ["filename", "full_name", "label"]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAGIC = re.compile(r"^\s*[%!]")  # IPython magics and shell escapes: not Python, JPlag's parser would stop


@dataclass
class SimilarityReport:
    section: str
    exercise: str
    folder: Path | None = None  # <out>/<exercise>, None when nothing was written
    written: list = field(default_factory=list)  # student ids with a file
    skipped: list = field(default_factory=list)  # (student as printable text, reason in Chinese)
    problem: str = ""  # why the exercise was not exported at all


def read_notebook(path: Path, name: str) -> tuple[dict | None, str]:
    """A notebook's JSON, or ``(None, reason)``: never follows a link, opens anything but a regular file
    or reads past :data:`MAX_NOTEBOOK_BYTES` (:mod:`autograder.ops.submission_files`)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None, f"没有交这道题（提交中没有 {name}）。"
    except OSError:
        return None, f"{name} 无法读取（权限或文件系统错误）。"
    if stat.S_ISLNK(info.st_mode):
        return None, f"{name} 是符号链接（可能指向别人的作业或评分数据），不予导出：请学生提交文件本身。"
    if not stat.S_ISREG(info.st_mode):
        return None, f"{name} 不是普通文件（是文件夹、管道或设备），无法作为 notebook 读取。"
    if info.st_size > MAX_NOTEBOOK_BYTES:
        return None, f"{name} 超过单个 notebook {MAX_NOTEBOOK_BYTES // 2**20} MiB 的上限，不予导出。"
    try:
        data = read_regular(path, MAX_NOTEBOOK_BYTES)
    except OSError:
        return None, f"{name} 在读取时变成了别的文件或无法读取，不予导出。"
    problem = notebook_problem(name, data)
    if problem:
        return None, problem
    return json.loads(data.decode("utf-8")), ""


def given_cells(release_nb: dict) -> set:
    """grade_ids of the release's code cells that are not solution cells (setup, checks, tests): nbgrader
    puts their source back from the assignment when it grades, so they are nobody's own code."""
    out = set()
    for cell in release_nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade_id") and not meta.get("solution"):
            out.add(meta["grade_id"])
    return out


def code_text(nb: dict, given: set) -> str:
    """The code cells of ``nb`` but the given ones, each under a ``# %% <grade_id>`` line.

    That is the solution cells (``solution: true``) and the code cells a student added (no grade_id,
    headed ``# %% 新增单元``): copied code is often pasted into a new cell. The same function applied to
    the release gives the base code (the stubs). Magic and shell lines (``%...``, ``!...``) are
    commented out so that every tool parses the file as Python.
    """
    parts = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in given:
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        lines = ["# " + line if _MAGIC.match(line) else line for line in source.splitlines()]
        label = _CONTROL.sub(" ", grade_id)[:100] if grade_id else "新增单元"
        parts.append(f"# %% {label}\n" + "\n".join(lines).rstrip() + "\n")
    return "\n".join(parts)


def _student_problem(course: Course, section: str, student: str) -> str | None:
    """Why ``submitted/<student>/<section>`` cannot be exported: "" when it can, None when there is no
    such folder (this student did not hand the section in, or the entry is a stray file)."""
    *outer, own = course.named_folders(course.directory.submitted_directory, student, section)
    try:
        outer_info = [folder.lstat() for folder in outer]
        section_info = own.lstat()  # through a linked student folder: only looked at
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "学生文件夹无法读取（权限或文件系统错误）。"
    if name_problem(student) or student.startswith(".") or os.path.basename(student) != student:
        return (
            f"学生文件夹名 {shown(student)!r} 含有控制字符、通配符或不是合法的 UTF-8，"
            "不能用作导出文件夹名：请改名后重新收取。"
        )
    if not all(stat.S_ISDIR(info.st_mode) for info in outer_info):
        return "学生文件夹是符号链接或不是文件夹（可能指向别人的作业），不予导出。"
    if not stat.S_ISDIR(section_info.st_mode):
        return "作业文件夹是符号链接或不是文件夹（可能指向别人的作业），不予导出。"
    if student in RESERVED:
        return (
            f"学号 {student!r} 与导出布局中保留的名字（{'、'.join(sorted(RESERVED))}）相同，"
            "无法导出：请手工检查这份提交。"
        )
    return ""


def _is_ours(folder: Path) -> bool:
    """True for a folder this export wrote (its info.csv header) or an empty one."""
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return False
        if not any(folder.iterdir()):
            return True
        with open(folder / "info.csv", encoding="utf-8", newline="") as f:
            return next(csv.reader(f), None) == INFO_FIELDS
    except (OSError, UnicodeDecodeError, csv.Error):
        return False


def _export_exercise(course: Course, section: str, exercise: str, out: Path) -> SimilarityReport:
    report = SimilarityReport(section, exercise)
    release_nb, problem = read_notebook(course.release(section) / f"{exercise}.ipynb", f"{exercise}.ipynb")
    if release_nb is None:
        report.problem = f"学生版读不出来（{problem}）：先运行 make release。"
        return report
    given = given_cells(release_nb)
    files = {}  # student -> code
    for student in course.submitters(section):
        problem = _student_problem(course, section, student)
        if problem is None:
            continue  # no submission of this section
        if not problem:
            nb, problem = read_notebook(course.submitted(student, section) / f"{exercise}.ipynb", f"{exercise}.ipynb")
        if problem:
            report.skipped.append((shown(student), problem))
        else:
            files[student] = code_text(nb, given)
    folder = out / exercise
    if os.path.lexists(folder) and not _is_ours(folder):
        report.problem = f"{folder} 已经存在，且不是本命令导出的文件夹：不覆盖，请换一个 --out。"
        return report
    tmp = out / f".{exercise}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "base").mkdir(parents=True)
    (tmp / "base" / f"{exercise}.py").write_bytes(code_text(release_nb, given).encode("utf-8", "replace"))
    rows = [INFO_FIELDS]
    for student, code in sorted(files.items()):
        target = tmp / student
        if target.parent != tmp or os.path.normpath(target) != str(target):  # one plain path component only
            report.skipped.append((shown(student), "学号不能用作文件夹名，不予导出。"))
            continue
        target.mkdir()
        (target / f"{exercise}.py").write_bytes(code.encode("utf-8", "replace"))  # lone surrogates become ?
        rows.append([f"{student}/{exercise}.py", neutral(student), section])
        report.written.append(student)
    (tmp / "info.csv").write_bytes(csv_text(rows).encode("utf-8"))
    if os.path.lexists(folder):
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    report.folder = folder
    return report


def release_exercises(course: Course | Path, section: str) -> list[str]:
    """Exercise names of ``release/<section>/*.ipynb`` (the instructor's own files)."""
    folder = Course.of(course).release(section)
    return sorted(p.stem for p in folder.glob("*.ipynb")) if folder.is_dir() else []


def similarity_export(course: Course | Path, sections, out_dir: Path) -> list[SimilarityReport]:
    """Write ``<out>/<exercise>/<student>/<exercise>.py``, ``<out>/<exercise>/base/<exercise>.py`` and
    ``<out>/<exercise>/info.csv`` for every exercise of ``sections``; a folder an earlier run wrote is
    replaced, any other is left alone. Hostile submissions are reported and skipped, never followed."""
    course, out = Course.of(course), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    for section in sections:
        exercises = release_exercises(course, section)
        if not exercises:
            reports.append(
                SimilarityReport(section, "", problem=f"没有 release/{section}/ 中的学生版：先运行 make release。")
            )
        reports.extend(_export_exercise(course, section, exercise, out) for exercise in exercises)
    return reports


def next_commands(folder: Path, exercise: str) -> list[str]:
    """The MOSS, JPlag and Dolos command lines for one exported exercise folder."""
    q = shlex.quote
    d, base = Path(folder).resolve(), f"base/{exercise}.py"
    return [
        f"MOSS:  cd {q(str(d))} && moss.pl -l python -b {q(base)} -d */{q(exercise + '.py')}",
        f"JPlag: java -jar jplag.jar -l python3 -bc {q(str(d / 'base'))} {q(str(d))}",
        f"Dolos: dolos run -l python -i {q(str(d / base))} {q(str(d / 'info.csv'))}",
    ]


def similarity_lines(reports) -> list[str]:
    """The outcome of :func:`similarity_export` for the instructor, in Chinese, with the next commands."""
    lines = []
    for r in reports:
        if r.problem:
            lines.append(f"{' '.join(filter(None, (r.section, r.exercise)))}: 未导出：{r.problem}")
            continue
        lines.append(
            f"{r.section} {r.exercise}: 写入 {r.folder}：{len(r.written)} 位学生的代码和 base/{r.exercise}.py（学生版的代码）"
        )
        lines.extend(f"  跳过 {student}: {why}" for student, why in r.skipped)
        if len(r.written) < 2:
            lines.append("  少于两位学生，查重工具无从比较")
        lines.extend("  " + c for c in next_commands(r.folder, r.exercise))
    if any(r.folder for r in reports):
        lines.append(
            "说明：MOSS 的 */ 也会把 base/ 当作一份提交，它的代码全部是基础代码（-b），不会与任何人匹配；"
            "JPlag 自动把根目录中的 base/ 排除在提交之外，忽略 info.csv。"
        )
    return lines
