"""CRUX on the generated answer: Cov(y), Den(y) and Kendall tau with the context metrics (issue 20).

Seed 002 §3.3 applies the coverage formula to "the final RAG result y" as well as to the
retrieval context Z, and §4 correlates the two (Table 1's last row, Figure 5, Table 3). Here:

- ``Cov(y) = |{q in Q_ans : G(y, q) >= eta}| / |Q_ans|`` with ``G(y, q)`` the 0..5 rating of the
  answer y for sub-question q by a ``crux-coverage`` judge run (:mod:`core.judges.runs`) and
  ``Q_ans`` the instance's answerable sub-questions: those the passage ratings make
  answerable (:func:`core.crux.metrics.answerability_from_ratings`, the judge ``report crux`` uses),
  else -- no passage ratings -- every sub-question the answer was judged on (the stored ones,
  or the instance's own question when it has none; the judge run says so). An answer with a
  sub-question of ``Q_ans`` not rated (the judge call failed) is unscored and counted;
- ``Den(y) = ((Cov(y) / tokens(y)) / (Cov(Z*) / tokens(Z*)))^0.5`` (eq. 5 with the oracle
  retrieval context Z* as the reference, as Table 1's Den(y) column is: the human summary
  scores above 100), ``tokens(y)`` the answer's whitespace tokens (the project's token unit,
  :func:`core.types.count_tokens`; Z*'s tokens as :mod:`core.crux` counts them).

Kendall tau (Table 3 layout). Each judged (run, condition) is one retrieval pipeline: its
retriever and k are the run's retrieval configuration, its context metrics the means over the
judged instances of ``Cov(Z)``, ``alpha-nDCG``, ``Den(Z)``
(:func:`core.crux.metrics.context_scores`)
and of ``Recall``, ``MAP`` and ``nDCG`` (binary relevance: a chunk is relevant when it overlaps
a gold passage; Recall = gold passages reached / gold passages, AP and nDCG cut at k with R =
the instance's relevant chunks, as trec_eval's ``map_cut`` / ``ndcg_cut``). For each k, tau
between each context metric and mean Cov(y) across the pipelines of that k (Den(Z) against
Den(y)), then over every pipeline (``k = all``) and over single contexts (``k = contexts``:
one point per judged instance and pipeline, as Figure 5 samples contexts). tau is
:func:`scipy.stats.kendalltau`'s default **tau-b** (ties corrected); NaN below two points or
for a constant column; every cell carries its ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.crux.metrics import (
    ETA,
    Answerability,
    answerability_from_gold,
    answerability_from_ratings,
    context_scores,
    density,
)
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP
from core.retrieval.retrievers import chunk_instance, rank_chunks
from core.store import Store
from core.types import Instance, count_tokens

__all__ = [
    "CONTEXT_METRICS",
    "AnswerCoverage",
    "answer_coverage",
    "answer_scores",
    "kendall_table",
    "ranking_metrics",
]

#: Context metrics of Table 3, in its column order, and the answer metric each is ranked with.
CONTEXT_METRICS: dict[str, str] = {
    "cov_z": "cov_y",
    "alpha_ndcg": "cov_y",
    "recall": "cov_y",
    "map": "cov_y",
    "ndcg": "cov_y",
    "den_z": "den_y",
}


def answer_scores(
    ratings: Mapping[str, float],
    answerable: Iterable[str],
    answer: str,
    cov_ref: float,
    tokens_ref: float,
    eta: float = ETA,
) -> dict[str, float]:
    """Cov(y) and Den(y) of one answer.

    Args:
        ratings: sub-question id -> the answer's 0..5 rating (NaN: not rated).
        answerable: ``Q_ans``.
        answer: the answer text (its whitespace tokens are ``tokens(y)``).
        cov_ref: Cov(Z*).
        tokens_ref: tokens(Z*).
        eta: the answerability threshold.

    Returns:
        ``cov_y``, ``den_y``, ``tokens_y`` (NaN scores when a sub-question of ``Q_ans`` is not
        rated or ``Q_ans`` is empty).
    """
    q = set(answerable)
    ntok = float(count_tokens(answer or ""))
    vals = [ratings.get(s, math.nan) for s in q]
    if not q or any(v is None or math.isnan(float(v)) for v in vals):
        return {"cov_y": math.nan, "den_y": math.nan, "tokens_y": ntok}
    cov = sum(float(v) >= eta for v in vals) / len(q)
    den = math.nan
    if tokens_ref > 0 and not (cov > 0 and ntok == 0):
        den = density(cov, ntok, cov_ref, tokens_ref)
    return {"cov_y": cov, "den_y": den, "tokens_y": ntok}


def ranking_metrics(relevant: Sequence[bool], n_relevant: int, recall: float) -> dict[str, float]:
    """AP and nDCG at the context's depth with binary relevance (and the given recall).

    Args:
        relevant: per ranked item of the context, whether it is relevant.
        n_relevant: R, the instance's relevant items (the ideal ranking's).
        recall: the context's recall (passed through).
    """
    if n_relevant <= 0:
        return {"recall": recall, "map": math.nan, "ndcg": math.nan}
    hits, ap = 0, 0.0
    for r, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            ap += hits / r
    dcg = sum(1.0 / math.log2(r + 1) for r, rel in enumerate(relevant, start=1) if rel)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(n_relevant, len(relevant)) + 1))
    return {"recall": recall, "map": ap / n_relevant, "ndcg": dcg / ideal if ideal else math.nan}


def kendall_table(points: pd.DataFrame, group: str | None = "k") -> pd.DataFrame:
    """Table 3: Kendall tau-b of each context metric with its answer metric, per group.

    Args:
        points: one row per point with the :data:`CONTEXT_METRICS` columns, ``cov_y``,
            ``den_y`` and the ``group`` column.
        group: the column whose values make the rows; None for one row (``all``).

    Returns:
        One row per group value (``k``), with per metric ``<metric>`` (tau), ``<metric>_p``
        and ``<metric>_n`` (points with both values finite).
    """
    from scipy.stats import kendalltau

    groups = [("all", points)] if group is None else list(points.groupby(group, sort=False))
    rows = []
    for key, sub in groups:
        row: dict[str, Any] = {"k": key}
        for ctx, ans in CONTEXT_METRICS.items():
            x = sub[ctx].to_numpy(dtype=float)
            y = sub[ans].to_numpy(dtype=float)
            ok = np.isfinite(x) & np.isfinite(y)
            n = int(ok.sum())
            tau = p = math.nan
            if n >= 2 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
                res = kendalltau(x[ok], y[ok])  # variant "b", scipy's default
                tau, p = float(res.statistic), float(res.pvalue)
            row[ctx], row[f"{ctx}_p"], row[f"{ctx}_n"] = tau, p, n
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True, slots=True)
class AnswerCoverage:
    """Cov(y) / Den(y) of judged answers and their Kendall tau with the context metrics.

    Attributes:
        per_answer: one row per judged (run, condition, instance): ``judge_run``, ``run``,
            ``condition``, ``instance_id``, ``retriever``, ``k``, ``cov_y``, ``den_y``,
            ``tokens_y`` and the context metrics of the run's context of that instance.
        pipelines: one row per (judge run, run, condition): ``retriever``, ``k``, ``n``
            (answers scored), ``n_unscored``, means of ``cov_y``, ``den_y`` and the context
            metrics.
        kendall: Table 3 rows: one per k, then ``all`` (every pipeline) and ``contexts``
            (every judged context), tau-b per metric with ``_p`` and ``_n``.
        judges: the judge runs used and their judge models.
        eta: the threshold.
        notes: lines to show (sources of Q_ans, baseline judges).
    """

    per_answer: pd.DataFrame
    pipelines: pd.DataFrame
    kendall: pd.DataFrame
    judges: Mapping[str, str] = field(default_factory=dict)
    eta: float = ETA
    notes: tuple[str, ...] = ()

    def to_dict(self, with_answers: bool = True) -> dict[str, Any]:
        """JSON-ready dict (NaN -> None)."""
        out = {
            "eta": self.eta,
            "judges": dict(self.judges),
            "notes": list(self.notes),
            "kendall_variant": "tau-b (scipy.stats.kendalltau default)",
            "pipelines": _records(self.pipelines),
            "kendall": _records(self.kendall),
        }
        if with_answers:
            out["per_answer"] = _records(self.per_answer)
        return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.to_dict("records"):
        out.append(
            {
                str(k): (
                    None
                    if isinstance(v, float) and math.isnan(v)
                    else v.item()
                    if hasattr(v, "item")
                    else v
                )
                for k, v in row.items()
            }
        )
    return out


def _answerability(
    store: Store, dataset: str, instances: Sequence[Instance], judge: str | None, eta: float
) -> dict[str, Answerability]:
    """Judged passage answerability per instance (the ``report crux`` judge choice)."""
    sq, ratings = store.crux_judgments(dataset)
    if not len(ratings):
        return {}
    judges = sorted(set(ratings["judge"]))
    if judge is None and len(judges) > 1:
        raise ValueError(
            f"dataset {dataset!r} has ratings from several judges; choose one of: "
            f"{', '.join(judges)}"
        )
    use = judge if judge is not None else judges[0]
    if use not in judges:
        return {}
    ratings = ratings[ratings["judge"] == use]
    by_inst = {i.instance_id: i for i in instances}
    sq_by = sq.groupby("instance_id")["sq_id"].apply(list).to_dict() if len(sq) else {}
    out = {}
    for iid, grp in ratings.groupby("instance_id", sort=False):
        if iid in by_inst:
            rows = zip(grp["passage_id"], grp["sq_id"], grp["rating"], strict=True)
            out[iid] = answerability_from_ratings(by_inst[iid], sq_by.get(iid, []), rows, use, eta)
    return out


def answer_coverage(
    store: Store,
    dataset: str,
    *,
    judge_runs: Sequence[str] | None = None,
    judge: str | None = None,
    eta: float = ETA,
    instance_ids: Iterable[str] | None = None,
) -> AnswerCoverage | None:
    """Cov(y), Den(y) and Table 3 of a dataset's ``crux-coverage`` judgments; None without any.

    Args:
        store: the store.
        dataset: the dataset.
        judge_runs: the crux-coverage judge runs to use (default: all of the dataset's).
        judge: the passage-answerability judge for ``Q_ans`` and Z* (as ``report crux
            --judge``); None: the only one stored, or derived from gold.
        eta: the threshold in (0, 5].
        instance_ids: only these instances.

    Raises:
        ValueError: two judge runs judging the same run (choose with ``judge_runs``), bad eta,
            several passage judges and none chosen.
    """
    if isinstance(eta, bool) or not isinstance(eta, int | float) or not 0 < eta <= 5:
        raise ValueError(f"eta must be a number in (0, 5] (the 0-5 rating scale), got {eta!r}")
    frame = store.judgments_frame(rubric="crux-coverage")
    frame = frame[frame["dataset_id"] == dataset]
    if judge_runs is not None:
        frame = frame[frame["run_id"].isin(list(judge_runs))]
    if frame.empty:
        return None
    pairs = frame[["run_id", "target_run"]].drop_duplicates()
    dup = pairs["target_run"][pairs["target_run"].duplicated()]
    if len(dup):
        names = sorted(pairs.loc[pairs["target_run"] == dup.iloc[0], "run_id"])
        raise ValueError(
            f"run '{dup.iloc[0]}' is judged by several coverage judge runs: "
            f"{', '.join(names)}; choose one"
        )
    wanted = None if instance_ids is None else set(instance_ids)
    if wanted is not None:
        frame = frame[frame["instance_id"].isin(wanted)]
    iids = sorted(set(frame["instance_id"]))
    instances = store.load_instances(dataset, iids)
    by_inst = {i.instance_id: i for i in instances}
    judged = _answerability(store, dataset, instances, judge, eta)
    rows: list[dict[str, Any]] = []
    sources: dict[str, int] = {}
    judges: dict[str, str] = {}
    for (jrun, run, cond), grp in frame.groupby(["run_id", "target_run", "condition"], sort=True):
        judges[str(jrun)] = str(grp["judge_model"].iloc[0])
        rrow = store.run_row(str(run)) or {}
        retr = rrow.get("retrieval") or {}
        preds = store.prediction_rows(str(run))
        preds = preds[(preds["variant"] == "") & (preds["condition"] == cond)]
        answers = dict(zip(preds["instance_id"], preds["answer"], strict=True))
        contexts = _contexts(by_inst, judged, retr, sorted(set(grp["instance_id"])), cond)
        for iid, g in grp.groupby("instance_id", sort=True):
            inst = by_inst.get(iid)
            if inst is None:
                continue
            ans = judged.get(iid) or answerability_from_gold(inst)
            rated = dict(zip(g["item"], g["rating"].astype(float), strict=True))
            errs = g["error"].fillna("").astype(str).str.strip() != ""
            for item in g.loc[errs, "item"]:
                rated[item] = math.nan
            if iid in judged:
                q_ans, src = ans.answerable, "passage ratings"
            else:
                q_ans, src = frozenset(rated), "judged sub-questions"
            sources[src] = sources.get(src, 0) + 1
            ctx = contexts.get(iid, {})
            text = answers.get(iid)
            text = str(text) if isinstance(text, str) else ""
            scores = answer_scores(
                rated,
                q_ans,
                text,
                ctx.get("coverage_ref", math.nan),
                ctx.get("tokens_ref", 0.0),
                eta,
            )
            rows.append(
                {
                    "judge_run": jrun,
                    "run": run,
                    "condition": cond,
                    "instance_id": iid,
                    "retriever": retr.get("retriever", ""),
                    "k": retr.get("top_k"),
                    **scores,
                    **{m: ctx.get(m, math.nan) for m in CONTEXT_METRICS},
                }
            )
    per = pd.DataFrame(rows)
    pipes = _pipelines(per)
    table = (
        pd.concat(
            [
                kendall_table(pipes, "k"),
                kendall_table(pipes, None),
                kendall_table(per, None).assign(k="contexts"),
            ],
            ignore_index=True,
        )
        if len(per)
        else pd.DataFrame()
    )
    notes = [f"Q_ans from {src} for {n} answers" for src, n in sorted(sources.items())]
    notes.append(
        "Kendall tau-b (scipy.stats.kendalltau default); one point per judged "
        "(run, condition) per k row, every pipeline in 'all', every judged context in "
        "'contexts'"
    )
    if any(m.startswith("embedded:") for m in judges.values()):
        notes.append(
            "coverage judged by the lexical baseline judge (token overlap; not a language model)"
        )
    return AnswerCoverage(per, pipes, table, judges, eta, tuple(notes))


def _contexts(
    by_inst: Mapping[str, Instance],
    judged: Mapping[str, Answerability],
    retr: Mapping[str, Any],
    iids: Sequence[str],
    cond: str,
) -> dict[str, dict[str, Any]]:
    """Context metrics of the run's context per instance (the run's retriever and k)."""
    ret, k = retr.get("retriever"), retr.get("top_k")
    if cond == "oracle":
        ret = "oracle"
    size = int(retr["chunk_size"]) if retr.get("chunk_size") is not None else CHUNK_SIZE.default
    over = int(retr["overlap"]) if retr.get("overlap") is not None else OVERLAP.default
    out: dict[str, dict[str, Any]] = {}
    for iid in iids:
        inst = by_inst.get(iid)
        if inst is None:
            continue
        ans = judged.get(iid) or answerability_from_gold(inst)
        if not ret or not k or cond not in ("retrieved", "oracle"):
            # no retrieval context: only Z*, the density reference of Den(y)
            ntok = {p.passage_id: p.n_tokens + 3 for p in inst.passages}
            ref = sum(ntok[p] for p in ans.required)
            cov_ref = (
                (
                    len(frozenset().union(*(ans.answers[p] for p in ans.required)) & ans.answerable)
                    / len(ans.answerable)
                )
                if ans.answerable
                else math.nan
            )
            out[iid] = {"coverage_ref": cov_ref, "tokens_ref": ref}
            continue
        chunks = chunk_instance(inst, size, over)
        ranked = [rc.chunk for rc in rank_chunks(inst, ret, size, over, chunks=chunks)[: int(k)]]
        cs = context_scores(ranked, chunks, ans, inst)
        gold = set(inst.gold_ids)
        rel = [bool(gold.intersection(c.passage_ids)) for c in ranked]
        n_rel = sum(bool(gold.intersection(c.passage_ids)) for c in chunks)
        reached = set().union(*(c.passage_ids for c in ranked)) if ranked else set()
        recall = len(gold & reached) / len(gold) if gold else math.nan
        out[iid] = {
            "cov_z": cs["coverage"],
            "alpha_ndcg": cs["alpha_ndcg"],
            "den_z": cs["density"],
            "coverage_ref": cs["coverage_ref"],
            "tokens_ref": cs["tokens_ref"],
            **ranking_metrics(rel, n_rel, recall),
        }
    return out


def _pipelines(per: pd.DataFrame) -> pd.DataFrame:
    if per.empty:
        return per
    keys = ["judge_run", "run", "condition", "retriever", "k"]
    cols = ["cov_y", "den_y", *CONTEXT_METRICS]
    g = per.assign(k=per["k"].astype(object)).groupby(keys, sort=True, dropna=False)
    out = g[cols].mean().reset_index()
    out["n"] = g["cov_y"].count().to_numpy()
    out["n_unscored"] = g["cov_y"].size().to_numpy() - out["n"]
    return out
