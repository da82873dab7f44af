"""The four-condition and ONCU views: the selection's plain-condition predictions."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from core.figures import N_RESAMPLES
from core.figures.oncu import CONDITIONS_OPTION, GROUP_KEY, OLS_P_TEST, P_TEST, SCALING_DISTANCE
from core.oncu.cells import StoredRows
from core.oncu.metrics import scaling_report, share_frame
from core.selection import Selection, option, selection_to_json
from core.store import Store
from core.views.common import analysis, cached, condition_runs, empty_analysis, stored_runs

__all__ = ["STORE_ROWS", "plain_predictions", "plain_rows", "rows_in_store", "scaling_result"]

#: Above this many predictions in a selection, :func:`plain_rows` leaves them in the store:
#: the ONCU summary and the condition matrix are computed there (:mod:`core.oncu.cells`),
#: not on a frame of every prediction (10M: 10 s and 12 GB to read alone). At 1M the store
#: path's first page load is 1.0 s against the frame's 2.4-2.8 s (Conditions; Length &
#: position 0.8 against 2.2 s), so the threshold is half a million, not the 2M it was.
STORE_ROWS = 500_000


def plain_predictions(store: Store, selection: Selection) -> pd.DataFrame:
    """Scored predictions of the four conditions (no intervention variants), filtered, paired.

    The frame every figure of :mod:`core.figures.oncu` draws from (:func:`analysis` without
    the rows that carry a variant) of the four-condition runs only
    (:func:`core.views.common.condition_runs`): intervention, probe and rerun runs appear on
    their own pages. Cached per selection (options aside) and shared: never modify it.
    """
    # the run resolution reads every run's prediction count: once per selection and version
    # (each figure and table of a page calls this view)
    runs = _condition_runs(store, selection)
    if not runs:
        return empty_analysis()
    # every score column is read whatever the score field: one frame (and one cache entry)
    # for every score field of a selection, so a new score field reuses the loaded frame
    base = replace(selection, runs=runs, options={}, score_field=Selection().score_field)

    def build() -> pd.DataFrame:
        df = analysis(store, base)
        plain = df["variant"].fillna("") == ""
        return df if bool(plain.all()) else df[plain]

    # one frame object per selection (cached, never modified): the figures of a page share
    # its ONCU grouping (core.oncu.metrics.share_frame); unfiltered, it is the analysis frame itself
    return share_frame(cached(store, "plain", selection_to_json(base), build))


def _condition_runs(store: Store, selection: Selection) -> tuple[str, ...]:
    """:func:`core.views.common.condition_runs`, once per selection (options aside) and version.

    The run resolution reads every run's prediction count: each figure and table of a page
    calls this.
    """
    return cached(
        store,
        "condition_runs",
        selection_to_json(replace(selection, options={}, score_field=Selection().score_field)),
        lambda: condition_runs(store, selection),
    )


def plain_rows(store: Store, selection: Selection) -> pd.DataFrame | StoredRows:
    """:func:`plain_predictions`, or at study scale the same rows left in the store.

    The view of the ONCU summary and the condition matrix. A selection of more than
    :data:`STORE_ROWS` predictions, unfiltered, whose runs of one dataset hold the same
    instances (pairing keeps every row), is a :class:`core.oncu.cells.StoredRows`: the
    tables computed from it are those of the frame, computed in the store. Any other
    selection is the frame.
    """
    runs, mine, n = _study_scale(store, selection)
    if not n:
        return plain_predictions(store, selection)
    # one object per runs and version: its store reads are shared by the page's tables
    rows = cached(
        store,
        "stored_rows",
        runs,
        lambda: StoredRows(store, runs, True, n, lambda: plain_predictions(store, selection)),
    )
    if len(runs) > 1 and mine["dataset_id"].nunique() == 1 and not rows.same_instances():
        return plain_predictions(store, selection)  # pairing drops rows: the frame does it
    return rows


def _study_scale(store: Store, selection: Selection) -> tuple[tuple[str, ...], pd.DataFrame, int]:
    """``(runs, their rows of stored_runs, predictions)``: predictions 0 unless over the scale.

    Over :data:`STORE_ROWS` predictions, unfiltered: :func:`plain_rows` may leave the rows in
    the store.
    """
    runs = _condition_runs(store, selection)
    if not runs or any(selection.filters.values()):
        return runs, pd.DataFrame(), 0
    table = stored_runs(store)
    mine = table[table["run_id"].isin(runs)]
    n = int(mine["n_predictions"].sum())
    return runs, mine, n if n > STORE_ROWS else 0


def rows_in_store(store: Store, selection: Selection) -> bool:
    """Whether :func:`plain_rows` leaves the selection's rows in the store.

    Nothing is read but the run table; the runs of one dataset holding other instances (told
    by the first read of the rows) use the frame after all.
    """
    return bool(_study_scale(store, selection)[2])


def scaling_result(store: Store, selection: Selection) -> dict[str, pd.DataFrame]:
    """:func:`core.oncu.metrics.scaling_report` of :func:`plain_predictions`, cached per version.

    One computation feeds the three scaling tables (per-length ONCU, paired contrasts, OLS).
    Options: ``group_key``, ``conditions``, ``scaling_distance``, ``n_resamples``, ``p_test``
    (the contrasts' p) and ``ols_p_test`` (the regression's p).

    Raises:
        ValueError: no four-condition predictions, or a group key without the length or the
            position cell.
    """
    key, conds = option(selection, GROUP_KEY), option(selection, CONDITIONS_OPTION)
    distance, n = option(selection, SCALING_DISTANCE), option(selection, N_RESAMPLES)
    p_test, ols_p_test = option(selection, P_TEST), option(selection, OLS_P_TEST)

    def build() -> dict[str, pd.DataFrame]:
        df = plain_rows(store, selection)
        if df.empty:
            raise ValueError("the selected runs hold no predictions of the four conditions")
        return scaling_report(
            df,
            selection.score_field,
            tuple(key),
            tuple(conds),
            n_resamples=n,
            distance=distance,
            p_test=p_test,
            ols_p_test=ols_p_test,
        )

    return cached(store, "scaling", selection_to_json(selection), build)
