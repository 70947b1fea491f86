"""The book and the assignments are written in our own words.

Facts, formulas, tables and figures carry over from the source chapter (the seed: Robotics
Tutorial S04, CC BY 4.0); its sentences do not. The rule, checked here exactly:

    No window of WINDOW (= 20) consecutive CJK ideographs in a checked file may also occur in
    the seed, after both texts are normalised the same way.

Normalisation keeps only CJK ideographs (U+4E00-U+9FFF, CJK Extension A U+3400-U+4DBF) and
drops everything else: punctuation (CJK and ASCII), Latin letters, digits, math, markup, spaces
and line breaks. Punctuation therefore does NOT break a run. That is the stricter choice and the
right one here: a sentence copied with its commas changed, with spaces or ``**bold**`` inserted,
split over two lines, or with a table's cells re-cut still yields the same ideograph sequence and
is caught. The price is that a few short unrelated phrases may join into a run (a heading and the
next line, a table's column headers); at 20 ideographs a chance match is rare, and when one
happens the wording is close enough to the seed that it is worth rephrasing anyway.

Which seed: every ``*.txt`` in ``../shared/seed/`` beside this checkout, or the folder named by
``S04_SEED_DIR``. The check compares 64-bit fingerprints of the windows (BLAKE2b), and the
fingerprints of the seed's windows are committed in ``tests/data/seed_windows.txt``: so the check
always runs, also on a clone without the seed beside it (CI), and the repository holds no sentence of
the seed. Where the seed is present the committed fingerprints must equal the seed's (regenerate them
with ``python tests/test_originality.py``).
"""

import hashlib
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 20
FINGERPRINTS = ROOT / "tests" / "data" / "seed_windows.txt"
IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def _seed_dir():
    return Path(os.environ.get("S04_SEED_DIR") or ROOT.parent / "shared" / "seed")


def _checked_files():
    """What students and readers read: the book's pages and helpers, the assignment sources,
    and the Chinese text the autograder and the library print."""
    files = set((ROOT / "book").rglob("*.md")) | set((ROOT / "book").rglob("*.py"))
    files |= set((ROOT / "assignments" / "source").rglob("*.md"))
    for folder in ("autograder", "course_lib"):
        files |= {p for p in (ROOT / folder).rglob("*") if p.suffix in {".md", ".py", ".txt"}}
    files |= {ROOT / "README.md"}
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def ideographs(text):
    """The normalised form: the text's CJK ideographs, in order, nothing else."""
    return "".join(IDEOGRAPH.findall(text))


def fingerprint(window_text):
    return hashlib.blake2b(window_text.encode("utf-8"), digest_size=8).hexdigest()


def seed_windows(seed_text, window=WINDOW):
    """The fingerprints of every window of ``window`` consecutive ideographs of the seed, as a set."""
    s = ideographs(seed_text)
    return {fingerprint(s[i : i + window]) for i in range(len(s) - window + 1)}


def shared_runs(text, windows, window=WINDOW):
    """Maximal runs of ``text`` (normalised) covered by windows that also occur in the seed.

    Returns ``(first_line, last_line, run)`` for each run; lines are 1-based lines of ``text``.
    """
    chars, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        found = IDEOGRAPH.findall(line)
        chars += found
        lines += [number] * len(found)
    s = "".join(chars)
    covered = [False] * len(s)
    for i in range(len(s) - window + 1):
        if fingerprint(s[i : i + window]) in windows:
            covered[i : i + window] = [True] * window
    runs, i = [], 0
    while i < len(s):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j < len(s) and covered[j]:
            j += 1
        runs.append((lines[i], lines[j - 1], s[i:j]))
        i = j
    return runs


def _read_seed():
    folder = _seed_dir()
    texts = sorted(folder.glob("*.txt")) if folder.is_dir() else []
    if not texts:
        return None
    text = "\n".join(p.read_text(encoding="utf-8") for p in texts)
    assert len(ideographs(text)) > 10_000, f"{folder} does not look like the source chapter"
    return text


@pytest.fixture(scope="module")
def seed_text():
    text = _read_seed()
    if text is None:
        pytest.skip(f"no seed in {_seed_dir()}: the checks on the committed fingerprints still run")
    return text


@pytest.fixture(scope="module")
def windows():
    committed = set(FINGERPRINTS.read_text(encoding="ascii").split())
    text = _read_seed()
    if text is not None:
        assert seed_windows(text) == committed, f"{FINGERPRINTS} is stale: run python tests/test_originality.py"
    assert len(committed) > 10_000
    return committed


def test_no_run_of_twenty_ideographs_from_the_source_chapter(windows):
    hits = []
    for path in _checked_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for first, last, run in shared_runs(text, windows):
            where = f"{first}" if first == last else f"{first}-{last}"
            hits.append(f"{path.relative_to(ROOT)}:{where}: {run} ({len(run)} ideographs)")
    assert not hits, (
        f"{len(hits)} run(s) of {WINDOW}+ consecutive ideographs also occur in the source chapter "
        "(punctuation, markup and spacing ignored); rewrite them in your own words:\n" + "\n".join(hits)
    )


def test_the_check_catches_a_copied_sentence(seed_text):
    """The same functions, fed seed sentences disguised the ways a copy usually is."""
    windows = seed_windows(seed_text)
    s = ideographs(seed_text)
    start = len(s) // 2
    copied = s[start : start + 30]
    # Disguise it: change the punctuation, add spaces and markup, break the line in two.
    disguised = f"前言。\n**{copied[:7]}**，{copied[7:15]} `x`\n{copied[15:22]}；{copied[22:]}！\n后记"
    runs = shared_runs(disguised, windows)
    assert runs and any(copied in run for _, _, run in runs), runs
    assert runs[0][:2] == (2, 3)  # reported on the lines where the copy sits
    # A copy one ideograph shorter than the window passes; one of exactly the window fails.
    assert not shared_runs(copied[: WINDOW - 1], windows)
    assert shared_runs(copied[:WINDOW], windows)
    # Text of our own does not match.
    assert not shared_runs("我们用自己的话把同一件事重新讲一遍，事实不变，句子全是新写的。", windows)


def test_normalisation_keeps_only_ideographs():
    assert ideographs("显式欧拉（explicit Euler）：$x_{k+1}$，稳定域小。\n㐀") == "显式欧拉稳定域小㐀"
    windows = seed_windows("甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥", window=20)
    assert len(windows) == 3
    assert shared_runs("甲乙丙丁，戊己庚辛\n壬癸子丑寅卯辰巳午未申酉。", windows) == [
        (1, 2, "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉")
    ]


if __name__ == "__main__":  # write the committed fingerprints from the seed
    seed = _read_seed()
    if seed is None:
        sys.exit(f"no seed in {_seed_dir()}")
    FINGERPRINTS.parent.mkdir(exist_ok=True)
    FINGERPRINTS.write_text("\n".join(sorted(seed_windows(seed))) + "\n", encoding="ascii")
    print(f"wrote {FINGERPRINTS}")
