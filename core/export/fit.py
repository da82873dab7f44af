"""Fit a figure to a printed size: no text outside the page, no text over text (issue 19).

At a venue preset a figure is a few inches wide, and plotly's own layout lets long notes run
off the page, a legend below the plot sit on the x-axis title, category labels run into each
other and small facets crowd their tick labels. :func:`fit_figure` lays the export copy out
in two steps:

1. **Before rendering**, from the font's advance widths (:func:`text_width`, read from the
   export font with fontTools): long titles, notes, subplot titles and legend entries are
   wrapped to the width they have; category tick labels are wrapped at spaces when they do
   not fit side by side.
2. **After one SVG rendering** (plotly's real geometry: the plot areas, the legend's box,
   every text's position), the legend goes below the x-axis titles (the figure grows by the
   legend's height, so the plot keeps the size its aspect gives it), the top and side margins
   grow to hold what stuck out, crowded tick labels get fewer ticks (category labels that
   still collide are set vertical) and point labels that collide are dropped (the legend and
   the axes still identify the points).

3. **From a second rendering**: the legend below gets its real height, axis, facet and note
   titles are wrapped again to the room the rendering left them.
4. **From the last rendering**: the figure's title is lifted over what step 3 raised, the
   top margin grows over text above the page. At a fixed pixel size the plot keeps at least
   :data:`_MIN_PLOT_SHARE` of its height (a long legend below grows the figure instead), and
   what the layout could not keep is said in words (``said``; :func:`layout_problems`).

The text boxes here are estimates from the font metrics; ``tests/test_figure_presets.py``
checks the result with the browser's own measurement at every preset.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from core.export.text_boxes import (
    ASCENT,
    BR,
    DESCENT,
    FONT_SIZE,
    LINE_EM,
    SVG,
    TAG,
    TextBox,
    svg_text_boxes,
    text_width,
    translate,
    wrap_text,
)

__all__ = [
    "TextBox",
    "fit_figure",
    "layout_problems",
    "svg_text_boxes",
    "text_width",
    "wrap_text",
]

#: Width of a legend entry's symbol and its gap, in px (plotly: 40).
_LEGEND_SYMBOL_PX = 40.0
#: Plotly's default title size relative to the base font.
_TITLE_EM = 1.4
#: Name of the annotation that carries the figure's title in an export.
_TITLE_NAME = "figure title"
#: Tick labels closer than this (px; negative: a gap) count as colliding (the estimate of a
#: text's width can be short of the browser's by a pixel or two).
_TICK_GAP = -4.0
#: Plotly's default font size (px) of a text whose layout gives none.
_PLOTLY_PX = 12.0
#: A legend below the plot is drawn whole (plotly's default caps a horizontal legend at half
#: the figure's height and scrolls the rest, which a static file cannot show).
_NO_SCROLL_PX = 100_000
#: At a fixed size, the plot keeps at least this share of the height it had before a legend
#: and notes went below it; the figure grows past the size asked for instead (and says so).
_MIN_PLOT_SHARE = 0.4


def _plot_areas(root: ET.Element) -> list[tuple[float, float, float, float]]:
    """``(left, top, right, bottom)`` of each subplot's plot area (clipped ``...plot`` groups)."""
    clips = {c.get("id"): next(c.iter(SVG + "rect"), None) for c in root.iter(SVG + "clipPath")}
    out = []
    for g in root.iter(SVG + "g"):
        m = re.search(r"url\(#([^)]+)\)", g.get("clip-path") or "")
        rect = clips.get(m.group(1)) if m and m.group(1).endswith("plot") else None
        move = translate(g)
        if rect is None or move is None:
            continue
        x, y = move
        out.append((x, y, x + float(rect.get("width", 0)), y + float(rect.get("height", 0))))
    return out


def _legend_box(root: ET.Element) -> tuple[float, float, float, float] | None:
    for g in root.iter(SVG + "g"):
        if (g.get("class") or "").split() == ["legend"]:
            move = translate(g) or (0.0, 0.0)
            rect = next((r for r in g.iter(SVG + "rect") if "bg" in (r.get("class") or "")), None)
            if rect is None:
                return None
            w, h = float(rect.get("width") or 0), float(rect.get("height") or 0)
            return (move[0], move[1], move[0] + w, move[1] + h)
    return None


