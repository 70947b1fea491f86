"""The figure of ``python -m autograder stats``: what the class got wrong, at a glance (PNG, English labels).

Left: per check, its submissions split into passed fully, failed with a catalogued mistake, failed with only a
generic rule's diagnosis and failed with no diagnosis, with the mean score in % of the points at the bar's end.
Right: the most frequent diagnoses over all checks (catalogued mistakes and rules), in submissions.
"""

from __future__ import annotations

from pathlib import Path

from autograder.ops.reports import save_figure
from autograder.ops.stats import CheckStats

#: (attribute of CheckStats, legend, colour): the split of each check's submissions, in drawing order
PARTS = (
    ("passed_fully", "passed fully", "tab:green"),
    ("failed_mistake", "catalogued mistake", "tab:orange"),
    ("failed_rule", "generic diagnosis only", "tab:blue"),
    ("undiagnosed", "no diagnosis", "tab:gray"),
)
TOP = 20  # diagnoses shown on the right


def stats_figure(stats: list[CheckStats], path: Path) -> Path:
    """Draw ``stats`` into ``path`` (matplotlib's Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    checks = list(reversed(stats))  # first check at the top
    fired = sorted(
        (
            (n, f"{s.check}: {name}", kind)
            for s in stats
            for kind, counts in (("mistake", s.mistakes), ("rule", s.rules))
            for name, n in counts.items()
            if n
        ),
        key=lambda x: (-x[0], x[1]),
    )[:TOP]
    height = max(3.5, 0.35 * max(len(checks), len(fired)) + 2.0)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, height), dpi=110, gridspec_kw={"width_ratios": [1, 1]})
    y = range(len(checks))
    start = [0] * len(checks)
    for attr, label, colour in PARTS:
        values = [getattr(s, attr) for s in checks]
        left.barh(y, values, left=start, color=colour, label=label)
        start = [a + b for a, b in zip(start, values)]
    for i, s in enumerate(checks):
        share = 100 * s.mean_score / s.points if s.points else 0.0
        left.text(start[i], i, f" mean {share:.0f}%", va="center", fontsize=8)
    left.set_yticks(list(y), [s.check for s in checks], fontsize=8)
    left.set_xlabel("submissions")
    left.set_xlim(0, max(start, default=1) * 1.25 + 0.5)
    left.set_title("Per check: how the submissions ended", fontsize=10)
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(PARTS), fontsize=7, frameon=False)
    if fired:
        right.barh(
            range(len(fired)),
            [n for n, _, _ in reversed(fired)],
            color=["tab:orange" if kind == "mistake" else "tab:blue" for _, _, kind in reversed(fired)],
        )
        right.set_yticks(range(len(fired)), [label for _, label, _ in reversed(fired)], fontsize=7)
    right.set_xlabel("submissions diagnosed (orange: catalogued mistake, blue: generic rule)")
    right.set_title(f"Most frequent diagnoses (top {TOP})", fontsize=10)
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return save_figure(fig, path)
