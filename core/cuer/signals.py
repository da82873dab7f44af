"""CUE-R's per-pair signals: the axes and their deltas, answer change, trace divergence, roles."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from core.cuer.interventions import EPS, TAU
from core.params import Param
from core.scoring.rows import normalize_relaxed

__all__ = [
    "AXES",
    "AXIS_SCORE",
    "CORRECTNESS_AXIS",
    "CORRECTNESS_SCORES",
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "DELTA",
    "METRICS",
    "OPERATOR_ORDER",
    "PRIMARY_ROLE_ORDER",
    "PROFILE_METRICS",
    "ROLES",
    "ROLE_FLAGS",
    "answer_changed",
    "evidence_role",
    "finite",
    "jaccard_distance",
    "jaccard_similarity",
    "primary_role",
    "role_flags",
    "trace_divergence",
]


#: Utility axes (seed 004 §3.3): higher is better except ``confidence_error``.
AXES = ("correctness", "answer_f1", "grounding", "confidence_error")


#: Metrics of the CUE-R tables: the utility axes and the trace divergence.
METRICS = (*AXES, "trace_divergence")


#: Metrics of the utility profile and the sweeps: :data:`METRICS` and the evidence divergence
#: d_Jaccard(E, E') (seed 004 App. C Table 13, "Evid. Div.").
PROFILE_METRICS = (*METRICS, "evidence_divergence")


#: Stored score column behind each utility axis (correctness: see :data:`CORRECTNESS_SCORES`).
AXIS_SCORE = {
    "correctness": "soft_correct",
    "answer_f1": "f1_relaxed",
    "grounding": "title_grounding",
    "confidence_error": "confidence_error",
}


#: Correctness axes (seed 004 §4.6) and the stored score behind each: ``soft`` = soft
#: correctness (App. B: normalized match, yes/no, numbers or token F1 >= 0.8; the paper's
#: tables), ``strict`` = normalized exact match.
CORRECTNESS_SCORES = {"soft": "soft_correct", "strict": "em_strict"}


#: Which correctness axis the CUE-R numbers use (declared once for the page and the CLI).
CORRECTNESS_AXIS = Param(
    "correctness_axis",
    str,
    "soft",
    "correctness axis: soft (normalized match, yes/no, "
    "numbers or token F1 >= 0.8; the paper's tables) or strict (normalized exact match). "
    "Confidence error |c - 1[correct]|, Δcorr and the roles follow it",
    choices=tuple(CORRECTNESS_SCORES),
    section="CUE-R (seed 004) §4.6, §5.8, App. B",
)


#: Delta column names (seed 004 eq. 7: corr, f1, grnd, cal).
DELTA = {
    "correctness": "delta_corr",
    "answer_f1": "delta_f1",
    "grounding": "delta_grnd",
    "confidence_error": "delta_cal",
}


#: The paper's operational roles (seed 004 §3.5), one flag each: an item can carry several.
ROLE_FLAGS = ("constructive", "redundant", "distractive", "confidence_distorting")


#: Precedence of the single ``primary_role`` label (colouring and filtering only; counts are
#: per flag): constructive first, then distractive, as the paper labels its exemplars (seed
#: 004 Table 10: the "Constructive" item has Δcorr = +1 and D = 0.98, so it also carries the
#: distractive flag; every distractive item is constructive under §3.5, so the distractive
#: flag is counted but never the primary label), then confidence-distorting (a correctness
#: or grounding harm outranks a confidence change), and redundant last (with eps > 0 it can
#: overlap a positive change within eps).
PRIMARY_ROLE_ORDER = ("constructive", "distractive", "confidence_distorting", "redundant")


#: Every ``primary_role`` value, in display order (``unassigned``: no flag holds).
ROLES = (*ROLE_FLAGS, "unassigned")


#: Default threshold for "negligible" (|delta| <= eps, D <= eps), as declared.
DEFAULT_EPS = EPS.default


#: Default threshold for "large" trace divergence (D >= tau), as declared.
DEFAULT_TAU = TAU.default


#: (operator, variant) rows of the report, in table order; others follow sorted.
OPERATOR_ORDER = (
    ("original", ""),
    ("remove", ""),
    ("replace", "easy"),
    ("replace", "medium"),
    ("replace", "hard"),
    ("duplicate", "front"),
    ("duplicate", "after"),
    ("duplicate", "end"),
    ("zero_retrieval", ""),
)


def jaccard_similarity(a: Iterable[str], b: Iterable[str]) -> float:
    """``|A & B| / |A | B|`` over id sets; 1.0 when both are empty (nothing differs).

    ``{a, b}`` vs ``{b, c}``: 1 / 3.
    """
    sa, sb = set(a), set(b)
    union = sa | sb
    return 1.0 if not union else len(sa & sb) / len(union)


def jaccard_distance(a: Iterable[str], b: Iterable[str]) -> float:
    """``d_Jaccard = 1 - |A & B| / |A | B|`` (seed 004 §3.4, App. B); 0.0 when both are empty.

    Over the cited id sets of the original and the perturbed run this is the evidence
    divergence (App. C Table 13). ``{a, b}`` vs ``{b, c}``: 2 / 3.
    """
    return 1.0 - jaccard_similarity(a, b)


def _clamp(c: Any) -> float:
    if c is None or c is pd.NA:
        return 0.0
    c = float(c)
    return 0.0 if math.isnan(c) else min(max(c, 0.0), 1.0)


def answer_changed(
    answer: str | None,
    answer_perturbed: str | None,
    *,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> bool:
    """``1[y != y']`` of seed 004 eq. 9: the answers differ relaxed-normalized (SPEC §6.2).

    A parse error has no answer (None, or NaN once in a frame): it counts as ``""``.
    """
    a, a2 = (x if isinstance(x, str) else "" for x in (answer, answer_perturbed))
    return normalize_relaxed(a, answer_type, reasoning_type) != normalize_relaxed(
        a2, answer_type, reasoning_type
    )


def trace_divergence(
    cited: Iterable[str],
    cited_perturbed: Iterable[str],
    answer: str | None,
    answer_perturbed: str | None,
    confidence: float | None,
    confidence_perturbed: float | None,
    *,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> float:
    """Trace divergence D of seed 004 eq. 9 (SPEC §7).

    ``D = 0.5 * jaccard_distance(E, E') + 0.3 * 1[answer changed] + 0.2 * |c - c'|``; answers
    are compared relaxed-normalized (SPEC §6.2, with the instance's answer and reasoning type),
    confidences clamped to [0, 1], a missing confidence counts as 0.
    """
    changed = answer_changed(
        answer, answer_perturbed, answer_type=answer_type, reasoning_type=reasoning_type
    )
    return (
        0.5 * jaccard_distance(cited, cited_perturbed)
        + 0.3 * float(changed)
        + 0.2 * abs(_clamp(confidence) - _clamp(confidence_perturbed))
    )


def finite(x: Any) -> bool:
    """Whether ``x`` is a number (not None, NA or NaN)."""
    return x is not None and x is not pd.NA and not (isinstance(x, float) and math.isnan(x))


def role_flags(
    deltas: Mapping[str, float],
    divergence: float,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
) -> dict[str, bool]:
    """Which of the paper's role rules hold for one intervention (seed 004 §3.5; SPEC §7).

    Each rule is evaluated on its own (an item can be constructive and distractive at once):

    - constructive: ``delta_corr > 0`` or ``delta_grnd > 0``;
    - redundant: ``|delta_corr|``, ``|delta_grnd|``, ``|delta_cal|`` all <= eps and D <= eps;
    - distractive: D >= tau and (``delta_corr > 0`` or ``delta_grnd > 0``);
    - confidence-distorting: ``|delta_cal| > eps`` and ``|delta_corr| <= eps``.

    Args:
        deltas: ``delta_corr``, ``delta_grnd``, ``delta_cal`` (original - perturbed; NaN or
            missing entries are left out of every rule; ``delta_f1`` is ignored: answer F1 is
            no role axis, eq. 7).
        divergence: the trace divergence D.
        eps: "negligible" threshold (≈ 0).
        tau: "large" trace-divergence threshold (D ≫ 0).

    Returns:
        ``{constructive, redundant, distractive, confidence_distorting}`` booleans.
    """
    d = {
        k: float(v)
        for k, v in deltas.items()
        if k in ("delta_corr", "delta_grnd", "delta_cal") and finite(v)
    }
    corr, grnd, cal = (d.get(k) for k in ("delta_corr", "delta_grnd", "delta_cal"))
    harms = (corr is not None and corr > 0) or (grnd is not None and grnd > 0)
    return {
        "constructive": harms,
        "redundant": all(abs(v) <= eps for v in d.values()) and divergence <= eps,
        "distractive": divergence >= tau and harms,
        "confidence_distorting": cal is not None
        and abs(cal) > eps
        and corr is not None
        and abs(corr) <= eps,
    }


def primary_role(flags: Mapping[str, bool]) -> str:
    """The one label of an item, for colouring and filtering only (counts are per flag).

    The first flag of :data:`PRIMARY_ROLE_ORDER` that holds, else ``unassigned``.
    """
    return next((r for r in PRIMARY_ROLE_ORDER if flags.get(r)), "unassigned")


def evidence_role(
    deltas: Mapping[str, float],
    divergence: float,
    eps: float = DEFAULT_EPS,
    tau: float = DEFAULT_TAU,
) -> str:
    """The primary role of one intervened item (:func:`role_flags`, then :func:`primary_role`)."""
    return primary_role(role_flags(deltas, divergence, eps, tau))
