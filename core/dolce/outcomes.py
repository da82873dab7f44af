"""DOLCE outcomes: IDK detection, COW / PIG coding, the dip test, stored probes (SPEC §8)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import diptest
import numpy as np
import pandas as pd

from core.dolce.probes import parse_variant

__all__ = [
    "IDK",
    "MIN_SUBSET",
    "code_outcomes",
    "dip_scenario",
    "is_idk",
    "outcomes_from_probes",
    "task_scenarios",
]

#: Outcome code of "I don't know" (COW outcomes are 1, 0 or IDK).
IDK = 2
#: App. H: a task is split into a COW and a PIG subset only if both have more than this many
#: problems.
MIN_SUBSET = 10

_IDK_WORDS = frozenset(
    """unanswerable unknown idk none_given not_answerable cannot_answer no_answer
    insufficient_information not_enough_information""".split()
)
_IDK_PHRASES = (
    "unanswerable",
    "not answerable",
    "cannot be answered",
    "can't be answered",
    "cannot answer",
    "can not answer",
    "i don't know",
    "i do not know",
    "don't know",
    "not enough information",
    "enough information",
    "insufficient information",
    "not enough context",
    "cannot be determined",
    "can't be determined",
    "not mentioned",
    "not stated",
    "not provided",
    "not given in",
    "no answer",
)


def is_idk(answer: Any) -> bool:
    """True when an answer says the shown text does not contain the answer.

    Matches (case-insensitively, punctuation ignored) the probe instruction's
    ``unanswerable`` and the usual variants: ``unknown``, ``I don't know``, ``not enough
    information``, ``cannot be determined``, ``not mentioned`` ...
    """
    if answer is None or (isinstance(answer, float) and math.isnan(answer)):
        return False
    text = " ".join(str(answer).lower().replace("’", "'").split()).strip(" .!\"'()[]")
    if not text:
        return False
    if text.replace(" ", "_") in _IDK_WORDS:
        return True
    return any(p in text for p in _IDK_PHRASES)


def code_outcomes(
    answers: Sequence[Any], scores: Sequence[float], threshold: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """COW codes and PIG scores of probe answers (SPEC §8).

    Args:
        answers: the parsed answers.
        scores: their relaxed F1 (NaN = unscored, e.g. a failed call).
        threshold: COW binarization threshold on the score (default 0.5).

    Returns:
        ``(x, s)``: ``x`` in {1, 0, IDK (=2)} (-1 where the score is NaN) and ``s`` the PIG
        score (NaN for IDK and unscored).
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    sc = np.asarray(scores, dtype=float)
    idk = np.array([is_idk(a) for a in answers], dtype=bool)
    x = np.where(sc >= threshold, 1, 0)
    x = np.where(idk, IDK, x)
    x = np.where(np.isnan(sc), -1, x)
    s = np.where(idk | np.isnan(sc), np.nan, sc)
    return x.astype(np.int64), s


def _spread_in_bins(sc: np.ndarray) -> np.ndarray:
    """Scores bucketized into bins of 0.1, the ``m`` scores of a bin spread evenly over it.

    Bin ``b`` (scores in ``[b / 10, (b + 1) / 10)``, 1.0 in the last) holds its scores at
    ``(b + (i + 0.5) / m) / 10``, i = 0..m-1: the sample of the histogram's piecewise-uniform
    density, free of ties.
    """
    b = np.minimum(np.floor(np.clip(sc, 0.0, 1.0) * 10.0 + 1e-9), 9.0).astype(np.int64)
    order = np.argsort(b, kind="stable")
    counts = np.bincount(b, minlength=10)
    starts = np.cumsum(counts) - counts
    rank = np.arange(b.size) - starts[b[order]]
    out = np.empty(b.size)
    out[order] = (b[order] + (rank + 0.5) / counts[b[order]]) / 10.0
    return out


def dip_scenario(scores: Sequence[float], *, ties: str = "spread") -> tuple[str, float]:
    """Hartigan's dip test on outcome scores bucketized into bins of 0.1 (seed §3.1, App. H).

    Each score (IDK counts as 0) is bucketized (1.0 falls in the last bin); COW when the dip
    test's p-value is below 0.5 (multi-modal), else PIG.

    Ties. ``spread`` (default): the scores of a bin are spread evenly over it, so the test
    sees the histogram (0.1 resolution) as a density. ``centre``: every score sits on its
    bin's centre (this tool before issue 16); the dip test assumes no ties, and with scores
    piled on 10 points it rejects unimodality for any sample past a few dozen (Beta(4, 4)
    scores, n = 20 / 40 / 100: p = 0.08 / 0.00001 / 0.0 at the centres, 1.0 / 0.92 / 1.0
    spread; ``tests/test_dolce_task_rules.py``), so a task's pooled scores (App. H) or a
    problem's 200 probes would always come out COW.

    Returns:
        ``(scenario, p_value)``; fewer than 4 scores -> ``("COW", nan)``.
    """
    if ties not in ("spread", "centre"):
        raise ValueError(f"unknown ties {ties!r}; choose one of: spread, centre")
    sc = np.asarray(scores, dtype=float)
    sc = np.where(np.isnan(sc), 0.0, sc)
    if sc.size < 4:
        return "COW", float("nan")
    if ties == "spread":
        x = _spread_in_bins(sc)
    else:
        x = (np.minimum(np.floor(np.clip(sc, 0.0, 1.0) * 10.0 + 1e-9), 9.0) + 0.5) / 10.0
    _, p = diptest.diptest(x)
    p = float(p)
    return ("COW" if p < 0.5 else "PIG"), p


