"""AuthTrace's judged AC / ER / EP beside the fan-in proxies (issue 20 item 2; seed 003 §3, App. K).

The fan-in views default to proxies (:mod:`core.fanin`: AC = 100 x relaxed F1, ER / EP over
passage ids). Where judge runs exist (:mod:`core.judges.runs`) this module gives the paper's
judged numbers as an alternative source, per (run, condition, instance):

- judged AC = score / 3 x 100 of the ``authtrace-correctness`` judgment (seed 003 §3);
- judged ER = sum(covered_i) / |E*| over the ``authtrace-evidence`` ER judgments, one per gold
  evidence unit (eq. 4); judged EP = sum(matched_j) / |Ê_q| over its EP judgments, one per
  canonical segment of the pack (eq. 5). Both on 0..1 like the proxies (the paper prints
  percentages). A pack with no segments (an empty pack) has EP 0, as the proxy has;
- a value whose judgments are incomplete (a failed or unreadable judge call) is NaN and counted
  in ``missing``, never filled in.

Beside them: means per (system, fan-in bucket) and, per metric, the Pearson and Spearman
correlation (:func:`scipy.stats.pearsonr` / :func:`scipy.stats.spearmanr`) between proxy and
judged value over the instances that have both, with n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from core.fanin.metrics import FaninResult, fanin_from_summaries, per_instance
from core.fanin.stats import summaries_from_rows
from core.judges.rubrics import ac_from_score
from core.store import Store

__all__ = [
    "JudgedFanin",
    "fanin_from_judged",
    "fanin_judged",
    "judged_rows",
    "judged_values",
    "require_judged",
]

_METRICS = ("ac", "er", "ep")


def judged_values(judgments: pd.DataFrame) -> pd.DataFrame:
    """Judged AC / ER / EP per (target run, condition, instance) from judgment rows.

    Args:
        judgments: rows of :meth:`core.store.Store.judgments_frame` of the two AuthTrace rubrics.

    Returns:
        ``run``, ``condition``, ``instance_id``, ``ac_judged``, ``er_judged``, ``ep_judged``,
        ``judge_model`` (NaN where a rubric did not judge the prediction or a call failed).
    """
    if judgments.empty:
        return pd.DataFrame(
            columns=[
                "run",
                "condition",
                "instance_id",
                "ac_judged",
                "er_judged",
                "ep_judged",
                "judge_model",
            ]
        )
    j = judgments.copy()
    bad = j["error"].fillna("").astype(str).str.strip().ne("") | j["rating"].isna()
    j["value"] = j["rating"].astype(float).where(~bad)
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (run, cond, iid), g in j.groupby(["target_run", "condition", "instance_id"], sort=True):
        out = rows.setdefault(
            (run, cond, iid), {"ac_judged": math.nan, "er_judged": math.nan, "ep_judged": math.nan}
        )
        out["judge_model"] = ",".join(sorted(set(g["judge_model"].astype(str))))
        ac = g[g["item"] == "ac"]["value"]
        if len(ac):
            out["ac_judged"] = ac_from_score(ac.iloc[0]) if ac.notna().all() else math.nan
        er = g[g["item"].str.startswith("er:")]["value"]
        ep = g[g["item"].str.startswith("ep:")]["value"]
        if len(er):
            out["er_judged"] = float(er.mean()) if er.notna().all() else math.nan
            out["ep_judged"] = (
                (float(ep.mean()) if ep.notna().all() else math.nan) if len(ep) else 0.0
            )
    frame = pd.DataFrame(
        [{"run": r, "condition": c, "instance_id": i, **v} for (r, c, i), v in rows.items()]
    )
    return frame


@dataclass(frozen=True, slots=True)
class JudgedFanin:
    """Judged AC / ER / EP beside the proxies.

    Attributes:
        per_instance: the proxies' per-instance rows (:func:`core.fanin.metrics.per_instance`) with
            ``ac_judged``, ``er_judged``, ``ep_judged``.
        by_bucket: per (system, bucket): ``n`` and means of proxy and judged values, with
            ``<metric>_judged_n`` and ``<metric>_judged_missing``.
        correlation: per metric: ``pearson``, ``pearson_p``, ``spearman``, ``spearman_p``, ``n``.
        judges: judge models of the judgments.
        notes: lines to show.
    """

    per_instance: pd.DataFrame
    by_bucket: pd.DataFrame
    correlation: dict[str, dict[str, Any]]
    judges: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self, with_instances: bool = False) -> dict[str, Any]:
        """JSON-ready dict (NaN -> None)."""
        out: dict[str, Any] = {
            "judges": list(self.judges),
            "notes": list(self.notes),
            "correlation": self.correlation,
            "by_bucket": _records(self.by_bucket),
        }
        if with_instances:
            out["per_instance"] = _records(self.per_instance)
        return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            str(k): (
                None
                if isinstance(v, float) and math.isnan(v)
                else v.item()
                if hasattr(v, "item")
                else v
            )
            for k, v in r.items()
        }
        for r in df.to_dict("records")
    ]


def _corr(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    from scipy.stats import pearsonr, spearmanr

    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    out: dict[str, Any] = {
        "pearson": None,
        "pearson_p": None,
        "spearman": None,
        "spearman_p": None,
        "n": n,
    }
    if n >= 3 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
        p, s = pearsonr(x[ok], y[ok]), spearmanr(x[ok], y[ok])
        out.update(
            pearson=float(p.statistic),
            pearson_p=float(p.pvalue),
            spearman=float(s.statistic),
            spearman_p=float(s.pvalue),
        )
    return out


def _one_judge(
    frame: pd.DataFrame, rubric: str, judges: Sequence[str] | None
) -> tuple[pd.DataFrame, str | None]:
    """The judgments of one judge run per judged run: ``judges`` when given, else the newest.

    Two judge runs of a rubric over one run are never mixed (a mean over both would be
    neither judge's number). Returns the kept rows and a note when a choice was made.
    """
    if frame.empty:
        return frame, None
    if judges:
        kept = frame[frame["run_id"].isin(list(judges))]
        return kept, None
    parts, dropped = [], []
    for _, g in frame.groupby("target_run", sort=True):
        ids = list(dict.fromkeys(g["run_id"].astype(str)))  # newest judge run first
        parts.append(g[g["run_id"] == ids[0]])
        dropped += [(ids[0], other) for other in ids[1:]]
    if not dropped:
        return frame, None
    used = sorted({a for a, _ in dropped})
    other = sorted({b for _, b in dropped})
    return pd.concat(parts, ignore_index=True), (
        f"{rubric}: judged by {', '.join(used)} (the newest judge run); "
        f"{', '.join(other)} also judged these runs and are not used (choose with --judge-runs)"
    )


def fanin_judged(
    store: Store,
    runs: Sequence[str],
    score_field: str = "f1_relaxed",
    judges: Sequence[str] | None = None,
) -> JudgedFanin | None:
    """Judged AC / ER / EP of the runs beside the proxies; None when none is judged.

    Args:
        store: the store.
        runs: the four-condition runs of the fan-in view.
        score_field: the proxy AC's answer score.
        judges: the judge runs to use (None: per rubric and judged run, the newest judge
            run; a note names the others).
    """
    frames, choice = [], []
    for rubric in ("authtrace-correctness", "authtrace-evidence"):
        kept, note = _one_judge(
            store.judgments_frame(rubric=rubric, target_runs=list(runs)), rubric, judges
        )
        frames.append(kept)
        choice += [note] if note else []
    judgments = pd.concat([f for f in frames if not f.empty] or [frames[0]], ignore_index=True)
    if judgments.empty:
        return None
    judged = judged_values(judgments)
    proxies = per_instance(store.fanin_frame(list(runs)), score_field)
    per = proxies.merge(
        judged.drop(columns=["judge_model"]), how="left", on=["run", "condition", "instance_id"]
    )
    groups = []
    for (system, bucket), g in per[per["bucket"].notna()].groupby(["system", "bucket"], sort=True):
        row: dict[str, Any] = {"system": system, "bucket": bucket, "n": int((~g["missing"]).sum())}
        for m in _METRICS:
            row[m] = float(g[m].mean()) if g[m].notna().any() else math.nan
            col = g[f"{m}_judged"]
            row[f"{m}_judged"] = float(col.mean()) if col.notna().any() else math.nan
            row[f"{m}_judged_n"] = int(col.notna().sum())
            row[f"{m}_judged_missing"] = int(col.isna().sum())
        groups.append(row)
    corr = {
        m: _corr(per[m].to_numpy(dtype=float), per[f"{m}_judged"].to_numpy(dtype=float))
        for m in _METRICS
    }
    models = tuple(sorted(set(judgments["judge_model"].astype(str))))
    notes = [
        "judged AC = score/3 x 100 (seed 003 §3); judged ER / EP = share of gold units "
        "covered / of segments matched (App. K.4-K.5), 0..1 like the proxies; correlations "
        "over instances with both values"
    ]
    if any(m.startswith("embedded:") for m in models):
        notes.append("judged by the lexical baseline judge (token overlap; not a language model)")
    notes += choice
    return JudgedFanin(per, pd.DataFrame(groups), corr, models, tuple(notes))


def judged_rows(per: pd.DataFrame) -> pd.DataFrame:
    """:func:`core.fanin.metrics.per_instance` rows whose AC / ER / EP are the judged values.

    The score source ``judged`` of the fan-in views (issue 20 item 2). A prediction without
    a judged AC (its call failed, its judgment failed, or no judge run judged it) is
    ``missing``: left out of n and counted, never scored. ER / EP stay NaN where the evidence
    judgments are incomplete (left out of those means only). ``failed`` is judged AC < 33.

    Args:
        per: :attr:`JudgedFanin.per_instance` (the proxies' rows with ``*_judged`` columns).
    """
    out = per.drop(columns=["ac", "er", "ep"]).copy()
    ac = per["ac_judged"].to_numpy(dtype=float)
    gone = per["missing"].fillna(True).to_numpy(dtype=bool) | np.isnan(ac)
    out["ac"] = np.where(gone, np.nan, ac)
    out["er"] = np.where(gone, np.nan, per["er_judged"].to_numpy(dtype=float))
    out["ep"] = np.where(gone, np.nan, per["ep_judged"].to_numpy(dtype=float))
    out["failed"] = np.where(gone, np.nan, (ac < 33.0).astype(float))
    out["missing"] = gone
    return out.drop(columns=["ac_judged", "er_judged", "ep_judged"])


def fanin_from_judged(
    rows: pd.DataFrame, score_field: str = "f1_relaxed", **options: Any
) -> FaninResult:
    """Every fan-in aggregate with AC / ER / EP from the judges (:func:`judged_rows` rows).

    The same statistics as the proxies (:func:`core.fanin.metrics.fanin_from_summaries` over
    :func:`core.fanin.stats.summaries_from_rows`), so curves, degradation, Pearson r, failure
    attribution and overlap are the paper's computations on judged numbers.

    Args:
        rows: :func:`judged_rows` (the view's filters and pairing already applied).
        score_field: the proxy's answer score (kept for the record; AC is judged).
        options: ``points``, ``include_oracle``, ``include_full_context``, ``n_resamples``,
            ``seed`` of :func:`core.fanin.metrics.fanin_analysis`.

    Raises:
        ValueError: no plain-condition prediction with gold evidence.
    """
    n_no_gold = int((rows["fan_in"] == 0).sum())
    per = rows[rows["fan_in"] > 0].reset_index(drop=True)
    if per.empty:
        raise ValueError("no judged prediction of an instance with gold evidence")
    res = fanin_from_summaries(
        summaries_from_rows(per, n_no_gold), score_field, per_instance_rows=rows, **options
    )
    return replace(res, source="judged")


def require_judged(
    store: Store,
    runs: Sequence[str],
    score_field: str = "f1_relaxed",
    judges: Sequence[str] | None = None,
) -> JudgedFanin:
    """:func:`fanin_judged` for the score source ``judged``: one line when nothing is judged.

    Raises:
        ValueError: no AuthTrace judge run judged the runs (says which command fills them).
    """
    judged = fanin_judged(store, runs, score_field, judges)
    if judged is None:
        raise ValueError(
            f"score source 'judged': no authtrace-correctness or authtrace-evidence judge run "
            f"judged run(s) {', '.join(runs)}; run `python -m core judge authtrace-correctness "
            f"--run RUN --backend ...` (and authtrace-evidence for ER / EP), or use the proxies"
        )
    return judged
