"""Oracle-referenced normalized context utilization (ONCU, seed 000 §3.3, §4.4; SPEC §6.5).

Per metadata group g and score field s::

    S_none, S_oracle, S_c = mean of s over the group's predictions of each condition
    valid(g)  = every instance oracle-applicable, no_evidence and oracle present,
                S_oracle > S_none
    ONCU_raw(g, c)     = (S_c - S_none) / (S_oracle - S_none)      (only where valid)
    ONCU_clipped(g, c) = min(max(ONCU_raw, 0), 1)

Input frames have one row per scored prediction: ``run``, ``model``, ``dataset`` (each optional;
together they name the evaluation unit), ``instance_id``, ``condition``, the group-key metadata
columns, ``oracle_applicable`` (optional, default True), ``gold_ids`` (list) or ``n_gold``
(optional), and the score columns of :func:`core.scoring.rows.score_frame`. Group-key cells are
compared as given: read ``context_length`` consistently (all text or all integers).

The length cell of a group key (issue 15 item 6). Imported data (HotpotQA from its original
file) carries exact token counts as ``context_length``, which would make one group per
instance. A group key names its length cell in one of three ways:

- ``context_length`` (the default key's): *auto*. The exact length where the frame's lengths
  are on a small grid (:func:`on_length_grid`), else the length bucket.
- ``context_length_exact``: always the exact length (the published behaviour on any data).
- ``length_bucket``: always the length bucket (:func:`length_bucket`).

The length bucket is the nearest of 1K, 2K, 4K, 8K, 16K, 32K, 64K, 128K tokens with
K = 1000 (:data:`LENGTH_LADDER`), nearest on a log2 scale: the boundaries are the geometric
means of neighbours (:data:`LENGTH_BOUNDARIES`: 1414.2, 2828.4, 5656.9, 11313.7, 22627.4,
45254.8, 90509.7), so 1414 -> 1K and 1415 -> 2K, 2828 -> 2K and 2829 -> 4K; a value exactly
on a boundary goes up; lengths below 1414.2 (also below 1K) are 1K, at or above 90509.7
(also above 128K) 128K; missing, non-numeric or non-positive lengths stay missing.
K = 1000 (not 1024) because the generated presets (controlled-200, scaling-3200, fan-in grid,
RULER-lite) and the ONCU release use 4000 / 8000 / 16000 / 32000: those are ladder values and
map to themselves, so bucketing never changes a preset grid, even in a frame mixed with
exact-length data. Whichever rule ran is reported (``length_cell``: ``exact`` / ``bucket``).

The grouping is only as trustworthy as its group sizes: :func:`oncu_summary` reports the
distribution of valid groups' sizes (instances per group) and flags the unit when most valid
groups hold fewer than :data:`SMALL_GROUP` instances; :func:`coarser_group_key` proposes a
coarser key. Per-instance ONCU is the group key ``("instance_id",)``.

Length-position scaling (SPEC §6.7; seed 000 §8.11, Tables 10, 29, 30): the statistics live
in :mod:`core.oncu.scaling` and are re-exported here; :func:`scaling_report` runs them on
scored predictions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.oncu.cis import add_mean_cis as _add_mean_cis
from core.oncu.cis import add_multinomial_cis as _add_multinomial_cis
from core.oncu.scaling import (
    EARLY_DECILES,
    FINAL_DECILE,
    PUBLISHED_SCALING_TERMS,
    SCALING_CONTRASTS,
    SCALING_DEFINITIONS,
    SCALING_DISTANCES,
    SCALING_LONG,
    SCALING_SHORT,
    SCALING_TERMS,
    length_label,
    position_fraction,
    scaling_by_length,
    scaling_cells,
    scaling_contrasts,
    scaling_length_wide,
    scaling_regression,
)
from core.oncu.share import SHARED as _SHARED
from core.oncu.share import cell_ids as _cell_ids
from core.oncu.share import error_mask as _error_mask
from core.oncu.share import frame_memo as _memo
from core.oncu.share import is_error as _is_error  # noqa: F401 (its tests import it here)
from core.oncu.share import isnan as _isnan
from core.oncu.share import paired_columns, scoped_memo, share_frame
from core.scoring.rows import ANSWER_SCORES, EVIDENCE_SCORES, FAILURE_LABELS
from core.stats.inference import (
    benjamini_hochberg,
    bootstrap_mean_ci,
    holm,
    mcnemar_exact,
    paired_contrast,
)
from core.stats.inference import ci_method as stats_ci_method

__all__ = [
    "BUCKET_LENGTH",
    "DEFAULT_GROUP_KEY",
    "EARLY_DECILES",
    "EXACT_LENGTH",
    "FINAL_DECILE",
    "GRID_MAX_VALUES",
    "INVALID_REASONS",
    "LENGTH_BOUNDARIES",
    "LENGTH_LADDER",
    "LENGTH_RULE",
    "ONCU_CONDITIONS",
    "PER_INSTANCE_KEY",
    "PUBLISHED_SCALING_TERMS",
    "SCALING_CONTRASTS",
    "SCALING_DEFINITIONS",
    "SCALING_DISTANCES",
    "SCALING_LONG",
    "SCALING_SHORT",
    "SCALING_TERMS",
    "SCORE_FIELDS",
    "SIZE_BINS",
    "SMALL_GROUP",
    "UNIT_KEYS",
    "canonical_groups",
    "coarser_group_key",
    "condition_contrast",
    "failure_breakdown",
    "group_size_distribution",
    "length_bucket",
    "length_label",
    "on_length_grid",
    "oncu_groups",
    "oncu_summary",
    "position_fraction",
    "resolve_length_cell",
    "sample_level_means",
    "scaling_by_length",
    "scaling_cells",
    "scaling_contrasts",
    "scaling_length_wide",
    "scaling_regression",
    "scaling_report",
    "share_frame",
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
#: Contextual conditions ONCU is reported for by default.
ONCU_CONDITIONS = ("full_context", "retrieved")
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
_LENGTH_TOKENS = (_AUTO_LENGTH, EXACT_LENGTH, BUCKET_LENGTH)
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
    return distinct <= GRID_MAX_VALUES and instances >= 2 * distinct


def resolve_length_cell(df: pd.DataFrame, group_key: Sequence[str]) -> str | None:
    """The length rule a group key gets on this frame: ``exact``, ``bucket`` or None.

    None when the key has no length cell; see the module docstring for the rules.
    """
    tokens = [k for k in group_key if k in _LENGTH_TOKENS]
    if len(tokens) > 1:
        raise ValueError(
            f"a group key takes one length cell, got {tokens} (choose one of "
            f"{', '.join(_LENGTH_TOKENS)})"
        )
    if not tokens:
        return None
    if tokens[0] == EXACT_LENGTH:
        return "exact"
    if tokens[0] == BUCKET_LENGTH:
        return "bucket"
    return "exact" if _memo(df, ("on_length_grid",), lambda: on_length_grid(df)) else "bucket"


def _key_frame(
    df: pd.DataFrame, group_key: Sequence[str]
) -> tuple[pd.DataFrame, list[str], str | None]:
    """``(frame, group columns, length rule)``: the frame with its length cell resolved.

    The length token of the key becomes the column ``context_length`` holding the cell's value
    (exact, or the bucket as an integer number of tokens).
    """
    rule = resolve_length_cell(df, group_key)
    key = ["context_length" if k in _LENGTH_TOKENS else k for k in group_key]
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


def _unit_keys(df: pd.DataFrame) -> list[str]:
    return [k for k in UNIT_KEYS if k in df.columns]


def _group_cols(df: pd.DataFrame, group_key: Sequence[str]) -> list[str]:
    missing = [k for k in group_key if k not in df.columns]
    if missing:
        raise ValueError(
            f"group key column(s) {missing} not in the frame; columns: {sorted(df.columns)}"
        )
    unit = _unit_keys(df)
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


def _check_field(df: pd.DataFrame, score_field: str) -> None:
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
    _check_field(df, score_field)
    shared = df
    df, cols, rule = _key_frame(df, group_key)
    score = pd.to_numeric(df[score_field], errors="coerce").astype(float).to_numpy()
    # key columns grouped once per frame and key (any score field); only scores are reordered
    ids, cell_index, app, sizes = _memo(shared, ("grouping", tuple(group_key)),
                                        lambda: _grouping(df, cols))  # fmt: skip
    # rows in score order: every group mean sums its values in one order, whatever the input
    # order (canonical to the last bit; issue 17 item 7)
    order = np.argsort(score, kind="stable")
    gb = pd.Series(score[order]).groupby(ids[order], sort=True)
    stats = pd.DataFrame({"mean": gb.mean(), "scored": gb.count(), "rows": gb.size()})
    stats.index = cell_index  # (app and sizes are only read below: the memo stays intact)
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
        "condition", "n", "missing", "n_none", "n_oracle", "n_instances", "s_none", "s_oracle",
        "s_c", "gain", "denominator", "applicable", "valid", "invalid_reason", "oncu_raw",
        "oncu_clipped",
    ]  # fmt: skip
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
    norm = pd.DataFrame({f"_k{i}": _sort_key(groups[c]) for i, c in enumerate(keys)},
                        index=groups.index)  # fmt: skip
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
    inst = frame["instance_id"] if "instance_id" in frame.columns else pd.Series(
        np.arange(len(frame)), index=frame.index
    )  # fmt: skip
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
    key = tuple(group_key)
    share, _ = _small_share(df, key)
    if share <= 0.5:
        return None
    while share > 0.5 and key:
        options = []
        if resolve_length_cell(df, key) == "exact":
            length = next(k for k in key if k in _LENGTH_TOKENS)
            options.append(tuple(BUCKET_LENGTH if k == length else k for k in key))
        options += [tuple(k for k in key if k != drop) for drop in key]
        scored = [(*_small_share(df, o), i, o) for i, o in enumerate(options)]
        best = min(scored, key=lambda t: (t[0], -t[1], t[2]))
        share, key = best[0], best[3]
    return key or None


def oncu_summary(
    df: pd.DataFrame,
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] = DEFAULT_GROUP_KEY,
    conditions: Sequence[str] = ONCU_CONDITIONS,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    ci: bool = True,
) -> pd.DataFrame:
    """ONCU per (unit, contextual condition): the headline and its audit columns.

    Args:
        df: scored predictions (see the module docstring).
        score_field: the score s.
        group_key: metadata group key.
        conditions: contextual conditions to report (those with no predictions are skipped).
        n_resamples: bootstrap resamples of the valid groups.
        seed: bootstrap seed.
        level: interval level.
        ci: False skips the bootstrap (bounds are NaN).

    Returns:
        One row per (unit keys, condition) with ``score_field``, ``valid_groups``,
        ``total_groups``, ``n`` (predictions of the condition), ``missing`` (those with a NaN
        score: failed or unscored, skipped by every mean), ``oncu_clipped`` (unweighted mean
        of clipped ONCU over valid groups, the headline), ``oncu_ci_low`` / ``oncu_ci_high``
        (percentile bootstrap over valid groups), ``oncu_raw_mean``, ``oncu_weighted``
        (sum(S_c - S_none) / sum(S_oracle - S_none) over valid groups, the aggregate raw ratio
        of seed 000 Table 23), ``n_above_oracle`` (raw > 1), ``n_below_baseline`` (raw < 0),
        ``invalid_reasons`` ({reason: count}), ``s_none`` / ``s_oracle`` / ``s_c``
        (group-averaged over valid groups, seed 000 Table 9),
        ``sample_means`` ({condition: mean of the score over all the unit's predictions}),
        ``group_key`` (the key as resolved: ``length_bucket`` / ``context_length_exact`` for
        the length cell that ran), ``length_cell`` (``exact``, ``bucket`` or None),
        ``group_sizes`` (:func:`group_size_distribution` of the valid groups' instance counts),
        ``median_group_size``, ``small_groups`` (valid groups with fewer than
        :data:`SMALL_GROUP` instances), ``small_group_warning`` (most valid groups small) and
        ``coarser_group_key`` (:func:`coarser_group_key` when any row warns, else None).
    """
    with scoped_memo(df):  # the key columns factorized once for every grouping below
        return _oncu_summary(df, score_field, group_key, conditions, n_resamples, seed, level, ci)


def _oncu_summary(
    df: pd.DataFrame,
    score_field: str,
    group_key: Sequence[str],
    conditions: Sequence[str],
    n_resamples: int,
    seed: int,
    level: float,
    ci: bool,
) -> pd.DataFrame:
    """:func:`oncu_summary` computed."""
    groups = oncu_groups(df, score_field, group_key)
    rule = resolve_length_cell(df, group_key)
    resolved = [
        ({"exact": EXACT_LENGTH, "bucket": BUCKET_LENGTH}[rule] if k in _LENGTH_TOKENS else k)
        for k in group_key
    ]
    unit = _unit_keys(df)
    sample = _sample_means(df, unit, score_field)
    rows = []
    keys = unit + ["condition"]
    for key, g in groups[groups["condition"].isin(list(conditions))].groupby(
        keys, dropna=False, sort=False
    ):
        key = key if isinstance(key, tuple) else (key,)
        v = g[g["valid"]]
        clipped = v["oncu_clipped"].to_numpy(dtype=float)
        raw = v["oncu_raw"].to_numpy(dtype=float)
        den = float(v["denominator"].sum())
        if ci and len(v):
            b = bootstrap_mean_ci(clipped, n_resamples, seed, level)
            lo, hi = b["ci_low"], b["ci_high"]
        else:
            lo = hi = math.nan
        reasons = g["invalid_reason"].dropna().value_counts()
        dist = group_size_distribution(v["n_instances"])
        row = dict(zip(keys, key, strict=True))
        row.update(
            {
                "score_field": score_field,
                "valid_groups": int(len(v)),
                "total_groups": int(len(g)),
                "n": int(g["n"].sum()),
                "missing": int(g["missing"].sum()),
                "oncu_clipped": float(np.nanmean(clipped)) if len(v) else math.nan,
                "oncu_ci_low": lo,
                "oncu_ci_high": hi,
                "oncu_raw_mean": float(np.nanmean(raw)) if len(v) else math.nan,
                "oncu_weighted": float(v["gain"].sum()) / den if len(v) and den > 0 else math.nan,
                "n_above_oracle": int(np.sum(raw > 1)),
                "n_below_baseline": int(np.sum(raw < 0)),
                "invalid_reasons": {str(k): int(n) for k, n in reasons.items()},
                "s_none": float(v["s_none"].mean()) if len(v) else math.nan,
                "s_oracle": float(v["s_oracle"].mean()) if len(v) else math.nan,
                "s_c": float(v["s_c"].mean()) if len(v) else math.nan,
                "sample_means": sample.get(key[:-1], {}),
                "group_key": list(resolved),
                "length_cell": rule,
                "group_sizes": {lab: dist[lab] for lab, _, _ in SIZE_BINS},
                "median_group_size": dist["median"],
                "small_groups": dist["small"],
                "small_group_warning": dist["warning"],
            }
        )
        rows.append(row)
    coarser = None
    if any(r["small_group_warning"] for r in rows):
        found = coarser_group_key(df, tuple(group_key))
        coarser = list(found) if found is not None else None
    for r in rows:
        r["coarser_group_key"] = coarser
    cols = keys + [
        "score_field", "valid_groups", "total_groups", "n", "missing", "oncu_clipped",
        "oncu_ci_low", "oncu_ci_high", "oncu_raw_mean", "oncu_weighted", "n_above_oracle",
        "n_below_baseline", "invalid_reasons", "s_none", "s_oracle", "s_c", "sample_means",
        "group_key", "length_cell", "group_sizes", "median_group_size", "small_groups",
        "small_group_warning", "coarser_group_key",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def _sample_means(df: pd.DataFrame, unit: list[str], field: str) -> dict[tuple, dict]:
    s = pd.to_numeric(df[field], errors="coerce").to_numpy()
    ids, index = _memo(df, ("unit_cells",), lambda: _cell_ids(df, [*unit, "condition"]))
    means = pd.Series(s).groupby(ids, sort=True).mean().set_axis(index)
    out: dict[tuple, dict] = {}
    for key, m in means.items():
        key = key if isinstance(key, tuple) else (key,)
        out.setdefault(tuple(key[:-1]), {})[key[-1]] = float(m)
    return out


def failure_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    """Failure-label percentages per (unit, condition), over rows that carry a label.

    Returns:
        Columns: unit keys, ``condition``, ``n`` (labelled predictions), ``missing`` (failed
        calls of that condition: no reply, so no label; when the frame has ``error``) and one
        column per label of ``FAILURE_LABELS`` in percent (0-100); conditions without labels
        (no_evidence) are absent.
    """
    if "failure_label" not in df.columns:
        raise ValueError("the frame has no 'failure_label' column (score it first)")
    return _memo(df, ("failure_breakdown",), lambda: _failure_breakdown(df))


def _failure_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`failure_breakdown` computed (no memo)."""
    unit = _unit_keys(df)
    keys = unit + ["condition"]
    # counts per (cell, label) on the integer cells shared with the other tables: the
    # cells with a label, labels in sorted order (as a groupby + unstack gives them)
    ids, index = _memo(df, ("unit_cells",), lambda: _cell_ids(df, keys))
    codes, labels = pd.factorize(df["failure_label"], sort=True, use_na_sentinel=True)
    has = codes >= 0
    grid = np.bincount(
        ids[has] * len(labels) + codes[has], minlength=len(index) * len(labels)
    ).reshape(len(index), len(labels))
    cells = grid.sum(axis=1) > 0
    counts = pd.DataFrame(grid[cells].astype(float), index=index[cells],
                          columns=pd.Index(labels, name="failure_label"))  # fmt: skip
    counts = counts.reindex(columns=list(FAILURE_LABELS), fill_value=0).fillna(0)
    n = counts.sum(axis=1)
    pct = counts.div(n, axis=0) * 100.0
    pct.insert(0, "n", n.astype(int))
    if "error" in df.columns:
        failed = np.bincount(ids[_error_mask(df["error"])], minlength=len(index))
        pct.insert(1, "missing", failed[cells].astype(int))
    pct.columns.name = None
    return pct.reset_index()


def sample_level_means(
    df: pd.DataFrame,
    ci: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    ci_method: str = "auto",
) -> pd.DataFrame:
    """Denominator-free means of every answer and evidence score per (unit, condition).

    Seed 000 Table 6: over ALL predictions (parse errors included, scored 0); NaN scores are
    skipped. With ``ci`` each score also gets a percentile bootstrap interval, examples resampled
    within the (unit, condition) cell (one shared resample for all the columns of a cell) in
    frame order, which for the store's frame is import order (issue 34 item 4: a release's
    CIs come out bit for bit).

    Failed calls (``error`` set: no reply, so NaN scores) are missing, not 0: the means skip
    them and ``missing`` counts them beside ``n``.

    ``ci_method`` picks the bootstrap estimator per cell (:data:`core.stats.inference.CI_METHODS`):
    ``resample`` draws index matrices (one shared resample for the cell's columns, the
    published estimator), ``multinomial`` draws each column's counts per distinct value
    (the same distribution of every column's resampled mean, so the same percentile CIs in
    distribution; cost resamples x distinct values instead of resamples x n); ``auto``
    resamples cells up to :data:`core.stats.inference.RESAMPLE_MAX` predictions.

    Returns:
        Columns: unit keys, ``condition``, ``n`` (predictions), ``missing`` (failed calls
        among them, when the frame has ``error``), ``n_parse_error`` (when the frame has
        ``parse_error``), the score means, and with ``ci`` ``<score>_ci_low`` /
        ``<score>_ci_high`` and ``ci_method`` (the row's estimator: ``resample``,
        ``multinomial`` or, where a column needed bins, ``multinomial-binned``).
    """
    memo_key = ("sample_level_means", ci, n_resamples, seed, level, ci_method)
    with scoped_memo(df):
        return _memo(df, memo_key, lambda: _sample_level_means(df, ci, n_resamples, seed, level,
                                                               ci_method))  # fmt: skip


def _sample_level_means(
    df: pd.DataFrame, ci: bool, n_resamples: int, seed: int, level: float, ci_method: str
) -> pd.DataFrame:
    """:func:`sample_level_means` computed (no memo)."""
    unit = _unit_keys(df)
    keys = unit + ["condition"]
    scores = [c for c in (*ANSWER_SCORES, *EVIDENCE_SCORES, "confidence_error") if c in df.columns]
    # the (unit, condition) cells shared with the other tables, in sorted key order
    ids, index = _memo(df, ("unit_cells",), lambda: _cell_ids(df, keys))
    # every cell's rows, one cell after the other (cells in key order; within a cell the
    # rows in frame order): one gather per column instead of a row-major block per cell.
    # Frame order is import order (issue 34 item 4): the store's analysis frame lists each
    # run's predictions in instance order (``instances.ord``, the order the examples were
    # imported: for a release, its file's rows), and the bootstrap resamples the examples of a
    # cell in that order, as the release's own script does, so its CIs come out bit for bit
    rows_of = np.argsort(ids, kind="stable")
    cell_of = ids[rows_of]
    bounds = np.searchsorted(cell_of, np.arange(len(index) + 1))
    n_cells = len(index)
    cols, sums, counts = [], [], []
    # one mask and one zero-filled copy reused by every column (fresh 1M-row temporaries cost
    # page faults on each column of a first load)
    nan = np.empty(len(rows_of), dtype=bool)
    finite = np.empty(len(rows_of), dtype=bool)
    filled = np.empty(len(rows_of))
    for c in scores:
        col = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)[rows_of]
        np.isnan(col, out=nan)
        np.copyto(filled, col)
        np.copyto(filled, 0.0, where=nan)  # the scored values, 0 where NaN
        if len(scores) > 1:
            # each cell's sum accumulated row by row in the cell's order: the bits of the
            # nansum down the columns of a cell's (rows x scores) block
            sums.append(np.bincount(cell_of, weights=filled, minlength=n_cells))
        else:  # a one-column block is summed pairwise, as a contiguous column
            sums.append(np.array([filled[bounds[g] : bounds[g + 1]].sum()
                                  for g in range(n_cells)]))  # fmt: skip
        # finite values per cell: the cells' rows are consecutive (cell_of is sorted)
        np.isfinite(col, out=finite)
        running = np.concatenate(([0], np.cumsum(finite, dtype=np.int64)))
        counts.append(np.diff(running[bounds]))
        cols.append(col)
    perr = _error_mask(df["parse_error"]) if "parse_error" in df.columns else None
    failed = _error_mask(df["error"]) if "error" in df.columns else None
    n_failed = np.bincount(ids[failed], minlength=n_cells) if failed is not None else None
    n_perr = np.bincount(ids[perr], minlength=n_cells) if perr is not None else None
    rows = []
    for g, key in enumerate(index):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key, strict=True))
        row["n"] = int(bounds[g + 1] - bounds[g])
        if n_failed is not None:
            row["missing"] = int(n_failed[g])
        if n_perr is not None:
            row["n_parse_error"] = int(n_perr[g])
        means = [float(s[g] / k[g]) if k[g] > 0 else math.nan
                 for s, k in zip(sums, counts, strict=True)]  # fmt: skip
        row.update(dict(zip(scores, means, strict=True)))
        rows.append(row)
    if ci and rows:
        sizes = np.diff(bounds)
        method = [stats_ci_method(ci_method, int(size)) for size in sizes]
        slow = [g for g in range(n_cells) if method[g] == "resample"]
        fast = [g for g in range(n_cells) if method[g] != "resample"]
        # a resampled cell's block: its rows (in order) by its score columns
        blocks = [np.column_stack([col[bounds[g] : bounds[g + 1]] for col in cols])
                  if cols else np.empty((int(sizes[g]), 0)) for g in slow]  # fmt: skip
        _add_mean_cis([rows[g] for g in slow], blocks, scores, n_resamples, seed, level)
        for g in slow:
            rows[g]["ci_method"] = "resample"
        for g in fast:
            _add_multinomial_cis(rows[g], [col[bounds[g] : bounds[g + 1]] for col in cols],
                                 scores, n_resamples, seed, level)  # fmt: skip
    return pd.DataFrame(rows)


