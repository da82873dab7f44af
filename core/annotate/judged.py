"""The blind annotation round trip for judge rubrics: people rate what a judge rated (issue 20).

:mod:`core.annotate` samples a run's predictions under the failure taxonomy (seed 000 App.
A.6). Under a judge rubric of :mod:`core.judges` that judges a run (``crux-coverage``,
``authtrace-correctness``, ``authtrace-evidence``) an item is one judgment item of the run:
a prediction (``ac``), a prediction and a sub-question (``<sq id>``), a prediction and a gold
evidence unit (``er:<gold id>``) or a segment of its evidence pack (``ep:<segment no.>``).
Here:

* :func:`judged_pool` lists the items the rubric's judge runs judged for the run, with the
  stratum of each: the condition and the rating the *stratifying judge* gave (the judge run
  with the smallest run id; ``unrated`` where it gave no rating: its call failed, its reply
  did not parse, or only another judge run judged the item), as the rule
  label stratifies the failure-taxonomy sample;
* :func:`judged_prompts` gives each item the text an annotator rates: the judge's own chat
  turns (system rubric, then the user turn with the question, answer, sub-question, unit or
  segment filled in) word for word, without any rating, so people answer the question the
  judge answered;
* :func:`judge_raters` gives, for agreement, each judge run as a rater ``judge:<run id>``
  over the sampled items (failed or unparsed judgments left out: never a label).

The judged item is kept in ``annotation_items.variant`` (judgments are of plain predictions,
whose variant is empty).

``crux-answerability`` rates a dataset's (sub-question, passage) pairs, not a run's
predictions: its sample is drawn from one *judge run* (``--run`` names the judge run, which
is also the stratifying judge), items are ``<sq id>|<passage id>`` with an empty condition,
and every ``crux-answerability`` judge run of the same dataset is a rater.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from core.judges.rubrics import RUBRICS as JUDGE_RUBRICS
from core.judges.runs import plan_judgments
from core.store import Store

__all__ = [
    "JUDGE_PREFIX",
    "PASSAGE_RUBRIC",
    "SAMPLED_RUBRICS",
    "UNRATED",
    "judge_raters",
    "judged_pool",
    "judged_prompts",
    "rubric_labels",
]

#: Judge rubrics a sample can be drawn under: every registered one.
SAMPLED_RUBRICS = tuple(JUDGE_RUBRICS)
#: The rubric that rates a dataset's passages: its sample comes from one judge run.
PASSAGE_RUBRIC = "crux-answerability"
#: The stratum of an item the stratifying judge gave no rating (failed, unparsed, not judged).
UNRATED = "unrated"
#: Rater names of judge runs: ``judge:<run id>``.
JUDGE_PREFIX = "judge:"


def rubric_labels(name: str) -> tuple[tuple[str, ...], str, str]:
    """``(labels, Krippendorff level, description)`` of a judge rubric's rating scale.

    The labels are the scale's integers as text (``0`` .. ``3``); a scale of more than two
    points is ordinal, a 0/1 scale nominal.
    """
    rub = JUDGE_RUBRICS[name]
    lo, hi = rub.scale
    labels = tuple(str(v) for v in range(lo, hi + 1))
    return labels, "ordinal" if hi - lo > 1 else "nominal", rub.description


def _label(rating: Any, error: Any) -> str | None:
    """A stored judgment as a label: None when the call failed or the reply had no rating."""
    if error is not None and not (isinstance(error, float) and math.isnan(error)):
        if str(error).strip():
            return None
    if rating is None or (isinstance(rating, float) and math.isnan(rating)):
        return None
    return str(int(round(float(rating))))


def _judgments(store: Store, run: str, rubric: str) -> pd.DataFrame:
    """The judgments the raters of a sample come from.

    A run's rubric: every judgment of ``rubric`` whose judged run is ``run``. The passage
    rubric: every judgment of it over the dataset of the judge run ``run`` (empty when
    ``run`` is not a judge run of that rubric).
    """
    if rubric != PASSAGE_RUBRIC:
        return store.judgments_frame(rubric=rubric, target_runs=[run])
    mine = store.judgments_frame(rubric=rubric, runs=[run])
    if mine.empty:
        return mine
    every = store.judgments_frame(rubric=rubric)
    return every[(every["dataset_id"] == mine["dataset_id"].iloc[0]) & (every["target_run"] == "")]


def judged_pool(store: Store, run: str, rubric: str) -> tuple[pd.DataFrame, str | None]:
    """The items a rubric's judge runs judged for ``run``, with their strata.

    For :data:`PASSAGE_RUBRIC`, ``run`` is the judge run: its items, stratified by its own
    ratings.

    Returns:
        ``(frame, judge)``: one row per distinct ``instance_id, condition, item`` with
        ``stratum`` (the stratifying judge's label, or :data:`UNRATED`), sorted by that key;
        and the stratifying judge run (None when no judge run judged the run).
    """
    j = _judgments(store, run, rubric)
    cols = ["instance_id", "condition", "item", "stratum"]
    if j.empty:
        return pd.DataFrame(columns=cols), None
    if rubric == PASSAGE_RUBRIC:
        j = j[j["run_id"] == run]
    judge = str(min(j["run_id"].astype(str)))
    keys = j[["instance_id", "condition", "item"]].drop_duplicates()
    mine = j[j["run_id"] == judge]
    strata = {
        (r.instance_id, r.condition, r.item): _label(r.rating, r.error)
        for r in mine.itertuples(index=False)
    }
    keys = keys.assign(
        stratum=[
            strata.get(k) or UNRATED
            for k in keys[["instance_id", "condition", "item"]].itertuples(index=False, name=None)
        ]
    )
    keys = keys.sort_values(["instance_id", "condition", "item"]).reset_index(drop=True)
    return keys[cols], judge


def judged_prompts(
    store: Store, run: str, rubric: str, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], str]:
    """``(instance_id, condition, item) -> text`` an annotator rates: the judge's chat turns.

    The turns are planned again exactly as the judge run planned them
    (:func:`core.judges.runs.plan_judgments`), joined by a blank line; an item the plan no
    longer produces (the run changed since) gets an empty text.
    """
    wanted = set(keys)
    conds = sorted({k[1] for k in wanted})
    if not wanted:
        return {}
    if rubric == PASSAGE_RUBRIC:
        row = store.run_row(run) or {}
        _, planned, _ = plan_judgments(
            store, rubric, dataset=str(row.get("dataset_id") or ""), passages="all"
        )
    else:
        _, planned, _ = plan_judgments(store, rubric, run=run, conditions=conds)
    out: dict[tuple[str, str, str], str] = {}
    for p in planned:
        key = (p.instance_id, p.condition, p.item)
        if key in wanted:
            out[key] = "\n\n".join(str(m["content"]) for m in p.messages)
    return {k: out.get(k, "") for k in wanted}


def judge_raters(
    store: Store, run: str, rubric: str, items: pd.DataFrame
) -> dict[str, dict[str, str]]:
    """Every judge run of ``rubric`` on ``run`` as a rater over the sampled ``items``.

    Args:
        store: the store.
        run: the judged run.
        rubric: a judge rubric.
        items: :func:`core.store.annotations.sampled_items` (``variant`` holds the item).

    Returns:
        ``{"judge:<run id>": {item_id: label}}`` (items the judge failed on left out).
    """
    if rubric not in SAMPLED_RUBRICS or items.empty:
        return {}
    j = _judgments(store, run, rubric)
    if j.empty:
        return {}
    ids: Mapping[tuple[str, str, str], str] = {
        (r.instance_id, r.condition, r.variant): r.item_id for r in items.itertuples(index=False)
    }
    out: dict[str, dict[str, str]] = {}
    for r in j.itertuples(index=False):
        item = ids.get((r.instance_id, r.condition, r.item))
        label = _label(r.rating, r.error)
        if item is not None and label is not None:
            out.setdefault(f"{JUDGE_PREFIX}{r.run_id}", {})[item] = label
    return out
