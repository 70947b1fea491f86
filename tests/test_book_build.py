"""The two changes book/build.py and course_reader make to how Sphinx builds the book, checked without a
build: every page is read exactly once, the pages with the most code first, and the faster Chinese search
indexer gives the words Sphinx's own gives."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import sphinx.builders
from sphinx.search.zh import SearchChinese

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from course_reader import CourseChinese, launch_the_edition_twin  # noqa: E402


def _build_module():
    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_is_its_own_task_most_code_first():
    build = _build_module()
    assert hasattr(sphinx.builders, "make_chunks")  # the name build.py replaces
    pages = sorted(f"book/{page.stem}" for page in (ROOT / "book").glob("*.md"))
    chunks = build.one_page_per_task(pages, 2)
    assert all(len(chunk) == 1 for chunk in chunks)
    assert sorted(chunk[0] for chunk in chunks) == pages
    sizes = [build.code_size(chunk[0]) for chunk in chunks]
    assert sizes == sorted(sizes, reverse=True)
    # the measure sees code cells and nothing else: the page of the longest chapter section runs code,
    # the bibliography runs none
    assert build.code_size("book/s04_7") > 10_000
    assert build.code_size("book/references") == 0


def test_the_course_search_indexes_the_words_sphinx_does():
    text = (ROOT / "book" / "s04_4.md").read_text(encoding="utf-8")
    words = []
    for splitter in (SearchChinese({}), CourseChinese({})):
        words.append([splitter.stem(word) for word in splitter.split(text) if splitter.word_filter(word)])
    sphinx_words, course_words = words
    assert course_words == sphinx_words
    assert len(course_words) > 1000


def test_launch_buttons_open_the_edition_twin():
    """Colab opens notebooks only: the buttons point at book/<page>.ipynb, which the student edition holds."""
    hub = "https://hub.example.edu/hub/user-redirect/git-pull?repo=https://github.com/o/r&urlpath=lab/tree/r/book/s04_1.md&branch=t"
    context = {
        "header_buttons": [
            {"label": "download-buttons", "buttons": [{"url": "_sources/book/s04_1.md"}]},
            {
                "label": "launch-buttons",
                "buttons": [
                    {"url": "https://mybinder.org/v2/gh/o/r/t?urlpath=lab/tree/book/s04_1.md"},
                    {"url": "https://colab.research.google.com/github/o/r/blob/t/book/s04_1.md"},
                    {"url": hub},
                    {"label": "launch-thebe"},
                ],
            },
        ]
    }
    launch_the_edition_twin(None, "book/s04_1", "page.html", context, None)
    download, launch = context["header_buttons"]
    assert download["buttons"][0]["url"] == "_sources/book/s04_1.md"
    assert [b["url"] for b in launch["buttons"] if "url" in b] == [
        "https://mybinder.org/v2/gh/o/r/t?urlpath=lab/tree/book/s04_1.ipynb",
        "https://colab.research.google.com/github/o/r/blob/t/book/s04_1.ipynb",
        hub.replace("s04_1.md", "s04_1.ipynb"),
    ]
