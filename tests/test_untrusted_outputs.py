"""Nothing a student hands in or prints may run script in the instructor's browser.

Formgrader renders the autograded notebooks and ``nbgrader generate_feedback`` writes HTML from them;
:class:`autograder.verdict.sanitize.SanitizeOutputs` makes both inert. The unit tests render each
active form through nbconvert's real HTML exporters (the ``classic`` template that nbgrader's feedback
and formgrade templates extend, and ``lab``) and compare the active content of the page (scripts, event
handlers, script URLs, frames, SVG, ...) with that of an empty notebook, before and after sanitising:
before, each form is active (so the check can fail); after, nothing is left beyond the template's own.
One end-to-end test runs a hostile and an honest student through the real ``nbgrader autograde`` and
``generate_feedback``.
"""

import copy
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output, new_raw_cell

from autograder.ops.nbgrader_run import gradebook_scores, nbgrader
from autograder.ops.reports import check_feedback
from autograder.ops.selftest import solution_sources, make_submission
from autograder.verdict.markup import PLAIN_TEXT_NOTE
from autograder.confine.execute import SKIPPED
from autograder.ops.student_edition import colab_cell
from autograder.verdict.sanitize import BROKEN, INERT_MIMETYPES, SanitizeOutputs, sanitize_notebook

# the module fixture grades once, on one xdist worker (it would otherwise run on each)
pytestmark = [
    pytest.mark.nbgrader,
    pytest.mark.xdist_group("untrusted_outputs"),
]

ROOT = Path(__file__).resolve().parents[1]
SECTION, EXERCISE, CELL, ANSWER = "s04_1", "s04_1_ex1", "fd_grad_answer", "answer_dimension"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
SVG_SCRIPT = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
B64_SVG = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIG9ubG9hZD0iYWxlcnQoMSkiLz4="  # SVG with onload

# --- what counts as active in a rendered page ------------------------------------------------------

ACTIVE_TAGS = {
    "script",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "svg",
    "math",
    "base",
    "form",
    "link",
    "meta",
    "style",
    "template",
    "noscript",
}
URL_ATTRIBUTES = {
    "href",
    "src",
    "action",
    "formaction",
    "data",
    "xlink:href",
    "poster",
    "background",
    "srcset",
    "srcdoc",
}
RASTER = re.compile(r"data:image/(png|jpeg|gif|webp)[;,]")


def _dangerous_url(value: str) -> bool:
    url = re.sub(r"[\x00-\x20\x7f-\xa0\s]+", "", value).lower()
    return url.startswith(("javascript:", "vbscript:")) or url.startswith("data:") and not RASTER.match(url)


class _Active(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found, self._inside = [], None

    def handle_starttag(self, tag, attrs):
        attrs = [(k, v or "") for k, v in attrs]
        if tag in ACTIVE_TAGS:
            self.found.append([tag, tuple(sorted(attrs)), ""])
            self._inside = self.found[-1] if tag in ("script", "style") else None
        for k, v in attrs:
            if k.startswith("on") or k == "srcdoc":
                self.found.append(["handler", tag, k, v])
            elif k in URL_ATTRIBUTES and _dangerous_url(v):
                self.found.append(["url", tag, k, v])
            elif k == "style" and re.search(r"expression|url\s*\(|javascript:", v, re.I):
                self.found.append(["css", tag, v])
            elif k == "class" and "mermaid" in v.lower():
                self.found.append(["mermaid", tag, v])

    def handle_endtag(self, tag):
        self._inside = None

    def handle_data(self, data):
        if self._inside is not None:
            self._inside[2] += data


def active(page: str) -> Counter:
    """Every piece of active content of an HTML page, counted."""
    parser = _Active()
    parser.feed(page)
    parser.close()
    return Counter(tuple(f) for f in parser.found)


def new_notebook(cells=(), metadata=None):
    """A notebook as a student's JSON may be: not validated (nbformat's own constructor would refuse some)."""
    cells = [{"id": f"c{i}", **c} if isinstance(c, dict) else c for i, c in enumerate(cells)]
    return nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {}, "cells": cells})


EXPORTERS = {name: HTMLExporter(template_name=name) for name in ("classic", "lab")}


def _render(nb) -> dict:
    return {
        name: exporter.from_notebook_node(nbformat.from_dict(copy.deepcopy(nb)))[0]
        for name, exporter in EXPORTERS.items()
    }


BASELINE = {name: active(page) for name, page in _render(new_notebook()).items()}


