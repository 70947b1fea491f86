"""Formulas in formgrader and in the feedback HTML, with no network.

nbconvert's templates load MathJax 2 from a public CDN; offline, or where that CDN is slow or blocked,
graders and students read raw TeX. The course's nbgrader config puts ``templates/`` (beside this module)
before nbconvert's own templates, so its ``base/mathjax.html.j2`` inlines MathJax 3 from the
``sphinx-mathjax-offline`` package, the same files the book serves, through the Jinja filter
:func:`offline_mathjax`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"


@functools.cache
def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the sphinx-mathjax-offline package (MathJax 3 for offline pages) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


@functools.cache
def offline_mathjax(name: str) -> str:
    """The text of MathJax's ``name`` (e.g. ``tex-svg.js``), safe to put inside a ``<script>`` element."""
    text = (_mathjax_dir() / name).read_text(encoding="utf-8")
    # only "</script" ends a script element early; "<\/script" means the same to JavaScript (MathJax has none today)
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)