# ---------------------------------------------------------------------------- the layout
def _axis_names(fig: Any, letter: str) -> list[str]:
    return [k for k in fig.layout.to_plotly_json() if re.fullmatch(rf"{letter}axis\d*", k)]


def _domain_width(fig: Any, axis: str) -> float:
    dom = fig.layout[axis].domain
    return float(dom[1] - dom[0]) if dom is not None else 1.0


def _categories(fig: Any, axis: str) -> list[str]:
    """String x values drawn on ``axis`` (``xaxis``, ``xaxis2`` ...), in first-seen order.

    A box or violin trace without x values is drawn at its name (one category each).
    """
    ref = "x" + axis[5:]
    seen: dict[str, None] = {}
    for tr in fig.data:
        if (getattr(tr, "xaxis", None) or "x") != ref or getattr(tr, "orientation", None) == "h":
            continue
        xs = getattr(tr, "x", None)
        if xs is None and tr.type in ("box", "violin") and isinstance(tr.name, str):
            xs = [tr.name]
        if xs is None:
            continue
        for v in xs:
            if not isinstance(v, str):
                return []
            seen.setdefault(v, None)
    return list(seen)


def _wrap_before(fig: Any, width: float, height: float, font_px: float, family: str) -> None:
    """Step 1: wrap long texts to the width they have (font metrics, no rendering)."""
    pad = font_px
    avail = width - 2 * pad
    title = fig.layout.title
    if title.text:
        size = title.font.size or _TITLE_EM * font_px
        # as a note over the plot's top left corner (plotly places a wrapped title's lines
        # from its first baseline, so a title of two lines runs off the page): step 2 lifts
        # it over the subplot titles and grows the top margin to hold it
        fig.add_annotation(
            text=wrap_text(title.text, avail, size, family),
            name=_TITLE_NAME,
            xref="paper",
            yref="paper",
            x=0,
            xanchor="left",
            y=1,
            yanchor="bottom",
            showarrow=False,
            align="left",
            font={"size": size},
        )
        title.text = None
    plot_w = width - 6 * font_px  # a y axis with ticks and a title on the left
    domains = [fig.layout[a].domain or (0, 1) for a in _axis_names(fig, "x")]
    for ann in fig.layout.annotations:
        if not ann.text or ann.showarrow is True and ann.xref not in (None, "paper"):
            continue
        size = ann.font.size or font_px
        x = ann.x if isinstance(ann.x, (int, float)) and ann.xref in (None, "paper") else 0.5
        anchor = ann.xanchor or "auto"
        if anchor in ("center", "auto") and 0 < x < 1:
            room = 2 * min(x, 1 - x) * width
            facet = [d for d in domains if d[0] <= x <= d[1]] if len(domains) > 1 else []
            if facet:  # a subplot title: the width of its panel and half the gaps
                room = min(room, (facet[0][1] - facet[0][0]) * plot_w + font_px)
        elif anchor == "left":
            room = (1 - x) * width
        elif anchor == "right":
            room = x * width
        else:
            room = width
        ann.text = wrap_text(ann.text, max(min(room, avail), 4 * size), size, family)
    for axis in _axis_names(fig, "y"):
        ax = fig.layout[axis]
        if ax.title.text:
            dom = ax.domain or (0, 1)
            room = max((height - 6 * font_px) * float(dom[1] - dom[0]), 4 * font_px)
            ax.title.text = wrap_text(ax.title.text, room, ax.title.font.size or font_px, family)
    _compact_groups(fig)
    entry_room = max(width - 2 * pad - _LEGEND_SYMBOL_PX, 4 * font_px)
    for tr in fig.data:
        if tr.name and text_width(tr.name, font_px, family) > entry_room:
            tr.name = wrap_text(tr.name, entry_room, font_px, family)
    for axis in _axis_names(fig, "x"):
        cats = _categories(fig, axis)
        if len(cats) < 2:
            continue
        room = plot_w * _domain_width(fig, axis) / len(cats) - font_px / 2
        size = fig.layout[axis].tickfont.size or font_px
        if max(text_width(c, size, family) for c in cats) <= room:
            continue
        fig.layout[axis].update(
            tickmode="array",
            tickvals=cats,
            ticktext=[wrap_text(c, room, size, family) for c in cats],
            tickangle=0,
        )


