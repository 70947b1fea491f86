"""Write ``book/api.md``, the API reference page, from what ``course_lib/__init__.py`` exports.

Run ``python book/_ext/api_page.py`` after adding or removing a public name (tests/test_book.py fails
until the page is regenerated). Functions and classes are rendered by Sphinx's autodoc from their
docstrings (napoleon reads the Google style), grouped by the module that defines them, in the order of
:data:`FAMILIES`; the constant tables are listed with their keys.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "api.md"

#: defining module -> section title on the page (one family of the library per module)
FAMILIES = {
    "course_lib.systems": "光滑系统",
    "course_lib.integrators": "积分器",
    "course_lib.rollout": "rollout 与求导方式",
    "course_lib.adjoint": "手写伴随递推",
    "course_lib.implicit": "隐式步的求导（隐函数定理）",
    "course_lib.sensitivity": "灵敏度与 Jacobian 连乘",
    "course_lib.checks": "梯度检查",
    "course_lib.diagnostics": "诊断",
    "course_lib.planted_bugs": "埋了梯度 bug 的环境（审计练习）",
    "course_lib.contact.laws": "接触力律与光滑化",
    "course_lib.contact.complementarity": "互补问题求解器",
    "course_lib.contact.impact": "碰撞（冲击时刻在步内）",
    "course_lib.contact_systems": "带接触的小系统",
    "course_lib.estimators": "随机平滑的梯度估计",
    "course_lib.shac.tasks": "SHAC 任务",
    "course_lib.shac.critic": "策略与 critic",
    "course_lib.shac.window": "短时域窗口损失",
    "course_lib.shac.train": "SHAC 训练（简化版）",
    "course_lib.sysid": "系统辨识",
    "course_lib.trajopt": "轨迹优化",
    "course_lib.health": "训练健康记录",
    "course_lib": "设置",
}

HEADER = """\
# API 参考

本页由 `course_lib` 的文档字符串生成（英文，Google 风格，含形状和公式），列出 `course_lib/__init__.py`
导出的全部名字，也就是整个公开接口。按定义它们的模块分组，每组是库里的一个“家族”；
正文和练习里用到的函数都写作 `cl.名字`（`import course_lib as cl`）。

约定（详见 {doc}`notation`）：连续模型是 `f(x, u, p) -> xdot`，积分器把它变成一步映射
`step(x, u, p) -> x_next`，rollout 是对一步映射的 `lax.scan`。每个函数都能在 `jit`、`vmap` 和
（可导时）`grad` 下使用；做梯度检查前先调用 `cl.enable_float64()`。
"""


def public_names(module) -> dict[str, object]:
    return {n: getattr(module, n) for n in sorted(dir(module)) if not n.startswith("_") and not n == "jax"}


def render() -> str:
    sys.path.insert(0, str(ROOT))
    import course_lib

    groups: dict[str, list[tuple[str, object]]] = {}
    tables = []
    for name, obj in public_names(course_lib).items():
        if inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj) or callable(obj):
            module = obj.__module__
            if module not in FAMILIES:
                raise ValueError(f"{name} is defined in {module}, which has no section in FAMILIES")
            groups.setdefault(module, []).append((name, obj))
        else:
            tables.append((name, obj))
    parts = [HEADER]
    for module, title in FAMILIES.items():
        if module not in groups:
            continue
        parts.append(f"\n## {title}\n\n定义在 `{module}`。\n\n```{{eval-rst}}\n.. currentmodule:: course_lib\n")
        for name, obj in groups[module]:
            directive = "autoclass" if inspect.isclass(obj) else "autofunction"
            parts.append(f"\n.. {directive}:: {name}\n")
        parts.append("```\n")
    parts.append("\n## 常量表\n\n| 名字 | 内容 |\n| --- | --- |\n")
    for name, obj in tables:
        keys = list(obj) if isinstance(obj, (dict, tuple, list, frozenset, set)) else [obj]
        shown = ", ".join(f"`{k}`" if isinstance(k, str) else f"`{k!r}`" for k in keys)
        parts.append(f"| `cl.{name}` | {shown} |\n")
    return "".join(parts)


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
