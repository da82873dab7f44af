"""Shared dashboard helpers: the one module with Streamlit caches, session state and widgets.

Method pages import from here and stay thin::

    from screens.parts.common import sidebar
    from screens.parts.display import show_figure, show_table

    selection = sidebar("dolce")
    show_figure("lambda_k_map", selection)
    show_table("dolce_categories", selection)

Session keys are ``f"{page}.{key}"`` (``global.*`` for the shared sidebar) and get their
defaults in :func:`init_page_state`. Cached data is keyed by the store's data version
(:func:`core.views.store_version`: counters the writes bump, per dataset where the data is one
dataset's), so a run writing predictions refreshes the views it changes and only those.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core import views
from core.backends import server_status
from core.datasets.importers import read_dataset
from core.datasets.results import import_results
from core.execution.jobs import RunJob
from core.execution.runs import build_demo
from core.export.render import ExportSettings
from core.figures import SCORE_FIELD
from core.figures.oncu import GROUP_KEY
from core.selection import Selection
from core.store import CONDITION_KINDS, Store, StoreError, default_db_path
from core.views.catalog import get_figure, get_table
from core.views.common import begin_page_run
from screens.parts import selection_state, url_state
from screens.parts.exports import export_settings, export_sidebar
from screens.parts.help import HELP, tip
from screens.parts.markdown import md_escape
from screens.parts.run_banner import error_banner
from screens.parts.selection_state import keep, run_label

__all__ = [
    "CASE_PAGE",
    "HELP",
    "backend_status",
    "cached_call",
    "clear_caches",
    "error_banner",
    "export_settings",
    "first_start",
    "get_store",
    "import_file",
    "jobs",
    "init_page_state",
    "prefetch",
    "sidebar",
    "store_path",
    "tip",
]

#: The Case view page file (target of every drill-down).
CASE_PAGE = "screens/case_view.py"


_DEFAULT_EXPORT = ExportSettings()
_GLOBAL_DEFAULTS: dict[str, Any] = {
    "global.runs": [],
    "global.score_field": "f1_relaxed",
    "global.width": _DEFAULT_EXPORT.width,
    "global.height": _DEFAULT_EXPORT.height,
    "global.font_size": _DEFAULT_EXPORT.font_size,
    "global.template": _DEFAULT_EXPORT.template,
    "global.scale": _DEFAULT_EXPORT.scale,
    "global.preset": None,
}
_PAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "conditions": {"drill": None},
    "length": {"condition": "full_context"},
    "retrieval": {"retrievers": ["lexical", "oracle"], "ks": [1, 2, 3, 5, 10]},
    "case": {"rerun": None},
    "runs": {"job": None},
}


# --------------------------------------------------------------------------- state
def init_page_state(page: str, defaults: Mapping[str, Any] | None = None) -> None:
    """Set the default session values of the shared sidebar and of ``page`` (``page.key``)."""
    ss = st.session_state
    if "global.db" not in ss:
        ss["global.db"] = str(os.environ.get("EVIDENCE_DB") or default_db_path())
    for key, value in _GLOBAL_DEFAULTS.items():
        ss.setdefault(key, value)
    merged = dict(_PAGE_DEFAULTS.get(page, {})) | dict(defaults or {})
    for key, value in merged.items():
        ss.setdefault(f"{page}.{key}", value)


def store_path() -> str:
    """The store path chosen in the sidebar (default ``$EVIDENCE_DB`` / data/evidence.duckdb)."""
    return str(Path(st.session_state.get("global.db") or default_db_path()).expanduser())


def configured_store_path() -> str:
    """The store the dashboard was started on: ``$EVIDENCE_DB``, else data/evidence.duckdb."""
    return str(os.environ.get("EVIDENCE_DB") or default_db_path())


def store_problem(path: str) -> str | None:
    """Why the store at ``path`` cannot be used, in one line; ``None`` when it can.

    A path that does not exist is ``no such store`` (nothing is created: creating a store is
    the explicit "Create a new store here" action, except for the store the dashboard was
    started on, which its first start fills with the demo). A directory, another kind of file
    or a damaged store gets the store's one-line refusal (:class:`core.store.StoreError`).
    A path found good is not opened again in this session.
    """
    ss = st.session_state
    if ss.get("global.db_ok") == path:
        return None
    target = Path(path).expanduser()
    if not target.exists() and path != configured_store_path():
        return f"no such store: {target}"
    try:
        with _store(str(target)).connect(read_only=target.exists()):
            pass
    except StoreError as exc:
        return str(exc).splitlines()[0]
    except OSError as exc:  # e.g. the folder cannot be created
        return f"{target}: {exc.strerror or type(exc).__name__}"
    ss["global.db_ok"] = path
    return None


def _create_store(path: str) -> None:
    """The "Create a new store here" action: an empty store at ``path`` (folders included)."""
    try:
        Store(Path(path).expanduser()).schema_version()
    except (StoreError, OSError) as exc:
        st.session_state["global.db_create_error"] = str(exc).splitlines()[0]


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    return Store(path, lock_timeout=10.0)


def get_store() -> Store:
    """The :class:`Store` of the sidebar's path (one cached object per path)."""
    return _store(store_path())


