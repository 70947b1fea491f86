"""The book and the assignments are written in our own words: no sentence of the source
chapter (20 or more CJK characters) may appear verbatim. Facts and formulas carry over;
sentences do not."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = sorted((ROOT.parent / "shared" / "seed").glob("*.txt"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def _cjk(text):
    return "".join(CJK.findall(text))


@pytest.mark.skipif(not SEED, reason="the source chapter (../shared/seed) is not beside this checkout")
def test_no_verbatim_sentences_from_the_source_chapter():
    sentences = {_cjk(line): line.strip() for line in SEED[0].read_text(encoding="utf-8").splitlines() if len(_cjk(line)) >= 20}
    hits = []
    for folder in ("book", "assignments", "autograder"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".md", ".ipynb", ".py", ".txt"} and path.is_file():
                text = _cjk(path.read_text(encoding="utf-8", errors="replace"))
                hits += [f"{path.relative_to(ROOT)}: {line[:50]}" for key, line in sentences.items() if key in text]
    assert not hits, "rewrite these in your own words:\n" + "\n".join(hits)
