"""ONCU's groups: the group key, length buckets and the length grid, per-group ONCU, group sizes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.oncu.share import SHARED as _SHARED
from core.oncu.share import cell_ids as _cell_ids
from core.oncu.share import frame_memo as _memo
from core.oncu.share import is_error as _is_error  # noqa: F401 (its tests import it here)
from core.oncu.share import isnan as _isnan

__all__ = [
    "BUCKET_LENGTH",
    "DEFAULT_GROUP_KEY",
    "EXACT_LENGTH",
    "GRID_MAX_VALUES",
    "INVALID_REASONS",
    "LENGTH_BOUNDARIES",
    "LENGTH_LADDER",
    "LENGTH_RULE",
    "LENGTH_TOKENS",
    "PER_INSTANCE_KEY",
    "SCORE_FIELDS",
    "SIZE_BINS",
    "SMALL_GROUP",
    "UNIT_KEYS",
    "assemble_groups",
    "canonical_groups",
    "check_field",
    "coarsen",
    "coarser_group_key",
    "group_size_distribution",
    "length_bucket",
    "length_rule",
    "on_length_grid",
    "oncu_groups",
    "resolve_length_cell",
    "small_grid",
    "unit_keys",
]


#: Default metadata group key (seed 000 ``CUE_GROUP_FIELDS``).
DEFAULT_GROUP_KEY = (
    "source",
    "model",
    "reasoning_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
)


#: Columns that name an evaluation unit (those present in the frame are used).
UNIT_KEYS = ("run", "model", "dataset")


#: Score fields ONCU may be computed on.
SCORE_FIELDS = ("f1_relaxed", "f1_strict", "em_strict", "em_relaxed")


#: Why a group is invalid, in the order the checks run (first that applies is reported).
#: ``empty_oracle_evidence`` comes first: without gold evidence there is no oracle condition to
#: run, so "missing_oracle" would hide the cause.
INVALID_REASONS = (
    "empty_oracle_evidence",
    "missing_no_evidence",
    "missing_oracle",
    "oracle_not_above_no_evidence",
)


_REFERENCE = ("no_evidence", "oracle")


#: The length bucket ladder in tokens: 1K, 2K, 4K, ..., 128K with K = 1000 (module docstring).
LENGTH_LADDER = tuple(1000 * 2**i for i in range(8))


#: Bucket boundaries: geometric means of neighbouring ladder values (a value on one goes up).
LENGTH_BOUNDARIES = tuple(
    math.sqrt(a * b) for a, b in zip(LENGTH_LADDER[:-1], LENGTH_LADDER[1:], strict=True)
)


#: At most this many distinct lengths (and at least two instances per length on average) is a
#: small grid, whose exact lengths the auto length cell keeps.
GRID_MAX_VALUES = 12


#: Group-key name of the always-exact length cell.
EXACT_LENGTH = "context_length_exact"


#: Group-key name of the always-bucketed length cell.
BUCKET_LENGTH = "length_bucket"


_AUTO_LENGTH = "context_length"


LENGTH_TOKENS = (_AUTO_LENGTH, EXACT_LENGTH, BUCKET_LENGTH)


#: A valid group with fewer instances than this is small; most valid groups small -> warning.
SMALL_GROUP = 5


#: Group-size bins of :func:`group_size_distribution` (label, lowest size, highest size).
SIZE_BINS = (("n=1", 1, 1), ("n=2-4", 2, 4), ("n>=5", 5, None))


#: The group key of per-instance ONCU (one group per instance; unit keys are added).
PER_INSTANCE_KEY = ("instance_id",)


#: One-paragraph statement of the length cell rules (tooltips and CLI help).
LENGTH_RULE = (
    "Length cell of an ONCU group: 'context_length' (default) keeps the exact length when the "
    f"lengths are on a small grid (at most {GRID_MAX_VALUES} distinct values and at least 2 "
    "instances per value on average) and otherwise uses the length bucket; "
    "'context_length_exact' always keeps the exact length; 'length_bucket' always buckets. "
    "Bucket = nearest of 1K, 2K, 4K, 8K, 16K, 32K, 64K, 128K tokens (K = 1000) on a log2 "
    "scale; boundaries at the geometric means 1414, 2828, 5657, 11314, 22627, 45255, 90510 "
    "(1414 -> 1K, 1415 -> 2K); preset lengths 4000/8000/16000/32000 map to themselves."
)


def length_bucket(values: Sequence[object] | pd.Series | np.ndarray) -> np.ndarray:
    """The length bucket of each value: nearest ladder value on a log2 scale (float array).

    ``LENGTH_LADDER[clip(floor(log2(x / 1000) + 0.5), 0, 7)]``: boundaries at the geometric
    means of neighbours (1414.2, 2828.4, 5656.9, 11313.7, 22627.4, 45254.8, 90509.7 tokens),
    a value on a boundary goes up, values beyond the ends clamp to 1K / 128K. NaN where the
    value is missing, not a number or not positive.

    Examples: 759 -> 1000, 1414 -> 1000, 1415 -> 2000, 2237 -> 2000, 4000 -> 4000,
    5656 -> 4000, 5657 -> 8000, 200000 -> 128000.
    """
    x = pd.to_numeric(pd.Series(np.asarray(values, dtype=object)), errors="coerce").to_numpy(
        dtype=float
    )
    out = np.full(x.shape, np.nan)
    ok = np.isfinite(x) & (x > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        idx = np.floor(np.log2(x[ok] / LENGTH_LADDER[0]) + 0.5)
    idx = np.clip(idx, 0, len(LENGTH_LADDER) - 1).astype(int)
    out[ok] = np.asarray(LENGTH_LADDER, dtype=float)[idx]
    return out


def on_length_grid(df: pd.DataFrame) -> bool:
    """Whether the frame's ``context_length`` values are already on a small grid.

    A small grid: at most :data:`GRID_MAX_VALUES` (12) distinct non-missing values and at least
    two instances per distinct value on average (instances = distinct ``(dataset,
    instance_id)`` where those columns exist, else rows). Lengths that are not all numbers
    (``"4K"``) count as a grid: they are labels, compared as given. No lengths at all: a grid.
    The second condition keeps a handful of instances with exact token counts (a filtered
    HotpotQA selection) from passing as a grid.
    """
    if "context_length" not in df.columns:
        return True
    col = df["context_length"]
    present = col[col.notna()]
    if present.empty:
        return True
    # the distinct values only: a million lengths hold a handful of them
    values = present.unique()
    if pd.to_numeric(pd.Series(values), errors="coerce").isna().any():
        return True
    distinct = len(values)
    if "instance_id" in df.columns:
        keys = [k for k in ("dataset", "instance_id") if k in df.columns]
        ids, _ = _cell_ids(df, keys, index=False)  # distinct (dataset, instance), NaN equal
        instances = int(np.count_nonzero(np.bincount(ids[col.notna().to_numpy()])))
    else:
        instances = len(present)
    return small_grid(distinct, instances)


def resolve_length_cell(df: pd.DataFrame, group_key: Sequence[str]) -> str | None:
    """The length rule a group key gets on this frame: ``exact``, ``bucket`` or None.

    None when the key has no length cell; see the module docstring for the rules.
    """
    return length_rule(
        group_key, lambda: _memo(df, ("on_length_grid",), lambda: on_length_grid(df))
    )


def length_rule(group_key: Sequence[str], on_grid: Callable[[], bool]) -> str | None:
    """The length rule of a group key, ``on_grid()`` asked only for the auto length cell.

    Raises:
        ValueError: the key holds more than one length cell.
    """
    tokens = [k for k in group_key if k in LENGTH_TOKENS]
    if len(tokens) > 1:
        raise ValueError(
            f"a group key takes one length cell, got {tokens} (choose one of "
            f"{', '.join(LENGTH_TOKENS)})"
        )
    if not tokens:
        return None
    if tokens[0] == EXACT_LENGTH:
        return "exact"
    if tokens[0] == BUCKET_LENGTH:
        return "bucket"
    return "exact" if on_grid() else "bucket"


def small_grid(distinct: int, instances: int) -> bool:
    """Whether ``distinct`` lengths over ``instances`` instances are a small grid."""
    return distinct <= GRID_MAX_VALUES and instances >= 2 * distinct


def _key_frame(
    df: pd.DataFrame, group_key: Sequence[str]
) -> tuple[pd.DataFrame, list[str], str | None]:
    """``(frame, group columns, length rule)``: the frame with its length cell resolved.

    The length token of the key becomes the column ``context_length`` holding the cell's value
    (exact, or the bucket as an integer number of tokens).
    """
    rule = resolve_length_cell(df, group_key)
    key = ["context_length" if k in LENGTH_TOKENS else k for k in group_key]
    if rule is not None and "context_length" not in df.columns:
        raise ValueError(
            f"group key column(s) ['context_length'] not in the frame; columns: "
            f"{sorted(df.columns)}"
        )
    if rule == "bucket":
        b = length_bucket(df["context_length"])
        col = pd.Series(b, index=df.index)
        df = df.assign(context_length=col.astype("int64") if col.notna().all() else col)
    return df, _group_cols(df, key), rule


def unit_keys(df: pd.DataFrame) -> list[str]:
    """The columns that identify one unit (instance and run) present in ``df``."""
    return [k for k in UNIT_KEYS if k in df.columns]


def _group_cols(df: pd.DataFrame, group_key: Sequence[str]) -> list[str]:
    missing = [k for k in group_key if k not in df.columns]
    if missing:
        raise ValueError(
            f"group key column(s) {missing} not in the frame; columns: {sorted(df.columns)}"
        )
    unit = unit_keys(df)
    return unit + [k for k in group_key if k not in unit]


def _applicable(df: pd.DataFrame) -> pd.Series:
    """Row-level oracle applicability: flagged applicable and has at least one gold id."""
    ok = pd.Series(True, index=df.index)
    if "oracle_applicable" in df.columns:
        ok &= df["oracle_applicable"].fillna(False).astype(bool)
    if "gold_ids" in df.columns:
        gold = df["gold_ids"]
        if isinstance(gold.dtype, pd.ArrowDtype) and pa.types.is_list(gold.dtype.pyarrow_dtype):
            # an Arrow list column (no Python list per row): its lengths, a null list empty
            lengths = pc.fill_null(pc.list_value_length(pa.array(gold.array)), 0)
            ok &= lengths.to_numpy() > 0
        else:
            ok &= gold.map(lambda g: g is not None and not _isnan(g) and len(g) > 0)
    elif "n_gold" in df.columns:
        ok &= pd.to_numeric(df["n_gold"], errors="coerce").fillna(0) > 0
    return ok


def check_field(df: pd.DataFrame, score_field: str) -> None:
    """Raise ValueError unless ``score_field`` is a score column of ``df``."""
    if score_field not in df.columns:
        raise ValueError(f"score field '{score_field}' not in the frame (one of {SCORE_FIELDS})")
    if "condition" not in df.columns:
        raise ValueError("the frame has no 'condition' column")


def oncu_groups(
    df: pd.DataFrame,
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] = DEFAULT_GROUP_KEY,
) -> pd.DataFrame:
    """Per-group ONCU: one row per (group, contextual condition present in the group).

    Contextual = every condition but ``no_evidence`` and ``oracle``. A reference condition is
    present when it has at least one non-NaN score in the group; NaN scores (unscored or
    failed calls) are missing, never 0: means skip them and ``missing`` counts them.

    Args:
        df: scored predictions (see the module docstring).
        score_field: the score s.
        group_key: metadata columns that define a group (the unit keys are always added); the
            length cell is ``context_length`` (auto), ``context_length_exact`` or
            ``length_bucket`` (module docstring); ``("instance_id",)`` gives per-instance ONCU.

    Returns:
        Columns: the unit and group keys (the length cell as ``context_length``),
        ``condition``, ``n`` (predictions of the condition), ``missing`` (those with a NaN
        score), ``n_none``, ``n_oracle`` (scored reference predictions), ``n_instances``
        (distinct instances of the group, any condition), ``s_none``, ``s_oracle``, ``s_c``,
        ``gain`` (S_c - S_none), ``denominator`` (S_oracle - S_none), ``applicable``,
        ``valid``, ``invalid_reason`` (None when valid), ``oncu_raw`` and ``oncu_clipped``
        (NaN when invalid), and with a length cell ``length_cell`` (``exact`` or ``bucket``).
    """
    if not isinstance(df, pd.DataFrame):  # rows left in the store (core.oncu.cells.StoredRows)
        return df.oncu_groups(score_field, group_key)
    memo = _SHARED.get(id(df))
    memo_key = (score_field, tuple(group_key))
    if memo is not None and memo_key in memo:
        return memo[memo_key].copy()
    out = _oncu_groups(df, score_field, group_key)
    if memo is not None:
        memo[memo_key] = out
        return out.copy()
    return out


def _oncu_groups(df: pd.DataFrame, score_field: str, group_key: Sequence[str]) -> pd.DataFrame:
    """:func:`oncu_groups` computed (no memo)."""
    check_field(df, score_field)
    shared = df
    df, cols, rule = _key_frame(df, group_key)
    score = pd.to_numeric(df[score_field], errors="coerce").astype(float).to_numpy()
    # key columns grouped once per frame and key (any score field); only scores are reordered
    ids, cell_index, app, sizes = _memo(
        shared, ("grouping", tuple(group_key)), lambda: _grouping(df, cols)
    )
    # rows in score order: every group mean sums its values in one order, whatever the input
    # order (canonical to the last bit; issue 17 item 7)
    order = np.argsort(score, kind="stable")
    gb = pd.Series(score[order]).groupby(ids[order], sort=True)
    stats = pd.DataFrame({"mean": gb.mean(), "scored": gb.count(), "rows": gb.size()})
    stats.index = cell_index  # (app and sizes are only read below: the memo stays intact)
    return assemble_groups(stats, app, sizes, cols, rule)


def assemble_groups(
    stats: pd.DataFrame, app: pd.Series, sizes: pd.Series, cols: list[str], rule: str | None
) -> pd.DataFrame:
    """:func:`oncu_groups`'s rows from its cell statistics (the frame's or the store's).

    Args:
        stats: one row per (group, condition) cell, indexed by ``cols + ["condition"]``:
            ``mean`` (of the scored values), ``scored`` (how many are not NaN), ``rows``.
        app: per group (indexed by ``cols``): every row's oracle applicable.
        sizes: per group: distinct instances (any condition).
        cols: the unit and group key columns (the length cell as ``context_length``).
        rule: the length rule that ran (``exact``, ``bucket`` or None).
    """
    ctx = stats[~stats.index.get_level_values("condition").isin(_REFERENCE)]
    ctx = ctx.reset_index()
    ref = {}
    for cond in _REFERENCE:
        r = stats[stats.index.get_level_values("condition") == cond].reset_index()
        ref[cond] = r.drop(columns=["condition", "rows"]).rename(
            columns={"mean": f"s_{cond}", "scored": f"n_{cond}"}
        )
    out = ctx.rename(columns={"mean": "s_c", "rows": "n"})
    out["missing"] = (out["n"] - out["scored"]).astype(int)
    out = out.drop(columns=["scored"])
    for cond in _REFERENCE:
        out = out.merge(ref[cond], on=cols, how="left")
    out = out.rename(columns={"s_no_evidence": "s_none", "n_no_evidence": "n_none"})
    out = out.merge(app.rename("applicable").reset_index(), on=cols, how="left")
    out = out.merge(sizes.rename("n_instances").reset_index(), on=cols, how="left")
    for c in ("n_none", "n_oracle"):
        out[c] = out[c].fillna(0).astype(int)
    out["gain"] = out["s_c"] - out["s_none"]
    out["denominator"] = out["s_oracle"] - out["s_none"]
    reason = np.select(
        [
            ~out["applicable"].to_numpy(dtype=bool),
            out["n_none"].to_numpy() == 0,
            out["n_oracle"].to_numpy() == 0,
            ~(out["denominator"].to_numpy(dtype=float) > 0),
        ],
        list(INVALID_REASONS),
        default="",
    )
    out["valid"] = reason == ""
    out["invalid_reason"] = pd.Series([r or None for r in reason], index=out.index, dtype=object)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(out["valid"], out["gain"] / out["denominator"], np.nan)
    out["oncu_raw"] = raw
    out["oncu_clipped"] = np.clip(raw, 0.0, 1.0)
    out["n_instances"] = out["n_instances"].fillna(0).astype(int)
    order = cols + [
        "condition",
        "n",
        "missing",
        "n_none",
        "n_oracle",
        "n_instances",
        "s_none",
        "s_oracle",
        "s_c",
        "gain",
        "denominator",
        "applicable",
        "valid",
        "invalid_reason",
        "oncu_raw",
        "oncu_clipped",
    ]
    if rule is not None:
        out["length_cell"] = rule
        order.append("length_cell")
    return canonical_groups(out[order], cols)


def _grouping(
    df: pd.DataFrame, cols: list[str]
) -> tuple[np.ndarray, pd.Index, pd.Series, pd.Series]:
    """The score-free part of :func:`oncu_groups`: ``(ids, cell index, applicable, sizes)``.

    ``ids``: each row's (group, condition) cell as an integer, numbered in the sorted order of
    ``cell index`` (the cells' key values); ``applicable`` and ``sizes`` (distinct instances)
    per group, indexed by the groups' key values.
    """
    ids, cell_index = _cell_ids(df, cols + ["condition"])
    uid, unit_index = _cell_ids(df, cols)
    app = pd.Series(_applicable(df).to_numpy(dtype=bool)).groupby(uid, sort=True).all()
    # distinct present instance ids per group (a groupby nunique, on integer codes)
    if "instance_id" in df.columns:
        iid, _ = _cell_ids(df, ["instance_id"], index=False)
        keep = df["instance_id"].notna().to_numpy()
        width = int(iid.max(initial=0)) + 1
        pairs = np.sort(uid[keep].astype(np.int64) * width + iid[keep])
        pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if pairs.size else pairs
        counts = np.bincount(pairs // width, minlength=len(unit_index))
    else:
        counts = np.bincount(uid, minlength=len(unit_index))
    sizes = pd.Series(counts.astype(np.int64))
    app.index = sizes.index = unit_index
    return ids, cell_index, app, sizes


def _sort_key(col: pd.Series) -> pd.Series:
    """A group-key column as it sorts canonically.

    Numbers as numbers (int, float or numeric text alike) when every present value is one,
    else the values as text.
    """
    num = pd.to_numeric(col, errors="coerce")
    if int(num.notna().sum()) == int(col.notna().sum()):
        return num
    return col.map(lambda v: None if v is None or _isnan(v) else str(v))


def canonical_groups(groups: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``groups`` sorted by the type-normalized values of ``cols`` and ``condition``.

    The canonical group order (issue 17 item 7): ``context_length`` read as text or as an
    integer gives the same order (4000 before 16000), so what is computed over the groups in
    order (means over groups, bootstrap resamples) gives the same numbers. Missing values
    sort last. Returns a new frame with a fresh index.
    """
    keys = [c for c in (*cols, "condition") if c in groups.columns]
    if groups.empty or not keys:
        return groups.reset_index(drop=True)
    norm = pd.DataFrame(
        {f"_k{i}": _sort_key(groups[c]) for i, c in enumerate(keys)}, index=groups.index
    )
    order = norm.sort_values(list(norm.columns), kind="stable", na_position="last").index
    return groups.loc[order].reset_index(drop=True)


def group_size_distribution(sizes: Sequence[int] | pd.Series | np.ndarray) -> dict[str, object]:
    """How many groups hold how many instances.

    Args:
        sizes: instances per group (e.g. ``n_instances`` of the valid groups).

    Returns:
        ``{"n=1": ..., "n=2-4": ..., "n>=5": ...}`` (:data:`SIZE_BINS`), ``median`` (NaN for
        no groups), ``small`` (groups with fewer than :data:`SMALL_GROUP` instances),
        ``groups`` and ``warning`` (True when most groups, more than half, are small).
    """
    a = np.asarray(sizes, dtype=float)
    out: dict[str, object] = {}
    for label, lo, hi in SIZE_BINS:
        out[label] = int(np.sum((a >= lo) & (a <= (np.inf if hi is None else hi))))
    small = int(np.sum(a < SMALL_GROUP))
    out["median"] = float(np.median(a)) if len(a) else math.nan
    out["small"] = small
    out["groups"] = int(len(a))
    out["warning"] = bool(len(a) and 2 * small > len(a))
    return out


def _small_share(df: pd.DataFrame, key: Sequence[str]) -> tuple[float, int]:
    """(share of groups with fewer than SMALL_GROUP instances, number of groups) of a key."""
    frame, cols, _ = _key_frame(df, key)
    inst = (
        frame["instance_id"]
        if "instance_id" in frame.columns
        else pd.Series(np.arange(len(frame)), index=frame.index)
    )
    if cols:
        sizes = inst.groupby([frame[c] for c in cols], dropna=False).nunique()
    else:
        sizes = pd.Series([inst.nunique()])
    return float(np.mean(sizes < SMALL_GROUP)) if len(sizes) else 0.0, int(len(sizes))


def coarser_group_key(
    df: pd.DataFrame, group_key: Sequence[str] = DEFAULT_GROUP_KEY
) -> tuple[str, ...] | None:
    """A coarser group key under which most groups hold at least :data:`SMALL_GROUP` instances.

    Greedy, on group sizes (instances per group of every unit, valid or not): while more than
    half the groups are small, take the single step that leaves the smallest share of small
    groups (ties: the one keeping more groups, then the earlier key cell): an exact length
    cell may become ``length_bucket``, or one cell (never a unit key) is dropped. Returns None
    when the key is not too fine already, or when only the empty key (one group per unit)
    would do.
    """
    return coarsen(
        tuple(group_key),
        lambda k: _small_share(df, k),
        lambda k: resolve_length_cell(df, k),
    )


def coarsen(
    key: tuple[str, ...],
    share_of: Callable[[tuple[str, ...]], tuple[float, int]],
    rule_of: Callable[[tuple[str, ...]], str | None],
) -> tuple[str, ...] | None:
    """:func:`coarser_group_key`'s greedy search over any source of group sizes.

    Args:
        key: the group key.
        share_of: key -> (share of groups with fewer than :data:`SMALL_GROUP` instances,
            number of groups).
        rule_of: key -> its length rule (:func:`resolve_length_cell`).
    """
    share, _ = share_of(key)
    if share <= 0.5:
        return None
    while share > 0.5 and key:
        options = []
        if rule_of(key) == "exact":
            length = next(k for k in key if k in LENGTH_TOKENS)
            options.append(tuple(BUCKET_LENGTH if k == length else k for k in key))
        options += [tuple(k for k in key if k != drop) for drop in key]
        scored = [(*share_of(o), i, o) for i, o in enumerate(options)]
        best = min(scored, key=lambda t: (t[0], -t[1], t[2]))
        share, key = best[0], best[3]
    return key or None
