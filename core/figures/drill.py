"""Drill-down declarations: which data columns identify a clicked point of a figure.

A figure that offers drill-down gives every clickable point a ``customdata`` row holding the
values of its key columns followed by ``n`` (the predictions behind the point), and declares
those keys once in the figure's ``layout.meta["drill"]`` (:func:`declare`)::

    {"keys": ["run", "condition", "failure_label"], "frame": "predictions",
     "fixed": {"variant": ""}}

``frame`` names the prediction frame the keys filter (``predictions``: the scored plain and
intervention rows; ``fanin``: the fan-in frame with fan-in from the gold passages; ``probes``:
DOLCE probe predictions); ``fixed`` adds constant filters. :func:`cell_from_point` turns a
clicked point (as Streamlit reports it) into the cell that
:func:`core.views.instances_behind` lists: ``{key: value, ..., FRAME_KEY: frame}``. Pure: no
store, no views, no streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.figures.plain_text import unplain

__all__ = [
    "FRAME_KEY",
    "LENGTH_CELL_KEY",
    "cell_from_point",
    "customdata",
    "declare",
    "drill_spec",
    "group_keys",
    "length_fixed",
    "point_values",
]

#: The cell entry naming the prediction frame (not a column: filtered out of the label).
FRAME_KEY = "_frame"
#: The cell entry saying how its ``context_length`` matches: ``bucket`` (the value is a length
#: bucket of :func:`core.oncu.metrics.length_bucket`, matching every exact length in it) or
#: ``exact``; the column ONCU group frames carry as ``length_cell``.
LENGTH_CELL_KEY = "length_cell"


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def customdata(frame: pd.DataFrame, keys: Sequence[str], n: Any, **values: Any) -> np.ndarray:
    """One customdata row per row of ``frame``: its key values, then ``n``.

    ``values`` overrides a key with a constant; ``n`` is a column name or a sequence of counts.
    """
    cols = []
    for key in keys:
        if key in values:
            cols.append([_plain(values[key])] * len(frame))
        else:
            cols.append([_plain(v) for v in frame[key]])
    counts = frame[n] if isinstance(n, str) else n
    cols.append([None if _plain(c) is None else int(_plain(c)) for c in counts])
    out = np.empty((len(frame), len(cols)), dtype=object)
    for j, col in enumerate(cols):
        out[:, j] = col
    return out


def declare(
    fig: go.Figure,
    keys: Sequence[str],
    *,
    frame: str = "predictions",
    fixed: Mapping[str, Any] | None = None,
) -> go.Figure:
    """Declare the figure's drill-down: customdata rows are ``[*keys, n]``."""
    meta = {"keys": list(keys), "frame": frame, "fixed": dict(fixed or {})}
    fig.update_layout(meta={"drill": meta})
    return fig


def group_keys(frame: pd.DataFrame, group_key: Sequence[str]) -> list[str]:
    """The drill keys of a point that is one ONCU group of one condition.

    ``run``, ``condition``, then every cell of ``group_key`` that is a column of ``frame``;
    the group key's length cell, whichever token names it (``context_length_exact``,
    ``length_bucket``), is the column ``context_length`` (marked by ``length_cell``).
    """
    keys = ["run", "condition", *[c for c in group_key if c in frame.columns and c != "run"]]
    lengthed = LENGTH_CELL_KEY in frame.columns and frame[LENGTH_CELL_KEY].notna().any()
    if lengthed and "context_length" in frame.columns and "context_length" not in keys:
        keys.append("context_length")
    return keys


def length_fixed(frame: pd.DataFrame) -> dict[str, str]:
    """The fixed drill-down filter of a frame whose ``context_length`` may be length buckets.

    ``{"length_cell": "bucket"}`` when the frame's ``length_cell`` column says its lengths are
    buckets, else nothing.
    """
    if LENGTH_CELL_KEY in frame.columns and (frame[LENGTH_CELL_KEY] == "bucket").any():
        return {LENGTH_CELL_KEY: "bucket"}
    return {}


def drill_spec(fig: Any) -> dict[str, Any] | None:
    """The figure's drill-down declaration (None when it declares none)."""
    meta = (
        fig.layout.meta if isinstance(fig, go.Figure) else (fig or {}).get("layout", {}).get("meta")
    )
    if isinstance(meta, Mapping) and isinstance(meta.get("drill"), Mapping):
        return dict(meta["drill"])
    return None


def point_values(fig: Any, point: Mapping[str, Any]) -> tuple[dict[str, Any], int | None] | None:
    """``(key -> value, n)`` of a clicked point, or None when it carries no drill data."""
    spec = drill_spec(fig)
    custom = point.get("customdata")
    if spec is None or not isinstance(custom, list | tuple | np.ndarray):
        return None
    keys = list(spec["keys"])
    custom = list(custom)
    if len(custom) != len(keys) + 1:
        return None
    # as stored: a shown figure's strings carry joiners (core.figures.plain_text)
    values = {k: unplain(_plain(v)) for k, v in zip(keys, custom[:-1], strict=True)}
    n = custom[-1]
    return values, (None if n is None else int(n))


def cell_from_point(fig: Any, point: Mapping[str, Any]) -> dict[str, Any] | None:
    """The cell of a clicked point: its key values, the fixed filters and the frame name."""
    got = point_values(fig, point)
    if got is None:
        return None
    spec = drill_spec(fig) or {}
    values, _ = got
    return values | dict(spec.get("fixed") or {}) | {FRAME_KEY: spec.get("frame", "predictions")}
