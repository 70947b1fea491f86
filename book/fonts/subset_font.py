"""Regenerate the vendored figure font, book/fonts/S04SansSC-Regular.otf.

The figures of the book carry Chinese labels, and matplotlib's bundled fonts have no CJK glyphs.
So that ``make book`` draws them the same on any machine, the project ships its own font: a subset
of Noto Sans CJK SC Regular (SIL Open Font License 1.1, see OFL.txt here) cut to GB 2312 (all 6763
hanzi), ASCII, Latin-1, Greek, general punctuation, arrows, mathematical operators and the CJK and
full-width punctuation. It is renamed, as the OFL asks of a modified version.

Run it only when a figure needs a character outside that set (tests/test_figures_font.py names it):

    pip download --no-deps mplfonts==0.0.11   # ships NotoSansCJKsc-Regular.otf, version 1.004
    unzip -j mplfonts-0.0.11-py3-none-any.whl mplfonts/fonts/NotoSansCJKsc-Regular.otf
    python book/fonts/subset_font.py NotoSansCJKsc-Regular.otf

``python book/fonts/subset_font.py --stars`` cuts the difficulty stars (★ ☆) out of that font into
book/_ext/static/s04-stars.otf (a few kB), which the book's pages load for those two characters only
(course_reader.css): an emoji star shows as an empty box on a machine without an emoji font, and a
text star needs a font that has it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "S04SansSC-Regular.otf"
FAMILY = "S04 Sans SC"

RANGES = [
    (0x20, 0x7E),  # ASCII
    (0xA0, 0xFF),  # Latin-1
    (0x370, 0x3FF),  # Greek
    (0x2000, 0x206F),  # general punctuation
    (0x2070, 0x209F),  # super- and subscripts
    (0x2190, 0x21FF),  # arrows
    (0x2200, 0x22FF),  # mathematical operators
    (0x3000, 0x303F),  # CJK punctuation
    (0xFF00, 0xFFEF),  # full-width forms
]


def gb2312() -> set[int]:
    """Every character of GB 2312 (rows 0xA1-0xF7, cells 0xA1-0xFE), decoded."""
    chars = set()
    for row in range(0xA1, 0xF8):
        for cell in range(0xA1, 0xFF):
            try:
                chars.add(ord(bytes([row, cell]).decode("gb2312")))
            except UnicodeDecodeError:
                continue
    return chars


def codepoints() -> set[int]:
    wanted = gb2312()
    for lo, hi in RANGES:
        wanted.update(range(lo, hi + 1))
    return wanted


def rename(font: TTFont, family: str) -> None:
    """Give a cut its own family and PostScript name (the OFL asks it of a modified version, and a
    browser's font report can then tell the stars' cut from the text's)."""
    postscript = family.replace(" ", "") + "-Regular"
    for record in font["name"].names:
        if record.nameID in (1, 16):
            record.string = family
        elif record.nameID == 3:
            record.string = f"{family}; subset of Noto Sans CJK SC 1.004"
        elif record.nameID == 4:
            record.string = f"{family} Regular"
        elif record.nameID == 6:
            record.string = postscript
    font["CFF "].cff.fontNames = [postscript]


def main(source: str) -> None:
    font = TTFont(source)
    options = subset.Options()
    options.name_IDs = ["*"]
    options.layout_features = []
    options.hinting = False
    options.desubroutinize = False
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=codepoints())
    subsetter.subset(font)
    rename(font, FAMILY)
    font.save(OUTPUT)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size / 1e6:.1f} MB)")


STARS = (0x2605, 0x2606)  # ★ ☆
STARS_OUTPUT = HERE.parent / "_ext" / "static" / "s04-stars.otf"
STARS_FAMILY = "S04 Stars"


def stars() -> None:
    font = TTFont(OUTPUT)
    options = subset.Options()
    options.name_IDs = ["*"]
    options.layout_features = []
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=STARS)
    subsetter.subset(font)
    rename(font, STARS_FAMILY)
    font.save(STARS_OUTPUT)
    print(f"wrote {STARS_OUTPUT} ({STARS_OUTPUT.stat().st_size} bytes)")


if __name__ == "__main__":
    stars() if sys.argv[1] == "--stars" else main(sys.argv[1])
