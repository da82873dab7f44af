"""The four-condition and ONCU views: the selection's plain-condition predictions."""

from __future__ import annotations

import pandas as pd

from core.selection import Selection
from core.store import Store
from core.views.common import analysis

__all__ = ["plain_predictions"]


def plain_predictions(store: Store, selection: Selection) -> pd.DataFrame:
    """Scored predictions of the four conditions (no intervention variants), filtered, paired.

    The frame every figure of :mod:`core.figures.oncu` draws from (:func:`analysis` without
    the rows that carry a variant).
    """
    df = analysis(store, selection)
    return df[df["variant"].fillna("") == ""]
