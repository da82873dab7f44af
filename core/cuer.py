"""CUE-R: multi-axis utility, trace divergence, evidence roles and synergy (SPEC §7; seed 004).

Each intervention prediction is paired with the base trace of the same run and instance (the
``retrieved`` prediction, seed 004 §4.6) and described by:

- utility axes (seed 004 §3.3, §5.8, App. B) of both runs: ``correctness`` = soft correctness,
  ``answer_f1`` = relaxed token F1, ``grounding`` = title grounding (eq. 11), and
  ``confidence_error`` CE = |c - 1[soft correct]| with c clamped to [0, 1] -- the stored
  ``soft_correct``, ``f1_relaxed``, ``title_grounding`` and ``confidence_error`` scores, so
  every number is the one the rest of the product shows (CE is NaN when the reply gave no
  confidence, grounding NaN when the instance has no gold evidence);
- deltas ``delta_k = U_k(original) - U_k(perturbed)`` (eq. 7): positive means the original
  was better on correctness, F1 and grounding; on CE positive means the perturbed run erred
  less;
- trace divergence (eq. 9) ``D = 0.5 * (1 - |E & E'| / |E | E'|) + 0.3 * 1[answer changed]
  + 0.2 * |c - c'|`` over the cited-id sets, relaxed-normalized answers and clamped
  confidences (the Jaccard term is 0 when both sets are empty; a reply without a confidence
  counts as c = 0, i.e. it claims none);
- a role (seed 004 §3.5, SPEC §7) from the deltas with thresholds ``eps`` and ``tau``:
  ``constructive`` (delta_corr > 0 or delta_grnd > 0), ``redundant`` (every |delta| <= eps and
  D <= eps), ``distractive`` (D >= tau and a utility worsens: delta_corr, delta_f1 or
  delta_grnd > 0, or delta_cal < 0), ``confidence_distorting`` (|delta_cal| > eps and
  |delta_corr| <= eps). Each rule is a flag; ``role`` is the first flag that holds in that order,
  else ``unassigned``. NaN deltas are left out of every rule.

Aggregates: per (operator, variant) means with 95% bootstrap CIs (seed 004 Table 2 / App. A),
paired bootstrap deltas original - perturbed per metric with the two-sided bootstrap p
(Table 3; 5,000 resamples, seed 42, :func:`core.stats.paired_contrast`), role counts, and the
two-support synergy statistics (Table 9). Every function returns per-instance rows and the
aggregate. The defaults of ``eps`` (0.05) and ``tau`` (0.5) are this project's: the paper
gives the rules (≈ 0, ≫ 0) but no numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.interventions import EPS, SYNERGY_METRIC, TAU, parse_variant
from core.jsonable import json_plain
from core.scoring import normalize_relaxed
from core.stats import bootstrap_mean_ci, paired_contrast
from core.store import Store

__all__ = [
    "AXES",
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "METRICS",
    "OPERATOR_ORDER",
    "ROLES",
    "CuerResult",
    "evidence_role",
    "intervention_pairs",
    "intervention_report",
    "jaccard_distance",
    "load_pairs",
    "paired_deltas",
    "role_counts",
    "role_flags",
    "synergy",
    "trace_divergence",
    "utility_profile",
]

#: Utility axes (seed 004 §3.3): higher is better except ``confidence_error``.
AXES = ("correctness", "answer_f1", "grounding", "confidence_error")
#: Metrics of the CUE-R tables: the utility axes and the trace divergence.
METRICS = (*AXES, "trace_divergence")
#: Stored score column behind each utility axis.
_AXIS_SCORE = {
    "correctness": "soft_correct",
    "answer_f1": "f1_relaxed",
    "grounding": "title_grounding",
    "confidence_error": "confidence_error",
}
#: Delta column names (seed 004 eq. 7: corr, f1, grnd, cal).
_DELTA = {
    "correctness": "delta_corr",
    "answer_f1": "delta_f1",
    "grounding": "delta_grnd",
    "confidence_error": "delta_cal",
}
#: Roles in precedence order (the first whose rule holds is the row's ``role``).
ROLES = ("constructive", "redundant", "distractive", "confidence_distorting", "unassigned")
#: Default threshold for "negligible" (|delta| <= eps, D <= eps), as declared.
DEFAULT_EPS = EPS.default
#: Default threshold for "large" trace divergence (D >= tau), as declared.
DEFAULT_TAU = TAU.default
#: (operator, variant) rows of the report, in table order; others follow sorted.
OPERATOR_ORDER = (
    ("original", ""), ("remove", ""), ("replace", "easy"), ("replace", "medium"),
    ("replace", "hard"), ("duplicate", "front"), ("duplicate", "after"), ("duplicate", "end"),
    ("zero_retrieval", ""),
)  # fmt: skip
#: Item operators a run plans (a Case-view rerun of one of them, on the planned target, is the
#: planned call: same key, same prompt).
_PLANNED = ("remove", "replace", "duplicate")
#: Operators whose rows describe one evidence item (they get a role).
_ITEM_OPERATORS = ("remove", "replace", "duplicate", "move")


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


def jaccard_distance(a: Iterable[str], b: Iterable[str]) -> float:
    """``1 - |A & B| / |A | B|`` over id sets; 0.0 when both are empty."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return 0.0 if not union else 1.0 - len(sa & sb) / len(union)