#: Calls whose data is one dataset's (keyed by that dataset's data version, so writes to
#: another dataset, e.g. a run in progress there, keep them); the others read the whole store.
_DATASET_CALLS = ("cells", "instance_ids", "crux_judges", "case", "case_index")
_SELECTION_CALLS = ("figure", "table", "instances")


#: Seconds a data version read in a page run is reused by later calls of the same run
#: (a fragment's reruns, which do not draw the sidebar, read it again after this).
VERSION_MEMO_S = 1.0


def _version(store: Store, fn_name: str, kwargs: Mapping[str, Any]) -> tuple[int, ...]:
    """The data version a call reads (:func:`core.views.store_version`).

    Read once per page run and scope (a read costs 10-20 ms; a page makes a dozen calls): the
    sidebar starts each run with an empty memo (:func:`_new_page_run`).
    """
    if fn_name in _SELECTION_CALLS:
        sel = views.selection_from_json(kwargs["sel"])
        scope, runs = sel.dataset, tuple(sel.runs) if sel.dataset is not None else ()
    elif fn_name in _DATASET_CALLS and kwargs.get("dataset") is not None:
        scope, runs = str(kwargs["dataset"]), tuple(kwargs.get("runs") or ())
    else:
        scope, runs = None, ()
    memo = st.session_state.setdefault("global.version_memo", {})
    key = (str(store.path), scope, runs)
    hit = memo.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < VERSION_MEMO_S:
        return hit[1]
    version = store.data_version(scope, runs) if scope is not None else store.data_version()
    memo[key] = (now, version)
    return version


def _new_page_run() -> None:
    """Forget the data versions read by the previous page run.

    Both memos: the calls' (:func:`_version`) and the views' own
    (:func:`core.views.common.begin_page_run`).
    """
    st.session_state["global.version_memo"] = {}
    begin_page_run()


_FROZEN_AT = 0  # len(sys.modules) when the heap was last frozen


def _freeze_heap() -> None:
    """Keep Streamlit's ``gc.collect(2)`` after each script run cheap (issue 36 item 9): it
    scanned ~150,000 objects of the loaded modules, 0.1-0.45 s of every interaction. After
    new imports: :func:`gc.freeze` (later runs scan what runs made).

    No collection first: Streamlit's own after the last script run has already taken that
    run's garbage, and the frozen objects stay frozen (unfreezing them for a collection
    scanned every module's objects again, 0.08-0.09 s of a first page load and of each run
    that imported a module). What a freeze keeps that later becomes garbage stays: the
    first run's import-time leftovers, once.
    """
    global _FROZEN_AT
    if len(sys.modules) != _FROZEN_AT:
        _FROZEN_AT = len(sys.modules)
        gc.freeze()