def _compact_groups(fig: Any) -> None:
    """No gap between legend groups of one entry each (plotly leaves 10 px after each group).

    Figures group a series' traces across facets (one legend entry, the others hidden): the
    gap then only doubles the legend's height (16 entries below a 450 px figure left the plot
    no room).
    """
    shown: dict[str, int] = {}
    for tr in fig.data:
        group = getattr(tr, "legendgroup", None)
        if group and tr.showlegend is not False:
            shown[group] = shown.get(group, 0) + 1
    if shown and max(shown.values()) == 1 and fig.layout.legend.tracegroupgap is None:
        fig.layout.legend.tracegroupgap = 0


def _notes_below(fig: Any) -> list[Any]:
    """Annotations written under the plot (paper y < 0): notes that go below the legend."""
    return [
        a
        for a in fig.layout.annotations
        if a.text
        and a.yref in (None, "paper")
        and a.xref in (None, "paper")
        and isinstance(a.y, (int, float))
        and a.y < 0
        and a.showarrow is not True
    ]


def _fix_after(
    fig: Any,
    svg: bytes,
    width: float,
    height: float,
    font_px: float,
    family: str,
    grow: bool = True,
) -> tuple[float, float]:
    """Step 2: from a rendered SVG, stack axis titles, legend and notes; grow the margins.

    Below the plot, top to bottom: the x tick labels and titles, the legend, the notes. The
    figure grows by the legend's and the notes' heights, so the plot keeps its size (``grow``;
    else the figure keeps ``height`` and the plot gets smaller). Returns the figure's height
    and the height given to a legend moved below the plot (0: none moved).
    """
    root = ET.fromstring(svg)
    boxes = svg_text_boxes(svg, family)
    areas = _plot_areas(root)
    ytitle_px = {}  # rotated, so not among the boxes: the font size each y title got
    for el in root.iter(SVG + "text"):
        m = re.fullmatch(r"y(\d*)title", (el.get("class") or "").strip())
        size = FONT_SIZE.search(el.get("style") or "")
        if m and size:
            ytitle_px[f"yaxis{m.group(1)}"] = float(size.group(1))
    legend = _legend_box(root)
    pad = round(font_px / 2)
    new_height = height
    notes = _notes_below(fig)
    note_texts = {_plain(a.text) for a in notes}
    if areas:
        top = min(a[1] for a in areas)
        bottom = max(a[3] for a in areas)
        left = min(a[0] for a in areas)
        right = max(a[2] for a in areas)
        is_note = [b.cls.startswith("annotation") and b.text in note_texts for b in boxes]
        others = [
            b
            for b, n in zip(boxes, is_note, strict=True)
            if not n and not b.cls.startswith("legend")
        ]
        # what sticks out at the top, left and right (subplot titles, end ticks), and the
        # figure's title, lifted over what stands above the plot
        title_ann = next((a for a in fig.layout.annotations if a.name == _TITLE_NAME), None)
        title_box = next(
            (b for b in others if title_ann is not None and b.text == _plain(title_ann.text)), None
        )
        rest = [b for b in others if b is not title_box]
        _lift_subplot_titles(fig, rest)
        over_left = max([0.0] + [-b.left for b in rest])
        l_px = left + over_left + (1 if over_left else 0)
        over_top = max([0.0] + [-b.top for b in rest])
        if title_ann is not None and title_box is not None:
            above = [b.top for b in rest if b.bottom <= top + 1 and b.right > 0]
            lift = max(0.0, top - min(above) + pad / 2) if above else 0.0
            size = title_ann.font.size or _TITLE_EM * font_px
            title_ann.text = wrap_text(
                BR.sub(" ", title_ann.text), width - l_px - pad, size, family
            )
            lines = len(BR.split(title_ann.text))
            title_h = (lines - 1) * LINE_EM * size + (ASCENT + DESCENT) * size
            title_ann.yshift = lift
            over_top = max(over_top, lift + title_h + pad - top)
        over_right = max([0.0] + [b.right - width for b in others])
        t = top + over_top + (1 if over_top else 0)
        r_px = width - right + over_right + (1 if over_right else 0)
        axis_bottom = max([bottom] + [b.bottom for b in others if b.bottom > bottom - 1])
        axis_b = axis_bottom - bottom + pad
        plot_h = height - t - axis_b
        leg_h = 0.0
        if (
            legend is not None
            and fig.layout.showlegend is not False
            and any(b.cls.startswith("legend") for b in boxes)
        ):
            leg = fig.layout.legend
            inside = (
                leg.xref in (None, "paper")
                and leg.yref in (None, "paper")
                and leg.x is not None
                and 0 <= leg.x <= 1
                and leg.y is not None
                and 0 <= leg.y <= 1
            )
            legend_text = [b for b in boxes if b.cls.startswith("legend")]
            crowded = any(a.overlaps(b) for a in legend_text for b in others)
            if not inside or crowded:
                # every entry, also those a long legend scrolled out of its box beside the
                # plot (plotly draws them all and clips them): below, it shows them all
                drawn = max(b.bottom for b in legend_text) - min(b.top for b in legend_text)
                leg_h = max(legend[3] - legend[1], drawn + font_px) + pad
        note_room = width - l_px - pad
        note_h = []
        for a in notes:
            size = a.font.size or font_px
            a.text = wrap_text(BR.sub(" ", a.text), note_room, size, family)
            note_h.append(
                (len(BR.split(a.text)) - 1) * LINE_EM * size + (ASCENT + DESCENT) * size + pad
            )
        if grow:
            new_height = round(t + plot_h + axis_b + leg_h + sum(note_h), 2)
        else:  # the height asked for: the plot gives up what the legend and notes need
            least = max(_MIN_PLOT_SHARE * plot_h, 4 * font_px)
            left_h = height - t - axis_b - leg_h - sum(note_h)
            if left_h < least:  # too little plot: the figure grows, and says so
                plot_h = least
                new_height = round(t + plot_h + axis_b + leg_h + sum(note_h), 2)
            else:
                plot_h = left_h
                new_height = height
        if leg_h:
            fig.layout.legend.update(
                orientation="h",
                xref="container",
                yref="container",
                x=0,
                xanchor="left",
                y=(sum(note_h) + pad / 2) / new_height,
                yanchor="bottom",
                maxheight=_NO_SCROLL_PX,
                title_side="top",
            )
        below = axis_b + leg_h  # px under the plot where the next note starts
        for a, h in zip(notes, note_h, strict=True):
            a.update(x=0, xanchor="left", y=-below / plot_h, yanchor="top", align="left")
            below += h
        for axis in _axis_names(fig, "y"):
            ax = fig.layout[axis]
            if ax.title.text:
                dom = ax.domain or (0, 1)
                room = max(plot_h * float(dom[1] - dom[0]) - font_px, 4 * font_px)
                size = ytitle_px.get(axis, ax.title.font.size or font_px)
                ax.title.text = wrap_text(BR.sub(" ", ax.title.text), room, size, family)
        margins = {"t": t, "b": new_height - t - plot_h, "l": l_px, "r": r_px}
        fig.update_layout(height=new_height, margin=margins)
        shrink_x = min(1.0, (width - l_px - r_px) / max(right - left, 1.0))
        shrink_y = min(1.0, plot_h / max(bottom - top, 1.0))
    else:
        shrink_x = shrink_y = 1.0
        leg_h = 0.0
    _thin_ticks(fig, boxes, shrink_x, shrink_y)
    _drop_point_labels(fig, boxes)
    _colorbar_titles_aside(fig, boxes)
    return new_height, leg_h


