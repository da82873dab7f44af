"""CUE-R's per-instance pairs: each intervened call beside its original, with the axes' deltas."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from core.cuer.interventions import parse_variant
from core.cuer.signals import (
    AXES,
    AXIS_SCORE,
    CORRECTNESS_AXIS,
    CORRECTNESS_SCORES,
    DEFAULT_EPS,
    DEFAULT_TAU,
    DELTA,
    ROLE_FLAGS,
    answer_changed,
    finite,
    jaccard_distance,
    primary_role,
    role_flags,
    trace_divergence,
)
from core.scoring.rows import confidence_error
from core.store import Store
from core.types import stored_ids

__all__ = [
    "ITEM_OPERATORS",
    "PAIR_COLUMNS",
    "correctness_score",
    "call_failed",
    "intervention_pairs",
    "load_pairs",
]


#: Item operators a run plans (a Case-view rerun of one of them, on the planned target, is the
#: planned call: same key, same prompt).
_PLANNED = ("remove", "replace", "duplicate")


#: Operators whose rows describe one evidence item (they get a role).
ITEM_OPERATORS = ("remove", "replace", "duplicate", "move")


def _flag_set(flags: Mapping[str, bool]) -> str:
    """``constructive+distractive`` (flags in :data:`ROLE_FLAGS` order), or ``unassigned``."""
    return "+".join(r for r in ROLE_FLAGS if flags.get(r)) or "unassigned"


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
    return float(x) if finite(x) else math.nan


def correctness_score(correctness: str, columns: Iterable[str]) -> str:
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
    out = {axis: _num(row.get(col)) for axis, col in AXIS_SCORE.items()}
    if correct_col != AXIS_SCORE["correctness"]:
        out["correctness"] = _num(row.get(correct_col))
        conf = row.get("confidence")
        out["confidence_error"] = confidence_error(
            conf if finite(conf) else None, out["correctness"]
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
    correct_col = correctness_score(correctness, df.columns)
    if "run" not in df.columns:
        df["run"] = df["run_id"] if "run_id" in df.columns else ""
    for col in ("error", "meta", "answer_type", "reasoning_type"):
        if col not in df.columns:
            df[col] = None
    df["failed"] = [call_failed(e) for e in df["error"]]
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
        missing = bool(b["failed"] or r["failed"])
        axes_b, axes_r = _axes_of(b, correct_col), _axes_of(r, correct_col)
        for axis in AXIS_SCORE:
            out[f"{axis}_orig"] = math.nan if missing else axes_b[axis]
            out[axis] = math.nan if missing else axes_r[axis]
        types = {"answer_type": r.get("answer_type"), "reasoning_type": r.get("reasoning_type")}
        cited_b, cited_r = stored_ids(b["cited_ids"]), stored_ids(r["cited_ids"])
        if missing:
            out["trace_divergence"] = out["evidence_divergence"] = math.nan
            out["answer_changed"] = out["correctness_changed"] = None
        else:
            out["trace_divergence"] = trace_divergence(
                cited_b,
                cited_r,
                b.get("answer"),
                r.get("answer"),
                b.get("confidence"),
                r.get("confidence"),
                **types,
            )
            out["evidence_divergence"] = jaccard_distance(cited_b, cited_r)
            out["answer_changed"] = answer_changed(b.get("answer"), r.get("answer"), **types)
            c0, c1 = out["correctness_orig"], out["correctness"]
            out["correctness_changed"] = (
                bool(c0 != c1) if math.isfinite(c0) and math.isfinite(c1) else None
            )
        deltas = {DELTA[a]: out[f"{a}_orig"] - out[a] for a in AXES}
        out.update(deltas)
        if op in ITEM_OPERATORS and not missing:
            flags = role_flags(deltas, out["trace_divergence"], eps, tau)
            out.update(
                {f"is_{k}": v for k, v in flags.items()},
                n_flags=sum(flags.values()),
                flags=_flag_set(flags),
                primary_role=primary_role(flags),
            )
        else:  # no item (zero retrieval, two-support) or no answer: no role
            out.update(
                dict.fromkeys([f"is_{k}" for k in ROLE_FLAGS], None),
                n_flags=None,
                flags=None,
                primary_role=None,
            )
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
    "run",
    "instance_id",
    "variant",
    "operator",
    "param",
    "target",
    "rule",
    *[c for a in AXES for c in (f"{a}_orig", a)],
    "trace_divergence",
    "evidence_divergence",
    "answer_changed",
    "correctness_changed",
    *DELTA.values(),
    *[f"is_{k}" for k in ROLE_FLAGS],
    "n_flags",
    "flags",
    "primary_role",
    "answer_orig",
    "answer",
    "confidence_orig",
    "confidence",
    "missing",
)


def call_failed(error: Any) -> bool:
    """True when a prediction's call failed (its ``error`` is set): not an answer."""
    return finite(error) and bool(str(error).strip())


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
