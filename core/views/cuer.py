"""The CUE-R view: intervention runs of the selection and every CUE-R frame (SPEC §7)."""

from __future__ import annotations

from typing import Any

from core.cuer.metrics import (
    intervention_pairs,
    load_pairs,
    paired_deltas,
    role_combinations,
    role_counts,
    synergy,
    utility_profile,
)
from core.figures import N_RESAMPLES
from core.figures.cuer import CORRECTNESS_AXIS, EPS, SYNERGY_METRIC, TAU
from core.selection import Selection, option
from core.store import Store
from core.views.common import cached, keep_filtered_instances

__all__ = ["cuer_result", "intervention_runs"]


def intervention_runs(store: Store, selection: Selection) -> list[str]:
    """The selected runs (else those of ``selection.dataset``, else all) holding interventions.

    Raises:
        ValueError: no runs in the store, or none of the selected holds interventions.
    """
    runs = store.runs_frame()
    if runs.empty:
        raise ValueError(f"no runs in {store.path}")
    if selection.runs:
        runs = runs[runs["run_id"].isin(selection.runs)]
    elif selection.dataset:
        runs = runs[runs["dataset_id"] == selection.dataset]
    keep = [
        r
        for r, conds in zip(runs["run_id"], runs["conditions"], strict=True)
        if isinstance(conds, str) and "intervention" in conds
    ]
    if not keep:
        raise ValueError(
            "no intervention run selected; start one with: python -m core run-interventions "
            "--dataset NAME --backend embedded --name RUN"
        )
    return sorted(keep)


def cuer_result(store: Store, selection: Selection) -> dict[str, Any]:
    """Every CUE-R frame of the selection (cached per store version and selection).

    Each run is shown against its own base trace; the selection's metadata filters restrict
    the instances. Options: ``eps``, ``tau``, ``correctness_axis``, ``synergy_metric``,
    ``n_resamples`` (:mod:`core.figures.cuer`).

    Returns:
        ``{"predictions", "pairs", "profile", "deltas", "roles", "combinations", "synergy",
        "correctness_axis"}``: the prediction rows (with ``dataset``),
        :func:`core.cuer.metrics.intervention_pairs` (with ``dataset``), the
        :class:`core.cuer.metrics.CuerResult` of the profile, paired deltas, role flag counts, role
        flag combinations and synergy, and the correctness axis that ran.

    Raises:
        ValueError: no intervention run in the selection, or a bad option.
    """
    eps, tau = option(selection, EPS), option(selection, TAU)
    n = option(selection, N_RESAMPLES)
    metric = option(selection, SYNERGY_METRIC)
    axis = option(selection, CORRECTNESS_AXIS)

    def build() -> dict[str, Any]:
        runs = intervention_runs(store, selection)
        preds = load_pairs(store, runs)
        datasets = {r: (store.run_row(r) or {}).get("dataset_id") for r in runs}
        preds["dataset"] = preds["run"].map(datasets)
        preds = keep_filtered_instances(store, preds, selection.filters).reset_index(drop=True)
        pairs = intervention_pairs(preds, eps, tau, axis)
        pairs.insert(1, "dataset", pairs["run"].map(datasets))
        return {
            "predictions": preds,
            "pairs": pairs,
            "profile": utility_profile(preds, pairs, correctness=axis, n_resamples=n),
            "deltas": paired_deltas(pairs, n_resamples=n),
            "roles": role_counts(pairs),
            "combinations": role_combinations(pairs),
            "synergy": synergy(pairs, metric, eps),
            "correctness_axis": axis,
        }

    # keyed by what build reads (not the whole selection: every figure and table of the page
    # passes its own options, and each would otherwise rebuild every frame)
    filters = tuple(sorted((c, tuple(v)) for c, v in selection.filters.items()))
    key = (selection.dataset, tuple(selection.runs), filters, eps, tau, n, metric, axis)
    return cached(store, "cuer", key, build)
