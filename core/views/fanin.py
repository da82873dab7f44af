"""The fan-in (AuthTrace) and CRUX coverage views (SPEC §9)."""

from __future__ import annotations

import json

import pandas as pd

from core.crux.metrics import CruxResult, crux_report
from core.fanin.judged import (
    JudgedFanin,
    fanin_from_judged,
    fanin_judged,
    judged_rows,
    require_judged,
)
from core.fanin.metrics import FaninResult, fanin_from_summaries
from core.fanin.stats import StoreSummaries
from core.figures import N_RESAMPLES
from core.figures.fanin import (
    CRUX_K_REQUIRED,
    CRUX_KS,
    CRUX_RETRIEVERS,
    ETA,
    JUDGE,
    POINTS,
    R_INCLUDE_FULL_CONTEXT,
    R_INCLUDE_ORACLE,
    SCORE_SOURCE,
)
from core.figures.retrieval import CHUNK_SIZE, OVERLAP
from core.scoring.rows import ANSWER_SCORES
from core.selection import Selection, option, selection_to_json
from core.store import Store
from core.store.fanin_rows import SCALE_ROWS, fanin_rows
from core.views.common import (
    apply_filters,
    cached,
    condition_runs,
    pair_runs,
    stored_runs,
)

__all__ = ["STORE_ROWS", "crux_result", "fanin_judged_result", "fanin_result"]

#: Above this many predictions in the selected runs, :func:`fanin_result` reads their fan-in
#: rows as at study scale (:func:`core.store.fanin_rows.fanin_rows` with ``scale``: the same
#: rows from three cheaper reads; 10M predictions: a fifth of the time).
STORE_ROWS = SCALE_ROWS


def fanin_result(store: Store, selection: Selection) -> FaninResult:
    """:class:`core.fanin.metrics.FaninResult` of the selection (cached per store version).

    Runs: the four-condition runs (:func:`core.views.common.condition_runs`) of
    ``selection.runs`` (else every run of ``selection.dataset``, else every run), several
    runs of one dataset restricted to their common instances (paired), and the selection's
    metadata filters. Options: ``points``, ``r_include_oracle``, ``r_include_full_context``,
    ``n_resamples``, ``score_source`` (:mod:`core.figures.fanin`).

    ``score_source = judged`` takes AC / ER / EP from AuthTrace judge runs
    (:func:`core.fanin.judged.fanin_from_judged`, same filters and pairing): a prediction
    without a judged AC is counted in ``missing``.

    One DuckDB query per (runs, filters) reads the rows' numbers for every answer score
    (:func:`core.store.fanin_rows.fanin_rows`; above :data:`STORE_ROWS` predictions three
    cheaper reads of the same rows), cached as one entry
    (:class:`core.fanin.stats.StoreSummaries`) that summarizes each score field on first
    use: another score field costs numpy group sums, not a query, and the options only
    recompute the statistics. The result holds no per-instance rows (a clicked point lists
    its instances through the drill-down).

    Raises:
        ValueError: no runs, or no plain-condition predictions in them.
    """
    points, n = option(selection, POINTS), option(selection, N_RESAMPLES)
    oracle = option(selection, R_INCLUDE_ORACLE)
    full = option(selection, R_INCLUDE_FULL_CONTEXT)
    filters = {k: sorted(str(v) for v in vals) for k, vals in selection.filters.items() if vals}
    if selection.score_field not in ANSWER_SCORES:
        raise ValueError(
            f"unknown score field {selection.score_field!r}; allowed: {', '.join(ANSWER_SCORES)}"
        )

    if option(selection, SCORE_SOURCE) == "judged":
        return cached(
            store,
            "fanin",
            selection_to_json(selection),
            lambda: _judged_result(
                store,
                selection,
                filters,
                points=points,
                include_oracle=oracle,
                include_full_context=full,
                n_resamples=n,
            ),
        )

    def build() -> FaninResult:
        # the runs are read only on a miss: every figure and table of the page asks for the
        # same result, and reading the runs table costs a store connection each time
        runs = list(condition_runs(store, selection))

        def summarize() -> StoreSummaries:
            allowed = _allowed(store, runs, selection) if filters else None
            table = stored_runs(store)
            n = int(table.loc[table["run_id"].isin(runs), "n_predictions"].sum())
            raw = fanin_rows(store, runs, allowed=allowed, pair=True, scale=n > STORE_ROWS)
            if not len(raw["rows"]["fan_in"]):
                raise ValueError("the selected runs hold no predictions of the four conditions")
            return StoreSummaries(raw, ANSWER_SCORES)

        key = json.dumps([runs, filters], sort_keys=True)
        summ = cached(store, "fanin_summaries", key, summarize)[selection.score_field]
        return fanin_from_summaries(
            summ,
            selection.score_field,
            points=points,
            include_oracle=oracle,
            include_full_context=full,
            n_resamples=n,
        )

    return cached(store, "fanin", selection_to_json(selection), build)


