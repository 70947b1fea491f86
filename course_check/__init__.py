"""course_check: the course's public checks, run before the deadline with the grader's own machinery.

A notebook's self-check cell calls ``check("s04_1_ex1", "fd_grad", fd_grad)``. It calls the function
on the check's **public cases** exactly as grading calls it on the hidden ones (positionally, in the
template's order: :mod:`course_check.calling`), scores the results with the same comparison, the same
tolerances, the same Chinese messages for catalogued mistakes and the same partial credit
(:mod:`course_check.scoring`), and prints what those cases would earn.

The public cases are drawn from other seeds than the hidden ones and never equal them; they and their
expected values ship in ``course_check/public/<exercise>.json`` (written by the instructors'
``python -m autograder regenerate``). Passing them is a good sign, not a promise: grading uses other inputs.

Inside a grading kernel the public checks print one line and run nothing: they cannot change a score
(grading scores the hidden cases outside the kernel) and would only spend the notebook's time budget.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from course_check.calling import run_cases
from course_check.scoring import Scored, score_results

__all__ = ["check", "public_result"]

PUBLIC_DIR = Path(__file__).resolve().parent / "public"
#: set in every grading kernel's environment (autograder/confine/launcher.py)
GRADING_KERNEL_ENV = "S04_GRADING_KERNEL"
PUBLIC = "公开测试"


def load_public(exercise: str, public_dir: Path = PUBLIC_DIR) -> dict:
    """``{check name: spec with the public cases}`` of ``exercise``."""
    path = public_dir / f"{exercise}.json"
    if not path.exists():
        raise FileNotFoundError(  # a student reads this in the notebook: say how to fix it, in Chinese
            f"no public checks for exercise {exercise!r} (looked for {path})。"
            f"已安装的 course_check 里没有练习 {exercise} 的公开测试，多半是课程仓库更新过而你的安装还是旧的："
            "在学生版仓库里运行 git pull，再运行 pip install -r requirements.txt，然后重启内核；"
            "Colab 中点“运行时 → 断开连接并删除运行时”，再从第一个单元（Colab 准备单元）重新运行。"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def public_result(exercise: str, name: str, fn, public_dir: Path = PUBLIC_DIR) -> Scored:
    """Score ``fn`` on the public cases of check ``exercise.name`` as grading would score it."""
    checks = load_public(exercise, public_dir)
    if name not in checks:
        raise KeyError(f"exercise {exercise} has no check {name!r}; its checks: {', '.join(sorted(checks))}")
    spec = checks[name]
    results = run_cases(fn, spec["params"], [case["inputs"] for case in spec["cases"]])
    # through JSON and the strict decoder, as a grading record travels from the kernel to the verdict
    return score_results(exercise, name, PUBLIC, spec, json.loads(json.dumps(results)))


def check(exercise: str, name: str, fn) -> None:
    """Print how ``fn`` does on the public cases of check ``exercise.name`` (see the module docstring)."""
    if os.environ.get(GRADING_KERNEL_ENV):
        print(f"[{exercise}] {name}: 评分时不运行公开检查（分数只看隐藏测试）。")
        return
    scored = public_result(exercise, name, fn)
    print(scored.feedback)
    if scored.earned < scored.points:
        print("（按上面的提示修改后再运行本单元。）")
    else:
        print("公开测试全部通过。评分时会换成看不到的输入，请确认代码没有依赖这些具体数值。")
