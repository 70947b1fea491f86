"""Exercise specs: one declarative :class:`Exercise` per notebook.

An exercise spec says everything the grader knows about one notebook, and only what the
notebook itself does not say:

* its graded :class:`Check` s: which student function is called on which hidden inputs (seeded,
  so reference data regenerates identically), the reference implementation, how each returned
  component is compared, and the known mistakes, each a :class:`Mistake` (any function) or a
  :class:`Variant` (the reference with other keyword arguments) carrying its own Chinese message;
* the constants the reference shares with the notebook's ``setup`` cell (a test compares them);
* plausible :class:`WrongAnswer` s, as exact-once edits of the notebook's own solution cells, and the
  :class:`Shortcut` s that skip the concept (each must lose the concept's points).

Points are not here: they are the ``points`` of the graded cell that calls the check, in the
source ``.md`` (:func:`autograder.authoring.sources.check_points`). Specs live in
``autograder/authoring/reference/<section>.py`` (``EXERCISES``) and never reach students.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class Output:
    """One component of a student function's return value and how it is compared."""

    label: str  # Chinese name shown in feedback, e.g. "梯度"
    kind: str = "exact"  # see course_check.compare.KINDS
    rtol: float | None = None  # overrides the kind's tolerance, e.g. a band justified by the reference run
    atol: float = 0.0  # absolute tolerance added to rtol * max|expected| (a stated band for near-zero references)
    weight: float = 1.0  # its share of a case's points when it passes (partial credit: course_check.scoring)
    # The tolerance the verdict uses is derived from these and the measured spread of correct answers
    # across machines: autograder.authoring.regenerate.derived_rtol.


@dataclass(frozen=True)
class Mistake:
    """A known mistake: what it returns (``fn(**inputs)``, same shape as the reference) and the Chinese
    message the feedback shows when a result matches it."""

    message: str
    fn: Callable

    def __post_init__(self):
        if not self.message.strip():
            raise ValueError("a mistake needs a message")


class Variant:
    """A known mistake that is the check's own reference with other keyword arguments.

    ``Variant(message, ratio="inverted")`` in a check's ``mistakes`` stands for
    ``Mistake(message, functools.partial(check.variant_of, ratio="inverted"))``: the reference module writes
    the mistake as a switch of its parametrised reference, instead of a factory or a lambda per mistake.
    """

    def __init__(self, message: str, **kwargs):
        self.message, self.kwargs = message, kwargs

    def mistake(self, variant_of: Callable) -> Mistake:
        return Mistake(self.message, functools.partial(variant_of, **self.kwargs))


@dataclass(frozen=True)
class Check:
    """A graded check of one student function.

    Attributes:
        name: the student function's name (the graded cell calls ``autograder.grade(exercise, name, fn)``).
        cases: ``() -> [dict of inputs]``; deterministic. The dict's order is the order the student's
            function takes them (the template's ``def``; the generator checks it), random inputs come
            from :func:`autograder.authoring.cases.case_rng` and fixed settings go through
            :func:`~autograder.authoring.cases.case_value`, so that the same function, called inside
            :func:`~autograder.authoring.cases.drawing_public`, gives the check's public cases.
        reference: ``reference(**inputs)`` -> value, or tuple of values matching ``outputs``.
        outputs: how each returned component is compared (one entry if not a tuple).
        mistakes: ``{mistake name: Mistake or Variant}`` (a :class:`Variant` becomes a :class:`Mistake` of
            ``variant_of``).
        variant_of: the parametrised reference that :class:`Variant` mistakes switch (default: ``reference``).
        credit: ``"per_case"`` (the share of cases passed) or ``"above_constant"``, for a check whose answer is a
            label: only the cases passed beyond what the best constant answer passes earn points, so answering
            the most common label everywhere earns nothing (:func:`course_check.scoring.score_results`).
        nonfinite_hint: Chinese explanation added to the feedback when a result holds NaN/Inf
            (e.g. why a naive formula overflows on this check's hidden inputs).
        exercise: notebook id, filled in by the :class:`Exercise` that holds the check.
    """

    name: str
    cases: Callable[[], Sequence[dict]]
    reference: Callable
    outputs: Sequence[Output] = (Output("结果"),)
    mistakes: Mapping[str, Mistake] = field(default_factory=dict)
    nonfinite_hint: str = ""
    exercise: str = ""
    variant_of: Callable | None = None
    credit: str = "per_case"

    def __post_init__(self):
        if any(o.weight <= 0 for o in self.outputs):
            raise ValueError(f"check {self.name}: an output's weight must be positive")
        if self.credit not in ("per_case", "above_constant"):
            raise ValueError(f"check {self.name}: credit must be 'per_case' or 'above_constant'")
        if self.credit == "above_constant" and [o.kind for o in self.outputs] != ["integer"]:
            raise ValueError(f"check {self.name}: 'above_constant' credit needs one integer (label) output")
        variant_of = self.variant_of or self.reference
        resolved = {n: m.mistake(variant_of) if isinstance(m, Variant) else m for n, m in self.mistakes.items()}
        object.__setattr__(self, "mistakes", resolved)  # frozen: set once, here
        for name, mistake in self.mistakes.items():
            if not isinstance(mistake, Mistake):
                raise TypeError(f"check {self.name}: mistake {name!r} must be a Mistake(message, fn)")

    @property
    def key(self) -> str:
        return f"{self.exercise}.{self.name}"


