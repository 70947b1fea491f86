"""Whatever files a student hands in cost only that submission, and no archive unpacks outside its folder.

Fast tests, without nbgrader: the checks of :mod:`autograder.ops.submission_files` (used by the class
run before nbgrader sees a submission) and the archive scan of :mod:`autograder.ops.archives` (used by
``python -m autograder collect`` and by ``nbgrader zip_collect``), on hostile files built in tmp_path.
The same hostile files also go through the real pipeline in tests/test_classrun.py and
tests/test_collect_reports.py.
"""

import io
import json
import os
import socket
import tarfile
import threading
import zipfile
from pathlib import Path
from unittest import mock

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
import nbformat

from autograder.ops import archives, classrun, submission_files
from autograder.ops.classrun import JobResult, grade_class, summary_lines
from autograder.ops.collect import CollectReport, plan, report_lines
from autograder.ops.submission_files import fingerprint, precheck, submission_problem
from autograder.ops.worker import WorkerZygote

NB = "s04_1_ex1.ipynb"
GOOD = nbformat.writes(new_notebook(cells=[new_markdown_cell("x"), new_code_cell("1")]))


def _finishes(fn, *args, seconds=20):
    """``fn(*args)``, failing the test instead of hanging when it blocks (a reader on a FIFO would)."""
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} blocked"
    return out["value"]


# --- one submission folder -------------------------------------------------------------------------


def _fifo(folder):
    os.mkfifo(folder / NB)


def _socket(folder):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(folder / "x.sock"))
    s.close()


def _link_to_other_student(folder):
    other = folder.parent.parent / "other" / "s04_1"
    other.mkdir(parents=True)
    (other / NB).write_text(GOOD)
    (folder / NB).symlink_to(other / NB)


def _link_to_fifo(folder):
    os.mkfifo(folder / "pipe")
    (folder / NB).symlink_to(folder / "pipe")


def _sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)


def _deep_folders(folder):
    deep = folder.joinpath(*["d"] * (submission_files.MAX_FOLDER_DEPTH + 1))
    deep.mkdir(parents=True)
    (folder / NB).write_text(GOOD)


def _many_files(folder):
    for i in range(submission_files.MAX_SUBMISSION_FILES + 1):
        (folder / f"f{i}.txt").write_text("")


def _named(name: bytes):
    def make(folder):
        (folder / os.fsdecode(name)).write_text(GOOD)

    return make


def _notebook(data):
    def make(folder):
        (folder / NB).write_bytes(data if isinstance(data, bytes) else data.encode())

    return make