def _colorbar_titles_aside(fig: Any, boxes: list[TextBox]) -> None:
    """A colorbar title on its end tick label: the title goes beside the bar.

    Plotly puts the title over the bar, where the end tick's label ("1" under "ONCU") sticks
    out; beside it, rotated, it stands right of the tick labels.
    """
    titles = [b for b in boxes if re.fullmatch(r"\w*cb\w*title", b.cls)]
    ticks = [b for b in boxes if re.fullmatch(r"\w*cb\w*tick", b.cls)]
    if not any(t.overlaps(k) for t in titles for k in ticks):
        return
    for tr in fig.data:
        bar = getattr(tr, "colorbar", None)
        if bar is not None and bar.title.text and bar.title.side in (None, "top"):
            bar.title.side = "right"


def _settle_legend(fig: Any, svg: bytes, height: float, room: float, grow: bool) -> float:
    """Step 3: a legend moved below the plot, as rendered: it gets the room it needs.

    Step 2 sized the legend's band (``room`` px for its box) from the legend as plotly first
    drew it, beside the plot, one entry a row (a long legend is cut there to the plot's height
    and scrolls, which a static file cannot show: step 2 counts every entry it drew). Drawn
    below with no height limit, its real height is known: the band grows or shrinks by the
    difference and the notes under it move with it; the figure's height follows (``grow``),
    else the plot takes up or gives up the room. Returns the height.
    """
    box = _legend_box(ET.fromstring(svg))
    if box is None:
        return height
    lack = (box[3] - box[1]) - room  # < 0: rows of short entries side by side need less
    if abs(lack) <= 0.5:
        return height
    leg, margin = fig.layout.legend, fig.layout.margin
    bottom_px = float(leg.y or 0) * height  # the legend's bottom edge, from the page's bottom
    plot_h = height - float(margin.t or 0) - float(margin.b or 0)
    grow = grow or plot_h - lack < _MIN_PLOT_SHARE * plot_h  # too little plot left: grow
    new_height = round(height + lack, 2) if grow else height
    new_plot_h = plot_h if grow else plot_h - lack
    fig.update_layout(height=new_height, margin={"b": float(margin.b or 0) + lack})
    leg.update(y=bottom_px / new_height)
    for a in _notes_below(fig):  # the same distance under the legend as before
        a.update(y=-(-float(a.y) * plot_h + lack) / new_plot_h)
    return new_height


