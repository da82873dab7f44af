"""The attribution view: attribution runs of the selection and their analysis (issue 40).

One run at a time: the selected attribution run (``selection.runs``; else the newest of the
selection's dataset, else of the store). The analysis is
:func:`core.attribution.report.attribution_report` (per-passage and per-instance rows and the
run aggregates), cached per store version, run and options.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from core.attribution.metrics import BOOTSTRAP, LDS_LOW
from core.attribution.report import attribution_report
from core.selection import Selection, option
from core.store import Store
from core.views.common import cached

__all__ = ["attribution_result", "attribution_runs", "instance_attribution", "runs_with"]


def attribution_runs(store: Store, selection: Selection | None = None) -> list[str]:
    """Attribution runs of the selection, newest first (selected ones, else the dataset's).

    Raises:
        ValueError: none (the message says how to start one).
    """
    runs = store.runs_frame(live=False)
    runs = runs[runs["kind"] == "attribution"] if len(runs) else runs
    if selection is not None and selection.runs:
        picked = runs[runs["run_id"].isin(selection.runs)]
        runs = picked if len(picked) else runs
    if selection is not None and selection.dataset and len(runs):
        runs = runs[runs["dataset_id"] == selection.dataset]
    if not len(runs):
        raise ValueError(
            "no attribution run selected; start one with: python -m core run-attribution "
            "--dataset NAME --backend embedded --name RUN"
        )
    return list(runs["run_id"])


def runs_with(store: Store, dataset: str, instance_id: str) -> list[str]:
    """The attribution runs of ``dataset`` that planned ``instance_id`` (newest first)."""
    runs = store.runs_frame(live=False)
    if not len(runs):
        return []
    runs = runs[(runs["kind"] == "attribution") & (runs["dataset_id"] == dataset)]
    out = []
    for run in runs["run_id"]:
        if store.prediction_rows(
            run, [(instance_id, c, "full") for c in ("full_context", "retrieved", "oracle")]
        ).shape[0]:
            out.append(run)
    return out


def attribution_result(store: Store, selection: Selection) -> dict[str, Any]:
    """The analysis of the selection's attribution run (first of :func:`attribution_runs`).

    Options: ``n_boot`` (:data:`core.attribution.metrics.BOOTSTRAP`), ``lds_low``.

    Returns:
        :func:`core.attribution.report.attribution_report`'s dict with ``instances`` and
        ``passages`` as DataFrames.

    Raises:
        ValueError: no attribution run, or a bad option.
    """
    run = attribution_runs(store, selection)[0]
    return run_result(store, run, option(selection, BOOTSTRAP), option(selection, LDS_LOW))


def run_result(
    store: Store, run: str, n_boot: int = BOOTSTRAP.default, lds_low: float = LDS_LOW.default
) -> dict[str, Any]:
    """:func:`attribution_result` of one named run (cached)."""

    def build() -> dict[str, Any]:
        rep = attribution_report(store, run, n_boot=n_boot, lds_low=lds_low)
        rep["instances"] = pd.DataFrame(rep["instances"])
        rep["passages"] = pd.DataFrame(rep["passages"])
        return rep

    return cached(store, "attribution", (run, n_boot, lds_low), build)


def instance_attribution(
    store: Store, run: str, instance_id: str, n_boot: int = BOOTSTRAP.default
) -> dict[str, Any]:
    """One instance of a run: its passages (weight, CI, gold, cited, position) and its row.

    Returns:
        ``{"passages": DataFrame, "instance": dict or None}``.
    """
    rep = run_result(store, run, n_boot)
    p, i = rep["passages"], rep["instances"]
    rows = i[i["instance_id"] == instance_id] if len(i) else i
    return {
        "passages": p[p["instance_id"] == instance_id].reset_index(drop=True) if len(p) else p,
        "instance": rows.iloc[0].to_dict() if len(rows) else None,
    }
