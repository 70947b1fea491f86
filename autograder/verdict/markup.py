"""Untrusted markup (HTML, and markdown as nbconvert renders it) made inert for the instructor's browser.

Formgrader and the feedback pages render a student's HTML outputs as they are and a student's markdown
through nbconvert's mistune renderer, which passes raw HTML through and lets ``javascript:`` links by.
Both are reduced here to an allow-list of tags, attributes, URL schemes and CSS properties with bleach
(html5lib parses as a browser does); what is not allowed is escaped, so the instructor sees the attempt
as text instead of running it.

Markdown is not HTML: cleaning its source as HTML would also mangle ``a<b`` in formulas, quotes (``>``)
and ``&`` in aligned equations of honest answers. So a markdown source is left untouched when it renders
inert, is cleaned as HTML when it holds raw HTML, and is shown as plain text when neither gives an inert
page (a harmful markdown link, a mermaid block, a render error): see :func:`sanitize_markdown`.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

import bleach
from bleach.css_sanitizer import CSSSanitizer
from bleach.html5lib_shim import convert_entities
from bleach.sanitizer import INVISIBLE_CHARACTERS_RE, INVISIBLE_REPLACEMENT_CHAR
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

TAGS = frozenset(
    {
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "code",
        "col",
        "colgroup",
        "dd",
        "del",
        "div",
        "dl",
        "dt",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "input",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
        "var",
    }
)
_COMMON = {"title", "class", "style", "align"}
_PER_TAG = {
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "ol": {"start"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "table": {"border"},
    **{f"h{n}": {"id"} for n in range(1, 7)},  # nbconvert's heading anchors
}
#: CSS properties that take no URL (no ``background``, ``border-image``, ``cursor``, ...) and cannot
#: lift an element over the page (no ``position``, ``z-index``)
CSS_PROPERTIES = frozenset(
    {
        "text-align",
        "vertical-align",
        "color",
        "background-color",
        "font-weight",
        "font-style",
        "text-decoration",
        "white-space",
        "width",
        "height",
        "min-width",
        "max-width",
        "padding",
        "margin",
        "border",
        "border-collapse",
        "border-color",
        "border-style",
        "border-width",
    }
)
#: schemes bleach lets through; ``data`` only reaches :func:`_allowed_attribute`'s image rule
PROTOCOLS = frozenset({"http", "https", "mailto", "data"})
_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp)[;,]")
_URL_ATTRIBUTES = {"href", "src"}


def _normalized_url(value: str) -> str:
    # the normalisation bleach applies before it reads a scheme: entities, whitespace and controls, non-ASCII
    url = re.sub(r"[`\000-\040\177-\240\s]+", "", convert_entities(value))
    return re.sub(r"[^\x00-\x7f]", "", url).lower()


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if (
        name not in _COMMON
        and name not in _PER_TAG.get(tag, ())
        and not (tag == "input" and name in ("type", "checked", "disabled"))
    ):
        return False
    if tag == "input" and name == "type" and value.strip().lower() != "checkbox":  # markdown task lists only
        return False
    if name == "class" and "mermaid" in value.lower():  # would hand the text to mermaid.js on the page
        return False
    if name in _URL_ATTRIBUTES and _normalized_url(value).startswith("data:"):
        return tag == "img" and name == "src" and bool(_DATA_IMAGE.match(_normalized_url(value)))
    if tag == "img" and name == "src":  # a remote image would make the instructor's browser fetch a URL
        return False
    return True


#: bleach checks property names only; a value may still call script in old engines, fetch a URL, or hide
#: either behind CSS escapes or comments
_CSS_ACTIVE = re.compile(r"expression|url\s*\(|image-set|javascript:|vbscript:|@import|behaviou?r|binding|\\|/\*", re.I)


class _CSSValues(CSSSanitizer):
    def sanitize_css(self, style):
        cleaned = super().sanitize_css(style)
        return "" if _CSS_ACTIVE.search(cleaned) else cleaned


_CLEANER = bleach.Cleaner(
    tags=TAGS,
    attributes=_allowed_attribute,
    protocols=PROTOCOLS,
    strip=False,
    strip_comments=True,
    css_sanitizer=_CSSValues(allowed_css_properties=CSS_PROPERTIES),
)


def _as_text(text: str) -> str:
    # what bleach and html5lib do to text (invisible controls, newlines), then every '<', '>' and '&' escaped
    text = INVISIBLE_CHARACTERS_RE.sub(INVISIBLE_REPLACEMENT_CHAR, text.replace("\r\n", "\n").replace("\r", "\n"))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clean_html(html: str) -> str:
    """``html`` reduced to the allow-list; what is not allowed is escaped to text. Idempotent.

    Badly nested HTML (``<a>`` around a ``<table>``, ...) can parse into another tree once serialised;
    cleaning is repeated until the result stands still, and HTML that never does is shown as text.
    """
    out = _CLEANER.clean(html)
    for _ in range(3):
        again = _CLEANER.clean(out)
        if again == out:
            return out
        out = again
    return _as_text(html)


class _StartTags(HTMLParser):
    """The start tags of a page with their attributes, and whether it has comments or declarations."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = Counter()
        self.other = False

    def handle_starttag(self, tag, attrs):
        norm = ((k, re.sub(r"[\s;]+", "", v or "") if k == "style" else v or "") for k, v in attrs)
        self.tags[(tag, tuple(sorted(norm)))] += 1

    handle_startendtag = handle_starttag

    def _other(self, data):
        self.other = True

    handle_comment = handle_decl = handle_pi = unknown_decl = _other


