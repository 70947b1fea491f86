"""Checks on the book's MyST sources that need no build: cross-references and the figure font.

Every heading that carries a seed section number ("## S04.3.5 ...") has a label, and every mention
of a section number in the prose is a link to it, so a reader can follow "see S04.7" with a click.
Every character a figure can draw is in the vendored font, so `make book` gives the same Chinese
figures on any machine (a missing glyph would otherwise surface as a build warning far from here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.md"))
#: a numbered heading; "S04.7（续）" is the second page of a section that was split, labelled s04-7b (S04.4（续）: s04-4b)
HEADING = re.compile(r"^#+ S04\.(\d+(?:\.\d+)*)(?![\w.])(（续）)?")
MENTION = re.compile(r"(?<![\w.`<-])S04\.\d+(?:\.\d+)*(?![\w-]|\.\d)")
# spans in a prose line that are not prose: inline code, math, roles, links, HTML
NOT_PROSE = re.compile(r"(`+)[^`]*?\1|\$\$.*?\$\$|\$[^$]*\$|\{[a-z:-]+\}`[^`]*`|\[[^\]]*\]\([^)]*\)|<[^>]+>")
# fences whose body is code or math, not markdown (a {note} or ::: block holds prose)
CODE_FENCE = re.compile(r"^(\{(code-cell|math|raw|eval-rst)\}.*|[A-Za-z0-9_+-]+)?$")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def split_page(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(prose lines, code lines) of a MyST page, each as (line number, text)."""
    prose, code = [], []
    fence, in_code, front = None, False, False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped == "---":
            front = True
            continue
        if front:
            front = stripped != "---"
            continue
        if fence and stripped.startswith(fence) and not stripped.strip("`~:"):
            fence, in_code = None, False
            continue
        opening = re.match(r"^(`{3,}|~{3,}|:{3,})(.*)$", stripped)
        if opening and not fence:
            fence = opening.group(1)
            in_code = not fence.startswith(":") and bool(CODE_FENCE.match(opening.group(2).strip()))
            continue
        (code if in_code else prose).append((number, line))
    return prose, code


def heading_label(match: re.Match) -> str:
    """The label a numbered heading must carry: S04.4.1 -> s04-4-1, S04.4（续） -> s04-4b, S04.7（续） -> s04-7b."""
    return "s04-" + match.group(1).replace(".", "-") + ("b" if match.group(2) else "")


