"""ONCU and sample-level means of stored runs from cell aggregates (issue 38: study scale).

:func:`store_oncu_summary` and :func:`store_sample_means` give the tables
:func:`core.oncu.metrics.oncu_summary` and :func:`core.oncu.metrics.sample_level_means` give on
the runs' analysis frame (:meth:`core.store.Store.analysis_frame`), without reading that frame:
the store computes per-cell counts, sums and value counts (:mod:`core.store.cell_rows`) and only
those come into pandas. At ten million predictions that is seconds instead of half a minute,
and megabytes instead of twelve gigabytes.

What is the same, and what can differ:

- Counts (``n``, ``missing``, ``valid_groups``, group sizes, invalid reasons) are equal.
- Means are sums over counts: the store sums with compensation (``fsum``), the frame in
  its own order, so a mean can differ in its last bits (relative 1e-15).
- Sample-mean CIs: a cell of up to :data:`core.stats.inference.RESAMPLE_MAX` predictions is
  resampled from its values, read in the frame's order: the same interval to the bit. A
  larger cell's multinomial interval is drawn from its value counts, which are exact, so it
  is the same to the bit too; a column with more than
  :data:`core.stats.inference.MAX_CATEGORIES` distinct values is binned, and its bins' means
  and spreads are sums, so they can differ in their last bits.
- The ONCU interval resamples the valid groups' clipped ONCU, so last-bit differences of the
  means can move a bound by as much.

The group key's cells must be instance cells (:data:`core.store.analysis.GROUP_CELLS` but
``instance_id``) or unit keys; per-instance ONCU needs the frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from core.oncu.cis import add_mean_cis
from core.oncu.groups import (
    DEFAULT_GROUP_KEY,
    EXACT_LENGTH,
    GRID_MAX_VALUES,
    LENGTH_TOKENS,
    SCORE_FIELDS,
    SMALL_GROUP,
    UNIT_KEYS,
    assemble_groups,
    coarsen,
    length_bucket,
)
from core.oncu.metrics import ONCU_CONDITIONS, summary_frame
from core.scoring.normalize import ANSWER_SCORES, EVIDENCE_SCORES
from core.stats.inference import (
    BINS,
    MAX_CATEGORIES,
    ci_method,
    multinomial_counts,
    percentiles,
)

__all__ = ["MEAN_SCORES", "store_oncu_summary", "store_sample_means"]

#: The score columns of the sample-level means, in their table's order.
MEAN_SCORES = (*ANSWER_SCORES, *EVIDENCE_SCORES, "confidence_error")
#: A column whose distinct values the store estimates above this is binned in the store;
#: at or below, its exact value counts are read (and binned here when above MAX_CATEGORIES).
_COUNTED = 4 * MAX_CATEGORIES
_UNIT = list(UNIT_KEYS)
_KEYS = [*_UNIT, "condition"]


def store_oncu_summary(
    store,
    run_ids: Sequence[str],
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] = DEFAULT_GROUP_KEY,
    conditions: Sequence[str] = ONCU_CONDITIONS,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    ci: bool = True,
    plain: bool = False,
) -> pd.DataFrame:
    """:func:`core.oncu.metrics.oncu_summary` of the runs' stored scores, computed in the store.

    Args:
        store: the :class:`core.store.Store`.
        run_ids: the runs.
        plain: only rows without an intervention variant.
        (the others as :func:`core.oncu.metrics.oncu_summary`)

    Raises:
        ValueError: an unknown score field, or a group key cell that is not an instance cell.
    """
    if score_field not in SCORE_FIELDS:
        raise ValueError(f"score field '{score_field}' is not one of {SCORE_FIELDS}")
    runs = list(run_ids)
    key = tuple(group_key)
    cells = _cells(key)
    stored = store.group_cells(runs, score_field, cells, plain)
    exact = store.group_census(runs, cells, plain)  # lengths exact: coarser keys sum it
    grid = _LengthGrid(store, runs, plain, exact)
    rule = grid.rule(key)
    cols = [*_UNIT, *cells]
    sample = _unit_means(stored)
    census = exact
    if rule == "bucket":
        stored = _bucketed(stored)
        census = _bucketed(exact)
    stored = stored.groupby([*cols, "condition"], dropna=False, sort=True).agg(
        rows=("rows", "sum"), scored=("scored", "sum"), total=("total", "sum")
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = stored["total"].to_numpy(dtype=float) / stored["scored"].to_numpy(dtype=float)
    stats = pd.DataFrame(
        {"mean": np.where(stored["scored"] > 0, mean, np.nan), "scored": stored["scored"]},
        index=stored.index,
    )
    stats["rows"] = stored["rows"].astype(int)
    by_group = census.groupby(cols, dropna=False, sort=True)
    app = by_group["applicable"].all()
    sizes = by_group["n_instances"].sum().astype(np.int64)
    groups = assemble_groups(stats, app, sizes, cols, rule)

    def share_of(k: tuple[str, ...]) -> tuple[float, int]:
        frame = _bucketed(exact) if grid.rule(k) == "bucket" else exact
        sizes = frame.groupby([*_UNIT, *_cells(k)], dropna=False)["n_instances"].sum()
        return float(np.mean(sizes < SMALL_GROUP)) if len(sizes) else 0.0, int(len(sizes))

    return summary_frame(
        groups,
        sample,
        _UNIT,
        score_field,
        key,
        rule,
        conditions,
        (n_resamples, seed, level, ci),
        lambda: coarsen(key, share_of, grid.rule),
    )


def store_sample_means(
    store,
    run_ids: Sequence[str],
    ci: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    ci_method: str = "auto",
    plain: bool = False,
) -> pd.DataFrame:
    """:func:`core.oncu.metrics.sample_level_means` of the runs' stored scores, in the store.

    Args:
        store: the :class:`core.store.Store`.
        run_ids: the runs.
        plain: only rows without an intervention variant.
        (the others as :func:`core.oncu.metrics.sample_level_means`)
    """
    runs = list(run_ids)
    scores = list(MEAN_SCORES)
    cells = store.sample_cells(runs, scores, plain, spread=ci).sort_values(_KEYS, kind="stable")
    cells = cells.reset_index(drop=True)
    rows = []
    for c in cells.itertuples(index=False):
        c = c._asdict()
        row = {k: c[k] for k in _KEYS}
        row.update(n=int(c["n"]), missing=int(c["missing"]), n_parse_error=int(c["n_parse_error"]))
        for s in scores:
            k = int(c[f"n_{s}"])
            row[s] = float(c[f"sum_{s}"]) / k if k > 0 else math.nan
        rows.append(row)
    if ci and rows:
        _add_cis(store, runs, cells, rows, scores, (n_resamples, seed, level, ci_method), plain)
    return pd.DataFrame(rows)


def _add_cis(
    store,
    runs: list[str],
    cells: pd.DataFrame,
    rows: list[dict],
    scores: list[str],
    bootstrap: tuple[int, int, float, str],
    plain: bool,
) -> None:
    """Each row's CIs: small cells resampled from their values, large ones by counts."""
    n_resamples, seed, level, method = bootstrap
    methods = [ci_method(method, int(n)) for n in cells["n"]]
    slow = [g for g, m in enumerate(methods) if m == "resample"]
    if slow:
        want = [(rows[g]["run"], rows[g]["condition"]) for g in slow]
        values = store.cell_scores(runs, scores, want, plain)
        parts = {k: v for k, v in values.groupby(["run", "condition"], sort=False)}
        empty = pd.DataFrame(columns=scores, dtype=float)
        blocks = [
            parts.get(k, empty)[scores].to_numpy(dtype=float).reshape(-1, len(scores)) for k in want
        ]
        add_mean_cis([rows[g] for g in slow], blocks, scores, n_resamples, seed, level)
        for g in slow:
            rows[g]["ci_method"] = "resample"
    fast = [g for g, m in enumerate(methods) if m != "resample"]
    if not fast:
        return
    q = percentiles(level)
    binned = [set() for _ in rows]
    # columns of few distinct values: their exact counts, every column in one pass
    counted = {
        s: [
            g
            for g in fast
            if cells.at[g, f"d_{s}"] <= _COUNTED
            or not cells.at[g, f"hi_{s}"] > cells.at[g, f"lo_{s}"]
        ]
        for s in scores
    }
    hists = store.value_counts(runs, [s for s in scores if counted[s]], plain)
    for s in scores:
        wide = [g for g in fast if g not in set(counted[s]) and cells.at[g, f"n_{s}"] > 0]
        limits = [
            (rows[g]["run"], rows[g]["condition"], cells.at[g, f"lo_{s}"], cells.at[g, f"hi_{s}"])
            for g in wide
        ]
        bins = _store_bins(store, runs, s, limits, plain) if wide else {}
        for g in fast:
            key = (rows[g]["run"], rows[g]["condition"])
            n, finite = int(cells.at[g, "n"]), int(cells.at[g, f"n_{s}"])
            lo = hi = math.nan
            if finite:
                cats, counts, spread = bins[key] if key in bins else _counts(hists[key][s])
                if spread is not None:
                    binned[g].add(s)
                boot = multinomial_counts(cats, counts, n - finite, n_resamples, seed, spread)
                boot = boot[np.isfinite(boot)]
                if boot.size:
                    lo, hi = (float(x) for x in np.percentile(boot, q))
            rows[g][f"{s}_ci_low"], rows[g][f"{s}_ci_high"] = lo, hi
    for g in fast:
        rows[g]["ci_method"] = "multinomial-binned" if binned[g] else "multinomial"


