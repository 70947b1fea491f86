"""Scan a folder that students receive (the student edition, the built book) for instructor-only material.

What counts as instructor-only (:func:`collect_secrets`):

* **solution and rubric text**: every line longer than :data:`MIN_LINE` characters inside a solution region
  of a source notebook in ``assignments/source/`` (code solutions, and the written answers' cells that hold
  the rubric and its 参考答案), comments left out;
* **reference code**: every line of that length in a function body of ``autograder/authoring/reference/``;
* **expected values**: every number of ``autograder/data/*.json`` (expected results, catalogued mistakes'
  results) and every **hidden input** of ``autograder/kernel/inputs/*.json``.

A line is a secret only if it is not also in the public text the edition is made from (a release notebook's
stub, a library call the book shows): what students may read anyway cannot leak.

Numbers are matched two ways, so that the thousands of numbers printed in the book do not match by chance:

* **two values of one hidden case** in one file, each written with at least :data:`SINGLE_DIGITS`
  significant digits and equal to a secret of that case at that many digits (one value alone is often a
  constant anyone computes: sqrt(eps) = 1.4901161193847656e-06 is a hidden tolerance, 5/3 an expected ratio);
* **a run**: any :data:`RUN` numbers in a row equal to :data:`RUN` consecutive values of one secret array at
  :data:`RUN_DIGITS` significant digits (a hidden input vector, an expected trajectory), counting only values
  written with at least :data:`RUN_MIN_DIGITS` significant digits (runs of zeros or of 0.5 are everywhere).

:func:`scan` reads every file under a folder: text as written, notebooks and JSON through their strings
and numbers, HTML unescaped, and the members of zip files and wheels (recursively). Binary files (images,
fonts) are skipped; an archive it cannot open and a symbolic link are problems, since nothing behind them
was checked.
"""

from __future__ import annotations

import ast
import html
import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import numpy as np

from autograder.authoring.hidden_numbers import NUMBER, at_digits, significant_digits
from autograder.authoring.release_scan import FORBIDDEN_MARKERS, solution_lines
from autograder.authoring.sources import COURSE_DIR, complete_metadata, source_notebooks

ROOT = COURSE_DIR.parent
MIN_LINE = 20
SINGLE_DIGITS = 10
RUN, RUN_DIGITS, RUN_MIN_DIGITS = 3, 6, 4
_TAG = re.compile(r"<[^>]*>")
_JSON_SUFFIXES = {".json", ".ipynb"}
_ZIP_SUFFIXES = {".zip", ".whl"}


#: characters of a secret line that locate where it could start in a text (MIN_LINE or fewer; see _LineIndex)
_PREFIX = 16
_BASE = np.uint64(1_000_003)
_TABLE_MASK = (1 << 22) - 1


def _window_hashes(text: str, width: int = _PREFIX) -> np.ndarray:
    """A polynomial hash (uint64, wrapping) of each ``width``-character window of ``text``, by position."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
    n = len(codes) - width + 1
    if n <= 0:
        return np.zeros(0, dtype=np.uint64)
    hashes = np.zeros(n, dtype=np.uint64)
    for j in range(width):
        hashes = hashes * _BASE + codes[j : j + n]
    return hashes


class _LineIndex:
    """The secret lines by the hash of their first :data:`_PREFIX` characters.

    Searching a text for each of some 2,700 lines cost 9 of the 13 s that scanning the built book took. Hashing
    every window of the text once and looking the hashes up finds the few lines whose beginning occurs at all;
    only those are searched for. The answer is the same: a line occurs only where its first characters do, and a
    hash collision only adds a line to search for."""

    def __init__(self, lines: Iterable[str]):
        self.by_hash: dict[int, list[str]] = {}
        self.short: list[str] = []  # none today (MIN_LINE > _PREFIX): searched for directly
        for line in lines:
            if len(line) < _PREFIX:
                self.short.append(line)
            else:
                self.by_hash.setdefault(int(_window_hashes(line[:_PREFIX])[0]), []).append(line)
        # a bit per value of a hash's low bits: one lookup per window, and about 1 window in 2,000 goes on
        self.seen = np.zeros(_TABLE_MASK + 1, dtype=bool)
        self.seen[[h & _TABLE_MASK for h in self.by_hash]] = True

    def found_in(self, text: str) -> list[str]:
        windows = _window_hashes(text)
        maybe = windows[self.seen[(windows & np.uint64(_TABLE_MASK)).astype(np.intp)]]
        present = set(maybe.tolist()) & self.by_hash.keys()
        candidates = [line for h in present for line in self.by_hash[h]] + self.short
        return [line for line in candidates if line in text]


@dataclass
class Secrets:
    """Instructor-only text and numbers, each with where it comes from."""

    lines: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, tuple[str, str]] = field(default_factory=dict)  # value at SINGLE_DIGITS -> (origin, case)
    runs: dict[tuple[str, ...], str] = field(default_factory=dict)  # RUN values at RUN_DIGITS digits -> origin


def _function_body_lines(path: Path) -> Iterator[tuple[str, str]]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if not body:
            continue
        end = body[-1].end_lineno or body[-1].lineno
        for line in lines[body[0].lineno - 1 : end]:
            stripped = line.strip()
            if len(stripped) >= MIN_LINE and not stripped.startswith("#"):
                yield stripped, f"{path.stem}.{node.name}"


def _numbers(value, path: str) -> Iterator[tuple[str, list[float]]]:
    """``(where, flat list of numbers)`` for every array (list of numbers) and scalar in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}")
    elif isinstance(value, list):
        if value and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            yield path, [float(x) for x in value]
        else:
            for i, item in enumerate(value):
                yield from _numbers(item, f"{path}[{i}]")
    elif isinstance(value, float):
        yield path, [value]


