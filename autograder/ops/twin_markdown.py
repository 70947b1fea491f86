"""A page's MyST markdown as plain notebook markdown, for the twins students open in Jupyter or Colab.

Jupyter and Colab render CommonMark, not MyST: a twin made by jupytext alone shows ``{glue:text}`name:.2f```
where the book shows a number, ``{ref}`S04.4 <s04-4>``` where it shows a link, and every admonition as a code
block with its "answer" open. :meth:`TwinText.markdown` rewrites a markdown cell so that it reads like the page:

* a glued number is the value the book's own build computed (``_build/jupyter_execute/<page>.glue.json``,
  written by myst-nb), formatted as the role asks; without a built book it says where the number comes from;
* ``ref``/``doc``/``term``/``numref``/``eq``/``cite`` become their text (a section's or page's title, the term,
  an equation's or a figure's number as the book shows it), ``exercise`` a link to the exercise's notebook in the edition;
* admonitions become quotes, and a ``dropdown`` one (a prompt's answer) a collapsed ``<details>``; a glossary a
  list of bold terms, the bibliography a list of its entries (``references.bib``);
* label lines ``(label)=`` and ``eval-rst`` blocks (the API tables generated for the web) are dropped.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from autograder.course.course import Course

GLUE = re.compile(r"\{glue(?::text)?\}`([^`:]+)(?::([^`]*))?`")
ROLE = re.compile(r"\{(ref|doc|term|numref|eq|cite|exercise)\}`([^`]*)`")
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
_LABEL_LINE = re.compile(r"^\([\w.:-]+\)=[ \t]*\n", re.M)
_FENCE = re.compile(
    r"^```\{(admonition|note|warning|eval-rst|glossary|bibliography)\}[ \t]*(.*?)\n(.*?)^```[ \t]*$\n?", re.M | re.S
)
_OPTION = re.compile(r"^:(\w+):[ \t]*(.*)$")
_LABELLED_EQUATION = re.compile(r"^\$\$ \(([\w-]+)\)[ \t]*$", re.M)
_FIGURE_NAME = re.compile(r"^\s+name: (fig-[\w-]+)[ \t]*$", re.M)


def glued_values(build_dir: Path, page: str) -> dict[str, str]:
    """``{name: text}`` of what ``page`` (``book/s04_4``) glued in the book's last build; empty without one."""
    path = Path(build_dir) / "jupyter_execute" / f"{page}.glue.json"
    if not path.is_file():
        return {}
    return {
        name: output.get("data", {}).get("text/plain", "")
        for name, output in json.loads(path.read_text(encoding="utf-8")).items()
    }


