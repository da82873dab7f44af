"""Data strings in figures are drawn as text, not as Plotly's pseudo-HTML (issue 18 item 6).

A run or metadata value such as ``<a href="http://tracker/x">click</a>`` must not become a
link (or ``<b>`` bold) in a chart: :func:`core.figures.plain_text.plain_figure` breaks every
``<`` of data values with an invisible WORD JOINER, leaves the figure's own ``<br>`` in titles,
and a clicked point's drill values come back exactly as stored.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

from core.figures.drill import point_values
from core.figures.plain_text import JOINER, plain_figure, plain_label, unplain

EVIL = '<a href="http://127.0.0.1:9/exfil.png?data=leak">click</a> <b>bold</b>'


def _figure() -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=[EVIL, "plain"],
            y=[0.5, 0.25],
            name=EVIL,
            text=[EVIL, "t"],
            hovertext=[EVIL, "h"],
            customdata=np.array([[EVIL, 3], ["plain", 4]], dtype=object),
        )
    )
    fig.update_layout(
        title=f"Accuracy<br>{EVIL}",
        annotations=[{"text": f"run={EVIL}", "x": 0, "y": 1, "showarrow": False}],
        xaxis={"title": {"text": f"<b>run</b> {EVIL}"}, "ticktext": [EVIL], "tickvals": [0]},
    )
    fig.layout.meta = {"drill": {"keys": ["run"], "frame": "predictions"}}
    return fig


def _json(fig: go.Figure) -> str:
    return json.dumps(fig.to_plotly_json(), cls=PlotlyJSONEncoder, ensure_ascii=False)


def test_no_data_tag_survives_and_own_markup_stays():
    fig = _figure()
    shown = plain_figure(fig)
    text = _json(shown)
    assert "<a " not in text and "<span" not in text  # no link anywhere
    assert "<b>bold" not in _json(go.Figure(data=shown.data))  # no data value restyled
    assert "<" + JOINER + "a href" in text  # the characters are all there, drawn as typed
    assert shown.layout.title.text.startswith("Accuracy<br>")  # the figure's own line break
    assert "<b>run</b>" in shown.layout.xaxis.title.text  # own bold kept, the link broken
    assert "<" + JOINER + "a href" in shown.layout.xaxis.title.text
    assert list(shown.data[0].x) == [plain_label(EVIL), "plain"]
    assert shown.data[0].y == (0.5, 0.25)  # numbers untouched
    assert "<a " in _json(fig)  # the original figure is not modified


def test_clicked_point_gives_the_stored_value():
    shown = plain_figure(_figure())
    custom = list(shown.data[0].customdata[0])
    assert custom[0] != EVIL  # what the browser holds carries the joiners
    values, n = point_values(shown, {"customdata": custom})  # the figure declares its drill
    assert values == {"run": EVIL} and n == 3
    assert unplain(plain_label(EVIL)) == EVIL and unplain(5) == 5