def _counts(hist: dict[float, int]) -> tuple:
    """A cell's value counts as the estimator takes them: values ascending, or binned."""
    cats = np.array(sorted(hist), dtype=float)
    counts = np.array([hist[v] for v in cats], dtype=np.int64)
    return _bin(cats, counts) if cats.size > MAX_CATEGORIES else (cats, counts, None)


def _bin(cats: np.ndarray, counts: np.ndarray) -> tuple:
    """Equal-width bins of value counts, as :func:`core.stats.inference.multinomial_means`."""
    lo, hi = float(cats[0]), float(cats[-1])
    b = np.minimum(((cats - lo) / (hi - lo) * BINS).astype(np.int64), BINS - 1)
    n = np.bincount(b, weights=counts, minlength=BINS)
    keep = n > 0
    sums = np.bincount(b, weights=cats * counts, minlength=BINS)
    means = np.zeros(BINS)
    means[keep] = sums[keep] / n[keep]
    dev = np.bincount(b, weights=counts * (cats - means[b]) ** 2, minlength=BINS)
    spread = np.zeros(BINS)
    spread[keep] = dev[keep] / n[keep]
    return means[keep], n[keep].astype(np.int64), spread[keep]


def _store_bins(store, runs: list[str], column: str, limits: list, plain: bool) -> dict:
    """(run, condition) -> (bin means, counts, spreads), binned in the store."""
    out = {}
    for key, part in store.binned_counts(runs, column, limits, BINS, plain).groupby(
        ["run", "condition"], sort=False
    ):
        counts = part["count"].to_numpy(dtype=np.int64)
        means = part["total"].to_numpy(dtype=float) / counts
        out[key] = (means, counts, part["spread"].to_numpy(dtype=float))
    return out


