"""Make a graded notebook inert before formgrader or a feedback page shows it to anyone.

Everything in an autograded notebook that the student controls (outputs of their code, markdown
answers, attachments, notebook metadata) is rendered as HTML in the instructor's browser by formgrader
and into the feedback pages by ``nbgrader generate_feedback``. :class:`SanitizeOutputs` keeps what is
inert (plain text, PNG/JPEG images, allow-listed HTML such as tables, formulas) and removes or escapes the
rest, by allow-list, so a mimetype or tag nobody thought of is dropped rather than rendered:

* outputs keep only the mimetypes of :data:`INERT_MIMETYPES`; ``text/html`` is cleaned with bleach and
  ``text/markdown`` like a markdown cell (:mod:`autograder.verdict.markup`); scripts, widgets, mermaid,
  PDF and SVG go. SVG is dropped, not cleaned: it is a document format that carries script, event
  handlers and embedded HTML, whether it is inert depends on how each viewer embeds it, and the
  course's figures are PNG (matplotlib's inline backend), so nothing of value is lost;
* markdown and raw cells are cleaned (code cell sources are never touched: nbgrader checksums them,
  and they are shown highlighted, as text); attachments keep raster images only;
* the notebook's ``metadata.widgets`` (widget state, rendered as script) is removed.

It never raises on odd input (a student writes the JSON by hand): an output it cannot make sense of
becomes a short note in Chinese, an error stays an error (a graded cell's error must keep costing its
points), and running it twice changes nothing.
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.verdict.markup import as_plain_text, clean_html, is_plain_text, sanitize_markdown

IMAGE_MIMETYPES = frozenset({"image/png", "image/jpeg"})
ATTACHMENT_MIMETYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
INERT_MIMETYPES = frozenset({"text/plain", "text/html", "text/markdown", "text/latex", *IMAGE_MIMETYPES})
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_STREAMS = ("stdout", "stderr")

#: html5lib and mistune are pure Python, and deep nesting costs them quadratic time: markup beyond these
#: sizes (characters, and '<' as a measure of tags) is not parsed, so a notebook cannot stall grading.
#: Per piece of markup (an HTML or markdown output, a markdown or raw cell), then per notebook.
MAX_MARKUP = (100_000, 5_000)
MAX_NOTEBOOK_MARKUP = (500_000, 20_000)

REMOVED = "（这个输出含有可能在阅卷页面上执行的内容或无法显示的格式（{what}），为安全起见已移除。）"
BROKEN = "（这个输出的结构已损坏，无法显示。）"
BROKEN_CELL = "（这个单元的内容已损坏，无法显示。）"
TOO_LARGE = "（这个输出的标记太长或嵌套太多，无法安全检查，已移除。）"


class _Budget:
    """How much markup is left to parse in this notebook.

    Each piece is charged what its RESULT costs, and a result must itself fit, so a second run over
    the sanitised notebook takes the same decisions (idempotence).
    """

    def __init__(self):
        self.left = list(MAX_NOTEBOOK_MARKUP)

    @staticmethod
    def cost(text: str) -> tuple:
        return len(text), text.count("<")

    def fits(self, text: str) -> bool:
        return all(c <= min(m, left) for c, m, left in zip(self.cost(text), MAX_MARKUP, self.left))

    def clean(self, text: str, sanitize):
        """``sanitize(text)`` when the text and its result fit, charged; else None."""
        if not self.fits(text):
            return None
        result = sanitize(text)
        if not self.fits(result):
            return None
        self.left = [left - c for left, c in zip(self.left, self.cost(result))]
        return result


def _text(value):
    """A string, from a string or nbformat's list of lines; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def _note(text: str) -> NotebookNode:
    return from_dict({"output_type": "stream", "name": "stdout", "text": text + "\n"})


def _image_metadata(meta) -> dict:
    # what nbconvert's templates read for an image (width, height, unconfined, background, alt);
    # 'filenames' would point an <img> anywhere, text/html 'isolated' puts the HTML in an iframe
    out = {}
    if isinstance(meta, dict):
        for key in ("width", "height"):
            if isinstance(meta.get(key), (int, float)) and not isinstance(meta.get(key), bool):
                out[key] = meta[key]
        if isinstance(meta.get("unconfined"), bool):
            out["unconfined"] = meta["unconfined"]
        if meta.get("needs_background") in ("light", "dark"):
            out["needs_background"] = meta["needs_background"]
        if isinstance(meta.get("alt"), str):
            out["alt"] = meta["alt"][:1000]
    return out


def _clean_data(mime: str, value, attachments, budget: _Budget):
    """The inert form of one representation, or None when it must go."""
    text = _text(value)
    if mime not in INERT_MIMETYPES or text is None:
        return None
    if mime in IMAGE_MIMETYPES:
        return text if _BASE64.fullmatch(text) else None
    if mime == "text/html":
        return budget.clean(text, clean_html)
    if mime == "text/markdown":
        return budget.clean(text, lambda t: sanitize_markdown(t, attachments))
    return text


