"""The book as a reader sees it: the built HTML served on localhost and read by headless Chromium.

The browser is Debian's ``chromium`` driven through Playwright (``executable_path``; Playwright's
own browser downloads are never used). Every request that leaves localhost is blocked and counted
as a failure, so the pages must render completely with the network off: a formula that needs a
CDN stays raw TeX here and fails the test.

Without a chromium binary these tests skip with a message; where the ``CI`` environment variable
is set (``.ci/run`` sets it after installing chromium) they fail instead of skipping.
``CHROMIUM=/path/to/chromium`` picks another binary.
Screenshots of a few pages at desktop and phone width are written to ``_build/screenshots/``.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import sys
import threading
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import nbformat
import pytest

from autograder.ops.student_edition import toc_pages

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "screenshots"
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LOCAL_HOSTS = ("127.0.0.1", "localhost")

pytestmark = [
    pytest.mark.book,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.xdist_group("book"),
]


PAGES = toc_pages() + ["search", "genindex"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # chromium closes a connection it no longer needs (a page left while a file loads): a broken pipe here is
        # not the book's, and its traceback only cluttered the CI log
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def site(built_book):
    server = _Server(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(built_book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class Reader:
    """One browser context with the network cut off; records everything a reader would notice."""

    def __init__(self, browser, **context_options):
        self.problems: list[str] = []
        self.context = browser.new_context(**context_options)
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"uncaught JavaScript error: {error}"))
        self.page.on("response", self._response)

    def _route(self, route):
        url = route.request.url
        if url.startswith(("data:", "blob:", "file:")) or urlparse(url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.problems.append(f"request to the network (blocked): {url}")
            route.abort("internetdisconnected")

    def _console(self, message):
        if message.type == "error":
            self.problems.append(f"console error: {message.text} ({message.location.get('url', '')})")

    def _response(self, response):
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status} for {response.url}")

    def open(self, url):
        self.page.goto(url, wait_until="load")
        self.page.evaluate(READY_JS)
        return self.page

    def close(self):
        self.context.close()


# Wait until MathJax has typeset the page and every image has loaded or failed.
READY_JS = """async () => {
  for (const img of document.images) img.loading = "eager";
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await Promise.all([...document.images].map((img) => img.complete ? null : new Promise((resolve) => {
    img.addEventListener("load", resolve); img.addEventListener("error", resolve);
  })));
}"""

AUDIT_JS = r"""() => {
  const math = [...document.querySelectorAll("span.math, div.math")];
  const unrendered = math.filter((el) => !el.querySelector("mjx-container")).map((el) => el.textContent.slice(0, 100));
  const mathErrors = [];
  const mj = window.MathJax && MathJax.startup && MathJax.startup.document ? MathJax.startup : null;
  if (mj) {
    for (const item of mj.document.math) {
      // merror: TeX that failed to parse; mathcolor red: an undefined macro shown as text
      if (/<merror|mathcolor="red"/.test(mj.toMML(item.root))) mathErrors.push(item.math.slice(0, 120));
    }
  }
  const rawTex = [];
  const main = document.querySelector("main") || document.body;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest("pre, code, script, style, textarea, mjx-container, .math")) continue;
    if (/\$\$|\$[^$]*\\[A-Za-z]+/.test(node.textContent)) rawTex.push(node.textContent.trim().slice(0, 100));
  }
  const images = [...document.images].map((img) => {
    const box = img.getBoundingClientRect();
    return {src: img.getAttribute("src"), loaded: img.complete && img.naturalWidth > 0 && img.naturalHeight > 0,
            shown: img.getClientRects().length > 0, width: box.width, height: box.height};
  });
  const cells = [...document.querySelectorAll("div.cell")].map((cell) => {
    const out = cell.querySelector(".cell_output");  // inside <details> for hide-output cells
    return {output: !!out, height: out ? out.getBoundingClientRect().height : 0,
            error: !!cell.querySelector(".output.traceback, .output.error, .output.stderr")};
  });
  let typeset = 0;
  if (mj) for (const item of mj.document.math) typeset += 1;
  return {mathCount: math.length, typeset, unrendered, mathErrors, rawTex,
          images, cells, links: [...document.querySelectorAll("a[href]")].map((a) => a.href)};
}"""

# Content that sticks out of a phone screen: anything beyond the right edge must sit in a box that
# scrolls sideways (code, wide tables, long formulas) and that box must itself fit the screen;
# otherwise the reader cannot reach it at all.
OVERFLOW_JS = r"""() => {
  const edge = window.innerWidth + 1;
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const cut = [];
  for (const el of document.querySelectorAll("article.bd-article *")) {
    const box = el.getBoundingClientRect();
    if (box.right <= edge || !box.width || el.closest("mjx-assistive-mml")
        || !el.checkVisibility({visibilityProperty: true, checkVisibilityCSS: true})) continue;
    let reachable = false;
    for (let up = el.parentElement; up && !up.matches("article"); up = up.parentElement) {
      // a box that scrolls sideways and fits the screen (it may itself sit in a wider scroller)
      if (scrolls(up) && up.getBoundingClientRect().right <= edge) { reachable = true; break; }
    }
    if (!reachable) cut.push(el.tagName + "." + String(el.className.baseVal ?? el.className) + ": " + (el.textContent || "").trim().slice(0, 60));
  }
  // table cells squeezed to a character or two per line (Chinese text breaks anywhere)
  const squeezed = [...document.querySelectorAll("article.bd-article table :is(th, td)")]
    .filter((cell) => cell.textContent.trim().length > 3 && cell.getBoundingClientRect().width < 48)
    .map((cell) => cell.textContent.trim().slice(0, 30));
  // a table printed as text (three or more lines of three or more numbers, apart by spaces or bars) that is wider than its output box:
  // the box scrolls, so the check above lets it pass, but the right-hand columns lie past the screen's edge
  // with nothing to show that they exist (S04.3's step-size sweep lost its RK4 column so)
  const number = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?$/;
  const numericRow = (line) => { const words = line.split(/[\s|]+/).filter(Boolean); return words.length >= 3 && words.every((w) => number.test(w)); };
  const printedTables = [...document.querySelectorAll("article.bd-article .cell_output pre")]
    .filter((pre) => pre.scrollWidth > pre.clientWidth + 1 && pre.textContent.split("\n").filter(numericRow).length >= 3)
    .map((pre) => pre.textContent.trim().slice(0, 60));
  // a figure squeezed below 0.58 of its drawn width: its labels shrink below about 9 px (course_reader.js keeps 0.6)
  const shrunk = [...document.querySelectorAll("article.bd-article img")]
    .filter((img) => img.naturalWidth && img.checkVisibility({visibilityProperty: true, checkVisibilityCSS: true})
            && img.getBoundingClientRect().width < 0.58 * img.naturalWidth)
    .map((img) => `${(img.alt || img.src).slice(-60)}: ${Math.round(img.getBoundingClientRect().width)} of ${img.naturalWidth} px`);
  return {scroll: document.documentElement.scrollWidth, width: window.innerWidth, cut: cut.slice(0, 8),
          squeezed: squeezed.slice(0, 8), printedTables: printedTables.slice(0, 8), shrunk: shrunk.slice(0, 8)};
}"""


@functools.lru_cache(maxsize=None)
def _ids(path: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8")))


def _broken_links(links, base, built_book):
    broken = []
    for href in links:
        parsed = urlparse(href)
        if parsed.scheme not in ("http", "https") or not href.startswith(base):
            continue  # mailto:, javascript:, and links to other sites (not loaded, only clicked)
        path = built_book / unquote(parsed.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            broken.append(f"{href}: no such file")
        elif parsed.fragment and path.suffix == ".html" and unquote(parsed.fragment) not in _ids(path):
            broken.append(f"{href}: no element with this id")
    return sorted(set(broken))


def _expected_output_cells(built_book, page):
    """For each code cell on the page: "shown", "folded" (hide-output: behind a click) or None."""
    ipynb = built_book / "_sources" / f"{page}.ipynb"
    if not ipynb.is_file():
        return None
    nb = nbformat.read(ipynb, as_version=4)
    expected = []
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if cell.cell_type != "code" or "remove-cell" in tags:
            continue
        if not cell.outputs or "remove-output" in tags:
            expected.append(None)
        else:
            expected.append("folded" if {"hide-output", "hide-cell"} & tags else "shown")
    return expected


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline_without_errors(browser, site, built_book, page):
    """No console error, no network request, every formula typeset, every image and link good,
    every code cell's output shown; and at phone width (390 px) the text fits the screen, every table of
    results is a real table (one printed as text hides its last columns past the edge), and every figure keeps
    at least 0.6 of its drawn width, scrolling sideways in its box."""
    reader = Reader(browser, **DESKTOP)
    try:
        reader.open(site + page + ".html")
        audit = reader.page.evaluate(AUDIT_JS)
        reader.page.set_viewport_size(PHONE["viewport"])
        reader.page.wait_for_timeout(200)  # let the layout settle at the new width
        overflow = reader.page.evaluate(OVERFLOW_JS)
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    assert not audit["unrendered"], f"formulas left as raw TeX: {audit['unrendered'][:5]}"
    assert not audit["mathErrors"], f"formulas MathJax could not typeset: {audit['mathErrors'][:5]}"
    assert not audit["rawTex"], f"TeX outside math markup (a $...$ that was not parsed): {audit['rawTex'][:5]}"
    assert audit["typeset"] >= audit["mathCount"]
    bad_images = [
        img["src"]
        for img in audit["images"]
        if not img["loaded"] or (img["shown"] and not img["width"] * img["height"])
    ]
    assert not bad_images, f"images that did not load or have no size: {bad_images}"
    broken = _broken_links(audit["links"], site, built_book)
    assert not broken, "\n".join(broken)
    expected = _expected_output_cells(built_book, page)
    if expected is not None:
        assert len(audit["cells"]) == len(expected), "code cells on the page differ from the notebook"
        for i, (cell, output) in enumerate(zip(audit["cells"], expected)):
            assert not cell["error"], f"code cell {i} shows an error or stderr"
            if output:
                assert cell["output"], f"code cell {i} has output in the notebook but none on the page"
            if output == "shown":
                assert cell["height"] > 0, f"code cell {i}: its output takes no space on the page"
    assert overflow["scroll"] <= overflow["width"] + 1 and not overflow["cut"], f"cut off on a phone: {overflow}"
    assert not overflow["squeezed"], f"table columns squeezed on a phone: {overflow}"
    assert not overflow["shrunk"], f"figures shrunk past legibility on a phone: {overflow['shrunk']}"
    assert not overflow["printedTables"], (
        f"a table printed as text runs past its box on a phone; show it with book/table_helpers.py: {overflow}"
    )


def test_book_opened_from_disk_renders_its_formulas(browser, built_book):
    """README / run_locally: `_build/html/index.html` opened as a file, no server, no network."""
    reader = Reader(browser, **DESKTOP)
    try:
        page = reader.open((built_book / "book" / "s04_3.html").as_uri())
        audit = page.evaluate(AUDIT_JS)
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    assert audit["mathCount"] > 50 and not audit["unrendered"] and not audit["mathErrors"]
    assert all(img["loaded"] for img in audit["images"])


def _when_in_book(*pages):
    """Expectations on pages that are being written: they apply once the page is in _toc.yml."""
    return {page for page in pages if page in PAGES}


# query -> pages that must be among the results
SEARCHES = {
    "伴随": {"book/s04_3", "book/s04_4"} | _when_in_book("book/s04_7"),
    "隐式欧拉": {"book/s04_3"},
    "互补": {"book/s04_4", "book/s04_0"} | _when_in_book("book/s04_5"),
    "互补条件": {"book/s04_0"},
    # not an index term: the course's query splitter cuts it into 隐式欧拉 + 稳定域
    "隐式欧拉的稳定域": {"book/s04_3"},
}
if "book/s04_7" in PAGES:
    SEARCHES["伴随法"] = {"book/s04_7"}  # the adjoint method: title of S04.7
if "book/s04_5" in PAGES:
    SEARCHES["互补约束"] = {"book/s04_5"}  # complementarity constraints: title of S04.5


def _search(reader, site, query):
    page = reader.open(site + "search.html?q=" + quote(query))
    page.wait_for_function(
        "() => { const s = document.querySelector('#search-results .search-summary'); return s && s.innerText.trim(); }"
    )
    hrefs = page.eval_on_selector_all("#search-results ul.search li > a", "els => els.map(a => a.href)")
    return [unquote(urlparse(h).path).lstrip("/").removesuffix(".html") for h in hrefs]


# Text of the search-result snippets outside typeset formulas, once every snippet has arrived.
SNIPPET_TEXT_JS = r"""() => {
  const items = document.querySelectorAll("#search-results ul.search li");
  const snippets = document.querySelectorAll("#search-results ul.search li p.context");
  if (snippets.length < items.length) return null;
  return [...snippets].map((p) => {
    const copy = p.cloneNode(true);
    copy.querySelectorAll("mjx-container").forEach((m) => m.remove());
    return copy.textContent;
  });
}"""


@pytest.mark.parametrize("query", list(SEARCHES))
def test_chinese_search_finds_the_right_sections(browser, site, query):
    reader = Reader(browser, **DESKTOP)
    try:
        found = _search(reader, site, query)
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    assert SEARCHES[query] <= set(found), (query, found)


def test_search_for_an_absent_term_finds_nothing(browser, site):
    reader = Reader(browser, **DESKTOP)
    try:
        # "wine making": neither it nor any word inside it is in the book (the query splitter
        # would otherwise search for the words it contains, e.g. 动力学 in 量子色动力学)
        found = _search(reader, site, "葡萄酒酿造")
    finally:
        reader.close()
    assert found == []


def test_formulas_in_search_snippets_are_typeset(browser, site):
    reader = Reader(browser, **DESKTOP)
    try:
        found = _search(reader, site, "互补条件")  # S04.0's snippet holds \(\phi(q)\ge 0, ...\)
        assert found
        reader.page.wait_for_function(
            f"() => {{ const t = ({SNIPPET_TEXT_JS})(); return t && !t.some((s) => s.includes('\\\\(') && s.includes('\\\\)')); }}",
            timeout=20_000,
        )
        typeset = reader.page.locator("#search-results p.context mjx-container").count()
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    assert typeset > 0


def test_self_test_answers_are_collapsed_until_clicked(browser, site):
    reader = Reader(browser, **DESKTOP)
    try:
        page = reader.open(site + "book/s04_0.html")
        dropdowns = page.locator(".admonition.dropdown")
        assert dropdowns.count() >= 5  # one collapsed answer per self-test question
        first = dropdowns.first
        answer = first.locator(":scope > :not(.admonition-title)").first
        assert "参考答案" in first.locator(".admonition-title").inner_text()
        assert not answer.is_visible()
        first.locator(".admonition-title").click()
        answer.wait_for(state="visible")
        assert answer.inner_text().strip()
        assert not dropdowns.nth(1).locator(":scope > :not(.admonition-title)").first.is_visible()
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)


def test_page_offers_its_notebook_for_download(browser, site, tmp_path):
    reader = Reader(browser, **DESKTOP)
    try:
        page = reader.open(site + "book/s04_3.html")
        page.click(".dropdown-download-buttons button.dropdown-toggle")
        link = page.locator("a.btn-download-notebook-button")
        link.wait_for(state="visible")
        assert link.inner_text().strip() == ".ipynb"
        with page.expect_download() as download_info:
            link.click()
        target = tmp_path / "s04_3.ipynb"
        download_info.value.save_as(target)
        # text_content: the setup cell is collapsed behind its toggle (hide-input), so not visible text
        code_on_page = page.locator("div.cell .cell_input pre").first.text_content()
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    nb = nbformat.read(target, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code[0].source.strip() == code_on_page.strip()
    # executed: every cell ran, in order, and the outputs come along (a cell that only defines has none;
    # remove-cell cells only glue numbers into the text, and myst-nb keeps no output of theirs here)
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert sum(bool(cell.outputs) for cell in code) >= len(code) // 2
    assert nb.metadata["kernelspec"]["name"] == "python3"


def _pages_with_sliders(built_book):
    return [page for page in PAGES if "s04-slider-frame" in (built_book / f"{page}.html").read_text(encoding="utf-8")]


# Every slider on the page: its frames' values, the <output> text, and each visible frame as
# [its value, decoded, a digest of its picture] (PNGs share their first and last bytes, so all of it).
SLIDER_STATE_JS = """() => [...document.querySelectorAll(".s04-slider")].map((box) => {
  const digest = (text) => { let h = 0; for (let j = 0; j < text.length; j++) h = (h * 31 + text.charCodeAt(j)) | 0; return h; };
  const shown = [...box.querySelectorAll("img.s04-slider-frame")].filter((im) => im.checkVisibility());
  return {shown: shown.map((im) => [im.dataset.value, im.naturalWidth > 0, digest(im.src)]),
          output: box.querySelector("output").textContent,
          values: [...box.querySelectorAll("img.s04-slider-frame")].map((im) => im.dataset.value),
          inFigure: !!box.closest("figure"), caption: (box.closest("figure")?.querySelector("figcaption")?.textContent || "")};
})"""


def test_sliders_move_through_their_frames_offline(browser, site, built_book):
    """Each slider (book/sliders.py) shows one frame at a time, with its value next to the input; dragging
    it with the keyboard or setting it shows another frame, in a numbered figure, and nothing leaves localhost."""
    pages = _pages_with_sliders(built_book)
    sliders = 0
    reader = Reader(browser, **DESKTOP)
    try:
        for page_name in pages:
            page = reader.open(site + page_name + ".html")
            before = page.evaluate(SLIDER_STATE_JS)
            for i, state in enumerate(before):
                sliders += 1
                where = f"{page_name} slider {i}"
                assert len(state["values"]) >= 4, where
                assert state["inFigure"] and re.match(r"\s*图\s*\d+", state["caption"]), where
                assert len(state["shown"]) == 1 and state["shown"][0][1], f"{where}: not exactly one frame shown"
                assert state["output"] == state["shown"][0][0], where
                control = page.locator(".s04-slider input[type=range]").nth(i)
                seen = {state["shown"][0][2]}
                control.focus()
                for key in ("Home", "ArrowRight", "End"):
                    control.press(key)
                    now = page.evaluate(SLIDER_STATE_JS)[i]
                    assert len(now["shown"]) == 1 and now["shown"][0][1], f"{where} after {key}"
                    assert now["output"] == now["shown"][0][0], f"{where} after {key}"
                    seen.add(now["shown"][0][2])
                assert len(seen) >= 3, f"{where}: moving the slider did not change the picture"
                middle = len(state["values"]) // 2
                control.fill(str(middle))  # a value set directly (a drag) fires the same input event
                now = page.evaluate(SLIDER_STATE_JS)[i]
                assert [value for value, *_ in now["shown"]] == [state["values"][middle]] == [now["output"]], where
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    assert sliders >= 3, f"the book has {sliders} sliders on {pages}; the third edition asks for three to five"


SCREENSHOT_PAGES = ["book/index", "book/s04_3", "book/s04_1"]


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_screenshots_of_representative_pages(browser, site, width):
    """Artifacts for a person to look at (git-ignored): _build/screenshots/<page>-<width>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    reader = Reader(browser, **(DESKTOP if width == "desktop" else PHONE))
    try:
        for page_name in SCREENSHOT_PAGES:
            page = reader.open(site + page_name + ".html")
            path = SCREENSHOTS / f"{page_name.replace('/', '_')}-{width}.png"
            page.screenshot(path=str(path), full_page=True)
            assert path.stat().st_size > 10_000
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def browser_without_cjk_fonts(browser, chromium_path, tmp_path_factory):
    """The same chromium, launched as on a machine with no CJK font: fontconfig sees only DejaVu."""
    folder = tmp_path_factory.mktemp("fontconfig")
    dirs = "".join(f"<dir>{d}</dir>" for d in ["/usr/share/fonts/truetype/dejavu"] if Path(d).is_dir())
    (folder / "fonts.conf").write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">'
        f"<fontconfig>{dirs}<cachedir>{folder / 'cache'}</cachedir></fontconfig>",
        encoding="utf-8",
    )
    env = {**os.environ, "FONTCONFIG_FILE": str(folder / "fonts.conf")}
    chromium = browser.browser_type.launch(executable_path=chromium_path, env=env)
    yield chromium
    chromium.close()


