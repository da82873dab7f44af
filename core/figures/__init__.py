"""Pure plot functions: the frames a view returns (plus declared options) -> figures and tables.

A figure function takes the data a view of :mod:`core.views` returns and the figure's
options as keywords, and returns ``(plotly Figure, DataFrame)``: the figure as the page shows
it and the data behind it (the CSV a user downloads); a table function returns a DataFrame.
One module per method area (``oncu``, ``retrieval``, ``cuer``, ``dolce``, ``fanin``); each
declares its options once as :class:`core.params.Param` beside its figures. Nothing under
``core/figures`` reads the store, calls a view or imports streamlit: :mod:`core.views.catalog`
pairs each registered name with its view and plot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import plotly.graph_objects as go

from core.oncu.metrics import SCORE_FIELDS
from core.params import Param
from core.selection import Selection

__all__ = [
    "BLACK",
    "BLUE",
    "CONDITION_COLORS",
    "GREEN",
    "LEGEND_BELOW",
    "N_RESAMPLES",
    "OKABE_ITO",
    "ORANGE",
    "PURPLE",
    "REFERENCE_COLOR",
    "RETRIEVER_COLORS",
    "SCORE_FIELD",
    "SKY_BLUE",
    "Selection",
    "VERMILLION",
    "YELLOW",
    "color_for",
    "empty_figure",
    "steady_axes",
    "titled",
]

#: The answer score a figure uses (read from :attr:`Selection.score_field`).
SCORE_FIELD = Param(
    "score_field",
    str,
    "f1_relaxed",
    "answer score the views use",
    choices=SCORE_FIELDS,
    section="SPEC §6.2",
)
#: Bootstrap resamples of every CI (seed 42).
N_RESAMPLES = Param("n_resamples", int, 5000, "bootstrap resamples", minimum=1, section="SPEC §6.6")


def empty_figure(message: str) -> go.Figure:
    """A blank figure that says ``message`` (a view with nothing to draw)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


#: The smallest span a value axis shows (:func:`steady_axes`).
MIN_SPAN = 0.02


def steady_axes(fig: go.Figure, min_span: float = MIN_SPAN) -> go.Figure:
    """Value axes whose data spans less than ``min_span`` show ``min_span`` around it.

    Plotly zooms an axis onto its data: a metric that is 0 up to float noise (a divergence of
    3e-7) gets ticks "100n", "200n", "300n" (SI prefixes), which read as real differences
    and cannot go into a paper. Such an axis shows ``min_span`` centred on its data instead
    (on the next multiple of ``min_span``), and its ticks are plain decimals. Axes with a
    range of their own, and non-numeric data, are left alone. Returns ``fig``.
    """
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    for tr in fig.data:
        for letter in ("x", "y"):
            values = _numbers(getattr(tr, letter, None))
            if not values:
                continue
            err = getattr(tr, f"error_{letter}", None)
            plus = _numbers(getattr(err, "array", None)) if err is not None else []
            minus = _numbers(getattr(err, "arrayminus", None)) if err is not None else []
            if plus and len(plus) == len(values):
                values = values + [v + e for v, e in zip(values, plus, strict=True)]
            if minus and len(minus) == len(values[: len(minus)]):
                values = values + [v - e for v, e in zip(values, minus, strict=False)]
            ref = getattr(tr, f"{letter}axis", None) or letter
            axis = f"{letter}axis{ref[1:]}"
            lows[axis] = min(lows.get(axis, values[0]), *values)
            highs[axis] = max(highs.get(axis, values[0]), *values)
    for axis, low in lows.items():
        high = highs[axis]
        ax = fig.layout[axis] if axis in fig.layout else None
        if ax is None or ax.range is not None or ax.type not in (None, "-", "linear"):
            continue
        if high - low < min_span:
            mid = round((low + high) / 2 / min_span) * min_span
            # a quarter step beyond the end ticks: a tick label is not on the plot's edge,
            # where a facet's title sits
            half = 1.25 * min_span
            fig.layout[axis].update(range=[mid - half, mid + half], exponentformat="none")
    return fig


def _numbers(values: object) -> list[float]:
    """The finite numbers of a trace's value array (empty for text or missing data)."""
    if values is None or isinstance(values, str):
        return []
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            if v is None:
                continue
            try:
                v = float(v)
            except (TypeError, ValueError):
                return []  # categories: not a value axis
        if v == v and abs(v) != float("inf"):
            out.append(float(v))
    return out


#: A legend in rows below the plot, so the plot keeps the full width of a column.
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "xanchor": "left"}


