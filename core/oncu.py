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
(optional), and the score columns of :func:`core.scoring.score_frame`. Group-key cells are
compared as given: read ``context_length`` consistently (all text or all integers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from core.scoring import ANSWER_SCORES, EVIDENCE_SCORES, FAILURE_LABELS
from core.stats import bootstrap_mean_ci, bootstrap_means, mcnemar_exact, paired_contrast

__all__ = [
    "DEFAULT_GROUP_KEY",
    "INVALID_REASONS",
    "ONCU_CONDITIONS",
    "SCORE_FIELDS",
    "UNIT_KEYS",
    "condition_contrast",
    "failure_breakdown",
    "oncu_groups",
    "oncu_summary",
    "sample_level_means",
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
        ok &= df["gold_ids"].map(lambda g: g is not None and not _isnan(g) and len(g) > 0)
    elif "n_gold" in df.columns:
        ok &= pd.to_numeric(df["n_gold"], errors="coerce").fillna(0) > 0
    return ok


def _isnan(x: object) -> bool:
    return isinstance(x, float) and math.isnan(x)


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
    present when it has at least one non-NaN score in the group.

    Args:
        df: scored predictions (see the module docstring).
        score_field: the score s.
        group_key: metadata columns that define a group (the unit keys are always added).

    Returns:
        Columns: the unit and group keys, ``condition``, ``n`` (predictions of the condition),
        ``n_none``, ``n_oracle``, ``s_none``, ``s_oracle``, ``s_c``, ``gain`` (S_c - S_none),
        ``denominator`` (S_oracle - S_none), ``applicable``, ``valid``, ``invalid_reason``
        (None when valid), ``oncu_raw`` and ``oncu_clipped`` (NaN when invalid).
    """
    _check_field(df, score_field)
    cols = _group_cols(df, group_key)
    work = df[cols + ["condition"]].copy()
    work["_s"] = pd.to_numeric(df[score_field], errors="coerce").astype(float)
    work["_app"] = _applicable(df)
    gb = work.groupby(cols + ["condition"], dropna=False, sort=True)["_s"]
    stats = pd.DataFrame({"mean": gb.mean(), "scored": gb.count(), "rows": gb.size()})
    app = work.groupby(cols, dropna=False, sort=True)["_app"].all()

    ctx = stats[~stats.index.get_level_values("condition").isin(_REFERENCE)]
    ctx = ctx.reset_index()
    ref = {}
    for cond in _REFERENCE:
        r = stats[stats.index.get_level_values("condition") == cond].reset_index()
        ref[cond] = r.drop(columns=["condition", "rows"]).rename(
            columns={"mean": f"s_{cond}", "scored": f"n_{cond}"}
        )
    out = ctx.rename(columns={"mean": "s_c", "rows": "n"}).drop(columns=["scored"])
    for cond in _REFERENCE:
        out = out.merge(ref[cond], on=cols, how="left")
    out = out.rename(columns={"s_no_evidence": "s_none", "n_no_evidence": "n_none"})
    out = out.merge(app.rename("applicable").reset_index(), on=cols, how="left")
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
    order = cols + [
        "condition", "n", "n_none", "n_oracle", "s_none", "s_oracle", "s_c", "gain",
        "denominator", "applicable", "valid", "invalid_reason", "oncu_raw", "oncu_clipped",
    ]  # fmt: skip
    return out[order].reset_index(drop=True)


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
        ``total_groups``, ``oncu_clipped`` (unweighted mean of clipped ONCU over valid groups,
        the headline), ``oncu_ci_low`` / ``oncu_ci_high`` (percentile bootstrap over valid
        groups), ``oncu_raw_mean``, ``oncu_weighted`` (sum(S_c - S_none) / sum(S_oracle - S_none)
        over valid groups, the aggregate raw ratio of seed 000 Table 23), ``n_above_oracle``
        (raw > 1), ``n_below_baseline`` (raw < 0), ``invalid_reasons`` ({reason: count}),
        ``s_none`` / ``s_oracle`` / ``s_c`` (group-averaged over valid groups, seed 000 Table 9)
        and ``sample_means`` ({condition: mean of the score over all the unit's predictions}).
    """
    groups = oncu_groups(df, score_field, group_key)
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
        row = dict(zip(keys, key, strict=True))
        row.update(
            {
                "score_field": score_field,
                "valid_groups": int(len(v)),
                "total_groups": int(len(g)),
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
            }
        )
        rows.append(row)
    cols = keys + [
        "score_field", "valid_groups", "total_groups", "oncu_clipped", "oncu_ci_low",
        "oncu_ci_high", "oncu_raw_mean", "oncu_weighted", "n_above_oracle", "n_below_baseline",
        "invalid_reasons", "s_none", "s_oracle", "s_c", "sample_means",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def _sample_means(df: pd.DataFrame, unit: list[str], field: str) -> dict[tuple, dict]:
    s = pd.to_numeric(df[field], errors="coerce")
    means = s.groupby([df[k] for k in unit] + [df["condition"]], dropna=False).mean()
    out: dict[tuple, dict] = {}
    for key, m in means.items():
        key = key if isinstance(key, tuple) else (key,)
        out.setdefault(tuple(key[:-1]), {})[key[-1]] = float(m)
    return out


def failure_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    """Failure-label percentages per (unit, condition), over rows that carry a label.

    Returns:
        Columns: unit keys, ``condition``, ``n`` (labelled predictions) and one column per
        label of ``FAILURE_LABELS`` in percent (0-100); conditions without labels (no_evidence)
        are absent.
    """
    if "failure_label" not in df.columns:
        raise ValueError("the frame has no 'failure_label' column (score it first)")
    unit = _unit_keys(df)
    lab = df[df["failure_label"].notna()]
    keys = unit + ["condition"]
    counts = lab.groupby(keys + ["failure_label"], dropna=False).size().unstack("failure_label")
    counts = counts.reindex(columns=list(FAILURE_LABELS), fill_value=0).fillna(0)
    n = counts.sum(axis=1)
    pct = counts.div(n, axis=0) * 100.0
    pct.insert(0, "n", n.astype(int))
    pct.columns.name = None
    return pct.reset_index()


def sample_level_means(
    df: pd.DataFrame,
    ci: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
) -> pd.DataFrame:
    """Denominator-free means of every answer and evidence score per (unit, condition).

    Seed 000 Table 6: over ALL predictions (parse errors included, scored 0); NaN scores are
    skipped. With ``ci`` each score also gets a percentile bootstrap interval, examples resampled
    within the (unit, condition) cell (one shared resample for all the columns of a cell).

    Returns:
        Columns: unit keys, ``condition``, ``n``, ``n_parse_error`` (when the frame has
        ``parse_error``), the score means, and with ``ci`` ``<score>_ci_low`` /
        ``<score>_ci_high``.
    """
    unit = _unit_keys(df)
    keys = unit + ["condition"]
    scores = [c for c in (*ANSWER_SCORES, *EVIDENCE_SCORES, "confidence_error") if c in df.columns]
    rows = []
    blocks = []
    values = df[scores].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    perr = df["parse_error"].map(_is_error).to_numpy() if "parse_error" in df.columns else None
    for key, idx in df.groupby(keys, dropna=False, sort=True).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        block = values[idx]
        row = dict(zip(keys, key, strict=True))
        row["n"] = int(len(idx))
        if perr is not None:
            row["n_parse_error"] = int(perr[idx].sum())
        counts = np.isfinite(block).sum(axis=0)
        with np.errstate(invalid="ignore"):
            means = np.where(counts > 0, np.nansum(block, axis=0) / np.maximum(counts, 1), np.nan)
        row.update(dict(zip(scores, means.tolist(), strict=True)))
        rows.append(row)
        blocks.append(block)
    if ci and rows:
        _add_mean_cis(rows, blocks, scores, n_resamples, seed, level)
    return pd.DataFrame(rows)


def _add_mean_cis(
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
    alpha = (1.0 - level) / 2.0
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
            boot = bootstrap_means(stacked[:, has], n_resamples, seed)
            q = [100 * alpha, 100 * (1 - alpha)]
            full = np.isfinite(boot).all(axis=0)
            pl, ph = np.full(boot.shape[1], np.nan), np.full(boot.shape[1], np.nan)
            if full.any():
                pl[full], ph[full] = np.percentile(boot[:, full], q, axis=0)
            if (~full).any():
                pl[~full], ph[~full] = np.nanpercentile(boot[:, ~full], q, axis=0)
            lo[has], hi[has] = pl, ph
        for j, i in enumerate(cells):
            for c, name in enumerate(scores):
                rows[i][f"{name}_ci_low"] = float(lo[j * k + c])
                rows[i][f"{name}_ci_high"] = float(hi[j * k + c])


def _is_error(x: object) -> bool:
    if x is None or x is pd.NA or _isnan(x):
        return False
    return bool(x.strip()) if isinstance(x, str) else bool(x)


def condition_contrast(
    df: pd.DataFrame,
    condition_a: str,
    condition_b: str,
    score_field: str = "f1_relaxed",
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
) -> pd.DataFrame:
    """Paired contrast ``condition_a - condition_b`` per unit, aligned by ``instance_id``.

    Instances with both conditions scored are kept (duplicates averaged). For binary score
    fields (EM, soft correctness) McNemar's exact p is added.

    Returns:
        One row per unit: unit keys, ``contrast``, ``score_field``, ``mean``, ``ci_low``,
        ``ci_high``, ``effect``, ``p``, ``n`` and ``p_mcnemar`` (NaN for non-binary fields).
    """
    _check_field(df, score_field)
    if "instance_id" not in df.columns:
        raise ValueError("the frame has no 'instance_id' column to pair conditions on")
    unit = _unit_keys(df)
    sub = df[df["condition"].isin([condition_a, condition_b])]
    wide = sub.pivot_table(
        index=unit + ["instance_id"], columns="condition", values=score_field, aggfunc="mean"
    )
    rows = []
    if condition_a not in wide.columns or condition_b not in wide.columns:
        return pd.DataFrame(rows)
    wide = wide.dropna(subset=[condition_a, condition_b])
    groups = wide.groupby(level=unit, sort=True) if unit else [((), wide)]
    binary = score_field in ("em_strict", "em_relaxed", "soft_correct")
    for key, w in groups:
        key = key if isinstance(key, tuple) else (key,)
        a = w[condition_a].to_numpy(dtype=float)
        b = w[condition_b].to_numpy(dtype=float)
        row = dict(zip(unit, key, strict=True))
        row["contrast"] = f"{condition_a} - {condition_b}"
        row["score_field"] = score_field
        row.update(paired_contrast(a, b, n_resamples, seed, level))
        row["p_mcnemar"] = mcnemar_exact(a, b)["p"] if binary else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