def condition_contrast(
    df: pd.DataFrame,
    condition_a: str,
    condition_b: str,
    score_field: str = "f1_relaxed",
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    ci_method: str = "auto",
    p_test: str = "normal",
) -> pd.DataFrame:
    """Paired contrast ``condition_a - condition_b`` per unit, aligned by ``instance_id``.

    Instances with both conditions scored are kept (duplicates averaged). For binary score
    fields (EM, soft correctness) McNemar's exact p is added. ``ci_method``: the bootstrap
    estimator of :func:`core.stats.inference.paired_contrast` (``auto``: index resampling up to
    :data:`core.stats.inference.RESAMPLE_MAX` pairs, multinomial counts of the distinct differences
    above: the same distribution). ``p_test``: ``normal`` (default, seed 000 §7.6) or
    ``bootstrap`` (:data:`core.stats.inference.P_TESTS`).

    Returns:
        One row per unit: unit keys, ``contrast``, ``score_field``, ``mean``, ``ci_low``,
        ``ci_high``, ``effect``, ``p``, ``p_test``, ``p_holm`` (Holm across the units: the
        family of seed 000 Table 29 is the contrast across the models and runs shown),
        ``n``, ``ci_method`` and ``p_mcnemar`` (NaN for non-binary fields).
    """
    _check_field(df, score_field)
    if "instance_id" not in df.columns:
        raise ValueError("the frame has no 'instance_id' column to pair conditions on")
    unit = _unit_keys(df)
    # each unit's instances with both conditions scored, in sorted order (the score-free
    # layout once per shared frame; a pivot only where an instance has several rows)
    groups = paired_columns(df, unit, score_field, condition_a, condition_b)
    if groups is None:
        groups = _pivot_pairs(df, unit, score_field, condition_a, condition_b)
    rows = []
    binary = score_field in ("em_strict", "em_relaxed", "soft_correct")
    for key, a, b in groups:
        row = dict(zip(unit, key, strict=True))
        row["contrast"] = f"{condition_a} - {condition_b}"
        row["score_field"] = score_field
        row.update(paired_contrast(a, b, n_resamples, seed, level, method=ci_method,
                                   p_test=p_test))  # fmt: skip
        row["p_mcnemar"] = mcnemar_exact(a, b)["p"] if binary else math.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    if not out.empty:
        out.insert(out.columns.get_loc("p_test") + 1, "p_holm",
                   holm(out["p"].to_numpy(dtype=float)))  # fmt: skip
    return out


