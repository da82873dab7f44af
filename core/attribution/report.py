"""Analyses of attribution runs (issue 40 item 4): per passage, per instance, per run.

Per instance: the surrogate's weight and bootstrap CI of every shown passage
(:func:`core.attribution.metrics.fit_surrogate`), marked gold / cited (by the unablated answer) /
shown position, the unablated answer, the LDS and the top-k drops. Per run:

- **cited vs causal**: the 2x2 of (cited, not cited) x (causal: the weight's CI lies above
  0, not) over every shown passage of the fitted instances; passages without a CI (always
  kept / dropped, or an instance that was not fitted) are counted apart as undetermined;
  the rates are per condition (a run has one; several runs give several rows);
- **gold reliance**: per instance, the share of the total positive weight that is on gold
  passages (undefined, and counted, when no weight is positive), averaged by context length,
  evidence position and distractor similarity with percentile bootstrap CIs
  (:func:`core.stats.inference.bootstrap_mean_ci`);
- **agreement with CUE-R remove**: over the (instance, passage) pairs that a CUE-R run
  removed (``remove`` and the two-support single removals) and the attribution run
  weighted, Spearman's rank correlation between the weight and the removal's answer-F1 drop
  (``delta_f1``, original - removed, seed 004);
- **LDS**: median over fitted instances, how many are below :data:`core.attribution.metrics.LDS_LOW`
  and how many are undefined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from core.attribution.metrics import (
    BOOT_SEED,
    BOOTSTRAP,
    GROUPS,
    LDS_LOW,
    Ablations,
    ablation_tables,
    fit_surrogates,
    spearman,
)
from core.cuer.metrics import intervention_pairs, load_pairs
from core.stats.inference import bootstrap_mean_ci
from core.store import Store

__all__ = [
    "GROUPS",
    "PASSAGE_COLUMNS",
    "AttributionResult",
    "analyze",
    "attribution_report",
    "cited_vs_causal",
    "cuer_agreement",
    "gold_reliance",
]

#: Columns of the per-passage frame.
PASSAGE_COLUMNS = (
    "run",
    "condition",
    "instance_id",
    "passage_id",
    "position",
    "weight",
    "ci_low",
    "ci_high",
    "causal",
    "gold",
    "cited",
    "note",
)


class AttributionResult:
    """An attribution run analysed: per-passage and per-instance frames, and the settings.

    Attributes:
        run: the run id.
        settings: the run's recorded settings (condition, ablations, keep, seed, target ...)
            with the target and score field the analysis used.
        passages: one row per (instance, shown passage): :data:`PASSAGE_COLUMNS`.
        instances: one row per instance: ``instance_id``, ``n`` (ablations fitted),
            ``n_failed``, ``n_planned``, ``full_answer``, ``full_failed``, ``correct`` (the
            score field of the unablated answer), ``lds``, ``alpha``, ``top1`` / ``top2``
            (dropped ids), ``top1_target`` / ``top2_target``, ``top1_drop`` /
            ``top2_drop`` (unablated target - top-k target), ``top_passage``,
            ``top_is_gold``, ``always_kept``, ``always_dropped``, ``reason``, ``gold_share``
            and the :data:`GROUPS` columns.
    """

    def __init__(self, run: str, settings: dict, passages: pd.DataFrame, instances: pd.DataFrame):
        self.run = run
        self.settings = settings
        self.passages = passages
        self.instances = instances


def analyze(
    store: Store,
    run: str,
    *,
    target: str | None = None,
    score_field: str | None = None,
    n_boot: int = BOOTSTRAP.default,
    seed: int = BOOT_SEED.default,
) -> AttributionResult:
    """Fit every instance of attribution run ``run`` and join passages with gold and citations.

    Args:
        store: the store.
        run: an attribution run.
        target: the target (default: the run's own, ``retention`` when unrecorded).
        score_field: the ``correct`` target's score and the "answered correctly" field
            (default: the run's, else ``soft_correct``).
        n_boot: bootstrap resamples per instance.
        seed: bootstrap seed.

    Raises:
        ValueError: no such run, a run of another kind, or target ``logprob``.
    """
    row = store.run_row(run)
    if row is None:
        raise ValueError(f"no run '{run}' in {store.path}")
    if row.get("kind") != "attribution":
        raise ValueError(f"run '{run}' is a {row.get('kind')} run, not an attribution run")
    settings = dict((row.get("retrieval") or {}).get("attribution") or {})
    settings["target"] = target or settings.get("target") or "retention"
    settings["score_field"] = score_field or settings.get("score_field") or "soft_correct"
    preds = store.prediction_rows(run)
    tables = ablation_tables(preds, settings["target"], settings["score_field"])
    corr = _full_scores(preds, settings["score_field"])
    fitted = [t for t in tables if not t.reason]
    fits = dict(
        zip(
            (t.instance_id for t in fitted),
            fit_surrogates(
                [(t.passages, t.masks, t.y) for t in fitted],
                n_boot=n_boot,
                seed=seed,
                keys=[t.instance_id for t in fitted],
            ),
            strict=True,
        )
    )
    dataset = row.get("dataset_id")
    ids = [t.instance_id for t in tables]
    gold = (
        {
            i.instance_id: {p.passage_id for p in i.passages if p.is_gold}
            for i in store.load_instances(dataset, ids)
        }
        if ids and dataset in store.dataset_names()
        else {}
    )
    meta = _instance_meta(store, dataset, ids)
    prow, irow = [], []
    for t in tables:
        s = fits.get(t.instance_id)
        g = gold.get(t.instance_id, set())
        for j, pid in enumerate(t.passages):
            w = float(s.weights[j]) if s is not None else math.nan
            lo = float(s.ci_low[j]) if s is not None else math.nan
            hi = float(s.ci_high[j]) if s is not None else math.nan
            causal = bool(lo > 0) if math.isfinite(lo) else None
            note = s.notes[j] if s is not None else t.reason
            prow.append(
                (
                    run,
                    t.condition,
                    t.instance_id,
                    pid,
                    j + 1,
                    w,
                    lo,
                    hi,
                    causal,
                    pid in g,
                    pid in t.full_cited,
                    note,
                )
            )
        irow.append(_instance_row(t, s, g, corr.get(t.instance_id), meta.get(t.instance_id, {})))
    passages = pd.DataFrame(prow, columns=list(PASSAGE_COLUMNS))
    instances = pd.DataFrame(irow)
    return AttributionResult(run, settings, passages, instances)


def _full_scores(preds: pd.DataFrame, field: str) -> dict[str, float]:
    if preds.empty or field not in preds.columns:
        return {}
    full = preds[preds["variant"] == "full"]
    return {
        r.instance_id: float(v) if pd.notna(v := getattr(r, field)) else math.nan
        for r in full.itertuples(index=False)
    }


def _instance_meta(store: Store, dataset: Any, ids: Sequence[str]) -> dict[str, dict]:
    if not ids or dataset not in store.dataset_names():
        return {}
    frame = store.instances_frame(dataset)
    cols = [c for c in GROUPS if c in frame.columns]
    frame = frame[frame["instance_id"].isin(set(ids))]
    return {r["instance_id"]: {c: r[c] for c in cols} for r in frame.to_dict("records")}


def _instance_row(
    t: Ablations, s: Any, gold: set[str], correct: float | None, meta: dict
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "instance_id": t.instance_id,
        "condition": t.condition,
        "n": s.n if s else 0,
        "n_failed": t.n_failed,
        "n_planned": t.n_planned,
        "full_answer": t.full_answer,
        "full_failed": t.full_failed,
        "correct": correct if correct is not None else math.nan,
        "full_target": t.full_target,
        "lds": s.lds if s else math.nan,
        "alpha": s.alpha if s else math.nan,
        "always_kept": sum(n == "always kept" for n in s.notes) if s else 0,
        "always_dropped": sum(n == "always dropped" for n in s.notes) if s else 0,
        "reason": t.reason or (s.reason if s else ""),
    }
    for k in (1, 2):
        dropped, y = t.drops.get(k, ((), math.nan))
        row[f"top{k}"] = ",".join(dropped)
        row[f"top{k}_target"] = y
        row[f"top{k}_drop"] = t.full_target - y
    top, share = None, math.nan
    if s is not None and np.isfinite(s.weights).any():
        w = np.nan_to_num(s.weights, nan=-np.inf)
        j = int(np.argmax(w))
        top = s.passages[j] if w[j] > 0 else None
        pos = np.where(np.isfinite(s.weights) & (s.weights > 0), s.weights, 0.0)
        if pos.sum() > 0:
            share = float(
                sum(v for pid, v in zip(s.passages, pos, strict=True) if pid in gold) / pos.sum()
            )
    row["top_passage"] = top
    row["top_is_gold"] = (top in gold) if top is not None else None
    row["gold_share"] = share
    row.update(meta)
    return row


# --------------------------------------------------------------------------- run aggregates


def cited_vs_causal(passages: pd.DataFrame) -> dict[str, Any]:
    """The 2x2 of cited x causal over shown passages, rates per condition, and the two lists.

    Returns:
        ``{cells: {cited_causal, cited_not_causal, not_cited_causal, not_cited_not_causal},
        n, undetermined, by_condition: [{condition, n, cells..., p_causal_given_cited,
        p_cited_given_causal}], cited_not_causal: [[instance, passage]],
        causal_not_cited: [[instance, passage]]}``.
    """
    known = passages[passages["causal"].notna()] if len(passages) else passages
    out: dict[str, Any] = {"n": int(len(known)), "undetermined": int(len(passages) - len(known))}
    out["cells"] = _cells(known)
    out["by_condition"] = []
    for cond, grp in known.groupby("condition", sort=True) if len(known) else []:
        cells = _cells(grp)
        cited = cells["cited_causal"] + cells["cited_not_causal"]
        causal = cells["cited_causal"] + cells["not_cited_causal"]
        out["by_condition"].append(
            {
                "condition": cond,
                "n": int(len(grp)),
                **cells,
                "p_causal_given_cited": cells["cited_causal"] / cited if cited else None,
                "p_cited_given_causal": cells["cited_causal"] / causal if causal else None,
            }
        )
    for name, cited, causal in (
        ("cited_not_causal", True, False),
        ("causal_not_cited", False, True),
    ):
        sel = known
        if len(known):
            sel = known[(known["cited"] == cited) & (known["causal"] == causal)]
        out[name] = [[r.instance_id, r.passage_id] for r in sel.itertuples(index=False)]
    return out


def _cells(frame: pd.DataFrame) -> dict[str, int]:
    if not len(frame):
        return dict.fromkeys(
            ("cited_causal", "cited_not_causal", "not_cited_causal", "not_cited_not_causal"), 0
        )
    cited = frame["cited"].astype(bool).to_numpy()
    causal = frame["causal"].astype(bool).to_numpy()
    return {
        "cited_causal": int((cited & causal).sum()),
        "cited_not_causal": int((cited & ~causal).sum()),
        "not_cited_causal": int((~cited & causal).sum()),
        "not_cited_not_causal": int((~cited & ~causal).sum()),
    }


def gold_reliance(instances: pd.DataFrame, n_boot: int = 2000, seed: int = 42) -> dict[str, Any]:
    """Mean gold share of positive weight, overall and by :data:`GROUPS`, with bootstrap CIs.

    Returns:
        ``{overall: {mean, ci_low, ci_high, n}, undefined: instances without positive
        weight, groups: {group: [{value, mean, ci_low, ci_high, n, undefined}]}}``.
    """
    if not len(instances) or "gold_share" not in instances.columns:
        return {"overall": bootstrap_mean_ci([], n_boot, seed), "undefined": 0, "groups": {}}
    share = instances["gold_share"].astype(float)
    out: dict[str, Any] = {
        "overall": bootstrap_mean_ci(share.to_numpy(), n_boot, seed),
        "undefined": int(share.isna().sum()),
        "groups": {},
    }
    for col in GROUPS:
        if col not in instances.columns:
            continue
        rows = []
        for value, grp in instances.groupby(col, sort=True, dropna=False):
            v = grp["gold_share"].astype(float)
            rows.append(
                {
                    "value": value,
                    **bootstrap_mean_ci(v.to_numpy(), n_boot, seed),
                    "undefined": int(v.isna().sum()),
                }
            )
        out["groups"][col] = rows
    return out


def cuer_agreement(store: Store, result: AttributionResult, cuer_run: str) -> dict[str, Any]:
    """Spearman between attribution weights and CUE-R remove drops on common passages.

    Returns:
        ``{cuer_run, n_pairs, n_instances, spearman, pairs: [[instance, passage, weight,
        delta_f1]]}``; ``spearman`` is None with fewer than 3 pairs (or a constant side).
    """
    pairs = intervention_pairs(load_pairs(store, [cuer_run]))
    rem = pairs[pairs["operator"].isin(["remove", "two_support"]) & ~pairs["missing"]]
    if "param" in rem.columns:
        rem = rem[(rem["operator"] == "remove") | rem["param"].astype(str).isin(["1", "2"])]
    w = result.passages.dropna(subset=["weight"])
    joined = rem.merge(w, left_on=["instance_id", "target"], right_on=["instance_id", "passage_id"])
    joined = joined.drop_duplicates(["instance_id", "passage_id"])
    rho = spearman(joined["weight"], joined["delta_f1"]) if len(joined) else math.nan
    return {
        "cuer_run": cuer_run,
        "n_pairs": int(len(joined)),
        "n_instances": int(joined["instance_id"].nunique()) if len(joined) else 0,
        "spearman": rho if math.isfinite(rho) else None,
        "pairs": [
            [r.instance_id, r.passage_id, float(r.weight), float(r.delta_f1)]
            for r in joined.itertuples(index=False)
        ],
    }


def attribution_report(
    store: Store,
    run: str,
    *,
    target: str | None = None,
    score_field: str | None = None,
    n_boot: int = BOOTSTRAP.default,
    seed: int = BOOT_SEED.default,
    lds_low: float = LDS_LOW.default,
    cuer_run: str | None = None,
) -> dict[str, Any]:
    """Everything ``report attribution`` prints, as one JSON-ready dict.

    Returns:
        ``{run, settings, n_instances, n_fitted, not_fitted: {reason: count}, calls:
        {ablations, failed, full_failed}, lds: {median, below, threshold, undefined}, masks:
        {instances_with_a_passage_always_kept, ..._always_dropped}, top_gold: {n_correct,
        top_is_gold, rate}, top_drop: {k: mean drop}, cited_vs_causal, gold_reliance,
        agreement (None without ``cuer_run``), instances: [...], passages: [...]}``.
    """
    res = analyze(store, run, target=target, score_field=score_field, n_boot=n_boot, seed=seed)
    inst = res.instances
    fitted = inst[inst["n"] > 0] if len(inst) else inst
    lds = fitted["lds"].astype(float) if len(fitted) else pd.Series(dtype=float)
    correct = fitted[fitted["correct"].astype(float) >= 0.5] if len(fitted) else fitted
    hits = int(correct["top_is_gold"].fillna(False).astype(bool).sum()) if len(correct) else 0
    reasons = inst.loc[inst["n"] == 0, "reason"].value_counts() if len(inst) else pd.Series()
    return {
        "run": run,
        "settings": res.settings,
        "n_instances": int(len(inst)),
        "n_fitted": int(len(fitted)),
        "not_fitted": {str(k): int(v) for k, v in reasons.items()},
        "calls": {
            "ablations": int(inst["n_planned"].sum()) if len(inst) else 0,
            "failed": int(inst["n_failed"].sum()) if len(inst) else 0,
            "full_failed": int(inst["full_failed"].sum()) if len(inst) else 0,
        },
        "lds": {
            "median": float(lds.median()) if lds.notna().any() else None,
            "threshold": lds_low,
            "below": int((lds < lds_low).sum()),
            "undefined": int(lds.isna().sum()),
        },
        "masks": {  # small-sample honesty: what the masks cannot say
            "instances_with_a_passage_always_kept": int((inst["always_kept"] > 0).sum())
            if len(inst)
            else 0,
            "instances_with_a_passage_always_dropped": int((inst["always_dropped"] > 0).sum())
            if len(inst)
            else 0,
        },
        "top_gold": {
            "n_correct": int(len(correct)),
            "top_is_gold": hits,
            "rate": hits / len(correct) if len(correct) else None,
        },
        "top_drop": {
            str(k): _mean(fitted[f"top{k}_drop"]) if len(fitted) else None for k in (1, 2)
        },
        "cited_vs_causal": cited_vs_causal(res.passages),
        "gold_reliance": gold_reliance(inst),
        "agreement": cuer_agreement(store, res, cuer_run) if cuer_run else None,
        "instances": inst.to_dict("records"),
        "passages": res.passages.to_dict("records"),
    }


def _mean(s: pd.Series) -> float | None:
    v = s.astype(float)
    return float(v.mean()) if v.notna().any() else None
