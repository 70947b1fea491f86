"""Unpacking an LMS download that students put files into: each member checked before it is written.

``nbgrader zip_collect`` unpacks with setuptools, which silently skips some path tricks, follows a
tar's links, unpacks archives inside archives without end and trusts every size. A student controls
the files (and zips) they upload, so :func:`extract` reads each archive itself and writes only plain
files with safe names, within size, ratio, count and nesting limits; everything else is *rejected*
with a reason in Chinese and never reaches ``extracted/``. The layout is nbgrader's own (an archive
unpacks into a folder named after it, ``.tar.gz`` without ``.tar``), so the collector and
:func:`autograder.ops.collect.plan` see the same paths. :class:`SafeExtractor` puts :func:`extract` in
place of nbgrader's extractor (set by ``autograder.course.configure``), so plain ``nbgrader zip_collect``
is safe too. Standard library only, but for the nbgrader base class of that plugin.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from nbgrader.plugins import ExtractorPlugin

from autograder.ops.submission_files import ARCHIVE_EXT, shown

MAX_MEMBER_BYTES = 64 * 2**20  # one unpacked file (a notebook with figures is a few MB)
MAX_TOTAL_BYTES = 2 * 2**30  # everything unpacked from one download (and the largest download read)
MAX_MEMBERS = 20_000  # files in one download, nested archives included
MAX_RATIO = 200  # unpacked / packed size of a member over 1 MiB: a zip bomb
MAX_NESTING = 3  # download zip > student's zip > one more
_RATIO_FROM = 2**20
_ZIP_ENTRY_MIN = 46  # bytes of the smallest central-directory entry


@dataclass
class Rejected:
    where: str  # the archive or file (as it lies in archive/, or would lie below extracted/)
    member: str  # the member inside ``where``; "" when all of ``where`` is rejected
    reason: str  # in Chinese

    def line(self) -> str:
        member = f" 中的 {shown(self.member)}" if self.member else ""
        return f"拒收 {shown(self.where)}{member}: {self.reason}"


class _Stop(Exception):
    """The rest of an archive is not unpacked; the argument says why, in Chinese."""


@dataclass
class _Budget:
    bytes_left: int = field(default_factory=lambda: MAX_TOTAL_BYTES)
    members_left: int = field(default_factory=lambda: MAX_MEMBERS)
    rejected: list = field(default_factory=list)


def archive_folder(name: str) -> str | None:
    """The folder nbgrader unpacks an archive called ``name`` into; None for a file that is no archive."""
    stem, ext = os.path.splitext(name)
    if ext not in ARCHIVE_EXT:
        return None
    inner, ext2 = os.path.splitext(stem)
    return inner if ext2 == ".tar" else stem


def bad_name(name: str) -> str:
    """Why a member name cannot be unpacked as it is; empty when it can."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "文件名不是合法的 UTF-8"
    if not name or any(ord(ch) < 32 or ch == "\x7f" for ch in name):
        return "文件名为空或含有控制字符"
    if name.startswith(("/", "\\")) or name[1:2] == ":":
        return "使用绝对路径（会写到解压目录之外）"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "路径中含有 ..（会写到解压目录之外）"
    if any(len(p.encode("utf-8")) > 255 for p in parts):
        return "文件名过长"
    return ""


