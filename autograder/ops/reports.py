"""Reports for the instructor after grading: a score table, a class overview figure, a feedback check.

* :func:`score_rows` / :func:`write_csv`: one row per student x exercise (notebook), derived from the
  gradebook (:func:`autograder.ops.gradebook.read_gradebook`): automatic score, manual (written) score, maximum.
* :func:`overview_figure`: the score distribution per exercise (PNG, matplotlib's Agg backend),
  with Chinese labels in the book's vendored font (or an installed CJK font), English ones without any.
* :func:`check_feedback`: reads every feedback HTML (``nbgrader generate_feedback``) and reports what a
  student must not see or cannot read: hidden test source, reference data or expected values in
  the output of a graded cell, and feedback that is not in Chinese.
"""

from __future__ import annotations

import csv
import html
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

from autograder.authoring.hidden_numbers import HiddenNumbers
from autograder.course.course import Course
from autograder.ops.gradebook import read_gradebook
from autograder.verdict.data import DATA_DIR

CSV_FIELDS = [
    "section",
    "student",
    "exercise",
    "status",
    "auto_score",
    "auto_max",
    "manual_score",
    "manual_max",
    "score",
    "max_score",
]
_CJK = re.compile(r"[\u4e00-\u9fff]")
MIN_DIGITS = 6  # a number with this many significant digits equal to a hidden value is no coincidence


# --- (a) scores -----------------------------------------------------------------------------------


def score_rows(course: Course | Path, sections) -> list[dict]:
    """One dict per (section, student, exercise), for every student in the gradebook.

    ``status``: 已评分 (graded notebook), 未交此题 (the submission lacks this notebook),
    未提交 (no submission). ``manual_score`` is empty while a written answer awaits its grade.
    """
    course, sections = Course.of(course), list(sections)
    book = read_gradebook(course, sections)
    rows = []
    for section in sections:
        assignment = book.assignments.get(section)
        if assignment is None:
            continue  # not released or graded yet: nothing to report
        exercises = sorted(assignment.notebooks)
        for student in book.students:
            sub = assignment.submissions.get(student.id)
            notebooks = sub.notebooks if sub else {}
            for exercise in exercises:
                rows.append(_row(course, section, student.id, exercise, notebooks.get(exercise), assignment))
    return rows


def _row(course: Course, section, student, exercise, nb, assignment) -> dict:
    row = dict.fromkeys(CSV_FIELDS, "")
    row.update(section=section, student=student, exercise=exercise)
    if nb is None:
        cells = assignment.notebooks[exercise]
        auto_max = sum(c.max_score for c in cells if not c.written)
        manual_max = sum(c.max_score for c in cells if c.written)
        row.update(status="未提交", auto_max=auto_max, manual_max=manual_max, max_score=auto_max + manual_max)
        return row
    auto, manual = nb.automatic, nb.written
    graded = (course.autograded(student, section) / f"{exercise}.ipynb").is_file()
    pending = any(g.needs_manual_grade for g in manual)
    row.update(
        status="已评分" if graded else "未交此题",
        auto_score=_num(sum(g.score for g in auto)),
        auto_max=_num(sum(g.max_score for g in auto)),
        manual_score="" if pending else _num(sum(g.score for g in manual)),
        manual_max=_num(sum(g.max_score for g in manual)),
        score=_num(nb.score),
        max_score=_num(nb.max_score),
    )
    return row


def _num(x) -> float:
    return round(float(x), 4)


