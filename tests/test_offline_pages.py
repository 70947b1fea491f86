"""Formgrader's pages and the feedback HTML take MathJax from the course, not from a CDN (autograder/verdict/mathjax.py).

In a real browser, offline: tests/test_formgrader_browser.py.
"""

import os

import nbgrader
from nbconvert import HTMLExporter

from autograder.verdict import mathjax

NBGRADER_TEMPLATES = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates")


def _exporter(template_name):
    return HTMLExporter(
        template_name=template_name,
        extra_template_basedirs=[NBGRADER_TEMPLATES, str(mathjax.TEMPLATES)],
        filters={"offline_mathjax": mathjax.offline_mathjax},
    )


def test_formgrader_and_feedback_templates_inline_the_course_mathjax():
    for template in ("formgrade", "feedback"):
        env = _exporter(template).environment
        assert env.get_template("mathjax.html.j2").filename.startswith(str(mathjax.TEMPLATES))
        macro = env.get_template("mathjax.html.j2").module.mathjax()
        assert "cdnjs" not in macro and "window.MathJax" in macro and len(macro) > 1_000_000


def test_inlined_script_cannot_end_its_element_early():
    mathjax.offline_mathjax.cache_clear()
    text = mathjax.offline_mathjax("tex-svg.js")
    assert "</script" not in text.lower() and "/</g" in text  # other "</" (a regex here) stay as they are