def _pivot_pairs(
    df: pd.DataFrame, unit: list[str], field: str, condition_a: str, condition_b: str
) -> list[tuple[tuple, np.ndarray, np.ndarray]]:
    """:func:`core.oncu.share.paired_columns` by a pivot (instances with several rows)."""
    used = list(dict.fromkeys([*unit, "instance_id", "condition", field]))
    wide = df[used].pivot_table(index=[*unit, "instance_id"], columns="condition", values=field,
                                aggfunc="mean")  # fmt: skip
    if condition_a not in wide.columns or condition_b not in wide.columns:
        return []
    wide = wide.dropna(subset=[condition_a, condition_b])
    groups = wide.groupby(level=unit, sort=True) if unit else [((), wide)]
    return [(key if isinstance(key, tuple) else (key,), w[condition_a].to_numpy(dtype=float),
             w[condition_b].to_numpy(dtype=float)) for key, w in groups]  # fmt: skip


# ------------------------------------------------------------ length-position scaling


def scaling_report(
    df: pd.DataFrame,
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] = DEFAULT_GROUP_KEY,
    conditions: Sequence[str] = ONCU_CONDITIONS,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    distance: str = "middle",
    contrasts: bool = True,
    p_test: str = "normal",
    ols_p_test: str = "normal",
) -> dict[str, pd.DataFrame]:
    """Every scaling statistic of the predictions' units (SPEC §6.7; seed 000 §8.11).

    The statistics themselves live in :mod:`core.oncu.scaling` (re-exported here); this runs
    them on scored predictions: groups -> cells -> per-length means, contrasts per unit,
    regression per (unit, condition).

    Args:
        df: scored predictions (see the module docstring); the group key must keep
            ``context_length`` (any length cell) and ``evidence_position``.
        score_field: the score s of ONCU.
        group_key: ONCU group key.
        conditions: contextual conditions of the per-length table and the regressions.
        n_resamples: bootstrap resamples of the contrasts.
        seed: bootstrap seed.
        level: interval level.
        distance: the regression's distance term (:func:`scaling_regression`).
        contrasts: False skips the contrasts (and their bootstrap); ``contrasts`` is empty.
        p_test: the contrasts' p, ``normal`` (default, seed 000 §7.6) or ``bootstrap``.
        ols_p_test: the regression's p, ``normal`` (default, seed 000 Table 30) or ``t``.

    Returns:
        ``{"cells", "by_length", "contrasts", "regression"}``: the length x position cells
        (:func:`scaling_cells`), the per-length means (:func:`scaling_by_length`), the
        contrasts (:func:`scaling_contrasts`) per unit and the regression
        (:func:`scaling_regression`) per (unit, condition), each led by the unit keys
        (and ``condition`` for the regression). The families are the tables' (seed 000
        Tables 29, 30): ``p_holm`` is Holm across every unit's contrasts, ``p_bh``
        Benjamini-Hochberg across every row of the regression table.
    """
    if distance not in SCALING_DISTANCES:
        raise ValueError(f"unknown distance {distance!r}; choose one of: "
                         f"{', '.join(SCALING_DISTANCES)}")  # fmt: skip
    groups = oncu_groups(df, score_field, group_key)
    cells = scaling_cells(groups)
    by_length = scaling_by_length(groups, conditions)
    unit = _unit_keys(df)
    con_rows, regressions = [], []
    parts = cells.groupby(unit, dropna=False, sort=True) if unit else [((), cells)]
    for key, u in parts:
        key = key if isinstance(key, tuple) else (key,)
        lead = dict(zip(unit, key, strict=True))
        if contrasts:
            con = scaling_contrasts(u, n_resamples=n_resamples, seed=seed, level=level,
                                    p_test=p_test)  # fmt: skip
            con_rows.append(con.assign(**lead)[unit + list(con.columns)])
        for cond in conditions:
            cc = u[u["condition"] == cond]
            if cc.empty:
                continue
            reg = scaling_regression(cc, distance, ols_p_test)
            regressions.append(reg.assign(**lead, condition=cond)[
                unit + ["condition", *reg.columns]])  # fmt: skip
    con = pd.concat(con_rows, ignore_index=True) if con_rows else pd.DataFrame()
    reg = pd.concat(regressions, ignore_index=True) if regressions else pd.DataFrame()
    # the families of the tables (seed 000 Tables 29, 30): every unit's rows together
    if not con.empty:
        con["p_holm"] = holm(con["p"].to_numpy(dtype=float))
    if not reg.empty:
        reg["p_bh"] = benjamini_hochberg(reg["p"].to_numpy(dtype=float))
    return {"cells": cells, "by_length": by_length, "contrasts": con, "regression": reg}