def write_csv(rows, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8-sig") as f:  # BOM: Excel then reads the Chinese right
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- (b) class overview figure --------------------------------------------------------------------


#: the book's own figure font (an OFL subset of Noto Sans CJK SC with all of GB 2312, book/fonts/)
VENDORED_FONT = Path(__file__).resolve().parents[2] / "book" / "fonts" / "S04SansSC-Regular.otf"


def cjk_font() -> str | None:
    """Path of a font with Chinese glyphs: the book's vendored one, else the first of ``fc-list :lang=zh``.

    The vendored font comes first because "a font that knows zh" can be a Traditional Chinese one
    (TeX Live pulls in AR PL KaitiM Big5), which lacks simplified characters such as 练 and 该.
    """
    if VENDORED_FONT.is_file():
        return str(VENDORED_FONT)
    if not shutil.which("fc-list"):
        return None
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    paths = sorted(line.split(":")[0].strip() for line in out.splitlines() if line.strip())
    return next((p for p in paths if Path(p).is_file()), None)


def save_figure(fig, path: Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (its folder made) and close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def overview_figure(rows, path: Path) -> Path:
    """Per exercise, box plots with points of the automatic score and of the total, in % of their maxima.

    Only students who handed the exercise in count (n under each name); manual grades not yet
    entered count 0 in the total, as in nbgrader.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import font_manager
    import matplotlib.pyplot as plt

    font = cjk_font()
    if font:
        font_manager.fontManager.addfont(font)
        plt.rcParams["font.family"] = [font_manager.FontProperties(fname=font).get_name(), "DejaVu Sans"]
        plt.rcParams["axes.unicode_minus"] = False
    zh = font is not None
    keys = sorted({(r["section"], r["exercise"]) for r in rows})
    handed_in = {
        key: [r for r in rows if (r["section"], r["exercise"]) == key and r["status"] == "已评分"] for key in keys
    }
    series = [  # (label, colour, offset, numerator, denominator)
        ("自动评分" if zh else "automatic", "tab:blue", -0.2, "auto_score", "auto_max"),
        ("总分" if zh else "total", "tab:orange", 0.2, "score", "max_score"),
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(keys) + 2), 4.8), dpi=120)
    for label, colour, offset, num, den in series:
        first = True
        for i, key in enumerate(keys, start=1):
            v = [100 * float(r[num]) / float(r[den]) for r in handed_in[key] if r[den] not in ("", 0, 0.0)]
            if not v:
                continue
            ax.boxplot(
                [v],
                positions=[i + offset],
                widths=0.3,
                showfliers=False,
                medianprops={"color": colour},
                boxprops={"color": colour},
            )
            jitter = [(k % 5 - 2) * 0.03 for k in range(len(v))]  # deterministic spread of the points
            ax.plot(
                [i + offset + j for j in jitter],
                v,
                "o",
                color=colour,
                alpha=0.6,
                markersize=4,
                label=label if first else None,
            )
            first = False
    ax.set_xticks(range(1, len(keys) + 1))
    ax.set_xticklabels([f"{ex}\n(n={len(handed_in[(s, ex)])})" for s, ex in keys], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(0.4, len(keys) + 0.6)
    ax.set_ylim(-5, 105)
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize=8)
    n_students = len({r["student"] for r in rows})
    if zh:
        ax.set_ylabel("得分 / 满分（%）")
        ax.set_title(
            f"各练习得分分布（共 {n_students} 名学生，n 为交了该题的人数）\n总分中尚未人工评分的部分按 0 分计",
            fontsize=9,
        )
    else:
        ax.set_ylabel("score / maximum (%)")
        ax.set_title(
            f"Score per exercise ({n_students} students, n = notebooks handed in)\n"
            "manual grades not yet entered count 0 in the total",
            fontsize=9,
        )
    return save_figure(fig, path)


# --- (c) feedback check ---------------------------------------------------------------------------


def html_text(fragment: str) -> str:
    """Visible text of an HTML fragment (scripts and styles dropped, tags removed, entities decoded)."""
    fragment = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", fragment)
    return html.unescape(re.sub(r"(?s)<[^>]+>", "", fragment))


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def graded_cells(page: str) -> list[tuple[str, str]]:
    """``[(grade_id, output text)]`` of the autograded code cells of a feedback page."""
    out = []
    for part in re.split(r'(?=<div class="cell[ "])', page):
        m = re.search(r'code_cell.*?class="nbgrader-label">Grade cell: <code>([^<]+)</code>', part, re.S)
        if m:
            output = part.split('class="output_wrapper"', 1)[1] if 'class="output_wrapper"' in part else ""
            out.append((m.group(1), html_text(output)))
    return out


def hidden_test_lines(source_text: str) -> list[str]:
    """Lines between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` that appear nowhere else."""
    hidden, other, inside = [], set(), False
    for line in source_text.splitlines():
        # the .ipynb stores each line as a JSON string: undo the quoting so both formats read alike
        line = line.strip().strip(",").strip()
        if line.startswith('"') and line.endswith('"'):
            try:
                line = json.loads(line).strip()
            except ValueError:
                pass
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif line:
            (hidden.append(line) if inside else other.add(line))
    return sorted({line for line in hidden if line not in other and len(line) >= 6})


def data_values(obj) -> list[float]:
    """Every non-integer number of a reference data file (inputs, expected values, mistakes)."""
    out = []
    if isinstance(obj, dict):
        for v in obj.values():
            out += data_values(v)
    elif isinstance(obj, list):
        for v in obj:
            out += data_values(v)
    elif isinstance(obj, float) and math.isfinite(obj) and obj != round(obj):
        out.append(obj)
    return out


def check_feedback_html(page: str, hidden_lines, values, where: str = "") -> list[str]:
    """Problems of one feedback page; empty when it is fine. ``values``: the hidden data numbers."""
    problems = []
    prefix = f"{where}: " if where else ""
    text = _squash(html_text(page))
    if "HIDDEN TESTS" in text:
        problems.append(f"{prefix}含有隐藏测试的标记（BEGIN/END HIDDEN TESTS）")
    for line in hidden_lines:
        if _squash(line) in text:
            problems.append(f"{prefix}含有隐藏测试的源代码：{line!r}")
    if not _CJK.search(text):
        problems.append(f"{prefix}页面中没有中文")
    hidden = HiddenNumbers(values, MIN_DIGITS)
    for grade_id, output in graded_cells(page):
        if output.strip() and not _CJK.search(output):
            problems.append(f"{prefix}评分单元 {grade_id} 的输出不是中文：{_squash(output)[:120]!r}")
        for token in hidden.found_in(output):
            problems.append(f"{prefix}评分单元 {grade_id} 的输出含有参考数据中的数值 {token}（隐藏输入或期望值）")
    return problems


def check_feedback(course: Course | Path, sections, data_dir: Path = DATA_DIR) -> list[str]:
    """Check every ``feedback/<student>/<section>/<exercise>.html`` of ``sections``."""
    course = Course.of(course)
    problems = []
    for section in sections:
        pages = [
            (student, page)
            for student, folder in course.feedback_folders(section).items()
            for page in sorted(folder.glob("*.html"))
        ]
        for student, path in pages:
            exercise = path.stem
            source = next(
                (p for p in (course.source(section) / f"{exercise}{ext}" for ext in (".md", ".ipynb")) if p.is_file()),
                None,
            )
            hidden = hidden_test_lines(source.read_text(encoding="utf-8")) if source else []
            data_file = Path(data_dir) / f"{exercise}.json"
            values = data_values(json.loads(data_file.read_text())) if data_file.is_file() else []
            problems += check_feedback_html(
                path.read_text(encoding="utf-8"), hidden, values, f"{student}/{section}/{exercise}.html"
            )
    return problems


# --- the command ----------------------------------------------------------------------------------


def make_reports(course: Course | Path, sections, out_dir: Path) -> tuple[list[Path], list[str]]:
    """Write ``scores.csv`` and ``overview.png`` into ``out_dir``; return them and the feedback problems."""
    course = Course.of(course)
    rows = score_rows(course, sections)
    out = Path(out_dir)
    written = [write_csv(rows, out / "scores.csv")]
    if rows:
        written.append(overview_figure(rows, out / "overview.png"))
    return written, check_feedback(course, sections)
