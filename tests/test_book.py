"""The executable book, built once per session by the ``built_book`` fixture (tests/conftest.py).

What a reader sees in a browser is tested in tests/test_browser.py; the checks here read the
built files directly.
"""

import ast
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import jupytext
import nbformat
import pytest

pytestmark = [pytest.mark.book, pytest.mark.slow, pytest.mark.xdist_group("book")]

ROOT = Path(__file__).resolve().parents[1]


def test_index_page_shows_executed_course_lib_output(built_book):
    html = (built_book / "book" / "index.html").read_text(encoding="utf-8")
    assert "cell_output" in html
    assert "[-0.2  -0.19 -0.18 -0.17 -0.16]" in html  # printed by the executed cell
    assert "CC BY 4.0" in html


class _AssetCollector(HTMLParser):
    """URLs a browser fetches while loading a page (not the links a reader may click)."""

    def __init__(self):
        super().__init__()
        self.assets = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "video", "audio", "embed") and attrs.get("src"):
            self.assets.append(attrs["src"])
        if (
            tag == "link"
            and attrs.get("href")
            and not {"next", "prev", "index", "search", "canonical"} & set((attrs.get("rel") or "").split())
        ):
            self.assets.append(attrs["href"])
        if tag == "object" and attrs.get("data"):
            self.assets.append(attrs["data"])


def _is_remote(url):
    parsed = urlparse(url)
    return url.startswith("//") or (
        parsed.scheme in ("http", "https") and parsed.hostname not in ("localhost", "127.0.0.1")
    )


def test_no_page_loads_anything_from_the_network(built_book):
    """No CDN: every script, style sheet, font and image comes from the built book itself."""
    remote = {}
    for page in sorted(built_book.rglob("*.html")):
        collector = _AssetCollector()
        collector.feed(page.read_text(encoding="utf-8"))
        found = [url for url in collector.assets if _is_remote(url)]
        if found:
            remote[str(page.relative_to(built_book))] = found
    for sheet in sorted(built_book.joinpath("_static").rglob("*.css")):
        text = sheet.read_text(encoding="utf-8", errors="replace")
        found = [u for u in re.findall(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", text) if _is_remote(u)]
        if found:
            remote[str(sheet.relative_to(built_book))] = found
    assert not remote, f"assets loaded from outside the book: {remote}"
    # MathJax is the usual CDN dependency; it has to be bundled, fonts included.
    mathjax = built_book / "_static" / "mathjax"
    assert (mathjax / "tex-chtml.js").is_file()
    assert list(mathjax.glob("output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"))
    index = (built_book / "book" / "s04_3.html").read_text(encoding="utf-8")
    assert re.search(r'<script[^>]+src="\.\./_static/mathjax/tex-chtml\.js', index)


def _search_index(built_book):
    text = (built_book / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def _pages_with_term(index, term):
    pages = set()
    for mapping in (index["terms"], index["titleterms"]):
        hits = mapping.get(term, [])
        pages |= {index["docnames"][i] for i in ([hits] if isinstance(hits, int) else hits)}
    return pages


# Chinese course terms and pages that must be found for them. Pages still being written (S04.5
# 互补约束, S04.7 伴随法) count once they are in the built book.
SEARCH_EXPECTATIONS = {
    "伴随": {"book/s04_3", "book/s04_4", "book/s04_7?"},
    "伴随法": {"book/s04_7?"},
    "伴随递推": {"book/s04_4"},
    "隐式欧拉": {"book/s04_3"},
    "隐式": {"book/s04_3"},
    "欧拉": {"book/s04_3"},
    "互补": {"book/s04_4", "book/s04_5?"},
    "互补约束": {"book/s04_5?"},
    "互补条件": {"book/s04_0"},
}


def test_search_index_holds_chinese_course_terms(built_book):
    """Sphinx's zh indexer with jieba and the course's term list (book/_ext/search_terms.txt)."""
    index = _search_index(built_book)
    for term, pages in SEARCH_EXPECTATIONS.items():
        required = {p for p in pages if not p.endswith("?")}
        required |= {p[:-1] for p in pages if p.endswith("?") and p[:-1] in index["docnames"]}
        assert required <= _pages_with_term(index, term), (term, sorted(_pages_with_term(index, term)))
    # semi-implicit Euler is its own term and does not pass for implicit Euler
    assert "book/s04_1" in _pages_with_term(index, "半隐式欧拉")


def test_every_page_with_code_offers_its_executed_notebook(built_book):
    for source in sorted((ROOT / "book").glob("*.md")):
        page = built_book / "book" / f"{source.stem}.html"
        if not page.is_file():
            continue  # not in _toc.yml
        html = page.read_text(encoding="utf-8")
        has_code = "```{code-cell}" in source.read_text(encoding="utf-8")
        link = f'href="../_sources/book/{source.stem}.ipynb"'
        assert (link in html) == has_code, (source.name, has_code)
        if has_code:
            nb = nbformat.read(built_book / "_sources" / "book" / f"{source.stem}.ipynb", as_version=4)
            nbformat.validate(nb)
            code = [cell for cell in nb.cells if cell.cell_type == "code"]
            assert code and any(cell.outputs for cell in code), source.name  # executed, outputs kept
            assert "source_map" not in nb.metadata


def test_downloaded_notebook_runs_from_the_book_folder(built_book):
    """book/run_locally.md: a page's .ipynb from the download menu, saved into book/ of a clone,
    runs with the venv's kernel (course_lib importable, book/diagrams.py found)."""
    from nbclient import NotebookClient

    nb = nbformat.read(built_book / "_sources" / "book" / "s04_0.ipynb", as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert any("from diagrams import" in cell.source for cell in code)

    def glue_record(output):  # myst-nb's glue(): a value for the prose, not shown in the cell
        data = output.get("data", {})
        return bool(data) and all(key.startswith("application/papermill.record/") for key in data)

    def kinds(cell):  # how a stream is chunked depends on flush timing: count a run of stream output once
        out = [o.output_type for o in cell.outputs if not glue_record(o)]
        return [k for i, k in enumerate(out) if k != "stream" or i == 0 or out[i - 1] != "stream"]

    shown = [kinds(cell) for cell in code]
    for cell in code:
        cell.outputs, cell.execution_count = [], None
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "book")}}
    ).execute()
    assert [kinds(cell) for cell in code] == shown