def student_active(nb) -> Counter:
    """Active content of ``nb`` rendered by both templates, beyond what each template has by itself."""
    extra = Counter()
    for name, page in _render(nb).items():
        extra += active(page) - BASELINE[name]
    return extra


# --- the active forms ------------------------------------------------------------------------------


def _display(data, metadata=None):
    return new_code_cell("x", outputs=[new_output("display_data", data=data, metadata=metadata or {})])


def _markdown(source, attachments=None):
    cell = new_markdown_cell(source)
    if attachments:
        cell.attachments = attachments
    return cell


ACTIVE_FORMS = {
    "javascript": _display({"application/javascript": "alert(1)", "text/plain": "js"}),
    "html-script": _display({"text/html": "<script>alert(1)</script>"}),
    "html-onerror": _display({"text/html": "<img src=x onerror=alert(1)>"}),
    "html-iframe": _display({"text/html": "<iframe src='https://evil.example'></iframe>"}),
    "html-object-embed": _display({"text/html": "<object data='x.swf'></object><embed src='x.swf'>"}),
    "html-javascript-url": _display({"text/html": "<a href='javascript:alert(1)'>x</a>"}),
    "html-hidden-javascript-url": _display({"text/html": "<a href='jav&#x09;ascript:alert(1)'>x</a>"}),
    "html-vbscript-url": _display({"text/html": "<a href='VBScript:msgbox(1)'>x</a>"}),
    "html-data-html-url": _display({"text/html": "<a href='data:text/html;base64,PHNjcmlwdD4='>x</a>"}),
    "html-svg-script": _display({"text/html": SVG_SCRIPT}),
    "html-style-expression": _display(
        {
            "text/html": "<style>p{background:url(javascript:alert(1))}</style>"
            "<p style='width:expression(alert(1))'>x</p>"
        }
    ),
    "html-meta-refresh": _display({"text/html": "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>"}),
    "html-form-action": _display({"text/html": "<form><button formaction='javascript:alert(1)'>x</button></form>"}),
    "html-isolated-iframe": _display({"text/html": "<b>x</b>"}, {"text/html": {"isolated": True}}),
    "svg": _display({"image/svg+xml": SVG_SCRIPT}),
    "mermaid": _display({"text/vnd.mermaid": "graph TD; A-->B"}),
    "markdown-output-link": _display({"text/markdown": "[x](javascript:alert(1))"}),
    "markdown-output-html": _display({"text/markdown": "<img src=x onerror=alert(1)>"}),
    "md-script": _markdown("我的回答 <script>alert(1)</script>"),
    "md-onerror": _markdown("<img src=x onerror=alert(1)>"),
    "md-javascript-link": _markdown("[点我](javascript:alert(1))"),
    "md-javascript-link-html": _markdown("<a href='javascript:alert(1)'>点我</a>"),
    "md-iframe": _markdown("<iframe src='https://evil.example'></iframe>"),
    "md-svg": _markdown("<svg onload=alert(1)></svg>"),
    "md-mermaid-block": _markdown("```mermaid\ngraph TD; A-->B\n```"),
    "md-svg-attachment": _markdown("![x](attachment:a.svg)", {"a.svg": {"image/svg+xml": B64_SVG}}),
    "md-html-attachment": _markdown("![x](attachment:a.html)", {"a.html": {"text/html": "PHNjcmlwdD4="}}),
}
#: forms nbconvert 7.17's templates already escape; removed anyway, in case a template or viewer does not
DEFENCE_IN_DEPTH = {
    "text/javascript": _display({"text/javascript": "alert(1)"}),
    "widget-view": _display({"application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2}}),
    "raw-script": new_raw_cell("<script>alert(1)</script>"),
    "png-attribute-injection": _display({"image/png": 'x" onerror="alert(1)'}),
    "image-filenames": _display(
        {"image/png": PNG},
        {"image/png": {"width": "1 onerror=alert(1)"}, "filenames": {"image/png": "javascript:alert(1)"}},
    ),
}


@pytest.mark.parametrize("form", sorted(ACTIVE_FORMS))
def test_each_active_form_is_removed(form):
    nb = new_notebook(cells=[copy.deepcopy(ACTIVE_FORMS[form])])
    assert student_active(nb), f"{form} is not active even before sanitising: the check could not fail"
    sanitize_notebook(nb)
    assert student_active(nb) == Counter()


@pytest.mark.parametrize("form", sorted(DEFENCE_IN_DEPTH))
def test_forms_the_templates_escape_are_removed_too(form):
    nb = sanitize_notebook(new_notebook(cells=[copy.deepcopy(DEFENCE_IN_DEPTH[form])]))
    assert student_active(nb) == Counter()
    text = json.dumps(nb, ensure_ascii=False)
    assert "onerror" not in text and "<script" not in text and "filenames" not in text
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert all(set(o.get("data", {})) <= INERT_MIMETYPES for o in outputs)


def test_widget_state_in_the_notebook_metadata_is_removed():
    nb = new_notebook(metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}})
    assert student_active(nb)
    assert student_active(sanitize_notebook(nb)) == Counter() and "widgets" not in nb.metadata


