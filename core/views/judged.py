"""Judged numbers for the dashboard pages (issue 20 item 6), as display frames.

What ``report fanin``, ``report crux`` and ``report agreement`` show:

- :func:`fanin_judged_tables`: AuthTrace's judged AC / ER / EP beside the proxies per (system,
  fan-in bucket) and their Pearson / Spearman correlation (:mod:`core.fanin.judged`, through
  the cached :func:`core.views.fanin.fanin_judged_result`);
- :func:`crux_answer_tables`: Cov(y) / Den(y) per judged pipeline and the Kendall tau-b table in
  the layout of seed 002 Table 3 (:func:`core.crux.answers.answer_coverage`);
- :func:`annotated_runs` and :func:`agreement_tables`: the blind annotation sample's agreement
  per pair of raters (:func:`core.annotate.roundtrip.agreement_report`).

The pages ask :func:`has_judge_runs` first: it reads only the runs frame the sidebar already
holds, so a store without judge runs pays nothing more on a page's first load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from core.annotate.roundtrip import DEFAULT_RUBRIC, agreement_report
from core.crux.answers import CONTEXT_METRICS, AnswerCoverage, answer_coverage
from core.figures.fanin import ETA, JUDGE
from core.judges.agreement import judge_agreement
from core.selection import Selection, option, selection_to_json
from core.store import Store
from core.store.annotations import annotation_labels
from core.views.common import apply_filters, cached
from core.views.fanin import fanin_judged_result

__all__ = [
    "AUTHTRACE_RUBRICS",
    "CRUX_COVERAGE_RUBRIC",
    "METRIC_NAMES",
    "agreement_tables",
    "annotated_runs",
    "crux_answer_tables",
    "fanin_judged_tables",
    "has_judge_runs",
    "judge_agreement_table",
    "judge_label",
]

#: The rubrics behind judged AC / ER / EP (seed 003 §3, App. K).
AUTHTRACE_RUBRICS = ("authtrace-correctness", "authtrace-evidence")
#: The rubric behind Cov(y) / Den(y) (seed 002 §3.3).
CRUX_COVERAGE_RUBRIC = "crux-coverage"
#: Display names of the Table 3 context metrics (seed 002 Table 3 columns).
METRIC_NAMES = {
    "cov_z": "Cov(Z)",
    "alpha_ndcg": "α-nDCG",
    "recall": "Recall",
    "map": "MAP",
    "ndcg": "nDCG",
    "den_z": "Den(Z)",
}


def judge_label(model: str) -> str:
    """A judge model as shown: the embedded judge is marked as the lexical baseline."""
    if model.startswith("embedded:"):
        return f"{model} (lexical baseline: token overlap, not a language model)"
    return model


def has_judge_runs(
    runs: pd.DataFrame,
    rubrics: Iterable[str],
    *,
    dataset: str | None = None,
    targets: Sequence[str] | None = None,
) -> bool:
    """Whether the runs frame holds a judge run of one of ``rubrics`` for the selection.

    Pure and cheap (no store read): the pages call it on the cached runs frame before asking
    for any judged view.

    Args:
        runs: :meth:`core.store.Store.runs_frame` (``kind``, ``dataset_id``, ``retrieval``).
        rubrics: the rubrics wanted.
        dataset: only judge runs of this dataset (None: any).
        targets: only judge runs of these judged runs (None or empty: any).
    """
    if runs.empty or "kind" not in runs.columns:
        return False
    judge = runs[runs["kind"] == "judge"]
    if dataset is not None:
        judge = judge[judge["dataset_id"] == dataset]
    wanted, chosen = set(rubrics), set(targets or ())
    for raw in judge["retrieval"]:
        try:
            cfg = (json.loads(raw) if isinstance(raw, str) else raw or {}).get("judge") or {}
        except (ValueError, AttributeError):
            continue
        if cfg.get("rubric") in wanted and (not chosen or cfg.get("target_run") in chosen):
            return True
    return False


def _num(v: Any, scale: float = 1.0) -> float:
    """A value as a float (None and NaN: NaN), times ``scale``."""
    if v is None:
        return math.nan
    f = float(v)
    return f * scale if math.isfinite(f) else math.nan


def fanin_judged_tables(store: Store, selection: Selection) -> dict[str, Any] | None:
    """Judged AC / ER / EP beside the proxies for the fan-in page; None without judgments.

    Returns:
        ``buckets``: per (system, bucket) ``n``, ``ac`` / ``ac_judged`` (0..100), ``er`` /
        ``er_judged`` / ``ep`` / ``ep_judged`` in % (the report's printed numbers: 100 x the
        0..1 values), ``judged_missing`` (the larger of the AC and ER judgments' missing
        counts, as ``report fanin`` prints it); ``correlation``: per metric ``pearson``,
        ``pearson_p``, ``spearman``, ``spearman_p``, ``n``; ``judges`` (labelled, see
        :func:`judge_label`); ``notes``.
    """
    jf = fanin_judged_result(store, selection)
    if jf is None:
        return None
    rows = []
    for r in jf.by_bucket.to_dict("records"):
        rows.append(
            {
                "system": r["system"],
                "bucket": r["bucket"],
                "n": int(r["n"]),
                "ac": _num(r["ac"]),
                "ac_judged": _num(r["ac_judged"]),
                "er": _num(r["er"], 100),
                "er_judged": _num(r["er_judged"], 100),
                "ep": _num(r["ep"], 100),
                "ep_judged": _num(r["ep_judged"], 100),
                "judged_missing": int(max(r["ac_judged_missing"], r["er_judged_missing"])),
            }
        )
    corr = pd.DataFrame(
        [
            {
                "metric": m.upper(),
                **{k: _num(c[k]) for k in ("pearson", "pearson_p", "spearman", "spearman_p")},
                "n": int(c["n"]),
            }
            for m, c in jf.correlation.items()
        ]
    )
    return {
        "buckets": pd.DataFrame(rows),
        "correlation": corr,
        "judges": [judge_label(m) for m in jf.judges],
        # the page shows ER / EP in % (as the page's proxy tables and the printed report do)
        "notes": [n.replace("0..1 like the proxies", "in % here") for n in jf.notes],
    }


def _answer_coverage(store: Store, selection: Selection) -> AnswerCoverage | None:
    """:func:`core.crux.answers.answer_coverage` of the selection's dataset (cached)."""

    def build() -> AnswerCoverage | None:
        name = selection.dataset
        if not name:
            return None
        allowed = None
        if selection.filters:
            frame = apply_filters(store.instances_frame(name), selection.filters)
            allowed = list(frame["instance_id"])
        return answer_coverage(
            store,
            name,
            judge=option(selection, JUDGE),
            eta=option(selection, ETA),
            instance_ids=allowed,
        )

    return cached(store, "crux_answers", selection_to_json(selection), build)


