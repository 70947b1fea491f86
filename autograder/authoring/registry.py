"""The graded checks: which student function is called on which hidden inputs.

Each :class:`Check` names the exercise and the student function, the points it is
worth, how its hidden cases are drawn (seeded, so reference data regenerates
identically), the reference implementation and the known mistakes whose results
the feedback can recognise. Reference implementations live in
``autograder/authoring/reference/`` and never reach students.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence


@dataclass(frozen=True)
class Output:
    """One component of a student function's return value and how it is compared."""

    label: str  # Chinese name shown in feedback, e.g. "梯度"
    kind: str = "exact"  # see autograder.verdict.compare.KINDS
    rtol: float | None = None  # overrides the kind's tolerance, e.g. a band justified by the reference run
    atol: float = 0.0  # absolute tolerance added to rtol * max|expected| (a stated band for near-zero references)
    # The tolerance the verdict uses is derived from these and the measured spread of correct answers
    # across machines: autograder.authoring.regenerate.derived_rtol.


@dataclass(frozen=True)
class Check:
    """A graded check of one student function.

    Attributes:
        exercise: notebook id, e.g. ``"s04_1_ex1"``.
        name: the student function's name.
        points: points of the graded cell that runs this check.
        cases: ``() -> [dict of keyword inputs]``; deterministic.
        reference: ``reference(**inputs)`` -> value, or tuple of values matching ``outputs``.
        outputs: how each returned component is compared (one entry if not a tuple).
        mistakes: ``{mistake name: fn(**inputs)}`` giving what a known mistake returns.
        nonfinite_hint: Chinese explanation added to the feedback when a result holds NaN/Inf
            (e.g. why a naive formula overflows on this check's hidden inputs).
    """

    exercise: str
    name: str
    points: float
    cases: Callable[[], Sequence[dict]]
    reference: Callable
    outputs: Sequence[Output] = (Output("结果"),)
    mistakes: Mapping[str, Callable] = field(default_factory=dict)
    nonfinite_hint: str = ""

    @property
    def key(self) -> str:
        return f"{self.exercise}.{self.name}"


@dataclass(frozen=True)
class WrongAnswer:
    """A plausible wrong submission: solution-cell sources by grade_id, and a fragment the feedback must contain."""

    cells: Mapping[str, str]
    feedback_contains: str


CHECKS: dict[str, Check] = {}


def register(*checks: Check) -> None:
    for check in checks:
        if check.key in CHECKS:
            raise ValueError(f"check {check.key} registered twice")
        CHECKS[check.key] = check


def get_check(exercise: str, name: str) -> Check:
    _load_all()
    try:
        return CHECKS[f"{exercise}.{name}"]
    except KeyError:
        raise KeyError(f"no graded check {exercise}.{name}; known: {', '.join(sorted(CHECKS))}") from None


def all_checks() -> dict[str, Check]:
    _load_all()
    return dict(CHECKS)


def _load_all() -> None:
    # Importing the reference modules registers their checks.
    from autograder.authoring.reference import SECTIONS  # noqa: F401
