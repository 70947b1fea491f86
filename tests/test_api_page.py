"""The API reference page (book/api.md) lists exactly what course_lib exports, and is up to date.

The page is written by book/_ext/api_page.py; that the built page renders every docstring is checked on
the built book (tests/test_book.py).
"""

import importlib.util
import inspect
from pathlib import Path

import course_lib as cl

ROOT = Path(__file__).resolve().parents[1]


def _api_page():
    spec = importlib.util.spec_from_file_location("api_page", ROOT / "book" / "_ext" / "api_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_generator_writes():
    page = _api_page()
    assert page.PAGE.read_text(encoding="utf-8") == page.render(), "run `python book/_ext/api_page.py`"


def test_every_public_name_is_on_the_page():
    text = (ROOT / "book" / "api.md").read_text(encoding="utf-8")
    for name in dir(cl):
        obj = getattr(cl, name)
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        documented = f":: {name}\n" in text if callable(obj) else f"`cl.{name}`" in text
        assert documented, name
