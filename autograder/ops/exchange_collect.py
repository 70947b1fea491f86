"""``nbgrader collect`` that trusts only what a student cannot write: who owns the files, and when they changed.

nbgrader's own collector believes the submission folder's name, ``<student>+<section>+<time>+<random>``:
the name says whose work it is (a classmate can submit with ``--student=<you>``; nbgrader only logs a
warning, nbgrader issue #1097) and when it was handed in (a student can rename her folder and rewrite
``timestamp.txt``, issue #1104). :class:`VettedCollect` is the course's exchange collect plugin
(``c.ExchangeFactory.collect``, set by :func:`autograder.course.configure`), so ``nbgrader collect``, the
formgrader's collect button and ``python -m autograder collect SECTION --exchange`` all go through it:

* **Identity.** With ``ExchangeCollect.check_owner`` (nbgrader's own setting, on by default) a submission
  folder, and everything in it, must belong to the Unix account of the student it names. Any other is
  reported and never collected as that student; the student's own newest submission is used instead.
  On a hub where every student runs as one shared account (containers as ``jovyan``) ownership says
  nothing: set ``c.ExchangeCollect.check_owner = False`` there (every submission is then journalled as
  "identity not checked"), or use an authenticated exchange (ngshare; the instructors' page compares them).
* **Time.** The evidence is the newest change time (``st_ctime``) of the folder and its entries: the
  kernel sets it on every write, rename or chmod, and no unprivileged process can set it back. A claimed
  time (the folder name or ``timestamp.txt``, whichever is earlier) more than :attr:`grace_seconds` before
  the evidence is reported as backdated and replaced by the evidence; so is a claim later than the evidence
  (a wrong clock). The corrected time is written into ``submitted/<student>/<section>/timestamp.txt``,
  which nbgrader's autograde reads, so the late penalty has one source; an honest one is copied unchanged.
* **Journal.** Every submission looked at is appended to ``.grading/audit/collect.jsonl`` (named student,
  folder, owner, claimed and evidence times, the time used, the verdict, whether it was collected).

Feedback still reaches the student: nbgrader matches released feedback by ``submission_secret.txt``, not by
the timestamp. The evidence is only as good as the exchange folder: copying ``inbound/`` elsewhere (``cp``
without ``-a``, a restore from backup) gives every file a new change time.
"""

from __future__ import annotations

import os
import pwd
import secrets
import stat
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc
from traitlets import Float

from autograder.verdict import journal

JOURNAL = "collect"  # .grading/audit/collect.jsonl (autograder/verdict/journal.py)
#: what nbgrader's submit writes into timestamp.txt (``Exchange.timestamp_format``, in UTC)
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"

OK, UNCHECKED, BACKDATED, CLOCK, IMPERSONATION, FOREIGN_FILES, NOT_A_FOLDER = (
    "ok",
    "identity-unchecked",
    "backdated",
    "clock",
    "impersonation",
    "foreign-files",
    "not-a-folder",
)
#: verdicts that keep a submission from being collected at all
REJECTED = (IMPERSONATION, FOREIGN_FILES, NOT_A_FOLDER)


@dataclass(frozen=True)
class Vetted:
    """One submission folder in ``inbound/`` and what the evidence says about it (times: naive UTC, ISO)."""

    section: str
    student: str  # the student the folder name claims
    folder: str
    owner: str  # the account that owns the folder
    claimed: str  # the earlier of the folder name's time and timestamp.txt's
    evidence: str  # the newest change time of the folder and everything in it
    used: str  # the time grading uses: the claim when it agrees with the evidence, else the evidence
    verdict: str
    collected: bool = False
    at: str = ""  # when the collector looked

    @property
    def used_time(self) -> datetime:
        return datetime.fromisoformat(self.used)


def _account(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="microseconds")


def vet_folder(
    path: Path, student: str, section: str, named_time: datetime, *, check_owner: bool, grace: float
) -> Vetted:
    """What the files of one submission folder say about who handed it in and when."""
    top = os.lstat(path)
    owner = _account(top.st_uid)
    if not stat.S_ISDIR(top.st_mode):  # a link or a file where nbgrader writes a folder
        t = _iso(_utc(top.st_ctime))
        return Vetted(section, student, path.name, owner, _iso(named_time), t, t, NOT_A_FOLDER)
    newest, foreign = top.st_ctime, False
    for folder, dirs, files in os.walk(path):  # never follows links: a link is an entry like any other
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            newest = max(newest, st.st_ctime)
            foreign |= st.st_uid != top.st_uid
    claimed = named_time
    try:
        claimed = min(claimed, parse_utc((path / "timestamp.txt").read_text(encoding="utf-8").strip()))
    except (OSError, ValueError, OverflowError):
        pass  # no or unreadable timestamp.txt: the folder name is the whole claim
    evidence = _utc(newest)
    drift = (evidence - claimed).total_seconds()
    if check_owner and owner != student:
        verdict = IMPERSONATION
    elif check_owner and foreign:
        verdict = FOREIGN_FILES
    elif drift > grace:
        verdict = BACKDATED
    elif drift < -grace:
        verdict = CLOCK
    else:
        verdict = OK if check_owner else UNCHECKED
    used = claimed if abs(drift) <= grace else evidence
    return Vetted(section, student, path.name, owner, _iso(claimed), _iso(evidence), _iso(used), verdict)