def first_start() -> None:
    """Build the demo store with a progress bar when the configured store is empty.

    Runs once per session on the store given by ``$EVIDENCE_DB`` (or data/evidence.duckdb);
    set ``EVIDENCE_NO_DEMO=1`` to start on an empty store instead (the Overview then shows a
    quick start). Every script run passes here first: the heap is frozen after new imports
    (:func:`_freeze_heap`).
    """
    _freeze_heap()
    init_page_state("app")
    ss = st.session_state
    if ss.get("app.demo_checked") or os.environ.get("EVIDENCE_NO_DEMO") == "1":
        return
    ss["app.demo_checked"] = True
    if store_problem(store_path()) is not None:
        return  # the sidebar says why, in one line
    store = get_store()
    if store.path.exists() and store.list_datasets():
        return
    bar = st.progress(0.0, text="First start: building the demo store ...")
    state: dict[str, Any] = {"frac": 0.0, "text": "First start: building the demo store ..."}

    def work() -> None:
        # the engine reports progress from its writer thread: keep it in ``state`` and draw
        # the bar from this script thread (Streamlit calls need the session's thread)
        try:
            build_demo(store, progress=lambda f, t: state.update(frac=f, text=t))
        except Exception as exc:
            state["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    while worker.is_alive():
        bar.progress(state["frac"], text=f"First start: {md_escape(state['text'])}")
        time.sleep(0.2)
    clear_caches()
    bar.empty()
    if "error" in state:
        st.error(f"Building the demo failed: {md_escape(state['error'])}")


# --------------------------------------------------------------------------- caches
@st.cache_data(show_spinner=False, max_entries=256)
def _cached(path: str, version: tuple, fn_name: str, args_json: str) -> Any:
    return _CALLS[fn_name](_store(path), **json.loads(args_json))


def _fig(store: Store, name: str, sel: str) -> Any:
    return get_figure(name).build(store, views.selection_from_json(sel))


def _table(store: Store, name: str, sel: str) -> Any:
    return get_table(name).build(store, views.selection_from_json(sel))


def _instances(store: Store, sel: str, cell: dict) -> Any:
    return views.instances_behind(store, views.selection_from_json(sel), cell, limit=None)


class _OneOpen(Store):
    """The store, its read-only opens cursors of one connection ``con`` (issue 36 item 9): a
    Case-view instance (``case_data``) read the store in eight opens, 20-40 ms each at 1M."""

    def __init__(self, store: Store, con: Any) -> None:
        super().__init__(store.path, store.lock_timeout)
        self._con = con

    @contextmanager
    def _open(self, read_only: bool, own: Any) -> Iterator[Any]:
        if not read_only:  # a write: the store's own connection
            with own(self, read_only=False) as con:
                yield con
            return
        cur = self._con.cursor()
        try:
            yield cur
        finally:
            cur.close()

    def connect(self, read_only: bool = False) -> Any:
        return self._open(read_only, Store.connect)

    def attached(self, read_only: bool = False) -> Any:
        return self._open(read_only, Store.attached)


def _case(store: Store, **kw: Any) -> Any:
    with store.connect(read_only=True) as con:  # one open for the whole instance
        return views.case_data(_OneOpen(store, con), **kw)


_CALLS = {
    "figure": _fig,
    "table": _table,
    "instances": _instances,
    "overview": lambda store: views.overview(store),
    "cells": lambda store, dataset: store.cell_values(dataset),
    # stored statuses, cached per store version; live_runs() looks at each run's process
    "runs": lambda store: views.stored_runs(store),
    "errors": lambda store, runs: views.error_digest(store, runs),
    "datasets": lambda store: store.dataset_names(),
    "instance_ids": lambda store, dataset: store.list_instance_ids(dataset),
    "case": _case,
    "case_index": lambda store, dataset, runs: views.case_index(store, dataset, runs),
    "crux_judges": lambda store, dataset: store.crux_judges(dataset),
}


def cached_call(fn_name: str, **kwargs: Any) -> Any:
    """Call a registered data function on the current store, cached by its data version.

    ``fn_name`` is one of ``figure`` (name, sel), ``table`` (name, sel), ``instances``
    (sel, cell), ``overview``, ``cells`` (dataset), ``runs``, ``datasets``, ``case``
    (dataset, instance_id, runs, score_field, group_key), ``crux_judges`` (dataset), ``errors``
    (runs). ``sel``
    is a selection's JSON.
    """
    store = get_store()
    args = json.dumps(kwargs, sort_keys=True, default=str)
    return _cached(str(store.path), _version(store, fn_name, kwargs), fn_name, args)


#: Seconds a prefetch waits: the page run that asked sends its page, the browser draws it.
PREFETCH_DELAY_S = 0.2


def _background() -> None:
    with contextlib.suppress(AttributeError, OSError):  # Linux: this thread yields the CPU
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


_PREFETCH = concurrent.futures.ThreadPoolExecutor(1, initializer=_background)
_PREFETCHING: set[tuple[str, tuple, str, str]] = set()
_PREFETCH_LOCK = threading.Lock()


def prefetch(fn_name: str, **kwargs: Any) -> None:
    """Fill :func:`cached_call`'s entry for ``(fn_name, kwargs)`` on a background thread (one
    at a time, failures dropped) for the next page run (the Case view's j / k neighbours); a
    run asking meanwhile waits for it (Streamlit's per-entry lock) instead of computing it."""
    store = get_store()
    key = (
        str(store.path),
        _version(store, fn_name, kwargs),
        fn_name,
        json.dumps(kwargs, sort_keys=True, default=str),
    )
    with _PREFETCH_LOCK:
        if key in _PREFETCHING:
            return
        _PREFETCHING.add(key)
    _PREFETCH.submit(_warm, key)


def _warm(key: tuple[str, tuple, str, str]) -> None:
    try:
        time.sleep(PREFETCH_DELAY_S)
        with contextlib.suppress(Exception):  # the page run that asks for it says the error
            _cached(*key)
    finally:
        with _PREFETCH_LOCK:
            _PREFETCHING.discard(key)


@st.cache_data(show_spinner=False, ttl=30)
def backend_status() -> list[dict[str, Any]]:
    """Ollama host status (:func:`core.backends.server_status`), refreshed every 30 s."""
    return server_status(timeout_s=0.5)


def clear_caches() -> None:
    """Drop cached data (after this process wrote to the store)."""
    _cached.clear()
    _new_page_run()


# --------------------------------------------------------------------------- runs
class _Jobs:
    """Runs launched from this dashboard process (one child process each)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Any] = {}

    def start(self, request: Any) -> Any:
        """Launch ``request`` (a :class:`core.execution.jobs.RunRequest`) unless already running."""
        current = self._jobs.get(request.name)
        if current is not None and current.running:
            raise ValueError(f"run {request.name!r} is already running")
        job = RunJob.start(request)
        self._jobs[request.name] = job
        return job

    def all(self) -> dict[str, Any]:
        """Run name -> :class:`core.execution.jobs.RunJob`, newest last."""
        return dict(self._jobs)


@st.cache_resource(show_spinner=False)
def jobs() -> _Jobs:
    """The dashboard's registry of launched runs (shared by all sessions of this process)."""
    return _Jobs()


def import_file(
    kind: str, path: Any, name: str, replace: bool = False, with_runs: str | None = None
) -> str:
    """Import an uploaded file into the current store; returns the importer's summary line.

    ``kind`` is ``"results: oncu-release"`` or ``"dataset: <format>"``; ``with_runs`` is what a
    replace does to the replaced dataset's runs (``--with-runs``: None refuses when it has
    any, ``drop``, ``keep-orphans``).

    Raises:
        ValueError: the importer's one-line error (bad file, name taken, ...).
    """
    what, _, fmt = kind.partition(": ")
    store = get_store()
    try:
        if what == "results":
            res = import_results(
                store, path, name=name, fmt=fmt, replace=replace, with_runs=with_runs
            )
            out = res.summary()
        else:
            result = read_dataset(path, fmt=fmt, name=name)
            store.write_dataset(result.dataset, replace=replace, with_runs=with_runs)
            out = f"{result.summary()} -> dataset '{name}'"
    except StoreError as exc:
        raise ValueError(str(exc)) from exc
    except ValueError as exc:  # a file of another format: named as this page's choices are
        raise ValueError(
            re.sub(
                r"\(import (dataset|results) --format ([\w-]+)\)",
                r'(choose What: "\1: \2" above)',
                str(exc),
            )
        ) from exc
    finally:
        clear_caches()
    return out


# --------------------------------------------------------------------------- sidebar
def _require_store(sb: Any) -> None:
    """Stop the page with a one-line reason when the sidebar's store cannot be used.

    A missing path offers "Create a new store here"; nothing else on the page runs until the
    path names a usable store.
    """
    path = store_path()
    problem = store_problem(path)
    if problem is None:
        return
    sb.error(md_escape(problem))  # the path is the user's text: shown as text
    if problem.startswith("no such store"):
        sb.button(
            "Create a new store here",
            key="global.db_create",
            on_click=_create_store,
            args=(path,),
            help="An empty store at this path (its folders included).",
        )
    created = st.session_state.pop("global.db_create_error", None)
    if created:
        sb.error(md_escape(created))
    st.info("Choose the store in the sidebar: the path above cannot be used.")
    st.stop()


def sidebar(
    page: str, *, runs: bool = True, filters: bool = True, banner: bool = True
) -> Selection:
    """Render the shared sidebar and return the page's :class:`core.selection.Selection`.

    Store path, dataset, run(s) (several runs are shown side by side on their common
    instances), score field, metadata filters and the export settings. With ``banner`` the
    failed calls of the runs shown are counted above the page (:func:`error_banner`).
    """
    _new_page_run()
    init_page_state(page)
    selection_state.restore(page)  # the values of the last page's sidebar (issue 36 item 2)
    ss = st.session_state
    sb = st.sidebar
    url = url_state.applying()  # the URL's view is applied before each widget is drawn
    if url and st.query_params.get("db"):
        ss["global.db"] = st.query_params["db"]
    keep(
        sb.text_input(
            "Store (DuckDB file)",
            key="global.db",
            help="Path of the DuckDB "
            "store. A path that does not exist is not created unless you ask for "
            "it.",
        ),
        "global.db",
    )
    _require_store(sb)
    datasets = cached_call("datasets")
    options = [None, *datasets]
    if url:
        url_state.adopt("dataset", "global.dataset", options)
    if "global.dataset" not in ss or ss["global.dataset"] not in options:
        ss["global.dataset"] = datasets[0] if datasets else None
    dataset = keep(
        sb.selectbox(
            "Dataset",
            options,
            key="global.dataset",
            format_func=lambda d: "(all datasets)" if d is None else d,
        ),
        "global.dataset",
    )
    chosen: tuple[str, ...] = ()
    shown: list[str] = []
    if runs:
        frame = live_runs()
        mine = frame if dataset is None or frame.empty else frame[frame["dataset_id"] == dataset]
        kinds = PAGE_KINDS.get(page)
        if kinds is not None and not mine.empty:
            mine = mine[mine["kind"].fillna("conditions").isin(kinds)]
        ids = sorted(mine["run_id"]) if not mine.empty else []
        if url:
            url_state.adopt("runs", "global.runs", ids, multi=True)
        ss["global.runs"] = [r for r in ss.get("global.runs", []) if r in ids]
        labels = {r.run_id: run_label(r) for r in mine.itertuples()} if not mine.empty else {}
        what = "runs" if kinds is None else f"{' / '.join(kinds)} runs"
        chosen = tuple(
            sb.multiselect(
                f"Runs (empty = all {what} of the dataset)",
                ids,
                key="global.runs",  # text: kinds
                format_func=lambda r: labels.get(r, r),
                help="Several runs are compared side by side on the instances they share. "
                + (
                    "This page shows " + what + " only; the others have their own pages."
                    if kinds is not None
                    else ""
                ),
            )
        )
        selection_state.keep_runs(chosen, ids)
        # a Case-view rerun's failed call is that rerun's, not the dataset's: its runs are
        # in the banner only when chosen (issue 36 item 11)
        reruns = set(mine.loc[mine["kind"] == "rerun", "run_id"]) if "kind" in mine else set()
        shown = list(chosen or [r for r in ids if r not in reruns])
    if url:
        url_state.adopt("score", "global.score_field", SCORE_FIELD.choices)
    keep(
        sb.selectbox(
            "Score field", SCORE_FIELD.choices, key="global.score_field", help=HELP["f1_relaxed"]
        ),
        "global.score_field",
    )
    chosen_filters: dict[str, tuple[str, ...]] = {}
    if filters:
        values = cached_call("cells", dataset=dataset)
        if url:
            url_state.adopt_filters(values)
        with sb.expander("Filters (metadata cells)"):
            for col, vals in values.items():
                if len(vals) > 1:
                    picked = keep(
                        st.multiselect(
                            md_escape(col.replace("_", " ")), vals, key=f"global.f.{col}"
                        ),
                        f"global.f.{col}",
                    )
                    if picked:
                        chosen_filters[col] = tuple(picked)
    options: dict[str, Any] = {}
    if page in ("conditions", "case"):
        options = _group_key_setting(sb, url)
    if url:
        selection_state.adopt_export()
    store = get_store()
    export_sidebar(
        sb,
        store,
        cached_call("runs"),
        dataset,
        chosen,
        ss["global.score_field"],
        _version(store, "numbers", {}),
    )  # the whole store's numbers: its version
    selection_state.write_url(
        page, datasets, chosen, chosen_filters, sb, default_db=configured_store_path()
    )
    if shown and banner:
        error_banner(shown, lambda r: cached_call("errors", runs=r))
    return Selection(
        dataset=dataset,
        runs=chosen,
        score_field=ss["global.score_field"],
        filters=chosen_filters,
        options=options,
    )


#: Run kinds each page lists (:data:`core.store.RUN_KINDS`); pages not named list every run.
PAGE_KINDS: dict[str, tuple[str, ...]] = {
    "conditions": CONDITION_KINDS,
    "length": CONDITION_KINDS,
    "fanin": CONDITION_KINDS,
    "interventions": ("interventions",),
    "dolce": ("probes",),
}


def live_runs() -> pd.DataFrame:
    """The stored runs (cached per store version) with their live status.

    A run stored as ``running`` whose process has ended since the cache was filled shows
    ``interrupted`` (:meth:`core.store.Store.live_status`): the store file does not change
    when a process is killed, so its status is looked at again on every render.
    """
    frame = cached_call("runs")
    if frame.empty or "status" not in frame.columns:
        return frame
    store = get_store()
    frame = frame.copy()
    frame["status"] = [
        store.live_status(r, s) for r, s in zip(frame["run_id"], frame["status"], strict=True)
    ]
    return frame


def _group_key_setting(sb: Any, url: bool = False) -> dict[str, Any]:
    """The ONCU group key control; ``{"group_key": (...)}`` when it differs from the default.

    With ``url`` the URL's ``group`` parameter is applied first (:mod:`screens.parts.url_state`).
    """
    ss = st.session_state
    choices = [*GROUP_KEY.default, "answer_type", "fan_in"]
    if "global.group_key" not in ss:
        ss["global.group_key"] = list(GROUP_KEY.default)
    if url:
        url_state.adopt("group", "global.group_key", choices, multi=True)
    with sb.expander("ONCU groups"):
        key = keep(
            st.multiselect("Group key", choices, key="global.group_key", help=HELP["group_key"]),
            "global.group_key",
        )
    key = tuple(k for k in choices if k in key)
    return {} if key == tuple(GROUP_KEY.default) else {"group_key": key}