def test_escaped_attempts_stay_visible_as_text():
    nb = sanitize_notebook(new_notebook(cells=[copy.deepcopy(ACTIVE_FORMS[f]) for f in ("html-script", "md-script")]))
    assert nb.cells[0].outputs[0].data["text/html"] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert nb.cells[1].source == "我的回答 &lt;script>alert(1)&lt;/script>"
    link = sanitize_notebook(new_notebook(cells=[copy.deepcopy(ACTIVE_FORMS["md-javascript-link"])]))
    assert link.cells[0].source.startswith(PLAIN_TEXT_NOTE) and "[点我](javascript:alert(1))" in link.cells[0].source


# --- what must survive -----------------------------------------------------------------------------

TABLE = "<table><thead><tr><th>ε</th><th>误差</th></tr></thead><tbody><tr><td>1e-6</td><td>3.2e-10</td></tr></tbody></table>"
ANSWER_MD = (
    "误差在 $\\epsilon<10^{-8}$ 时被舍入误差主导：\n\n$$\\begin{aligned} e &= a\\epsilon + b/\\epsilon \\end{aligned}$$\n\n"
    "> 见 S04.1.2\n\n| ε | 误差 |\n|:-:|--:|\n| 1e-6 | 3e-10 |\n\n# 结论\n\n- [x] 已验证\n\n"
    "```python\nx = 1 < 2\n```\n\n[参考](https://example.com) ![图](attachment:fig.png)"
)
HARMLESS = [
    _display({"text/html": TABLE, "text/plain": "table"}),
    _display({"image/png": PNG, "text/plain": "<Figure>"}, {"image/png": {"width": 200, "height": 100}}),
    new_code_cell(
        "x",
        outputs=[
            new_output("stream", name="stdout", text="a < b & c\n"),
            new_output("error", ename="ValueError", evalue="坏", traceback=["ValueError: 坏"]),
            new_output("execute_result", data={"text/plain": "3.0"}, execution_count=4),
        ],
        execution_count=4,
    ),
    _display({"text/latex": "$x^2 < 1$", "text/markdown": "**粗体** $a<b$"}),
    _markdown(ANSWER_MD, {"fig.png": {"image/png": PNG}}),
    _markdown("<b>粗体</b>与<sub>下标</sub>"),
]


def test_harmless_content_is_kept_as_it_is():
    nb = new_notebook(cells=copy.deepcopy(HARMLESS))
    assert sanitize_notebook(nb) == new_notebook(cells=copy.deepcopy(HARMLESS))
    page = _render(nb)["classic"]
    assert "<td>3.2e-10</td>" in page and f"data:image/png;base64,{PNG}" in page


def test_sanitising_twice_changes_nothing():
    cells = [*ACTIVE_FORMS.values(), *DEFENCE_IN_DEPTH.values(), *HARMLESS, *ODD_CELLS.values()]
    once = sanitize_notebook(new_notebook(cells=copy.deepcopy(cells)))
    assert sanitize_notebook(copy.deepcopy(once)) == once


def test_errors_stay_errors_so_graded_cells_keep_their_score():
    broken = {"output_type": "error", "ename": 3, "evalue": None, "traceback": [1, {"x": 2}]}
    nb = sanitize_notebook(
        {"cells": [{"cell_type": "code", "source": "x", "metadata": {}, "outputs": [broken]}], "metadata": {}}
    )
    assert [o.output_type for o in nb["cells"][0]["outputs"]] == ["error"]


# --- odd input -------------------------------------------------------------------------------------


def _raw_code(**fields):
    return {"cell_type": "code", "source": "x", "metadata": {}, "execution_count": None, "outputs": [], **fields}


