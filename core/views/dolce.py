"""The DOLCE view: the fit of the selection's probe runs (SPEC §8)."""

from __future__ import annotations

import json

from core.dolce import DolceFit, Thresholds, fit_dolce, outcomes_from_probes
from core.figures.dolce import (
    FIT_OPTIONS,
    K_P,
    LAM_P,
    LAM_Q,
    PIG_ESTIMATOR,
    SCENARIO,
    TASK_BY,
    THRESHOLD,
)
from core.selection import Selection, option
from core.store import Store
from core.views.common import cached, keep_filtered_instances, selected_runs

__all__ = ["dolce_result"]


def dolce_result(store: Store, selection: Selection) -> DolceFit:
    """:class:`core.dolce.DolceFit` of the selection's probe runs (cached per store version).

    Runs: ``selection.runs``, else every run of ``selection.dataset`` (else every run) that
    holds probe predictions; metadata filters apply to the probed instances. The cache key
    holds only the options the fit depends on (:data:`core.figures.dolce.FIT_OPTIONS`), so
    picking another problem's outcome curve reuses the fit.

    Raises:
        ValueError: no probe predictions in the selected runs, or bad options.
    """
    values = {p.name: option(selection, p) for p in FIT_OPTIONS}
    key = json.dumps(
        {
            "dataset": selection.dataset,
            "runs": list(selection.runs),
            "filters": {k: list(v) for k, v in sorted(selection.filters.items())},
            "options": values,
        },
        sort_keys=True,
        default=str,
    )

    def build() -> DolceFit:
        frame = store.probe_frame(selected_runs(store, selection))
        if frame.empty:
            raise ValueError(
                "the selected runs hold no DOLCE probes; run: python -m core run-probes "
                "--dataset NAME --backend embedded --name RUN"
            )
        if selection.filters:
            frame = keep_filtered_instances(store, frame, selection.filters)
            if frame.empty:
                raise ValueError("no probed instance passes the filters")
        # failed calls stay as missing probes: counted per problem, never a failed probe
        outcomes = outcomes_from_probes(frame, task_by=str(values[TASK_BY.name]), keep_missing=True)
        th = Thresholds(lam_p=values[LAM_P.name], k_p=values[K_P.name], lam_q=values[LAM_Q.name])
        return fit_dolce(
            outcomes,
            scenario=str(values[SCENARIO.name]),
            threshold=float(values[THRESHOLD.name]),
            thresholds=th,
            pig_estimator=str(values[PIG_ESTIMATOR.name]),
        )

    return cached(store, "dolce", key, build)
