"""Every figure at every venue preset and the default size: clean text (issue 39 items 1-2).

The store is fuller than the demo, as a study's is: two four-condition runs of controlled-200
(top-3 and top-5 retrieval: twice the legend entries), the fan-in grid answered by the same
reader, DOLCE probes, CUE-R interventions, a small attribution run and, where the shared
fixtures are present, the released HotpotQA run. Each registered figure with data is exported
as SVG at each preset (``acl-column``, ``acl-page``, ``neurips``, ``ieee-column``,
``ieee-page``) and at the default pixel size, and Chromium measures every visible text: none
outside the canvas, no two overlapping (tspans of one element are one text), every legend
entry inside its legend's drawn box (not scrolled or clipped away), no literal markup, no
SI-prefixed tick labels for values below 1 ("300n"). The first failure names figure, size
and the two texts. One Chromium renders them all (``start_renderer``): ~3 min for the 126.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import plotly.graph_objects as go
import pytest
import test_figure_render as render
from conftest import study_into

from core.export.fit import wrap_text
from core.export.render import (
    PRESETS,
    PX_PER_IN,
    ExportSettings,
    figure_bytes,
    layout_line,
    preset_settings,
    start_renderer,
)
from core.figures import Selection
from core.store import Store
from core.views.catalog import figure_names, get_figure

RELEASE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "oncu_release"
SIZES = (*PRESETS, "default")
SELECTIONS = (
    Selection(),
    Selection(dataset="controlled-200"),
    Selection(dataset="fanin"),
    Selection(runs=("probes",)),
    Selection(runs=("cuer",)),
    Selection(runs=("attribution",)),
)
#: The box of each legend as drawn (its background): entries outside it are clipped away.
_LEGEND_BOXES_JS = """() => Array.from(document.querySelectorAll('svg g.legend > rect.bg'))
  .map(r => { const b = r.getBoundingClientRect();
              return {x: b.left, y: b.top, w: b.width, h: b.height}; })"""
#: A tick label with an SI prefix for a small value: "300n", "2.5µ", "−10m".
_SI_TICK = re.compile(r"^[−+-]?\d+(?:\.\d+)?\s?[munpfµ]$")


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    why = render._can_render()
    if why:
        pytest.skip(why)
    start_renderer()  # one Chromium for the ~500 renderings (a browser per call: 10x slower)
    store = study_into(Store(tmp_path_factory.mktemp("presets") / "study.duckdb"), full=True)
    yield store


@pytest.fixture(scope="module")
def svg_page(browser):
    """One tab for every measurement: ``set_content`` replaces the document (a new tab per
    figure cost 0.3 s, ten times the measurement)."""
    page = browser.new_page()
    yield page
    page.close()


_FIGURES: dict[str, go.Figure | None] = {}


def _figure(store: Store, name: str):
    """The figure ``name`` on the study store (built once for its six sizes)."""
    if name not in _FIGURES:
        _FIGURES[name] = _first_cartesian(store, name)
    if _FIGURES[name] is None:
        pytest.skip(f"{name}: no data on the study store")
    return _FIGURES[name]


def _first_cartesian(store: Store, name: str) -> go.Figure | None:
    spec = get_figure(name)
    for selection in SELECTIONS:
        try:
            fig, _ = spec.build(store, selection)
        except ValueError:
            continue
        if render._cartesian(fig):
            return fig
    return None


def _settings(name: str, size: str) -> ExportSettings:
    return ExportSettings() if size == "default" else preset_settings(size).for_figure(name)


def text_problems(
    boxes: list[dict], width: float, height: float, legends: list[dict] | None = None
) -> list[str]:
    """What a reader would see wrong: text off the page, over other text, markup, SI ticks,
    legend entries clipped out of their legend's box (``legends``: the boxes as drawn)."""
    problems = [
        f"outside the {width:.0f}x{height:.0f} canvas: {b['s'][:40]!r}"
        for b in boxes
        if b["x"] < -0.5
        or b["y"] < -0.5
        or b["x"] + b["w"] > width + 0.5
        or b["y"] + b["h"] > height + 0.5
    ]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            dx, dy = render._overlap(a, b)
            if dx > 1 and dy > 1:
                problems.append(
                    f"overlap: {a['s'][:30]!r} [{a['cls']}] x {b['s'][:30]!r} [{b['cls']}]"
                )
    problems += [
        f"literal markup: {b['s'][:40]!r}"
        for b in boxes
        if re.search(r"<\s*/?\s*(br|b|i|sup|sub|span)\b", b["s"], re.I)
    ]
    problems += [
        f"SI-prefixed tick: {b['s']!r}"
        for b in boxes
        if "tick" in b["cls"] and _SI_TICK.match(b["s"])
    ]
    if legends is not None:
        problems += [
            f"legend entry clipped: {b['s'][:40]!r}"
            for b in boxes
            if b["cls"].startswith("legend") and not any(_inside(b, g) for g in legends)
        ]
    return problems


