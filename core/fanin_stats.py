"""Cell summaries of the fan-in analysis and the bootstrap over them (issue 17 items 6, 7).

The fan-in views need, per (system, fan-in) cell, only: row counts (answered, missing,
failures) and, per metric (AC, ER, EP), a histogram of the values. The store computes them in
DuckDB (:meth:`core.store.Store.fanin_summaries`); :func:`summaries_from_rows` computes the
same from :func:`core.fanin.per_instance` rows, so both paths give the same numbers.

Items: per (system, fan-in, metric) the answered rows' values in ``BINS`` equal-width bins
(AC over [0, 100], ER and EP over [0, 1]; bin -1 holds NaN): ``count, sum, sumsq, vmin,
vmax``. Bucket and all-fan-in cells add the items of their fan-in cells.

Bootstrap of a cell mean (SPEC §6.6: resamples with replacement, 95% percentile interval):
resampling the n answered rows is the same, in distribution, as drawing how often each value
is drawn: ``Multinomial(n, count / n)`` over the distinct values (NaN one more category,
skipped by the mean). So:

- **exact**: a cell whose values fall in at most :data:`STRATA` bins, each holding one value
  (binary scores; ER up to fan-in 7), draws the counts of those values: the resampled means
  have exactly the distribution of row resampling (not the same numbers for one seed);
- **stratified**: otherwise the bins are joined, in value order, into :data:`STRATA`
  contiguous strata of about equal counts; the counts per stratum are drawn exactly and the
  sum within a stratum, given its count c, as Normal(c mean_s, c var_s) (only the shape of
  within-stratum sums is approximated; the strata span the value range, so the within-stratum
  variance is a small part of the total).

Cost: resamples x (strata + 1) draws per cell, whatever its size. Items are sorted by bin
before any draw (a canonical order independent of the rows' order and dtype), every cell and
metric draws from ``default_rng(seed)``, so the CIs do not depend on the order of the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BINS",
    "METRIC_SCALE",
    "STRATA",
    "FaninSummaries",
    "item_bins",
    "merged_items",
    "pair_counts",
    "summary_bootstrap",
    "summaries_from_rows",
]

#: Equal-width value bins of the item summaries.
BINS = 256
#: Most categories a cell mean's bootstrap draws counts for (module docstring).
STRATA = 8
#: The value range each metric's bins cover: AC on 0-100, ER and EP fractions.
METRIC_SCALE = {"ac": 100.0, "er": 1.0, "ep": 1.0}
_ITEM_COLS = ["sys", "fan_in", "metric", "bin", "count", "sum", "sumsq", "vmin", "vmax"]


@dataclass(frozen=True, slots=True)
class FaninSummaries:
    """What the fan-in aggregates are computed from (:meth:`Store.fanin_summaries` keys).

    Attributes:
        systems: ``sys, run, model, dataset, condition`` in display order.
        cells: ``sys, fan_in, n_rows, n_missing, n_fail, n_fail_packed, n_fail_low``.
        items: ``sys, fan_in, metric, bin, count, sum, sumsq, vmin, vmax``.
        pairs: ``sys_a, sys_b, n_held, n_common, n_fail_a, n_fail_b, n_fail_both`` per
            system pair (``sys_a < sys_b``; see :func:`pair_counts`).
        n_no_gold: plain-condition rows whose instance has no gold evidence.
    """

    systems: pd.DataFrame
    cells: pd.DataFrame
    items: pd.DataFrame
    pairs: pd.DataFrame
    n_no_gold: int

    @classmethod
    def from_store(cls, raw: dict[str, Any]) -> FaninSummaries:
        """From :meth:`core.store.Store.fanin_summaries`' dict."""
        st = raw["states"]
        pairs = pair_counts(st["inst"], st["sys"], st["state"], len(raw["systems"]))
        return cls(raw["systems"], raw["cells"], raw["items"], pairs, int(raw["n_no_gold"]))


def item_bins(values: np.ndarray, scale: float, bins: int = BINS) -> np.ndarray:
    """The bin of each value (-1 for NaN), as the store computes it: floor(v x bins / scale)."""
    v = np.asarray(values, dtype=float)
    out = np.full(v.shape, -1, dtype=np.int64)
    fin = np.isfinite(v)
    out[fin] = np.clip(np.floor(v[fin] * bins / scale), 0, bins - 1).astype(np.int64)
    return out