def _clamp(c: Any) -> float:
    if c is None or c is pd.NA:
        return 0.0
    c = float(c)
    return 0.0 if math.isnan(c) else min(max(c, 0.0), 1.0)


def trace_divergence(
    cited: Iterable[str],
    cited_perturbed: Iterable[str],
    answer: str | None,
    answer_perturbed: str | None,
    confidence: float | None,
    confidence_perturbed: float | None,
    *,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> float:
    """Trace divergence D of seed 004 eq. 9 (SPEC §7).

    ``D = 0.5 * jaccard_distance(E, E') + 0.3 * 1[answer changed] + 0.2 * |c - c'|``; answers
    are compared relaxed-normalized (SPEC §6.2, with the instance's answer and reasoning type),
    confidences clamped to [0, 1], a missing confidence counts as 0.
    """
    # a parse error has no answer (None, or NaN once in a frame): it counts as ""
    a, a2 = (x if isinstance(x, str) else "" for x in (answer, answer_perturbed))
    changed = normalize_relaxed(a, answer_type, reasoning_type) != normalize_relaxed(
        a2, answer_type, reasoning_type
    )
    return (
        0.5 * jaccard_distance(cited, cited_perturbed)
        + 0.3 * float(changed)
        + 0.2 * abs(_clamp(confidence) - _clamp(confidence_perturbed))
    )


def _finite(x: Any) -> bool:
    return x is not None and x is not pd.NA and not (isinstance(x, float) and math.isnan(x))


def role_flags(
    deltas: Mapping[str, float],
    divergence: float,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
) -> dict[str, bool]:
    """Which role rules hold for one intervention (SPEC §7; seed 004 §3.5).

    Args:
        deltas: ``delta_corr``, ``delta_f1``, ``delta_grnd``, ``delta_cal`` (original -
            perturbed; NaN or missing entries are left out of every rule).
        divergence: the trace divergence D.
        eps: "negligible" threshold.
        tau: "large" trace-divergence threshold.

    Returns:
        ``{constructive, redundant, distractive, confidence_distorting}`` booleans.
    """
    d = {k: float(v) for k, v in deltas.items() if _finite(v)}
    corr, f1, grnd, cal = (d.get(k) for k in ("delta_corr", "delta_f1", "delta_grnd", "delta_cal"))
    worsens = any(v is not None and v > 0 for v in (corr, f1, grnd)) or (
        cal is not None and cal < 0
    )
    return {
        "constructive": (corr is not None and corr > 0) or (grnd is not None and grnd > 0),
        "redundant": all(abs(v) <= eps for v in d.values()) and divergence <= eps,
        "distractive": divergence >= tau and worsens,
        "confidence_distorting": cal is not None
        and abs(cal) > eps
        and corr is not None
        and abs(corr) <= eps,
    }


def evidence_role(
    deltas: Mapping[str, float],
    divergence: float,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
) -> str:
    """The role of one intervened item: the first of :data:`ROLES` whose rule holds."""
    flags = role_flags(deltas, divergence, eps, tau)
    return next((r for r in ROLES[:-1] if flags[r]), "unassigned")


# ----------------------------------------------------------------------- pairing


def _ids(x: Any) -> list[str]:
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return []
    if isinstance(x, str):
        return [x] if x else []
    return [str(v) for v in x]


def _meta(x: Any) -> dict[str, Any]:
    if isinstance(x, Mapping):
        return dict(x)
    if isinstance(x, str) and x:
        try:
            out = json.loads(x)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def _label(variant: str) -> tuple[str, str, tuple[str, ...], str] | None:
    try:
        v = parse_variant(variant)
    except ValueError:
        return None
    return v["operator"], v["param"] or "", v["targets"], v["base"]


def _num(x: Any) -> float:
    return float(x) if _finite(x) else math.nan


def intervention_pairs(
    predictions: pd.DataFrame, eps: float = DEFAULT_EPS, tau: float = DEFAULT_TAU
) -> pd.DataFrame:
    """Pair every planned intervention with its base trace: one row per (instance, variant).

    Args:
        predictions: prediction rows joined with their scores and the instance's
            ``answer_type`` / ``reasoning_type``: ``instance_id``, ``condition``, ``variant``,
            ``answer``, ``cited_ids``, ``confidence``, ``error``, ``meta`` (optional) and the
            score columns ``soft_correct``, ``f1_relaxed``, ``title_grounding``,
            ``confidence_error``; a ``run`` column (optional) keeps runs apart. Base rows are
            condition ``retrieved``, variant ``""``; intervention rows are condition
            ``intervention`` with a variant of :func:`core.interventions.format_variant` on the
            ``retrieved`` base. Case-view reruns (``meta.rule == "user"``) are left out, except
            a rerun of a planned operator on the planned target (it replaced the planned row
            under the same key).
        eps: role threshold for "negligible".
        tau: role threshold for "large" trace divergence.

    Returns:
        Columns ``run``, ``instance_id``, ``variant``, ``operator``, ``param``, ``target``,
        ``rule``, the axes of both runs (``correctness_orig``, ``correctness`` ...),
        ``trace_divergence``, the deltas (``delta_corr``, ``delta_f1``, ``delta_grnd``,
        ``delta_cal``), the role flags and ``role`` (roles only for item operators, else
        None), ``answer_orig``, ``answer``, ``confidence_orig``, ``confidence`` and ``missing``.
        A pair whose base or intervention call failed (``error`` set) has ``missing`` True,
        NaN axes, divergence and deltas, and no role flags or role: its delta is not computed.
    """
    df = predictions.copy()
    if "run" not in df.columns:
        df["run"] = df["run_id"] if "run_id" in df.columns else ""
    for col in ("error", "meta", "answer_type", "reasoning_type"):
        if col not in df.columns:
            df[col] = None
    df["_failed"] = [_failed(e) for e in df["error"]]
    base = df[(df["condition"] == "retrieved") & (df["variant"].fillna("") == "")]
    base_by = {(r["run"], r["instance_id"]): r for r in base.to_dict("records")}
    records = [
        (r, _label(r["variant"]), _meta(r["meta"]))
        for r in df[df["condition"] == "intervention"].to_dict("records")
    ]
    # The planned target of each instance, from the planner's own rows.
    planned = {
        (r["run"], r["instance_id"]): m.get("target")
        for r, lab, m in records
        if lab is not None and lab[0] in _PLANNED and m.get("rule") not in (None, "user")
    }
    rows: list[dict[str, Any]] = []
    for r, label, meta in records:
        if label is None or label[3] != "retrieved":
            continue
        if meta.get("rule") == "user" and not (
            label[0] in _PLANNED and planned.get((r["run"], r["instance_id"])) == label[2][0]
        ):
            continue  # a Case-view rerun the plan does not hold (a rerun of a planned call is)
        b = base_by.get((r["run"], r["instance_id"]))
        if b is None:
            continue
        op, param, targets, _ = label
        out: dict[str, Any] = {
            "run": r["run"],
            "instance_id": r["instance_id"],
            "variant": r["variant"],
            "operator": op,
            "param": param,
            "target": "+".join(targets),
            "rule": meta.get("rule"),
        }
        missing = bool(b["_failed"] or r["_failed"])
        for axis, col in _AXIS_SCORE.items():
            out[f"{axis}_orig"] = math.nan if missing else _num(b.get(col))
            out[axis] = math.nan if missing else _num(r.get(col))
        out["trace_divergence"] = math.nan if missing else trace_divergence(
            _ids(b["cited_ids"]), _ids(r["cited_ids"]), b.get("answer"), r.get("answer"),
            b.get("confidence"), r.get("confidence"), answer_type=r.get("answer_type"),
            reasoning_type=r.get("reasoning_type"),
        )  # fmt: skip
        deltas = {_DELTA[a]: out[f"{a}_orig"] - out[a] for a in AXES}
        out.update(deltas)
        if op in _ITEM_OPERATORS and not missing:
            flags = role_flags(deltas, out["trace_divergence"], eps, tau)
            out.update({f"is_{k}": v for k, v in flags.items()})
            out["role"] = next((k for k in ROLES[:-1] if flags[k]), "unassigned")
        else:
            out.update({f"is_{k}": None for k in ROLES[:-1]})
            out["role"] = None
        for k in ("answer", "confidence"):
            out[f"{k}_orig"] = b.get(k)
            out[k] = r.get(k)
        out["missing"] = missing
        rows.append(out)
    cols = [
        "run", "instance_id", "variant", "operator", "param", "target", "rule",
        *[c for a in AXES for c in (f"{a}_orig", a)], "trace_divergence", *_DELTA.values(),
        *[f"is_{k}" for k in ROLES[:-1]], "role", "answer_orig", "answer", "confidence_orig",
        "confidence", "missing",
    ]  # fmt: skip
    out_df = pd.DataFrame(rows, columns=cols)
    out_df["missing"] = out_df["missing"].astype(bool)
    return out_df


def _failed(error: Any) -> bool:
    """True when a prediction's call failed (its ``error`` is set): not an answer."""
    return _finite(error) and bool(str(error).strip())


def _missing(frame: pd.DataFrame) -> np.ndarray:
    """The ``missing`` flags of ``frame`` (all False without the column)."""
    if "missing" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return frame["missing"].fillna(False).to_numpy(dtype=bool)


def _base_rows(predictions: pd.DataFrame) -> pd.DataFrame:
    """The base traces' utility axes: ``run``, ``instance_id``, :data:`METRICS`, ``missing``.

    A failed base call is kept with NaN metrics and ``missing`` True.
    """
    df = predictions
    run = df["run"] if "run" in df.columns else df.get("run_id", pd.Series("", index=df.index))
    err = df["error"] if "error" in df.columns else pd.Series(None, index=df.index)
    failed = np.array([_failed(e) for e in err], dtype=bool)
    mask = (df["condition"] == "retrieved").to_numpy() & (df["variant"].fillna("") == "").to_numpy()
    sub = df[mask]
    out = pd.DataFrame({"run": run[mask].to_numpy(), "instance_id": sub["instance_id"]})
    gone = failed[mask]
    for axis, col in _AXIS_SCORE.items():
        out[axis] = np.where(gone, np.nan, pd.to_numeric(sub[col], errors="coerce").to_numpy())
    out["trace_divergence"] = np.where(gone, np.nan, 0.0)
    out["missing"] = gone
    return out.reset_index(drop=True)


# ----------------------------------------------------------------------- aggregates


def _order_key(op: str, variant: str) -> tuple[int, str, str]:
    try:
        return (OPERATOR_ORDER.index((op, variant)), "", "")
    except ValueError:
        return (len(OPERATOR_ORDER), op, variant)


def utility_profile(
    predictions: pd.DataFrame,
    pairs: pd.DataFrame | None = None,
    *,
    n_resamples: int = 5000,
    seed: int = 42,
) -> CuerResult:
    """Mean of every metric per (run, operator, variant) with 95% bootstrap CIs (Table 2).

    Args:
        predictions: as for :func:`intervention_pairs` (the ``original`` rows are the base
            traces).
        pairs: :func:`intervention_pairs` of ``predictions`` (computed when None).
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        ``per_instance``: ``run, instance_id, operator, variant``, :data:`METRICS` (the
        original's trace divergence is 0) and ``missing``; ``aggregate``: one row per (run,
        operator, variant) with ``n`` (the answered pairs behind the means), ``missing``
        (pairs whose base or intervention call failed, left out) and, per metric, the mean,
        ``<metric>_ci_low`` and ``<metric>_ci_high``. Two-support rows are left out (see
        :func:`synergy`).
    """
    if pairs is None:
        pairs = intervention_pairs(predictions)
    base = _base_rows(predictions).assign(operator="original", variant="")
    single = pairs[pairs["operator"] != "two_support"]
    keep = ["run", "instance_id", "operator", "variant", *METRICS, "missing"]
    per = pd.concat(
        [
            base[keep],
            single.rename(columns={"param": "_param"})
            .assign(variant=lambda d: d["_param"], missing=_missing(single))[keep],
        ],
        ignore_index=True,
    )
    per["missing"] = per["missing"].astype(bool)
    rows = []
    for (run, op, var), grp in per.groupby(["run", "operator", "variant"], sort=False):
        gone = int(grp["missing"].sum())
        row: dict[str, Any] = {"run": run, "operator": op, "variant": var,
                               "n": int(len(grp)) - gone, "missing": gone}  # fmt: skip
        for m in METRICS:
            ci = bootstrap_mean_ci(grp[m].to_numpy(dtype=float), n_resamples, seed)
            row[m] = ci["mean"]
            row[f"{m}_ci_low"] = ci["ci_low"]
            row[f"{m}_ci_high"] = ci["ci_high"]
        rows.append(row)
    cols = ["run", "operator", "variant", "n", "missing"]
    cols += [c for m in METRICS for c in (m, f"{m}_ci_low", f"{m}_ci_high")]
    agg = pd.DataFrame(rows, columns=cols)
    if len(agg):
        keys = [
            (r, *_order_key(o, v))
            for r, o, v in zip(agg["run"], agg["operator"], agg["variant"], strict=True)
        ]
        agg = agg.iloc[sorted(range(len(agg)), key=lambda i: keys[i])].reset_index(drop=True)
    return CuerResult(per_instance=per, aggregate=agg)


def paired_deltas(
    pairs: pd.DataFrame, *, n_resamples: int = 5000, seed: int = 42
) -> CuerResult:
    """Paired bootstrap deltas original - perturbed per (run, operator, variant, metric).

    The layout of seed 004 Table 3: ``delta`` (mean paired difference), 95% percentile CI and
    the two-sided bootstrap ``p = 2 min(P(d* >= 0), P(d* <= 0))`` (SPEC §6.6) over the
    instances where both sides are finite. For ``trace_divergence`` the original's value is 0,
    so the delta is minus the mean D. Missing pairs (a failed call) have NaN on both sides:
    they are left out of ``n`` and counted in ``missing``.

    Returns:
        ``per_instance``: the pairs' deltas in long form (``run, instance_id, operator,
        variant, metric, original, perturbed, delta``); ``aggregate``: ``run, operator,
        variant, metric, n, missing, delta, ci_low, ci_high, p, effect``.
    """
    single = pairs[pairs["operator"] != "two_support"]
    long_rows = []
    agg_rows = []
    for (run, op, var), grp in single.groupby(["run", "operator", "param"], sort=False):
        gone = _missing(grp)
        for m in METRICS:
            if m == "trace_divergence":
                # D(original, original) = 0; NaN where the pair is missing
                orig = np.where(gone, np.nan, 0.0)
            else:
                orig = grp[f"{m}_orig"].to_numpy(dtype=float)
            pert = grp[m].to_numpy(dtype=float)
            c = paired_contrast(orig, pert, n_resamples=n_resamples, seed=seed)
            agg_rows.append(
                {
                    "run": run, "operator": op, "variant": var, "metric": m, "n": c["n"],
                    "missing": int(gone.sum()), "delta": c["mean"], "ci_low": c["ci_low"],
                    "ci_high": c["ci_high"], "p": c["p"], "effect": c["effect"],
                }  # fmt: skip
            )
            long_rows.append(
                pd.DataFrame(
                    {
                        "run": run, "instance_id": grp["instance_id"].to_numpy(),
                        "operator": op, "variant": var, "metric": m, "original": orig,
                        "perturbed": pert, "delta": orig - pert,
                    }  # fmt: skip
                )
            )
    agg = pd.DataFrame(
        agg_rows,
        columns=["run", "operator", "variant", "metric", "n", "missing", "delta", "ci_low",
                 "ci_high", "p", "effect"],
    )  # fmt: skip
    if len(agg):
        keys = [
            (r, *_order_key(o, v), METRICS.index(m))
            for r, o, v, m in zip(
                agg["run"], agg["operator"], agg["variant"], agg["metric"], strict=True
            )
        ]
        agg = agg.iloc[sorted(range(len(agg)), key=lambda i: keys[i])].reset_index(drop=True)
    per = (
        pd.concat(long_rows, ignore_index=True)
        if long_rows
        else pd.DataFrame(
            columns=["run", "instance_id", "operator", "variant", "metric", "original",
                     "perturbed", "delta"]
        )  # fmt: skip
    )
    return CuerResult(per_instance=per, aggregate=agg)


def role_counts(pairs: pd.DataFrame) -> CuerResult:
    """Role of every item intervention and the counts per (run, operator, variant, role).

    Returns:
        ``per_instance``: the item-operator rows of ``pairs`` (remove / replace / duplicate /
        move) with ``role`` (None for a missing pair); ``aggregate``: ``run, operator,
        variant, role, n, missing``, every role listed (0 when none); ``missing`` (the same on
        every role row of a comparison) counts its pairs without a role because a call
        failed.
    """
    items = pairs[pairs["operator"].isin(_ITEM_OPERATORS)].reset_index(drop=True)
    rows = []
    for (run, op, var), grp in items.groupby(["run", "operator", "param"], sort=False):
        gone = int(_missing(grp).sum())
        counts = grp.loc[~_missing(grp), "role"].value_counts()
        for role in ROLES:
            rows.append(
                {"run": run, "operator": op, "variant": var, "role": role,
                 "n": int(counts.get(role, 0)), "missing": gone}
            )  # fmt: skip
    agg = pd.DataFrame(rows, columns=["run", "operator", "variant", "role", "n", "missing"])
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
                {"run": run, "instance_id": iid, "supports": by["both"]["target"],
                 "drop_1": math.nan, "drop_2": math.nan, "drop_both": math.nan,
                 "synergy": math.nan, "positive": None, "strong_complementary": None,
                 "missing": True}
            )  # fmt: skip
            continue
        drops = {p: by[p][f"{metric}_orig"] - by[p][metric] for p in ("1", "2", "both")}
        if not all(math.isfinite(v) for v in drops.values()):
            continue
        syn = drops["both"] - max(drops["1"], drops["2"])
        rows.append(
            {
                "run": run, "instance_id": iid, "supports": by["both"]["target"],
                "drop_1": drops["1"], "drop_2": drops["2"], "drop_both": drops["both"],
                "synergy": syn, "positive": bool(syn > 1e-12),
                "strong_complementary": bool(
                    drops["1"] <= eps and drops["2"] <= eps and drops["both"] > eps
                ),
                "missing": False,
            }  # fmt: skip
        )
    per = pd.DataFrame(
        rows,
        columns=["run", "instance_id", "supports", "drop_1", "drop_2", "drop_both", "synergy",
                 "positive", "strong_complementary", "missing"],
    )  # fmt: skip
    agg_rows = []
    for run, everything in per.groupby("run", sort=False):
        gone = everything["missing"].astype(bool)
        grp = everything[~gone]
        n = len(grp)
        agg_rows.append(
            {
                "run": run, "n": n, "missing": int(gone.sum()),
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
            }  # fmt: skip
        )
    agg = pd.DataFrame(
        agg_rows,
        columns=["run", "n", "missing", "mean_drop_1", "mean_drop_2", "mean_drop_both",
                 "mean_synergy", "pct_positive_synergy", "pct_strong_complementary", "metric"],
    )  # fmt: skip
    return CuerResult(per_instance=per, aggregate=agg)


