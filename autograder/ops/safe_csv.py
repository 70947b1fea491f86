"""CSV text that spreadsheets open safely, for the files instructors open in Excel or LibreOffice.

Student ids, names and e-mails are student-controlled text. A text value that starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return would run as a formula when the file is opened in Excel or
LibreOffice (OWASP, "CSV Injection"): it is written with a leading ``'`` (:func:`neutral`) and reported.
Every value is written through :mod:`csv` (:func:`csv_text`), so quotes, commas and line breaks survive a
read-back by :mod:`csv` unchanged.
"""

from __future__ import annotations

import csv
import io

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutral(value, neutralised: list | None = None) -> str:
    """``value`` as CSV text that no spreadsheet runs as a formula: a leading ``'`` where it starts with
    ``= + - @``, a tab or a carriage return (the value is appended to ``neutralised`` then)."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_START):
        if neutralised is not None:
            neutralised.append(text)
        return "'" + text
    return text


def csv_text(rows) -> str:
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)  # excel dialect: comma, CRLF, quotes only where needed
    return buf.getvalue()
