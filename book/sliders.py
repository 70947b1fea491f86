"""Figures a reader can move: a slider over frames drawn in advance, for the static, offline book.

``frame_slider(draw, values, label=...)`` calls ``draw(value)`` once per value, keeps each figure as a
PNG and returns a :class:`FrameSlider`. Displayed in a notebook or on a book page it is a range input
over those frames: moving it shows the frame of that value. Nothing is computed in the browser and
nothing is fetched: the frames are ``data:`` URIs inside the page and the only code is the input's
own ``oninput`` attribute, so the slider works in the HTML book opened from disk, with no kernel
and no network.

Where HTML is not shown (the PDF, a notebook whose outputs are not trusted, a terminal), the
object falls back to its starting frame as a plain image, so the page still has its figure.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt

# One handler for every slider: show the frame whose index is the input's value, hide the others,
# and write that frame's value next to the input. Kept in the attribute so the page needs no script.
_ON_INPUT = (
    "var box=this.closest('.s04-slider'),k=+this.value,shown=null;"
    "box.querySelectorAll('img.s04-slider-frame').forEach(function(im,i){im.hidden=(i!==k);if(i===k)shown=im;});"
    "box.querySelector('output').textContent=shown.dataset.value;"
)
_FRAME_STYLE = "max-width:100%;height:auto;display:block"
_BOX_STYLE = "margin:0.5em 0"


@dataclass(frozen=True)
class FrameSlider:
    """Frames (PNG bytes) with the value each shows; ``start`` is the frame shown first."""

    frames: tuple[bytes, ...]
    values: tuple[str, ...]
    label: str
    start: int = 0
    alt: str = ""

    def __post_init__(self):
        if len(self.frames) != len(self.values) or not self.frames:
            raise ValueError(f"need one value per frame, got {len(self.frames)} frames and {len(self.values)} values")
        if not 0 <= self.start < len(self.frames):
            raise ValueError(f"start={self.start} is not a frame index (0..{len(self.frames) - 1})")

    @property
    def element_id(self) -> str:
        """Stable across builds of the same frames, distinct between two sliders on one page."""
        digest = hashlib.sha1(b"".join(self.frames) + self.label.encode()).hexdigest()[:12]
        return f"s04-slider-{digest}"

    def _repr_html_(self) -> str:
        esc = lambda text: html.escape(text, quote=True)  # noqa: E731
        images = []
        for i, (png, value) in enumerate(zip(self.frames, self.values)):
            uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            hidden = "" if i == self.start else " hidden"
            alt = f"{self.alt}（{self.label} = {value}）" if self.alt else f"{self.label} = {value}"
            images.append(
                f'<img class="s04-slider-frame" data-value="{esc(value)}" alt="{esc(alt)}" '
                f'style="{_FRAME_STYLE}" src="{uri}"{hidden}>'
            )
        control = (
            f'<label for="{self.element_id}-input">{esc(self.label)}</label> '
            f'<input type="range" id="{self.element_id}-input" min="0" max="{len(self.frames) - 1}" step="1" '
            f'value="{self.start}" style="vertical-align:middle;width:min(20em,60%)" oninput="{esc(_ON_INPUT)}"> '
            f'<output for="{self.element_id}-input">{esc(self.values[self.start])}</output>'
        )
        return (
            f'<div class="s04-slider" id="{self.element_id}" style="{_BOX_STYLE}">'
            f'<div class="s04-slider-control">{control}</div>{"".join(images)}</div>'
        )

    def _repr_png_(self) -> bytes:
        return self.frames[self.start]

    def __repr__(self) -> str:
        return f"FrameSlider({self.label!r}, {len(self.frames)} frames, start={self.values[self.start]})"


def frame_slider(
    draw: Callable[[object], plt.Figure],
    values: Sequence[object],
    *,
    label: str,
    fmt: str = "{}",
    start: int = 0,
    alt: str = "",
    dpi: int = 100,
) -> FrameSlider:
    """Draw one figure per value with ``draw(value)`` and return them as a slider.

    Args:
        draw: returns a matplotlib figure for one value; the figure is saved and closed here.
            Give every frame the same size and axis limits, so moving the slider changes the
            data and not the frame.
        values: what the slider runs over, in order.
        label: the slider's name shown before it, plain text (no TeX: it sits outside MathJax).
        fmt: how a value is written next to the slider, e.g. ``"{:.3g} s"``.
        start: index of the frame shown first (and in the PDF).
        alt: what the frames show, for a reader who cannot see them.
        dpi: resolution of the frames; each frame is inlined in the page, so keep them small.
    """
    frames = []
    for value in values:
        fig = draw(value)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        plt.close(fig)
        frames.append(buffer.getvalue())
    return FrameSlider(tuple(frames), tuple(fmt.format(v) for v in values), label, start, alt)
