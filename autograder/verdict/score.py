"""The verdict: score a graded cell's recorded results against the hidden cases, with feedback in Chinese.

Runs in the nbgrader process (never in the student's kernel; see :mod:`autograder.kernel.capture`).
The scoring itself is :func:`course_check.scoring.score_results`, the same function a student's public
checks use; this module adds what only grading has: the hidden cases and the check of the record.
Hidden inputs and expected values are never printed.
"""

from __future__ import annotations

from autograder.verdict.data import load
from course_check.protocol import MalformedRecord
from course_check.scoring import Scored, score_results


def score(exercise: str, name: str, record: dict) -> tuple[float, float, str]:
    """``(points earned, points possible, feedback)`` for check ``exercise.name`` from a record of
    :func:`autograder.kernel.capture.grade` (``exercise`` and ``name`` come from the trusted cell source).

    Raises :class:`MalformedRecord` when the record is not one the capture side writes for this check.
    """
    scored = scored_record(exercise, name, record)
    return scored.earned, scored.points, scored.feedback


def scored_record(exercise: str, name: str, record: dict) -> Scored:
    """:func:`score`, with what was diagnosed per case and output (:class:`course_check.scoring.Scored`)."""
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("results"), list)
        or record.get("exercise") != exercise
        or record.get("name") != name
    ):
        raise MalformedRecord("not a results record of this check")
    return score_results(exercise, name, "隐藏测试", load(exercise)[name], record["results"])