def pair_counts(inst: np.ndarray, sys: np.ndarray, state: np.ndarray, n_sys: int) -> pd.DataFrame:
    """Per system pair: instances both hold, both answered, and failures among those.

    Args:
        inst: instance code per row (equal codes: the same ``instance_id``).
        sys: system index per row (0 .. n_sys - 1; one row per instance and system).
        state: 0 missing (failed call or unscored), 1 answered, 2 answered with AC < 33.
        n_sys: number of systems.
    """
    cols = ["sys_a", "sys_b", "n_held", "n_common", "n_fail_a", "n_fail_b", "n_fail_both"]
    if n_sys < 2 or len(inst) == 0:
        return pd.DataFrame(columns=cols)
    inst = np.asarray(inst, dtype=np.int64)
    sys = np.asarray(sys, dtype=np.int64)
    state = np.asarray(state, dtype=np.int64)
    n_inst = int(inst.max()) + 1
    held = np.zeros((n_sys, n_inst), dtype=np.float64)
    scored = np.zeros_like(held)
    failed = np.zeros_like(held)
    held[sys, inst] = 1.0
    scored[sys, inst] = (state > 0).astype(float)
    failed[sys, inst] = (state == 2).astype(float)
    both_held = held @ held.T
    both_scored = scored @ scored.T
    fail_common = failed @ scored.T  # [a, b]: a failed, b answered (a answered: it failed)
    fail_both = failed @ failed.T
    a, b = np.triu_indices(n_sys, k=1)
    return pd.DataFrame({
        "sys_a": a, "sys_b": b, "n_held": both_held[a, b].astype(int),
        "n_common": both_scored[a, b].astype(int), "n_fail_a": fail_common[a, b].astype(int),
        "n_fail_b": fail_common[b, a].astype(int), "n_fail_both": fail_both[a, b].astype(int),
    })  # fmt: skip


def summaries_from_rows(per: pd.DataFrame, n_no_gold: int = 0) -> FaninSummaries:
    """:class:`FaninSummaries` of :func:`core.fanin.per_instance` rows with fan-in > 0.

    Systems are numbered in order of first appearance (as the store numbers them by run,
    instance order and condition).
    """
    sys_names = list(dict.fromkeys(per["system"]))
    index = {s: i for i, s in enumerate(sys_names)}
    first = per.drop_duplicates("system").set_index("system")
    systems = pd.DataFrame({
        "sys": range(len(sys_names)), "run": [first.at[s, "run"] for s in sys_names],
        "model": [first.at[s, "model"] for s in sys_names],
        "dataset": [first.at[s, "dataset"] for s in sys_names],
        "condition": [first.at[s, "condition"] for s in sys_names],
    })  # fmt: skip
    df = pd.DataFrame({
        "sys": per["system"].map(index).to_numpy(dtype=np.int64),
        "fan_in": per["fan_in"].to_numpy(dtype=np.int64),
        "ac": per["ac"].to_numpy(dtype=float), "er": per["er"].to_numpy(dtype=float),
        "ep": per["ep"].to_numpy(dtype=float),
    })  # fmt: skip
    gone = per["missing"].fillna(False).to_numpy(dtype=bool) | np.isnan(df["ac"].to_numpy())
    df["missing"] = gone
    ok = ~gone
    fail = ok & (df["ac"].to_numpy() < 33.0)
    df["n_fail"] = fail
    df["n_fail_packed"] = fail & np.isfinite(df["er"].to_numpy())
    df["n_fail_low"] = fail & (df["er"].to_numpy() < 0.5)
    grouped = df.groupby(["sys", "fan_in"], sort=True)
    cells = grouped.agg(n_rows=("ac", "size"), n_missing=("missing", "sum"),
                        n_fail=("n_fail", "sum"), n_fail_packed=("n_fail_packed", "sum"),
                        n_fail_low=("n_fail_low", "sum")).reset_index()  # fmt: skip
    frames = []
    answered = df[ok]
    for metric, scale in METRIC_SCALE.items():
        v = answered[metric].to_numpy(dtype=float)
        part = pd.DataFrame({
            "sys": answered["sys"].to_numpy(), "fan_in": answered["fan_in"].to_numpy(),
            "bin": item_bins(v, scale), "v": np.where(np.isfinite(v), v, np.nan),
        })  # fmt: skip
        part["v2"] = part["v"] ** 2
        g = part.groupby(["sys", "fan_in", "bin"], sort=True)
        agg = g.agg(count=("bin", "size"), sum=("v", "sum"), sumsq=("v2", "sum"),
                    vmin=("v", "min"), vmax=("v", "max")).reset_index()  # fmt: skip
        agg.insert(2, "metric", metric)
        frames.append(agg)
    items = pd.concat(frames, ignore_index=True)[_ITEM_COLS] if frames else pd.DataFrame(
        columns=_ITEM_COLS)  # fmt: skip
    codes = pd.factorize(per["instance_id"].astype(str), sort=True)[0]
    state = np.where(gone, 0, np.where(fail, 2, 1))
    pairs = pair_counts(codes, df["sys"].to_numpy(), state, len(sys_names))
    return FaninSummaries(systems, cells.astype({c: int for c in cells.columns}), items, pairs,
                          int(n_no_gold))  # fmt: skip


