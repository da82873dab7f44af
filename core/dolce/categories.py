"""DOLCE focus categories I-V (Figure 1), their thresholds (§4) and the candidate grid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CATEGORIES",
    "CATEGORY_NAMES",
    "NOT_COVERED",
    "Thresholds",
    "assign_category",
    "candidate_grid",
    "category_distribution",
    "default_thresholds",
]

CATEGORIES = ("I", "II", "III", "IV", "V")
#: The "category" of a COW fit with k = 0: no copy of a sufficient span, so no span of any
#: length answers (lambda > L). Assumption 1 needs k >= 1: the model does not cover the
#: problem, which is therefore in none of I-V (in particular not V, which needs a span).
NOT_COVERED = "not covered"
#: What each category means (shown in the UI).
CATEGORY_NAMES = {
    "I": "closed-book / zero-shot (lambda = 0)",
    "II": "easy (lambda <= lambda_p, k > k_p)",
    "III": "retrieval (lambda <= lambda_p, k <= k_p)",
    "IV": "balanced (lambda_p < lambda <= lambda_q)",
    "V": "holistic understanding (lambda > lambda_q)",
    NOT_COVERED: "not covered by the model (COW k = 0: no span answers, lambda > L; this "
    "tool's addition, not one of the paper's categories)",
}


def candidate_grid(observed_C: Sequence[int], L: int) -> np.ndarray:
    """Lambda and k candidates: the observed C values plus 0, max C + 1 and L (sorted, unique)."""
    obs = np.unique(np.asarray(list(observed_C), dtype=np.int64))
    if obs.size == 0:
        raise ValueError("no observations: the candidate grid needs at least one C")
    return np.unique(np.concatenate([obs, [0, int(obs.max()) + 1, int(L)]]))


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Category thresholds (Figure 1); None = the paper's default for each problem.

    Attributes:
        lam_p: lambda threshold between retrieval/easy (II, III) and balanced (IV).
        k_p: k threshold between easy (II, k > k_p) and retrieval (III).
        lam_q: lambda threshold between balanced (IV) and holistic (V).
    """

    lam_p: float | None = None
    k_p: float | None = None
    lam_q: float | None = None


def default_thresholds(observed_C: Sequence[int], L: int) -> tuple[float, float, float]:
    """The paper's thresholds (§4): ``lam_p = k_p`` = first tertile, ``lam_q = max C``.

    The N exponential candidates are the observed C values without 0, L and max C + 1 (seed
    §4: "the first tertile among the N exponential candidates ..., i.e. p = floor(N/3)"). The
    threshold is the candidate at index ``p = floor(N / 3)`` counted from 0 in ascending
    order, i.e. the 1/3-quantile: on the L-Eval ladder 0, 1, 2, 5, 10, 20, 50, 100, L the
    candidates are 1 ... 100 (N = 7, p = 2) and ``lam_p = k_p = 5``. This reading (not the
    p-th smallest counted from 1, which gives 2) reproduces the categories of all eight
    representative problems of Table 2 (LongFQA lambda = 5, k = 10 is Category II); fewer
    than three candidates give the smallest. ``lam_q`` is the longest observed *span*: the
    full-context observation ``C = L`` (the ladder's last rung) shows everything and is not a
    span, so it is left out; otherwise a problem that needs the whole context (lambda = L)
    could never be holistic (V), which Table 2 shows for both tasks and the paper's
    ``max C + 1`` candidate is there to detect (seed §4). With no span shorter than L,
    ``lam_q = L``.
    """
    obs = np.unique(np.asarray(list(observed_C), dtype=np.int64))
    if obs.size == 0:
        raise ValueError("no observations: thresholds need at least one C")
    expo = [int(c) for c in obs if c not in (0, L)]
    if not expo:
        expo = [1]
    t = float(expo[len(expo) // 3])
    spans = [int(c) for c in obs if c < L]
    return t, t, float(max(spans) if spans else L)


def assign_category(lam: Any, k: Any, lam_p: Any, k_p: Any, lam_q: Any) -> np.ndarray:
    """Focus category I-V of Figure 1, elementwise.

    I when lambda = 0; II when lambda <= lam_p and k > k_p; III when lambda <= lam_p and
    k <= k_p; IV when lam_p < lambda <= lam_q; V when lambda > lam_q.
    """
    lam, k, lam_p, k_p, lam_q = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (lam, k, lam_p, k_p, lam_q))
    )
    return np.select(
        [lam == 0, (lam <= lam_p) & (k > k_p), lam <= lam_p, lam <= lam_q],
        ["I", "II", "III", "IV"],
        default="V",
    ).astype(object)


def category_distribution(problems: pd.DataFrame) -> pd.DataFrame:
    """Category counts and shares per task, with the COW / PIG split and the flagged fits.

    Columns: ``task, n, n_cow, n_pig``, ``n_I`` ... ``n_V`` and ``n_not_covered`` (COW fits
    with k = 0, in no category), ``n_not_identified`` (problems whose lambda and category the
    estimator does not identify: PIG under the published Algorithm 2; counted inside
    ``n_I`` ... ``n_V`` too), then ``share_I`` ... ``share_V`` and ``share_not_covered``
    (shares of ``n``).
    """
    rows = []
    for task, frame in problems.groupby("task", sort=False):
        row: dict[str, Any] = {
            "task": task,
            "n": len(frame),
            "n_cow": int((frame["scenario"] == "COW").sum()),
            "n_pig": int((frame["scenario"] == "PIG").sum()),
        }
        for cat in CATEGORIES:
            row[f"n_{cat}"] = int((frame["category"] == cat).sum())
        row["n_not_covered"] = int((frame["category"] == NOT_COVERED).sum())
        ident = frame["identified"] if "identified" in frame.columns else pd.Series(True)
        row["n_not_identified"] = int((~ident.astype(bool)).sum())
        for cat in CATEGORIES:
            row[f"share_{cat}"] = row[f"n_{cat}"] / len(frame)
        row["share_not_covered"] = row["n_not_covered"] / len(frame)
        rows.append(row)
    return pd.DataFrame(rows)
