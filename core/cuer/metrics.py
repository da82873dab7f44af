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

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.cuer.coverage import with_not_applicable
from core.cuer.interventions import EPS, SYNERGY_METRIC, TAU, parse_variant
from core.jsonable import json_plain
from core.params import Param
from core.scoring.rows import confidence_error, normalize_relaxed
from core.stats.inference import bootstrap_mean_ci, paired_contrast
from core.store import Store
from core.types import stored_ids

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

#: Utility axes (seed 004 §3.3): higher is better except ``confidence_error``.
AXES = ("correctness", "answer_f1", "grounding", "confidence_error")
#: Metrics of the CUE-R tables: the utility axes and the trace divergence.
METRICS = (*AXES, "trace_divergence")
#: Metrics of the utility profile and the sweeps: :data:`METRICS` and the evidence divergence
#: d_Jaccard(E, E') (seed 004 App. C Table 13, "Evid. Div.").
PROFILE_METRICS = (*METRICS, "evidence_divergence")
#: Stored score column behind each utility axis (correctness: see :data:`CORRECTNESS_SCORES`).
_AXIS_SCORE = {
    "correctness": "soft_correct",
    "answer_f1": "f1_relaxed",
    "grounding": "title_grounding",
    "confidence_error": "confidence_error",
}
#: Correctness axes (seed 004 §4.6) and the stored score behind each: ``soft`` = soft
#: correctness (App. B: normalized match, yes/no, numbers or token F1 >= 0.8; the paper's
#: tables), ``strict`` = normalized exact match.
CORRECTNESS_SCORES = {"soft": "soft_correct", "strict": "em_strict"}
#: Which correctness axis the CUE-R numbers use (declared once for the page and the CLI).
CORRECTNESS_AXIS = Param(
    "correctness_axis", str, "soft", "correctness axis: soft (normalized match, yes/no, "
    "numbers or token F1 >= 0.8; the paper's tables) or strict (normalized exact match). "
    "Confidence error |c - 1[correct]|, Δcorr and the roles follow it",
    choices=tuple(CORRECTNESS_SCORES), section="CUE-R (seed 004) §4.6, §5.8, App. B",
)  # fmt: skip
#: Delta column names (seed 004 eq. 7: corr, f1, grnd, cal).
_DELTA = {
    "correctness": "delta_corr",
    "answer_f1": "delta_f1",
    "grounding": "delta_grnd",
    "confidence_error": "delta_cal",
}
#: The paper's operational roles (seed 004 §3.5), one flag each: an item can carry several.
ROLE_FLAGS = ("constructive", "redundant", "distractive", "confidence_distorting")
#: Precedence of the single ``primary_role`` label (colouring and filtering only; counts are
#: per flag): constructive first, then distractive, as the paper labels its exemplars (seed
#: 004 Table 10: the "Constructive" item has Δcorr = +1 and D = 0.98, so it also carries the
#: distractive flag; every distractive item is constructive under §3.5, so the distractive
#: flag is counted but never the primary label), then confidence-distorting (a correctness
#: or grounding harm outranks a confidence change), and redundant last (with eps > 0 it can
#: overlap a positive change within eps).
PRIMARY_ROLE_ORDER = ("constructive", "distractive", "confidence_distorting", "redundant")
#: Every ``primary_role`` value, in display order (``unassigned``: no flag holds).
ROLES = (*ROLE_FLAGS, "unassigned")
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


def jaccard_similarity(a: Iterable[str], b: Iterable[str]) -> float:
    """``|A & B| / |A | B|`` over id sets; 1.0 when both are empty (nothing differs).

    ``{a, b}`` vs ``{b, c}``: 1 / 3.
    """
    sa, sb = set(a), set(b)
    union = sa | sb
    return 1.0 if not union else len(sa & sb) / len(union)


