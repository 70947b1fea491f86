"""The nbgrader converter a preprocessor of the course runs in, and through it the course nbgrader works on.

A preprocessor that needs the course (its folder, a path of one of nbgrader's steps) asks the converter that
runs it (``nbgrader autograde``, ``generate_feedback``, formgrader's), whose ``coursedir`` nbgrader configured:
never a path of its own making.
"""

from __future__ import annotations

from nbgrader.converters.base import BaseConverter


def running_converter(preprocessor) -> BaseConverter | None:
    """The nbgrader converter running ``preprocessor`` (its nearest such parent); None outside one."""
    node = preprocessor.parent
    while node is not None and not isinstance(node, BaseConverter):
        node = node.parent
    return node