def format_glued(text: str, spec: str) -> str:
    """The glued value's ``text/plain`` formatted with ``spec`` as myst-nb's ``glue:text`` role does."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    try:
        return format(value, spec) if spec else str(value)
    except (TypeError, ValueError):
        return str(value)


def _title_and_target(content: str) -> tuple[str | None, str]:
    match = _TITLED.match(content.strip())
    return (match.group(1), match.group(2)) if match else (None, content.strip())


class TwinText:
    """What the roles of the course's pages point at: section and page titles, exercises' sections."""

    def __init__(
        self,
        titles: dict[str, str],
        exercise_sections: dict[str, str],
        numbers: dict[str, int],
        references: tuple[str, ...] = (),
    ):
        self.titles, self.exercise_sections, self.numbers = titles, exercise_sections, numbers
        self.references = references  # the bibliography's entries, one line each

    @classmethod
    def of_course(cls, root: Path, pages: list[str]) -> TwinText:
        """The course at ``root``; ``pages`` in the book's order (``_toc.yml``), which numbers its labelled
        equations and its figures 1, 2, ... across the whole book."""
        texts = {f"book/{md.stem}": md.read_text(encoding="utf-8") for md in sorted((Path(root) / "book").glob("*.md"))}
        equations = [label for page in pages for label in _LABELLED_EQUATION.findall(texts[page])]
        figures = [name for page in pages for name in _FIGURE_NAME.findall(texts[page])]
        numbers = {label: n for found in (equations, figures) for n, label in enumerate(found, start=1)}
        titles = {}
        for page, text in texts.items():
            first = re.search(r"^# (.+)$", text, re.M)
            if first:
                titles[page.removeprefix("book/")] = first.group(1).strip()
            for label, heading in re.findall(r"^\(([\w.:-]+)\)=[ \t]*\n#+ (.+)$", text, re.M):
                titles[label] = heading.strip()
        sources = Course.load(Path(root) / "assignments").source_folders()
        sections = {md.stem: section for section, folder in sources.items() for md in sorted(folder.glob("*.md"))}
        return cls(titles, sections, numbers, bibliography(Path(root) / "references.bib"))

    def role(self, kind: str, content: str) -> str:
        title, target = _title_and_target(content)
        if kind == "term":
            return title or re.sub(r"（.*?）$", "", target)
        if kind in ("ref", "doc"):
            return title or self.titles.get(target, target)
        if kind == "numref":
            return (title or "图 %s").replace("%s", str(self.numbers.get(target, target)))
        if kind == "eq":
            return f"({self.numbers.get(target, target)})"
        if kind == "cite":
            return f"[{target}]"
        section = self.exercise_sections.get(target)
        return f"[练习 {target}](../exercises/{section}/{target}.ipynb)" if section else f"练习 {target}"

    def markdown(self, source: str, glued: dict[str, str]) -> str:
        """One markdown cell of a page, as plain notebook markdown (see the module docstring)."""

        def glue(match: re.Match) -> str:
            name, spec = match.group(1).strip(), match.group(2) or ""
            if name in glued:
                return format_glued(glued[name], spec)
            return f"`{name}`（运行本页的代码后得到）"

        text = _LABEL_LINE.sub("", source)
        text = _FENCE.sub(lambda m: _plain_block(m, self.references), text)
        text = GLUE.sub(glue, text)
        return ROLE.sub(lambda m: self.role(m.group(1), m.group(2)), text)


def bibliography(bib: Path) -> tuple[str, ...]:
    """``[key] authors (year). title.`` for each entry of a BibTeX file, in the file's order."""
    if not bib.is_file():
        return ()
    entries = []
    for key, body in re.findall(r"^@\w+\{([^,]+),(.*?)^\}", bib.read_text(encoding="utf-8"), re.M | re.S):
        fields = {name.lower(): value for name, value in re.findall(r"(\w+)\s*=\s*\{(.*)\},?\s*$", body, re.M)}
        authors = fields.get("author", "").replace("{", "").replace("}", "")
        title = fields.get("title", "").replace("{", "").replace("}", "")
        end = "" if title.endswith((".", "?", "!")) else "."
        entries.append(f"[{key.strip()}] {authors} ({fields.get('year', '')}). {title}{end}")
    return tuple(entries)


def _plain_block(match: re.Match, references: tuple[str, ...]) -> str:
    kind, argument, body = match.group(1), match.group(2).strip(), match.group(3)
    if kind == "eval-rst":
        return ""
    if kind == "bibliography":
        return "".join(f"- {entry}\n" for entry in references)
    if kind == "glossary":  # a term on its own line, its definition indented below it
        entries = re.findall(r"^(\S.*)\n((?:[ \t]+.*\n?)+)", body, re.M)
        return "".join(
            f"- **{term.strip()}**：{' '.join(d.strip() for d in text.splitlines())}\n" for term, text in entries
        )
    options, lines = {}, body.splitlines()
    while lines and _OPTION.match(lines[0]):
        key, value = _OPTION.match(lines[0]).groups()  # type: ignore[union-attr]
        options[key] = value
        lines = lines[1:]
    title = argument or {"note": "注意", "warning": "警告"}.get(kind, "")
    content = "\n".join(lines).strip("\n")
    if "dropdown" in options.get("class", ""):
        return f"<details>\n<summary>{title}</summary>\n\n{content}\n\n</details>\n"
    quoted = "\n".join(f"> {line}" if line else ">" for line in content.splitlines())
    return f"> **{title}**\n>\n{quoted}\n" if title else f"{quoted}\n"
