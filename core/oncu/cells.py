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
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from core.oncu.cis import add_mean_cis
from core.oncu.groups import (
    DEFAULT_GROUP_KEY,
    GRID_MAX_VALUES,
    LENGTH_TOKENS,
    SCORE_FIELDS,
    SMALL_GROUP,
    UNIT_KEYS,
    assemble_groups,
    coarsen,
    length_bucket,
    length_rule,
    small_grid,
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

__all__ = ["MEAN_SCORES", "StoredRows", "store_oncu_summary", "store_sample_means"]

#: The score columns of the sample-level means, in their table's order.
MEAN_SCORES = (*ANSWER_SCORES, *EVIDENCE_SCORES, "confidence_error")
#: A column whose distinct values the store estimates above this is binned in the store;
#: at or below, its exact value counts are read (and binned here when above MAX_CATEGORIES).
_COUNTED = 4 * MAX_CATEGORIES
_UNIT = list(UNIT_KEYS)

_KEYS = [*_UNIT, "condition"]
#: Threads of the sample-mean CIs' draws (and the store's binning beside them).
_WORKERS = 3


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
    reads = _Reads(store, run_ids, plain, fields=(score_field,))
    bootstrap = (n_resamples, seed, level, ci)
    return _oncu_summary(reads, score_field, tuple(group_key), tuple(conditions), bootstrap)


def _oncu_summary(
    reads: _Reads,
    score_field: str,
    key: tuple[str, ...],
    conditions: tuple[str, ...],
    bootstrap: tuple[int, int, float, bool],
) -> pd.DataFrame:
    """:func:`store_oncu_summary` on the reads of some rows."""
    groups, sample, grid, exact = reads.once(
        ("oncu_groups", score_field, key), lambda: _oncu_groups(reads, score_field, key)
    )
    # shared with the groups table (StoredRows.oncu_groups) and other summaries: copies
    groups, sample = groups.copy(), {unit: dict(means) for unit, means in sample.items()}

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
        grid.rule(key),
        conditions,
        bootstrap,
        lambda: coarsen(key, share_of, grid.rule),
    )


def _oncu_groups(
    reads: _Reads, score_field: str, key: tuple[str, ...]
) -> tuple[pd.DataFrame, dict[tuple, dict], _LengthGrid, pd.DataFrame]:
    """:func:`core.oncu.metrics.oncu_groups` of some rows, with what the summary needs.

    Returns ``(groups, sample means, length grid, census)``: the groups, each unit's sample
    means of the score, the length rule and the census with exact lengths.
    """
    if score_field not in SCORE_FIELDS:
        raise ValueError(f"score field '{score_field}' is not one of {SCORE_FIELDS}")
    cells = _cells(key)
    cols = [*_UNIT, *cells]
    read = reads.group_cells(cells, score_field)
    stored = read[[*cols, "condition", "rows"]].assign(
        scored=read[f"scored_{score_field}"], total=read[f"total_{score_field}"]
    )
    exact = reads.census(cells)  # lengths exact: coarser keys sum it
    grid = _LengthGrid(reads, exact)
    rule = grid.rule(key)
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
    return groups, sample, grid, exact


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
    return _sample_means(_Reads(store, run_ids, plain), ci, (n_resamples, seed, level, ci_method))


def _sample_means(reads: _Reads, ci: bool, bootstrap: tuple[int, int, float, str]) -> pd.DataFrame:
    """:func:`store_sample_means` on the reads of some rows."""
    scores = list(MEAN_SCORES)
    cells = reads.sample_cells(spread=ci).sort_values(_KEYS, kind="stable").reset_index(drop=True)
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
        _add_cis(reads, cells, rows, scores, bootstrap)
    return pd.DataFrame(rows)


