"""Chinese messages of mistakes that several sections' checks recognise (each check's
:class:`autograder.authoring.registry.Mistake` carries one of these, or its own)."""

HORIZON_MINUS_ONE = "结果与“少算一步”的参考值吻合：循环次数或下标很可能差了一（off-by-one）。"
HORIZON_PLUS_ONE = "结果与“多算一步”的参考值吻合：循环次数或下标很可能差了一（off-by-one）。"
EXPLICIT_EULER = "结果与显式欧拉的参考值吻合：题目要求半隐式欧拉（先更新速度，再用新速度更新位置）。"
SEMI_IMPLICIT_EULER = "结果与半隐式欧拉的参考值吻合：题目要求的是显式欧拉（位置用旧速度更新）。"
FORWARD_DIFFERENCE = "结果与前向差分吻合：题目要求中心差分 (L(u+ε)−L(u−ε))/(2ε)。"
