"""One computation per shared page frame (issue 17 item 6).

A view cache hands the same frame object to every figure and table of a page
(:func:`core.views.oncu.plain_predictions`). :func:`share_frame` marks such a frame; then
:func:`frame_memo` computes a value of it once per key (the ONCU grouping of one score field
and group key, the sample-level means, the failure breakdown, the calibration bins, ...) and
hands DataFrames out as copies. The memo dies with the frame. Frames that are not shared are
computed every time (nothing is kept).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SHARED",
    "cell_ids",
    "error_mask",
    "frame_memo",
    "is_error",
    "isnan",
    "paired_columns",
    "scoped_memo",
    "share_frame",
]

#: Frames handed out read-only by a view cache: id -> {key: value}.
SHARED: dict[int, dict[tuple, Any]] = {}
T = TypeVar("T")


def share_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Mark ``df`` as shared and never modified (a view cache hands it out): returns it.

    :func:`core.oncu.metrics.oncu_groups` of a shared frame is computed once per (score field, group
    key) and handed out as copies, so the summary, the audit, the heatmap, the length curves,
    the length table and the scaling report of one selection share one grouping. The memo
    dies with the frame. A frame that is modified after this call would get stale values:
    only views that never modify what they cache may call it.
    """
    key = id(df)
    if key not in SHARED:
        SHARED[key] = {}
        weakref.finalize(df, SHARED.pop, key, None)
    return df


@contextmanager
def scoped_memo(df: pd.DataFrame) -> Iterator[pd.DataFrame]:
    """``df`` shared for the duration of one computation that does not modify it.

    Its key columns are factorized once for all the groupings of the computation (an ONCU
    summary groups the same columns half a dozen ways); the memo is dropped on leaving. A
    frame already shared (:func:`share_frame`) keeps its own memo.
    """
    key = id(df)
    if key in SHARED:
        yield df
        return
    SHARED[key] = {}
    try:
        yield df
    finally:
        SHARED.pop(key, None)


def frame_memo(df: pd.DataFrame, key: tuple, compute: Callable[[], T]) -> T:
    """``compute()`` once per shared frame (:func:`share_frame`) and key; frames out as copies."""
    memo = SHARED.get(id(df))
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    value = memo[key]
    return value.copy() if isinstance(value, pd.DataFrame) else value


def cell_ids(
    df: pd.DataFrame, keys: list[str], index: bool = True
) -> tuple[np.ndarray, pd.Index | None]:
    """``(each row's cell of keys as an integer in sorted key order, the cells' key values)``.

    What ``df[keys].groupby(keys, dropna=False, sort=True)`` numbers (``ngroup``) and indexes
    (``size().index``): missing key values are cells of their own, sorted last. Each key
    column is factorized once per shared frame (:func:`frame_memo`) and the codes combined,
    so a page's groupings over several keys do not hash the text columns again. With
    ``index`` False the key values are not built (None).
    """
    if not keys or len(df) == 0:
        return _grouped_ids(df, keys)
    try:
        parts = [frame_memo(df, ("codes", k), lambda k=k: _sorted_codes(df[k])) for k in keys]
    except TypeError:  # values that do not sort together: as the groupby does it
        return _grouped_ids(df, keys)
    total = 1
    for _, size in parts:
        total *= size
    if total >= 2**62:
        return _grouped_ids(df, keys)
    combined = np.zeros(len(df), dtype=np.int64)
    for codes, size in parts:
        combined = combined * size + codes
    first = None  # each cell's first row, found only when the key values are wanted
    if total <= 4 * len(df) + 1024:
        present = np.bincount(combined, minlength=total) > 0
        ids = (np.cumsum(present) - 1)[combined]
    else:
        _, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    ids = ids.astype(np.int64, copy=False)
    if not index:
        return ids, None
    if first is None:
        first = np.full(int(present.sum()), len(df), dtype=np.int64)
        np.minimum.at(first, ids, np.arange(len(df)))
    # the cells' key values exactly as the groupby makes them: grouped from one row per cell
    return ids, df[keys].iloc[first].groupby(keys, dropna=False, sort=True).size().index


def _sorted_codes(col: pd.Series) -> tuple[np.ndarray, int]:
    """``(codes in sorted value order with missing values last, number of codes)``."""
    if _one_text_value(col):  # what the factorize gives, without hashing every value
        return np.zeros(len(col), dtype=np.int64), 2
    codes, uniques = pd.factorize(col, sort=True, use_na_sentinel=True)
    size = len(uniques) + 1
    codes = codes.astype(np.int64)
    codes[codes < 0] = size - 1
    return codes, size