def _inside(box: dict, frame: dict) -> bool:
    return (
        box["x"] >= frame["x"] - 1
        and box["y"] >= frame["y"] - 1
        and box["x"] + box["w"] <= frame["x"] + frame["w"] + 1
        and box["y"] + box["h"] <= frame["y"] + frame["h"] + 1
    )


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", figure_names())
def test_figure_is_clean_at_every_size(study, svg_page, name, size):
    settings = _settings(name, size)
    svg = figure_bytes(_figure(study, name), "svg", settings)
    svg_page.set_content(f'<html><body style="margin:0">{svg.decode()}</body></html>')
    got = svg_page.evaluate(render._TEXT_BOXES_JS)
    legends = svg_page.evaluate(_LEGEND_BOXES_JS)
    expected_w = settings.width if size == "default" else PRESETS[size].width_in * PX_PER_IN
    assert got["w"] == pytest.approx(expected_w, abs=0.01), f"{name} at {size}: {got['w']} px"
    assert len(got["boxes"]) >= 4, f"{name} at {size}: only {len(got['boxes'])} texts"
    problems = text_problems(got["boxes"], got["w"], got["h"], legends)
    assert not problems, f"{name} at {size}: {problems[:5]}"
    if size == "acl-column":  # a paper's column: both axis titles, a legend beside it narrow
        render._check_titles_and_legend(svg, name)


def test_the_checks_catch_each_problem():
    """The checker itself, on constructed boxes: every kind of problem is found."""
    ok = {"s": "a", "cls": "xtick", "x": 10, "y": 10, "w": 20, "h": 10}
    assert text_problems([ok], 100, 100) == []
    over = dict(ok, s="b", x=15)
    assert any(p.startswith("overlap") for p in text_problems([ok, over], 100, 100))
    off = dict(ok, x=95)
    assert any(p.startswith("outside") for p in text_problems([off], 100, 100))
    assert any(
        p.startswith("literal") for p in text_problems([dict(ok, s="No<br>evidence")], 100, 100)
    )
    assert any(p.startswith("SI") for p in text_problems([dict(ok, s="300n")], 100, 100))
    assert text_problems([dict(ok, s="0.0000003")], 100, 100) == []
    entry = dict(ok, cls="legendtext", y=60)
    frame = {"x": 0, "y": 0, "w": 100, "h": 50}  # a legend cut to 50 px: the entry at 60 is lost
    assert any(p.startswith("legend entry") for p in text_problems([entry], 100, 100, [frame]))
    assert text_problems([dict(entry, y=30)], 100, 100, [frame]) == []


def test_a_long_name_breaks_after_its_joints_never_inside_a_number():
    assert wrap_text("hotpotqa_qwen25_14b_200", 60, 10.67).split("<br>") == [
        "hotpotqa_",
        "qwen25_",
        "14b_200",
    ]
    assert wrap_text("fanin-embedded", 40, 10.67) == "fanin-<br>embedded"
    assert wrap_text("-0.5 1e-7", 5, 10) == "-0.5<br>1e-7"


def test_the_layout_line_names_the_size_and_a_wider_preset():
    line = layout_line("calibration", preset_settings("acl-column"), ["'a' overlaps 'b'"] * 2)
    assert line == "calibration at acl-column: 'a' overlaps 'b'; try --preset acl-page"
    assert layout_line("x", ExportSettings(), ["grew"]) == "x at 700x450 px: grew"


@pytest.mark.slow
def test_a_legend_that_leaves_no_plot_grows_the_figure_and_says_so():
    """At a fixed pixel size the plot keeps 40 % of its height; the figure grows instead."""
    why = render._can_render()
    if why:
        pytest.skip(why)
    start_renderer()
    fig = go.Figure(
        [go.Scatter(x=[0, 1], y=[i, i + 1], name=f"a long series name {i:02d}") for i in range(24)]
    )
    fig.update_layout(legend={"orientation": "h", "y": -0.2})
    said: list[str] = []
    svg = figure_bytes(fig, "svg", ExportSettings(width=300, height=200), said=said)
    height = float(ET.fromstring(svg).get("height"))
    assert height > 200
    assert any(s.startswith("the legend and notes below the plot leave") for s in said), said
    assert f"the figure is 300x{height:.0f} px" in " ".join(said)
