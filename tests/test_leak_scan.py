"""The leak scan (autograder/authoring/leak_scan.py) finds each kind of instructor-only material, wherever
it is planted, and passes what students may read.

One leak of each kind is planted in a clean folder, in the kind of file it would travel in: a solution line
in a notebook, a rubric line in a README, a reference function's line inside a wheel, an expected value in a
JSON file, a hidden input vector in an HTML page split into highlighted spans. Each alone fails the scan,
and the problem names the file and what leaked.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import leak_scan
from autograder.authoring.hidden_numbers import HiddenNumbers, significant_digits
from autograder.authoring.release_scan import HIDDEN_INPUT_DIGITS
from autograder.ops.reports import MIN_DIGITS


#: one worker runs the module, so its module fixture is built once
pytestmark = pytest.mark.xdist_group("leak_scan")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def secrets():
    return leak_scan.collect_secrets(leak_scan.course_public_texts())


def _first(secrets, prefix: str, where: str = "") -> str:
    return next(line for line, origin in secrets.lines.items() if origin.startswith(prefix) and where in origin)


def _hidden_run() -> list[float]:
    data = json.loads((ROOT / "autograder" / "kernel" / "inputs" / "s04_1_ex1.json").read_text())
    for check in data.values():  # {check: {"params": [...], "cases": [inputs of each hidden case]}}
        for inputs in check["cases"]:
            if len(inputs["u"]) >= 3:
                return inputs["u"][:3]
    raise AssertionError("s04_1_ex1 has no hidden input vector")


def _expected_values() -> list[float]:
    """Two expected values of one hidden case, far apart in its array (not a run)."""
    data = json.loads((ROOT / "autograder" / "data" / "s04_1_ex1.json").read_text())
    values = data["analytic_grad"]["cases"][0]["expected"][0]
    long = [v for v in values if leak_scan.significant_digits(repr(v)) >= leak_scan.SINGLE_DIGITS]
    return [long[0], long[-1]]


def _wheel(member: str, text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(member, text)
        wheel.writestr("course_lib/__init__.py", "import jax\n")
    return buffer.getvalue()


def _clean_folder(folder: Path) -> None:
    folder.mkdir()
    (folder / "README.md").write_text("# 学生版\n\n打开 exercises/ 里的笔记本。\n", encoding="utf-8")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import course_lib as cl\nx = 0.25")])
    nbformat.write(nb, folder / "page.ipynb")
    (folder / "data.json").write_text(json.dumps({"h": 0.01, "values": [0.5, 1.0, 1.5]}))
    (folder / "course_lib-0.1.0-py3-none-any.whl").write_bytes(_wheel("course_lib/x.py", "def f():\n    return 1\n"))
    (folder / "page.html").write_text("<p>步长 <code>0.01</code></p>", encoding="utf-8")


def test_the_course_has_every_kind_of_secret(secrets):
    origins = set(secrets.lines.values())
    assert any(o.startswith("solution or rubric of") for o in origins)
    assert any(o.startswith("reference code") for o in origins)
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in line) for line in secrets.lines) > 50  # rubrics
    assert any(origin.startswith("expected value") for origin, _ in secrets.numbers.values())
    assert any(o.startswith("hidden input") for o in secrets.runs.values())


def test_a_clean_folder_passes(secrets, tmp_path):
    _clean_folder(tmp_path / "edition")
    assert leak_scan.scan(tmp_path / "edition", secrets) == []


def test_each_planted_leak_fails_the_scan_and_is_named(secrets, tmp_path):
    solution = _first(secrets, "solution or rubric of", "s04_1_ex1")
    rubric = next(
        line
        for line, origin in secrets.lines.items()
        if origin.startswith("solution or rubric")
        and any("\u4e00" <= ch <= "\u9fff" for ch in line)
        and not any(marker in line for marker in leak_scan.FORBIDDEN_MARKERS)
    )
    reference = _first(secrets, "reference code")
    expected = _expected_values()
    run = _hidden_run()
    plants = {
        "solution": ("page.ipynb", lambda p: _plant_in_notebook(p, solution), "solution or rubric"),
        "rubric": (
            "README.md",
            lambda p: p.write_text(f"# 学生版\n\n{rubric}\n", encoding="utf-8"),
            "solution or rubric",
        ),
        "reference": (
            "course_lib-0.1.0-py3-none-any.whl",
            lambda p: p.write_bytes(_wheel("course_lib/hint.py", f"def f():\n    {reference}\n")),
            "reference code",
        ),
        "expected": (
            "data.json",
            lambda p: p.write_text(json.dumps({"first": expected[0], "note": "见下", "last": expected[1]})),
            "expected value",
        ),
        "hidden input": (
            "page.html",
            lambda p: p.write_text(
                "<pre>" + ", ".join(f'<span class="mf">{v}</span>' for v in run) + "</pre>", encoding="utf-8"
            ),
            "hidden input",
        ),
    }
    for kind, (name, plant, origin) in plants.items():
        folder = tmp_path / kind.replace(" ", "_")
        _clean_folder(folder)
        plant(folder / name)
        problems = leak_scan.scan(folder, secrets)
        assert problems, f"a planted {kind} was not found"
        assert all(p.startswith(name) and origin in p for p in problems), (kind, problems)


def _plant_in_notebook(path: Path, line: str) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"def helper():\n    {line}\n"))
    nbformat.write(nb, path)


def test_the_line_index_finds_what_a_search_for_every_line_finds(secrets):
    # the scan looks lines up by the hash of their beginning (leak_scan._LineIndex): every secret line, mid-line
    # or not, must be found exactly where searching the text for each line finds it
    every = sorted(secrets.lines)
    planted = every[:: max(1, len(every) // 200)]
    text = "\n".join(f"x = {i}; {line} # 注释" for i, line in enumerate(planted)) + "\n" + every[-1][:-1]
    expected = {line for line in secrets.lines if line in text}
    assert set(planted) <= expected and every[-1] not in expected
    assert set(leak_scan._LineIndex(secrets.lines).found_in(text)) == expected
    assert leak_scan._LineIndex(secrets.lines).found_in("short") == []


def test_what_cannot_be_checked_fails_the_scan(secrets, tmp_path):
    """A broken wheel and a link could hide anything: the scan says so instead of passing them."""
    folder = tmp_path / "edition"
    _clean_folder(folder)
    (folder / "course_lib-0.1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "answers.py").symlink_to(ROOT / "autograder" / "authoring" / "reference" / "s04_1.py")
    problems = leak_scan.scan(folder, secrets)
    assert problems == [
        "answers.py: a link, not a file; publish files only",
        "course_lib-0.1.0-py3-none-any.whl: cannot be opened (a broken or encrypted archive), so it was not checked",
    ]


def test_one_constant_alone_is_not_a_leak(secrets, tmp_path):
    """sqrt(eps) is a hidden tolerance of s04_8_ex1 and also what any gradient check prints."""
    (tmp_path / "page.ipynb").write_text(json.dumps({"cells": [{"source": "tol = 1.4901161193847656e-06"}]}))
    assert leak_scan.scan(tmp_path, secrets) == []
    expected = _expected_values()
    (tmp_path / "page.ipynb").write_text(json.dumps({"cells": [{"source": f"x = {expected[0]}"}]}))
    assert leak_scan.scan(tmp_path, secrets) == []


@pytest.mark.parametrize(
    ("token", "digits"),
    [("0.0012340", 4), ("1e-3", 1), ("-0.017604784268750003", 17), ("1200", 2), ("3.", 1), ("100.0", 1)],
)
def test_significant_digits_as_written(token, digits):
    assert significant_digits(token) == digits


def test_every_leak_check_reads_a_printed_number_the_same_way():
    # the release scan, the edition/book scan and the feedback check share one arithmetic
    # (autograder/authoring/hidden_numbers.py), each with its own secret set and bar
    hidden = HiddenNumbers([0.123456789012, 0.5, 250.0], MIN_DIGITS)
    assert hidden.found_in("x = 0.123457, y = 0.1234568, z = 0.12346") == ["0.123457", "0.1234568"]  # rounded
    assert hidden.found_in("0.500000 250.000 v1.234568 0.1234570") == ["0.1234570"]  # short values never match
    assert HiddenNumbers([0.123456789012], HIDDEN_INPUT_DIGITS).found_in("u = [0.12346]") == ["0.12346"]
    assert leak_scan.SINGLE_DIGITS > MIN_DIGITS > HIDDEN_INPUT_DIGITS  # the edition prints the most numbers
