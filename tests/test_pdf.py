"""The PDF edition (`make pdf`): Chinese text, every figure and diagram, no glyph left out.

`make test-pdf` builds the PDF and runs these tests; `make test` leaves them out (the TeX tools are a
700 MB install and the LaTeX runs take minutes). They read ``_build/latex/s04-diffsim.pdf`` and its
LaTeX log, or the folder named by ``S04_PDF_DIR``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.pdf


@pytest.fixture(scope="module")
def pdf_build() -> Path:
    folder = Path(os.environ.get("S04_PDF_DIR", ROOT / "_build" / "latex"))
    if not (folder / "s04-diffsim.pdf").is_file():
        pytest.fail(f"no PDF in {folder}: run `make pdf` first (make test-pdf does both)")
    for tool in ("pdftotext", "pdfimages"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing: book/pdf/install_tex.sh installs it (poppler-utils)")
    return folder


def _text(pdf: Path) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout


def test_the_pdf_reads_as_chinese(pdf_build):
    text = _text(pdf_build / "s04-diffsim.pdf")
    hanzi = re.findall(r"[\u4e00-\u9fff]", text)
    letters = re.findall(r"[A-Za-z]", text)
    assert len(hanzi) > 50_000, len(hanzi)
    assert len(hanzi) > 0.3 * len(letters), (len(hanzi), len(letters))  # Chinese prose, not code alone
    for title in ("为什么要对仿真求导", "接触非光滑性", "伴随法", "梯度检查", "符号与术语"):
        assert title in text.replace(" ", ""), title
    assert "IPython.core.display.SVG object" not in text  # a diagram fell back to its repr


def test_every_figure_and_diagram_is_in_the_pdf(pdf_build):
    listing = subprocess.run(
        ["pdfimages", "-list", str(pdf_build / "s04-diffsim.pdf")], capture_output=True, text=True, check=True
    ).stdout
    images = [line for line in listing.splitlines()[2:] if line.split()[2:3] == ["image"]]
    plots = sum(source.read_text(encoding="utf-8").count("plt.show()") for source in (ROOT / "book").glob("*.md"))
    diagrams = sum(source.read_text(encoding="utf-8").count("display(SVG(") for source in (ROOT / "book").glob("*.md"))
    # a slider (book/sliders.py) has no HTML in the PDF: its starting frame must be there as an image
    sliders = sum(source.read_text(encoding="utf-8").count("frame_slider(") for source in (ROOT / "book").glob("*.md"))
    assert len(images) >= plots + diagrams + sliders, (len(images), plots, diagrams, sliders)


def test_no_glyph_is_missing(pdf_build):
    log = (pdf_build / "s04-diffsim.log").read_text(encoding="utf-8", errors="replace")
    missing = sorted(set(re.findall(r"Missing character: There is no (.)", log)))
    assert not missing, f"characters no font of the PDF has: {missing}"