def _add_cis(
    reads: _Reads,
    cells: pd.DataFrame,
    rows: list[dict],
    scores: list[str],
    bootstrap: tuple[int, int, float, str],
) -> None:
    """Each row's CIs: small cells resampled from their values, large ones by counts."""
    n_resamples, seed, level, method = bootstrap
    methods = [ci_method(method, int(n)) for n in cells["n"]]
    slow = [g for g, m in enumerate(methods) if m == "resample"]
    if slow:
        want = [(rows[g]["run"], rows[g]["condition"]) for g in slow]
        values = reads.store.cell_scores(reads.runs, scores, want, reads.plain)
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

    def interval(cats, counts, missing: int, spread) -> tuple[float, float]:
        """The percentile interval of the counts' resampled means."""
        boot = multinomial_counts(cats, counts, missing, n_resamples, seed, spread)
        boot = boot[np.isfinite(boot)]
        return tuple(float(x) for x in np.percentile(boot, q)) if boot.size else (math.nan,) * 2

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
    hists = reads.value_counts(tuple(s for s in scores if counted[s]))
    wide = {
        s: [g for g in fast if g not in set(counted[s]) and cells.at[g, f"n_{s}"] > 0]
        for s in scores
    }
    jobs: dict[tuple, Future] = {}
    inputs: dict[tuple[int, str], tuple] = {}
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:

        def draw(g: int, s: str, got: tuple) -> None:
            """Queue the draws of one column of a cell.

            The same counts are drawn once (seeded: the same interval); without evidence a
            cell's columns often hold the same (zeros only).
            """
            cats, counts, spread = got
            missing = int(cells.at[g, "n"]) - int(cells.at[g, f"n_{s}"])
            key = (
                np.asarray(cats, dtype=float).tobytes(),
                np.asarray(counts, dtype=np.int64).tobytes(),
                missing,
                None if spread is None else np.asarray(spread, dtype=float).tobytes(),
            )
            if key not in jobs:
                jobs[key] = pool.submit(interval, cats, counts, missing, spread)
            inputs[(g, s)] = (key, spread is not None)

        # the wide columns binned in the store while the counted ones are drawn (DuckDB and
        # NumPy's draws leave the interpreter lock)
        binning = {
            s: pool.submit(
                _store_bins,
                reads,
                s,
                [
                    (rows[g]["run"], rows[g]["condition"])
                    + (cells.at[g, f"lo_{s}"], cells.at[g, f"hi_{s}"])
                    for g in wide[s]
                ],
            )
            for s in scores
            if wide[s]
        }
        for s in scores:
            for g in fast:
                if g not in set(wide[s]) and int(cells.at[g, f"n_{s}"]):
                    draw(g, s, _counts(hists[(rows[g]["run"], rows[g]["condition"])][s]))
        for s, future in binning.items():
            bins = future.result()
            for g in wide[s]:
                key = (rows[g]["run"], rows[g]["condition"])
                draw(g, s, bins[key] if key in bins else _counts(hists[key][s]))
        for g in fast:
            binned = False
            for s in scores:
                lo = hi = math.nan
                if (g, s) in inputs:
                    key, spread = inputs[(g, s)]
                    lo, hi = jobs[key].result()
                    binned = binned or spread
                rows[g][f"{s}_ci_low"], rows[g][f"{s}_ci_high"] = lo, hi
            rows[g]["ci_method"] = "multinomial-binned" if binned else "multinomial"


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


def _store_bins(reads: _Reads, column: str, limits: list) -> dict:
    """(run, condition) -> (bin means, counts, spreads), binned in the store."""
    out = {}
    table = reads.store.binned_counts(reads.runs, column, limits, BINS, reads.plain)
    for key, part in table.groupby(["run", "condition"], sort=False):
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

    def __init__(self, reads: _Reads, census: pd.DataFrame) -> None:
        self._read = lambda: reads.store.length_grid(reads.runs, reads.plain)
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
        return small_grid(*self._read())

    def rule(self, key: Sequence[str]) -> str | None:
        """:func:`core.oncu.groups.length_rule` on these rows (their grid read once)."""
        return length_rule(key, self._on_grid_once)

    def _on_grid_once(self) -> bool:
        if self._grid is None:
            self._grid = self._on_grid()
        return self._grid


class _Reads:
    """The store reads of one set of rows, each made once (a page's figures share them)."""

    def __init__(
        self, store, run_ids: Sequence[str], plain: bool, fields: Sequence[str] = SCORE_FIELDS
    ) -> None:
        self.store, self.runs, self.plain = store, list(run_ids), plain
        self.fields = tuple(fields)  # the score fields the group cells sum
        self._memo: dict[tuple, Any] = {}
        # one lock per key: a thread asking for a read another makes waits for it (a page
        # prefetches its sample means beside its ONCU summary); keys nest one way only
        # (summary -> census -> group pass; means -> sample pass, counts): no deadlock
        self._locks: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    def once(self, key: tuple, read: Callable[[], Any]) -> Any:
        """``read()``, made once per key (by one thread; the others wait for it)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = read()
            return self._memo[key]

    def _started(self, key: tuple) -> bool:
        """Whether ``key`` is read or being read."""
        with self._lock:
            return key in self._memo or key in self._locks

    def group_cells(self, cells: list[str], field: str) -> pd.DataFrame:
        """The group cells of ``field`` and the other fields of :attr:`fields`.

        A page's reads sum every ONCU score field at once: a changed score field reads
        nothing.
        """
        fields = self.fields if field in self.fields else (field,)
        return self._pass(cells, fields)[0]

    def _pass(self, cells: list[str], fields: tuple[str, ...]) -> tuple:
        """The store's group pass: ``(group cells, census or None)``."""
        return self.once(
            ("groups", fields, *cells),
            lambda: self.store.group_pass(self.runs, fields, cells, self.plain),
        )

    def census(self, cells: list[str]) -> pd.DataFrame:
        """The instances per group of ``cells`` (lengths exact)."""
        return self._census(cells)[0]

    def _census(self, cells: list[str]) -> tuple[pd.DataFrame, bool]:
        """From the group pass where it tells (its rows read anyway), else a pass of its own."""

        def read() -> tuple[pd.DataFrame, bool]:
            derived = self._pass(cells, self.fields)[1]
            if derived is not None:
                return derived
            return self.store.group_census(self.runs, cells, self.plain)

        return self.once(("census", *cells), read)

    def same_instances(self) -> bool:
        """Whether every run holds the same instances.

        From any census made, else the default group key's (the ONCU summary reads it next).
        """
        with self._lock:  # another thread may add to the memo meanwhile
            made = [v for k, v in self._memo.items() if k[0] == "census"]
        return made[0][1] if made else self._census(_cells(DEFAULT_GROUP_KEY))[1]

    def sample_cells(self, spread: bool) -> pd.DataFrame:
        """The sample cells; with ``spread`` read with the value counts of few-valued columns."""
        if spread or self._started(("sample", True)):
            return self._sample_pass()[0]
        return self.once(
            ("sample", False),
            lambda: self.store.sample_cells(self.runs, MEAN_SCORES, self.plain, spread=False),
        )

    def _sample_pass(self) -> tuple[pd.DataFrame, dict]:
        return self.once(
            ("sample", True),
            lambda: self.store.sample_pass(self.runs, MEAN_SCORES, self.plain, _COUNTED),
        )

    def value_counts(self, columns: tuple[str, ...]) -> dict:
        """(run, condition) -> column -> {value: count}: the sample pass's, else read."""
        counted = self._sample_pass()[1] if self._started(("sample", True)) else {}
        have = {c for c in columns if all(c in v for v in counted.values())} if counted else set()
        rest = tuple(c for c in columns if c not in have)
        read = (
            self.once(
                ("counts", *rest), lambda: self.store.value_counts(self.runs, rest, self.plain)
            )
            if rest
            else {}
        )
        keys = set(counted) | set(read)
        return {
            k: {**{c: counted.get(k, {}).get(c, {}) for c in have}, **read.get(k, {})} for k in keys
        }


