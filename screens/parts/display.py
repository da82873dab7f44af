"""Figures and tables on a page: shown from the cache, clicked points drilled down to instances."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.utils import PlotlyJSONEncoder

from core import views
from core.export.render import mime_type
from core.export.tables import p_as_text, table_caption, table_file_stem
from core.figures.drill import FRAME_KEY, cell_from_point, drill_spec
from core.figures.plain_text import plain_figure
from core.selection import Selection
from core.views.catalog import get_figure, get_table
from core.views.oncu import plain_predictions, plain_rows
from screens.parts.common import CASE_PAGE, cached_call
from screens.parts.exports import download_menu, export_settings, lazy_table
from screens.parts.markdown import md_escape

__all__ = [
    "instance_link",
    "open_case",
    "show_figure",
    "show_instances",
    "show_table",
    "table_cell",
    "with_options",
]


# --------------------------------------------------------------------------- figures
def show_figure(
    name: str, selection: Selection, *, key: str | None = None, drill: bool = True
) -> dict[str, Any] | None:
    """Render a registered figure with its download menu; return the clicked aggregate.

    With ``drill`` a figure that declares its drill-down keys (:mod:`core.figures.drill`) is
    selectable: a clicked bar/point returns its cell (e.g. ``{"run": ..., "condition": ...,
    "failure_label": ...}``, every key the figure declares), which :func:`show_instances`
    lists.
    """
    spec = get_figure(name)
    key = key or f"fig.{name}"
    sel = views.selection_to_json(selection)
    try:
        # shown only when the work takes over half a second (a first load, a new selection)
        with st.spinner(f"Computing {spec.title} ...", show_time=True):
            fig, data = cached_call("figure", name=name, sel=sel)
    except ValueError as exc:
        st.warning(f"{spec.title}: {md_escape(exc)}")
        return None
    head = st.columns([6, 1])
    head[0].markdown(f"**{spec.title}**", help=f"{spec.description} ({spec.reference})")
    with head[1]:
        download_menu(
            name,
            spec.title,
            fig,
            data,
            key,
            export_settings().for_figure(name),
            dataset=selection.dataset,
            runs=selection.runs,
        )
    drill = drill and drill_spec(fig) is not None
    shown = plain_figure(fig)  # data strings drawn as text, never as Plotly's markup
    event = st.plotly_chart(
        _stable_figure(shown) if drill else shown,
        key=key,
        on_select="rerun" if drill else "ignore",
        selection_mode=("points",),
        config={"displaylogo": False},
    )
    if not drill or not event:
        return None
    points = (event.get("selection") or {}).get("points") or []
    return _cell_from_point(points[0], fig) if points else None


def _stable_figure(fig: Any) -> go.Figure:
    """The figure with its properties in one canonical (sorted) order.

    Streamlit identifies a selectable chart by its key *and* its spec; a figure fresh from
    its view and the same figure out of ``st.cache_data`` (unpickled) serialize their
    properties in different orders, so the rerun that a click starts saw another chart and
    dropped the click (the first click on a freshly computed figure listed nothing).
    """
    plain = json.dumps(fig.to_plotly_json(), sort_keys=True, cls=PlotlyJSONEncoder)
    return go.Figure(json.loads(plain))


#: Key columns of a selected table row (tables of the plain-condition predictions).
_DRILL_KEYS = (
    "run",
    "condition",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "fan_in",
    "model",
    "length_cell",
)


def _cell_from_point(point: Mapping[str, Any], fig: Any) -> dict[str, Any] | None:
    """The cell of a clicked point: the key values the figure declares in its customdata
    (:func:`core.figures.drill.cell_from_point`); None for a point without drill data."""
    return cell_from_point(fig, point)


def _plain(v: Any) -> Any:
    v = v.item() if hasattr(v, "item") else v
    return None if v is pd.NA or (isinstance(v, float) and v != v) else v


def show_table(
    name: str,
    selection: Selection,
    *,
    key: str | None = None,
    drill: bool = False,
    column_config: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """Render a registered table with CSV / LaTeX downloads.

    Returns:
        ``(table, cell)``: the full table, and with ``drill`` the selected row's key cells
        (None when no row is selected).
    """
    spec = get_table(name)
    key = key or f"tab.{name}"
    sel = views.selection_to_json(selection)
    try:
        with st.spinner(f"Computing {spec.title} ...", show_time=True):
            df = cached_call("table", name=name, sel=sel)
    except ValueError as exc:
        st.warning(f"{spec.title}: {md_escape(exc)}")
        return pd.DataFrame(), None
    head = st.columns([5, 1, 1])
    head[0].markdown(f"**{spec.title}**", help=f"{spec.description} ({spec.reference})")
    # the files are made when a button is clicked, not on every render (0.5 s at 1M rows)
    stem = table_file_stem(name, selection.dataset, selection.runs)  # dataset + runs in names
    head[1].download_button(
        "CSV", lazy_table(df, "csv"), f"{stem}.csv", "text/csv", key=f"{key}.csv", on_click="ignore"
    )
    cap = table_caption(spec.title, selection.dataset, selection.runs)
    head[2].download_button(
        "LaTeX",
        lazy_table(df, "latex", caption=cap, name=name),
        f"{stem}.tex",
        mime_type("latex"),
        key=f"{key}.tex",
        on_click="ignore",
    )
    shown = df[[c for c in columns if c in df.columns]] if columns else df
    shown = _displayable(shown)
    event = st.dataframe(
        shown,
        key=key,
        hide_index=True,
        column_config=dict(column_config or {}),
        on_select="rerun" if drill else "ignore",
        selection_mode="single-row",
    )
    if not drill or not event:
        return df, None
    rows = (event.get("selection") or {}).get("rows") or []
    if not rows:
        return df, None
    return df, table_cell(spec, df, rows[0])


def table_cell(spec: Any, table: pd.DataFrame, row: int) -> dict[str, Any]:
    """The cell of row ``row`` (by position) of a registered table: its key columns
    (``_DRILL_KEYS``; a missing value is None), plus ``variant=""`` for a table of the plain
    predictions, which counts no intervention rows. Pure: what :func:`show_table` returns for
    a selected row."""
    values = table.iloc[row]
    cell = {k: _plain(values[k]) for k in _DRILL_KEYS if k in table.columns}
    if spec.view in (plain_predictions, plain_rows):
        cell["variant"] = ""
    return cell


def _displayable(df: pd.DataFrame) -> pd.DataFrame:
    """Dict/list cells as text (Arrow cannot show mixed objects); p columns as text, a p
    below 0.001 as ``< 0.001`` (issue 34; the CSV keeps the numbers)."""
    out = p_as_text(df)
    out = out.copy() if out is df else out
    for col in out.columns:
        if out[col].dtype == object and out[col].map(lambda v: isinstance(v, dict | list)).any():
            out[col] = out[col].map(
                lambda v: (
                    ", ".join(f"{k}: {x}" for k, x in v.items())
                    if isinstance(v, dict)
                    else (", ".join(map(str, v)) if isinstance(v, list) else v)
                )
            )
    return out


# --------------------------------------------------------------------------- drill-down
#: Most predictions a drill-down lists (its caption counts them all).
_LISTED = 500


def show_instances(selection: Selection, cell: Mapping[str, Any] | None, *, key: str) -> None:
    """List the predictions behind a clicked aggregate; selecting one opens the Case view."""
    if not cell:
        st.caption("Click a bar, point or table row to list the instances behind it.")
        return
    label = ", ".join(f"{k}={v}" for k, v in cell.items() if k not in (FRAME_KEY, "variant"))
    sel = views.selection_to_json(selection)
    df = cached_call("instances", sel=sel, cell=dict(cell))
    total = len(df)
    shown = f" (the first {_LISTED:,} listed)" if total > _LISTED else ""
    df = df.head(_LISTED)
    st.markdown(f"**{total} predictions behind** {md_escape(label)}{shown} — select one to open it")
    event = st.dataframe(
        df, key=key, hide_index=True, on_select="rerun", selection_mode="single-row"
    )
    rows = (event.get("selection") or {}).get("rows") or [] if event else []
    if rows:
        row = df.iloc[rows[0]]
        open_case(str(row["dataset"]), str(row["instance_id"]), [str(row["run"])])


def open_case(dataset: str, instance_id: str, runs: Sequence[str] = ()) -> None:
    """Switch to the Case view of one instance."""
    params = {"dataset": dataset, "instance": instance_id}
    if runs:
        params["runs"] = ",".join(runs)
    st.switch_page(CASE_PAGE, query_params=params)


def instance_link(dataset: str, instance_id: str, label: str | None = None) -> None:
    """A link to the Case view of one instance."""
    st.page_link(
        CASE_PAGE,
        label=label or f"Open {md_escape(instance_id)} in the Case view",  # text:
        query_params={"dataset": dataset, "instance": instance_id},
        icon=":material/search:",
    )


def with_options(selection: Selection, **options: Any) -> Selection:
    """The selection with view options added (``selection.options``)."""
    return replace(selection, options=dict(selection.options) | options)
