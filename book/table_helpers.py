"""Results tables for the book's pages: ``show_table(rows, headers, formats, caption=...)``.

A cell that computes a table of results shows it with one call instead of printing aligned columns by hand.
The output carries the table twice:

* as Markdown (``text/markdown``): the book renders it as one of its own tables (myst-nb parses it as
  GitHub-flavoured Markdown, ``nb_render_markdown_format: gfm`` in ``_config.yml``), and JupyterLab, Jupyter
  Notebook and Colab render it as a table too, so the page twins show the same table as the web page;
* as aligned plain text (``text/plain``): what a console shows, and what ``tests/test_book.py`` reads when it
  compares the numbers the prose quotes with the numbers the cells show.

On a narrow screen a table wider than the page scrolls sideways inside its own box (the theme wraps every table
in a scrolling container; ``book/_ext/static/course_reader.css`` keeps the columns readable on a phone).
"""

from __future__ import annotations

import numbers
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from IPython import get_ipython
from IPython.display import display

Format = str | Callable[[Any], str] | None

# Markdown characters that would change a cell's text (emphasis, code, links, HTML, math, the column bar)
_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|$~"})
# A browser may break a line after the hyphen of "1e-13" or "eps=1e-3" (in a header, or a text cell of several
# numbers); a word joiner after it (U+2060, invisible) keeps the number on one line. Only the Markdown of headers
# and text cells carries it: a column of numbers is never wrapped, and its numbers copy as they are.
_NUMBER_HYPHEN = re.compile(r"(?<=[0-9A-Za-z.])-(?=[0-9])")


def _cell(value: Any, fmt: Format) -> str:
    if value is None:  # nothing to show in this row
        return "—"
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d numpy or JAX array
        value = value.item()
    if fmt is None:
        return str(value)
    if callable(fmt):
        return fmt(value)
    return format(value, fmt)


def _is_number(value: Any) -> bool:
    """Numbers are right-aligned, text left-aligned."""
    return isinstance(value, numbers.Number) or hasattr(value, "dtype")


def _width(text: str) -> int:
    """Columns a monospaced font gives ``text`` (a Chinese character takes two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - _width(text))
    return fill + text if right else text + fill


def _markdown_and_text(
    rows: Iterable[Sequence[Any]],
    headers: Sequence[str],
    formats: Sequence[Format] | None = None,
    caption: str | None = None,
) -> tuple[str, str]:
    """The table as ``(markdown, plain_text)``; :func:`show_table` displays both."""
    formats = list(formats) if formats is not None else [None] * len(headers)
    if len(formats) != len(headers):
        raise ValueError(f"{len(headers)} headers but {len(formats)} formats")
    raw = [list(row) for row in rows]
    for row in raw:
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} values for {len(headers)} headers: {row!r}")
    cells = [[_cell(value, fmt) for value, fmt in zip(row, formats)] for row in raw]
    right = [all(_is_number(row[j]) for row in raw if row[j] is not None) for j in range(len(headers))]

    def md_row(texts, numeric):
        texts = [t.translate(_MARKDOWN_SPECIAL) for t in texts]
        return "| " + " | ".join(t if n else _NUMBER_HYPHEN.sub("-\u2060", t) for t, n in zip(texts, numeric)) + " |"

    md = [md_row(headers, [False] * len(headers)), "| " + " | ".join("---:" if r else ":---" for r in right) + " |"]
    md += [md_row(row, right) for row in cells]  # a column of numbers does not wrap (course_reader.css)
    if caption:
        md = [f"**{caption.translate(_MARKDOWN_SPECIAL)}**", "", *md]

    widths = [max(_width(t) for t in column) for column in zip(headers, *cells)]
    plain = ["  ".join(_pad(t, w, r) for t, w, r in zip(row, widths, right)).rstrip() for row in [headers, *cells]]
    plain.insert(1, "  ".join("-" * w for w in widths))
    if caption:
        plain.insert(0, caption)
    return "\n".join(md) + "\n", "\n".join(plain)


def show_table(
    rows: Iterable[Sequence[Any]],
    headers: Sequence[str],
    formats: Sequence[Format] | None = None,
    caption: str | None = None,
) -> None:
    """Show ``rows`` as a table in the cell's output.

    Args:
        rows: one sequence of values per row, in the order of ``headers``.
        headers: the column headers.
        formats: one per column: a format spec (``".4f"``, ``"+.2e"``, ``".1%"``, ``"d"``), a function from the
            value to its text, or None for ``str(value)``. Default: ``str`` for every column. A value None
            shows as a dash, whatever the column's format.
        caption: a line shown above the table.
    """
    markdown, plain = _markdown_and_text(rows, headers, formats, caption)
    if get_ipython() is None:  # plain Python (a script, tests/test_page_seeds.py): the text
        print(plain)
    else:
        display({"text/markdown": markdown, "text/plain": plain}, raw=True)
