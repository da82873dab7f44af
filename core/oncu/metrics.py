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
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from core.oncu.cis import add_mean_cis as _add_mean_cis
from core.oncu.cis import add_multinomial_cis as _add_multinomial_cis
from core.oncu.groups import (
    BUCKET_LENGTH,
    DEFAULT_GROUP_KEY,
    EXACT_LENGTH,
    GRID_MAX_VALUES,
    INVALID_REASONS,
    LENGTH_BOUNDARIES,
    LENGTH_LADDER,
    LENGTH_RULE,
    LENGTH_TOKENS,
    PER_INSTANCE_KEY,
    SCORE_FIELDS,
    SIZE_BINS,
    SMALL_GROUP,
    UNIT_KEYS,
    canonical_groups,
    check_field,
    coarser_group_key,
    group_size_distribution,
    length_bucket,
    on_length_grid,
    oncu_groups,
    resolve_length_cell,
    unit_keys,
)
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
from core.oncu.share import cell_ids as _cell_ids
from core.oncu.share import error_mask as _error_mask
from core.oncu.share import frame_memo as _memo
from core.oncu.share import is_error as _is_error  # noqa: F401 (its tests import it here)
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
    "summary_frame",
]

#: Contextual conditions ONCU is reported for by default.
ONCU_CONDITIONS = ("full_context", "retrieved")


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
    if not isinstance(df, pd.DataFrame):  # rows left in the store (core.oncu.cells.StoredRows)
        return df.oncu_summary(score_field, group_key, conditions, (n_resamples, seed, level, ci))
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
    unit = unit_keys(df)
    sample = _sample_means(df, unit, score_field)
    return summary_frame(
        groups,
        sample,
        unit,
        score_field,
        group_key,
        rule,
        conditions,
        (n_resamples, seed, level, ci),
        lambda: coarser_group_key(df, tuple(group_key)),
    )


def summary_frame(
    groups: pd.DataFrame,
    sample: dict[tuple, dict],
    unit: list[str],
    score_field: str,
    group_key: Sequence[str],
    rule: str | None,
    conditions: Sequence[str],
    bootstrap: tuple[int, int, float, bool],
    coarser: Callable[[], tuple[str, ...] | None],
) -> pd.DataFrame:
    """:func:`oncu_summary`'s rows from its groups (the frame's or the store's).

    Args:
        groups: :func:`oncu_groups`'s rows.
        sample: unit key values -> {condition: the unit's sample mean of the score}.
        unit: the unit key columns.
        score_field: the score s.
        group_key: the group key as asked.
        rule: the length rule that ran.
        conditions: the contextual conditions to report.
        bootstrap: ``(n_resamples, seed, level, ci)``.
        coarser: the coarser group key (called only when a row warns of small groups).
    """
    n_resamples, seed, level, ci = bootstrap
    resolved = [
        ({"exact": EXACT_LENGTH, "bucket": BUCKET_LENGTH}[rule] if k in LENGTH_TOKENS else k)
        for k in group_key
    ]
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
    found = coarser() if any(r["small_group_warning"] for r in rows) else None
    for r in rows:
        r["coarser_group_key"] = list(found) if found is not None else None
    cols = keys + [
        "score_field",
        "valid_groups",
        "total_groups",
        "n",
        "missing",
        "oncu_clipped",
        "oncu_ci_low",
        "oncu_ci_high",
        "oncu_raw_mean",
        "oncu_weighted",
        "n_above_oracle",
        "n_below_baseline",
        "invalid_reasons",
        "s_none",
        "s_oracle",
        "s_c",
        "sample_means",
        "group_key",
        "length_cell",
        "group_sizes",
        "median_group_size",
        "small_groups",
        "small_group_warning",
        "coarser_group_key",
    ]
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
    unit = unit_keys(df)
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
    counts = pd.DataFrame(
        grid[cells].astype(float),
        index=index[cells],
        columns=pd.Index(labels, name="failure_label"),
    )
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
    if not isinstance(df, pd.DataFrame):  # rows left in the store (core.oncu.cells.StoredRows)
        stats_ci_method(ci_method, 0)  # an unknown estimator is refused as on a frame
        return df.sample_means(ci, (n_resamples, seed, level, ci_method))
    memo_key = ("sample_level_means", ci, n_resamples, seed, level, ci_method)
    with scoped_memo(df):
        return _memo(
            df, memo_key, lambda: _sample_level_means(df, ci, n_resamples, seed, level, ci_method)
        )


