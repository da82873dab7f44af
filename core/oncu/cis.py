"""Bootstrap CIs of the sample-level means (:func:`core.oncu.metrics.sample_level_means`).

Per (unit, condition) cell, each score column's mean gets a percentile interval: by index
resampling (one shared resample for the columns of a cell, cells of equal size stacked) or by
the multinomial counts of each column's distinct values (:mod:`core.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from core.stats.inference import bootstrap_percentiles, multinomial_means, percentiles

__all__ = ["add_mean_cis", "add_multinomial_cis"]


def add_multinomial_cis(
    row: dict,
    columns: Sequence[np.ndarray],
    scores: list[str],
    n_resamples: int,
    seed: int,
    level: float,
) -> None:
    """Percentile CIs of one cell's column means by :func:`core.stats.inference.multinomial_means`.

    ``columns``: the cell's values of each score (in the cell's row order). Columns with the
    same values in the same order (EM strict and relaxed, say) have the same resampled means
    with one seed: they are drawn once.
    """
    q = percentiles(level)
    used = set()
    done: list[tuple[np.ndarray, tuple[float, float]]] = []
    for col, name in zip(columns, scores, strict=True):
        lo = hi = math.nan
        same = next((b for a, b in done if _same(a, col)), None)
        if same is not None:
            lo, hi = same
        elif np.isfinite(col).any():
            boot, label = multinomial_means(col, n_resamples, seed)
            used.add(label)
            boot = boot[np.isfinite(boot)]
            if boot.size:
                lo, hi = (float(x) for x in np.percentile(boot, q))
            done.append((col, (lo, hi)))
        row[f"{name}_ci_low"], row[f"{name}_ci_high"] = lo, hi
    row["ci_method"] = "multinomial-binned" if "multinomial-binned" in used else "multinomial"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two columns hold the same values in the same order (NaN equal to NaN)."""
    if a.shape != b.shape:
        return False
    step = max(1, a.size // 64)  # a few values first: most different columns differ there
    return bool(np.array_equal(a[::step], b[::step], equal_nan=True)) and bool(
        np.array_equal(a, b, equal_nan=True)
    )


def add_mean_cis(
    rows: list[dict],
    blocks: list[np.ndarray],
    scores: list[str],
    n_resamples: int,
    seed: int,
    level: float,
) -> None:
    """Percentile CIs of every cell's column means, in place.

    Cells of equal size are bootstrapped together: with one seed they would draw the same index
    matrix anyway, so stacking their columns gives identical intervals for a fraction of the
    random draws.
    """
    q = percentiles(level)
    k = len(scores)
    by_size: dict[int, list[int]] = {}
    for i, b in enumerate(blocks):
        by_size.setdefault(len(b), []).append(i)
    for cells in by_size.values():
        stacked = np.hstack([blocks[i] for i in cells])
        lo = np.full(stacked.shape[1], np.nan)
        hi = np.full(stacked.shape[1], np.nan)
        has = np.isfinite(stacked).any(axis=0)
        if has.any():
            # exact to the bit of the released scripts' ``values[idx].mean(axis=1)`` for
            # columns without NaN (issue 34 item 4); NaN cells skipped within a resample
            lo[has], hi[has] = bootstrap_percentiles(stacked[:, has], q, n_resamples, seed)
        for j, i in enumerate(cells):
            for c, name in enumerate(scores):
                rows[i][f"{name}_ci_low"] = float(lo[j * k + c])
                rows[i][f"{name}_ci_high"] = float(hi[j * k + c])
