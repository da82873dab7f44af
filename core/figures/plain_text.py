"""Data strings in figures drawn as text, not as Plotly's pseudo-HTML (issue 18 item 6).

Plotly draws ``<a href=...>``, ``<span style=...>``, ``<b>``, ``<i>``, ``<sup>``, ``<sub>`` and
``<br>`` inside any label, tick, hover text or legend entry. A run, model, dataset or metadata
value from an imported file that contains such a tag would become a link (to anywhere) or
restyled text. :func:`plain_figure` puts a WORD JOINER (U+2060, invisible) after every ``<`` of
the values a figure carries from data (category coordinates, text, hover text, custom data,
trace names, labels): Plotly then sees no tag and draws the characters as they are. Titles and
annotations mix the figure's own markup (``<br>``) with data, so only the tags that link or
restyle (``<a``, ``<span``) are broken there. :func:`unplain` undoes it for a clicked point's
values (the drill-down filters by the stored value).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import plotly.graph_objects as go

__all__ = ["JOINER", "plain_figure", "plain_label", "unplain"]

JOINER = "\u2060"
#: Trace properties that carry values from data.
_DATA_PROPS = ("x", "y", "text", "hovertext", "customdata", "labels", "name", "legendgrouptitle")
#: Tags broken in titles and annotations (the figure's own markup there is ``<br>`` and bold).
_LINKS = re.compile(r"<(?=\s*/?\s*(a|span)\b)", re.IGNORECASE)


#: Every ``<`` but the one of a line break (``<br>``, ``<br/>``, ``<br />``).
_TAG = re.compile(r"<(?!br\s*/?>)", re.IGNORECASE)


def plain_label(text: str) -> str:
    """``text`` with a WORD JOINER after each ``<``: drawn as typed, never as a tag.

    A line break (``<br>``) is left to break the line: the figures' own labels and hover
    texts use it (issue 36 item 5: "No<br>evidence" was drawn literally), and a line break
    from data neither links nor restyles anything.
    """
    return _TAG.sub("<" + JOINER, text) if "<" in text else text


def unplain(value: Any) -> Any:
    """A value of a clicked point as stored (:func:`plain_label` undone); others unchanged."""
    return value.replace("<" + JOINER, "<") if isinstance(value, str) else value


def _plain_values(value: Any) -> Any:
    if isinstance(value, str):
        return plain_label(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OUS":
            return np.vectorize(_plain_values, otypes=[object])(value) if value.size else value
        return value
    if isinstance(value, list | tuple):
        return type(value)(_plain_values(v) for v in value)
    return value


def _plain_markup(text: Any) -> Any:
    return _LINKS.sub("<" + JOINER, text) if isinstance(text, str) and "<" in text else text


def _has_tag(value: Any) -> bool:
    """Whether a property value holds a string with ``<`` (cheap: no figure copy)."""
    if isinstance(value, str):
        return "<" in value
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "OUS" and any(_has_tag(v) for v in value.ravel())
    if isinstance(value, list | tuple):
        return any(_has_tag(v) for v in value)
    return False


def _needs_plain(fig: go.Figure) -> bool:
    for trace in fig.data:
        for prop in _DATA_PROPS:
            if prop in trace and prop != "legendgrouptitle" and _has_tag(trace[prop]):
                return True
            if prop == "legendgrouptitle" and prop in trace and trace[prop] is not None:
                if _has_tag(trace[prop].text):
                    return True
    layout = json.dumps(fig.layout.to_plotly_json(), default=str)
    return bool(_LINKS.search(layout)) or any(
        fig.layout[k].ticktext is not None and _has_tag(fig.layout[k].ticktext)
        for k in fig.layout
        if k.startswith(("xaxis", "yaxis"))
    )


def plain_figure(fig: go.Figure) -> go.Figure:
    """``fig`` with its data strings drawn as text (see the module docstring).

    A copy when anything changes; ``fig`` itself when no data string holds a ``<`` (the
    usual case: no copy, a few milliseconds).
    """
    if not _needs_plain(fig):
        return fig
    out = go.Figure(fig)
    for trace in out.data:
        for prop in _DATA_PROPS:
            if prop not in trace:
                continue
            value = trace[prop]
            if prop == "legendgrouptitle":
                if value is not None and value.text:
                    value.text = plain_label(value.text)
                continue
            new = _plain_values(value)
            if new is not value:
                trace[prop] = new
    layout = out.layout
    if layout.title and layout.title.text:
        layout.title.text = _plain_markup(layout.title.text)
    for ann in layout.annotations or ():
        ann.text = _plain_markup(ann.text)
    for axis in [k for k in layout if k.startswith(("xaxis", "yaxis"))]:
        ax = layout[axis]
        if ax.ticktext is not None:
            ax.ticktext = _plain_values(ax.ticktext)
        if ax.title and ax.title.text:
            ax.title.text = _plain_markup(ax.title.text)
    if layout.legend and layout.legend.title and layout.legend.title.text:
        layout.legend.title.text = _plain_markup(layout.legend.title.text)
    return out
