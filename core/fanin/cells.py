"""Cell statistics of the fan-in tables: counts, means and bootstrap CIs per system and fan-ins.

:class:`CellStats` reads :class:`core.fanin.stats.FaninSummaries` (per system and exact
fan-in: row counts and item histograms) and gives, for any set of a system's fan-in levels,
the row counts and each metric's mean with its bootstrap draws
(:func:`core.fanin.stats.summary_bootstrap`), each computed once.
:meth:`CellStats.prefetch_tables` draws every bootstrap the tables of
:func:`core.fanin.metrics.fanin_from_summaries` use up front, on two threads (issue 38).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from core.fanin.measures import BUCKETS
from core.fanin.stats import FaninSummaries, merge_items, summary_bootstrap

__all__ = ["BUCKET_FANS", "METRICS", "CellStats", "ci95"]

#: The metrics of a cell: answer correctness, evidence recall, evidence precision.
METRICS = ("ac", "er", "ep")
#: The fan-in levels of each bucket (:data:`core.fanin.measures.BUCKETS`).
BUCKET_FANS = {"single": lambda f: f == 1, "low": lambda f: 2 <= f <= 3, "high": lambda f: f >= 4}


def ci95(draws: np.ndarray) -> tuple[float, float]:
    """95% percentile interval of the finite draws (NaN, NaN when none)."""
    b = draws[np.isfinite(draws)]
    if not b.size:
        return math.nan, math.nan
    lo, hi = np.percentile(b, [2.5, 97.5])
    return float(lo), float(hi)


#: Most ER / EP bootstrap results kept for the score fields to share (about 40 kB each at
#: 5,000 resamples; a 16-system selection has about 360).
_SHARED_DRAWS = 2048
#: Threads of the tables' bootstraps (:meth:`CellStats.prefetch`): the machine's two cores.
_WORKERS = 2
_ITEM_ARRAYS = ("fan_in", "bin", "count", "sum", "sumsq", "vmin", "vmax")
_CELL_ARRAYS = ("fan_in", "n_rows", "n_missing", "n_fail", "n_fail_packed", "n_fail_low")


class CellStats:
    """Cell statistics from :class:`core.fanin.stats.FaninSummaries`, each computed once."""

    def __init__(self, summ: FaninSummaries, n_resamples: int, seed: int) -> None:
        self.summ, self.n_resamples, self.seed = summ, n_resamples, seed
        self.heads = {
            int(r["sys"]): {
                "system": f"{r['run']}:{r['condition']}",
                "run": r["run"],
                "model": r["model"],
                "dataset": r["dataset"],
                "condition": r["condition"],
            }
            for r in summ.systems.to_dict("records")
        }
        self.items = {
            (int(key[0]), str(key[1])): {c: grp[c].to_numpy() for c in _ITEM_ARRAYS}
            for key, grp in summ.items.groupby(["sys", "metric"], sort=False)
        }
        self.cells = {
            int(s): {c: grp[c].to_numpy(dtype=np.int64) for c in _CELL_ARRAYS}
            for s, grp in summ.cells.groupby("sys", sort=False)
        }
        self._memo: dict[tuple, tuple[float, np.ndarray, str]] = {}

    def fans(self, sys: int) -> list[int]:
        """Exact fan-in levels of a system with rows (answered or missing), ascending."""
        return sorted(int(f) for f in self.cells[sys]["fan_in"]) if sys in self.cells else []

    def counts(self, sys: int, fans: Sequence[int]) -> dict[str, int]:
        """Row counts of a system over some fan-in levels."""
        c = self.cells.get(sys)
        if c is None:
            return {k: 0 for k in _CELL_ARRAYS[1:]}
        sel = np.isin(c["fan_in"], np.asarray(list(fans), dtype=np.int64))
        return {k: int(c[k][sel].sum()) for k in _CELL_ARRAYS[1:]}

    def no_pack(self, sys: int, fans: Sequence[int]) -> int:
        """Answered rows without an evidence pack (NaN ER) at ``fans``; 0 for no evidence."""
        items = self.items.get((sys, "er"))
        if items is None or self.heads[sys]["condition"] == "no_evidence":
            return 0
        sel = np.isin(items["fan_in"], np.asarray(list(fans), dtype=np.int64)) & (items["bin"] < 0)
        return int(items["count"][sel].sum())

    def stat(
        self, sys: int, metric: str, fans: Sequence[int], seed: int
    ) -> tuple[float, np.ndarray]:
        """Mean and bootstrap draws of one metric over the system's rows at ``fans``."""
        mean, draws, _ = self.stat_with_method(sys, metric, fans, seed)
        return mean, draws

    def stat_with_method(
        self, sys: int, metric: str, fans: Sequence[int], seed: int
    ) -> tuple[float, np.ndarray, str]:
        """:meth:`stat` and its estimator: ``exact`` or ``stratified`` (core.fanin.stats)."""
        key = (sys, metric, tuple(sorted(fans)), seed)
        if key not in self._memo:
            self.prefetch([key], workers=1)
        return self._memo[key]

    def prefetch(self, keys: Sequence[tuple], workers: int = _WORKERS) -> None:
        """Compute the statistics of ``keys`` (``sys, metric, sorted fans, seed``) not made yet.

        The bootstraps run on ``workers`` threads (NumPy's draws leave the interpreter lock):
        each is a function of its merged items, resamples and seed alone, so the results are
        those made one by one. ER / EP results are shared with the other score fields
        (:attr:`core.fanin.stats.FaninSummaries.draws`); AC's are the field's own.
        """
        shared = self.summ.draws
        todo: dict[tuple, tuple[dict[str, np.ndarray], tuple | None, int]] = {}
        for key in dict.fromkeys(keys):
            if key in self._memo:
                continue
            sys, metric, fans, seed = key
            merged = merge_items(self._items(sys, metric, fans))
            items_key = None
            if metric != "ac":  # ER / EP: the same items under another score field
                items_key = (
                    self.n_resamples,
                    seed,
                    *((v.dtype.str, v.tobytes()) for v in merged.values()),
                )
                if items_key in shared:
                    self._memo[key] = shared[items_key]
                    continue
            todo[key] = (merged, items_key, seed)
        if not todo:
            return
        if workers > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                jobs = {
                    k: pool.submit(summary_bootstrap, m, self.n_resamples, sd)
                    for k, (m, _, sd) in todo.items()
                }
                done = {k: f.result() for k, f in jobs.items()}
        else:
            done = {k: summary_bootstrap(m, self.n_resamples, sd) for k, (m, _, sd) in todo.items()}
        for k, (_, items_key, _) in todo.items():
            if items_key is not None:
                if items_key not in shared and len(shared) >= _SHARED_DRAWS:
                    shared.clear()
                done[k] = shared.setdefault(items_key, done[k])
            self._memo[k] = done[k]

    def _items(self, sys: int, metric: str, fans: Sequence[int]) -> dict[str, np.ndarray]:
        """The item arrays of one system and metric at ``fans``."""
        items = self.items.get((sys, metric))
        if items is None:
            return {c: np.empty(0) for c in _ITEM_ARRAYS}
        sel = np.isin(items["fan_in"], np.asarray(list(fans), dtype=np.int64))
        return {c: v[sel] for c, v in items.items()}

    def prefetch_tables(self) -> None:
        """:meth:`prefetch` every statistic the by-fan-in, by-bucket and degradation tables use."""
        keys = []
        for sys in self.heads:
            fans = self.fans(sys)
            groups = [[f] for f in fans]
            groups += [[f for f in fans if BUCKET_FANS[b](f)] for b in BUCKETS]
            groups.append(fans)
            for chosen in groups:
                if chosen:
                    keys += [(sys, m, tuple(sorted(chosen)), self.seed) for m in METRICS]
            high = [f for f in fans if f >= 4]
            keys.append((sys, "ac", tuple(high), self.seed + 1))
            keys.append((sys, "ac", tuple(f for f in fans if f == 1), self.seed))
        self.prefetch(keys)

    def row(self, sys: int, fans: Sequence[int]) -> dict[str, Any]:
        """``n``, ``missing``, each metric's mean with its CI over ``fans`` and ``ci_method``.

        ``ci_method`` is ``exact`` when every metric's CI drew the counts of its distinct values
        (the distribution of row resampling), else ``stratified (approx.)``
        (:mod:`core.fanin.stats`).
        """
        c = self.counts(sys, fans)
        out: dict[str, Any] = {
            "n": c["n_rows"] - c["n_missing"],
            "missing": c["n_missing"],
            "no_pack": self.no_pack(sys, fans),
        }
        hows = set()
        for m in METRICS:
            mean, draws, how = self.stat_with_method(sys, m, fans, self.seed)
            hows.add(how)
            out[m] = mean
            out[f"{m}_ci_low"], out[f"{m}_ci_high"] = ci95(draws)
        out["ci_method"] = "exact" if hows <= {"exact"} else "stratified (approx.)"
        return out
