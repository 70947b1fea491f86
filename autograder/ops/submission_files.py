"""What a student handed in, checked before nbgrader reads it: any bytes, names, sizes, file types.

The class run (:mod:`autograder.ops.classrun`) fingerprints every submission and hands it to
``nbgrader autograde``; a submission may be anything a student can make: a FIFO that blocks a reader
forever, a symlink to another student's work or to the reference data (nbgrader would copy its
target into the autograded folder, where the student's kernel reads it), a folder named like a
notebook, a notebook of 2 GB, JSON nested a million deep, bytes that are not UTF-8, names with control
characters or glob patterns (nbgrader's ``--student`` is a glob). Here nothing is followed, opened if
it is not a regular file, or read past a limit, and every problem is one Chinese sentence that fails
that submission alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

MAX_NOTEBOOK_BYTES = 20 * 2**20  # one notebook (a notebook with figures in its outputs is a few MB)
MAX_SUBMISSION_BYTES = 50 * 2**20  # all files of one submission
MAX_SUBMISSION_FILES = 200  # files and folders of one submission
MAX_FOLDER_DEPTH = 8  # folders inside a submission
MAX_JSON_DEPTH = 64  # nesting of a notebook's JSON (a real one stays under 20)
#: files unpacked as archives (nbgrader's ExtractorPlugin.zip_ext default): here, below both of the modules
#: that need it (autograder.ops.collect, autograder.ops.archives), so neither imports the other for it
ARCHIVE_EXT = (".zip", ".gz")

_BAD_NAME = re.compile(r"[\x00-\x1f\x7f*?\[\]\\]")  # control characters, and nbgrader's glob characters


def shown(name: str) -> str:
    """``name`` printable in a report, whatever bytes it was made of (an undecodable byte shows as ``\\xff``)."""
    try:
        raw = os.fsencode(name)  # the file name's own bytes
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def name_problem(name: str) -> bool:
    """True for a file or folder name that is not clean UTF-8 or holds control or glob characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, kept by Python as lone surrogates
        return True
    return bool(_BAD_NAME.search(name)) or len(name) > 200