def titled(
    fig: go.Figure, x: str | None = None, y: str | None = None, *, legend_below: bool = True
) -> go.Figure:
    """``fig`` with axis titles and (by default) its legend below the plot; returns ``fig``.

    Faceted figures share one title per direction: ``x`` goes on the first x axis and ``y`` on
    the first y axis (the bottom-left panel of a one-row grid); titles already set stay.
    """
    if x is not None and not fig.layout.xaxis.title.text:
        fig.update_layout(xaxis_title_text=x)
    if y is not None and not fig.layout.yaxis.title.text:
        fig.update_layout(yaxis_title_text=y)
    if legend_below:
        fig.update_layout(legend=LEGEND_BELOW)
    return fig


# ----------------------------------------------------------------------------- palette
#: The colour-blind-safe palette of every figure: Okabe & Ito (2008), "Color Universal Design
#: (CUD): how to make figures and presentations that are friendly to colorblind people"
#: (https://jfly.uni-koeln.de/color/). Orange, sky blue, bluish green, yellow, blue,
#: vermillion, reddish purple, black.
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000")
ORANGE, SKY_BLUE, GREEN, YELLOW, BLUE, VERMILLION, PURPLE, BLACK = OKABE_ITO
#: Reference lines, bands and "nothing assigned" (a transparency of black: a neutral grey).
REFERENCE_COLOR = "rgba(0, 0, 0, 0.45)"
#: One fixed colour per evidence condition, the same in every figure.
CONDITION_COLORS = {
    "no_evidence": BLACK,
    "full_context": BLUE,
    "retrieved": ORANGE,
    "oracle": GREEN,
}
#: One fixed colour per retriever (the oracle retriever shares the oracle condition's colour).
RETRIEVER_COLORS = {
    "lexical": BLUE,
    "dense": PURPLE,
    "hybrid": ORANGE,
    "iterative": VERMILLION,
    "oracle": GREEN,
}
#: Names hash into these first; yellow (weak on white) is taken only when all seven are used.
_HASHED = tuple(c for c in OKABE_ITO if c != YELLOW)
#: Colours for the ninth to sixteenth name of one figure (Paul Tol's muted scheme, distinct
#: from Okabe–Ito): a figure's series never share a colour below seventeen names (issue 36
#: item 5: ``replace:easy`` and ``zero_retrieval`` were both green).
MORE_COLORS = (
    "#332288",
    "#117733",
    "#44AA99",
    "#88CCEE",
    "#DDCC77",
    "#AA4499",
    "#882255",
    "#999933",
)


def _slot(key: str) -> int:
    """A process-independent slot of ``key`` in :data:`_HASHED` (sha1, not ``hash()``)."""
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % len(_HASHED)


def _assign(names: Iterable[str]) -> dict[str, str]:
    """Colours of ``names``: each its hash slot, or the next free one when taken.

    Names are placed in sorted order, so the result depends only on the set of names.
    Up to eight names get eight different colours (yellow last); the next eight get
    :data:`MORE_COLORS`; beyond sixteen they repeat.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    extra = 0
    for name in sorted(set(names)):
        if len(taken) >= len(OKABE_ITO) + len(MORE_COLORS):
            taken, extra = set(), 0
        free = [c for c in _HASHED if c not in taken]
        if not free and YELLOW in taken:
            color = MORE_COLORS[extra % len(MORE_COLORS)]
            extra += 1
        elif not free:
            color = YELLOW
        else:
            start = _slot(name)
            color = next(
                _HASHED[(start + i) % len(_HASHED)]
                for i in range(len(_HASHED))
                if _HASHED[(start + i) % len(_HASHED)] not in taken
            )
        taken.add(color)
        out[name] = color
    return out


def color_for(key: object, kind: str = "run", names: Iterable[object] | None = None) -> str:
    """The palette colour of ``key``, a name of ``kind`` (condition, retriever, run, model...).

    Conditions and retrievers have fixed colours (:data:`CONDITION_COLORS`,
    :data:`RETRIEVER_COLORS`). Any other name hashes (sha1, so the same in every process) to
    one of the seven non-yellow Okabe–Ito colours. ``names`` are all the names of that kind in
    the figure: when two of them hash to the same colour, the later in sorted order takes the
    next free one, so a figure's names stay distinct (up to eight) and a name keeps its colour
    in every figure that shows the same set of names (and in any figure where its hash colour
    is not contested).
    """
    name = str(key)
    fixed = {"condition": CONDITION_COLORS, "retriever": RETRIEVER_COLORS}.get(kind, {})
    if name in fixed:
        return fixed[name]
    pool = {str(n) for n in names} if names is not None else set()
    pool.add(name)
    return _assign(pool)[name]