def _sample_level_means(
    df: pd.DataFrame, ci: bool, n_resamples: int, seed: int, level: float, ci_method: str
) -> pd.DataFrame:
    """:func:`sample_level_means` computed (no memo)."""
    unit = unit_keys(df)
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
            sums.append(np.array([filled[bounds[g] : bounds[g + 1]].sum() for g in range(n_cells)]))
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
        means = [
            float(s[g] / k[g]) if k[g] > 0 else math.nan for s, k in zip(sums, counts, strict=True)
        ]
        row.update(dict(zip(scores, means, strict=True)))
        rows.append(row)
    if ci and rows:
        sizes = np.diff(bounds)
        method = [stats_ci_method(ci_method, int(size)) for size in sizes]
        slow = [g for g in range(n_cells) if method[g] == "resample"]
        fast = [g for g in range(n_cells) if method[g] != "resample"]
        # a resampled cell's block: its rows (in order) by its score columns
        blocks = [
            np.column_stack([col[bounds[g] : bounds[g + 1]] for col in cols])
            if cols
            else np.empty((int(sizes[g]), 0))
            for g in slow
        ]
        _add_mean_cis([rows[g] for g in slow], blocks, scores, n_resamples, seed, level)
        for g in slow:
            rows[g]["ci_method"] = "resample"
        for g in fast:
            _add_multinomial_cis(
                rows[g],
                [col[bounds[g] : bounds[g + 1]] for col in cols],
                scores,
                n_resamples,
                seed,
                level,
            )
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
    check_field(df, score_field)
    if "instance_id" not in df.columns:
        raise ValueError("the frame has no 'instance_id' column to pair conditions on")
    unit = unit_keys(df)
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
        row.update(paired_contrast(a, b, n_resamples, seed, level, method=ci_method, p_test=p_test))
        row["p_mcnemar"] = mcnemar_exact(a, b)["p"] if binary else math.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    if not out.empty:
        out.insert(
            out.columns.get_loc("p_test") + 1, "p_holm", holm(out["p"].to_numpy(dtype=float))
        )
    return out


def _pivot_pairs(
    df: pd.DataFrame, unit: list[str], field: str, condition_a: str, condition_b: str
) -> list[tuple[tuple, np.ndarray, np.ndarray]]:
    """:func:`core.oncu.share.paired_columns` by a pivot (instances with several rows)."""
    used = list(dict.fromkeys([*unit, "instance_id", "condition", field]))
    wide = df[used].pivot_table(
        index=[*unit, "instance_id"], columns="condition", values=field, aggfunc="mean"
    )
    if condition_a not in wide.columns or condition_b not in wide.columns:
        return []
    wide = wide.dropna(subset=[condition_a, condition_b])
    groups = wide.groupby(level=unit, sort=True) if unit else [((), wide)]
    return [
        (
            key if isinstance(key, tuple) else (key,),
            w[condition_a].to_numpy(dtype=float),
            w[condition_b].to_numpy(dtype=float),
        )
        for key, w in groups
    ]


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
        raise ValueError(
            f"unknown distance {distance!r}; choose one of: {', '.join(SCALING_DISTANCES)}"
        )
    groups = oncu_groups(df, score_field, group_key)
    cells = scaling_cells(groups)
    by_length = scaling_by_length(groups, conditions)
    unit = unit_keys(df)
    con_rows, regressions = [], []
    parts = cells.groupby(unit, dropna=False, sort=True) if unit else [((), cells)]
    for key, u in parts:
        key = key if isinstance(key, tuple) else (key,)
        lead = dict(zip(unit, key, strict=True))
        if contrasts:
            con = scaling_contrasts(
                u, n_resamples=n_resamples, seed=seed, level=level, p_test=p_test
            )
            con_rows.append(con.assign(**lead)[unit + list(con.columns)])
        for cond in conditions:
            cc = u[u["condition"] == cond]
            if cc.empty:
                continue
            reg = scaling_regression(cc, distance, ols_p_test)
            regressions.append(
                reg.assign(**lead, condition=cond)[unit + ["condition", *reg.columns]]
            )
    con = pd.concat(con_rows, ignore_index=True) if con_rows else pd.DataFrame()
    reg = pd.concat(regressions, ignore_index=True) if regressions else pd.DataFrame()
    # the families of the tables (seed 000 Tables 29, 30): every unit's rows together
    if not con.empty:
        con["p_holm"] = holm(con["p"].to_numpy(dtype=float))
    if not reg.empty:
        reg["p_bh"] = benjamini_hochberg(reg["p"].to_numpy(dtype=float))
    return {"cells": cells, "by_length": by_length, "contrasts": con, "regression": reg}