def _walk(folder: Path):
    """``(relative path, lstat)`` of everything below ``folder``, without following any link.

    Stops (raising ValueError with the Chinese reason) at the first entry beyond the limits.
    """
    stack, count = [(Path(folder), Path(), 0)], 0
    while stack:
        path, rel, depth = stack.pop()
        with os.scandir(path) as entries:
            for entry in sorted(entries, key=lambda e: e.name, reverse=True):
                count += 1
                if count > MAX_SUBMISSION_FILES:
                    raise ValueError(f"提交中的文件超过 {MAX_SUBMISSION_FILES} 个，不予评分。")
                info = entry.stat(follow_symlinks=False)
                yield rel / entry.name, info
                if stat.S_ISDIR(info.st_mode):
                    if depth + 1 >= MAX_FOLDER_DEPTH:
                        raise ValueError(f"提交中的文件夹嵌套超过 {MAX_FOLDER_DEPTH} 层，不予评分。")
                    stack.append((Path(entry.path), rel / entry.name, depth + 1))


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``; OSError for a link, a FIFO, a device or more than ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(f"not a regular file of at most {limit} bytes: {path}")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise OSError(f"grew beyond {limit} bytes while read: {path}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def fingerprint(folder: Path) -> str:
    """SHA-256 over the relative paths and bytes of every regular file of a submission.

    Never follows a link or opens anything else (a link counts by its target's name, any other
    special file by its type), and reads no more than the submission limits; what lies beyond them
    counts by its size and time, so the digest still changes when the submission does.
    """
    digest, budget = hashlib.sha256(), MAX_SUBMISSION_BYTES
    folder = Path(folder)
    try:
        entries = sorted(_walk(folder), key=lambda e: e[0].parts)
    except ValueError:  # beyond the limits: the submission fails its precheck; names and sizes suffice
        entries = sorted(((p.relative_to(folder), p.lstat()) for p in _bounded(folder)), key=lambda e: e[0].parts)
    for rel, info in entries:
        name = str(rel).encode("utf-8", "surrogateescape")
        if stat.S_ISREG(info.st_mode) and info.st_size <= budget:
            try:
                data = read_regular(folder / rel, budget)
                budget -= len(data)
            except OSError:
                data = b"\0unreadable"
            digest.update(name + b"\0" + data + b"\0")
        elif stat.S_ISLNK(info.st_mode):
            digest.update(name + b"\0link\0" + os.fsencode(os.readlink(folder / rel)) + b"\0")
        elif not stat.S_ISDIR(info.st_mode):
            digest.update(name + f"\0other {stat.S_IFMT(info.st_mode)} {info.st_size} {info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _bounded(folder: Path, limit: int = 10 * MAX_SUBMISSION_FILES):
    """At most ``limit`` paths below ``folder``, breadth first, not following links."""
    queue, out = [folder], []
    while queue and len(out) < limit:
        with os.scandir(queue.pop(0)) as entries:
            for entry in entries:
                out.append(Path(entry.path))
                if entry.is_dir(follow_symlinks=False) and len(queue) < limit:
                    queue.append(Path(entry.path))
    return out[:limit]


def _json_depth(obj) -> int:
    depth, stack = 0, [(obj, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            depth = max(depth, level)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((v, level + 1) for v in (node.values() if isinstance(node, dict) else node))
    return depth


def _is_text(value) -> bool:
    return isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value)


def _cell_problem(cell) -> str:
    """Why nbformat or nbgrader could not read this cell; empty when they can."""
    if not isinstance(cell, dict) or not isinstance(cell.get("metadata", {}), dict):
        return "单元或其元数据不是 JSON 对象"
    if not isinstance(cell.get("cell_type", ""), str) or not _is_text(cell.get("source", "")):
        return "单元的类型或源代码格式不对"
    if not isinstance(cell["metadata"].get("nbgrader", {}), dict):
        return "单元的 nbgrader 元数据不是 JSON 对象"
    outputs = cell.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
        return "单元的输出不是 JSON 对象的列表"
    attachments = cell.get("attachments", {})
    if not isinstance(attachments, dict) or not all(isinstance(a, dict) for a in attachments.values()):
        return "单元的附件格式不对"
    return ""


def notebook_problem(name: str, data: bytes) -> str:
    """Why the notebook ``name`` with bytes ``data`` cannot be graded; empty when it can."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{name} 不是 UTF-8 编码的文本，无法作为 notebook 读取（文件损坏，或不是 notebook）。"
    try:
        nb = json.loads(text)
    except RecursionError:
        return f"{name} 的 JSON 嵌套过深（正常的 notebook 不到 20 层），无法安全评分。"
    except ValueError:
        return f"{name} 不是合法的 notebook JSON（文件损坏、被截断或被手工编辑过），无法评分。"
    if _json_depth(nb) > MAX_JSON_DEPTH:
        return f"{name} 的 JSON 嵌套超过 {MAX_JSON_DEPTH} 层（正常的 notebook 不到 20 层），无法安全评分。"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return f"{name} 不是合法的 notebook JSON（文件损坏、被截断或被手工编辑过），无法评分。"
    seen = set()
    for cell in nb["cells"]:
        problem = _cell_problem(cell)
        if problem:
            return f"{name} 的单元结构已损坏（{problem}），无法评分。"
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if not isinstance(grade_id, (str, type(None))):
            return f"{name} 的单元结构已损坏（评分编号不是字符串），无法评分。"
        if grade_id in seen:
            return (
                f"{name} 中有两个单元带同一个评分编号 {grade_id!r}（多半是复制了作业单元）："
                "请学生删除复制出来的单元后重新提交，或由教师删除后重新评分。"
            )
        if grade_id:
            seen.add(grade_id)
    return ""


def precheck(folder: Path) -> str:
    """Problems of a submission folder that nbgrader would choke on (or be fooled by); empty when none."""
    folder = Path(folder)
    try:
        info = folder.lstat()
    except OSError:
        return "找不到提交文件夹，无法评分。"
    if stat.S_ISLNK(info.st_mode):
        return "提交文件夹是符号链接（可能指向别人的作业），不予评分。"
    if not stat.S_ISDIR(info.st_mode):
        return "提交不是文件夹，无法评分。"
    total, notebooks = 0, []
    try:
        for rel, info in _walk(folder):
            where = shown(str(rel))
            if name_problem(rel.name):
                return f"提交中有文件名含控制字符、通配符或不是合法 UTF-8 的文件（{where}）：请学生改名后重新提交。"
            if stat.S_ISLNK(info.st_mode):
                return f"提交中的 {where} 是符号链接（可能指向别人的作业或评分数据），不予评分：请学生提交文件本身。"
            if rel.suffix == ".ipynb" and not stat.S_ISREG(info.st_mode):
                return f"提交中的 {where} 不是普通文件（是文件夹、管道或设备），无法作为 notebook 评分。"
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                return f"提交中的 {where} 不是普通文件（管道、设备或套接字），不予评分。"
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
            if total > MAX_SUBMISSION_BYTES:
                return f"提交的文件总共超过 {MAX_SUBMISSION_BYTES // 2**20} MiB 的上限，不予评分。"
            if rel.suffix == ".ipynb" and len(rel.parts) == 1:  # the notebooks nbgrader grades
                if info.st_size > MAX_NOTEBOOK_BYTES:
                    return (
                        f"{where} 有 {info.st_size / 2**20:.0f} MiB，超过单个 notebook {MAX_NOTEBOOK_BYTES // 2**20} MiB "
                        "的上限，不予评分（多半是输出里存了大量数据：请学生清除输出后重新提交）。"
                    )
                notebooks.append(rel)
    except ValueError as exc:
        return str(exc)
    except OSError:
        return "提交文件夹无法读取（权限或文件系统错误），无法评分。"
    for rel in sorted(notebooks):
        try:
            data = read_regular(folder / rel, MAX_NOTEBOOK_BYTES)
        except OSError:
            return f"{shown(str(rel))} 在检查时变成了别的文件或无法读取，不予评分。"
        problem = notebook_problem(rel.name, data)
        if problem:
            return problem
    return ""


def submission_problem(course, section: str, student: str) -> str:
    """:func:`precheck` of ``submitted/<student>/<section>``, after the student's own folder and name.

    ``course``: an :class:`autograder.course.course.Course`, or its folder."""
    from autograder.course.course import Course  # imported here: the nbgrader config imports this module (collect.py)

    if name_problem(student) or student.startswith("."):
        return (
            f"学生文件夹名 {shown(student)!r} 含有控制字符、通配符（* ? [ ]）或不是合法的 UTF-8，"
            "nbgrader 无法按它评分：请改名后重新收取。"
        )
    course = Course.of(course)
    *outer, submission = course.named_folders(course.directory.submitted_directory, student, section)
    try:
        if not all(stat.S_ISDIR(folder.lstat().st_mode) for folder in outer):
            return "学生文件夹是符号链接或不是文件夹（可能指向别人的作业），不予评分。"
    except OSError:
        return "找不到学生文件夹，无法评分。"
    return precheck(submission)
