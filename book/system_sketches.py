"""Sketches of the systems the chapter simulates, drawn with matplotlib for the book's pages.

``draw_systems()`` returns one figure with four panels: the ball over a hard ground (S04.4.1), the planar
hopper (S04.4.4), the box between a floor and a wall (S04.5), and the cart-pole (S04.9). The proportions
follow the default parameters of ``course_lib`` where a picture can show them; the labels name the
state variables the pages use. Kept out of the pages' code cells: it is drawing, not physics.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import patches

GROUND = dict(color="0.35", lw=1.5)
HATCH = dict(facecolor="0.92", edgecolor="0.55", hatch="///", lw=0)
ARROW = dict(arrowstyle="-|>", lw=1.2, color="C3", mutation_scale=12)


def _ground(ax, x0, x1, y=0.0, depth=0.06):
    ax.add_patch(patches.Rectangle((x0, y - depth), x1 - x0, depth, **HATCH))
    ax.plot([x0, x1], [y, y], **GROUND)


def _arrow(ax, start, end, text=None, offset=(0.03, 0.0), **style):
    ax.annotate("", xy=end, xytext=start, arrowprops={**ARROW, **style})
    if text:
        ax.text(end[0] + offset[0], end[1] + offset[1], text, va="center", fontsize=10)


def _ball(ax):
    _ground(ax, -0.5, 0.5)
    y = 0.45
    ax.add_patch(patches.Circle((0.0, y), 0.08, color="C0"))
    _arrow(ax, (0.0, y - 0.1), (0.0, y - 0.3), "$v<0$")
    ax.annotate("", xy=(-0.3, y), xytext=(-0.3, 0.0), arrowprops=dict(arrowstyle="<->", lw=0.9))
    ax.text(-0.28, y / 2, "$y$", fontsize=11, va="center")
    ax.text(0.12, 0.6, r"碰撞：$v^+=-e\,v^-$", fontsize=9)
    ax.set_title("撞地小球")


def _spring(x0, y0, x1, y1, turns=6, width=0.04):
    """Points of a zigzag spring from (x0, y0) to (x1, y1)."""
    t = np.linspace(0.0, 1.0, 2 * turns + 3)
    along = np.array([x1 - x0, y1 - y0])
    normal = np.array([-along[1], along[0]]) / np.linalg.norm(along)
    zig = np.zeros_like(t)
    zig[2:-2] = width * np.where(np.arange(len(t) - 4) % 2 == 0, 1.0, -1.0)
    points = np.array([x0, y0])[None, :] + t[:, None] * along[None, :] + zig[:, None] * normal[None, :]
    return points[:, 0], points[:, 1]


def _hopper(ax):
    _ground(ax, -0.5, 0.6)
    body, foot = np.array([0.05, 0.62]), np.array([-0.08, 0.0])
    ax.add_patch(patches.FancyBboxPatch(body - (0.12, 0.06), 0.24, 0.12, boxstyle="round,pad=0.01", color="C0"))
    xs, ys = _spring(*foot, *(body - (0.0, 0.06)))
    ax.plot(xs, ys, color="0.25", lw=1.3)
    ax.add_patch(patches.Circle(foot, 0.03, color="C2"))
    ax.text(body[0] + 0.15, body[1], "机身 $(x_b,z_b)$", fontsize=9, va="center")
    ax.text(foot[0] + 0.06, 0.07, "脚 $(x_f,z_f)$", fontsize=9)
    ax.text(0.05, 0.3, "弹性腿\n（推力 $u_0$）", fontsize=9)
    ax.add_patch(patches.Arc(body - (0.0, 0.06), 0.16, 0.16, theta1=200, theta2=290, color="C3", lw=1.2))
    ax.text(-0.23, 0.44, "髋力矩 $u_1$", fontsize=9, color="C3")
    _arrow(ax, (foot[0] + 0.03, 0.03), (foot[0] + 0.28, 0.03))
    ax.text(foot[0] - 0.05, -0.13, r"摩擦 $\mu\lambda_n\tanh(v/v_s)$", fontsize=9)
    ax.set_title("平面单腿跳跃机器人")


def _box_wall(ax):
    _ground(ax, -0.3, 1.0)
    ax.add_patch(patches.Rectangle((1.0, -0.06), 0.06, 0.75, **HATCH))
    ax.plot([1.0, 1.0], [0.0, 0.69], **GROUND)
    ax.add_patch(patches.Rectangle((0.55, 0.0), 0.2, 0.2, color="C0"))
    _arrow(ax, (0.3, 0.1), (0.54, 0.1), "$F$", offset=(-0.13, 0.06))
    ax.annotate("", xy=(0.75, 0.32), xytext=(1.0, 0.32), arrowprops=dict(arrowstyle="<->", lw=0.9))
    ax.text(0.78, 0.38, r"间隙 $\phi$", fontsize=9)
    ax.text(-0.25, 0.06, r"地面摩擦 $\mu=0.5$", fontsize=9)
    ax.text(0.62, 0.58, "光滑的墙", fontsize=9)
    ax.set_title("墙边的箱子")


def _cart_pole(ax):
    _ground(ax, -0.6, 0.6, y=0.0, depth=0.04)
    cart = np.array([0.0, 0.08])
    ax.add_patch(patches.FancyBboxPatch(cart - (0.15, 0.06), 0.3, 0.12, boxstyle="round,pad=0.01", color="C0"))
    theta = np.deg2rad(25.0)
    tip = cart + 0.55 * np.array([np.sin(theta), np.cos(theta)])
    ax.plot([cart[0], tip[0]], [cart[1], tip[1]], color="0.25", lw=3)
    ax.add_patch(patches.Circle(tip, 0.03, color="C2"))
    ax.plot([cart[0], cart[0]], [cart[1], cart[1] + 0.4], color="0.5", ls="--", lw=0.8)
    ax.add_patch(patches.Arc(cart, 0.36, 0.36, theta1=90 - 25, theta2=90, color="C3", lw=1.2))
    ax.text(cart[0] + 0.05, cart[1] + 0.24, r"$\theta$", fontsize=11, color="C3")
    _arrow(ax, (-0.45, 0.08), (-0.17, 0.08), "$F$", offset=(-0.2, 0.06))
    ax.text(0.18, -0.0 + 0.17, "小车 $s$", fontsize=9)
    ax.text(tip[0] + 0.04, tip[1], "杆", fontsize=9, va="center")
    ax.set_title("小车倒立摆")


def draw_systems():
    """One figure, four panels: the systems the chapter simulates."""
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.0))
    for ax, draw in zip(axes, (_ball, _hopper, _box_wall, _cart_pole)):
        draw(ax)
        ax.set_aspect("equal")
        ax.axis("off")
    axes[0].set_xlim(-0.5, 0.5)
    axes[0].set_ylim(-0.08, 0.7)
    axes[1].set_xlim(-0.5, 0.6)
    axes[1].set_ylim(-0.18, 0.75)
    axes[2].set_xlim(-0.3, 1.1)
    axes[2].set_ylim(-0.08, 0.75)
    axes[3].set_xlim(-0.6, 0.6)
    axes[3].set_ylim(-0.06, 0.75)
    fig.tight_layout()
    return fig
