"""The book's figure style: one call in each page's setup cell.

Figures carry Chinese labels. matplotlib's bundled DejaVu fonts have no CJK glyphs and a reader's
machine may have no CJK font at all, so the book ships its own (book/fonts/S04SansSC-Regular.otf,
an OFL subset of Noto Sans CJK SC) and registers it here. It comes first in the family list: a
label that mixes text and math ("时间 $t$") is laid out by mathtext, which sets the text part in the
first font found, without per-glyph fallback. The vendored font has Latin, Greek and the minus sign
too; DejaVu Sans stays behind it for any other symbol.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager

FONT_FILE = Path(__file__).resolve().parent / "fonts" / "S04SansSC-Regular.otf"
FONT_FAMILY = "S04 Sans SC"


def use_course_style() -> None:
    """Register the vendored CJK font and set the rcParams every figure of the book shares."""
    if FONT_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(FONT_FILE))
    mpl.rcParams.update(
        {
            "font.family": "sans-serif",
            "font.sans-serif": [FONT_FAMILY, "DejaVu Sans"],
            "figure.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
        }
    )
