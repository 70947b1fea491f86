"""Collecting submissions from an LMS download (Moodle, Canvas, ...) with ``nbgrader zip_collect``.

The instructor downloads all submissions of one assignment as a zip. ``collect`` copies it into
nbgrader's ``downloaded/<section>/archive/``, runs ``nbgrader zip_collect`` (which unpacks it, nested
zips included, into ``downloaded/<section>/extracted/`` and copies every notebook to
``submitted/<student>/<section>/``), then checks that every file of the download arrived or is
reported with a reason: nothing is dropped silently. Students put files into that zip, so it is
unpacked by :mod:`autograder.ops.archives` (for ``collect`` and for nbgrader alike), which rejects
zip bombs, paths out of the folder, links, encrypted, corrupt or too deeply nested archives, each
reported with its reason; the rest of the class is collected.

Which student a file belongs to comes from its path, by :data:`NAMED_REGEXP` (nbgrader's
``FileNameCollectorPlugin.named_regexp``, set by :func:`autograder.course.configure`). The rule: the
student id is the first group of 5 or more digits that stands alone between underscores in a
folder or file name below ``extracted/``; the notebook name is the file name, after the id and any
further numbers (Canvas submission ids) or Moodle's ``assignsubmission_file_``. This covers

* Moodle, "download submissions in folders": ``张三_2021001_assignsubmission_file_/s04_1_ex1.ipynb``
* Moodle, flat: ``张三_2021001_assignsubmission_file_s04_1_ex1.ipynb``
* Canvas: ``zhangsan_2021001_889911_s04_1_ex1.ipynb`` (also ``zhangsan_LATE_...``, ``s04_1_ex1-1.ipynb``)
* one zip per student inside the download: ``zhangsan_2021001.zip`` holding ``s04_1_ex1.ipynb``

This module is imported by the nbgrader config: it must stay light (standard library and
:mod:`autograder.ops.submission_files` only at the top; :mod:`autograder.ops.archives` needs nbgrader's plugins).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.ops.submission_files import ARCHIVE_EXT

NAMED_REGEXP = (
    r"^.*/extracted/"  # nbgrader's extraction folder downloaded/<section>/extracted/
    r"(?:[^/]*/)*?"  # folders before the one that names the student (the download's own name)
    r"(?:[^/]*?_)?"  # the student's name (or LATE, ...) up to an underscore
    r"(?P<student_id>\d{5,})"  # the student id: 5 or more digits, alone between underscores
    r"(?:(?:_[^/]*)?/(?:[^/]*/)*"  # either the id names a folder and the notebook lies inside it
    r"|_(?:\d+_|assignsubmission_file_)*)"  # or it is part of the file name: skip submission ids, Moodle's tag
    r"(?P<file_id>[^/]+?)"  # the notebook name ...
    r"(?:-\d+| ?\(\d+\))?"  # ... without the copy number an LMS or browser adds: -1, (1)
    r"\.ipynb$"
)
_ID_TOKEN = re.compile(r"(?:^|_)\d{5,}(?:_|$)")


@dataclass
class CollectReport:
    section: str
    collected: dict = field(default_factory=dict)  # student -> sorted notebook names now in submitted/
    unmatched: list = field(default_factory=list)  # (path inside the download, reason in Chinese)
    rejected: list = field(default_factory=list)  # autograder.ops.archives.Rejected: not unpacked at all
    notes: list = field(default_factory=list)  # other things the instructor should know, in Chinese


def match(relative_path: str) -> dict | None:
    """What nbgrader's collector makes of a file at ``relative_path`` below ``extracted/``."""
    m = re.match(NAMED_REGEXP, "/extracted/" + relative_path.replace(os.sep, "/"))
    if not m:
        return None
    # zip_collect keeps the file's extension and drops any extension left in file_id
    return {"student_id": m["student_id"], "notebook": os.path.splitext(m["file_id"])[0] + ".ipynb"}


#: the extractor ``nbgrader zip_collect`` must use (also set by autograder.course.configure)
EXTRACTOR = "autograder.ops.archives.SafeExtractor"


def _extract(archive: Path, into: Path) -> list:
    """Unpack ``archive`` exactly as ``nbgrader zip_collect`` does with :data:`EXTRACTOR`; the rejections."""
    from autograder.ops.archives import extract

    return extract(archive, into)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plan(extracted: Path, released: set) -> tuple[dict, list]:
    """``({(student, notebook): file}, [(file, reason)])`` for the files below ``extracted``."""
    planned, unmatched = {}, []
    for path in sorted(p for p in extracted.rglob("*") if p.is_file()):
        rel = path.relative_to(extracted).as_posix()
        if path.suffix in ARCHIVE_EXT:
            continue  # unpacked next to itself; its contents are listed on their own
        if path.suffix != ".ipynb":
            unmatched.append((rel, "不是 notebook（.ipynb）文件，未收取"))
            continue
        info = match(rel)
        if info is None:
            unmatched.append(
                (rel, "文件名和所在文件夹名中找不到学号（5 位以上、前后用下划线隔开的数字），无法判断属于哪位学生")
            )
        elif info["notebook"] not in released:
            unmatched.append(
                (
                    rel,
                    f"学号 {info['student_id']}：笔记本名 {info['notebook']} 不属于本次作业"
                    f"（应为 {', '.join(sorted(released))} 之一），未收取",
                )
            )
        elif (info["student_id"], info["notebook"]) in planned:
            first = planned[(info["student_id"], info["notebook"])].relative_to(extracted).as_posix()
            unmatched.append(
                (
                    rel,
                    f"学号 {info['student_id']} 的 {info['notebook']} 重复出现（另一份是 {first}），"
                    "无法判断哪份是最终提交",
                )
            )
        else:
            planned[(info["student_id"], info["notebook"])] = path
    return planned, unmatched