#: what the instructor reads about a submission that is not simply fine, by verdict (fields of :class:`Vetted`)
EXPLANATIONS = {
    IMPERSONATION: "{section} 以 {student} 的名义提交的 {folder} 属于账户 {owner}：不作为 {student} 的作业收取"
    "（{student} 自己的最新提交照常收取）。请核实 {owner} 是否冒名提交",
    FOREIGN_FILES: "{section} {student} 的 {folder} 中有不属于账户 {owner} 的文件：未收取，请人工核实",
    NOT_A_FOLDER: "{section} {folder} 不是文件夹（链接或普通文件，属于 {owner}）：未收取",
    BACKDATED: "{section} {student}：声称提交于 {claimed} UTC，但文件最后改动于 {evidence} UTC；"
    "按后者计算是否迟交（{folder}）",
    CLOCK: "{section} {student}：声称的时间 {claimed} UTC 晚于文件改动时间 {evidence} UTC，按后者计算",
}


def explain(v: Vetted) -> str | None:
    """One Chinese line for the instructor about a submission that is not simply fine (None when it is)."""
    template = EXPLANATIONS.get(v.verdict)
    return template.format(**asdict(v)) if template else None


def read_journal(course_dir: Path) -> list[Vetted]:
    """Every submission the collector has looked at, oldest first."""
    return [Vetted(**record) for _, record in journal.read(course_dir, JOURNAL)]


class VettedCollect(ExchangeCollect):
    """nbgrader's collect with identity and time from the files' owner and change times (module docstring)."""

    grace_seconds = Float(
        300.0,
        help="How far a submission's claimed time may lie from its files' newest change time and still be "
        "believed (nbgrader submit writes the time, then copies the notebooks: seconds apart).",
    ).tag(config=True)

    def init_src(self):
        super().init_src()  # checks the course and inbound folders and reads the due date
        student = self.coursedir.student_id or "*"
        now = journal.now()
        vetted = []
        for path in sorted(Path(self.inbound_path).glob(f"{student}+{self.coursedir.assignment_id}+*")):
            record = self._path_to_record(str(path))
            v = vet_folder(
                path,
                record["username"],
                self.coursedir.assignment_id,
                record["timestamp"],
                check_owner=self.check_owner,
                grace=self.grace_seconds,
            )
            vetted.append((record, v))
        trusted = {r["filename"]: v for r, v in vetted if v.verdict not in REJECTED}
        records = [dict(r, timestamp=trusted[r["filename"]].used_time) for r, _ in vetted if r["filename"] in trusted]
        self.src_records = []
        for group in groupby(records, lambda r: r["username"]).values():
            newest = self._sort_by_timestamp(group)
            if self.duedate is not None and self.before_duedate:
                newest = [r for r in newest if r["timestamp"] <= self.duedate] or newest
            self.src_records.append(newest[0])
        chosen = {r["filename"] for r in self.src_records}
        # honest submissions keep nbgrader's timestamp.txt byte for byte; corrected ones get the evidence
        self._corrected = {
            os.path.join(self.inbound_path, name): v.used_time
            for name, v in trusted.items()
            if v.verdict in (BACKDATED, CLOCK)
        }
        seen = [replace(v, collected=r["filename"] in chosen, at=now) for r, v in vetted]
        for v in seen:
            if line := explain(v):
                self.log.warning(line)
        journal.append(self.coursedir.root, JOURNAL, *map(asdict, seen))

    def do_copy(self, src, dest, log=None):
        super().do_copy(src, dest, log)
        secret = Path(dest, "submission_secret.txt")
        if not secret.is_file():  # a folder not written by nbgrader submit: without it release_feedback fails
            secret.write_text(secrets.token_hex(64), encoding="utf-8")  # for the whole class
            self.log.warning(
                f"{src} 没有 submission_secret.txt（不是 nbgrader submit 写的）：已补上，学生无法 fetch_feedback"
            )
        used = self._corrected.get(src)
        if used is not None:  # the time grading uses, where nbgrader's autograde reads it
            stamp = used.replace(tzinfo=timezone.utc).strftime(TIMESTAMP_FORMAT)
            Path(dest, "timestamp.txt").write_text(stamp, encoding="utf-8")


def collect_lines(course_dir: Path, section: str) -> list[str]:
    """``nbgrader collect --update SECTION`` through :class:`VettedCollect`; what it found, in Chinese."""
    from autograder.ops.nbgrader_run import nbgrader

    before = len(read_journal(course_dir))
    nbgrader(["collect", section, "--update"], course_dir)
    seen = read_journal(course_dir)[before:]
    lines = [line for v in seen if (line := explain(v))]
    collected = sum(v.collected for v in seen)
    flagged = sum(v.verdict not in (OK, UNCHECKED) for v in seen)
    lines.append(
        f"{section}：检查了 {len(seen)} 份提交，收取 {collected} 位学生的最新提交"
        + (f"；{flagged} 份有问题（见上），详情在 {journal.path(course_dir, JOURNAL)}" if flagged else "")
    )
    if any(v.verdict == UNCHECKED for v in seen):
        lines.append("未核对提交者身份（ExchangeCollect.check_owner = False）：冒名提交无法发现")
    return lines
