"""CUE-R roles of the paper's Table 10 exemplars (seed 004 §6.9; issue 34 item 3).

Each exemplar is written as the stored base trace and intervention it describes (answers,
confidences, cited ids, scores as §6.9 gives them) and goes through the product's own pairing
(:func:`core.cuer.metrics.intervention_pairs`, eq. 7 and eq. 9, eps 0.05, tau 0.5). The trace
divergence eq. 9 computes must be the D Table 10 prints, and ``primary_role`` the label it
prints:

| Table 10 role | Δcorr | D | how eq. 9 gives D |
|---|---|---|---|
| Constructive (Brown County, remove) | +1.0 | 0.98 | 0.5 * 1 + 0.3 + 0.2 * |0.9 - 0.0| |
| Answer-preserving, trace-divergent (manga, replace) | 0.0 | 0.88 | 0.5 * 1 + 0.3 + 0.2 * 0.4 |
| Redundant (Derrickson, duplicate) | 0.0 | 0.00 | nothing changes |
| Conf.-distorting (Badly Drawn Boy, duplicate) | 0.0 | 0.08 | 0.2 * |0.9 - 0.5| |

The constructive exemplar also satisfies the distractive rule (D >= tau with Δcorr > 0), so
the primary label must put constructive first. The manga row's label is not one of §3.5's
roles; by §3.5's rules it is confidence-distorting (confidence 0.5 -> 0.9, correctness
unchanged), which is what the flags say (its grounding is not given: taken as unchanged).
"""

from __future__ import annotations

import pandas as pd
import pytest

from core.cuer.metrics import intervention_pairs


def _row(iid, cond, variant, *, correct, grnd, conf, answer, cited):
    return {
        "run": "r",
        "instance_id": iid,
        "condition": cond,
        "variant": variant,
        "answer": answer,
        "cited_ids": list(cited),
        "confidence": conf,
        "error": None,
        "meta": None,
        "soft_correct": correct,
        "f1_relaxed": float(correct),
        "title_grounding": grnd,
        "confidence_error": abs(conf - correct),
        "answer_type": "entity",
        "reasoning_type": "multi_hop",
    }


#: (instance, variant, base row args, intervention row args, Δcorr, D, flags, primary role).
EXEMPLARS = [
    # Brown County, Kansas: 9,984 correct (0.9) -> "Unknown" (0.0) when the chunk is removed.
    (
        "brown",
        "remove|p0001",
        dict(correct=1, grnd=1.0, conf=0.9, answer="9,984", cited=("p0001",)),
        dict(correct=0, grnd=0.0, conf=0.0, answer="Unknown", cited=()),
        1.0,
        0.98,
        "constructive+distractive",
        "constructive",
    ),
    # Manga illustrator: 1970 wrong (0.5) -> 1968 wrong (0.9) under replacement.
    (
        "manga",
        "replace:easy|p0002",
        dict(correct=0, grnd=0.5, conf=0.5, answer="1970", cited=("p0002",)),
        dict(correct=0, grnd=0.5, conf=0.9, answer="1968", cited=("p0005",)),
        0.0,
        0.88,
        "confidence_distorting",
        "confidence_distorting",
    ),
    # Derrickson / Ed Wood: "no" (wrong) both times, confidence 0.9, grounding 0.5.
    (
        "derrickson",
        "duplicate:end|p0003",
        dict(correct=0, grnd=0.5, conf=0.9, answer="no", cited=("p0003", "p0004")),
        dict(correct=0, grnd=0.5, conf=0.9, answer="no", cited=("p0003", "p0004")),
        0.0,
        0.0,
        "redundant",
        "redundant",
    ),
    # Badly Drawn Boy: correct at 0.9 -> correct at 0.5 under duplication (CE 0.1 -> 0.5).
    (
        "bdb",
        "duplicate:end|p0006",
        dict(correct=1, grnd=1.0, conf=0.9, answer="Badly Drawn Boy", cited=("p0006",)),
        dict(correct=1, grnd=1.0, conf=0.5, answer="Badly Drawn Boy", cited=("p0006",)),
        0.0,
        0.08,
        "confidence_distorting",
        "confidence_distorting",
    ),
]


@pytest.mark.parametrize(
    ("iid", "variant", "base", "perturbed", "d_corr", "d", "flags", "primary"), EXEMPLARS
)
def test_table_10_exemplars_keep_their_published_role(
    iid, variant, base, perturbed, d_corr, d, flags, primary
):
    frame = pd.DataFrame(
        [_row(iid, "retrieved", "", **base), _row(iid, "intervention", variant, **perturbed)]
    )
    pair = intervention_pairs(frame).iloc[0]
    assert pair["delta_corr"] == d_corr
    assert round(pair["trace_divergence"], 2) == d  # the D Table 10 prints
    assert pair["flags"] == flags
    assert pair["primary_role"] == primary
