"""Page twins in plain notebook markdown (autograder/ops/twin_markdown.py): what Jupyter and Colab render.

Each MyST construct the pages use becomes what the book shows: a glued number formatted as the role asks (or,
without a built book, its name and where it comes from), a reference's title, an equation's or a figure's book
number, an exercise link into the edition; an answer admonition stays collapsed. The twins of the real pages
are checked in tests/test_student_edition.py (no role left) and against the built book in tests/test_book.py.
"""

from pathlib import Path

from autograder.ops.student_edition import toc_pages
from autograder.ops.twin_markdown import TwinText, format_glued, glued_values

ROOT = Path(__file__).resolve().parents[1]
TEXT = TwinText(
    {"s04-4": "S04.4 接触非光滑性", "notation": "符号与术语"},
    {"s04_4_ex1": "s04_4"},
    {"eq-a": 9, "fig-b": 17},
)


def test_glued_numbers_are_formatted_as_the_role_asks():
    glued = {"x": "0.53712", "n": "11", "pct": "np.float64(12.5)", "s": "'说明'"}
    source = "均值 {glue:text}`x:.2f`，{glue:text}`n:d` 个，{glue:text}`x`，{glue:text}`pct:.0f`%，{glue:text}`s`"
    assert TEXT.markdown(source, glued) == "均值 0.54，11 个，0.53712，np.float64(12.5)%，说明"
    assert TEXT.markdown("{glue:text}`missing:.2f`", glued) == "`missing`（运行本页的代码后得到）"
    assert format_glued("-0.42812172558909856", "+.1f") == "-0.4"


def test_roles_become_what_the_book_shows():
    source = (
        "式 {eq}`eq-a`，{numref}`fig-b`，{numref}`图 %s 的左半 <fig-b>`，{ref}`S04.4 <s04-4>`，{ref}`s04-4`，"
        "{doc}`notation`，{term}`损失 <损失（loss）>`，{term}`雅可比矩阵（Jacobian）`，{cite}`suh2022`，"
        "{exercise}`s04_4_ex1`"
    )
    assert TEXT.markdown(source, {}) == (
        "式 (9)，图 17，图 17 的左半，S04.4，S04.4 接触非光滑性，符号与术语，损失，雅可比矩阵，[suh2022]，"
        "[练习 s04_4_ex1](../exercises/s04_4/s04_4_ex1.ipynb)"
    )


def test_admonitions_become_quotes_and_answers_stay_folded():
    source = (
        "(s04-4-1)=\n## 标题\n\n```{admonition} 先预测，再运行\n:class: tip\n猜一猜 {glue:text}`x:.1f`。\n```\n\n"
        "```{admonition} 对照你的预测\n:class: dropdown\n答案是 $x$。\n```\n"
        "```{eval-rst}\n.. autosummary::\n```\n"
    )
    assert TEXT.markdown(source, {"x": "2.25"}) == (
        "## 标题\n\n> **先预测，再运行**\n>\n> 猜一猜 2.2。\n\n"
        "<details>\n<summary>对照你的预测</summary>\n\n答案是 $x$。\n\n</details>\n"
    )


def test_a_glossary_becomes_a_list_of_terms():
    source = "```{glossary}\n一阶批量梯度（FoBG）\n  对每个样本反传再平均。\n  见 {ref}`S04.4 <s04-4>`。\n\n伴随法\n  反向递推。\n```\n"
    assert (
        TEXT.markdown(source, {})
        == "- **一阶批量梯度（FoBG）**：对每个样本反传再平均。 见 S04.4。\n- **伴随法**：反向递推。\n"
    )


def test_the_course_numbers_its_equations_and_figures_as_the_book_does():
    text = TwinText.of_course(ROOT, toc_pages(ROOT))
    assert text.numbers["eq-s04-1-hand-grad"] == 1  # the book's first labelled equation
    assert text.titles["notation"] and text.exercise_sections["mini_diffsim_p2"] == "mini_diffsim"
    assert glued_values(ROOT / "no-such-build", "book/s04_4") == {}
    assert text.references[0].startswith("[suh2022] Suh, Hyung Ju Terry") and text.references[0].endswith("Gradients?")
    assert "- [suh2022]" in text.markdown("```{bibliography}\n:all:\n```\n", {})