def test_api_page_renders_every_public_function(built_book):
    import inspect

    import course_lib as cl

    html = (built_book / "book" / "api.html").read_text(encoding="utf-8")
    for name in dir(cl):
        obj = getattr(cl, name)
        if not name.startswith("_") and callable(obj) and not inspect.ismodule(obj):
            assert f'id="course_lib.{name}"' in html, name  # autodoc rendered its docstring
    assert "参数" in html and "返回" in html  # napoleon turned Args/Returns into field lists


# --- numbers in the prose come from the executed outputs (myst-nb glue) ---------------------------

# a measured-looking number: a decimal fraction or scientific notation, optionally signed
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])|(?<![\w.])\d+(?:\.\d+)?[eE][-+]?\d+(?![\w.])")


_CLOCKS = ("perf_counter", "timeit", "time.time(", "monotonic")
WALL_CLOCK_TAG = "wall-clock"


def _reads_a_clock(cell) -> bool:
    return any(clock in cell.get("source", "") for clock in _CLOCKS)


def _untagged_timing_calls(nb) -> list[str]:
    """Cells that call a function a clock-reading cell defines (S04.6's paired_medians) without the
    `wall-clock` tag: their output is a timing, so the tag must say so."""
    timers, missing = set(), []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # an IPython magic
            continue
        if _reads_a_clock(cell):
            timers |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        elif WALL_CLOCK_TAG not in cell.metadata.get("tags", []):
            called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            missing += [f"{cell.source.splitlines()[0]!r} calls {name}" for name in sorted(called & timers)]
    return missing


def _printed_numbers(nb) -> set[str]:
    """Numbers the page's cells print, less those of cells that can print a wall-clock time: the cells
    that read a clock and those tagged `wall-clock` (a time measured in one cell and printed by a later
    one). A timing differs on every build, so a number typed in the prose would match it by chance only
    (timed exponents printed 0.95 twice, beside the prose's TD(λ = 0.95) of the SHAC paper)."""
    text = []
    for cell in nb.cells:
        if _reads_a_clock(cell) or WALL_CLOCK_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                text.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                text.append(out.get("data", {}).get("text/plain", ""))
    return set(_NUMBER.findall("\n".join(text)))