def _case(path: str) -> str:
    """The hidden case a number belongs to: ``s04_1_ex1.fd_grad.cases[2]`` (data) or ``s04_1_ex1.fd_grad[2]``."""
    match = re.match(r"[^.\[]+\.[^.\[]+(?:\.cases)?\[\d+\]", path)
    return match.group() if match else path


def _add_numbers(secrets: Secrets, document, name: str, all_inputs: bool, shared: set[str] = frozenset()) -> None:
    """Add the numbers of ``document`` (JSON) to ``secrets``, less those in ``shared`` (keyed like the secrets)."""
    for path, values in _numbers(document, name):
        where = f"{'hidden input' if all_inputs or '.inputs' in path else 'expected value'} {path}"
        for value in values:
            key = at_digits(value, SINGLE_DIGITS)
            if significant_digits(repr(value)) >= SINGLE_DIGITS and key not in shared:
                secrets.numbers.setdefault(key, (where, _case(path)))
        for i in range(len(values) - RUN + 1):
            window = values[i : i + RUN]
            key = tuple(at_digits(v, RUN_DIGITS) for v in window)
            if all(significant_digits(repr(v)) >= RUN_MIN_DIGITS for v in window) and not shared.issuperset(key):
                secrets.runs.setdefault(key, where)


def _public_numbers(root: Path, exercise: str) -> dict[str, set[str]]:
    """Per check of ``exercise``, the numbers its public cases produce (``course_check/public``).

    A hidden number that the same check's public cases produce too does not depend on what is hidden (a
    constant of the task, a step size both share, a clipped norm of exactly 1): it is not a secret. The
    generator makes the public cases' inputs differ from every hidden case's (``regenerate._disjoint``).
    """
    path = root / "course_check" / "public" / f"{exercise}.json"
    if not path.exists():
        return {}
    return {
        name: {
            at_digits(v, d)
            for _, values in _numbers(spec["cases"], name)
            for v in values
            for d in (SINGLE_DIGITS, RUN_DIGITS)
        }
        for name, spec in json.loads(path.read_text(encoding="utf-8")).items()
    }


def collect_secrets(public: Iterable[str] = (), root: Path = ROOT) -> Secrets:
    """Everything instructor-only in the course at ``root``, less the lines and numbers that appear in
    ``public`` (what students may read anyway: :func:`course_public_texts`)."""
    public_text = "\n".join(public)
    secrets = Secrets()
    for md in source_notebooks(root / "assignments"):
        nb = complete_metadata(jupytext.read(md), md.name)
        for line in sorted(solution_lines(nb, MIN_LINE)):
            secrets.lines.setdefault(line, f"solution or rubric of {md.stem}")
    for path in sorted((root / "autograder" / "authoring" / "reference").glob("*.py")):
        for line, where in _function_body_lines(path):
            secrets.lines.setdefault(line, f"reference code {where}")
    secrets.lines = {line: where for line, where in secrets.lines.items() if line not in public_text}
    shown = {path.stem: _public_numbers(root, path.stem) for path in (root / "autograder" / "data").glob("*.json")}
    for folder in ("kernel/inputs", "data"):  # the data repeats the inputs beside the expected values
        for path in sorted((root / "autograder" / folder).glob("*.json")):
            for name, spec in json.loads(path.read_text(encoding="utf-8")).items():
                in_public = shown.get(path.stem, {}).get(name, set())
                _add_numbers(secrets, {name: spec}, path.stem, folder == "kernel/inputs", in_public)
    # a value the release itself prints (a self-check's public point that a hidden case shares) is public
    public_singles, public_runs = _number_keys(NUMBER.findall(public_text))
    secrets.numbers = {k: v for k, v in secrets.numbers.items() if k not in public_singles}
    secrets.runs = {k: v for k, v in secrets.runs.items() if k not in public_runs}
    return secrets


