"""A figure's download menu whose failures are said, in place (issue 36 item 4).

The files are made when a button is clicked (deferred: Streamlit runs the maker on a thread of
its own, apart from the script). A maker that fails used to leave no file and no message (the
server log had Kaleido's error): now each maker records its outcome under a token of this
session and button, the click marks the menu as waiting, and a fragment under the figure's
heading looks every second, while it waits, and shows the failure with its reason and what
to do; it stops looking once the file is made or the failure is shown.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.export.numbers import collect_numbers, numbers_json, numbers_tex
from core.export.render import (
    PRESETS,
    TEMPLATES,
    ExportSettings,
    figure_bytes,
    figure_meta,
    layout_line,
    mime_type,
    start_renderer,
    table_bytes,
)
from core.export.tables import table_file_stem
from screens.parts.markdown import md_escape
from screens.parts.selection_state import keep

__all__ = [
    "download_menu",
    "export_settings",
    "export_sidebar",
    "lazy_table",
    "numbers_files",
    "numbers_menu",
]

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
        except Exception as exc:
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            with _LOCK:
                _OUTCOMES[token] = f"{type(exc).__name__}: {line}"[:300]
            raise
        with _LOCK:
            _OUTCOMES[token] = ""
        return data

    return run


def lazy_table(df: pd.DataFrame, fmt: str, **kwargs: Any) -> Callable[[], bytes]:
    """A download button's data made when it is clicked: :func:`core.export.render.table_bytes`."""

    def make() -> bytes:
        return table_bytes(df, fmt, **kwargs)

    return make


#: token -> the one line a made figure's layout had to say (it grew, or text would clash).
_NOTES: dict[str, str] = {}


def _figure_maker(
    fig: Any,
    fmt: str,
    settings: ExportSettings,
    meta: dict[str, str] | None,
    name: str,
    token: str,
) -> Callable[[], bytes]:
    def render() -> bytes:
        start_renderer()
        said: list[str] = []
        data = figure_bytes(fig, fmt, settings, meta=meta, said=said)
        with _LOCK:
            if said:  # the command's line, in the page's words (its preset menu, not a flag)
                _NOTES[token] = re.sub(
                    r"; try --preset (\S+)$",
                    r'; choose the preset "\1"',
                    layout_line(name, settings, said),
                )
            else:
                _NOTES.pop(token, None)
        return data

    return render


def download_menu(
    name: str,
    title: str,
    fig: Any,
    data: pd.DataFrame,
    key: str,
    settings: ExportSettings,
    *,
    dataset: str | None = None,
    runs: Sequence[str] = (),
) -> None:
    """The figure's Download popover (PNG, SVG, PDF, CSV) and, under it, what a failed
    download says.

    The files are named after the figure, ``dataset`` and ``runs``
    (:func:`core.export.tables.table_file_stem`, as the command line's exports), and the
    figure files carry the same in their metadata (:func:`core.export.render.figure_meta`).
    """
    stem = table_file_stem(name, dataset, runs)
    meta = figure_meta(title, dataset, runs)
    ss = st.session_state
    pending, failed_key = f"{key}.dl.pending", f"{key}.dl.failed"
    note_key = f"{key}.dl.note"
    tokens = {fmt: _token(f"{key}.dl.{fmt}") for fmt in ("png", "svg", "pdf", "csv")}

    def clicked(fmt: str) -> None:
        with _LOCK:
            _OUTCOMES.pop(tokens[fmt], None)
        ss[pending] = (fmt, time.monotonic())
        ss.pop(failed_key, None)
        ss.pop(note_key, None)

    with st.popover("Download", icon=":material/download:"):
        cols = st.columns(4)
        for col, fmt in zip(cols, ("png", "svg", "pdf", "csv"), strict=True):
            make = (
                lazy_table(data, "csv")
                if fmt == "csv"
                else _figure_maker(fig, fmt, settings, meta, name, tokens[fmt])
            )
            col.download_button(
                fmt.upper(),
                data=_recorded(tokens[fmt], make),
                key=f"{key}.dl.{fmt}",  # text:
                file_name=f"{stem}.{fmt}",
                mime="text/csv" if fmt == "csv" else mime_type(fmt),
                on_click=clicked,
                args=(fmt,),
            )
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
        else:
            with _LOCK:
                note = _NOTES.pop(tokens[fmt], None)
            if note:
                ss[note_key] = (fmt, note)
        st.rerun()  # the whole page: it stops looking, and says the failure in place

    outcome()
    failed = ss.get(failed_key)
    if failed:
        st.error(
            f"**{failed[0].upper()} of {md_escape(title)} was not made**: "  # text: PDF..
            f"{md_escape(failed[1])}. What to do: try another format (SVG or PNG), fewer "
            "runs or one dataset; the dashboard's log has the full error.",
            icon=":material/error:",
        )
    note = ss.get(note_key)
    if note:  # made, but the layout had to give: said where the download was asked for
        st.info(
            f"{note[0].upper()} of {md_escape(title)}: "  # text: PNG / SVG / PDF, escaped
            f"{md_escape(note[1])}.",
            icon=":material/aspect_ratio:",
        )


# --------------------------------------------------------------------------- paper numbers
#: (store, data version, runs, score field) -> the sidecar dict of ``export numbers``.
_NUMBERS: dict[tuple, dict[str, Any]] = {}
_NUMBERS_KEPT = 8


