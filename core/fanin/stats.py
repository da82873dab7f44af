"""Cell summaries of the fan-in analysis and the bootstrap over them (issue 17 items 6, 7).

The fan-in views need, per (system, fan-in) cell, only: row counts (answered, missing,
failures) and, per metric (AC, ER, EP), a histogram of the values. The store path reads each
prediction's numbers for every answer score in one DuckDB query
(:func:`core.store.fanin_rows.fanin_rows`) and :class:`StoreSummaries` summarizes them per
score field with numpy group sums; :func:`summaries_from_rows` computes the same from
:func:`core.fanin.metrics.per_instance` rows, so both paths give the same numbers.

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
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.store.fanin_rows import CONDITION_CODES

__all__ = [
    "BINS",
    "METRIC_SCALE",
    "STRATA",
    "FaninSummaries",
    "item_bins",
    "merge_items",
    "merged_items",
    "pair_counts",
    "summary_bootstrap",
    "StoreSummaries",
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
    """What the fan-in aggregates are computed from (one score field).

    Attributes:
        systems: ``sys, run, model, dataset, condition`` in display order.
        cells: ``sys, fan_in, n_rows, n_missing, n_fail, n_fail_packed, n_fail_low``.
        items: ``sys, fan_in, metric, bin, count, sum, sumsq, vmin, vmax``.
        pairs: ``sys_a, sys_b, n_held, n_common, n_fail_a, n_fail_b, n_fail_both`` per
            system pair (``sys_a < sys_b``; see :func:`pair_counts`).
        n_no_gold: plain-condition rows whose instance has no gold evidence.
        draws: bootstrap results of ER / EP item sets, keyed by the merged items, resamples
            and seed (:func:`summary_bootstrap`, a function of those alone), shared by the
            score fields of one :class:`StoreSummaries`: another field whose missing rows are
            the same has the same ER / EP items and does not draw them again.
    """

    systems: pd.DataFrame
    cells: pd.DataFrame
    items: pd.DataFrame
    pairs: pd.DataFrame
    n_no_gold: int
    draws: dict = field(default_factory=dict, compare=False, repr=False)


def item_bins(values: np.ndarray, scale: float, bins: int = BINS) -> np.ndarray:
    """The bin of each value (-1 for NaN), as the store computes it: floor(v x bins / scale)."""
    v = np.asarray(values, dtype=float)
    fin = np.isfinite(v)
    if fin.all():  # no copies of the finite values (the same numbers)
        b = np.multiply(v, bins)
        b /= scale
        np.floor(b, out=b)
        np.clip(b, 0, bins - 1, out=b)
        return b.astype(np.int64)
    out = np.full(v.shape, -1, dtype=np.int64)
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
    inst = np.asarray(inst)
    state = np.asarray(state)
    n_inst = int(inst.max()) + 1
    # one scatter index for the three 0/1 matrices (int64, whatever the inputs' dtypes)
    flat = np.multiply(np.asarray(sys), n_inst, dtype=np.int64)
    flat += inst
    # sums of at most n_inst products of 0 and 1: exact in float32 below 2^24 (half the memory)
    mats = np.zeros((3, n_sys * n_inst), dtype=np.float32 if n_inst < 1 << 24 else np.float64)
    mats[0, flat] = 1.0
    mats[1, flat] = state > 0
    mats[2, flat] = state == 2
    held, scored, failed = (m.reshape(n_sys, n_inst) for m in mats)
    both_held = held @ held.T
    both_scored = scored @ scored.T
    fail_common = failed @ scored.T  # [a, b]: a failed, b answered (a answered: it failed)
    fail_both = failed @ failed.T
    a, b = np.triu_indices(n_sys, k=1)
    return pd.DataFrame(
        {
            "sys_a": a,
            "sys_b": b,
            "n_held": both_held[a, b].astype(int),
            "n_common": both_scored[a, b].astype(int),
            "n_fail_a": fail_common[a, b].astype(int),
            "n_fail_b": fail_common[b, a].astype(int),
            "n_fail_both": fail_both[a, b].astype(int),
        }
    )


def summaries_from_rows(per: pd.DataFrame, n_no_gold: int = 0) -> FaninSummaries:
    """:class:`FaninSummaries` of :func:`core.fanin.metrics.per_instance` rows with fan-in > 0.

    Systems are numbered in order of first appearance (as the store numbers them by run,
    instance order and condition).
    """
    sys_names = list(dict.fromkeys(per["system"]))
    index = {s: i for i, s in enumerate(sys_names)}
    first = per.drop_duplicates("system").set_index("system")
    systems = pd.DataFrame(
        {
            "sys": range(len(sys_names)),
            "run": [first.at[s, "run"] for s in sys_names],
            "model": [first.at[s, "model"] for s in sys_names],
            "dataset": [first.at[s, "dataset"] for s in sys_names],
            "condition": [first.at[s, "condition"] for s in sys_names],
        }
    )
    df = pd.DataFrame(
        {
            "sys": per["system"].map(index).to_numpy(dtype=np.int64),
            "fan_in": per["fan_in"].to_numpy(dtype=np.int64),
            "ac": per["ac"].to_numpy(dtype=float),
            "er": per["er"].to_numpy(dtype=float),
            "ep": per["ep"].to_numpy(dtype=float),
        }
    )
    gone = per["missing"].fillna(False).to_numpy(dtype=bool) | np.isnan(df["ac"].to_numpy())
    df["missing"] = gone
    ok = ~gone
    fail = ok & (df["ac"].to_numpy() < 33.0)
    df["n_fail"] = fail
    df["n_fail_packed"] = fail & np.isfinite(df["er"].to_numpy())
    df["n_fail_low"] = fail & (df["er"].to_numpy() < 0.5)
    grouped = df.groupby(["sys", "fan_in"], sort=True)
    cells = grouped.agg(
        n_rows=("ac", "size"),
        n_missing=("missing", "sum"),
        n_fail=("n_fail", "sum"),
        n_fail_packed=("n_fail_packed", "sum"),
        n_fail_low=("n_fail_low", "sum"),
    ).reset_index()
    frames = []
    answered = df[ok]
    for metric, scale in METRIC_SCALE.items():
        v = answered[metric].to_numpy(dtype=float)
        part = pd.DataFrame(
            {
                "sys": answered["sys"].to_numpy(),
                "fan_in": answered["fan_in"].to_numpy(),
                "bin": item_bins(v, scale),
                "v": np.where(np.isfinite(v), v, np.nan),
            }
        )
        part["v2"] = part["v"] ** 2
        g = part.groupby(["sys", "fan_in", "bin"], sort=True)
        agg = g.agg(
            count=("bin", "size"),
            sum=("v", "sum"),
            sumsq=("v2", "sum"),
            vmin=("v", "min"),
            vmax=("v", "max"),
        ).reset_index()
        agg.insert(2, "metric", metric)
        frames.append(agg)
    items = (
        pd.concat(frames, ignore_index=True)[_ITEM_COLS]
        if frames
        else pd.DataFrame(columns=_ITEM_COLS)
    )
    codes = pd.factorize(per["instance_id"].astype(str), sort=True)[0]
    state = np.where(gone, 0, np.where(fail, 2, 1))
    pairs = pair_counts(codes, df["sys"].to_numpy(), state, len(sys_names))
    return FaninSummaries(
        systems, cells.astype({c: int for c in cells.columns}), items, pairs, int(n_no_gold)
    )


class StoreSummaries:
    """:class:`FaninSummaries` of :func:`core.store.fanin_rows.fanin_rows` rows, any field.

    The per-row arrays (rows with fan-in > 0) are prepared once; each score field's
    summaries are computed on first use (numpy group sums, tens of ms per million rows) and
    kept; once every field is summarized the arrays are dropped. The values are those
    :func:`core.fanin.metrics.per_instance` gives (``missing``: a NaN score or a non-blank
    ``error``; AC = 100 x score; ER and EP over passage-id sets, NaN without a pack or when
    missing), so this path, :func:`summaries_from_rows` and the definitions give the same
    numbers. Systems are numbered by run id, then the smallest instance order among their
    rows, then condition name. Thread-safe (the dashboard's sessions share cached values).

    Args:
        raw: ``{"runs": ..., "rows": ..., "scores": ...}`` as
            :func:`core.store.fanin_rows.fanin_rows` (without ``scores``, the score columns
            are read from ``rows``).
        fields: the score fields that may be asked for (columns of the scores), each read
            when it is first summarized.
    """

    def __init__(self, raw: dict[str, Any], fields: Sequence[str]) -> None:
        rows, runs = raw["rows"], raw["runs"]
        fan_all = np.asarray(rows["fan_in"])
        self.n_no_gold = int((fan_all == 0).sum())
        keep = fan_all > 0
        self._scores: Mapping[str, Any] | None = raw.get("scores", rows)
        self._keep = keep if self.n_no_gold else None
        fields = tuple(fields)
        if self.n_no_gold:
            rows = {k: np.asarray(v)[keep] for k, v in rows.items() if k not in fields}
        fan = np.asarray(rows["fan_in"])
        n_cond = len(CONDITION_CODES)
        key = np.asarray(rows["run_no"], dtype=np.int64) * n_cond + rows["cond"]
        keys = np.flatnonzero(np.bincount(key)) if key.size else key  # sorted, no sort
        first = np.full(int(keys.max()) + 1 if keys.size else 0, np.iinfo(np.int64).max)
        # int64 values: the ufunc's fast loop (a mixed-dtype ``at`` is ~25x slower)
        np.minimum.at(first, key, np.asarray(rows["ord"], dtype=np.int64))
        info = runs.set_index("run_no")
        heads = sorted(
            (
                str(info.at[int(k) // n_cond, "run_id"]),
                int(first[k]),
                CONDITION_CODES[int(k) % n_cond],
                int(k),
            )
            for k in keys
        )
        # narrow per-row numbers (int16 systems, int32 cells): fewer pages of fresh memory,
        # the costliest part of every 10M-row array here
        sys_of = np.zeros(first.size, dtype=np.int16 if len(heads) < 1 << 15 else np.int64)
        sys_of[[h[3] for h in heads]] = np.arange(len(heads))
        self.systems = pd.DataFrame(
            {
                "sys": np.arange(len(heads), dtype=np.int64),
                "run": [h[0] for h in heads],
                "model": [info.at[h[3] // n_cond, "model"] for h in heads],
                "dataset": [info.at[h[3] // n_cond, "dataset_id"] for h in heads],
                "condition": [h[2] for h in heads],
            }
        )
        self.n_fan = int(fan.max()) + 1 if fan.size else 1
        sys = sys_of[key]
        wide = len(heads) * self.n_fan >= 1 << 22  # cell x (BINS + 1) stays within int32
        # ER and EP are functions of the small counts: their items come from the distinct
        # counts (_pack_items), and per-row values only when those are too spread out
        self._arrays: dict[str, np.ndarray] | None = {
            "sys": sys,
            "cell": np.multiply(sys, self.n_fan, dtype=np.int64 if wide else np.int32) + fan,
            "err": np.asarray(rows["err"], dtype=bool),
            "code": np.asarray(rows["code"]),
            "has_pack": np.asarray(rows["has_pack"], dtype=bool),
            **{k: np.asarray(rows[k]) for k in ("n_hits", "n_gold", "n_pack")},
        }
        self._arrays["pack_state"] = _pack_state(self._arrays)
        # per row, for _summarize: a failure's state (2 + pack state) and the cell's first count
        self._arrays["fail_state"] = self._arrays["pack_state"] + np.int8(2)
        self._arrays["cell5"] = np.multiply(
            self._arrays["cell"], 5, dtype=np.int64 if wide else np.int32
        )
        self.fields = tuple(fields)
        self._done: dict[str, FaninSummaries] = {}
        self._pack_items: dict[bytes, list[pd.DataFrame]] = {}  # ER / EP items per mask
        self._lock = threading.Lock()
        self._draws: dict = {}  # ER / EP bootstrap results, shared by the fields (FaninSummaries)

    def __getitem__(self, field: str) -> FaninSummaries:
        """The summaries with AC from ``field``.

        Raises:
            KeyError: a field not given to the constructor.
        """
        with self._lock:
            if field not in self._done:
                if field not in self.fields or self._arrays is None:
                    raise KeyError(field)
                self._done[field] = self._summarize(self._arrays, self._score(field))
                if len(self._done) == len(self.fields):
                    self._arrays = self._scores = None
                    self._pack_items.clear()
            return self._done[field]

    def _score(self, field: str) -> np.ndarray:
        """The rows' (fan-in > 0) values of the score ``field``."""
        if self._scores is None:  # every field summarized: nothing left to read
            raise KeyError(field)
        score = np.asarray(self._scores[field], dtype=float)
        return score if self._keep is None else score[self._keep]

    def _summarize(self, arr: dict[str, np.ndarray], score: np.ndarray) -> FaninSummaries:
        cell, n_fan = arr["cell"], self.n_fan
        n_cells = len(self.systems) * n_fan
        missing = np.isnan(score) | arr["err"]
        ok = ~missing
        every = not missing.any()  # nothing missing: no copies of the answered rows
        ac = np.multiply(score, 100.0)
        if not every:
            ac[missing] = np.nan
        fail = ac < 33.0  # False for NaN: the answered rows with AC < 33
        # one integer count per (cell, row state): 0 answered, 1 missing, 2 + pack state a
        # failure (AC < 33) without a pack, with one, with one and ER < 0.5 (_pack_state)
        # (one pass each: boolean-mask writes and gathers cost several over ten million rows)
        state = np.where(fail, arr["fail_state"], missing.view(np.int8))
        at = np.add(arr["cell5"], state, dtype=arr["cell5"].dtype)
        by = np.bincount(at, minlength=n_cells * 5).reshape(n_cells, 5)
        counts = {
            "n_rows": by.sum(axis=1),
            "n_missing": by[:, 1],
            "n_fail": by[:, 2:].sum(axis=1),
            "n_fail_packed": by[:, 3:].sum(axis=1),
            "n_fail_low": by[:, 4],
        }
        held = np.flatnonzero(counts["n_rows"])
        cells = pd.DataFrame(
            {
                "sys": held // n_fan,
                "fan_in": held % n_fan,
                **{k: v[held].astype(np.int64) for k, v in counts.items()},
            }
        )
        # ER and EP depend on the field only through which rows are missing
        mask = np.packbits(missing).tobytes()
        if mask not in self._pack_items:
            self._pack_items[mask] = _pack_items(arr, ok, n_fan) or [
                _group_items(cell[ok], v[ok], m, METRIC_SCALE[m], n_fan)
                for m, v in zip(("ep", "er"), _pack_values(arr), strict=True)
            ]
        # pair_counts' states: 0 missing, 1 answered, 2 answered with AC < 33; counted on a
        # thread of its own while AC's items are grouped (its scatters and products leave
        # the interpreter lock)
        with ThreadPoolExecutor(max_workers=1) as pool:
            paired = pool.submit(
                pair_counts, arr["code"], arr["sys"], _PAIR_STATE[state], len(self.systems)
            )
            ac_items = _group_items(
                cell if every else cell[ok], ac if every else ac[ok], "ac", 100.0, n_fan
            )
            pairs = paired.result()
        items = pd.concat([ac_items, *self._pack_items[mask]], ignore_index=True)
        items = items.sort_values(["sys", "fan_in", "metric", "bin"], kind="stable")
        return FaninSummaries(
            self.systems, cells, items.reset_index(drop=True), pairs, self.n_no_gold, self._draws
        )


#: :func:`pair_counts`' state of each row state of :meth:`StoreSummaries._summarize`.
_PAIR_STATE = np.array([1, 0, 2, 2, 2], dtype=np.int8)


def _pack_state(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Per row: 0 no pack (or no gold), 1 a pack, 2 a pack with ER < 0.5 (int8).

    ER = hits / gold is finite exactly with a pack and gold, and below 0.5 exactly when
    2 hits < gold (the quotient of small integers is not rounded across 0.5). The same for
    every score field: computed once.
    """
    packed = arr["has_pack"] & (arr["n_gold"] > 0)
    low = packed & (2 * arr["n_hits"] < arr["n_gold"])
    return packed.astype(np.int8) + low


def _group_items(
    cell: np.ndarray,
    v: np.ndarray,
    metric: str,
    scale: float,
    n_fan: int,
    weight: np.ndarray | None = None,
    n_rows: int | None = None,
) -> pd.DataFrame:
    """Item rows (``_ITEM_COLS``) of one metric: values grouped by (cell, bin).

    With ``weight``, each value stands for ``weight`` rows (``n_rows`` in all).
    """
    width = BINS + 1  # bin -1 (NaN) and 0 .. BINS - 1
    group = item_bins(v, scale)
    group += 1
    group += cell * width
    fin = np.isfinite(v)
    every = bool(fin.all())
    val = v if every else np.where(fin, v, 0.0)
    size = int(group.max()) + 1 if group.size else 0
    w = None if weight is None else weight.astype(float)
    count = np.bincount(group, weights=w, minlength=size)
    if w is not None:
        count = count.astype(np.int64)
    total = _sum_by(group, val, size, w, n_rows)
    sq = _sum_by(group, val * val, size, w, n_rows)
    vmin = np.full(size, np.inf)
    vmax = np.full(size, -np.inf)
    g_fin, v_fin = (group, v) if every else (group[fin], v[fin])
    np.minimum.at(vmin, g_fin, v_fin)
    np.maximum.at(vmax, g_fin, v_fin)
    g = np.flatnonzero(count)
    nan_bin = g % width == 0
    c = g // width
    return pd.DataFrame(
        {
            "sys": c // n_fan,
            "fan_in": c % n_fan,
            "metric": metric,
            "bin": g % width - 1,
            "count": count[g],
            "sum": total[g],
            "sumsq": sq[g],
            "vmin": np.where(nan_bin, np.nan, vmin[g]),
            "vmax": np.where(nan_bin, np.nan, vmax[g]),
        }
    )


def _pack_values(arr: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: EP and ER (NaN without a pack; EP 0 for an empty pack)."""
    has_pack = arr["has_pack"]
    hits = np.asarray(arr["n_hits"], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        er = np.where(has_pack, hits / arr["n_gold"], np.nan)
        ep = np.where(has_pack, np.where(arr["n_pack"] == 0, 0.0, hits / arr["n_pack"]), np.nan)
    return ep, er


#: The per-row numbers ER and EP are functions of.
_PACK_COUNTS = ("has_pack", "n_hits", "n_gold", "n_pack")
_KEYED = ("cell", *_PACK_COUNTS)


def _pack_key(arr: dict[str, np.ndarray]) -> tuple[np.ndarray | None, list[int]]:
    """Per row: (cell, has_pack, n_hits, n_gold, n_pack) as one number, and the dimensions.

    The same for every score field, so :func:`_pack_items` counts each field's rows by it
    without building it again. None when a count is negative or the numbers' range is too
    wide for a dense count table (:func:`_pack_items` then returns no items).
    """
    cell = arr["cell"]
    parts = [arr[k] for k in _PACK_COUNTS]
    if not cell.size or min(int(p.min()) for p in parts[1:]) < 0:
        return None, []
    dims = [2, *(int(p.max()) + 1 for p in parts[1:])]
    space = (int(cell.max()) + 1) * math.prod(dims)
    if space > max(4 * cell.size, 1 << 20):
        return None, []
    # in place, in the narrowest integers that hold the key (a fifth of the int64 passes)
    key = cell.astype(np.int32 if space < 1 << 31 else np.int64)
    for p, d in zip(parts, dims, strict=True):
        key *= d
        key += p
    return key, dims


def _pack_items(arr: dict[str, np.ndarray], ok: np.ndarray, n_fan: int) -> list[pd.DataFrame]:
    """EP and ER item rows of the ``ok`` rows, as :func:`_group_items` gives them.

    ER and EP are functions of ``(has_pack, n_hits, n_gold, n_pack)``, so the rows are
    counted per distinct (cell, counts) (:func:`_pack_key`, kept in ``arr`` as ``pack_key``
    and ``pack_dims`` for the next field; an empty key: too wide) and each distinct value
    is binned once: the same counts, bins, minima and maxima, and sums within about one ulp
    of the exact sums (as :func:`_sum_by`), at a fraction of the per-row cost. Empty when
    the ``ok`` rows' counts range too wide for a dense count table (the caller then works
    per row).
    """
    if "pack_key" not in arr:  # the same for every score field: built once
        built, shape = _pack_key(arr)
        arr["pack_key"] = np.zeros(0, dtype=np.int32) if built is None else built
        arr["pack_dims"] = np.asarray(shape, dtype=np.int64)
    key: np.ndarray | None = arr["pack_key"] if arr["pack_dims"].size else None
    dims, every = [int(d) for d in arr["pack_dims"]], bool(ok.all())
    if not ok.any():
        return []
    if key is not None:
        counts = np.bincount(key if every else key[ok])
    else:  # too wide over every row: perhaps not over these
        key, dims = (None, []) if every else _pack_key({k: arr[k][ok] for k in _KEYED})
        if key is None:
            return []
        counts = np.bincount(key)
    k = np.flatnonzero(counts)
    weight = counts[k]
    vals = []
    for d in reversed(dims):
        k, v = np.divmod(k, d)
        vals.append(v)
    n_pack, n_gold, hits, has_pack = vals
    # the ok rows' own range decides, as it did when the key was built from them alone
    sizes = [int(v.max()) + 1 for v in (k, hits, n_gold, n_pack)]
    if sizes[0] * 2 * math.prod(sizes[1:]) > max(4 * int(weight.sum()), 1 << 20):
        return []
    hits = hits.astype(float)
    # the per-row definitions (StoreSummaries.__init__), one value per distinct counts
    with np.errstate(invalid="ignore", divide="ignore"):
        er = np.where(has_pack == 1, hits / n_gold, np.nan)
        ep = np.where(has_pack == 1, np.where(n_pack == 0, 0.0, hits / n_pack), np.nan)
    n_rows = int(weight.sum())
    return [
        _group_items(k, ep, "ep", METRIC_SCALE["ep"], n_fan, weight, n_rows),
        _group_items(k, er, "er", METRIC_SCALE["er"], n_fan, weight, n_rows),
    ]


def _sum_by(
    group: np.ndarray,
    v: np.ndarray,
    size: int,
    weight: np.ndarray | None = None,
    n_rows: int | None = None,
) -> np.ndarray:
    """Per-group sums of finite ``v``, within about one ulp of the exact sums.

    Each value is split into a part on a grid of 2^-e, coarse enough that every partial sum
    of those parts is an exact float64 (whatever the order), and the remainder (< 2^-e,
    summed with a negligible error): like a compensated sum (DuckDB's ``fsum``), and unlike
    a plain running sum, the result does not drift with the number or order of the rows.
    With ``weight``, each value stands for ``weight`` rows (``n_rows`` in all): the grid is
    that of the rows, so each value's on-grid part times its weight is exact too.
    """
    top = max(float(v.max()), -float(v.min())) if v.size else 0.0  # max |v|, no copy
    n = v.size if n_rows is None else n_rows
    if top == 0.0:
        return np.bincount(group, weights=v if weight is None else v * weight, minlength=size)
    e = min(1000, 52 - math.frexp(top)[1] - math.ceil(math.log2(n + 1)))
    scale = 2.0**e
    hi = np.multiply(v, scale)  # floor(v x scale) / scale, in place
    np.floor(hi, out=hi)
    hi /= scale
    if weight is not None:
        lo = v - hi
        hi, lo = hi * weight, lo * weight
        return np.bincount(group, weights=hi, minlength=size) + np.bincount(
            group, weights=lo, minlength=size
        )
    total = np.bincount(group, weights=hi, minlength=size)
    np.subtract(v, hi, out=hi)  # the remainder v - hi, in the same memory
    return total + np.bincount(group, weights=hi, minlength=size)


def merged_items(items: pd.DataFrame) -> dict[str, np.ndarray]:
    """Items of several cells (one metric) joined by bin, sorted by bin (canonical order)."""
    return merge_items({k: items[k].to_numpy() for k in _ITEM_COLS[3:]})


def merge_items(items: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`merged_items` of item arrays (``bin, count, sum, sumsq, vmin, vmax``)."""
    keys = ("bin", "count", "sum", "sumsq", "vmin", "vmax")
    if not len(items["bin"]):
        return {k: np.empty(0) for k in keys}
    bins, inv = np.unique(np.asarray(items["bin"], dtype=np.int64), return_inverse=True)
    out = {"bin": bins}
    for k in ("count", "sum", "sumsq"):
        out[k] = np.bincount(inv, weights=np.asarray(items[k], dtype=float), minlength=bins.size)
    for k, fn, start in (("vmin", np.minimum, np.inf), ("vmax", np.maximum, -np.inf)):
        v = np.asarray(items[k], dtype=float)
        acc = np.full(bins.size, start)
        with np.errstate(invalid="ignore"):
            fn.at(acc, inv, v)  # NaN (bin -1) propagates: pandas' min of all-NaN is NaN
        out[k] = acc
    return out


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