def crux_answer_tables(store: Store, selection: Selection) -> dict[str, Any] | None:
    """Cov(y) / Den(y) per judged pipeline and Table 3's Kendall tau-b; None without judgments.

    Options as the CRUX views: ``judge`` (the passage-answerability judge), ``eta``; the
    selection's metadata filters restrict the instances.

    Returns:
        ``pipelines``: ``judge_run``, ``run``, ``condition``, ``retriever``, ``k`` (text),
        ``n``, ``n_unscored``, ``cov_y``, ``den_y`` and the context metrics' means;
        ``kendall``: one row per ``k`` (text: a k, ``all``, ``contexts``) with per metric of
        :data:`core.crux.answers.CONTEXT_METRICS` its tau-b and ``<metric>_n``; ``eta``;
        ``judges`` (judge run -> labelled model); ``notes``.

    Raises:
        ValueError: as :func:`core.crux.answers.answer_coverage` (two coverage judge runs of
            one run, several passage judges and none chosen).
    """
    ac = _answer_coverage(store, selection)
    if ac is None:
        return None
    pipe = ac.pipelines.copy()
    if "k" in pipe.columns:
        pipe["k"] = [
            "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
            for v in pipe["k"]
        ]
    cols = ["k"] + [c for m in CONTEXT_METRICS for c in (m, f"{m}_n")]
    kendall = ac.kendall[[c for c in cols if c in ac.kendall.columns]].copy()
    kendall["k"] = kendall["k"].astype(str)
    for m in CONTEXT_METRICS:
        if m in kendall.columns:
            kendall[m] = kendall[m].astype(float)
    return {
        "pipelines": pipe,
        "kendall": kendall,
        "eta": ac.eta,
        "judges": {r: judge_label(m) for r, m in ac.judges.items()},
        "notes": list(ac.notes),
    }


