"""Fan-in's per-item measures: fan-in, buckets, evidence recall and precision, per-instance rows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from core.scoring.rows import ANSWER_SCORES
from core.types import stored_ids

__all__ = [
    "BUCKETS",
    "FAILURE_AC",
    "LOW_ER",
    "PACK_CONDITIONS",
    "PER_COLS",
    "PLAIN",
    "answer_correctness",
    "crossover",
    "evidence_pack",
    "evidence_precision",
    "evidence_recall",
    "fan_in",
    "fan_in_bucket",
    "jaccard",
    "pearson",
    "per_instance",
    "relative_degradation",
]


#: Fan-in buckets in order: single (1), low (2-3), high (>= 4).
BUCKETS = ("single", "low", "high")


#: A failure is an answer with AC below this (seed 003 §6.1: AC < 33%).
FAILURE_AC = 33.0


#: Failure attribution counts failures with ER below this (seed 003 §6.1: ER < 50%).
LOW_ER = 0.5


#: Conditions whose evidence pack is the shown passages; ``full_context`` uses citations.
PACK_CONDITIONS = ("retrieved", "oracle")


PLAIN = ("no_evidence", "full_context", "retrieved", "oracle")


def fan_in(gold_doc_ids: Iterable[str]) -> int:
    """Number of distinct source documents among gold evidence (seed 003 eq. 1)."""
    return len(set(gold_doc_ids))


def fan_in_bucket(f: int) -> str | None:
    """``single`` (1), ``low`` (2-3), ``high`` (>= 4); None for fan-in 0 (no gold evidence).

    Raises:
        ValueError: a negative or non-integer fan-in.
    """
    if isinstance(f, bool) or not isinstance(f, int | np.integer) or f < 0:
        raise ValueError(f"fan-in must be a non-negative integer, got {f!r}")
    if f == 0:
        return None
    return "single" if f == 1 else ("low" if f <= 3 else "high")


def evidence_pack(condition: str, input_passage_ids: Any, cited_ids: Any) -> list[str] | None:
    """The evidence pack of one prediction (None: no pack, ER / EP missing).

    None for ``no_evidence``, and for a retrieved / oracle prediction whose shown passages
    are not stored (``input_passage_ids`` NULL).

    Raises:
        ValueError: a condition other than the four plain ones.
    """
    if condition in PACK_CONDITIONS:
        # not stored (an imported release does not say what a retrieved call showed): no
        # pack, so ER / EP are missing -- an empty list would measure them as 0
        return None if _absent(input_passage_ids) else stored_ids(input_passage_ids)
    if condition == "full_context":
        return stored_ids(cited_ids)
    if condition == "no_evidence":
        return None
    raise ValueError(f"no evidence pack for condition {condition!r}; allowed: {', '.join(PLAIN)}")


def evidence_recall(pack: Iterable[str], gold: Iterable[str]) -> float:
    """ER = |pack ∩ gold| / |gold| over id sets (duplicates count once); NaN without gold."""
    g = set(gold)
    if not g:
        return math.nan
    return len(set(pack) & g) / len(g)


def evidence_precision(pack: Iterable[str], gold: Iterable[str]) -> float:
    """EP = |pack ∩ gold| / |pack| over id sets (duplicates count once).

    0 for an empty pack, NaN without gold.
    """
    g, p = set(gold), set(pack)
    if not g:
        return math.nan
    return len(p & g) / len(p) if p else 0.0


def answer_correctness(score: float) -> float:
    """AC on 0-100 from an answer score in [0, 1] (default field: relaxed F1)."""
    return 100.0 * float(score)


def _absent(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


PER_COLS = [
    "run",
    "model",
    "dataset",
    "condition",
    "system",
    "instance_id",
    "fan_in",
    "bucket",
    "pack_size",
    "n_gold",
    "ac",
    "er",
    "ep",
    "failed",
    "missing",
]


def per_instance(frame: pd.DataFrame, score_field: str = "f1_relaxed") -> pd.DataFrame:
    """Per-instance fan-in rows of a :meth:`core.store.Store.fanin_frame` frame.

    Args:
        frame: columns ``run``, ``instance_id``, ``condition``, ``input_passage_ids``,
            ``cited_ids``, ``gold_ids``, ``fan_in``, ``score_field`` (``model`` and
            ``dataset`` kept when present).
        score_field: answer score giving AC (one of :data:`core.scoring.rows.ANSWER_SCORES`).

    Returns:
        One row per plain-condition prediction: ``run``, ``model``, ``dataset``,
        ``condition``, ``system`` (``run:condition``), ``instance_id``, ``fan_in``,
        ``bucket``, ``pack_size`` (distinct ids), ``n_gold``, ``ac``, ``er``, ``ep``,
        ``failed`` (AC < 33; NaN when AC is NaN) and ``missing`` (the call failed or the row
        is unscored: ``ac``, ``er``, ``ep`` and ``failed`` NaN).

    Raises:
        ValueError: unknown score field or missing columns.
    """
    if score_field not in ANSWER_SCORES:
        raise ValueError(
            f"unknown score field {score_field!r}; allowed: {', '.join(ANSWER_SCORES)}"
        )
    need = (
        "run",
        "instance_id",
        "condition",
        "input_passage_ids",
        "cited_ids",
        "gold_ids",
        "fan_in",
        score_field,
    )
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ValueError(f"fan-in frame lacks column(s): {', '.join(missing)}")
    df = frame[frame["condition"].isin(PLAIN)]
    rows = []
    for rec in df.to_dict("records"):
        gold = stored_ids(rec["gold_ids"])
        pack = evidence_pack(rec["condition"], rec["input_passage_ids"], rec["cited_ids"])
        f = int(rec["fan_in"]) if rec["fan_in"] is not None and not pd.isna(rec["fan_in"]) else 0
        score = rec[score_field]
        error = rec.get("error")
        missing = bool(
            score is None
            or pd.isna(score)
            or (error is not None and not pd.isna(error) and str(error).strip())
        )
        ac = math.nan if missing else answer_correctness(score)
        if missing:
            pack = None  # no answer, no citations: nothing to measure the pack of
        rows.append(
            {
                "run": rec["run"],
                "model": rec.get("model"),
                "dataset": rec.get("dataset"),
                "condition": rec["condition"],
                "system": f"{rec['run']}:{rec['condition']}",
                "instance_id": rec["instance_id"],
                "fan_in": f,
                "bucket": fan_in_bucket(f),
                "pack_size": math.nan if pack is None else len(set(pack)),
                "n_gold": len(set(gold)),
                "ac": ac,
                "er": math.nan if pack is None else evidence_recall(pack, gold),
                "ep": math.nan if pack is None else evidence_precision(pack, gold),
                "failed": math.nan if math.isnan(ac) else float(ac < FAILURE_AC),
                "missing": missing,
            }
        )
    out = pd.DataFrame(rows, columns=PER_COLS)
    out["missing"] = out["missing"].astype(bool)
    return out


def relative_degradation(ac_single: float, ac_high: float) -> float:
    """(AC_high - AC_single) / AC_single; NaN when AC_single is 0 or either is NaN."""
    if any(v is None or math.isnan(v) for v in (ac_single, ac_high)) or ac_single == 0:
        return math.nan
    return (ac_high - ac_single) / ac_single


def pearson(
    x: Sequence[float], y: Sequence[float], n_resamples: int = 5000, seed: int = 42
) -> dict[str, float]:
    """Pearson r of paired points with a bootstrap CI over points and the OLS line.

    Pairs with a NaN are dropped. The CI resamples points with replacement (``seed``), drops
    resamples where either side is constant, and takes the 2.5 / 97.5 percentiles.

    Returns:
        ``{r, ci_low, ci_high, n, slope, intercept}`` (NaN r for n < 3 or a constant side).
    """
    xv = np.asarray(x, dtype=float)
    yv = np.asarray(y, dtype=float)
    if xv.shape != yv.shape:
        raise ValueError(f"pearson: x has {xv.size} values, y has {yv.size}")
    keep = np.isfinite(xv) & np.isfinite(yv)
    xv, yv = xv[keep], yv[keep]
    n = int(xv.size)
    out = {
        "r": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "n": n,
        "slope": math.nan,
        "intercept": math.nan,
    }
    if n < 3 or np.ptp(xv) == 0 or np.ptp(yv) == 0:
        return out
    r = _corr(xv[None, :], yv[None, :])[0]
    slope = float(np.sum((xv - xv.mean()) * (yv - yv.mean())) / np.sum((xv - xv.mean()) ** 2))
    out.update(r=float(r), slope=slope, intercept=float(yv.mean() - slope * xv.mean()))
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    boot = _corr(xv[idx], yv[idx])
    boot = boot[np.isfinite(boot)]
    if boot.size:
        lo, hi = np.percentile(boot, [2.5, 97.5])
        out.update(ci_low=float(lo), ci_high=float(hi))
    return out


def _corr(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (m, n) arrays; NaN for a constant row."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(axis=1) / den
    r[den <= 1e-12] = np.nan
    return np.clip(r, -1.0, 1.0)


def jaccard(a: Iterable[Any], b: Iterable[Any]) -> float:
    """|A ∩ B| / |A ∪ B|; NaN when both sets are empty (no failures to compare)."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return math.nan
    return len(sa & sb) / len(sa | sb)