def collect(course, section: str, zip_path: Path | None = None, force: bool = False) -> CollectReport:
    """Put ``zip_path`` (if given) into ``downloaded/<section>/archive/`` and run ``nbgrader zip_collect``.

    ``course``: an :class:`autograder.course.course.Course`, or its folder."""
    from autograder.course.course import Course  # imported here: the nbgrader config imports this module
    from autograder.ops.nbgrader_run import nbgrader

    course = Course.of(course)
    release = course.release(section)
    released = {p.relative_to(release).as_posix() for p in release.rglob("*.ipynb")} if release.is_dir() else set()
    if not released:
        raise SystemExit(
            f"{section} 还没有学生版（{release} 中没有 notebook）：请先运行 python -m autograder release {section}"
        )
    report = CollectReport(section)
    download = course.folder / "downloaded" / section  # ZipCollectApp's default layout
    archive = download / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    if zip_path is not None:
        zip_path = Path(zip_path)
        if not zip_path.is_file():
            raise SystemExit(f"找不到压缩包 {zip_path}")
        name = zip_path.name
        if _ID_TOKEN.search(Path(name).stem):  # the regexp would take a number in the download's name for a student id
            name = name.replace("_", "-")
            report.notes.append(f"压缩包名 {zip_path.name} 中含有像学号的数字，复制为 {name}，以免被当作学号")
        target = archive / name
        if target.exists() and _digest(target) != _digest(zip_path) and not force:
            raise SystemExit(f"{target} 已存在且内容不同：确认要替换时加 --force")
        shutil.copyfile(zip_path, target)
    if not any(p.is_file() for p in archive.rglob("*")):
        raise SystemExit(f"{archive} 是空的：用 --zip 指定从教学平台下载的压缩包，或把它放进这个文件夹")

    with tempfile.TemporaryDirectory() as tmp:  # see what zip_collect will find, before it copies anything
        report.rejected = _extract(archive, Path(tmp))
        planned, report.unmatched = plan(Path(tmp), released)
        duplicates = [u for u in report.unmatched if "重复出现" in u[1]]
        if duplicates:
            raise SystemExit(
                "同一学生的同一笔记本出现了多份，nbgrader 无法决定用哪一份：\n"
                + "\n".join(f"  {f}: {why}" for f, why in duplicates)
                + f"\n请删掉多余的文件后重新打包，放进 {archive}"
            )
        students = sorted({s for s, _ in planned})
        existing = [s for s in students if course.submitted(s, section).exists()]
        if existing and not force:
            raise SystemExit(
                f"这些学生的 {section} 已有提交，收取会覆盖它们：{', '.join(existing)}\n"
                "确认用这次下载的文件替换时加 --force"
            )
        expected = {key: _digest(path) for key, path in planned.items()}

    shutil.rmtree(download / "extracted", ignore_errors=True)  # derived from archive/: always rebuilt
    nbgrader(
        [
            "zip_collect",
            section,
            "--strict",
            f"--ZipCollectApp.extractor_plugin={EXTRACTOR}",
            *(["--force"] if force else []),
        ],
        course,
    )

    for (student, notebook), digest in sorted(expected.items()):
        target = course.submitted(student, section) / notebook
        if target.is_file() and _digest(target) == digest:
            report.collected.setdefault(student, []).append(notebook)
        else:
            report.unmatched.append(
                (f"{student}/{notebook}", f"应放到 {target.relative_to(course.folder)}，但 nbgrader 没有放过去")
            )
    return report


def report_lines(report: CollectReport) -> list[str]:
    """The outcome of :func:`collect` for the instructor, in Chinese."""
    lines = list(report.notes)
    for student, notebooks in sorted(report.collected.items()):
        lines.append(f"{report.section} 学号 {student}: 收到 {', '.join(sorted(notebooks))}")
    for path, why in report.unmatched:
        lines.append(f"未收取 {path}: {why}")
    lines.extend(item.line() for item in report.rejected)
    n_files = sum(len(v) for v in report.collected.values())
    lines.append(
        f"共收取 {len(report.collected)} 位学生的 {n_files} 个笔记本；"
        f"{len(report.unmatched)} 个文件未能归到学生名下" + ("（见上，请逐一处理）。" if report.unmatched else "。")
    )
    if report.rejected:
        lines.append(
            f"另有 {len(report.rejected)} 个文件或压缩包不安全或已损坏，没有解压（见上“拒收”各行）：请联系相关学生重新提交。"
        )
    return lines
