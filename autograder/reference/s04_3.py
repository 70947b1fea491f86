"""Reference solutions and graded checks for section S04.3."""

from __future__ import annotations

from autograder.registry import Check, Output, WrongAnswer, register  # noqa: F401

WRONG_ANSWERS: dict = {}
