"""Every registered figure, rendered as SVG at ACL column width, is fit for a paper (issue 19).

On the demo store (the embedded reader on controlled-200) plus a few DOLCE probes and CUE-R
interventions of the same reader, each registered figure with data is exported as SVG at
291 x 200 px, font 9 (the 3.03 in ACL column at 96 px/in) and the SVG is parsed: every
cartesian direction has a non-empty axis title (facets: at least one per direction), a legend
beside the plot takes at most 35 % of the width. Skipped when kaleido has no Chromium to
render with. (The 30 s export bound is measured by ``bench/bench_export.py``.)
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import plotly.graph_objects as go
import pytest

from core.backends import make_backend
from core.catalog import figure_names, get_figure
from core.export import ExportSettings, figure_bytes
from core.figures import Selection
from core.runs import build_demo, run_interventions, run_probes
from core.store import Store

pytestmark = pytest.mark.slow

_SVG = "{http://www.w3.org/2000/svg}"
#: ACL column width at 96 px/in, a short aspect, 9 pt text.
COLUMN = ExportSettings(width=291, height=200, font_size=9)
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
        figure_bytes(go.Figure(go.Bar(x=[1], y=[1])), "svg", COLUMN)
    except (RuntimeError, OSError) as exc:
        return f"kaleido/Chromium cannot render SVG here: {exc}"
    return None


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[Store]:
    """The demo store with DOLCE probes (4 instances) and CUE-R interventions (hard)."""
    why = _can_render()
    if why:
        pytest.skip(why)
    store = Store(tmp_path_factory.mktemp("render") / "demo.duckdb")
    build_demo(store)
    reader = make_backend("embedded")
    run_probes(store, "controlled-200", reader, name="probes", limit=4)
    run_interventions(store, "controlled-200", reader, name="cuer", hardness=("hard",))
    yield store


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
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))  # fmt: skip


def _legend_beside_width(root: ET.Element) -> float:
    """Width of a legend drawn to the left or right of the plot (0 when below/inside/none)."""
    box = _plot_box(root)
    for g in root.iter(_SVG + "g"):
        if _classes(g) != ["legend"]:
            continue
        x, _ = _translate(g)
        width = max((float(r.get("width") or 0) for r in g.iter(_SVG + "rect")
                     if "bg" in _classes(r)), default=0.0)  # fmt: skip
        if box is not None and (x >= box[2] - 1 or x + width <= box[0] + 1):
            return width
    return 0.0


def _cartesian(fig: go.Figure) -> bool:
    """Whether the figure draws on visible x/y axes (not a blank 'nothing to show')."""
    return bool(fig.data) and fig.layout.xaxis.visible is not False


@pytest.mark.parametrize("name", figure_names())
def test_column_svg_has_axis_titles_and_a_narrow_legend(store, name):
    spec = get_figure(name)
    fig, errors = None, []
    for selection in SELECTIONS:
        try:
            fig, _ = spec.build(store, selection)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        if _cartesian(fig):
            break
        fig = None
    assert fig is not None, f"{name}: no data on the demo store: {errors}"
    svg = figure_bytes(fig, "svg", COLUMN)
    root = ET.fromstring(svg)
    assert [t for t in _titles(root, "x") if t], f"{name}: no x-axis title in the SVG"
    assert [t for t in _titles(root, "y") if t], f"{name}: no y-axis title in the SVG"
    beside = _legend_beside_width(root)
    assert beside <= 0.35 * COLUMN.width, f"{name}: legend beside the plot is {beside:.0f} px"
