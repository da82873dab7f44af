"""The four-condition and ONCU views: the selection's plain-condition predictions."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from core.selection import Selection
from core.store import Store
from core.views.common import analysis, condition_runs, empty_analysis

__all__ = ["plain_predictions"]


def plain_predictions(store: Store, selection: Selection) -> pd.DataFrame:
    """Scored predictions of the four conditions (no intervention variants), filtered, paired.

    The frame every figure of :mod:`core.figures.oncu` draws from (:func:`analysis` without
    the rows that carry a variant) of the four-condition runs only
    (:func:`core.views.common.condition_runs`): intervention, probe and rerun runs appear on
    their own pages.
    """
    runs = condition_runs(store, selection)
    if not runs:
        return empty_analysis()
    df = analysis(store, replace(selection, runs=runs))
    return df[df["variant"].fillna("") == ""]