def jaccard_distance(a: Iterable[str], b: Iterable[str]) -> float:
    """``d_Jaccard = 1 - |A & B| / |A | B|`` (seed 004 §3.4, App. B); 0.0 when both are empty.

    Over the cited id sets of the original and the perturbed run this is the evidence
    divergence (App. C Table 13). ``{a, b}`` vs ``{b, c}``: 2 / 3.
    """
    return 1.0 - jaccard_similarity(a, b)


def _clamp(c: Any) -> float:
    if c is None or c is pd.NA:
        return 0.0
    c = float(c)
    return 0.0 if math.isnan(c) else min(max(c, 0.0), 1.0)


def answer_changed(
    answer: str | None,
    answer_perturbed: str | None,
    *,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> bool:
    """``1[y != y']`` of seed 004 eq. 9: the answers differ relaxed-normalized (SPEC §6.2).

    A parse error has no answer (None, or NaN once in a frame): it counts as ``""``.
    """
    a, a2 = (x if isinstance(x, str) else "" for x in (answer, answer_perturbed))
    return normalize_relaxed(a, answer_type, reasoning_type) != normalize_relaxed(
        a2, answer_type, reasoning_type
    )


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
    changed = answer_changed(
        answer, answer_perturbed, answer_type=answer_type, reasoning_type=reasoning_type
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
    """Which of the paper's role rules hold for one intervention (seed 004 §3.5; SPEC §7).

    Each rule is evaluated on its own (an item can be constructive and distractive at once):

    - constructive: ``delta_corr > 0`` or ``delta_grnd > 0``;
    - redundant: ``|delta_corr|``, ``|delta_grnd|``, ``|delta_cal|`` all <= eps and D <= eps;
    - distractive: D >= tau and (``delta_corr > 0`` or ``delta_grnd > 0``);
    - confidence-distorting: ``|delta_cal| > eps`` and ``|delta_corr| <= eps``.

    Args:
        deltas: ``delta_corr``, ``delta_grnd``, ``delta_cal`` (original - perturbed; NaN or
            missing entries are left out of every rule; ``delta_f1`` is ignored: answer F1 is
            no role axis, eq. 7).
        divergence: the trace divergence D.
        eps: "negligible" threshold (≈ 0).
        tau: "large" trace-divergence threshold (D ≫ 0).

    Returns:
        ``{constructive, redundant, distractive, confidence_distorting}`` booleans.
    """
    d = {
        k: float(v) for k, v in deltas.items()
        if k in ("delta_corr", "delta_grnd", "delta_cal") and _finite(v)
    }  # fmt: skip
    corr, grnd, cal = (d.get(k) for k in ("delta_corr", "delta_grnd", "delta_cal"))
    harms = (corr is not None and corr > 0) or (grnd is not None and grnd > 0)
    return {
        "constructive": harms,
        "redundant": all(abs(v) <= eps for v in d.values()) and divergence <= eps,
        "distractive": divergence >= tau and harms,
        "confidence_distorting": cal is not None
        and abs(cal) > eps
        and corr is not None
        and abs(corr) <= eps,
    }


def primary_role(flags: Mapping[str, bool]) -> str:
    """The one label of an item, for colouring and filtering only (counts are per flag).

    The first flag of :data:`PRIMARY_ROLE_ORDER` that holds, else ``unassigned``.
    """
    return next((r for r in PRIMARY_ROLE_ORDER if flags.get(r)), "unassigned")


def _flag_set(flags: Mapping[str, bool]) -> str:
    """``constructive+distractive`` (flags in :data:`ROLE_FLAGS` order), or ``unassigned``."""
    return "+".join(r for r in ROLE_FLAGS if flags.get(r)) or "unassigned"


def evidence_role(
    deltas: Mapping[str, float],
    divergence: float,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
) -> str:
    """The primary role of one intervened item (:func:`role_flags`, then :func:`primary_role`)."""
    return primary_role(role_flags(deltas, divergence, eps, tau))


# ----------------------------------------------------------------------- pairing




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


def _correctness_score(correctness: str, columns: Iterable[str]) -> str:
    """The stored score behind a correctness axis (ValueError: unknown axis, or no such score)."""
    if correctness not in CORRECTNESS_SCORES:
        raise ValueError(
            f"unknown correctness axis {correctness!r}; choose from: "
            f"{', '.join(CORRECTNESS_SCORES)}"
        )
    col = CORRECTNESS_SCORES[correctness]
    if col not in columns:
        raise ValueError(f"correctness axis {correctness!r} needs the score column {col!r}")
    return col


def _axes_of(row: Mapping[str, Any], correct_col: str) -> dict[str, float]:
    """The utility axes of one prediction; correctness (and CE's "correct") from ``correct_col``.

    Strict: correctness = em_strict and CE = |c - em_strict| (c clamped; NaN without c).
    """
    out = {axis: _num(row.get(col)) for axis, col in _AXIS_SCORE.items()}
    if correct_col != _AXIS_SCORE["correctness"]:
        out["correctness"] = _num(row.get(correct_col))
        conf = row.get("confidence")
        out["confidence_error"] = confidence_error(
            conf if _finite(conf) else None, out["correctness"]
        )
    return out


def intervention_pairs(
    predictions: pd.DataFrame,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
    correctness: str = CORRECTNESS_AXIS.default,
) -> pd.DataFrame:
    """Pair every planned intervention with its base trace: one row per (instance, variant).

    Args:
        predictions: prediction rows joined with their scores and the instance's
            ``answer_type`` / ``reasoning_type``: ``instance_id``, ``condition``, ``variant``,
            ``answer``, ``cited_ids``, ``confidence``, ``error``, ``meta`` (optional) and the
            score columns ``soft_correct`` (``em_strict`` for the strict axis),
            ``f1_relaxed``, ``title_grounding``, ``confidence_error``; a ``run`` column
            (optional) keeps runs apart. Base rows are condition ``retrieved``, variant
            ``""``; intervention rows are condition ``intervention`` with a variant of
            :func:`core.cuer.interventions.format_variant` on the ``retrieved`` base. Case-view
            reruns (``meta.rule == "user"``) are left out, except a rerun of a planned
            operator on the planned target (it replaced the planned row under the same key).
        eps: role threshold for "negligible".
        tau: role threshold for "large" trace divergence.
        correctness: correctness axis, ``soft`` (default) or ``strict``
            (:data:`CORRECTNESS_SCORES`); CE follows it.

    Returns:
        Columns ``run``, ``instance_id``, ``variant``, ``operator``, ``param``, ``target``,
        ``rule``, the axes of both runs (``correctness_orig``, ``correctness`` ...),
        ``trace_divergence``, ``evidence_divergence`` (d_Jaccard of the cited sets),
        ``answer_changed``, ``correctness_changed``, the deltas (``delta_corr``,
        ``delta_f1``, ``delta_grnd``, ``delta_cal``), the role flags ``is_constructive``,
        ``is_redundant``, ``is_distractive``, ``is_confidence_distorting``, ``n_flags``,
        ``flags`` (the flags that hold joined by ``+``, or ``unassigned``) and
        ``primary_role`` (roles only for item operators, else None), ``answer_orig``,
        ``answer``, ``confidence_orig``, ``confidence`` and ``missing``. A pair whose base or
        intervention call failed (``error`` set) has ``missing`` True, NaN axes, divergences
        and deltas, None for the changed indicators, and no role flags or role: its delta is
        not computed.

    Raises:
        ValueError: an unknown correctness axis, or a frame without its score column.
    """
    df = predictions.copy()
    correct_col = _correctness_score(correctness, df.columns)
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
            "run": r["run"], "instance_id": r["instance_id"], "variant": r["variant"],
            "operator": op, "param": param, "target": "+".join(targets), "rule": meta.get("rule"),
        }  # fmt: skip
        missing = bool(b["_failed"] or r["_failed"])
        axes_b, axes_r = _axes_of(b, correct_col), _axes_of(r, correct_col)
        for axis in _AXIS_SCORE:
            out[f"{axis}_orig"] = math.nan if missing else axes_b[axis]
            out[axis] = math.nan if missing else axes_r[axis]
        types = {"answer_type": r.get("answer_type"), "reasoning_type": r.get("reasoning_type")}
        cited_b, cited_r = stored_ids(b["cited_ids"]), stored_ids(r["cited_ids"])
        if missing:
            out["trace_divergence"] = out["evidence_divergence"] = math.nan
            out["answer_changed"] = out["correctness_changed"] = None
        else:
            out["trace_divergence"] = trace_divergence(
                cited_b, cited_r, b.get("answer"), r.get("answer"), b.get("confidence"),
                r.get("confidence"), **types,
            )  # fmt: skip
            out["evidence_divergence"] = jaccard_distance(cited_b, cited_r)
            out["answer_changed"] = answer_changed(b.get("answer"), r.get("answer"), **types)
            c0, c1 = out["correctness_orig"], out["correctness"]
            out["correctness_changed"] = (
                bool(c0 != c1) if math.isfinite(c0) and math.isfinite(c1) else None
            )
        deltas = {_DELTA[a]: out[f"{a}_orig"] - out[a] for a in AXES}
        out.update(deltas)
        if op in _ITEM_OPERATORS and not missing:
            flags = role_flags(deltas, out["trace_divergence"], eps, tau)
            out.update({f"is_{k}": v for k, v in flags.items()}, n_flags=sum(flags.values()),
                       flags=_flag_set(flags), primary_role=primary_role(flags))  # fmt: skip
        else:  # no item (zero retrieval, two-support) or no answer: no role
            out.update(dict.fromkeys([f"is_{k}" for k in ROLE_FLAGS], None), n_flags=None,
                       flags=None, primary_role=None)  # fmt: skip
        for k in ("answer", "confidence"):
            out[f"{k}_orig"] = b.get(k)
            out[k] = r.get(k)
        out["missing"] = missing
        rows.append(out)
    out_df = pd.DataFrame(rows, columns=list(PAIR_COLUMNS))
    out_df["missing"] = out_df["missing"].astype(bool)
    out_df.attrs["correctness_axis"] = correctness
    return out_df


#: Columns of :func:`intervention_pairs`, in order.
PAIR_COLUMNS = (
    "run", "instance_id", "variant", "operator", "param", "target", "rule",
    *[c for a in AXES for c in (f"{a}_orig", a)], "trace_divergence", "evidence_divergence",
    "answer_changed", "correctness_changed", *_DELTA.values(),
    *[f"is_{k}" for k in ROLE_FLAGS], "n_flags", "flags", "primary_role", "answer_orig",
    "answer", "confidence_orig", "confidence", "missing",
)  # fmt: skip


def _failed(error: Any) -> bool:
    """True when a prediction's call failed (its ``error`` is set): not an answer."""
    return _finite(error) and bool(str(error).strip())


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
    correct_col = _correctness_score(correctness, df.columns)
    run = df["run"] if "run" in df.columns else df.get("run_id", pd.Series("", index=df.index))
    err = df["error"] if "error" in df.columns else pd.Series(None, index=df.index)
    failed = np.array([_failed(e) for e in err], dtype=bool)
    mask = (df["condition"] == "retrieved").to_numpy() & (df["variant"].fillna("") == "").to_numpy()
    sub = df[mask]
    out = pd.DataFrame({"run": run[mask].to_numpy(), "instance_id": sub["instance_id"]})
    gone = failed[mask]
    cols = dict(_AXIS_SCORE, correctness=correct_col)
    vals = {
        a: pd.to_numeric(sub[c], errors="coerce").to_numpy(dtype=float) for a, c in cols.items()
    }
    if correct_col != _AXIS_SCORE["correctness"]:
        conf = sub["confidence"] if "confidence" in sub.columns else [None] * len(sub)
        vals["confidence_error"] = np.array(
            [confidence_error(c if _finite(c) else None, k)
             for c, k in zip(conf, vals["correctness"], strict=True)], dtype=float,
        )  # fmt: skip
    for axis in _AXIS_SCORE:
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
            single.rename(columns={"param": "_param"})
            .assign(variant=lambda d: d["_param"], missing=_missing(single))[keep],
        ],
        ignore_index=True,
    )
    per["missing"] = per["missing"].astype(bool)
    rows = []
    for (run, op, var), grp in per.groupby(["run", "operator", "variant"], sort=False):
        grp = _canonical(grp)
        gone = int(grp["missing"].sum())
        n = int(len(grp)) - gone
        row: dict[str, Any] = {"run": run, "operator": op, "variant": var,
                               "correctness_axis": correctness, "n": n,
                               "missing": gone}  # fmt: skip
        for m in PROFILE_METRICS:
            ci = bootstrap_mean_ci(grp[m].to_numpy(dtype=float), n_resamples, seed)
            row[m] = ci["mean"]
            row[f"{m}_ci_low"] = ci["ci_low"]
            row[f"{m}_ci_high"] = ci["ci_high"]
        for m, pct in (("answer_changed", "pct_answer_changed"),
                       ("correctness_changed", "pct_correctness_changed")):  # fmt: skip
            known = [bool(v) for v in grp.loc[~grp["missing"], m] if v is not None and _finite(v)]
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
    "run", "operator", "variant", "correctness_axis", "n", "missing",
    *[c for m in PROFILE_METRICS for c in (m, f"{m}_ci_low", f"{m}_ci_high")],
    "answers_changed", "pct_answer_changed", "correctness_changed", "pct_correctness_changed",
)  # fmt: skip


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
            c = paired_contrast(orig, pert, n_resamples=n_resamples, seed=seed,
                                p_test="bootstrap")
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
    agg = with_not_applicable(agg, single)
    agg = _in_operator_order(agg, [METRICS.index(m) for m in agg["metric"]])
    per = (
        pd.concat(long_rows, ignore_index=True)
        if long_rows
        else pd.DataFrame(
            columns=["run", "instance_id", "operator", "variant", "metric", "original",
                     "perturbed", "delta"]
        )  # fmt: skip
    )
    return CuerResult(per_instance=per, aggregate=agg)