def _one_text_value(col: pd.Series) -> bool:
    """Whether ``col`` is Arrow-backed text holding one value in every row (none missing).

    A selection's run, model, dataset, source and variant columns usually are: comparing
    each value with the first costs a tenth of factorizing the column.
    """
    if not len(col) or not isinstance(col.array, pd.arrays.ArrowStringArray):
        return False
    values = pa.array(col.array)  # the column's own Arrow buffers (no copy)
    if values.null_count:
        return False
    return bool(pc.all(pc.equal(values, values[0])).as_py())


def _grouped_ids(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index]:
    """:func:`cell_ids` by a pandas groupby."""
    cells = df[keys].groupby(keys, dropna=False, sort=True)
    return cells.ngroup().to_numpy(), cells.size().index


def paired_columns(
    df: pd.DataFrame, unit: list[str], field: str, condition_a: str, condition_b: str
) -> list[tuple[tuple, np.ndarray, np.ndarray]] | None:
    """Per unit, the scores of two conditions aligned by instance: ``[(key, a, b), ...]``.

    What ``df.pivot_table(index=[*unit, "instance_id"], columns="condition", values=field,
    aggfunc="mean").dropna(subset=[a, b])`` grouped by unit gives, without the pivot: units
    and instances in sorted order, rows with a missing key left out, instances without a
    scored value of both conditions left out; ``[]`` when a condition has no scored value at
    all (the pivot drops its column). The score-free layout is computed once per shared frame.
    None when an (instance, condition) of a unit has several rows (the pivot averages them:
    the caller pivots).
    """
    layout = frame_memo(df, ("pair_layout", tuple(unit)), lambda: _pair_layout(df, unit))
    if layout is None:
        return None
    pair, n_pairs, unit_of_pair, unit_keys, (codes, names) = layout
    score = pd.to_numeric(df[field], errors="coerce").to_numpy(dtype=float)
    sides = []
    for c in (condition_a, condition_b):
        hit = np.flatnonzero(names == c)
        rows = np.flatnonzero((codes == hit[0]) & (pair >= 0)) if hit.size else hit
        if not (~np.isnan(score[rows])).any():
            return []
        side = np.full(n_pairs, np.nan)
        side[pair[rows]] = score[rows]
        sides.append(side)
    a, b = sides
    keep = np.flatnonzero(~np.isnan(a) & ~np.isnan(b))
    if not keep.size:
        return []
    # pairs are numbered in sorted (unit, instance) order: each unit's pairs are one run
    units = unit_of_pair[keep]
    parts = np.split(keep, np.flatnonzero(np.diff(units)) + 1)
    return [(unit_keys[unit_of_pair[p[0]]], a[p], b[p]) for p in parts]


def _pair_layout(
    df: pd.DataFrame, unit: list[str]
) -> tuple[np.ndarray, int, np.ndarray, list[tuple], tuple[np.ndarray, np.ndarray]] | None:
    """The score-free layout of :func:`paired_columns`; None for repeated (pair, condition).

    ``(pair of each row or -1 where a key is missing, number of pairs, unit of each pair,
    each unit's key values, (condition code of each row or -1, the conditions))``.
    """
    keys = [*unit, "instance_id"]
    ids, _ = cell_ids(df, keys, index=False)
    n_pairs = int(ids.max(initial=-1)) + 1
    pair = np.where(df[keys].notna().all(axis=1).to_numpy(), ids, -1)
    codes, names = pd.factorize(df["condition"], use_na_sentinel=True)
    ok = pair >= 0
    combined = pair[ok].astype(np.int64) * (len(names) + 1) + codes[ok] + 1
    if combined.size and np.bincount(combined).max() > 1:
        return None
    unit_of_pair = np.zeros(n_pairs, dtype=np.int64)
    unit_keys: list[tuple] = [()]
    if unit:
        uid, index = cell_ids(df, unit)
        unit_of_pair[ids] = uid  # every row of a pair has its unit
        unit_keys = [k if isinstance(k, tuple) else (k,) for k in index]
    return pair, n_pairs, unit_of_pair, unit_keys, (codes, np.asarray(names, dtype=object))


def isnan(x: object) -> bool:
    """Whether ``x`` is a float NaN."""
    return isinstance(x, float) and math.isnan(x)


def error_mask(col: pd.Series) -> np.ndarray:
    """:func:`is_error` of each cell of ``col`` (a bool array); missing cells are not read."""
    out = np.zeros(len(col), dtype=bool)
    present = col.notna().to_numpy()
    if present.any():
        out[present] = np.fromiter(
            (is_error(x) for x in col[present]), dtype=bool, count=int(present.sum())
        )
    return out


def is_error(x: object) -> bool:
    """Whether an ``error`` / ``parse_error`` cell is set: text that is not blank, or truthy."""
    if x is None or x is pd.NA or isnan(x):
        return False
    return bool(x.strip()) if isinstance(x, str) else bool(x)
