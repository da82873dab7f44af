"""Agreement between judge runs of one rubric on the same items (issue 20 item 4).

Two judge runs (two judge models, a model and the lexical baseline, two rubric prompts of the
same scale) rate the same things when their judgment keys match: the judged run, instance,
condition and item (sub-question, passage, gold unit or segment; :mod:`core.judges.runs`).
:func:`judge_agreement` compares every pair on the items both rated: n, raw agreement,
Cohen's κ, the quadratic-weighted κ of the rubric's ordered scale (AuthTrace reports a
weighted κ for its 0-3 rubric) and the confusion matrix; with three or more judges, Fleiss'
κ and Krippendorff's α (ordinal) on the items every judge rated. A failed call is no rating:
it is left out and counted per judge.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pandas as pd

from core.judges.rubrics import get_rubric
from core.stats.agreement import (
    UndefinedAgreement,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    pair_agreement,
)
from core.store import Store

__all__ = ["JUDGMENT_KEY", "judge_agreement"]

#: What identifies one rated thing across judge runs.
JUDGMENT_KEY = ("target_run", "instance_id", "condition", "item")


def _ratings(frame: pd.DataFrame, run: str) -> dict[tuple[str, ...], int]:
    rows = frame[(frame["run_id"] == run) & frame["rating"].notna()]
    rows = rows[rows["error"].isna() | (rows["error"].astype(str) == "")]
    keys = zip(*(rows[c].astype(str) for c in JUDGMENT_KEY), strict=True)
    return {k: int(round(float(r))) for k, r in zip(keys, rows["rating"], strict=True)}


def _kappa(
    xa: list[int], xb: list[int], scale: list[int], weights: str | None
) -> tuple[float | None, str | None]:
    try:
        return cohen_kappa(xa, xb, scale, weights=weights), None  # type: ignore[arg-type]
    except UndefinedAgreement as exc:
        return None, str(exc)


def judge_agreement(store: Store, judge_runs: Sequence[str]) -> dict[str, Any]:
    """Agreement of judge runs of one rubric, per pair and all together.

    Args:
        store: the store.
        judge_runs: two or more judge runs (``runs.kind = 'judge'``) of the same rubric.

    Returns:
        ``rubric``, ``scale``, ``judges`` (per run: ``rated``, ``failed`` calls left out),
        ``pairs`` (``rater_a``, ``rater_b``, ``n``, ``agreed``, ``raw_agreement``, ``kappa``
        and ``kappa_note``, ``weighted_kappa`` (quadratic) and its note, ``labels``,
        ``confusion`` (rows: rater a)) and ``all_raters`` (with three or more judges: ``n``,
        ``fleiss_kappa``, ``krippendorff_alpha`` (ordinal), each None with a note when
        undefined; else None).

    Raises:
        ValueError: fewer than two runs, a run with no judgments, or runs of two rubrics.
    """
    runs = list(dict.fromkeys(str(r) for r in judge_runs))
    if len(runs) < 2:
        raise ValueError("agreement needs two or more judge runs (--judges J1,J2)")
    frame = store.judgments_frame(runs=runs)
    missing = [r for r in runs if not (frame["run_id"] == r).any()]
    if missing:
        raise ValueError(f"no judgments in run(s) {', '.join(missing)}")
    rubrics = sorted(set(frame["rubric"].astype(str)))
    if len(rubrics) != 1:
        raise ValueError(f"the judge runs use different rubrics ({', '.join(rubrics)})")
    rubric = get_rubric(rubrics[0])
    scale = list(range(rubric.scale[0], rubric.scale[1] + 1))
    ratings = {r: _ratings(frame, r) for r in runs}
    judges = {
        r: {"rated": len(ratings[r]), "failed": int((frame["run_id"] == r).sum()) - len(ratings[r])}
        for r in runs
    }
    pairs = []
    for a, b in itertools.combinations(runs, 2):
        common = sorted(set(ratings[a]) & set(ratings[b]))
        out: dict[str, Any] = {"rater_a": a, "rater_b": b, "n": len(common)}
        if len(common) < 2:
            pairs.append(out | {"kappa": None, "kappa_note": f"{len(common)} items rated by both"})
            continue
        xa, xb = [ratings[a][k] for k in common], [ratings[b][k] for k in common]
        res = pair_agreement(xa, xb, scale)
        weighted, note = _kappa(xa, xb, scale, "quadratic")
        pairs.append(
            out
            | {
                "agreed": res.agreed,
                "raw_agreement": res.raw_agreement,
                "kappa": res.kappa,
                "kappa_note": res.kappa_note,
                "weighted_kappa": weighted,
                "weighted_kappa_note": note,
                "labels": list(res.labels),
                "confusion": [list(r) for r in res.confusion],
            }
        )
    return {
        "rubric": rubric.name,
        "scale": scale,
        "judges": judges,
        "pairs": pairs,
        "all_raters": _all(runs, ratings, scale) if len(runs) >= 3 else None,
    }


def _all(
    runs: list[str], ratings: dict[str, dict[tuple[str, ...], int]], scale: list[int]
) -> dict[str, Any]:
    common = sorted(set.intersection(*(set(ratings[r]) for r in runs)))
    out: dict[str, Any] = {"raters": runs, "n": len(common)}
    try:
        out["fleiss_kappa"] = fleiss_kappa([[ratings[r][k] for r in runs] for k in common])
        out["fleiss_note"] = None
    except ValueError as exc:  # UndefinedAgreement is a ValueError
        out["fleiss_kappa"], out["fleiss_note"] = None, str(exc)
    try:
        data = [[ratings[r][k] for k in common] for r in runs]
        out["krippendorff_alpha"] = krippendorff_alpha(data, "ordinal", scale)
        out["alpha_note"] = None
    except ValueError as exc:
        out["krippendorff_alpha"], out["alpha_note"] = None, str(exc)
    return out