def _items(pairs: pd.DataFrame) -> pd.DataFrame:
    return pairs[pairs["operator"].isin(_ITEM_OPERATORS)].reset_index(drop=True)


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
        row: dict[str, Any] = {"run": run, "operator": op, "variant": var, "n": int(len(ok)),
                               "missing": int(gone.sum())}  # fmt: skip
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
    "run", "operator", "variant", "n", "missing", *ROLE_FLAGS, "unassigned", "several_flags",
)  # fmt: skip


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
        {"run": run, "operator": op, "variant": var, "flags": flags,
         "n_flags": 0 if flags == "unassigned" else flags.count("+") + 1, "n": int(len(grp))}
        for (run, op, var, flags), grp in ok.groupby(
            ["run", "operator", "param", "flags"], sort=False
        )
    ]  # fmt: skip
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
        f: int(n) for f, n in combos.groupby("flags", sort=False)["n"].sum()
        .sort_values(ascending=False, kind="stable").items()
    }  # fmt: skip
    syn_obj: dict[str, Any] = (
        {k: v for k, v in syn.iloc[0].to_dict().items() if k != "run"}
        if len(syn)
        else {"n": 0, "missing": 0, "metric": synergy_metric}
    )
    op_keys = ("operator", "variant", "n", "missing", "not_applicable", *PROFILE_METRICS,
               "answers_changed",
               "pct_answer_changed", "correctness_changed", "pct_correctness_changed")  # fmt: skip
    return json_plain(
        {
            "correctness_axis": correctness,
            "operators": [{k: r[k] for k in op_keys} for r in prof.to_dict("records")],
            "paired": [
                {k: r[k] for k in ("operator", "variant", "metric", "n", "missing",
                                    "not_applicable", "delta", "ci_low", "ci_high", "p")}
                for r in deltas.to_dict("records")
            ],  # fmt: skip
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