def _start_tags(html: str) -> _StartTags:
    parser = _StartTags()
    parser.feed(html)
    parser.close()
    return parser


def is_clean(html: str) -> bool:
    """True when cleaning ``html`` would remove nothing: every tag keeps every attribute, no comment.

    Cleaning may restructure a page (close a ``<p>`` before a ``<table>``, add a ``<tbody>``), which is
    not a removal; an escaped tag, a dropped attribute or a dropped comment is.
    """
    page = _start_tags(html)
    return not page.other and not page.tags - _start_tags(clean_html(html)).tags


class _Renderer(IPythonRenderer):
    """nbconvert's markdown renderer (as ``HTMLExporter.markdown2html`` sets it up), noting raw HTML."""

    raw_html = False

    def inline_html(self, html):
        self.raw_html = True
        return super().inline_html(html)

    def block_html(self, html):
        self.raw_html = True
        return super().block_html(html)


def render_markdown(source: str, attachments=None) -> tuple[str, bool]:
    """``(html, has_raw_html)``: the HTML nbconvert makes of ``source`` and whether raw HTML passed through."""
    renderer = _Renderer(escape=False, attachments=attachments or {})
    return MarkdownWithMath(renderer=renderer).render(source), renderer.raw_html


def _renders_clean(source: str, attachments, allow_raw_html: bool) -> bool:
    try:
        html, raw = render_markdown(source, attachments)
    except Exception:  # a missing attachment, a renderer bug: nbconvert would fail on it too
        return False
    return (allow_raw_html or not raw) and is_clean(html)


def _clean_markdown(source: str) -> str:
    # bleach escapes every '<' and '>' of the text; give back those that cannot open a tag in markdown
    # either (not followed by a letter, '/', '!' or '?'), so quotes and inequalities keep their meaning
    cleaned = clean_html(source).replace("&gt;", ">")
    return re.sub(r"&lt;(?![A-Za-z/!?])", "<", cleaned)


PLAIN_TEXT_NOTE = (
    "（这个单元含有可能在阅卷页面上执行的内容，或无法正常显示的内容；为安全起见，下面按原样显示为纯文本。）"
)


def as_plain_text(source: str) -> str:
    """``source`` inside a code fence longer than any run of backticks in it, after a note."""
    longest = max((len(run) for run in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{PLAIN_TEXT_NOTE}\n\n{fence}text\n{source}\n{fence}\n"


def is_plain_text(source: str) -> bool:
    """True for exactly what :func:`as_plain_text` makes: a fixed point that needs no rendering."""
    m = re.fullmatch(re.escape(PLAIN_TEXT_NOTE) + r"\n\n(`{3,})text\n(.*)\n\1\n", source, re.S)
    return bool(m) and all(len(run) < len(m[1]) for run in re.findall(r"`+", m[2]))


def sanitize_markdown(source: str, attachments=None) -> str:
    """A markdown source that nbconvert renders inert; ``source`` itself when it already does.

    Untouched when it holds no raw HTML and renders clean; cleaned as HTML when that makes it render
    clean; otherwise shown as plain text. Idempotent: each result is a fixed point of this function.
    """
    if is_plain_text(source):
        return source
    if _renders_clean(source, attachments, allow_raw_html=False):
        return source
    cleaned = _clean_markdown(source)
    if _clean_markdown(cleaned) == cleaned and _renders_clean(cleaned, attachments, allow_raw_html=True):
        return cleaned  # (a fixed point: the next run takes this same branch and returns it unchanged)
    return as_plain_text(source)