def _cells(*cells):
    return _notebook(json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


#: hostile submission -> (how to make it in its folder, a fragment of the reason)
HOSTILE = {
    "fifo-notebook": (_fifo, "不是普通文件"),
    "unix-socket": (_socket, "不是普通文件"),
    "symlink-to-other-student": (_link_to_other_student, "符号链接"),
    "symlink-to-fifo": (_link_to_fifo, "符号链接"),
    "folder-named-like-a-notebook": (lambda f: (f / NB).mkdir(), "不是普通文件"),
    "huge-notebook": (lambda f: _sparse(f / NB, submission_files.MAX_NOTEBOOK_BYTES + 1), "上限"),
    "huge-submission": (lambda f: [_sparse(f / f"data{i}.bin", 2**20 * 20) for i in range(3)], "上限"),
    "deep-folders": (_deep_folders, "嵌套"),
    "many-files": (_many_files, "个，不予评分"),
    "deep-json-recursion": (_notebook("[" * 200_000 + "]" * 200_000), "嵌套"),
    "deep-json": (_notebook(json.dumps({"cells": [], "metadata": json.loads("[" * 100 + "]" * 100)})), "嵌套"),
    "not-utf8": (_notebook(b'{"cells": ["\xff\xfe"]}'), "UTF-8"),
    "utf16": (_notebook(GOOD.encode("utf-16")), "UTF-8"),
    "utf8-bom": (_notebook(b"\xef\xbb\xbf" + GOOD.encode()), "JSON"),
    "truncated": (_notebook(GOOD[: len(GOOD) // 2]), "JSON"),
    "huge-integer": (_notebook('{"cells": [], "n": ' + "9" * 100_000 + "}"), "JSON"),
    "name-not-utf8": (_named(b"s04_1_ex1\xff.ipynb"), "UTF-8"),
    "name-with-newline": (_named(b"s04_1\nex1.ipynb"), "控制字符"),
    "name-with-glob": (_named(b"s04_1_*.ipynb"), "通配符"),
    "outputs-not-a-list": (_cells({"cell_type": "code", "source": "", "metadata": {}, "outputs": "x"}), "已损坏"),
    "output-not-an-object": (_cells({"cell_type": "code", "source": "", "metadata": {}, "outputs": [1]}), "已损坏"),
    "source-not-text": (_cells({"cell_type": "code", "source": {"a": 1}, "metadata": {}}), "已损坏"),
    "attachments-not-objects": (
        _cells({"cell_type": "markdown", "source": "", "metadata": {}, "attachments": {"a": 1}}),
        "已损坏",
    ),
    "grade-id-not-a-string": (
        _cells({"cell_type": "code", "source": "", "metadata": {"nbgrader": {"grade_id": [1]}}}),
        "已损坏",
    ),
    "nbgrader-metadata-not-an-object": (
        _cells({"cell_type": "code", "source": "", "metadata": {"nbgrader": 3}}),
        "已损坏",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_submission_fails_its_precheck_with_a_reason(tmp_path, case):
    folder = tmp_path / "submitted" / "student" / "s04_1"
    folder.mkdir(parents=True)
    make, fragment = HOSTILE[case]
    make(folder)
    reason = _finishes(precheck, folder)
    assert fragment in reason, reason
    assert _finishes(fingerprint, folder) == _finishes(fingerprint, folder)  # never blocks, never follows


def test_an_honest_submission_passes(tmp_path):
    (tmp_path / NB).write_text(GOOD)
    (tmp_path / "notes.txt").write_text("任何别的文件都可以")
    assert precheck(tmp_path) == ""


def test_fingerprint_changes_with_the_submission_and_ignores_link_targets(tmp_path):
    (tmp_path / NB).write_text(GOOD)
    before = fingerprint(tmp_path)
    (tmp_path / "target").write_text("a")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with_link = fingerprint(tmp_path)
    assert with_link != before
    (tmp_path / "target").write_text("b")  # the link's target changed, the link did not
    # the target is a file of the submission, so the digest changes through it, not through the link
    assert fingerprint(tmp_path) != with_link
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("x")
    (tmp_path / "out").symlink_to(outside)
    digest = fingerprint(tmp_path)
    outside.write_text("y")  # not part of the submission: the digest does not read it
    assert fingerprint(tmp_path) == digest


@pytest.mark.parametrize(
    "student, fragment",
    [
        ("a*", "通配符"),
        ("x[1]", "通配符"),
        (os.fsdecode(b"\xffname"), "UTF-8"),
        ("two\nlines", "控制字符"),
    ],
)
def test_odd_student_folder_names_are_refused(tmp_path, student, fragment):
    folder = tmp_path / "submitted" / student / "s04_1"
    folder.mkdir(parents=True)
    (folder / NB).write_text(GOOD)
    assert fragment in submission_problem(tmp_path, "s04_1", student)


def test_linked_student_or_section_folders_are_refused(tmp_path):
    real = tmp_path / "submitted" / "real" / "s04_1"
    real.mkdir(parents=True)
    (real / NB).write_text(GOOD)
    (tmp_path / "submitted" / "copycat").symlink_to(tmp_path / "submitted" / "real")
    (tmp_path / "submitted" / "half").mkdir()
    (tmp_path / "submitted" / "half" / "s04_1").symlink_to(real)
    assert submission_problem(tmp_path, "s04_1", "real") == ""
    assert "符号链接" in submission_problem(tmp_path, "s04_1", "copycat")
    assert "符号链接" in submission_problem(tmp_path, "s04_1", "half")


def test_the_class_run_records_every_failure_and_grades_the_rest(tmp_path):
    course = tmp_path / "course"
    for student in ("honest", "crashes", "fifo", os.fsdecode(b"bad\xffname")):
        (course / "submitted" / student / "s04_1").mkdir(parents=True)
        if student == "fifo":
            os.mkfifo(course / "submitted" / student / "s04_1" / NB)
        else:
            (course / "submitted" / student / "s04_1" / NB).write_text(GOOD)
    real_run_job = classrun.run_job

    def fake_run_job(course_dir, section, student, limits, extra_args=(), worker=None):
        if student == "crashes":
            raise RuntimeError("boom")
        if student == "honest":  # no nbgrader here: stand in for a graded job
            return JobResult(section, student, "graded", 1.0)
        return real_run_job(course_dir, section, student, limits, extra_args)  # fails in its precheck

    # no nbgrader here: no worker zygote either (the run's thread starts one before any job, WorkerZygote.start)
    with (
        mock.patch.object(classrun, "run_job", fake_run_job),
        mock.patch.object(WorkerZygote, "start", lambda self: None),
    ):
        results = {r.student: r for r in _finishes(lambda: grade_class(course, ["s04_1"], workers=2, progress=False))}
    assert results["honest"].status == "graded"
    assert results["crashes"].status == "failed" and "RuntimeError: boom" in results["crashes"].error
    assert results["fifo"].status == "failed" and "不是普通文件" in results["fifo"].error
    assert results[os.fsdecode(b"bad\xffname")].status == "failed"
    ledger = course / ".grading" / "ledger" / "s04_1"
    assert len(list(ledger.glob("*.json"))) == 4  # every outcome is recorded
    with mock.patch("autograder.ops.nbgrader_run.gradebook_scores", return_value={}):
        text = "\n".join(summary_lines(course, list(results.values())))
    text.encode("utf-8")  # printable, whatever bytes the names were made of
    assert "失败 crashes/s04_1" in text and "bad\\xffname" in text


# --- archives --------------------------------------------------------------------------------------


def _zip(members, path=None):
    """A zip of ``{name: bytes}`` (a ZipInfo name keeps its attributes), in memory or at ``path``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    if path is not None:
        Path(path).write_bytes(buf.getvalue())
    return buf.getvalue()


def _link(name, target):
    info = zipfile.ZipInfo(name)
    info.create_system, info.external_attr = 3, (0o120777 << 16)
    return info, target


def _encrypted(data):
    """A zip whose one member carries the 'encrypted' flag (zipfile writes none itself)."""
    raw = bytearray(_zip([(f"a_2021009_{NB}", data)]))
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(sig)
        raw[at + flag_at] |= 0x1
    return bytes(raw)


def _bad_crc():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"a_2021010_{NB}", GOOD)
    raw = bytearray(buf.getvalue())
    at = raw.find(b'"cells"')
    raw[at + 1] ^= 0x20  # one flipped bit in the stored data
    return bytes(raw)


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.linkname = "../../source/s04_1/s04_1_ex1.ipynb"
                tf.addfile(info)
    return buf.getvalue()


def _nested(levels):
    data = _zip([(f"deep_2021011_{NB}", GOOD)])
    for _ in range(levels):
        data = _zip([("inner.zip", data)])
    return data


OK = f"ok_2021001_{NB}"
#: (member name, content) of the download next to an honest notebook -> fragment of the rejection
HOSTILE_MEMBERS = {
    "parent-path": ((f"../../escaped_2021002_{NB}", GOOD), ".."),
    "backslash-parent-path": ((f"..\\escaped_2021002_{NB}", GOOD), ".."),
    "absolute-path": ((f"/tmp/escaped_2021002_{NB}", GOOD), "绝对路径"),
    "symlink": (_link(f"link_2021003_{NB}", "../../../source/s04_1/s04_1_ex1.ipynb"), "符号链接"),
    "zip-bomb-ratio": ((f"bomb_2021004_{NB}", b" " * 8 * 2**20), "压缩炸弹"),
    "zip-bomb-size": ((f"big_2021004_{NB}", b" " * (archives.MAX_MEMBER_BYTES + 1)), "上限"),
    "encrypted-zip": (("enc_2021005.zip", _encrypted(GOOD.encode())), "加密"),
    "corrupt-zip": (("corrupt_2021006.zip", b"PK\x03\x04 this is not a zip"), "损坏"),
    "bad-crc": (("crc_2021007.zip", _bad_crc()), "损坏"),
    "deeply-nested-zip": (("nest_2021008.zip", _nested(archives.MAX_NESTING)), "嵌套"),
    "control-character-name": ((f"cc_2021012\n_{NB}", GOOD), "控制字符"),
    "tar-with-links": (
        ("t_2021013.tar.gz", _tar([("a.ipynb", tarfile.SYMTYPE, b""), ("b.ipynb", tarfile.LNKTYPE, b"")])),
        "链接",
    ),
    "tar-with-fifo-and-device": (
        ("t_2021013.tar.gz", _tar([("c.ipynb", tarfile.FIFOTYPE, b""), ("d.ipynb", tarfile.CHRTYPE, b"")])),
        "不是普通文件",
    ),
    "tar-bad-name": (("t_2021014.tar.gz", _tar([(os.fsdecode(b"\xff.ipynb"), tarfile.REGTYPE, b"{}")])), "UTF-8"),
    "gz-that-is-no-tar": (("x_2021015.gz", b"\x1f\x8b not really"), "损坏"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_MEMBERS))
def test_hostile_archive_member_is_rejected_and_the_rest_unpacked(tmp_path, case):
    member, fragment = HOSTILE_MEMBERS[case]
    (tmp_path / "archive").mkdir()
    _zip([(OK, GOOD), member], tmp_path / "archive" / "download.zip")
    rejected = archives.extract(tmp_path / "archive", tmp_path / "extracted")
    assert rejected and all(fragment in r.reason for r in rejected), [r.line() for r in rejected]
    assert (tmp_path / "extracted" / "download" / OK).read_text() == GOOD
    written = [p for p in tmp_path.rglob("*") if "escaped" in p.name or p.is_symlink()]
    assert written == []
    for path in (tmp_path / "extracted").rglob("*"):  # only plain files and folders, all inside
        assert path.is_file() or path.is_dir()
        assert path.resolve().is_relative_to((tmp_path / "extracted").resolve())


def test_nested_archives_unpack_where_nbgrader_puts_them(tmp_path):
    (tmp_path / "archive").mkdir()
    inner = _zip([(f"s04_1/{NB}", GOOD)])
    _zip(
        [
            ("lisi_2021002_assignsubmission_file_.zip", inner),
            ("t_2021013.tar.gz", _tar([(NB, tarfile.REGTYPE, b"{}")])),
        ],
        tmp_path / "archive" / "download.zip",
    )
    assert archives.extract(tmp_path / "archive", tmp_path / "extracted") == []
    out = tmp_path / "extracted" / "download"
    assert (out / "lisi_2021002_assignsubmission_file_" / "s04_1" / NB).read_text() == GOOD
    assert (out / "t_2021013" / NB).read_text() == "{}"
    for level in range(archives.MAX_NESTING - 1):  # the deepest allowed nesting still unpacks
        (tmp_path / f"a{level}").mkdir()
        (tmp_path / f"a{level}" / "d.zip").write_bytes(_nested(level))
        assert archives.extract(tmp_path / f"a{level}", tmp_path / f"e{level}") == []


def test_too_many_members_or_too_much_data_stop_the_archive(tmp_path, monkeypatch):
    (tmp_path / "archive").mkdir()
    _zip([(f"m{i}_{2021000 + i}_{NB}", " " * 100_000) for i in range(30)], tmp_path / "archive" / "many.zip")
    monkeypatch.setattr(archives, "MAX_MEMBERS", 20)
    rejected = archives.extract(tmp_path / "archive", tmp_path / "e1")
    assert [r.member for r in rejected] == [""] and "20" in rejected[0].reason
    assert not (tmp_path / "e1" / "many").exists()
    monkeypatch.setattr(archives, "MAX_MEMBERS", 20_000)
    monkeypatch.setattr(archives, "MAX_TOTAL_BYTES", 10 * 100_000)
    rejected = archives.extract(tmp_path / "archive", tmp_path / "e2")
    assert len(rejected) == 1 and "总大小" in rejected[0].reason
    assert len(list((tmp_path / "e2" / "many").iterdir())) == 10


def test_special_files_in_the_archive_folder_are_not_read(tmp_path):
    (tmp_path / "archive").mkdir()
    os.mkfifo(tmp_path / "archive" / "pipe.zip")
    (tmp_path / "archive" / "link.zip").symlink_to(tmp_path / "elsewhere.zip")
    rejected = _finishes(archives.extract, tmp_path / "archive", tmp_path / "extracted")
    assert sorted(r.where for r in rejected) == ["link.zip", "pipe.zip"]


def test_rejections_are_reported_next_to_the_stray_files(tmp_path):
    (tmp_path / "archive").mkdir()
    _zip(
        [(OK, GOOD), HOSTILE_MEMBERS["parent-path"][0], HOSTILE_MEMBERS["corrupt-zip"][0]],
        tmp_path / "archive" / "download.zip",
    )
    report = CollectReport("s04_1", rejected=archives.extract(tmp_path / "archive", tmp_path / "extracted"))
    planned, report.unmatched = plan(tmp_path / "extracted", {NB})
    assert list(planned) == [("2021001", NB)]
    lines = report_lines(report)
    assert f"拒收 download.zip 中的 ../../escaped_2021002_{NB}: 路径中含有 ..（会写到解压目录之外）" in lines
    assert any(ln.startswith("拒收 download/corrupt_2021006.zip: 不是有效的压缩包") for ln in lines)
    assert "另有 2 个文件或压缩包不安全或已损坏" in lines[-1]