# The fonts chromium drew a node's own text with (Chrome DevTools Protocol), after the page's fonts loaded
def _fonts_drawing(page, selector: str) -> list[dict]:
    page.evaluate("document.fonts.ready.then(() => null)")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, selector
    return cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


CJK_CHAR = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


@pytest.mark.parametrize("selector", ["figure figcaption span.caption-text", "nav.bd-links a.current"])
def test_chinese_text_has_the_books_own_font_where_the_system_has_none(browser_without_cjk_fonts, site, selector):
    """No empty boxes on a machine without a CJK font (a fresh Linux, CI's own): the pages fall back to the
    book's font, which every character of the page text is in (test_book_sources)."""
    reader = Reader(browser_without_cjk_fonts, **DESKTOP)
    try:
        page = reader.open(site + "book/s04_3.html")
        text = page.locator(selector).first.evaluate(
            "(el) => [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('')"
        )
        fonts = _fonts_drawing(page, selector)
        problems = list(reader.problems)
    finally:
        reader.close()
    assert not problems, "\n".join(problems)
    cjk = len(CJK_CHAR.findall(text))
    assert cjk >= 3, (selector, text)
    # by PostScript name: the stars' cut of the same font is "S04Stars-Regular", and chromium reports the empty
    # box of a character no font has in the font it fell through to
    ours = [f for f in fonts if f["postScriptName"] == "S04SansSC-Regular" and f["isCustomFont"]]
    assert ours and ours[0]["glyphCount"] >= cjk, (text, fonts)