def _rich_output(output, attachments, budget: _Budget):
    data = output.get("data")
    if not isinstance(data, dict):
        return _note(BROKEN)
    kept, dropped = {}, []
    for mime, value in data.items():
        clean = _clean_data(mime, value, attachments, budget) if isinstance(mime, str) else None
        if clean is None:
            dropped.append(str(mime)[:60])
        else:
            kept[mime] = clean
    if not kept:
        markup = [_text(v) for m, v in data.items() if m in ("text/html", "text/markdown")]
        too_large = any(t is not None and not budget.fits(t) for t in markup)
        text = TOO_LARGE if too_large else REMOVED.format(what="、".join(dropped[:5]))
        kept = {"text/plain": text}
    meta = output.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    clean = {
        "output_type": output["output_type"],
        "data": kept,
        "metadata": {m: _image_metadata(meta[m]) for m in IMAGE_MIMETYPES & set(kept) if m in meta},
    }
    if output["output_type"] == "execute_result":
        count = output.get("execution_count")
        clean["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
    return from_dict(clean)


def _error_output(output):
    # still an error: SaveAutoGrades gives a graded cell with an error no points
    trace = output.get("traceback")
    trace = [t if isinstance(t, str) else str(t) for t in trace] if isinstance(trace, list) else []
    return from_dict(
        {
            "output_type": "error",
            "ename": str(output.get("ename", ""))[:200],
            "evalue": str(output.get("evalue", "")),
            "traceback": trace,
        }
    )


def sanitize_output(output, attachments=None, budget: _Budget | None = None) -> NotebookNode:
    """The inert form of one output of a code cell."""
    budget = budget or _Budget()
    kind = output.get("output_type") if isinstance(output, dict) else None
    try:
        if kind == "stream":
            text = _text(output.get("text"))
            name = output.get("name") if output.get("name") in _STREAMS else "stdout"
            return (
                from_dict({"output_type": "stream", "name": name, "text": text}) if text is not None else _note(BROKEN)
            )
        if kind == "error":
            return _error_output(output)
        if kind in ("display_data", "execute_result"):
            return _rich_output(output, attachments, budget)
    except Exception:  # a bug here must not stop the grading of a class: the output goes, with a note
        if kind == "error":
            return from_dict({"output_type": "error", "ename": "Error", "evalue": BROKEN, "traceback": [BROKEN]})
    return _note(BROKEN)


def sanitize_attachments(attachments):
    """Raster images only, as base64 text; an attachment left with nothing is removed."""
    if not isinstance(attachments, dict):
        return {}
    out = {}
    for name, bundle in attachments.items():
        if isinstance(name, str) and isinstance(bundle, dict):
            kept = {
                m: v
                for m, v in bundle.items()
                if m in ATTACHMENT_MIMETYPES and isinstance(v, str) and _BASE64.fullmatch(v)
            }
            if kept:
                out[name] = kept
    return out


def _markdown_source(source, attachments, budget: _Budget) -> str:
    if is_plain_text(source):  # no rendering needed, whatever its size
        return source
    clean = budget.clean(source, lambda t: sanitize_markdown(t, attachments))
    return clean if clean is not None else as_plain_text(source)


def _sanitize_source(cell, budget: _Budget) -> None:
    source = _text(cell.get("source"))
    try:
        if cell.get("cell_type") == "markdown":
            cell["source"] = (
                _markdown_source(source, cell.get("attachments"), budget) if source is not None else BROKEN_CELL
            )
        elif cell.get("cell_type") == "raw":
            clean = budget.clean(source, clean_html) if source is not None else None
            cell["source"] = clean if clean is not None else BROKEN_CELL
    except Exception:  # never a crashed grading run: the cell's content goes, with a note
        cell["source"] = BROKEN_CELL


def sanitize_cell(cell, budget: _Budget | None = None) -> None:
    """Make one cell inert, in place."""
    budget = budget or _Budget()
    if not isinstance(cell, dict):
        return
    if "attachments" in cell:
        cell["attachments"] = sanitize_attachments(cell["attachments"])
    if cell.get("cell_type") == "code":
        outputs = cell.get("outputs")
        cell["outputs"] = (
            [sanitize_output(o, cell.get("attachments"), budget) for o in outputs]
            if isinstance(outputs, list)
            else [_note(BROKEN)]
        )
        count = cell.get("execution_count")
        if not (count is None or isinstance(count, int) and not isinstance(count, bool)):
            cell["execution_count"] = None
    else:
        _sanitize_source(cell, budget)


def sanitize_notebook(nb):
    """Make every cell of ``nb`` inert and drop the widget state, in place; returns ``nb``."""
    meta = nb.get("metadata")
    if isinstance(meta, dict):
        meta.pop("widgets", None)
    cells = nb.get("cells")
    budget = _Budget()
    for cell in cells if isinstance(cells, list) else []:
        sanitize_cell(cell, budget)
    return nb


class SanitizeOutputs(NbGraderPreprocessor):
    """Remove everything from the notebook that could run in the browser of whoever views it."""

    def preprocess(self, nb, resources):
        return sanitize_notebook(nb), resources