def annotated_runs(store: Store, runs: Sequence[str], rubric: str = DEFAULT_RUBRIC) -> list[str]:
    """The runs among ``runs`` with people's labels imported (``annotate import``), cached."""
    key = (tuple(sorted(str(r) for r in runs)), rubric)

    def build() -> list[str]:
        return [r for r in key[0] if len(annotation_labels(store, r, rubric))]

    return cached(store, "annotated_runs", key, build)


def agreement_tables(store: Store, run: str, rubric: str = DEFAULT_RUBRIC) -> dict[str, Any]:
    """``report agreement`` of a run as display frames (cached).

    Returns:
        ``pairs``: one row per pair of raters (``rater_a``, ``rater_b``, ``n``, ``agreed``,
        ``raw_agreement``, ``kappa``: Cohen's, NaN when undefined, with ``kappa_note``);
        ``confusion``: per pair ``(a, b)`` a frame (rows: rater a's labels, columns: rater b's)
        or None when fewer than 2 items are shared; ``per_label``: per pair a frame of the
        label counts; ``report``: :func:`core.annotate.roundtrip.agreement_report` itself.
    """

    def build() -> dict[str, Any]:
        rep = agreement_report(store, run, rubric)
        pairs, confusion, per_label = [], {}, {}
        for p in rep["pairs"]:
            a, b = p["rater_a"], p["rater_b"]
            pairs.append(
                {
                    "rater_a": a,
                    "rater_b": b,
                    "n": int(p["n"]),
                    "agreed": p.get("agreed"),
                    "raw_agreement": _num(p.get("raw_agreement")),
                    "kappa": _num(p.get("kappa")),
                    "kappa_note": p.get("kappa_note") or "",
                }
            )
            if "labels" in p:
                confusion[(a, b)] = pd.DataFrame(
                    p["confusion"], index=p["labels"], columns=p["labels"]
                )
                per_label[(a, b)] = pd.DataFrame(p["per_label"])
            else:
                confusion[(a, b)], per_label[(a, b)] = None, None
        return {
            "pairs": pd.DataFrame(pairs),
            "confusion": confusion,
            "per_label": per_label,
            "report": rep,
        }

    return cached(store, "agreement", (run, rubric), build)


def judge_agreement_table(
    store: Store,
    runs: pd.DataFrame,
    rubrics: Iterable[str],
    *,
    dataset: str | None = None,
    targets: Sequence[str] | None = None,
) -> pd.DataFrame | None:
    """Agreement of judge runs that rated the same things (``report agreement --judges``).

    Judge runs of one rubric and one judged run (or dataset) are compared pairwise on the items
    both rated (:func:`core.judges.agreement.judge_agreement`); None when no rubric has two.

    Returns:
        One row per pair: ``rubric``, ``judge_a``, ``judge_b``, ``n``, ``raw_agreement``,
        ``kappa``, ``weighted_kappa`` (quadratic), ``note`` (why a κ is empty).
    """
    if runs.empty or "kind" not in runs.columns:
        return None
    wanted, chosen = set(rubrics), set(targets or ())
    groups: dict[tuple[str, str], list[str]] = {}
    for row in runs[runs["kind"] == "judge"].itertuples(index=False):
        if dataset is not None and row.dataset_id != dataset:
            continue
        try:
            raw = row.retrieval
            cfg = (json.loads(raw) if isinstance(raw, str) else raw or {}).get("judge") or {}
        except (ValueError, AttributeError):
            continue
        target = str(cfg.get("target_run") or "")
        if cfg.get("rubric") in wanted and (not chosen or not target or target in chosen):
            groups.setdefault((str(cfg["rubric"]), target), []).append(str(row.run_id))
    rows = []
    for (rubric, _), judge_runs in sorted(groups.items()):
        if len(judge_runs) < 2:
            continue
        rep = judge_agreement(store, sorted(judge_runs))
        for p in rep["pairs"]:
            note = p.get("kappa_note") or p.get("weighted_kappa_note")
            rows.append(
                {
                    "rubric": rubric,
                    "judge_a": p["rater_a"],
                    "judge_b": p["rater_b"],
                    "n": p["n"],
                    "raw_agreement": _num(p.get("raw_agreement")),
                    "kappa": _num(p["kappa"]),
                    "weighted_kappa": _num(p.get("weighted_kappa")),
                    "note": note or "",
                }
            )
    return pd.DataFrame(rows) if rows else None
