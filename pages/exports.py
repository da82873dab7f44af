"""A figure's download menu whose failures are said, in place (issue 36 item 4).

The files are made when a button is clicked (deferred: Streamlit runs the maker on a thread of
its own, apart from the script). A maker that fails used to leave no file and no message (the
server log had Kaleido's error): now each maker records its outcome under a token of this
session and button, the click marks the menu as waiting, and a fragment under the figure's
heading looks every second, while it waits, and shows the failure with its reason and what
to do; it stops looking once the file is made or the failure is shown.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``pages/`` are never listed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.export import (
    ExportSettings,
    figure_bytes,
    figure_meta,
    mime_type,
    start_renderer,
    table_bytes,
)
from core.export_tables import table_file_stem
from core.views.case import md_escape

__all__ = ["download_menu", "lazy_table"]

#: token -> None (being made), "" (made) or the one-line reason it failed.
_OUTCOMES: dict[str, str | None] = {}
_LOCK = threading.Lock()
#: Seconds a click is watched for its outcome.
_WATCH_S = 40.0


def _token(key: str) -> str:
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx  # Streamlit internals

        ctx = get_script_run_ctx()
        session = ctx.session_id if ctx is not None else ""
    except ImportError:  # pragma: no cover - an old Streamlit
        session = ""
    return f"{session}:{key}"


def _recorded(token: str, make: Callable[[], bytes]) -> Callable[[], bytes]:
    """``make`` recording its outcome under ``token`` (the failure re-raised for the log)."""

    def run() -> bytes:
        with _LOCK:
            _OUTCOMES[token] = None
        try:
            data = make()
        except Exception as exc:  # noqa: BLE001 - said on the page, then raised for the log
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            with _LOCK:
                _OUTCOMES[token] = f"{type(exc).__name__}: {line}"[:300]
            raise
        with _LOCK:
            _OUTCOMES[token] = ""
        return data

    return run


def lazy_table(df: pd.DataFrame, fmt: str, **kwargs: Any) -> Callable[[], bytes]:
    """A download button's data made when it is clicked: :func:`core.export.table_bytes`."""

    def make() -> bytes:
        return table_bytes(df, fmt, **kwargs)

    return make


def _figure_maker(
    fig: Any, fmt: str, settings: ExportSettings, meta: dict[str, str] | None
) -> Callable[[], bytes]:
    def render() -> bytes:
        start_renderer()
        return figure_bytes(fig, fmt, settings, meta=meta)

    return render


def download_menu(name: str, title: str, fig: Any, data: pd.DataFrame, key: str,
                  settings: ExportSettings, *, dataset: str | None = None,
                  runs: Sequence[str] = ()) -> None:  # fmt: skip
    """The figure's Download popover (PNG, SVG, PDF, CSV) and, under it, what a failed
    download says.

    The files are named after the figure, ``dataset`` and ``runs``
    (:func:`core.export_tables.table_file_stem`, as the command line's exports), and the
    figure files carry the same in their metadata (:func:`core.export.figure_meta`).
    """
    stem = table_file_stem(name, dataset, runs)
    meta = figure_meta(title, dataset, runs)
    ss = st.session_state
    pending, failed_key = f"{key}.dl.pending", f"{key}.dl.failed"
    tokens = {fmt: _token(f"{key}.dl.{fmt}") for fmt in ("png", "svg", "pdf", "csv")}

    def clicked(fmt: str) -> None:
        with _LOCK:
            _OUTCOMES.pop(tokens[fmt], None)
        ss[pending] = (fmt, time.monotonic())
        ss.pop(failed_key, None)

    with st.popover("Download", icon=":material/download:"):
        cols = st.columns(4)
        for col, fmt in zip(cols, ("png", "svg", "pdf", "csv"), strict=True):
            make = (lazy_table(data, "csv") if fmt == "csv"
                    else _figure_maker(fig, fmt, settings, meta))  # fmt: skip
            col.download_button(
                fmt.upper(), data=_recorded(tokens[fmt], make), key=f"{key}.dl.{fmt}",  # text:
                file_name=f"{stem}.{fmt}", mime="text/csv" if fmt == "csv" else mime_type(fmt),
                on_click=clicked, args=(fmt,),
            )  # fmt: skip
        st.caption(
            f"{md_escape(settings.describe())}. Drawn by a headless Chromium: the "
            "first download takes a few seconds (it starts), the next ones well under one."
        )
    waiting = ss.get(pending)

    @st.fragment(run_every=1.0 if waiting else None)
    def outcome() -> None:
        got = ss.get(pending)
        if not got:
            return
        fmt, since = got
        with _LOCK:
            result = _OUTCOMES[tokens[fmt]] if tokens[fmt] in _OUTCOMES else "?"
        if result in (None, "?") and time.monotonic() - since <= _WATCH_S:
            return  # still being made
        ss.pop(pending, None)
        if result in (None, "?"):  # no word from the maker: a renderer that hangs
            result = f"no file within {_WATCH_S:.0f} s (the figure renderer did not answer)"
        if result:
            ss[failed_key] = (fmt, result)
        st.rerun()  # the whole page: it stops looking, and says the failure in place

    outcome()
    failed = ss.get(failed_key)
    if failed:
        st.error(f"**{failed[0].upper()} of {md_escape(title)} was not made**: "  # text: PDF..
                 f"{md_escape(failed[1])}. What to do: try another format (SVG or PNG), fewer "
                 "runs or one dataset; the dashboard's log has the full error.",
                 icon=":material/error:")  # fmt: skip