ODD_CELLS = {
    "outputs-not-a-list": _raw_code(outputs="<script>alert(1)</script>"),
    "output-not-a-dict": _raw_code(outputs=[42, None, ["<script>"]]),
    "no-output-type": _raw_code(outputs=[{"data": {"text/html": "<script>alert(1)</script>"}}]),
    "unknown-output-type": _raw_code(outputs=[{"output_type": "html", "data": {"text/html": "<script>"}}]),
    "no-data": _raw_code(outputs=[{"output_type": "display_data"}]),
    "data-not-a-dict": _raw_code(outputs=[{"output_type": "display_data", "data": "<script>", "metadata": {}}]),
    "html-not-a-string": _raw_code(
        outputs=[{"output_type": "display_data", "data": {"text/html": 42}, "metadata": {}}]
    ),
    "html-lines": _raw_code(
        outputs=[{"output_type": "display_data", "data": {"text/html": ["<b>a", "</b><script>"]}, "metadata": "x"}]
    ),
    "png-not-a-string": _raw_code(outputs=[{"output_type": "display_data", "data": {"image/png": {"a": 1}}}]),
    "stream-odd": _raw_code(
        outputs=[
            {"output_type": "stream", "name": "<script>", "text": None},
            {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]},
        ]
    ),
    "error-odd": _raw_code(outputs=[{"output_type": "error", "traceback": None}]),
    "execution-count-odd": _raw_code(
        execution_count="<script>",
        outputs=[
            {"output_type": "execute_result", "execution_count": "<b>", "data": {"text/plain": "1"}, "metadata": {}}
        ],
    ),
    "deep-html": _raw_code(outputs=[{"output_type": "display_data", "data": {"text/html": "<div>" * 8000}}]),
    "huge-html": _raw_code(outputs=[{"output_type": "display_data", "data": {"text/html": "<b>x</b>" * 30_000}}]),
    "markdown-none": {"cell_type": "markdown", "source": None, "metadata": {}},
    "markdown-number": {"cell_type": "markdown", "source": 12, "metadata": {}},
    "markdown-lines": {"cell_type": "markdown", "source": ["<script>", "alert(1)</script>"], "metadata": {}},
    "markdown-huge": {"cell_type": "markdown", "source": "<b>长</b>" * 30_000, "metadata": {}},
    "markdown-missing-attachment": {"cell_type": "markdown", "source": "![x](attachment:nope.png)", "metadata": {}},
    "attachments-not-a-dict": {"cell_type": "markdown", "source": "x", "metadata": {}, "attachments": "<svg>"},
    "attachment-not-a-dict": {
        "cell_type": "markdown",
        "source": "![x](attachment:a.png)",
        "metadata": {},
        "attachments": {"a.png": "<svg>", "b.png": {"image/png": "not base64!"}},
    },
    "raw-not-a-string": {"cell_type": "raw", "source": {"x": 1}, "metadata": {}},
}


@pytest.mark.parametrize("case", sorted(ODD_CELLS))
def test_odd_input_never_raises_and_renders_inert(case):
    nb = sanitize_notebook(new_notebook(cells=[copy.deepcopy(ODD_CELLS[case])]))
    assert student_active(nb) == Counter()  # nbconvert renders it: a broken output cannot stop the feedback


def test_broken_outputs_become_a_note():
    nb = sanitize_notebook(new_notebook(cells=[copy.deepcopy(ODD_CELLS["output-not-a-dict"])]))
    assert [o.text.strip() for o in nb.cells[0].outputs] == [BROKEN] * 3


def test_odd_notebooks_never_raise():
    for nb in ({}, {"cells": "x", "metadata": []}, {"cells": [None, 3, "x", {"cell_type": 5}], "metadata": {}}):
        sanitize_notebook(nb)


def test_code_sources_and_nbgrader_metadata_are_not_touched():
    meta = {"nbgrader": {"grade_id": "g", "solution": True, "grade": False, "locked": False}}
    cell = new_code_cell(
        "print('<script>alert(1)</script>')",
        metadata=meta,
        outputs=[new_output("display_data", data={"text/html": "<script>alert(1)</script>"})],
    )
    nb = sanitize_notebook(new_notebook(cells=[cell]))
    assert nb.cells[0].source == "print('<script>alert(1)</script>')" and nb.cells[0].metadata == meta