def _lift_subplot_titles(fig: Any, boxes: list[TextBox]) -> None:
    """Subplot titles that sit on the tick labels of their panel: raised just clear of them."""
    ticks = [b for b in boxes if re.fullmatch(r"[xy]\d*tick", b.cls)]
    for b in boxes:
        if not b.cls.startswith("annotation"):
            continue
        clash = [min(b.bottom, t.bottom) - max(b.top, t.top) for t in ticks if b.overlaps(t)]
        if not clash:
            continue
        for ann in fig.layout.annotations:
            if ann.text and _plain(ann.text) == b.text and ann.yanchor == "bottom":
                ann.yshift = (ann.yshift or 0) + max(clash) + 1


def _plain(text: str) -> str:
    """Plotly markup as the SVG shows it: lines joined by a space, tags dropped."""
    return " ".join(html.unescape(TAG.sub("", line)) for line in BR.split(str(text)))


def _collide(ticks: list[TextBox], horizontal: bool, shrink: float) -> bool:
    """Whether neighbouring tick labels collide once the axis is ``shrink`` times as long."""
    if horizontal:
        spans = sorted(((b.left + b.right) / 2, (b.right - b.left) / 2) for b in ticks)
    else:
        spans = sorted(((b.top + b.bottom) / 2, (b.bottom - b.top) / 2) for b in ticks)
    return any(
        (c2 - c1) * shrink < h1 + h2 - _TICK_GAP
        for (c1, h1), (c2, h2) in zip(spans, spans[1:], strict=False)
    )