class StoredRows:
    """An analysis frame's rows left in the store: the study-scale input of the metrics.

    :func:`core.oncu.metrics.oncu_summary` and :func:`core.oncu.metrics.sample_level_means`
    given one compute in the store (:func:`store_oncu_summary`, :func:`store_sample_means`);
    the store reads are made once per object and shared by every call on it.

    Args:
        store: the :class:`core.store.Store`.
        run_ids: the runs (their every score row; unfiltered, unpaired).
        plain: only rows without an intervention variant.
        n: how many rows (predictions) that is.
    """

    def __init__(
        self,
        store,
        run_ids: Sequence[str],
        plain: bool,
        n: int,
        frame: Callable[[], pd.DataFrame] | None = None,
    ) -> None:
        self._reads = _Reads(store, run_ids, plain)
        self.n = int(n)
        self._frame = frame

    @property
    def columns(self) -> list[str]:
        """The unit keys and ``condition`` (what the metrics ask a frame for)."""
        return [*_UNIT, "condition"]

    def frame(self) -> pd.DataFrame:
        """The rows as a frame, for what the store does not compute (per-instance ONCU).

        Raises:
            ValueError: no frame was given.
        """
        if self._frame is None:
            raise ValueError("these rows are left in the store: no frame to compute on")
        return self._frame()

    def oncu_groups(self, score_field: str, group_key: Sequence[str]) -> pd.DataFrame:
        """:func:`core.oncu.metrics.oncu_groups` of these rows (per instance: of the frame)."""
        key = tuple(group_key)
        if "instance_id" in key:
            from core.oncu.groups import oncu_groups

            return oncu_groups(self.frame(), score_field, key)
        return self._reads.once(
            ("oncu_groups", score_field, key),
            lambda: _oncu_groups(self._reads, score_field, key),
        )[0].copy()

    @property
    def empty(self) -> bool:
        """Whether there are no rows."""
        return self.n == 0

    def __len__(self) -> int:
        return self.n

    def oncu_summary(
        self,
        score_field: str,
        group_key: Sequence[str],
        conditions: Sequence[str],
        bootstrap: tuple[int, int, float, bool],
    ) -> pd.DataFrame:
        """:func:`store_oncu_summary` of these rows; ``bootstrap``: (resamples, seed, level, ci)."""
        key = tuple(group_key)
        if "instance_id" in key:
            from core.oncu.metrics import oncu_summary

            n_resamples, seed, level, ci = bootstrap
            return oncu_summary(
                self.frame(), score_field, key, conditions, n_resamples, seed, level, ci
            )
        return _oncu_summary(self._reads, score_field, key, tuple(conditions), bootstrap)

    def sample_means(self, ci: bool, bootstrap: tuple[int, int, float, str]) -> pd.DataFrame:
        """:func:`store_sample_means` of these rows (made once per estimator).

        ``bootstrap``: (resamples, seed, level, estimator).
        """
        return self._reads.once(
            ("means", ci, *bootstrap), lambda: _sample_means(self._reads, ci, bootstrap)
        )

    def same_instances(self) -> bool:
        """Whether every run holds the same instances.

        Several runs of one dataset are paired by instance: then pairing keeps every row.
        """
        return self._reads.same_instances()

    def scored_counts(self, column: str) -> dict[tuple[str, str], int]:
        """(run, condition) -> rows whose ``column`` is a finite number."""
        cells = self._reads.sample_cells(spread=False)
        return {
            (r, c): int(k)
            for r, c, k in zip(cells["run"], cells["condition"], cells[f"n_{column}"], strict=True)
        }