def _number_keys(tokens: list[str]) -> tuple[dict[str, str], dict[tuple[str, ...], str]]:
    """The tokens as the secrets are keyed: ``({single key: token}, {run key: tokens})`` (see the module)."""
    singles = {at_digits(float(t), SINGLE_DIGITS): t for t in tokens if significant_digits(t) >= SINGLE_DIGITS}
    # a run is RUN numbers in a row, each written with RUN_MIN_DIGITS digits or more (as the secrets are)
    values = [at_digits(float(t), RUN_DIGITS) if significant_digits(t) >= RUN_MIN_DIGITS else None for t in tokens]
    runs = {}
    for i in range(len(values) - RUN + 1):
        window = values[i : i + RUN]
        if None not in window:
            runs[tuple(window)] = " ".join(tokens[i : i + RUN])
    return singles, runs


def course_public_texts(root: Path = ROOT) -> list[str]:
    """What students may read of the course: the book's pages and helpers, course_lib and course_check (the
    edition ships both), and every exercise's student notebook (its cells' sources, as nbgrader releases it)."""
    from autograder.authoring.student_copy import student_notebook

    paths = sorted((root / "book").glob("*.md")) + sorted((root / "book").glob("*.py"))
    for package in ("course_lib", "course_check"):
        paths += sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)
    texts = [p.read_text(encoding="utf-8") for p in paths]
    for md in source_notebooks(root / "assignments"):
        texts.append("\n".join(cell.source for cell in student_notebook(md, root / "assignments").cells))
    return texts


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            if not key.startswith("image/"):  # base64 pictures in a notebook's outputs
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield repr(value)


def _texts(name: str, data: bytes) -> Iterator[tuple[str, str | None]]:
    """``(where, text)`` for one file's bytes; zip members are opened in turn. ``text`` is None for an
    archive (or member) that cannot be read: nothing in it could be checked."""
    suffix = Path(name).suffix.lower()
    if suffix in _ZIP_SUFFIXES or data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = [(m.filename, archive.read(m)) for m in archive.infolist() if not m.is_dir()]
        except (zipfile.BadZipFile, RuntimeError, OSError, EOFError, zlib.error):  # broken or encrypted
            yield name, None
            return
        for member, content in members:
            yield from _texts(f"{name}!{member}", content)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # an image, a font: no text to leak through
    if suffix in _JSON_SUFFIXES:
        try:
            text = "\n".join(_strings(json.loads(text)))
        except json.JSONDecodeError:
            pass
    if suffix in {".html", ".htm", ".xml", ".svg"}:
        text = html.unescape(_TAG.sub("", text))  # highlighted code is split into spans
    yield name, text


def scan_text(where: str, text: str, secrets: Secrets, index: _LineIndex) -> list[str]:
    """What of ``secrets`` appears in ``text`` (one problem per kind of hit and origin). ``index``: the index of
    ``secrets.lines``, made once by :func:`scan` for all its texts."""
    problems = []
    if where.endswith(".ipynb"):  # a notebook with these markers was never released (prose may name them)
        problems += [f"{where}: contains the marker {m!r}" for m in FORBIDDEN_MARKERS if m in text]
    for line in index.found_in(text):
        problems.append(f"{where}: {secrets.lines[line]} leaked: {line[:80]!r}")
    singles, runs = _number_keys(NUMBER.findall(text))
    by_case: dict[str, list[str]] = {}
    for key, token in singles.items():
        if key in secrets.numbers:
            origin, case = secrets.numbers[key]
            by_case.setdefault(case, []).append(f"{token} ({origin})")
    problems += [
        f"{where}: values of one hidden case leaked: {'; '.join(hits)}" for hits in by_case.values() if len(hits) >= 2
    ]
    problems += [f"{where}: {secrets.runs[k]} leaked: {t}" for k, t in runs.items() if k in secrets.runs]
    return sorted(set(problems))


def scan(folder: Path, secrets: Secrets) -> list[str]:
    """Problems found in every file under ``folder`` (an empty list: nothing instructor-only)."""
    problems = []
    index = _LineIndex(secrets.lines)
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() or p.is_symlink()):
        if path.is_symlink():  # never followed: it could point at anything on the instructor's machine
            problems.append(f"{path.relative_to(folder)}: a link, not a file; publish files only")
            continue
        for where, text in _texts(str(path.relative_to(folder)), path.read_bytes()):
            if text is None:
                problems.append(f"{where}: cannot be opened (a broken or encrypted archive), so it was not checked")
            else:
                problems += scan_text(where, text, secrets, index)
    return problems