def _thin_ticks(
    fig: Any, boxes: list[TextBox], shrink_x: float = 1.0, shrink_y: float = 1.0
) -> None:
    """Fewer ticks on an axis whose tick labels collide; category labels set vertical.

    ``shrink_x`` / ``shrink_y``: how much shorter the axes get after the margins grew (the
    labels were measured before), so labels that would collide on the final page count too.
    """
    by_axis: dict[str, list[TextBox]] = {}
    for b in boxes:
        m = re.fullmatch(r"([xy])(\d*)tick", b.cls)
        if m:
            by_axis.setdefault(f"{m.group(1)}axis{m.group(2)}", []).append(b)
    for axis, ticks in by_axis.items():
        horizontal = axis.startswith("x")
        if not _collide(ticks, horizontal, shrink_x if horizontal else shrink_y):
            continue
        ax = fig.layout[axis]
        if (
            ax.tickmode == "array"
            or ax.type == "category"
            or (axis.startswith("x") and _categories(fig, axis))
        ):
            text = ax.ticktext if ax.tickmode == "array" and ax.ticktext else None
            ax.update(tickangle=-90)
            if text:  # one line each when vertical
                ax.update(ticktext=[BR.sub(" ", str(t)) for t in text])
        elif ax.type == "log":
            ax.update(dtick="D2" if ax.dtick in (None, "D1") else 1)
        else:
            ax.update(nticks=max(2, len(ticks) // 2 + 1))


def _drop_point_labels(fig: Any, boxes: list[TextBox]) -> None:
    """Point labels that collide with other text: the traces keep their markers only."""
    points = [b for b in boxes if b.cls == "textpoint"]
    if not points:
        return
    if not any(p.overlaps(o) for p in points for o in boxes if o is not p):
        return
    for tr in fig.data:
        mode = getattr(tr, "mode", None)
        if mode and "text" in mode:
            tr.mode = "+".join(m for m in mode.split("+") if m != "text") or "markers"


def fit_figure(
    fig: Any,
    width: float,
    height: float,
    font_px: float,
    render_svg: Callable[[Any, float, float], bytes],
    family: str = "Liberation Serif",
    grow: bool = True,
    said: list[str] | None = None,
) -> float:
    """Lay ``fig`` (the export copy, changed in place) out for print; returns its height.

    Args:
        fig: the styled export copy (size, font and template already set).
        width, height: the size asked for, in px (the height may grow by a legend below).
        font_px: the base font size in px.
        render_svg: renders a figure to SVG bytes at ``(width, height)``.
        family: the export font family.
        grow: let the figure grow by the legend and notes below the plot (a venue preset,
            whose height comes from an aspect); False keeps ``height`` (pixel sizes asked for)
            unless the plot would keep less than :data:`_MIN_PLOT_SHARE` of its height.
        said: when given, gets one line per thing the layout could not keep as asked (the
            figure grew past a fixed size) and per text that still runs off the page or over
            other text (:func:`layout_problems`, from one more rendering).
    """
    if not fig.data or fig.layout.xaxis.visible is False:
        return height
    _wrap_before(fig, width, height, font_px, family)
    svg = render_svg(fig, width, height)
    asked = height
    height, band = _fix_after(fig, svg, width, height, font_px, family, grow)
    # step 3, from a second rendering: the legend's real height, and axis titles against the
    # plot as it came out (tick labels set vertical in step 2 take height from it)
    svg = render_svg(fig, width, height)
    _rewrap_x_titles(fig, svg, width, font_px, family)
    if _rewrap_facet_titles(fig, svg, family):
        svg = render_svg(fig, width, height)  # the titles' new lines, where they stand
    before_l = float(fig.layout.margin.l or 0)
    wider = _rewrap_y_titles(fig, svg, font_px, family)
    areas = _plot_areas(ET.fromstring(svg))
    if areas:  # the plot's left edge as rendered (plotly may have pushed the margin itself)
        left = min(a[0] for a in areas) + float(fig.layout.margin.l or 0) - before_l
        height, rewrapped = _rewrap_notes(fig, width, height, left, font_px, family, grow)
        if band and (wider or rewrapped):
            svg = render_svg(fig, width, height)  # a wider margin can re-flow the legend
    if band:
        height = _settle_legend(fig, svg, height, band - round(font_px / 2), grow)
    # step 4, from the layout as it now stands: the title over what step 3 raised, the top
    # margin over what stands above the page
    svg = render_svg(fig, width, height)
    height = _room_on_top(fig, svg, height, font_px, family, grow)
    if said is not None and not grow and height > asked + 0.5:
        said.append(
            f"the legend and notes below the plot leave the plot too little of "
            f"{width:.0f}x{asked:.0f} px, so the figure is {width:.0f}x{height:.0f} px "
            f"(a taller size or fewer series keeps the size)"
        )
    if said is not None:  # what still collides, as estimated from the final layout
        said.extend(layout_problems(render_svg(fig, width, height), width, height, family))
    return height


def layout_problems(
    svg: bytes, width: float, height: float, family: str = "Liberation Serif"
) -> list[str]:
    """Text off the page or over other text in a rendered SVG (estimated boxes), in words.

    Only clear cases count (3 px each way): the boxes are estimates from the font metrics.
    """
    boxes = svg_text_boxes(svg, family)
    out = [
        f"{b.text[:30]!r} runs off the page"
        for b in boxes
        if min(b.left, b.top) < -3 or b.right > width + 3 or b.bottom > height + 3
    ]
    out += [
        f"{a.text[:30]!r} overlaps {b.text[:30]!r}"
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a.overlaps(b, slack=3.0)
    ]
    return out


def _rewrap_facet_titles(fig: Any, svg: bytes, family: str) -> bool:
    """Facet titles wider than their panel as rendered: wrapped again to the panel's width.

    Step 1 wrapped them to an estimate of the panel; a wide y title or long tick labels can
    leave the panels narrower, and two neighbouring titles then run into each other.
    Returns whether a title changed.
    """
    areas = _plot_areas(ET.fromstring(svg))
    if len(areas) < 2:
        return False
    left, right = min(a[0] for a in areas), max(a[2] for a in areas)
    changed = False
    for ann in fig.layout.annotations:
        if (
            not ann.text
            or ann.name == _TITLE_NAME
            or ann.yanchor != "bottom"
            or ann.xref not in (None, "paper")
            or not isinstance(ann.x, (int, float))
        ):
            continue
        px = left + float(ann.x) * (right - left)
        panel = [a for a in areas if a[0] - 1 <= px <= a[2] + 1]
        if not panel:
            continue
        room = min(a[2] - a[0] for a in panel)
        size = ann.font.size or _PLOTLY_PX
        if max(text_width(line, size, family) for line in _plain_lines(ann.text)) > room:
            ann.text = wrap_text(BR.sub(" ", ann.text), room, size, family)
            changed = True
    return changed


def _plain_lines(text: str) -> list[str]:
    return [html.unescape(TAG.sub("", line)) for line in BR.split(str(text))]


def _room_on_top(
    fig: Any, svg: bytes, height: float, font_px: float, family: str, grow: bool
) -> float:
    """The figure's title lifted over what it stands on; the top margin grows over the page.

    Step 2 lifted the title over the subplot titles as first rendered; step 3 may have given
    them more lines (a facet title wrapped to its panel stood on the title). Text the
    rendering put above the page (a facet title of several lines, the lifted title) gets a
    taller top margin; the figure grows with it (``grow``), so the plot keeps its size.
    Returns the figure's height.
    """
    boxes = svg_text_boxes(svg, family)
    title_ann = next((a for a in fig.layout.annotations if a.name == _TITLE_NAME), None)
    title = next(
        (
            b
            for b in boxes
            if title_ann is not None
            and b.cls.startswith("annotation")
            and b.text == _plain(title_ann.text)
        ),
        None,
    )
    if title is not None and title_ann is not None:
        under = [b for b in boxes if b is not title and b.overlaps(title, slack=0.0)]
        if under:
            lift = max(title.bottom - b.top for b in under) + round(font_px / 2) / 2
            title_ann.yshift = float(title_ann.yshift or 0) + lift
            boxes = [b for b in boxes if b is not title] + [
                TextBox(
                    title.text,
                    title.cls,
                    title.left,
                    title.top - lift,
                    title.right,
                    title.bottom - lift,
                )
            ]
    over = max([0.0] + [-b.top for b in boxes])
    if over <= 0.5:
        return height
    margin = fig.layout.margin
    new_height = round(height + over + 1, 2) if grow else height
    fig.update_layout(height=new_height, margin={"t": float(margin.t or 0) + over + 1})
    leg = fig.layout.legend
    if grow and leg.yref == "container" and leg.y is not None:  # same distance from the bottom
        leg.update(y=float(leg.y) * height / new_height)
    return new_height


def _rewrap_x_titles(fig: Any, svg: bytes, width: float, font_px: float, family: str) -> None:
    """X-axis titles wider than the room centred on their plot: wrapped at spaces to it.

    A title is centred under its plot; where long labels beside the plot leave it narrow, the
    title ran off the page (``% of predictions`` under a failure breakdown at a column's
    width). It gets the width it can have on both sides of its centre, within the page.
    """
    root = ET.fromstring(svg)
    areas = _plot_areas(root)
    if not areas:
        return
    left, right = min(a[0] for a in areas), max(a[2] for a in areas)
    sizes = _title_sizes(root, "x")
    for axis in _axis_names(fig, "x"):
        ax = fig.layout[axis]
        if not ax.title.text:
            continue
        dom = ax.domain or (0, 1)
        centre = left + (right - left) * (float(dom[0]) + float(dom[1])) / 2
        room = 2 * min(centre, width - centre) - font_px
        size = sizes.get(axis, ax.title.font.size or font_px)
        if text_width(_plain(ax.title.text), size, family) > room:
            ax.title.text = wrap_text(BR.sub(" ", ax.title.text), max(room, 4 * size), size, family)


def _rewrap_notes(
    fig: Any, width: float, height: float, left: float, font_px: float, family: str, grow: bool
) -> tuple[float, bool]:
    """Notes under the plot wrapped again to the room right of the plot's left edge ``left``.

    Notes start at the plot's left edge, which the rendering may have moved right (plotly
    widens the margin for a y title of several lines); the lines they gain go below (the
    figure grows by them with ``grow``). Returns the height and whether a note changed.
    """
    notes = _notes_below(fig)
    if not notes:
        return height, False
    margin = fig.layout.margin
    pad = round(font_px / 2)
    room = width - left - pad
    plot_h = height - float(margin.t or 0) - float(margin.b or 0)
    gained = 0.0
    for a in notes:
        size = a.font.size or font_px
        before = len(BR.split(a.text))
        a.text = wrap_text(BR.sub(" ", a.text), room, size, family)
        a.update(y=float(a.y) - gained / plot_h)  # below the lines the notes above gained
        gained += (len(BR.split(a.text)) - before) * LINE_EM * size
    if gained <= 0 or not grow:
        return height, gained != 0
    new_height = round(height + gained, 2)
    fig.update_layout(height=new_height, margin={"b": float(margin.b or 0) + gained})
    leg = fig.layout.legend
    if leg.yref == "container" and leg.y is not None:  # the legend keeps its place over them
        leg.update(y=(float(leg.y) * height + gained) / new_height)
    return new_height, True


def _title_sizes(root: ET.Element, letter: str) -> dict[str, float]:
    """The font size each axis title of one direction got in the rendering (px)."""
    sizes = {}
    for el in root.iter(SVG + "text"):
        m = re.fullmatch(rf"{letter}(\d*)title", (el.get("class") or "").strip())
        size = FONT_SIZE.search(el.get("style") or "")
        if m and size:
            sizes[f"{letter}axis{m.group(1)}"] = float(size.group(1))
    return sizes


def _rewrap_y_titles(fig: Any, svg: bytes, font_px: float, family: str) -> bool:
    """Y-axis titles longer than their plot's rendered height: wrapped again, margin widened.

    Each line a title gains is one more line beside the axis: the left margin grows by it.
    Returns whether a title changed.
    """
    root = ET.fromstring(svg)
    areas = _plot_areas(root)
    if not areas:
        return False
    band = max(a[3] for a in areas) - min(a[1] for a in areas)
    sizes = _title_sizes(root, "y")
    extra = 0.0
    for axis in _axis_names(fig, "y"):
        ax = fig.layout[axis]
        if not ax.title.text:
            continue
        dom = ax.domain or (0, 1)
        room = max(band * float(dom[1] - dom[0]) - font_px, 4 * font_px)
        size = sizes.get(axis, ax.title.font.size or font_px)
        before = len(BR.split(ax.title.text))
        ax.title.text = wrap_text(BR.sub(" ", ax.title.text), room, size, family)
        extra = max(extra, (len(BR.split(ax.title.text)) - before) * LINE_EM * size)
    if extra > 0:
        fig.layout.margin.l = float(fig.layout.margin.l or 0) + extra
    return extra > 0