def _unit_means(stored: pd.DataFrame) -> dict[tuple, dict]:
    """Unit key values -> {condition: the unit's mean of the score} from the group cells."""
    per = stored.groupby([*_UNIT, "condition"], dropna=False, sort=True)[["scored", "total"]].sum()
    out: dict[tuple, dict] = {}
    for (*unit, cond), k, total in zip(per.index, per["scored"], per["total"], strict=True):
        out.setdefault(tuple(unit), {})[cond] = float(total) / int(k) if k > 0 else math.nan
    return out


def _cells(key: Sequence[str]) -> list[str]:
    """The instance cells of a group key (the length token as ``context_length``)."""
    cells = ["context_length" if k in LENGTH_TOKENS else k for k in key]
    if "instance_id" in cells:
        raise ValueError("per-instance ONCU needs the analysis frame (oncu_summary)")
    return [c for c in dict.fromkeys(cells) if c not in _UNIT]


def _bucketed(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``context_length`` replaced by its length bucket (as the frame does)."""
    if "context_length" not in frame.columns:
        return frame
    b = pd.Series(length_bucket(frame["context_length"]), index=frame.index)
    return frame.assign(context_length=b.astype("int64") if b.notna().all() else b)


class _LengthGrid:
    """The length rule of a group key on the runs' rows (:func:`core.oncu.groups.on_length_grid`).

    The distinct lengths come from the census; the instances with a length are counted in the
    store only when the census cannot tell (each run's own count is a lower bound of them).
    """

    def __init__(self, store, runs: list[str], plain: bool, census: pd.DataFrame) -> None:
        self._read = lambda: store.length_grid(runs, plain)
        self._census = census
        self._grid: bool | None = None

    def _on_grid(self) -> bool:
        census = self._census
        if "context_length" in census.columns:
            lengths = census.loc[census["context_length"].notna()]
            distinct = int(lengths["context_length"].nunique())
            least = int(lengths.groupby("run")["n_instances"].sum().max()) if distinct else 0
        else:
            distinct, least = self._read()
        if distinct == 0:
            return True
        if distinct > GRID_MAX_VALUES:
            return False
        if least >= 2 * distinct:
            return True
        distinct, instances = self._read()
        return distinct <= GRID_MAX_VALUES and instances >= 2 * distinct

    def rule(self, key: Sequence[str]) -> str | None:
        tokens = [k for k in key if k in LENGTH_TOKENS]
        if len(tokens) > 1:
            raise ValueError(
                f"a group key takes one length cell, got {tokens} (choose one of "
                f"{', '.join(LENGTH_TOKENS)})"
            )
        if not tokens:
            return None
        if tokens[0] == EXACT_LENGTH:
            return "exact"
        if tokens[0] != "context_length":
            return "bucket"
        if self._grid is None:
            self._grid = self._on_grid()
        return "exact" if self._grid else "bucket"
