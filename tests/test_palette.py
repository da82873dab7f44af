"""One colour-blind-safe palette across every figure (issue 19 item 2).

Every registered figure is built on the demo store (the embedded reader on controlled-200,
plus DOLCE probes and CUE-R interventions of the same reader, as in
``tests/test_figure_render.py``); every colour a trace draws with must be an Okabe–Ito colour
(or an ``rgba`` transparency of one, or white for open markers), and a trace named after a
condition has that condition's fixed colour in every figure it appears in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import plotly.graph_objects as go
import pytest
from conftest import study_into

from core.figures import (
    CONDITION_COLORS,
    OKABE_ITO,
    REFERENCE_COLOR,
    RETRIEVER_COLORS,
    YELLOW,
    Selection,
    color_for,
)
from core.figures.oncu import CONDITION_LABELS
from core.store import Store
from core.views.catalog import figure_names, get_figure

#: Selections tried in turn; every one that builds is checked.
SELECTIONS = (
    Selection(),
    Selection(dataset="controlled-200"),
    Selection(runs=("probes",)),
    Selection(runs=("cuer",)),
)
_RGB = {tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in OKABE_ITO}
_RGBA = re.compile(r"rgba?\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*[\d.]+\s*)?\)")
_WHITE = {"white", "#ffffff", "#fff"}


def in_palette(color: str) -> bool:
    """Whether ``color`` is an Okabe–Ito colour, an rgba of one, or white (open markers)."""
    c = color.strip().lower()
    if c in _WHITE or c.upper() in OKABE_ITO:
        return True
    m = _RGBA.fullmatch(c)
    return bool(m) and tuple(int(g) for g in m.groups()) in _RGB


def trace_colors(trace: Any) -> list[str]:
    """The explicit colours a trace draws with (marker, marker outline, line, fill)."""
    found = []
    for path in (
        ("marker", "color"),
        ("marker", "line", "color"),
        ("line", "color"),
        ("fillcolor",),
    ):
        obj = trace
        for part in path:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        values = obj if isinstance(obj, (list, tuple)) else [obj]
        found += [v for v in values if isinstance(v, str)]
    return found


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> Iterator[dict[str, list[go.Figure]]]:
    """Every registered figure built on the demo store, under every selection that builds."""
    store = study_into(Store(tmp_path_factory.mktemp("palette") / "demo.duckdb"))
    out: dict[str, list[go.Figure]] = {}
    for name in figure_names():
        built = []
        for selection in SELECTIONS:
            try:
                fig, _ = get_figure(name).build(store, selection)
            except ValueError:
                continue
            if fig.data:
                built.append(fig)
        out[name] = built
    yield out


@pytest.mark.slow
def test_every_trace_colour_is_from_the_palette(figures):
    assert any(figures.values()), "no figure has data on the demo store"
    bad = []
    for name, figs in figures.items():
        for fig in figs:
            for trace in fig.data:
                if trace.type == "heatmap":  # continuous colour scales, not category colours
                    continue
                colors = trace_colors(trace)
                if not colors:
                    bad.append(f"{name}: trace {trace.name!r} has no explicit colour")
                bad += [f"{name}: trace {trace.name!r}: {c}" for c in colors if not in_palette(c)]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_a_condition_has_one_colour_in_every_figure(figures):
    names = {**{c: c for c in CONDITION_COLORS}, **{v: k for k, v in CONDITION_LABELS.items()}}
    seen = 0
    for name, figs in figures.items():
        for fig in figs:
            for trace in fig.data:
                cond = names.get(str(trace.name))
                if cond is None or name in ("retrieval_curves", "crux_coverage"):
                    continue  # retriever names ("oracle") follow RETRIEVER_COLORS
                seen += 1
                colors = set(trace_colors(trace)) - _WHITE
                assert colors == {CONDITION_COLORS[cond]}, (name, trace.name, colors)
    assert seen, "no trace named after a condition on the demo store"


@pytest.mark.slow
@pytest.mark.parametrize(
    "pair", [("cuer_profile", "cuer_divergence"), ("retrieval_curves", "crux_coverage")]
)
def test_a_name_has_one_colour_across_figures(figures, pair):
    by_name: dict[str, set[str]] = {}
    for name in pair:
        assert figures[name], f"{name}: no data on the demo store"
        for trace in figures[name][0].data:
            by_name.setdefault(str(trace.name), set()).update(set(trace_colors(trace)) - _WHITE)
    shared = {n: c for n, c in by_name.items() if n != "None"}
    assert len(shared) >= 2, shared
    assert all(len(c) == 1 for c in shared.values()), shared


def test_conditions_and_retrievers_have_fixed_distinct_colours():
    assert len(set(CONDITION_COLORS.values())) == 4
    assert color_for("retrieved", "condition", ["a", "b"]) == "#E69F00"
    assert color_for("oracle", "retriever") == CONDITION_COLORS["oracle"]
    assert color_for("lexical", "retriever") == RETRIEVER_COLORS["lexical"]
    assert in_palette(REFERENCE_COLOR)
    assert not in_palette("#1f77b4")  # plotly's default blue is not an Okabe–Ito colour


def test_color_for_is_stable_and_distinct_for_up_to_eight_names():
    names = [
        "llama-3-8b",
        "qwen2-7b",
        "gpt-4o",
        "mistral-7b",
        "phi-3",
        "gemma-2",
        "olmo",
        "embedded",
    ]
    for n in range(1, 9):
        subset = names[:n]
        colors = [color_for(x, "model", subset) for x in subset]
        assert len(set(colors)) == n, subset
        assert all(c in OKABE_ITO for c in colors)
        # the same set in another order (another figure) gives the same colours
        assert [color_for(x, "model", reversed(subset)) for x in subset] == colors
        if n < 8:
            assert YELLOW not in colors  # yellow only once the seven stronger colours are used
    # a name whose hash colour is uncontested keeps it whatever else is in the figure
    alone = color_for("gpt-4o", "model")
    assert color_for("gpt-4o", "run", ["gpt-4o"]) == alone
    # sha1, not hash(): the same in every process (hand-checked value)
    assert color_for("a") == "#D55E00"


def test_nine_to_sixteen_series_of_one_figure_keep_distinct_colours():
    """Issue 36 item 5: the Interventions chart's nine comparisons (``replace:easy`` and
    ``zero_retrieval`` shared green) get nine colours, the same in every figure of that set."""
    from core.figures import MORE_COLORS, _assign

    labels = [
        "original",
        "remove",
        "replace:easy",
        "replace:medium",
        "replace:hard",
        "duplicate:end",
        "zero_retrieval",
        "two_support",
        "duplicate:front",
    ]
    got = _assign(labels)
    assert len(set(got.values())) == 9
    assert got["zero_retrieval"] != got["replace:easy"]
    sixteen = _assign([f"s{i}" for i in range(16)])
    assert len(set(sixteen.values())) == 16 and set(MORE_COLORS) <= set(sixteen.values())
    assert _assign(reversed(labels)) == got
