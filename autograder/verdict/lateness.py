"""The late policy, applied by nbgrader itself, and the lateness note in every feedback page.

* :class:`LatePolicy`: a percentage of the notebook's score per started day (24 h) late, up to a cap, and
  optionally a hard deadline after which the notebook scores zero. The numbers come from
  ``assignments/term.toml`` (:mod:`autograder.ops.term`).
* :class:`TermLatePolicy`: that policy as nbgrader's ``LateSubmissionPlugin``. The course's nbgrader config
  installs it for ``AssignLatePenalties``, which runs in every autograde (command, formgrader, class run) and
  again when the term is applied after grading (:func:`autograder.ops.term.apply_term`: manual grades,
  extensions): the one rule and the one writer of a late penalty.
  nbgrader measures the lateness: the submission's ``timestamp.txt`` against the assignment's due date
  plus the student's extension (``SubmittedAssignment.total_seconds_late``).
* :class:`LatenessNote`: a Chinese note at the top of the feedback of a late (or extended) submission:
  when it was handed in, the due date and extension that applied, how late it was and what that cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float

DAY_S = 86400.0
NOTE_TAG = "lateness-note"


@dataclass(frozen=True)
class LatePolicy:
    """How much lateness costs. ``hard_deadline_days`` None: no hard deadline."""

    percent_per_day: float = 0.0
    cap_percent: float = 100.0
    hard_deadline_days: float | None = None

    def __post_init__(self):
        if not 0 <= self.percent_per_day <= 100 or not 0 <= self.cap_percent <= 100:
            raise ValueError(f"late policy: percentages must lie in [0, 100], got {self}")
        if self.hard_deadline_days is not None and self.hard_deadline_days < 0:
            raise ValueError(f"late policy: hard_deadline_days must be >= 0, got {self.hard_deadline_days}")

    def percent(self, seconds_late: float) -> float:
        """The share of the score (in %) a submission ``seconds_late`` after its due date loses."""
        if seconds_late <= 0:
            return 0.0
        days = seconds_late / DAY_S
        if self.hard_deadline_days is not None and days > self.hard_deadline_days:
            return 100.0
        return min(self.cap_percent, self.percent_per_day * math.ceil(days))

    def penalty(self, score: float, seconds_late: float) -> float:
        """Points taken from ``score`` (never more than the score itself)."""
        return max(0.0, score) * self.percent(seconds_late) / 100.0

    def describe(self) -> str:
        """The policy in one Chinese sentence, as feedback and the instructors' page state it."""
        text = f"每迟交一天（不足 24 小时按一天计）扣该 notebook 得分的 {self.percent_per_day:g}%，最多扣 {self.cap_percent:g}%"
        if self.hard_deadline_days is not None:
            text += f"；超过截止时间 {self.hard_deadline_days:g} 天后提交的计 0 分"
        return text + "。"


class TermLatePolicy(LateSubmissionPlugin):
    """nbgrader's late-submission plugin with the course's :class:`LatePolicy` (set by the course's nbgrader config)."""

    percent_per_day = Float(0.0, help="Percent of the notebook's score lost per started day late.").tag(config=True)
    cap_percent = Float(100.0, help="At most this percent of the score is lost to lateness.").tag(config=True)
    hard_deadline_days = Float(
        None, allow_none=True, help="Days after the due date after which a notebook scores 0 (None: never)."
    ).tag(config=True)

    @property
    def policy(self) -> LatePolicy:
        return LatePolicy(self.percent_per_day, self.cap_percent, self.hard_deadline_days)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        return self.policy.penalty(score, total_seconds_late) if total_seconds_late > 0 else None


def _local(when: datetime, zone: timezone) -> str:
    """A gradebook time (naive UTC) as the course's local time."""
    return when.replace(tzinfo=timezone.utc).astimezone(zone).strftime("%Y-%m-%d %H:%M (UTC%z)")


def _duration(seconds: float) -> str:
    hours = seconds / 3600.0
    return f"{hours:.1f} 小时" if hours < 48 else f"{hours / 24:.1f} 天（{hours:.0f} 小时）"


def lateness_note(submission, notebook, policy: LatePolicy, zone: timezone) -> str:
    """The Chinese note on one submitted notebook's lateness ('' when there is nothing to say)."""
    due = submission.duedate  # nbgrader: the assignment's due date plus this student's extension
    extension = submission.extension or timedelta(0)
    if submission.timestamp is None or due is None or (submission.total_seconds_late <= 0 and not extension):
        return ""
    lines = [f"- 提交时间：{_local(submission.timestamp, zone)}"]
    granted = f"（含延期 {_duration(extension.total_seconds())}）" if extension else ""
    lines.append(f"- 截止时间{granted}：{_local(due, zone)}")
    late = submission.total_seconds_late
    if late <= 0:
        lines.append("- 在截止时间（含延期）之前提交，不扣分。")
    else:
        penalty = notebook.late_submission_penalty or 0.0
        lines.append(
            f"- 迟交 {_duration(late)}，按课程的迟交规则扣 {policy.percent(late):g}%：本 notebook 扣 {penalty:g} 分。"
        )
        lines.append(f"- 迟交规则：{policy.describe()}")
    return "**迟交情况**\n\n" + "\n".join(lines)


class LatenessNote(NbGraderPreprocessor):
    """Feedback: put the lateness note of this submission (if any) at the top of the page."""

    utc_offset_hours = Float(8.0, help="The course's time zone, as hours east of UTC (for the times shown).").tag(
        config=True
    )

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        policy = TermLatePolicy(parent=self).policy  # the configured policy, the one grading applied
        with Gradebook(meta["db_url"]) as gb:
            try:
                submission = gb.find_submission(meta["assignment"], meta["student"])
                notebook = gb.find_submission_notebook(meta["notebook"], meta["assignment"], meta["student"])
            except MissingEntry:
                return nb, resources
            note = lateness_note(submission, notebook, policy, timezone(timedelta(hours=self.utc_offset_hours)))
        if note:
            cell = nbformat.v4.new_markdown_cell(note)
            cell.metadata["tags"] = [NOTE_TAG]
            nb.cells.insert(0, cell)
        return nb, resources
