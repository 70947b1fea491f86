"""The one arithmetic for "does this printed number give away a hidden one?", used by every leak check.

Three checks look for hidden numbers in what students see: the release scan (a generated student notebook,
:mod:`autograder.authoring.release_scan`), the student edition and book scan (:mod:`autograder.authoring.leak_scan`)
and the feedback check (:func:`autograder.ops.reports.check_feedback_html`). Each has its own secret set and its
own bar (how many digits make a match no coincidence); they share how a written number is read
(:func:`significant_digits`), how numbers are found in text (:data:`NUMBER`) and how a token is compared with a
secret value (:class:`HiddenNumbers`: both rounded to the bar's digits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: a number as written in text or code, not part of an identifier or a longer number
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def significant_digits(token: str) -> int:
    """Digits of a number as written, without leading or trailing zeros: ``0.0012340`` has 4, ``100.0`` and
    ``1e-3`` have 1 (a float's repr ends in ``.0`` whatever its precision, so trailing zeros say nothing)."""
    mantissa = re.split(r"[eE]", token.lstrip("+-"))[0]
    return len(mantissa.replace(".", "").strip("0"))


def at_digits(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` significant digits, as a comparable key."""
    return f"{value:.{digits - 1}e}"


class HiddenNumbers:
    """A set of secret values, matched by written numbers of at least ``digits`` significant digits.

    A token matches when it is written with that many digits or more and equals a secret at ``digits``
    digits: a value printed rounded (``0.123457`` for ``0.12345678901``) is caught, and a short number
    (``0.5``, ``1e-3``), which anyone computes, never matches.
    """

    def __init__(self, values: Iterable[float], digits: int):
        self.digits = digits
        self._keys = {at_digits(float(v), digits) for v in values}

    def __bool__(self) -> bool:
        return bool(self._keys)

    def matches(self, token: str) -> bool:
        return significant_digits(token) >= self.digits and at_digits(float(token), self.digits) in self._keys

    def found_in(self, text: str) -> list[str]:
        """The numbers written in ``text`` that match, in order, each once."""
        return list(dict.fromkeys(t for t in NUMBER.findall(text) if self.matches(t)))