# ----------------------------------------------------------------------- store side


def load_pairs(store: Store, runs: Sequence[str]) -> pd.DataFrame:
    """The CUE-R prediction rows of the runs: predictions with scores and instance types.

    Returns:
        Base (``retrieved``) and ``intervention`` rows, with ``run``, ``answer_type`` and
        ``reasoning_type`` added; the input of :func:`intervention_pairs`.

    Raises:
        ValueError: a run that is not stored.
    """
    frames = []
    types: dict[str, pd.DataFrame] = {}
    for run in runs:
        row = store.run_row(run)
        if row is None:
            raise ValueError(f"no run '{run}' in {store.path}")
        preds = store.prediction_rows(run)
        preds = preds[preds["condition"].isin(["retrieved", "intervention"])].copy()
        ds = row.get("dataset_id")
        if ds not in types:
            inst = store.instances_frame(ds) if ds in store.dataset_names() else pd.DataFrame()
            cols = ["instance_id", "answer_type", "reasoning_type"]
            types[ds] = inst[cols] if len(inst) else pd.DataFrame(columns=cols)
        preds = preds.merge(types[ds], on="instance_id", how="left")
        preds.insert(0, "run", run)
        frames.append(preds)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def intervention_report(
    store: Store,
    run: str,
    *,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
    n_resamples: int = 5000,
    seed: int = 42,
    synergy_metric: str = "answer_f1",
) -> dict[str, Any]:
    """The ``report interventions`` object of one run (JSON-ready; NaN -> None).

    Returns:
        ``{"operators": [{operator, variant, n, missing, correctness, answer_f1, grounding,
        confidence_error, trace_divergence}], "paired": [{operator, variant, metric, n,
        missing, delta, ci_low, ci_high, p}], "roles": {role: count}, "roles_missing": count,
        "synergy": {n, missing, mean_drop_1, mean_drop_2, mean_drop_both, mean_synergy,
        pct_positive_synergy, pct_strong_complementary, metric}}``. Roles count the remove /
        replace / duplicate interventions; ``n`` counts the answered pairs and ``missing`` the
        pairs left out because a call failed (``roles_missing``: item interventions without a
        role for that reason).

    Raises:
        ValueError: no such run, or a run without a retrieved base trace.
    """
    preds = load_pairs(store, [run])
    if not len(preds) or not (preds["condition"] == "retrieved").any():
        raise ValueError(
            f"run '{run}' has no retrieved (base trace) predictions; "
            "run it with: python -m core run-interventions ..."
        )
    pairs = intervention_pairs(preds, eps, tau)
    prof = utility_profile(preds, pairs, n_resamples=n_resamples, seed=seed).aggregate
    deltas = paired_deltas(pairs, n_resamples=n_resamples, seed=seed).aggregate
    roles = role_counts(pairs).aggregate
    syn = synergy(pairs, synergy_metric, eps).aggregate
    counts = {r: int(roles.loc[roles["role"] == r, "n"].sum()) for r in ROLES}
    # ``missing`` repeats on every role row of a comparison: count it once per comparison
    roles_missing = int(
        roles.drop_duplicates(["run", "operator", "variant"])["missing"].sum() if len(roles) else 0
    )
    syn_obj: dict[str, Any] = (
        {k: v for k, v in syn.iloc[0].to_dict().items() if k != "run"}
        if len(syn)
        else {"n": 0, "missing": 0, "metric": synergy_metric}
    )
    return json_plain(
        {
            "operators": [
                {k: r[k] for k in ("operator", "variant", "n", "missing", *METRICS)}
                for r in prof.to_dict("records")
            ],
            "paired": [
                {k: r[k] for k in ("operator", "variant", "metric", "n", "missing", "delta",
                                    "ci_low", "ci_high", "p")}
                for r in deltas.to_dict("records")
            ],  # fmt: skip
            "roles": counts,
            "roles_missing": roles_missing,
            "synergy": syn_obj,
        }
    )
