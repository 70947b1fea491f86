"""Reader-facing features of the course book that Jupyter Book does not provide on its own.

* Chinese search: Sphinx's ``zh`` indexer segments text with jieba. jieba's general dictionary
  splits course terms such as 隐式欧拉 or 伴随法 into their parts, and Sphinx's search page only
  matches whole index terms (or, for queries of three characters or more, terms that contain the
  query). ``search_terms.txt`` next to this file is loaded as jieba's user dictionary, so those
  compounds become index terms of their own while their parts (隐式, 欧拉, 伴随) stay searchable.
  The browser cannot run jieba, and Sphinx's default query splitter keeps a run of Chinese
  characters as one word, so a query such as 隐式欧拉的导数 would match nothing; the splitter below
  cuts such a run into the longest words that the index itself contains.
* Notebook download: sphinx-book-theme only offers a MyST page as ``.ipynb`` when a launch
  service (Binder, JupyterHub, Colab) is configured. Every page with code cells here gets its
  executed notebook (outputs included) copied to ``_sources/<page>.ipynb`` and listed in the
  theme's download menu, with or without a launch service.
* One copy of each inline script: Sphinx 7.4 puts an inline script that an extension adds after
  the builder started (sphinx-thebe's ``const THEBE_JS_URL = ...``, sphinx-togglebutton's
  selector) into every page twice; the second ``const`` declaration is a SyntaxError in the
  browser console of every page.
* Launch links only with this repository's URL: Binder, JupyterHub and Colab buttons open a page's
  notebook from the public repository, so they need ``repository.url`` in ``_config.yml``. Without it
  Jupyter Book falls back to its own repository and the buttons would open someone else's files; the
  launch services are then switched off (book/run_locally.md documents the setting). With it, the buttons
  open the page's notebook twin in the student edition (``make student-edition``), not its ``.md``.
* ``static/course_reader.css``: small style fixes found by looking at the pages on a phone;
  ``static/course_reader.js``: formulas in search-result snippets are typeset, not raw TeX (the
  search page has no formulas of its own, so Sphinx would not load MathJax there).
"""

from __future__ import annotations

import logging as _logging
from pathlib import Path

import nbformat
from sphinx.search.zh import JIEBA, SearchChinese
from sphinx.util import logging

if JIEBA:
    import jieba

LOGGER = logging.getLogger(__name__)
SEARCH_TERMS = Path(__file__).with_name("search_terms.txt")
STATIC = Path(__file__).with_name("static")
# The book's own font (a subset of Noto Sans CJK SC, SIL OFL 1.1), served as the pages' last Chinese face
# (course_reader.css): a reader whose system has no CJK font reads Chinese, not empty boxes.
BOOK_FONT = Path(__file__).resolve().parents[1] / "fonts" / "S04SansSC-Regular.otf"
BOOK_FONT_LICENSE = BOOK_FONT.with_name("OFL.txt")


# Query splitter for the search page (replaces Sphinx's default ``splitQuery``). A run of Chinese
# characters that is not an index term is cut by forward maximum matching against the index's own
# vocabulary; single characters that are not terms are dropped, since the indexer never stores them.
SPLIT_QUERY_JS = r"""
var splitQuery = (query) => {
  const words = query
    .split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)
    .filter((term) => term);
  const index = typeof Search !== "undefined" ? Search._index : null;
  if (!index) return words;
  const known = (w) => {
    const key = w.toLowerCase();
    return Object.prototype.hasOwnProperty.call(index.terms, key)
      || Object.prototype.hasOwnProperty.call(index.titleterms, key);
  };
  const out = [];
  for (const word of words) {
    for (const run of word.split(/(\p{Script=Han}+)/u).filter((part) => part)) {
      if (!/\p{Script=Han}/u.test(run) || known(run)) { out.push(run); continue; }
      let start = 0;
      while (start < run.length) {
        let end = Math.min(run.length, start + 12);
        while (end > start + 1 && !known(run.slice(start, end))) end--;
        if (end > start + 1) out.push(run.slice(start, end));
        start = end;
      }
    }
  }
  return out.length ? out : words;
};
"""


class _TermSet(set):
    """The Latin terms Sphinx's Chinese splitter collects, as a set it can still ``extend``.

    Sphinx 7.4 keeps them in a class-level list that grows with every page and tests each indexed word
    for membership in it: quadratic, 29 of this book's 75 s of Sphinx time. A set answers the same
    membership question in constant time.
    """

    def extend(self, terms):
        self.update(terms)


class CourseChinese(SearchChinese):
    """Sphinx's Chinese search with the course's term list and a vocabulary-aware query splitter."""

    js_splitter_code = SPLIT_QUERY_JS

    def init(self, options):
        super().init(options)
        self.latin_terms = _TermSet()  # pyright: ignore[reportAttributeAccessIssue]
        if JIEBA:
            jieba.setLogLevel(_logging.WARNING)  # silence its "Building prefix dict" chatter
            with open(SEARCH_TERMS, "rb") as terms:  # given a path, jieba leaves the file open
                jieba.load_userdict(terms)