def test_cells_that_print_a_timing_say_so(built_book):
    """The prose-number check below leaves out timings by the `wall-clock` tag; a cell that times through
    a helper of an earlier cell must carry it, or a timing that happens to round to a typed number fails
    the build at random."""
    missing = []
    for executed in sorted((built_book / "_sources" / "book").glob("*.ipynb")):
        missing += [f"{executed.stem}: {m}" for m in _untagged_timing_calls(nbformat.read(executed, as_version=4))]
    assert not missing, f"tag these cells `{WALL_CLOCK_TAG}`:\n" + "\n".join(missing)


def _rounds_to(printed: str, quoted: str) -> bool:
    """``quoted`` is ``printed`` cut or rounded to the digits ``quoted`` shows (1.5812 -> 1.58)."""
    try:
        p, q = float(printed), float(quoted)
    except ValueError:
        return False
    if "e" in quoted.lower():
        mantissa = quoted.lower().split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return p != 0 and f"{p:.{digits}e}" == f"{q:.{digits}e}"
    digits = len(quoted.split(".")[1])
    return round(p, digits) == q or quoted == printed[: len(quoted)]


def test_the_prose_quotes_no_printed_number_by_hand(built_book):
    """A number the prose quotes from a computation is a glue reference, so it cannot drift from the output.

    Flagged: a decimal or scientific number in the prose that a cell of the same page prints (to the
    digits the prose shows) and that is not a literal of the page's code (a setting the text chooses,
    such as h = 0.05, appears in the code and is fine to type)."""
    from test_book_sources import split_page

    typed = []
    for source in sorted((ROOT / "book").glob("*.md")):
        executed = built_book / "_sources" / "book" / f"{source.stem}.ipynb"
        if not executed.is_file():
            continue
        printed = _printed_numbers(nbformat.read(executed, as_version=4))
        prose, code = split_page(source.read_text(encoding="utf-8"))
        # every number literal of the code, by value (the prose's 0.02 is the code's 2e-2)
        literals = {
            abs(float(n))
            for n in re.findall(r"(?<![\w.])\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", "\n".join(line for _, line in code))
        }
        for number, line in prose:
            line = re.sub(r"(\d+(?:\.\d+)?)\s*\\times\s*10\^\{?([-+]?\d+)\}?", r"\1e\2", line)  # 1.2\times10^{-7}
            visible = re.sub(r"\{glue:[a-z]*\}`[^`]*`|\{(ref|numref|eq|term|cite[a-z:]*|exercise)\}`[^`]*`", " ", line)
            for quoted in _NUMBER.findall(visible):
                if abs(float(quoted)) in literals:
                    continue
                if any(_rounds_to(p, quoted.lstrip("+")) for p in printed):
                    typed.append(f"{source.name}:{number}: {quoted}")
    assert not typed, "numbers typed into the prose that a cell prints; glue them:\n" + "\n".join(typed)


def test_every_exercise_row_downloads_its_student_notebook(built_book):
    """Each of the 36 exercises is linked from the book, and the link downloads the release version."""
    from autograder.authoring import sources
    from autograder.authoring.student_copy import student_notebook

    linked = {}
    for page in sorted((built_book / "book").glob("*.html")):
        for href in re.findall(
            r'class="reference download internal" download="" href="([^"]+\.ipynb)"', page.read_text()
        ):
            linked.setdefault(Path(href).stem, (page.parent / href).resolve())
    exercises = {md.stem: md for md in sources.source_notebooks()}
    assert set(linked) == set(exercises), set(exercises) ^ set(linked)
    for exercise, path in linked.items():
        got = nbformat.read(path, as_version=4)
        want = student_notebook(exercises[exercise])
        assert [c.source for c in got.cells] == [c.source for c in want.cells], exercise
        assert "BEGIN SOLUTION" not in path.read_text(encoding="utf-8")


class _FigureCollector(HTMLParser):
    """Every executed plot or diagram (a PNG or SVG a cell drew) with the caption of the figure around it."""

    def __init__(self):
        super().__init__()
        self.plots, self._figures, self._caption = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self._figures.append({"id": attrs.get("id"), "caption": ""})
        elif tag == "figcaption" and self._figures:
            self._caption = self._figures[-1]
        elif (
            tag == "img" and (attrs.get("src") or "").endswith((".png", ".svg")) and "/_images/" in attrs.get("src", "")
        ):
            self.plots.append(self._figures[-1] if self._figures else None)

    def handle_endtag(self, tag):
        if tag == "figure" and self._figures:
            self._figures.pop()
        elif tag == "figcaption":
            self._caption = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption["caption"] += data