@dataclass(frozen=True)
class WrongAnswer:
    """A plausible wrong submission, written as edits of the exercise's own solution cells.

    Attributes:
        feedback_contains: a fragment the feedback on this submission must contain.
        edits: ``{grade_id: [(old, new), ...]}``; each ``old`` occurs exactly once in that solution
            cell (as the source notebook holds it, without the solution markers).
        keep: solution cells handed in as solved; every other solution cell stays as released (blank).
        exercise: notebook id, filled in by the :class:`Exercise`.
    """

    feedback_contains: str
    edits: Mapping[str, Sequence[tuple[str, str]]]
    keep: Sequence[str] = ()
    exercise: str = ""

    @property
    def cells(self) -> dict[str, str]:
        """``{grade_id: source}`` of the solution cells this submission hands in."""
        from autograder.authoring.sources import edited_solution, solution_cell

        cells = {gid: solution_cell(self.exercise, gid) for gid in self.keep}
        cells.update({gid: edited_solution(self.exercise, gid, pairs) for gid, pairs in self.edits.items()})
        return cells


@dataclass(frozen=True)
class Shortcut(WrongAnswer):
    """A submission that skips the exercise's concept (store-all instead of checkpointing, a hand-set counter
    instead of counted passes), written as edits of the solution cells like a :class:`WrongAnswer`.

    Attributes:
        loses: the autograded points of the notebook it must lose at least: the points of the concept it skips.
            The self-test and the section contracts grade it through the real class run and check both this and
            ``feedback_contains``.
    """

    loses: float = 0.0


@dataclass(frozen=True)
class Exercise:
    """Everything the grader declares about one notebook (see the module docstring)."""

    id: str
    checks: Sequence[Check]
    wrong_answers: Sequence[WrongAnswer] = ()
    shortcuts: Sequence[Shortcut] = ()
    constants: Mapping[str, Any] = field(default_factory=dict)  # name in the setup cell -> value

    def __post_init__(self):
        names = [c.name for c in self.checks]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.id}: a check is declared twice in {names}")
        object.__setattr__(self, "checks", tuple(dataclasses.replace(c, exercise=self.id) for c in self.checks))
        for kind in ("wrong_answers", "shortcuts"):
            object.__setattr__(self, kind, tuple(dataclasses.replace(w, exercise=self.id) for w in getattr(self, kind)))
        if any(s.loses <= 0 for s in self.shortcuts):
            raise ValueError(f"{self.id}: a shortcut must say how many points it loses at least")


def exercises() -> dict[str, Exercise]:
    """Every exercise spec, by notebook id."""
    from autograder.authoring.reference import EXERCISES

    return dict(EXERCISES)


def all_checks() -> dict[str, Check]:
    return {check.key: check for spec in exercises().values() for check in spec.checks}


def get_check(exercise: str, name: str) -> Check:
    checks = all_checks()
    try:
        return checks[f"{exercise}.{name}"]
    except KeyError:
        raise KeyError(f"no graded check {exercise}.{name}; known: {', '.join(sorted(checks))}") from None