def _zip_entry_bound(tail: bytes) -> int:
    """How many entries zipfile would parse, from the end record (zipfile reads the whole directory at once)."""
    at = tail.rfind(b"PK\x05\x06")  # the record zipfile itself uses: the last one
    if at < 0 or at + 22 > len(tail):
        raise zipfile.BadZipFile("no end of central directory record")
    count, size = struct.unpack("<HI", tail[at + 10 : at + 16])
    if count == 0xFFFF or size == 0xFFFFFFFF:  # ZIP64: as many as it likes
        return 2**32
    return max(count, size // _ZIP_ENTRY_MIN)


def _members(source, name: str):
    """``(member, kind, packed, size, read)`` for each member; kind is 'file', 'dir' or why it is rejected."""
    total = len(source) if isinstance(source, bytes) else os.path.getsize(source)
    if name.endswith(".zip"):
        if isinstance(source, bytes):
            tail = source[-65_557:]
        else:
            with open(source, "rb") as f:
                f.seek(max(0, total - 65_557))
                tail = f.read()
        if _zip_entry_bound(tail) > MAX_MEMBERS:
            raise _Stop(f"目录中有超过 {MAX_MEMBERS} 个文件，整个压缩包未解压")
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as zf:
            for info in zf.infolist():
                kind_bits = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
                if info.flag_bits & 0x1:
                    kind = "加密的文件（需要密码），无法检查"
                elif kind_bits == stat.S_IFLNK:
                    kind = "符号链接（可能指向别人的作业或评分数据）"
                elif kind_bits not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: a writer that stores permissions only
                    kind = "不是普通文件（设备、管道等）"
                else:
                    kind = "dir" if info.is_dir() else "file"
                yield info.filename, kind, info.compress_size, info.file_size, (lambda i=info: zf.read(i))
        return
    opened = (
        tarfile.open(fileobj=io.BytesIO(source), mode="r:*")
        if isinstance(source, bytes)
        else tarfile.open(source, "r:*")
    )
    with opened as tf:
        for member in tf:  # one compressed stream: reading a header means inflating all before it
            if member.offset_data + member.size > MAX_TOTAL_BYTES:
                raise _Stop("解压后超过总大小上限（疑似压缩炸弹），其余文件未解压")
            if member.issym() or member.islnk():
                kind = "符号链接或硬链接（可能指向别人的作业或评分数据）"
            elif member.isdir():
                kind = "dir"
            elif member.isreg():
                kind = "file"
            else:
                kind = "不是普通文件（设备、管道等）"
            yield member.name, kind, total, member.size, (lambda m=member: tf.extractfile(m).read())


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _member_problem(size: int, packed: int, budget: _Budget) -> str:
    if size > MAX_MEMBER_BYTES:
        return f"解压后 {size / 2**20:.0f} MiB，超过单个文件 {MAX_MEMBER_BYTES // 2**20} MiB 的上限"
    if size > _RATIO_FROM and size > MAX_RATIO * max(packed, 1):
        return f"压缩比 {size / max(packed, 1):.0f}:1，超过 {MAX_RATIO}:1（疑似压缩炸弹）"
    if size > budget.bytes_left or budget.members_left <= 0:
        raise _Stop("整个下载解压后的总大小或文件数超过上限，其余文件未解压")
    return ""


def _unpack(source, name: str, where: str, into: Path, depth: int, budget: _Budget) -> None:
    """Unpack the archive ``source`` (bytes or a path; called ``name``, at ``where``) into ``into``."""

    def reject(member, reason):
        budget.rejected.append(Rejected(where, member, reason))

    try:
        for member, kind, packed, size, read in _members(source, name):
            problem = bad_name(member) or ("" if kind in ("file", "dir") else kind)
            parts = [p for p in member.replace("\\", "/").split("/") if p not in ("", ".")]
            if problem or kind == "dir" or not parts:
                if problem:
                    reject(member, problem)
                continue
            problem = _member_problem(size, packed, budget)
            if problem:
                reject(member, problem)
                continue
            try:
                content = read()
            except Exception as exc:  # CRC mismatch, truncated data, unsupported compression, ...
                reject(member, f"压缩数据损坏或无法读取（{type(exc).__name__}）")
                continue
            budget.bytes_left -= len(content)
            budget.members_left -= 1
            folder = archive_folder(parts[-1])
            try:
                if folder is None:
                    _write(into.joinpath(*parts), content)
                elif depth + 1 >= MAX_NESTING:
                    reject(member, f"压缩包嵌套超过 {MAX_NESTING} 层，未解压")
                else:  # nbgrader's layout: an archive's content goes into a folder named after it, beside it
                    inner = PurePosixPath(where).parent / (archive_folder(PurePosixPath(where).name) or "")
                    _unpack(
                        content,
                        parts[-1],
                        inner.joinpath(*parts).as_posix(),
                        into.joinpath(*parts[:-1], folder),
                        depth + 1,
                        budget,
                    )
            except OSError as exc:
                reject(member, f"无法写出（与另一个文件重名或路径冲突：{exc.strerror}）")
    except _Stop as exc:
        reject("", exc.args[0])
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        tarfile.TarError,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
        RuntimeError,
        struct.error,
    ) as exc:
        reject("", f"不是有效的压缩包，或已损坏（{type(exc).__name__}），未解压")


def extract(archive_dir: Path, extracted_dir: Path) -> list[Rejected]:
    """Unpack every archive below ``archive_dir`` (copy every other plain file) into ``extracted_dir``."""
    archive_dir, extracted_dir = Path(archive_dir), Path(extracted_dir)
    budget = _Budget()
    for root, dirs, files in os.walk(archive_dir):  # os.walk does not enter linked folders
        rel = Path(root).relative_to(archive_dir)
        for name in sorted(files) + sorted(d for d in dirs if (Path(root) / d).is_symlink()):
            path, where = Path(root) / name, (rel / name).as_posix()
            try:
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode):
                    budget.rejected.append(Rejected(where, "", "是符号链接或不是普通文件，未处理"))
                elif info.st_size > MAX_TOTAL_BYTES:
                    budget.rejected.append(Rejected(where, "", f"超过 {MAX_TOTAL_BYTES // 2**30} GiB，未处理"))
                elif archive_folder(name) is None:
                    _write(extracted_dir / rel / name, path.read_bytes())
                else:
                    _unpack(path, name, where, extracted_dir / rel / archive_folder(name), 0, budget)
            except OSError as exc:
                budget.rejected.append(Rejected(where, "", f"无法读取或写出（{exc.strerror}）"))
    return budget.rejected


class SafeExtractor(ExtractorPlugin):
    """nbgrader's extractor plugin, replaced by :func:`extract`; each rejection is logged as a warning."""

    def extract(self, archive_path, extracted_path):
        for item in extract(Path(archive_path), Path(extracted_path)):
            self.log.warning(item.line())