def test_every_plot_is_a_numbered_figure_with_a_chinese_caption(built_book):
    problems, count = [], 0
    for page in sorted((built_book / "book").glob("*.html")):
        collector = _FigureCollector()
        collector.feed(page.read_text(encoding="utf-8"))
        for n, figure in enumerate(collector.plots, start=1):
            count += 1
            if figure is None:
                problems.append(f"{page.name}: plot {n} is not in a figure (give its cell mystnb.figure)")
            elif not re.match(r"\s*图\s*\d+", figure["caption"]) or not re.search(
                r"[\u4e00-\u9fff]{4}", figure["caption"]
            ):
                problems.append(f"{page.name}: plot {n} caption {figure['caption'][:40]!r} is not numbered Chinese")
    assert count >= 32, count  # the book's 24 plots and 8 diagrams are all found
    assert not problems, "\n".join(problems)


#: inline code in a page: an optional link around it, then its first word
_INLINE_CODE = re.compile(
    r'(<a class="reference internal" href="(?P<href>[^"]*)"[^>]*>)?<code class="[^"]*literal[^"]*"><span class="pre">cl\.(?P<name>\w+)'
)


def test_library_names_in_the_prose_link_to_their_api_entry(built_book):
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from api_links import documented_names

    names = documented_names()
    linked, problems = 0, []
    for page in sorted((built_book / "book").glob("*.html")):
        if page.name == "api.html":
            continue
        for match in _INLINE_CODE.finditer(page.read_text(encoding="utf-8")):
            name = match.group("name")
            if name not in names:
                continue  # a constant table such as cl.CONTACT_LAWS: listed on the API page, not an entry
            if match.group("href") != f"api.html#course_lib.{name}":
                problems.append(f"{page.name}: cl.{name} links to {match.group('href')!r}")
            else:
                linked += 1
    assert linked >= 120, linked  # the pages name the library this often
    assert not problems, "\n".join(problems)


def test_the_parallel_build_executed_each_page_once_into_one_cache(built_book):
    """The fixture's build read the pages in parallel (book/build.py --jobs 2 or more) into an empty output
    folder; the execution cache its main process created holds one executed notebook per page with code."""
    import importlib.util

    from jupyter_cache import get_cache

    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    with_code = {f"book/{page.stem}" for page in (ROOT / "book").glob("*.md") if build.code_size(f"book/{page.stem}")}
    cache = get_cache(built_book.parent / ".jupyter_cache")
    cached = [Path(record.uri).with_suffix("").relative_to(ROOT).as_posix() for record in cache.list_cache_records()]
    assert len(cached) == len(set(cached)), cached
    assert with_code <= set(cached), sorted(with_code - set(cached))


def test_the_published_book_holds_nothing_instructor_only(built_book):
    """The same leak scan as the student edition's, over everything the HTML build publishes: pages, the
    pages' sources and executed notebooks (_sources), downloads (the student notebooks) and the search index."""
    from autograder.authoring import leak_scan

    assert (built_book / "_sources").is_dir() and (built_book / "searchindex.js").is_file()
    secrets = leak_scan.collect_secrets(leak_scan.course_public_texts())
    assert leak_scan.scan(built_book, secrets) == []


def test_the_page_twins_show_the_numbers_the_built_pages_show(built_book):
    """A twin (what Colab opens) gets each glued number from the build (``jupyter_execute/<page>.glue.json``),
    formatted as myst-nb formats it on the web page: the same text, number for number, on every student page."""
    import html as html_
    import re as re_

    from autograder.ops.student_edition import student_pages
    from autograder.ops.twin_markdown import GLUE, format_glued, glued_values

    build = built_book.parent
    checked = 0
    for page in student_pages():
        # the markdown cells, as the twin is made of them (jupytext reads the page as the edition does)
        prose = "\n".join(c.source for c in jupytext.read(ROOT / f"{page}.md").cells if c.cell_type == "markdown")
        values = glued_values(build, page)
        twin = [format_glued(values[m.group(1).strip()], m.group(2) or "") for m in GLUE.finditer(prose)]
        shown = re_.findall(
            r'<span class="pasted-text">(.*?)</span>', (built_book / f"{page}.html").read_text(encoding="utf-8")
        )
        assert twin == [html_.unescape(text) for text in shown], page
        checked += len(twin)
    assert checked > 300  # every page's glued numbers, not an empty comparison