def task_scenarios(
    scores: pd.DataFrame, min_subset: int = MIN_SUBSET
) -> tuple[pd.DataFrame, str, float]:
    """COW / PIG for every problem of one task by the rule of seed App. H.

    The dip test runs on each problem's scores (:func:`dip_scenario`). The task is split into
    the COW and the PIG subset only if both have more than ``min_subset`` (10) problems;
    otherwise the whole task takes one scenario, that of the dip test on all its scores
    pooled (App. H bucketizes a task's scores and tests them per task first). A task whose
    exact-answer scores are 0 / 1 (IDK as 0) is thus COW even where many of its problems,
    mostly unanswered, look unimodal one by one.

    Args:
        scores: one row per outcome: ``problem`` and ``score`` (IDK as 0; NaN counts as 0).
        min_subset: the subset size that must be exceeded on both sides to split.

    Returns:
        ``(per_problem, rule, task_p)``: per problem ``problem, dip_p, dip_scenario`` (the
        problem's own test) and ``scenario`` (the one applied); ``rule`` is ``split``,
        ``COW only`` or ``PIG only``; ``task_p`` the pooled test's p-value (NaN when split).
    """
    rows = [
        (pid, *dip_scenario(frame["score"])[::-1])
        for pid, frame in scores.groupby("problem", sort=False)
    ]
    out = pd.DataFrame(rows, columns=["problem", "dip_p", "dip_scenario"])
    n_cow = int((out["dip_scenario"] == "COW").sum())
    if n_cow > min_subset and len(out) - n_cow > min_subset:
        return out.assign(scenario=out["dip_scenario"]), "split", float("nan")
    scen, p = dip_scenario(scores["score"])
    return out.assign(scenario=scen), f"{scen} only", p


# ================================================================== probes stored as predictions
def outcomes_from_probes(
    frame: pd.DataFrame, task_by: str = "dataset", *, keep_missing: bool = False
) -> pd.DataFrame:
    """DOLCE outcomes from stored probe predictions (:meth:`core.store.Store.probe_frame`).

    C and the start come from the variant ``C=<C>|start=<s>``; L from the prediction's
    ``meta`` (the planner's ``L``), else the problem's largest C (the ladder ends at L).
    IDK is :func:`is_idk` of the answer. A failed call (``error`` set) is not an answer and
    an unscored row has no outcome: both are missing, never a failed probe (0). A parse error
    (the model answered, unparseably) keeps its score 0.

    Args:
        frame: probe rows with ``run, dataset, instance_id, variant, meta, answer, error,
            f1_relaxed`` and any instance cells.
        task_by: the column whose values are tasks (background noise is shared per task):
            ``dataset`` (default), or an instance cell such as ``reasoning_type``.
        keep_missing: keep the missing probes with a NaN ``score`` (and ``idk`` False), so
            :func:`core.dolce.fit_dolce` counts them per problem, length and task; by default
            they are dropped.

    Returns:
        One row per usable probe (and per missing one with ``keep_missing``): ``task``
        (``run | task`` when several runs are given), ``problem`` (the instance id;
        ``run:instance`` with several runs), ``L, C, start, score, idk, answer`` and the
        instance cells.
    """
    if frame.empty:
        return pd.DataFrame(columns=["task", "problem", "L", "C", "start", "score", "idk"])
    if task_by not in frame.columns:
        raise ValueError(
            f"unknown task column {task_by!r}; choose one of: {', '.join(map(str, frame.columns))}"
        )
    out = frame.copy()
    parsed = [parse_variant(v) for v in out["variant"]]
    out["C"] = [c for c, _ in parsed]
    out["start"] = [s for _, s in parsed]

    def meta_L(text: Any) -> float:
        if not isinstance(text, str) or not text:
            return float("nan")
        try:
            value = json.loads(text).get("L")
        except (ValueError, AttributeError):
            return float("nan")
        return float(value) if isinstance(value, int | float) else float("nan")

    meta = out["meta"] if "meta" in out.columns else pd.Series([None] * len(out), index=out.index)
    out["L"] = [meta_L(m) for m in meta]
    several = out["run"].nunique() > 1 if "run" in out.columns else False
    out["problem"] = (
        out["run"].astype(str) + ":" + out["instance_id"].astype(str)
        if several
        else out["instance_id"].astype(str)
    )
    out["L"] = out["L"].fillna(out.groupby("problem")["C"].transform("max")).astype(np.int64)
    err = out["error"].notna() & (out["error"].astype(str) != "") if "error" in out else False
    missing = err | out["f1_relaxed"].isna()
    if not keep_missing:
        out = out[~missing].copy()
        missing = missing[~missing]
    # a failed call's stored score (0 before issue 15) is not an outcome
    out["score"] = out["f1_relaxed"].astype(float).where(~missing)
    out["idk"] = [bool(not m and is_idk(a)) for a, m in zip(out["answer"], missing, strict=True)]
    # Different runs are different models: each run's problems form their own tasks.
    out["task"] = (
        out["run"].astype(str) + " | " + out[task_by].astype(str)
        if several
        else out[task_by].astype(str)
    )
    drop = ("variant", "meta", "error", "parse_error", "f1_relaxed")
    return out.drop(columns=[c for c in drop if c in out.columns]).reset_index(drop=True)
