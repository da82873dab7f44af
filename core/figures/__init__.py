"""Pure plot functions: the frames a view returns (plus declared options) -> figures and tables.

A figure function takes the data a view of :mod:`core.views` returns and the figure's
options as keywords, and returns ``(plotly Figure, DataFrame)``: the figure as the page shows
it and the data behind it (the CSV a user downloads); a table function returns a DataFrame.
One module per method area (``oncu``, ``retrieval``, ``cuer``, ``dolce``, ``fanin``); each
declares its options once as :class:`core.params.Param` beside its figures. Nothing under
``core/figures`` reads the store, calls a view or imports streamlit: :mod:`core.catalog`
pairs each registered name with its view and plot.
"""

from __future__ import annotations

import plotly.graph_objects as go

from core.oncu import SCORE_FIELDS
from core.params import Param
from core.selection import Selection

__all__ = ["LEGEND_BELOW", "N_RESAMPLES", "SCORE_FIELD", "Selection", "empty_figure", "titled"]

#: The answer score a figure uses (read from :attr:`Selection.score_field`).
SCORE_FIELD = Param(
    "score_field", str, "f1_relaxed", "answer score the views use", choices=SCORE_FIELDS,
    section="SPEC §6.2",
)  # fmt: skip
#: Bootstrap resamples of every CI (seed 42).
N_RESAMPLES = Param("n_resamples", int, 5000, "bootstrap resamples", minimum=1,
                    section="SPEC §6.6")  # fmt: skip


def empty_figure(message: str) -> go.Figure:
    """A blank figure that says ``message`` (a view with nothing to draw)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


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
