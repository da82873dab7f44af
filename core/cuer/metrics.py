"""CUE-R: multi-axis utility, trace divergence, evidence roles and synergy (SPEC §7; seed 004).

Each intervention prediction is paired with the base trace of the same run and instance (the
``retrieved`` prediction, seed 004 §4.6) and described by:

- utility axes (seed 004 §3.3, §5.8, App. B) of both runs: ``correctness``, ``answer_f1`` =
  relaxed token F1, ``grounding`` = title grounding (eq. 11), and ``confidence_error`` CE =
  |c - 1[correct]| with c clamped to [0, 1] (CE is NaN when the reply gave no confidence,
  grounding NaN when the instance has no gold evidence). The paper computes correctness
  "using both strict (normalized exact match) and soft matching" (§4.6): the correctness axis
  (:data:`CORRECTNESS_AXIS`) is ``soft`` by default (App. B, the stored ``soft_correct``, the
  axis of the paper's tables) or ``strict`` (the stored ``em_strict``); CE's "correct" follows
  the axis (soft: the stored ``confidence_error``; strict: |c - em_strict|). Every number is
  the one the rest of the product shows;
- deltas ``delta_k = U_k(original) - U_k(perturbed)`` (eq. 7): positive means the original
  was better on correctness, F1 and grounding; on CE positive means the perturbed run erred
  less;
- trace divergence (eq. 9) ``D = 0.5 * (1 - |E & E'| / |E | E'|) + 0.3 * 1[answer changed]
  + 0.2 * |c - c'|`` over the cited-id sets, relaxed-normalized answers and clamped
  confidences (the Jaccard term is 0 when both sets are empty; a reply without a confidence
  counts as c = 0, i.e. it claims none);
- evidence divergence ``d_Jaccard(E, E')`` (§3.4, App. B; App. C Table 13 "Evid. Div."): D's
  unweighted first term over the cited ("used") id sets, 0 when both are empty;
  ``answer_changed`` = 1[y != y'] (eq. 9) and ``correctness_changed`` (the label flipped;
  App. C: "correctness changed in at most 5% of examples");
- role flags (seed 004 §3.5, :func:`role_flags`), each rule evaluated on its own, so an item
  can carry several (every distractive item is also constructive); ``primary_role`` is one
  label per item for colouring and filtering only (:data:`PRIMARY_ROLE_ORDER`); counts are
  per flag. "Corrective" needs deeper traces than a single shot (§3.5) and is not assigned.

Aggregates: per (operator, variant) means with 95% bootstrap CIs (seed 004 Table 2 / App. A)
plus the evidence divergence and the share of answers / correctness labels changed (App. C
Table 13), paired bootstrap deltas original - perturbed per metric with the two-sided
bootstrap p (Table 3; 5,000 resamples, seed 42, :func:`core.stats.inference.paired_contrast`), role
flag counts and flag combinations, and the two-support synergy statistics (Table 9). Every
function returns per-instance rows and the aggregate. The defaults of ``eps`` (0.05) and
``tau`` (0.5) are this project's: the paper gives the rules (≈ 0, ≫ 0) but no numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.cuer.coverage import with_not_applicable
from core.cuer.interventions import SYNERGY_METRIC
from core.cuer.pairs import (
    ITEM_OPERATORS,
    call_failed,
    correctness_score,
    intervention_pairs,
    load_pairs,
)
from core.cuer.signals import (
    AXES,
    AXIS_SCORE,
    CORRECTNESS_AXIS,
    CORRECTNESS_SCORES,
    DEFAULT_EPS,
    DEFAULT_TAU,
    METRICS,
    OPERATOR_ORDER,
    PRIMARY_ROLE_ORDER,
    PROFILE_METRICS,
    ROLE_FLAGS,
    ROLES,
    answer_changed,
    evidence_role,
    finite,
    jaccard_distance,
    jaccard_similarity,
    primary_role,
    role_flags,
    trace_divergence,
)
from core.jsonable import json_plain
from core.scoring.rows import confidence_error
from core.stats.inference import bootstrap_mean_ci, paired_contrast
from core.store import Store

__all__ = [
    "AXES",
    "CORRECTNESS_AXIS",
    "CORRECTNESS_SCORES",
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "METRICS",
    "OPERATOR_ORDER",
    "PRIMARY_ROLE_ORDER",
    "PROFILE_METRICS",
    "ROLES",
    "ROLE_FLAGS",
    "CuerResult",
    "answer_changed",
    "evidence_role",
    "intervention_pairs",
    "intervention_report",
    "jaccard_distance",
    "jaccard_similarity",
    "load_pairs",
    "paired_deltas",
    "primary_role",
    "role_combinations",
    "role_counts",
    "role_flags",
    "synergy",
    "trace_divergence",
    "utility_profile",
]


@dataclass(frozen=True, slots=True)
class CuerResult:
    """Per-instance rows and their aggregate (``ir_measures``' ``CalcResults`` shape).

    Attributes:
        per_instance: one row per instance (and operator/variant where it applies).
        aggregate: the summary rows.
    """

    per_instance: pd.DataFrame
    aggregate: pd.DataFrame


# ----------------------------------------------------------------------- per-pair metrics


# ----------------------------------------------------------------------- pairing


def _missing(frame: pd.DataFrame) -> np.ndarray:
    """The ``missing`` flags of ``frame`` (all False without the column)."""
    if "missing" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return frame["missing"].fillna(False).to_numpy(dtype=bool)


def _base_rows(
    predictions: pd.DataFrame, correctness: str = CORRECTNESS_AXIS.default
) -> pd.DataFrame:
    """The base traces: ``run``, ``instance_id``, :data:`PROFILE_METRICS`, indicators, ``missing``.

    The changed indicators are False (the original against itself). A failed base call is
    kept with NaN metrics, None indicators and ``missing`` True.
    """
    df = predictions
    correct_col = correctness_score(correctness, df.columns)
    run = df["run"] if "run" in df.columns else df.get("run_id", pd.Series("", index=df.index))
    err = df["error"] if "error" in df.columns else pd.Series(None, index=df.index)
    failed = np.array([call_failed(e) for e in err], dtype=bool)
    mask = (df["condition"] == "retrieved").to_numpy() & (df["variant"].fillna("") == "").to_numpy()
    sub = df[mask]
    out = pd.DataFrame({"run": run[mask].to_numpy(), "instance_id": sub["instance_id"]})
    gone = failed[mask]
    cols = dict(AXIS_SCORE, correctness=correct_col)
    vals = {
        a: pd.to_numeric(sub[c], errors="coerce").to_numpy(dtype=float) for a, c in cols.items()
    }
    if correct_col != AXIS_SCORE["correctness"]:
        conf = sub["confidence"] if "confidence" in sub.columns else [None] * len(sub)
        vals["confidence_error"] = np.array(
            [
                confidence_error(c if finite(c) else None, k)
                for c, k in zip(conf, vals["correctness"], strict=True)
            ],
            dtype=float,
        )
    for axis in AXIS_SCORE:
        out[axis] = np.where(gone, np.nan, vals[axis])
    for m in ("trace_divergence", "evidence_divergence"):
        out[m] = np.where(gone, np.nan, 0.0)
    for m in ("answer_changed", "correctness_changed"):
        out[m] = pd.Series([None if g else False for g in gone], dtype=object).to_numpy()
    out["missing"] = gone
    return out.reset_index(drop=True)


# ----------------------------------------------------------------------- aggregates


def _order_key(op: str, variant: str) -> tuple[int, str, str]:
    try:
        return (OPERATOR_ORDER.index((op, variant)), "", "")
    except ValueError:
        return (len(OPERATOR_ORDER), op, variant)


def _in_operator_order(agg: pd.DataFrame, *tails: Iterable[Any]) -> pd.DataFrame:
    """``agg``'s rows by run, then operator (:data:`OPERATOR_ORDER`), then ``tails``' values."""
    if not len(agg):
        return agg
    keys = [
        (r, *_order_key(o, v), *rest)
        for r, o, v, *rest in zip(agg["run"], agg["operator"], agg["variant"], *tails, strict=True)
    ]
    return agg.iloc[sorted(range(len(agg)), key=keys.__getitem__)].reset_index(drop=True)


def utility_profile(
    predictions: pd.DataFrame,
    pairs: pd.DataFrame | None = None,
    *,
    correctness: str = CORRECTNESS_AXIS.default,
    n_resamples: int = 5000,
    seed: int = 42,
) -> CuerResult:
    """Mean of every metric per (run, operator, variant) with 95% bootstrap CIs (Table 2).

    Args:
        predictions: as for :func:`intervention_pairs` (the ``original`` rows are the base
            traces).
        pairs: :func:`intervention_pairs` of ``predictions`` with the same correctness axis
            (computed when None).
        correctness: correctness axis, ``soft`` or ``strict``.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        ``per_instance``: ``run, instance_id, operator, variant``, :data:`PROFILE_METRICS`
        (the original's trace and evidence divergence are 0), ``answer_changed``,
        ``correctness_changed`` and ``missing``; ``aggregate``: one row per (run, operator,
        variant) with ``correctness_axis``, ``n`` (the answered pairs behind the means),
        ``missing`` (pairs whose base or intervention call failed, left out),
        ``not_applicable`` (targeted instances it could not apply to: a replace without a
        non-support passage, :mod:`core.cuer.coverage`), per metric the
        mean, ``<metric>_ci_low`` and ``<metric>_ci_high``, and ``answers_changed`` /
        ``pct_answer_changed`` (answers that differ relaxed-normalized, count and percent of
        ``n``) and ``correctness_changed`` / ``pct_correctness_changed`` (correctness label
        flipped, either way; seed 004 App. C). Two-support rows are left out (see
        :func:`synergy`).

    Raises:
        ValueError: an unknown correctness axis, or ``pairs`` computed with another one.
    """
    if pairs is None:
        pairs = intervention_pairs(predictions, correctness=correctness)
    elif pairs.attrs.get("correctness_axis", correctness) != correctness:
        raise ValueError(
            f"pairs use correctness axis {pairs.attrs['correctness_axis']!r}, not {correctness!r}"
        )
    base = _base_rows(predictions, correctness).assign(operator="original", variant="")
    single = pairs[pairs["operator"] != "two_support"]
    changed = ["answer_changed", "correctness_changed"]
    keep = ["run", "instance_id", "operator", "variant", *PROFILE_METRICS, *changed, "missing"]
    per = pd.concat(
        [
            base[keep],
            single.rename(columns={"param": "_param"}).assign(
                variant=lambda d: d["_param"], missing=_missing(single)
            )[keep],
        ],
        ignore_index=True,
    )
    per["missing"] = per["missing"].astype(bool)
    rows = []
    for (run, op, var), grp in per.groupby(["run", "operator", "variant"], sort=False):
        grp = _canonical(grp)
        gone = int(grp["missing"].sum())
        n = int(len(grp)) - gone
        row: dict[str, Any] = {
            "run": run,
            "operator": op,
            "variant": var,
            "correctness_axis": correctness,
            "n": n,
            "missing": gone,
        }
        for m in PROFILE_METRICS:
            ci = bootstrap_mean_ci(grp[m].to_numpy(dtype=float), n_resamples, seed)
            row[m] = ci["mean"]
            row[f"{m}_ci_low"] = ci["ci_low"]
            row[f"{m}_ci_high"] = ci["ci_high"]
        for m, pct in (
            ("answer_changed", "pct_answer_changed"),
            ("correctness_changed", "pct_correctness_changed"),
        ):
            known = [bool(v) for v in grp.loc[~grp["missing"], m] if v is not None and finite(v)]
            count = "answers_changed" if m == "answer_changed" else m
            row[count] = sum(known)
            row[pct] = 100.0 * sum(known) / len(known) if known else math.nan
        rows.append(row)
    agg = with_not_applicable(pd.DataFrame(rows, columns=list(PROFILE_COLUMNS)), single)
    return CuerResult(per_instance=per, aggregate=_in_operator_order(agg))


def _canonical(grp: pd.DataFrame) -> pd.DataFrame:
    """A group's rows in instance-id order (the bootstrap units' canonical order).

    The same seed then gives the same CIs whatever the order of the stored rows (issue 17).
    """
    if "instance_id" not in grp.columns or len(grp) < 2:
        return grp
    return grp.sort_values("instance_id", kind="stable")


#: Columns of the :func:`utility_profile` aggregate, in order.
PROFILE_COLUMNS = (
    "run",
    "operator",
    "variant",
    "correctness_axis",
    "n",
    "missing",
    *[c for m in PROFILE_METRICS for c in (m, f"{m}_ci_low", f"{m}_ci_high")],
    "answers_changed",
    "pct_answer_changed",
    "correctness_changed",
    "pct_correctness_changed",
)


def paired_deltas(pairs: pd.DataFrame, *, n_resamples: int = 5000, seed: int = 42) -> CuerResult:
    """Paired bootstrap deltas original - perturbed per (run, operator, variant, metric).

    The layout of seed 004 Table 3: ``delta`` (mean paired difference), 95% percentile CI and
    the two-sided bootstrap ``p = 2 min(P(d* >= 0), P(d* <= 0))`` (SPEC §6.6) over the
    instances where both sides are finite. For ``trace_divergence`` the original's value is 0,
    so the delta is minus the mean D. Missing pairs (a failed call) have NaN on both sides:
    they are left out of ``n`` and counted in ``missing``.

    Returns:
        ``per_instance``: the pairs' deltas in long form (``run, instance_id, operator,
        variant, metric, original, perturbed, delta``); ``aggregate``: ``run, operator,
        variant, metric, n, missing, not_applicable, delta, ci_low, ci_high, p, effect``.
    """
    single = pairs[pairs["operator"] != "two_support"]
    long_rows = []
    agg_rows = []
    for (run, op, var), grp in single.groupby(["run", "operator", "param"], sort=False):
        grp = _canonical(grp)
        gone = _missing(grp)
        for m in METRICS:
            if m == "trace_divergence":
                # D(original, original) = 0; NaN where the pair is missing
                orig = np.where(gone, np.nan, 0.0)
            else:
                orig = grp[f"{m}_orig"].to_numpy(dtype=float)
            pert = grp[m].to_numpy(dtype=float)
            # CUE-R §5.9's p is the bootstrap p (the ONCU default is the normal one)
            c = paired_contrast(orig, pert, n_resamples=n_resamples, seed=seed, p_test="bootstrap")
            agg_rows.append(
                {
                    "run": run,
                    "operator": op,
                    "variant": var,
                    "metric": m,
                    "n": c["n"],
                    "missing": int(gone.sum()),
                    "delta": c["mean"],
                    "ci_low": c["ci_low"],
                    "ci_high": c["ci_high"],
                    "p": c["p"],
                    "effect": c["effect"],
                }
            )
            long_rows.append(
                pd.DataFrame(
                    {
                        "run": run,
                        "instance_id": grp["instance_id"].to_numpy(),
                        "operator": op,
                        "variant": var,
                        "metric": m,
                        "original": orig,
                        "perturbed": pert,
                        "delta": orig - pert,
                    }
                )
            )
    agg = pd.DataFrame(
        agg_rows,
        columns=[
            "run",
            "operator",
            "variant",
            "metric",
            "n",
            "missing",
            "delta",
            "ci_low",
            "ci_high",
            "p",
            "effect",
        ],
    )
    agg = with_not_applicable(agg, single)
    agg = _in_operator_order(agg, [METRICS.index(m) for m in agg["metric"]])
    per = (
        pd.concat(long_rows, ignore_index=True)
        if long_rows
        else pd.DataFrame(
            columns=[
                "run",
                "instance_id",
                "operator",
                "variant",
                "metric",
                "original",
                "perturbed",
                "delta",
            ]
        )
    )
    return CuerResult(per_instance=per, aggregate=agg)


def _items(pairs: pd.DataFrame) -> pd.DataFrame:
    return pairs[pairs["operator"].isin(ITEM_OPERATORS)].reset_index(drop=True)


def role_counts(pairs: pd.DataFrame) -> CuerResult:
    """Role flags of every item intervention and the count per flag per comparison.

    The flags overlap (seed 004 §3.5: an item can be constructive and distractive at once), so
    the flag counts of a comparison can sum to more than its items.

    Returns:
        ``per_instance``: the item-operator rows of ``pairs`` (remove / replace / duplicate /
        move) with their flags and ``primary_role`` (None for a missing pair);
        ``aggregate``: one row per (run, operator, variant) with ``n`` (items with a role:
        both calls answered), ``missing`` (items without one because the base or the
        intervention call failed), the number of items carrying each flag of
        :data:`ROLE_FLAGS`, ``unassigned`` (items carrying none) and ``several_flags``
        (items carrying two or more).
    """
    items = _items(pairs)
    rows = []
    for (run, op, var), grp in items.groupby(["run", "operator", "param"], sort=False):
        gone = _missing(grp)
        ok = grp[~gone]
        n_flags = ok["n_flags"].astype(int) if len(ok) else pd.Series(dtype=int)
        row: dict[str, Any] = {
            "run": run,
            "operator": op,
            "variant": var,
            "n": int(len(ok)),
            "missing": int(gone.sum()),
        }
        for flag in ROLE_FLAGS:
            row[flag] = int(ok[f"is_{flag}"].astype(bool).sum())
        row["unassigned"] = int((n_flags == 0).sum())
        row["several_flags"] = int((n_flags >= 2).sum())
        rows.append(row)
    agg = pd.DataFrame(rows, columns=list(ROLE_COUNT_COLUMNS))
    agg = _in_operator_order(agg)
    return CuerResult(per_instance=items, aggregate=agg)


#: Columns of the :func:`role_counts` aggregate, in order.
ROLE_COUNT_COLUMNS = (
    "run",
    "operator",
    "variant",
    "n",
    "missing",
    *ROLE_FLAGS,
    "unassigned",
    "several_flags",
)


def role_combinations(pairs: pd.DataFrame) -> CuerResult:
    """How many items carry each combination of role flags, per comparison.

    Returns:
        ``per_instance``: the item-operator rows of ``pairs``; ``aggregate``: ``run,
        operator, variant, flags`` (e.g. ``constructive+distractive``; ``unassigned``: no
        flag), ``n_flags`` and ``n`` (items), most frequent first within a comparison. Missing
        pairs (a failed call) carry no flags and are left out (:func:`role_counts` counts
        them).
    """
    items = _items(pairs)
    ok = items[~_missing(items)]
    rows = [
        {
            "run": run,
            "operator": op,
            "variant": var,
            "flags": flags,
            "n_flags": 0 if flags == "unassigned" else flags.count("+") + 1,
            "n": int(len(grp)),
        }
        for (run, op, var, flags), grp in ok.groupby(
            ["run", "operator", "param", "flags"], sort=False
        )
    ]
    agg = pd.DataFrame(rows, columns=["run", "operator", "variant", "flags", "n_flags", "n"])
    agg = _in_operator_order(agg, [-n for n in agg["n"]], agg["flags"])
    return CuerResult(per_instance=items, aggregate=agg)


def synergy(
    pairs: pd.DataFrame, metric: str = SYNERGY_METRIC.default, eps: float = DEFAULT_EPS
) -> CuerResult:
    """Two-support synergy ablation statistics (seed 004 §6.8, Table 9).

    Per eligible instance (all three ablations present): ``drop_1``, ``drop_2``, ``drop_both``
    = metric(original) - metric(ablation); ``synergy = drop_both - max(drop_1, drop_2)``;
    ``positive`` = synergy > 0; ``strong_complementary`` = both single drops <= eps (harmless)
    and the joint drop > eps (harmful). An instance one of whose four calls (base, three
    ablations) failed is missing: listed with NaN drops and ``missing`` True, left out of
    ``n`` and counted in the aggregate's ``missing``.

    Args:
        pairs: :func:`intervention_pairs` output.
        metric: utility axis the drops are measured on (the paper: answer F1).
        eps: "harmless" threshold.

    Returns:
        ``per_instance``: ``run, instance_id, supports, drop_1, drop_2, drop_both, synergy,
        positive, strong_complementary, missing``; ``aggregate``: per run ``n``,
        ``missing``, ``mean_drop_1``,
        ``mean_drop_2``, ``mean_drop_both``, ``mean_synergy``, ``pct_positive_synergy`` and
        ``pct_strong_complementary`` (percent of ``n``), ``metric``.

    Raises:
        ValueError: unknown metric.
    """
    if metric not in AXES:
        raise ValueError(f"unknown synergy metric {metric!r}; choose from: {', '.join(AXES)}")
    two = pairs[pairs["operator"] == "two_support"]
    rows = []
    for (run, iid), grp in two.groupby(["run", "instance_id"], sort=False):
        by = {p: g for p, g in zip(grp["param"], grp.to_dict("records"), strict=True)}
        if not all(p in by for p in ("1", "2", "both")):
            continue
        if any(bool(by[p].get("missing", False)) for p in ("1", "2", "both")):
            rows.append(
                {
                    "run": run,
                    "instance_id": iid,
                    "supports": by["both"]["target"],
                    "drop_1": math.nan,
                    "drop_2": math.nan,
                    "drop_both": math.nan,
                    "synergy": math.nan,
                    "positive": None,
                    "strong_complementary": None,
                    "missing": True,
                }
            )
            continue
        drops = {p: by[p][f"{metric}_orig"] - by[p][metric] for p in ("1", "2", "both")}
        if not all(math.isfinite(v) for v in drops.values()):
            continue
        syn = drops["both"] - max(drops["1"], drops["2"])
        rows.append(
            {
                "run": run,
                "instance_id": iid,
                "supports": by["both"]["target"],
                "drop_1": drops["1"],
                "drop_2": drops["2"],
                "drop_both": drops["both"],
                "synergy": syn,
                "positive": bool(syn > 1e-12),
                "strong_complementary": bool(
                    drops["1"] <= eps and drops["2"] <= eps and drops["both"] > eps
                ),
                "missing": False,
            }
        )
    per = pd.DataFrame(
        rows,
        columns=[
            "run",
            "instance_id",
            "supports",
            "drop_1",
            "drop_2",
            "drop_both",
            "synergy",
            "positive",
            "strong_complementary",
            "missing",
        ],
    )
    agg_rows = []
    for run, everything in per.groupby("run", sort=False):
        gone = everything["missing"].astype(bool)
        grp = everything[~gone]
        n = len(grp)
        agg_rows.append(
            {
                "run": run,
                "n": n,
                "missing": int(gone.sum()),
                "mean_drop_1": float(grp["drop_1"].mean()),
                "mean_drop_2": float(grp["drop_2"].mean()),
                "mean_drop_both": float(grp["drop_both"].mean()),
                "mean_synergy": float(grp["synergy"].mean()),
                "pct_positive_synergy": (
                    100.0 * float(grp["positive"].sum()) / n if n else math.nan
                ),
                "pct_strong_complementary": (
                    100.0 * float(grp["strong_complementary"].sum()) / n if n else math.nan
                ),
                "metric": metric,
            }
        )
    agg = pd.DataFrame(
        agg_rows,
        columns=[
            "run",
            "n",
            "missing",
            "mean_drop_1",
            "mean_drop_2",
            "mean_drop_both",
            "mean_synergy",
            "pct_positive_synergy",
            "pct_strong_complementary",
            "metric",
        ],
    )
    return CuerResult(per_instance=per, aggregate=agg)


# ----------------------------------------------------------------------- store side


def intervention_report(
    store: Store,
    run: str,
    *,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
    n_resamples: int = 5000,
    seed: int = 42,
    synergy_metric: str = "answer_f1",
    correctness: str = CORRECTNESS_AXIS.default,
) -> dict[str, Any]:
    """The ``report interventions`` object of one run (JSON-ready; NaN -> None).

    Returns:
        ``correctness_axis``; ``operators``: the :func:`utility_profile` rows (means, evidence
        divergence, answers / correctness labels changed); ``paired``: the
        :func:`paired_deltas` rows; ``roles``: flag counts over every item intervention (one
        count per flag: they overlap; ``several_flags``, ``unassigned``, ``n``, ``missing``),
        ``roles_by_operator`` the same per comparison, ``role_combinations`` ``{flags: n}``,
        ``role_precedence`` (of the primary label), ``roles_missing`` (= ``roles["missing"]``);
        ``synergy``: :func:`synergy`'s aggregate. ``n`` counts the answered pairs, ``missing``
        the pairs left out because the base or the intervention call failed,
        ``not_applicable`` the targeted instances the intervention could not apply to.

    Raises:
        ValueError: no such run, a run without a base trace, or an unknown correctness axis.
    """
    preds = load_pairs(store, [run])
    if not len(preds) or not (preds["condition"] == "retrieved").any():
        raise ValueError(
            f"run '{run}' has no retrieved (base trace) predictions; "
            "run it with: python -m core run-interventions ..."
        )
    pairs = intervention_pairs(preds, eps, tau, correctness)
    prof = utility_profile(
        preds, pairs, correctness=correctness, n_resamples=n_resamples, seed=seed
    ).aggregate
    deltas = paired_deltas(pairs, n_resamples=n_resamples, seed=seed).aggregate
    roles = role_counts(pairs).aggregate
    combos = role_combinations(pairs).aggregate
    syn = synergy(pairs, synergy_metric, eps).aggregate
    count_cols = [c for c in ROLE_COUNT_COLUMNS if c not in ("run", "operator", "variant")]
    totals = {c: int(roles[c].sum()) if len(roles) else 0 for c in count_cols}
    combo_totals = {
        f: int(n)
        for f, n in combos.groupby("flags", sort=False)["n"]
        .sum()
        .sort_values(ascending=False, kind="stable")
        .items()
    }
    syn_obj: dict[str, Any] = (
        {k: v for k, v in syn.iloc[0].to_dict().items() if k != "run"}
        if len(syn)
        else {"n": 0, "missing": 0, "metric": synergy_metric}
    )
    op_keys = (
        "operator",
        "variant",
        "n",
        "missing",
        "not_applicable",
        *PROFILE_METRICS,
        "answers_changed",
        "pct_answer_changed",
        "correctness_changed",
        "pct_correctness_changed",
    )
    return json_plain(
        {
            "correctness_axis": correctness,
            "operators": [{k: r[k] for k in op_keys} for r in prof.to_dict("records")],
            "paired": [
                {
                    k: r[k]
                    for k in (
                        "operator",
                        "variant",
                        "metric",
                        "n",
                        "missing",
                        "not_applicable",
                        "delta",
                        "ci_low",
                        "ci_high",
                        "p",
                    )
                }
                for r in deltas.to_dict("records")
            ],
            "roles": totals,
            "roles_by_operator": [
                {k: r[k] for k in ("operator", "variant", *count_cols)}
                for r in roles.to_dict("records")
            ],
            "role_combinations": combo_totals,
            "role_precedence": list(PRIMARY_ROLE_ORDER),
            "roles_missing": totals["missing"],
            "synergy": syn_obj,
        }
    )
