"""What every view shares: the one page-data cache, run resolution, filters and run pairing.

Views turn the store and a :class:`core.selection.Selection` into the frames the figures draw.
They load (the store's queries), filter (metadata cells), pair several runs of one dataset on
their common instances and cache the result: one LRU cache for all views, keyed by the store's
data version (:func:`store_version`, counters bumped by the writes themselves) so a run
writing predictions invalidates it. Nothing here imports streamlit or writes SQL.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from core.figures.drill import FRAME_KEY, LENGTH_CELL_KEY
from core.oncu.metrics import DEFAULT_GROUP_KEY, length_bucket
from core.selection import Selection, selection_to_json
from core.store import CELL_COLUMNS, CONDITION_KINDS, Store

__all__ = [
    "begin_page_run",
    "end_page_run",
    "error_digest",
    "error_pattern",
    "condition_runs",
    "empty_analysis",
    "CACHE_SIZE",
    "FILTER_COLUMNS",
    "analysis",
    "apply_filters",
    "cached",
    "clear_cache",
    "instances_behind",
    "keep_filtered_instances",
    "overview",
    "pair_runs",
    "resolve_selection",
    "selected_runs",
    "selection_key",
    "store_version",
    "stored_runs",
]

#: Metadata cells offered as sidebar filters.
FILTER_COLUMNS = CELL_COLUMNS
#: Entries the view cache keeps (least recently used dropped first).
CACHE_SIZE = 16

T = TypeVar("T")
_CACHE: OrderedDict[tuple, Any] = OrderedDict()
_CACHE_LOCK = threading.Lock()
#: Per entry being built, the lock its build holds (:func:`cached`); dropped when it ends.
_BUILDING: dict[tuple, threading.Lock] = {}


#: Seconds a data version read inside a page run is reused by the run's later views
#: (:func:`begin_page_run`); the dashboard's own call memo uses the same span.
VERSION_MEMO_S = 1.0
_VERSIONS = threading.local()


def begin_page_run() -> None:
    """Start a page run in this thread: each data version is read once, then reused.

    A page's views each ask for the version their cache entry is keyed by (a read costs a
    few ms; a page asks a few dozen times). After this call, and for :data:`VERSION_MEMO_S`
    seconds per read (a fragment's reruns do not start a new page run), this thread reads
    each (store, scope, runs) version once. Outside a page run (the CLI, tests, exports)
    every call reads the store.
    """
    _VERSIONS.memo = {}


def end_page_run() -> None:
    """End this thread's page run: every later :func:`store_version` reads the store again.

    A page run leaves its memo on its thread (the next page run replaces it); code that
    reuses the thread for other work (tests running pages in-process) ends it first.
    """
    _VERSIONS.memo = None


def store_version(store: Store, selection: Selection | None = None) -> tuple[int, ...]:
    """The store's data version a view reads (:meth:`core.store.Store.data_version`).

    Counters bumped by every write that changes what a page reads, in the write's own
    transaction; never the file's size or modification time (a running job, an import or a
    lock file would otherwise invalidate every page). With a selection naming a dataset it is
    that dataset's counter (a run writing predictions on another dataset leaves it alone),
    plus the counters of the datasets of the selection's explicit runs; else the whole
    store's counter. Inside a page run, read once per :data:`VERSION_MEMO_S`
    (:func:`begin_page_run`).
    """
    scope = None if selection is None else selection.dataset
    runs = () if scope is None else tuple(selection.runs)  # type: ignore[union-attr]
    memo = getattr(_VERSIONS, "memo", None)
    key = (str(store.path), scope, runs)
    now = time.monotonic()
    if memo is not None:
        hit = memo.get(key)
        if hit is not None and now - hit[0] < VERSION_MEMO_S:
            return hit[1]
    version = store.data_version() if scope is None else store.data_version(scope, runs)
    if memo is not None:
        memo[key] = (now, version)
    return version


def cached(
    store: Store,
    what: str,
    key: Any,
    build: Callable[[], T],
    *,
    selection: Selection | None = None,
) -> T:
    """The view cache: ``build()`` once per (view, store file, data version, key).

    Thread-safe (the dashboard serves sessions from several threads, and a page prefetches on
    one of its own): a thread missing an entry another thread is building waits for that
    build instead of making it again (a study-scale view reads seconds and gigabytes); when
    the build fails, the waiting thread builds it itself.

    Args:
        store: the store the value is read from (its path and version are part of the key).
        what: the view's name.
        key: the rest of the key (a selection's JSON, run ids, ...), hashable.
        build: computes the value on a miss; its exceptions propagate and nothing is stored.
        selection: the selection the value is built from, when it is one: the version is
            then the selection's dataset's (:func:`store_version`), so writes to other
            datasets keep the entry; None keys it by the whole store's version.

    Returns:
        The cached or new value.
    """
    full = (what, str(store.path), store_version(store, selection), key)
    with _CACHE_LOCK:
        if full in _CACHE:
            _CACHE.move_to_end(full)
            return _CACHE[full]
        building = _BUILDING.setdefault(full, threading.Lock())
    with building:  # one build of an entry at a time; a waiting thread reads its result
        with _CACHE_LOCK:
            if full in _CACHE:
                _CACHE.move_to_end(full)
                return _CACHE[full]
        try:
            value = build()
            with _CACHE_LOCK:
                _CACHE[full] = value
                while len(_CACHE) > CACHE_SIZE:
                    _CACHE.popitem(last=False)
        finally:
            with _CACHE_LOCK:
                if _BUILDING.get(full) is building:
                    del _BUILDING[full]
    return value


def clear_cache() -> None:
    """Drop every cached view value."""
    with _CACHE_LOCK:
        _CACHE.clear()


def stored_runs(store: Store) -> pd.DataFrame:
    """:meth:`core.store.Store.runs_frame` with stored statuses (``live=False``), cached.

    Read once per store version (every write to runs, predictions or scores bumps it): a
    page's views resolve their runs from it several times a page run, and each read counts
    every stored prediction. A copy: callers may modify it.
    """
    return cached(store, "stored_runs", None, lambda: store.runs_frame(live=False)).copy()


def resolve_selection(
    store: Store, selection: Selection, runs: pd.DataFrame | None = None
) -> Selection:
    """The selection with its runs filled in: every run of the dataset when none is chosen.

    ``runs`` is :meth:`core.store.Store.runs_frame` when the caller has read it already.

    Raises:
        ValueError: a selected run is not in the store.
    """
    runs = stored_runs(store) if runs is None else runs
    known = set(runs["run_id"]) if not runs.empty else set()
    bad = [r for r in selection.runs if r not in known]
    if bad:
        raise ValueError(f"unknown run(s) {bad}; stored runs: {', '.join(sorted(known)) or '-'}")
    if selection.runs:
        return selection
    if selection.dataset is None:
        return replace(selection, runs=tuple(sorted(known)))
    mine = runs[runs["dataset_id"] == selection.dataset]["run_id"]
    return replace(selection, runs=tuple(sorted(mine)))


def selected_runs(store: Store, selection: Selection) -> list[str]:
    """``selection.runs``, else every run of ``selection.dataset``, else every run."""
    if selection.runs:
        return list(selection.runs)
    return store.resolve_runs(selection.dataset) if selection.dataset else store.resolve_runs()


def condition_runs(store: Store, selection: Selection) -> tuple[str, ...]:
    """The selection's four-condition runs (kind ``conditions`` or ``imported``).

    The condition, ONCU, length and fan-in views show only these: intervention (CUE-R),
    probe (DOLCE), judge and Case-view rerun runs appear on their own pages.

    Raises:
        ValueError: a selected run is not in the store.
    """
    runs = stored_runs(store)
    chosen = resolve_selection(store, selection, runs).runs
    if runs.empty or not chosen:
        return ()
    four = set(runs.loc[runs["kind"].fillna("conditions").isin(CONDITION_KINDS), "run_id"])
    return tuple(r for r in chosen if r in four)


def apply_filters(df: pd.DataFrame, filters: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """Rows whose metadata cells take one of the allowed values (compared as text).

    Raises:
        ValueError: a filter on a column the frame lacks (names the allowed ones).
    """
    out = df
    for col, allowed in filters.items():
        if not allowed:
            continue
        if col not in out.columns:
            raise ValueError(f"unknown filter column {col!r}; choose from {list(FILTER_COLUMNS)}")
        wanted = {str(v) for v in allowed}
        out = out[out[col].astype(str).isin(wanted)]
    return out


def keep_filtered_instances(
    store: Store, frame: pd.DataFrame, filters: Mapping[str, Sequence[Any]]
) -> pd.DataFrame:
    """Rows of ``frame`` (columns ``dataset``, ``instance_id``) whose instance passes ``filters``.

    The metadata cells come from each dataset's instances (:meth:`Store.instances_frame`), so
    frames without them (fan-in, probes, interventions) filter like the analysis frame.
    """
    if not filters or frame.empty:
        return frame
    keep = []
    for name in frame["dataset"].dropna().unique():
        allowed = apply_filters(store.instances_frame(name), filters)
        keep.append(
            (frame["dataset"] == name) & frame["instance_id"].isin(set(allowed["instance_id"]))
        )
    if not keep:
        return frame.iloc[0:0]
    return frame[np.logical_or.reduce(keep)]


def pair_runs(df: pd.DataFrame) -> pd.DataFrame:
    """With several runs of one dataset, keep the instances every run has (paired views)."""
    if df.empty or df["run"].nunique() < 2 or df["dataset"].nunique() != 1:
        return df
    per_run = df.groupby("run")["instance_id"].agg(lambda s: set(s))
    common = set.intersection(*per_run.tolist())
    return df[df["instance_id"].isin(common)]


def analysis(store: Store, selection: Selection) -> pd.DataFrame:
    """Scored predictions of the selected runs with their metadata, filtered and paired.

    One row per prediction (:meth:`core.store.Store.analysis_frame`), only the plain
    conditions' and interventions' rows as stored; several runs of one dataset are restricted
    to their common instances. The store read is cached per (store file version, runs) so the
    figures of one page share it.
    """
    sel = resolve_selection(store, selection)

    def load() -> pd.DataFrame:
        return store.analysis_frame(sel.runs) if sel.runs else empty_analysis()

    frame = cached(store, "analysis", sel.runs, load, selection=sel)
    return pair_runs(apply_filters(frame, sel.filters))


def empty_analysis() -> pd.DataFrame:
    """An analysis frame with no rows (the columns :func:`analysis` gives)."""
    cols = [
        "run",
        "model",
        "dataset",
        "instance_id",
        "condition",
        "variant",
        *DEFAULT_GROUP_KEY,
        "oracle_applicable",
        "n_gold",
        "parse_error",
        "error",
        "confidence",
        "logprob_confidence",
        "em_strict",
        "f1_strict",
        "em_relaxed",
        "f1_relaxed",
        "soft_correct",
        "ev_precision",
        "ev_recall",
        "ev_f1",
        "citation_grounding",
        "title_grounding",
        "confidence_error",
        "failure_label",
    ]
    return pd.DataFrame({c: pd.Series(dtype=object) for c in dict.fromkeys(cols)})


def selection_key(selection: Selection) -> str:
    """The cache key of a selection (its canonical JSON)."""
    return selection_to_json(selection)


def instances_behind(
    store: Store, selection: Selection, cell: Mapping[str, Any], limit: int | None = 500
) -> pd.DataFrame:
    """The predictions behind one aggregate (a bar, heatmap cell, scatter point, table row).

    Args:
        store: the store.
        selection: the page's selection.
        cell: column -> value of the aggregate (e.g. ``{"run": ..., "condition": ...,
            "failure_label": ...}``, as :func:`core.figures.drill.cell_from_point` makes it
            from a clicked point); columns the frame lacks are ignored, None/NaN match missing
            values, numbers compare as numbers (1600 matches 1600.0), "" matches "" or
            missing. The entry ``_frame`` picks the frame filtered: ``predictions`` (default:
            the scored predictions of :func:`analysis`), ``fanin`` (the fan-in frame, fan-in
            counted from the gold passages) or ``probes`` (DOLCE probe predictions). The
            entry ``length_cell`` set to ``bucket`` says the cell's ``context_length`` is a
            length bucket (:func:`core.oncu.metrics.length_bucket`): it matches every exact length
            in that bucket.
        limit: at most this many rows (None: all).

    Returns:
        Columns ``run``, ``dataset``, ``instance_id``, ``condition``, ``variant``, the score
        field, ``failure_label`` and the metadata cells (those the frame has), one row per
        prediction.
    """
    cell = dict(cell)
    which = str(cell.pop(FRAME_KEY, None) or "predictions")
    bucketed = cell.pop(LENGTH_CELL_KEY, None) == "bucket"
    df = _drill_frame(store, selection, which)
    mask = pd.Series(True, index=df.index)
    for col, value in cell.items():
        if col not in df.columns:
            continue
        if col == "context_length" and bucketed and value is not None:
            mask &= pd.Series(length_bucket(df[col]) == float(value), index=df.index)
        else:
            mask &= _matches(df[col], value)
    cols = [
        "run",
        "dataset",
        "instance_id",
        "condition",
        "variant",
        selection.score_field,
        "failure_label",
        "fan_in",
        "reasoning_type",
        "context_length",
        "evidence_position",
        "distractor_similarity",
    ]
    cols = [c for c in dict.fromkeys(cols) if c in df.columns]
    out = df.loc[mask, cols]
    if limit is not None:
        out = out.head(limit)
    return out.reset_index(drop=True)


def _drill_frame(store: Store, selection: Selection, which: str) -> pd.DataFrame:
    """The prediction frame a drill-down filters, built as the figures' views build it."""
    if which in ("predictions", "fanin"):
        # the figures draw the four-condition runs only (core.views.oncu.plain_predictions,
        # core.views.fanin): probe or intervention runs of the dataset must not narrow the
        # pairing of instances here either
        runs = list(condition_runs(store, selection))
        if which == "predictions":
            return (
                analysis(store, replace(selection, runs=tuple(runs)))
                if runs
                else (empty_analysis())
            )
        frame = store.fanin_frame(runs)
        return pair_runs(keep_filtered_instances(store, frame, selection.filters))
    if which == "probes":
        frame = store.probe_frame(selected_runs(store, selection))
        return keep_filtered_instances(store, frame, selection.filters)
    raise ValueError(f"unknown drill-down frame {which!r}; choose predictions, fanin or probes")


def _matches(col: pd.Series, value: Any) -> pd.Series:
    """Rows of ``col`` equal to ``value`` (None/NaN: missing; numbers numerically)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return col.isna()
    if value == "":
        return col.isna() | (col.astype(str) == "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        num = pd.to_numeric(col, errors="coerce")
        if num.notna().any():
            return (num == value).fillna(False).astype(bool)
    return col.notna() & (col.astype(str) == str(value))


#: What varies between two occurrences of one error (counts, ports, sizes, durations): digit
#: runs, replaced by ``#`` to group the errors of a run (:func:`error_digest`).
_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def error_pattern(message: str) -> str:
    """An error message with its numbers replaced by ``#``.

    Errors that differ only in numbers (ports, token counts, durations) are one kind of error.
    """
    return _NUMBERS.sub("#", str(message).strip())


def error_digest(store: Store, runs: Sequence[str]) -> dict[str, Any]:
    """The failed calls of ``runs``: how many, and the most frequent kind of error.

    Failed calls (transport or server errors) are not answers: they have no scores and every
    aggregate leaves them out as missing. Parse errors (the model answered, unparseably) are
    answers and not counted here.

    Returns:
        ``{"errors": int, "calls": int, "top": str | None, "top_n": int, "by_run": {run: n},
        "patterns": [(pattern, n), ...]}``: ``calls`` counts every stored call of the runs,
        ``top`` is the most frequent pattern (:func:`error_pattern`) shown with one full
        message of it.
    """
    out: dict[str, Any] = {
        "errors": 0,
        "calls": 0,
        "top": None,
        "top_n": 0,
        "by_run": {},
        "patterns": [],
    }
    if not runs:
        return out
    frame = stored_runs(store)
    frame = frame[frame["run_id"].isin(list(runs))]
    out["calls"] = int(pd.to_numeric(frame.get("n_predictions"), errors="coerce").fillna(0).sum())
    summary = store.error_summary(list(runs))
    if summary.empty:
        return out
    summary["pattern"] = summary["error"].map(error_pattern)
    out["errors"] = int(summary["n"].sum())
    out["by_run"] = {str(k): int(v) for k, v in summary.groupby("run_id")["n"].sum().items()}
    by = summary.groupby("pattern")["n"].sum().sort_values(ascending=False, kind="stable")
    out["patterns"] = [(str(p), int(n)) for p, n in by.items()]
    top = str(by.index[0])
    example = summary.loc[summary["pattern"] == top, "error"].iloc[0]
    out["top"], out["top_n"] = str(example), int(by.iloc[0])
    return out


def overview(store: Store) -> dict[str, Any]:
    """What is in the store: datasets, runs (status, progress) and prediction counts.

    Returns:
        ``{"path", "datasets": DataFrame(name, builder, n_instances, created_at),
        "runs": DataFrame(run_id, dataset_id, backend, model, status, n_planned, n_done,
        n_predictions, progress, created_at, finished_at), "n_predictions": int,
        "empty": bool}``.
    """
    ds = pd.DataFrame(
        [
            {
                "name": d.name,
                "builder": d.builder,
                "n_instances": d.n_instances,
                "created_at": d.created_at,
            }
            for d in store.list_datasets()
        ],
        columns=["name", "builder", "n_instances", "created_at"],
    )
    runs = store.runs_frame()
    cols = [
        "run_id",
        "kind",
        "dataset_id",
        "backend",
        "model",
        "status",
        "n_planned",
        "n_done",
        "n_errors",
        "n_predictions",
        "created_at",
        "finished_at",
    ]
    runs = (
        runs[[c for c in cols if c in runs.columns]].copy()
        if not runs.empty
        else (pd.DataFrame(columns=cols))
    )
    planned = pd.to_numeric(runs.get("n_planned"), errors="coerce")
    done = pd.to_numeric(runs.get("n_predictions"), errors="coerce")
    runs["progress"] = (done / planned.where(planned > 0)).clip(upper=1.0)
    return {
        "path": str(store.path),
        "datasets": ds,
        "runs": runs.reset_index(drop=True),
        "n_predictions": int(done.fillna(0).sum()) if len(runs) else 0,
        "empty": ds.empty and runs.empty,
    }
