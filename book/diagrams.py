"""Small SVG flow diagrams for the book's pages.

Text stays text in the SVG, so the reader's browser draws the Chinese labels with its
own fonts (matplotlib's bundled fonts have no CJK glyphs). Used as
``IPython.display.SVG(flow_svg(...))`` from a code cell.
"""

from __future__ import annotations

from html import escape

#: the same Simplified Chinese sans faces the book's style sheet names (book/_ext/static/course_reader.css):
#: an SVG shown as an image cannot use the page's fonts, and a bare "sans-serif" is often a Kai face on Linux
FONT_FAMILY = (
    "system-ui, -apple-system, 'Segoe UI', 'PingFang SC', 'Hiragino Sans GB', 'Microsoft YaHei', "
    "'Noto Sans CJK SC', 'Source Han Sans SC', 'WenQuanYi Micro Hei', sans-serif"
)


def flow_svg(nodes, edges, width=720, box=(200, 54), title=None):
    """Render boxes and arrows as an SVG string.

    Args:
        nodes: ``{key: (x, y, text)}``; ``(x, y)`` is the box centre in pixels, ``text``
            may contain ``\\n`` for a second line.
        edges: ``[(from_key, to_key, label_or_None), ...]``, drawn as straight arrows.
        width: SVG width in pixels; the height follows from the lowest box.
        box: box width and height in pixels.
        title: optional caption drawn at the top.
    """
    bw, bh = box
    top = 30 if title else 0
    height = max(y for _, y, _ in nodes.values()) + bh // 2 + 12 + top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}" font-size="14">',
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
        '<path d="M0,0 L10,4 L0,8 z" fill="#555"/></marker></defs>',
    ]
    if title:
        out.append(f'<text x="{width / 2}" y="20" text-anchor="middle" font-weight="bold">{escape(title)}</text>')
    for a, b, label in edges:
        (x1, y1, _), (x2, y2, _) = nodes[a], nodes[b]
        y1, y2 = y1 + top, y2 + top
        # leave the box edge, enter the next box edge
        if abs(y2 - y1) >= abs(x2 - x1):
            sy, ey = (y1 + bh / 2, y2 - bh / 2) if y2 > y1 else (y1 - bh / 2, y2 + bh / 2)
            sx, ex = x1, x2
        else:
            sx, ex = (x1 + bw / 2, x2 - bw / 2) if x2 > x1 else (x1 - bw / 2, x2 + bw / 2)
            sy, ey = y1, y2
        out.append(
            f'<line x1="{sx}" y1="{sy}" x2="{ex}" y2="{ey}" stroke="#555" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
        if label:
            out.append(
                f'<text x="{(sx + ex) / 2 + 6}" y="{(sy + ey) / 2 - 4}" fill="#a33" font-size="12">{escape(label)}</text>'
            )
    for x, y, text in nodes.values():
        y += top
        out.append(
            f'<rect x="{x - bw / 2}" y="{y - bh / 2}" width="{bw}" height="{bh}" rx="8" '
            'fill="#eef4fb" stroke="#3b6ea5" stroke-width="1.5"/>'
        )
        lines = text.split("\n")
        for i, line in enumerate(lines):
            dy = (i - (len(lines) - 1) / 2) * 18 + 5
            out.append(f'<text x="{x}" y="{y + dy}" text-anchor="middle">{escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out)