def test_the_pipelines_sanitise_right_after_the_verdict_and_last_in_feedback():
    from autograder.verdict.pipeline import AUTOGRADE_PREPROCESSORS, FEEDBACK_PREPROCESSORS
    from autograder.verdict.preprocessors import ExternalVerdict

    at = AUTOGRADE_PREPROCESSORS.index(ExternalVerdict)
    assert AUTOGRADE_PREPROCESSORS[at + 1] is SanitizeOutputs and FEEDBACK_PREPROCESSORS[-1] is SanitizeOutputs
    nb, _ = SanitizeOutputs().preprocess(new_notebook(cells=[copy.deepcopy(ACTIVE_FORMS["html-script"])]), {})
    assert student_active(nb) == Counter()


# --- end to end, through nbgrader ------------------------------------------------------------------

HOSTILE_CODE = f"""\
from IPython.display import HTML, SVG, Javascript, display
display(HTML("<script>alert('s')</script><img src=x onerror=alert(1)><iframe src='https://evil.example'></iframe>"
             "<a href='javascript:alert(2)'>点</a><table><tr><td>保留的表格</td></tr></table>"))
display(Javascript("alert(3)"))
display({{"application/javascript": "alert(4)", "text/plain": "js"}}, raw=True)
display(SVG({SVG_SCRIPT!r}))
display({{"image/png": {PNG!r}, "text/plain": "png"}}, raw=True)
"""
HOSTILE_ANSWER = "我的回答：<script>alert('md')</script><img src=x onerror=alert(5)>"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    course = released_course(SECTION, tmp_path_factory.mktemp("untrusted_outputs") / "course")
    release_nb = nbformat.read(course / "release" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    source_nb = nbformat.read(course / "source" / SECTION / f"{EXERCISE}.ipynb", as_version=4)
    answer = next(c for c in source_nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER)
    assert answer.cell_type == "markdown" and answer.metadata.nbgrader.get("grade")  # a manually graded answer
    honest = solution_sources(source_nb)
    # the hostile student also solves the exercise: its graded cells run (an error's traceback would
    # show the grading call, which is not what this file tests)
    hostile = {**honest, CELL: honest[CELL] + "\n" + HOSTILE_CODE, ANSWER: HOSTILE_ANSWER}
    students = {"honest": honest, "hostile": hostile}
    for student, cells in students.items():
        folder = course / "submitted" / student / SECTION
        folder.mkdir(parents=True)
        submission = make_submission(release_nb, cells)
        if student == "honest":  # as the edition's copy opens in Colab: its Colab cell first (not nbgrader's)
            submission.cells.insert(0, colab_cell("https://github.com/example-course/s04-student", "2027-spring"))
        nbformat.write(submission, folder / f"{EXERCISE}.ipynb")
    nbgrader(["autograde", SECTION, "--force"], course)
    nbgrader(["generate_feedback", SECTION, "--force"], course)
    return course


def _autograded(course, student):
    return nbformat.read(course / "autograded" / student / SECTION / f"{EXERCISE}.ipynb", as_version=4)


def _feedback(course, student):
    return (course / "feedback" / student / SECTION / f"{EXERCISE}.html").read_text(encoding="utf-8")


def test_hostile_outputs_reach_neither_formgrader_nor_feedback(graded):
    course = graded
    hostile = _autograded(course, "hostile")
    mimetypes = {m for c in hostile.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})}
    assert mimetypes <= {"text/plain", "text/html", "image/png"}, mimetypes
    # what formgrader renders: the autograded notebook, through nbconvert; beyond the template, nothing active
    assert student_active(hostile) == Counter()
    assert student_active(_autograded(course, "honest")) == Counter()
    page, honest_page = _feedback(course, "hostile"), _feedback(course, "honest")
    assert active(page) == active(honest_page)  # same template scripts, and not one more
    # the attempts were made, and are shown as text; the table and the image survived
    assert "&lt;script&gt;alert('s')&lt;/script&gt;" in page
    assert "我的回答：&lt;script&gt;alert('md')&lt;/script&gt;" in page
    assert "<td>保留的表格</td>" in page and f"data:image/png;base64,{PNG}" in page
    assert check_feedback(course, [SECTION]) == []  # the hidden tests are still stripped


def test_honest_student_keeps_full_marks(graded):
    """The honest notebook opens with the student edition's Colab cell: nbgrader grades it as a cell the student
    added, and grading leaves it unrun (skip-in-grading)."""
    scores = gradebook_scores(graded, SECTION)
    got, total = scores["honest"][EXERCISE]["auto"]
    assert got == total > 0
    first = _autograded(graded, "honest").cells[0]
    assert "Colab 准备单元" in first.source and SKIPPED in json.dumps(first.outputs, ensure_ascii=False)