def fanin_judged_result(store: Store, selection: Selection) -> JudgedFanin | None:
    """Judged AC / ER / EP beside the proxies for the selection's runs (issue 20), or None.

    An alternative score source: None (the proxies only) unless AuthTrace judge runs judged
    the runs (:func:`core.fanin.judged.fanin_judged`); cached per store version.
    """

    def build() -> JudgedFanin | None:
        return fanin_judged(store, list(condition_runs(store, selection)), selection.score_field)

    return cached(store, "fanin_judged", selection_to_json(selection), build)


def _judged_result(
    store: Store, selection: Selection, filters: dict, **options: object
) -> FaninResult:
    """:func:`fanin_result` with AC / ER / EP from the AuthTrace judge runs."""
    runs = list(condition_runs(store, selection))
    rows = require_judged(store, runs, selection.score_field).per_instance
    if filters:
        keep = _allowed(store, runs, selection)
        rows = rows.merge(keep, on=["dataset", "instance_id"], how="inner")
    rows = pair_runs(rows).reset_index(drop=True)
    return fanin_from_judged(judged_rows(rows), selection.score_field, **options)  # type: ignore[arg-type]


def _allowed(store: Store, runs: list[str], selection: Selection) -> pd.DataFrame:
    """``dataset, instance_id`` of the runs' instances that pass the selection's filters."""
    frame = stored_runs(store)
    names = sorted(set(frame.loc[frame["run_id"].isin(runs), "dataset_id"].dropna()))
    parts = [
        apply_filters(store.instances_frame(name), selection.filters)[["instance_id"]].assign(
            dataset=name
        )
        for name in names
    ]
    if not parts:
        return pd.DataFrame({"dataset": pd.Series(dtype=str), "instance_id": pd.Series(dtype=str)})
    return pd.concat(parts, ignore_index=True)[["dataset", "instance_id"]]


def crux_result(store: Store, selection: Selection) -> CruxResult:
    """:class:`core.crux.metrics.CruxResult` of the selection's dataset (cached per store version).

    The dataset is ``selection.dataset``, else the first selected run's. Options:
    ``crux_retrievers`` (else ``retrievers``), ``crux_ks`` (else ``ks``), ``crux_k_required``
    (also k = |Z*|), ``eta``, ``chunk_size``, ``overlap``, ``n_resamples``, ``judge``.

    Raises:
        ValueError: no dataset, unknown retriever, bad k or eta.
    """
    name = selection.dataset
    if not name and selection.runs:  # the first run's dataset, from the cached runs frame
        runs = stored_runs(store)
        of_run = runs.loc[runs["run_id"] == selection.runs[0], "dataset_id"].dropna()
        name = str(of_run.iloc[0]) if len(of_run) else None
    if not name:
        raise ValueError("choose a dataset for the CRUX coverage views")
    # keyed by what the result depends on: another score field, run or condition of the same
    # dataset reuses it (CRUX scores retrieval contexts, not the runs' answers)
    settings = {
        "retrievers": option(selection, CRUX_RETRIEVERS, "retrievers"),
        "ks": option(selection, CRUX_KS, "ks"),
        "judge": option(selection, JUDGE),
        "eta": option(selection, ETA),
        "k_required": option(selection, CRUX_K_REQUIRED),
        "chunk_size": option(selection, CHUNK_SIZE),
        "overlap": option(selection, OVERLAP),
        "n_resamples": option(selection, N_RESAMPLES),
    }

    def build() -> CruxResult:
        allowed = None
        if selection.filters:
            frame = apply_filters(store.instances_frame(name), selection.filters)
            allowed = list(frame["instance_id"])
        return crux_report(store, name, instance_ids=allowed, **settings)

    filters = {k: list(v) for k, v in sorted(selection.filters.items())}
    key = json.dumps([name, settings, filters], sort_keys=True, default=str)
    return cached(store, "crux", key, build)