def labels() -> set[str]:
    found = set()
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            if match := HEADING.match(line):
                found.add(heading_label(match))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_numbered_heading_has_its_label(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    missing = []
    for i, line in enumerate(lines):
        if match := HEADING.match(line):
            label = f"({heading_label(match)})="
            previous = [candidate for candidate in lines[:i] if candidate.strip()]
            if not previous or previous[-1].strip() != label:
                missing.append(f"{page.name}:{i + 1}: {line.strip()} needs {label} on the line above")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_section_numbers_in_the_prose_are_links(page):
    prose, _ = split_page(page.read_text(encoding="utf-8"))
    plain = []
    for number, line in prose:
        if HEADING.match(line) or re.fullmatch(r"\(s04[-\w]*\)=", line.strip()):
            continue
        for mention in MENTION.finditer(NOT_PROSE.sub(" ", line)):
            plain.append(f"{page.name}:{number}: {mention.group(0)} -> {{ref}}`{mention.group(0)} <...>`")
    assert not plain, "plain section numbers, write them as links:\n" + "\n".join(plain)


def test_every_link_target_exists():
    known = labels()
    dangling = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for target in re.findall(r"\{ref\}`[^`<]*<(s04-[\w-]+)>`", line):
                if target not in known:
                    dangling.append(f"{page.name}:{number}: {target}")
    assert not dangling, "\n".join(dangling)


def test_the_vendored_font_covers_every_character_a_figure_draws():
    font = ROOT / "book" / "fonts" / "S04SansSC-Regular.otf"
    cmap = TTFont(font).getBestCmap()
    missing = {}
    for page in PAGES:
        _, code = split_page(page.read_text(encoding="utf-8"))
        for number, line in code:
            # a comment is never drawn; anything else in a code cell may end up in a figure
            drawn = line.split("#", 1)[0] if "#" in line and not re.search(r"[\"'].*#", line) else line
            for char in CJK.findall(drawn):
                if ord(char) not in cmap:
                    missing.setdefault(char, f"{page.name}:{number}")
    assert not missing, (
        f"characters not in {font.name}; add them to book/fonts/subset_font.py and regenerate: "
        + ", ".join(f"{char} ({where})" for char, where in sorted(missing.items()))
    )


def test_every_character_of_the_prose_has_a_glyph_in_the_book_font():
    """Page text (titles, prose, tables) uses only characters the book's own font draws: no emoji, which
    show as empty boxes on a machine without an emoji font (the one CI's browser runs on), and nothing
    the PDF's fonts would drop. The stars are served to the HTML from a subset of this font."""
    font = ROOT / "book" / "fonts" / "S04SansSC-Regular.otf"
    cmap = TTFont(font).getBestCmap()
    missing = {}
    for page in [*PAGES, ROOT / "_toc.yml"]:
        text = page.read_text(encoding="utf-8")
        lines = split_page(text)[0] if page.suffix == ".md" else enumerate(text.splitlines(), start=1)
        for number, line in lines:
            for char in line:
                if ord(char) > 0x7E and ord(char) not in cmap:
                    missing.setdefault(char, f"{page.name}:{number}")
    assert not missing, (
        "characters without a glyph in "
        + font.name
        + ": "
        + ", ".join(f"{char!r} U+{ord(char):04X} ({where})" for char, where in sorted(missing.items()))
    )


def test_the_glossary_has_at_least_forty_terms_each_defined_with_a_pointer():
    text = (ROOT / "book" / "notation.md").read_text(encoding="utf-8")
    start = text.index("```{glossary}")
    body = text[start : text.index("```", start + 3)].splitlines()[1:]
    terms = {}
    for line in body:
        if line and not line.startswith(" "):
            terms[line] = ""
        elif line.strip():
            terms[list(terms)[-1]] += line
    assert len(terms) >= 40, len(terms)
    undefined = [t for t, d in terms.items() if not re.search(r"\{(ref|cite)\}`", d)]
    assert not undefined, f"glossary terms without a section or reference to read on: {undefined}"


def test_the_stars_font_the_pages_load_draws_both_stars():
    static = ROOT / "book" / "_ext" / "static"
    cmap = TTFont(static / "s04-stars.otf").getBestCmap()
    assert {0x2605, 0x2606} <= set(cmap)
    css = (static / "course_reader.css").read_text(encoding="utf-8")
    assert 'src: url("s04-stars.otf")' in css and '--pst-font-family-base-system: "S04 Stars"' in css


def _theme_options(repository_url: str | None) -> dict:
    """html_theme_options as Jupyter Book makes them from _config.yml (with repository.url replaced),
    after the book's own config-inited hook."""
    import sys
    from types import SimpleNamespace

    import yaml
    from jupyter_book.config import get_final_config

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from course_reader import launch_buttons_need_the_repository

    user = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    if repository_url is not None:
        user["repository"]["url"] = repository_url
    sphinx_config, _ = get_final_config(user_yaml=user, cli_config={"latex_individualpages": False}, sourcedir=ROOT)
    config = SimpleNamespace(html_theme_options=sphinx_config["html_theme_options"])
    launch_buttons_need_the_repository(None, config)
    return config.html_theme_options


def test_launch_buttons_appear_with_the_repository_url_and_only_then():
    off = _theme_options(None)["launch_buttons"]
    assert not any(value for key, value in off.items() if key.endswith("_url")), off
    on = _theme_options("https://github.com/example-org/s04-course")
    assert on["repository_url"] == "https://github.com/example-org/s04-course"
    assert on["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert on["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    # Jupyter Book's own default repository is not this course's
    default = _theme_options("https://github.com/executablebooks/jupyter-book")["launch_buttons"]
    assert not default.get("binderhub_url")


def test_the_table_helper_shows_each_number_as_its_column_format_gives_it():
    """book/table_helpers.py, which the pages' results tables go through: the column's format and nothing else
    decides a number's text, in the Markdown the book and the notebooks render and in the aligned text (what
    tests/test_book.py reads); a bar or a star in a header stays text; a missing value is a dash."""
    import sys

    import numpy as np
    from markdown_it import MarkdownIt

    sys.path.insert(0, str(ROOT / "book"))
    from table_helpers import _markdown_and_text

    rows = [("explicit", np.float64(8.627e-09), 3, None), ("rk4", 0.9999, 12, 1.5)]
    markdown, plain = _markdown_and_text(
        rows, ["积分器", "||dx/dx0||", "n", "eps=1e-3"], [None, ".4g", "d", ".2f"], caption="20 s 末 h*omega"
    )
    assert plain.splitlines() == [
        "20 s 末 h*omega",
        "积分器    ||dx/dx0||   n  eps=1e-3",  # a Chinese character is two columns wide
        "--------  ----------  --  --------",
        "explicit   8.627e-09   3         —",
        "rk4           0.9999  12      1.50",
    ]
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[hd][^>]*>.*?</t[hd]>", html)]
    # the hyphen of a number in a header or a text cell is followed by a word joiner (no line break after it)
    assert [cell.replace("\u2060", "") for cell in cells] == [
        "积分器", "||dx/dx0||", "n", "eps=1e-3", "explicit", "8.627e-09", "3", "—", "rk4", "0.9999", "12", "1.50",
    ]  # fmt: skip
    assert "<strong>20 s 末 h*omega</strong>" in html and '<td style="text-align:right">0.9999</td>' in html
    with pytest.raises(ValueError, match="a row has 2 values for 4 headers"):
        _markdown_and_text([(1, 2)], ["a", "b", "c", "d"])
