"""Every registered figure, rendered as SVG at the ACL column preset, is fit for a paper (issue 19).

On the demo store (the embedded reader on controlled-200) plus a few DOLCE probes and CUE-R
interventions of the same reader, each registered figure with data is exported as SVG at the
``acl-column`` preset (3.03 in = 290.88 px wide, 8 pt text, the figure's aspect) and the SVG is
parsed: every cartesian direction has a non-empty axis title (facets: at least one per
direction), a legend beside the plot takes at most 35 % of the width. The same SVG is then
opened in Chromium, which measures every visible text: none reaches outside the canvas and no
two overlap (by more than 1 px each way). Skipped when kaleido has no Chromium to render with.
(The 30 s export bound is measured by ``bench/bench_export.py``.)
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import plotly.graph_objects as go
import pytest

from core.export.render import ExportSettings, figure_bytes, preset_settings
from core.figures import Selection

pytestmark = pytest.mark.slow

_SVG = "{http://www.w3.org/2000/svg}"
#: A plain figure at about a column's width (to see whether kaleido renders at all).
PROBE = ExportSettings(width=291, height=200, font_size=9)
#: The ACL column preset: 3.03 in wide, 8 pt text, height from each figure's aspect.
COLUMN = preset_settings("acl-column")
#: Every visible, non-empty text of the page's SVG with its box as the browser lays it out.
_TEXT_BOXES_JS = """() => {
  const out = [];
  for (const t of document.querySelectorAll('svg text')) {
    const s = t.textContent.trim();
    if (!s) continue;
    let el = t, hidden = false;
    while (el && el.nodeType === 1) {
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || cs.display === 'none' || cs.opacity === '0') {
        hidden = true; break;
      }
      el = el.parentNode;
    }
    const r = t.getBoundingClientRect();
    if (hidden || r.width < 0.5) continue;
    out.push({s, cls: t.getAttribute('class') || t.parentNode.getAttribute('class') || '',
              x: r.left, y: r.top, w: r.width, h: r.height});
  }
  const svg = document.querySelector('svg');
  return {boxes: out, w: svg.width.baseVal.value, h: svg.height.baseVal.value};
}"""
#: Selections tried in turn; the first that gives a figure with data is rendered.
SELECTIONS = (
    Selection(),
    Selection(dataset="controlled-200"),
    Selection(runs=("probes",)),
    Selection(runs=("cuer",)),
)


def _can_render() -> str | None:
    """None when kaleido renders, else why not."""
    try:
        figure_bytes(go.Figure(go.Bar(x=[1], y=[1])), "svg", PROBE)
    except (RuntimeError, OSError) as exc:
        return f"kaleido/Chromium cannot render SVG here: {exc}"
    return None


def _classes(el: ET.Element) -> list[str]:
    return (el.get("class") or "").split()


def _titles(root: ET.Element, axis: str) -> list[str]:
    """Texts of the axis-title groups (``g-xtitle``, ``g-x2title``, ...) of one direction."""
    pattern = re.compile(rf"g-{axis}\d*title")
    return [
        "".join(t.itertext()).strip()
        for g in root.iter(_SVG + "g")
        if any(pattern.fullmatch(c) for c in _classes(g))
        for t in g.iter(_SVG + "text")
    ]


def _translate(el: ET.Element) -> tuple[float, float]:
    m = re.search(r"translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)", el.get("transform") or "")
    return (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)


def _plot_box(root: ET.Element) -> tuple[float, float, float, float] | None:
    """``(left, top, right, bottom)`` of every subplot's plot area together (None: none).

    Each subplot draws into a ``g`` translated to its corner and clipped by a
    ``clipPath`` whose rect has the plot area's size.
    """
    clips = {c.get("id"): next(c.iter(_SVG + "rect"), None) for c in root.iter(_SVG + "clipPath")}
    boxes = []
    for g in root.iter(_SVG + "g"):
        m = re.search(r"url\(#([^)]+)\)", g.get("clip-path") or "")
        rect = clips.get(m.group(1)) if m and m.group(1).endswith("plot") else None
        if rect is None:
            continue
        x, y = _translate(g)
        boxes.append((x, y, x + float(rect.get("width", 0)), y + float(rect.get("height", 0))))
    if not boxes:
        return None
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _legend_beside_width(root: ET.Element) -> float:
    """Width of a legend drawn left or right of the plot, level with it (0: below/inside/none)."""
    box = _plot_box(root)
    for g in root.iter(_SVG + "g"):
        if _classes(g) != ["legend"]:
            continue
        x, y = _translate(g)
        bg = [r for r in g.iter(_SVG + "rect") if "bg" in _classes(r)]
        width = max((float(r.get("width") or 0) for r in bg), default=0.0)
        height = max((float(r.get("height") or 0) for r in bg), default=0.0)
        level = box is not None and y < box[3] - 1 and y + height > box[1] + 1
        if level and (x >= box[2] - 1 or x + width <= box[0] + 1):
            return width
    return 0.0


def _cartesian(fig: go.Figure) -> bool:
    """Whether the figure draws on visible x/y axes (not a blank 'nothing to show')."""
    return bool(fig.data) and fig.layout.xaxis.visible is not False


# Every figure at the ACL column width (and at every other preset) is rendered and checked by
# tests/test_figure_presets.py, with this module's checks: text inside the canvas and not over
# other text (_check_text_on_page_without_overlaps' rules), both axis titles present and a
# legend beside the plot at most 35 % of the width (_check_titles_and_legend).


def _check_titles_and_legend(svg: bytes, name: str) -> None:
    root = ET.fromstring(svg)
    assert [t for t in _titles(root, "x") if t], f"{name}: no x-axis title in the SVG"
    assert [t for t in _titles(root, "y") if t], f"{name}: no y-axis title in the SVG"
    beside = _legend_beside_width(root)
    width = float(root.get("width"))
    assert beside <= 0.35 * width, f"{name}: legend beside the plot is {beside:.0f} px"


def _overlap(a: dict, b: dict) -> tuple[float, float]:
    dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return dx, dy


def _check_text_on_page_without_overlaps(browser, svg: bytes, name: str) -> None:
    page = browser.new_page()
    try:
        page.set_content(f'<html><body style="margin:0">{svg.decode()}</body></html>')
        got = page.evaluate(_TEXT_BOXES_JS)
    finally:
        page.close()
    boxes, w, h = got["boxes"], got["w"], got["h"]
    assert w == pytest.approx(290.88, abs=0.01), f"{name}: {w} px wide"
    assert len(boxes) >= 4, f"{name}: only {len(boxes)} texts measured"
    outside = [
        f"{b['s'][:40]!r} at ({b['x']:.0f}, {b['y']:.0f}) {b['w']:.0f}x{b['h']:.0f}"
        for b in boxes
        if b["x"] < -0.5 or b["y"] < -0.5 or b["x"] + b["w"] > w + 0.5 or b["y"] + b["h"] > h + 0.5
    ]
    assert not outside, f"{name}: text outside the {w:.0f}x{h:.0f} canvas: {outside}"
    clashes = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            dx, dy = _overlap(a, b)
            if dx > 1 and dy > 1:
                clashes.append(f"{a['s'][:30]!r} [{a['cls']}] x {b['s'][:30]!r} [{b['cls']}]")
    assert not clashes, f"{name}: overlapping text: {clashes}"


def test_overlap_check_catches_text_over_text(browser):
    """The measurement itself: two labels drawn on one spot are found, apart they are not."""
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="markers"))
    fig.add_annotation(x=0.5, y=0.5, text="first label", showarrow=False)
    fig.add_annotation(x=0.5, y=0.5, text="second label", showarrow=False)
    page = browser.new_page()
    try:
        page.set_content(f"<html><body>{figure_bytes(fig, 'svg', PROBE).decode()}</body></html>")
        boxes = {b["s"]: b for b in page.evaluate(_TEXT_BOXES_JS)["boxes"]}
    finally:
        page.close()
    assert min(_overlap(boxes["first label"], boxes["second label"])) > 1