def _check_jieba(app, config):
    if str(config.html_search_language or config.language or "").startswith("zh") and not JIEBA:
        LOGGER.warning("jieba is not installed: Chinese text will not be searchable", type="course_reader")


def _offer_notebook(app, pagename, templatename, context, doctree):
    if doctree is None or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    nb_config = app.env.mystnb_config
    executed = Path(nb_config.output_folder) / f"{pagename}.ipynb"
    if not executed.is_file():
        LOGGER.warning(f"no executed notebook for {pagename} at {executed}", type="course_reader")
        return
    nb = nbformat.read(executed, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code:
        return  # a page without code gains nothing from a notebook
    if nb_config.execution_mode == "cache" and not any(cell.outputs for cell in code):
        # When a page's outputs come from the execution cache, MyST-NB 1.4 writes the notebook
        # before it merges the cached outputs in; merge them the same way it does.
        from jupyter_cache import get_cache

        try:
            _, nb = get_cache(nb_config.execution_cache_path).merge_match_into_notebook(nb)
        except KeyError:
            pass  # not in the cache (e.g. excluded from execution): offer it as it is
    nb.metadata.pop("source_map", None)  # MyST-NB's internal bookkeeping
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _one_copy_of_each_script(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", str(script)) or "", tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # the builder restores its own list after each page


def _mathjax_on_search_page(app, pagename, templatename, context, doctree):
    if pagename != "search" or getattr(app.builder, "math_renderer_name", None) != "mathjax":
        return
    from sphinx.ext.mathjax import install_mathjax

    policy = app.registry.html_assets_policy
    app.registry.html_assets_policy = "always"  # as if the page had equations
    try:
        install_mathjax(app, pagename, templatename, context, doctree)
    finally:
        app.registry.html_assets_policy = policy


# Jupyter Book's default repository.url: a book without its own URL would link readers there
JUPYTER_BOOK_REPOSITORY = "https://github.com/executablebooks/jupyter-book"


def launch_buttons_need_the_repository(app, config):
    """Drop the launch services unless ``repository.url`` names this course's own public repository."""
    options = config.html_theme_options
    url = str(options.get("repository_url") or "").strip().rstrip("/")
    if url and url != JUPYTER_BOOK_REPOSITORY:
        return
    launch = dict(options.get("launch_buttons") or {})
    options["launch_buttons"] = {key: value for key, value in launch.items() if not key.endswith("_url")}


def _add_static(app):
    app.config.html_static_path.extend([str(STATIC), str(BOOK_FONT), str(BOOK_FONT_LICENSE)])


#: extensions that do not say whether Sphinx may read pages in parallel, and why they may. One undeclared
#: extension makes Sphinx read (and so execute) every page one after the other; book/build.py reads two
#: at a time. Both only act outside the read phase, in the main process.
_PARALLEL_READ_SAFE = {
    # loaded by sphinx-external-toc; replaces TocTreeCollector.assign_section_numbers, which runs after reading
    "sphinx_multitoc_numbering": "section numbers are assigned after reading",
    # copies MathJax into _static on build-finished and sets mathjax_path
    "sphinx-mathjax-offline": "acts only when the build has finished",
}


def _declare_parallel_read_safe(app):
    for name in _PARALLEL_READ_SAFE:
        extension = app.extensions.get(name)
        if extension is not None:
            extension.parallel_read_safe = True


def launch_the_edition_twin(app, pagename, templatename, context, doctree):
    """Point the launch buttons at the student edition's notebook twin of the page (``book/<page>.ipynb``,
    written by ``make student-edition``), which Colab can open, instead of the MyST source (``.md``)."""
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            for button in group.get("buttons", []):
                if "url" in button:
                    button["url"] = button["url"].replace(f"{pagename}.md", f"{pagename}.ipynb")


def setup(app):
    _declare_parallel_read_safe(app)
    app.connect("builder-inited", _add_static)
    app.add_css_file("course_reader.css")
    app.add_js_file("course_reader.js")
    app.add_search_language(CourseChinese)
    app.connect("config-inited", _check_jieba)
    app.connect("config-inited", launch_buttons_need_the_repository)
    # sphinx-book-theme builds its download menu at priority 501 and reads ``ipynb_source``.
    app.connect("html-page-context", _offer_notebook, priority=500)
    app.connect("html-page-context", _mathjax_on_search_page, priority=600)
    app.connect("html-page-context", _one_copy_of_each_script, priority=900)
    # sphinx-book-theme adds the launch buttons at priority 501
    app.connect("html-page-context", launch_the_edition_twin, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