def merged_items(items: pd.DataFrame) -> dict[str, np.ndarray]:
    """Items of several cells (one metric) joined by bin, sorted by bin (canonical order)."""
    if items.empty:
        return {k: np.empty(0) for k in ("bin", "count", "sum", "sumsq", "vmin", "vmax")}
    g = items.groupby("bin", sort=True)
    out = g.agg(count=("count", "sum"), sum=("sum", "sum"), sumsq=("sumsq", "sum"),
                vmin=("vmin", "min"), vmax=("vmax", "max"))  # fmt: skip
    return {"bin": out.index.to_numpy(dtype=np.int64),
            **{k: out[k].to_numpy(dtype=float) for k in out.columns}}  # fmt: skip


def summary_bootstrap(
    item: dict[str, np.ndarray], n_resamples: int, seed: int
) -> tuple[float, np.ndarray, str]:
    """Mean of one cell's metric and its bootstrap distribution from merged items.

    Returns:
        ``(mean, draws, estimator)``: the mean over the non-NaN values (NaN when none), the
        resampled means (NaN where a resample drew only NaN) and ``exact`` or ``stratified``
        (module docstring).
    """
    count = item["count"].astype(float)
    n = int(count.sum())
    if n == 0:
        return math.nan, np.full(n_resamples, np.nan), "exact"
    fin = item["bin"] >= 0
    c = count[fin]
    nfin = float(c.sum())
    if nfin == 0:
        return math.nan, np.full(n_resamples, np.nan), "exact"
    mean = float(item["sum"][fin].sum() / nfin)
    vmin, vmax = item["vmin"][fin], item["vmax"][fin]
    single = vmin == vmax
    if c.size <= STRATA and bool(single.all()):
        values, spread, how = vmin, np.zeros(c.size), "exact"
        counts = c
    else:
        before = np.cumsum(c) - c
        stratum = np.minimum((before * STRATA // nfin).astype(np.int64), STRATA - 1)
        counts = np.bincount(stratum, weights=c, minlength=STRATA)
        sums = np.bincount(stratum, weights=item["sum"][fin], minlength=STRATA)
        sq = np.bincount(stratum, weights=item["sumsq"][fin], minlength=STRATA)
        keep = counts > 0
        counts, sums, sq = counts[keep], sums[keep], sq[keep]
        values = sums / counts
        spread = np.maximum(sq / counts - values**2, 0.0)
        # a stratum of one single-valued bin has no spread (not a rounding residue)
        members = np.bincount(stratum, minlength=STRATA)[keep]
        lone = np.bincount(stratum, weights=single.astype(float), minlength=STRATA)[keep]
        spread[(members == 1) & (lone == 1)] = 0.0
        how = "stratified"
    probs = np.append(counts, n - nfin) / n
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n, probs, size=n_resamples)[:, : counts.size].astype(float)
    total = drawn @ values
    if bool((spread > 0).any()):
        total += np.sqrt(drawn @ spread) * rng.standard_normal(n_resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        return mean, total / drawn.sum(axis=1), how