def crossover(curve_a: dict[int, float], curve_b: dict[int, float]) -> dict[str, Any]:
    """Where the leader of two AC-vs-fan-in curves changes (seed 003 §6.4).

    Args:
        curve_a: exact fan-in -> AC of system A.
        curve_b: the same for system B.

    Returns:
        ``leader_first`` (``"a"``/``"b"`` at the smallest common fan-in with a leader),
        ``crossover_fan_in`` (first fan-in whose leader differs from the previous leader;
        None when it never changes), ``crossovers`` (every such fan-in) and ``gaps``
        (fan-in -> AC_a - AC_b). Ties and NaN gaps have no leader and are skipped.
    """
    common = sorted(set(curve_a) & set(curve_b))
    gaps = {f: float(curve_a[f]) - float(curve_b[f]) for f in common}
    prev = first = None
    changes: list[int] = []
    for f in common:
        g = gaps[f]
        if math.isnan(g) or g == 0:
            continue
        lead = "a" if g > 0 else "b"
        if prev is None:
            first = lead
        elif lead != prev:
            changes.append(f)
        prev = lead
    return {
        "leader_first": first,
        "crossover_fan_in": changes[0] if changes else None,
        "crossovers": changes,
        "gaps": gaps,
    }


def _missing_flags(rows: pd.DataFrame) -> np.ndarray:
    """The rows that are missing (a failed call or an unscored row: NaN AC)."""
    if "missing" in rows.columns:
        return rows["missing"].fillna(False).to_numpy(dtype=bool) | rows["ac"].isna().to_numpy()
    return rows["ac"].isna().to_numpy()