def numbers_files(
    store: Any, runs: Sequence[str] | None, score_field: str, version: tuple = ()
) -> dict[str, bytes]:
    """The two files of ``python -m core export numbers`` (issue 39 item 4), made now.

    ``tex``: the LaTeX macros, ``json``: their sidecar, exactly as the command writes them for
    ``--runs`` (None: every run) and ``--score-field``; ``written_at`` is the time of this
    call. The numbers are computed once per store ``version`` and selection (the .tex and the
    .json buttons share them).

    Raises:
        ValueError: no number to export (the command's refusal).
    """
    key = (str(store.path), tuple(version), None if runs is None else tuple(runs), score_field)
    with _LOCK:
        side = _NUMBERS.get(key)
    if side is None:
        numbers, notes = collect_numbers(store, None if runs is None else list(runs), score_field)
        if not numbers:
            raise ValueError(
                f"no number to export from {store.path}: no conditions, "
                "intervention or probe run with predictions"
                + (f" among {', '.join(runs)}" if runs else "")
            )
        side = numbers_json(store, numbers, notes, score_field)
        with _LOCK:
            _NUMBERS[key] = side
            while len(_NUMBERS) > _NUMBERS_KEPT:
                _NUMBERS.pop(next(iter(_NUMBERS)))
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    side = dict(side) | {"written_at": now}
    return {
        "tex": numbers_tex(side).encode(),
        "json": (json.dumps(side, indent=2, ensure_ascii=False) + "\n").encode(),
    }


def export_settings() -> ExportSettings:
    """The publication size/style from the sidebar's export settings."""
    ss = st.session_state
    return ExportSettings(
        width=int(ss.get("global.width", 700)),
        height=int(ss.get("global.height", 450)),
        font_size=int(ss.get("global.font_size", 14)),
        template=str(ss.get("global.template", "simple_white")),
        scale=float(ss.get("global.scale", 2.0)),
        preset=ss.get("global.preset") or None,
    ).checked()


def export_sidebar(
    sb: Any,
    store: Any,
    runs_frame: pd.DataFrame,
    dataset: str | None,
    chosen: Sequence[str],
    score_field: str,
    version: tuple,
) -> None:
    """The sidebar's Export settings: the figures' size and style, and the paper numbers."""
    with sb.expander("Export settings"):
        for label, k, lo, hi, step in (
            ("width (px)", "width", 100, 5000, 50),
            ("height (px)", "height", 100, 5000, 50),
            ("font size", "font_size", 4, 72, 1),
        ):
            keep(
                st.number_input(label, lo, hi, step=step, key=f"global.{k}"),  # text: constant
                f"global.{k}",
            )
        keep(st.selectbox("template", TEMPLATES, key="global.template"), "global.template")
        keep(st.number_input("PNG scale", 0.25, 8.0, step=0.5, key="global.scale"), "global.scale")
        keep(
            st.selectbox(
                "Venue preset",
                [None, *PRESETS],
                key="global.preset",
                format_func=lambda p: "none (pixel sizes)" if p is None else p,
                help="A venue's width in inches and font in points; replaces width, "
                "height and font size (height from the figure's aspect).",
            ),
            "global.preset",
        )
        numbers_menu(store, runs_frame, dataset, chosen, score_field, version)


#: Run kinds ``export numbers`` takes numbers from (:func:`core.export.numbers.collect_numbers`).
_NUMBER_KINDS = ("conditions", "imported", "interventions", "probes")


def numbers_menu(
    store: Any,
    runs_frame: pd.DataFrame,
    dataset: str | None,
    chosen: Sequence[str],
    score_field: str,
    version: tuple,
) -> None:
    """ "Download numbers (.tex)" and its JSON sidecar: ``export numbers --runs`` with the
    chosen runs, else every run of the dataset, else (all datasets) every run.

    The files are made when a button is clicked; a selection without a run that has
    predictions to take numbers from says so instead.
    """
    frame = runs_frame
    if dataset is not None and len(frame):
        frame = frame[frame["dataset_id"] == dataset]
    if chosen and len(frame):
        frame = frame[frame["run_id"].isin(list(chosen))]
    runs = list(chosen) if chosen else (sorted(frame["run_id"]) if dataset is not None else None)
    n = pd.to_numeric(frame["n_predictions"], errors="coerce") if len(frame) else None
    if n is None or "kind" not in frame or not (frame["kind"].isin(_NUMBER_KINDS) & (n > 0)).any():
        st.caption(
            "Paper numbers: no conditions, intervention or probe run with predictions "
            "in this selection."
        )
        return

    def maker(fmt: str) -> Callable[[], bytes]:
        return lambda: numbers_files(store, runs, score_field, version)[fmt]

    stem = table_file_stem("numbers", dataset, chosen)
    cols = st.columns([3, 2])
    cols[0].download_button(
        "Download numbers (.tex)",
        maker("tex"),
        f"{stem}.tex",
        mime_type("latex"),
        key="global.numbers.tex",
        on_click="ignore",
        icon=":material/download:",
        help="Every headline number of the selected runs (all runs of the dataset when none "
        "is chosen) as a LaTeX macro with its provenance, as `python -m core export numbers` "
        "writes it; check a paper against the store with `python -m core report "
        "check-paper`.",
    )
    cols[1].download_button(
        "JSON",
        maker("json"),
        f"{stem}.json",
        "application/json",
        key="global.numbers.json",
        on_click="ignore",
        help="The same numbers at full precision with their provenance "
        "(the .json file `export numbers` writes beside the .tex).",
    )
