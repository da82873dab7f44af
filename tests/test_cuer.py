"""CUE-R metrics (core.cuer) on hand-computed cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.cuer import (
    ROLES,
    evidence_role,
    intervention_pairs,
    jaccard_distance,
    paired_deltas,
    role_counts,
    role_flags,
    synergy,
    trace_divergence,
    utility_profile,
)

# ------------------------------------------------------------------ trace divergence


def test_jaccard_distance():
    assert jaccard_distance([], []) == 0.0
    assert jaccard_distance(["p1", "p2"], ["p2", "p1"]) == 0.0
    assert jaccard_distance(["p1"], ["p2"]) == 1.0
    assert jaccard_distance(["p1", "p2"], ["p2", "p3"]) == pytest.approx(2 / 3)
    assert jaccard_distance(["p1"], []) == 1.0


def test_trace_divergence_both_citation_sets_empty():
    # Jaccard term 0 when both sets are empty; same answer; same confidence -> 0.
    assert trace_divergence([], [], "unknown", "unknown", 0.1, 0.1) == 0.0
    # Both empty, answer changed, confidence 0.9 -> 0.5: 0.3 + 0.2 * 0.4 = 0.38.
    assert trace_divergence([], [], "Paris", "Rome", 0.9, 0.5) == pytest.approx(0.38)


def test_trace_divergence_identical_sets():
    # Same sets; "Draco Labs 07064" and "draco labs" are equal relaxed-normalized for an
    # entity answer (the synthetic suffix is dropped): only 0.2 * |0.9 - 0.5| = 0.08 remains.
    d = trace_divergence(["p1", "p2"], ["p2", "p1"], "Draco Labs 07064", "draco labs", 0.9, 0.5,
                         answer_type="entity", reasoning_type="single_hop")  # fmt: skip
    assert d == pytest.approx(0.08)
    # For a number answer the suffix rule is off: "07064" is kept, so the answers differ.
    d = trace_divergence(["p1"], ["p1"], "Draco Labs 07064", "draco labs", 0.9, 0.9,
                         answer_type="number")  # fmt: skip
    assert d == pytest.approx(0.3)


def test_trace_divergence_disjoint_sets():
    # 0.5 * 1 + 0.3 * 1 + 0.2 * |0.9 - 0.1| = 0.96
    assert trace_divergence(["p1"], ["p2"], "Paris", "unknown", 0.9, 0.1) == pytest.approx(0.96)
    # The maximum: disjoint, changed, confidence 1 -> 0.
    assert trace_divergence(["p1"], ["p2"], "a", "b", 1.0, 0.0) == pytest.approx(1.0)


def test_trace_divergence_confidence_clamped_and_missing():
    assert trace_divergence([], [], "x", "x", 1.7, 0.5) == pytest.approx(0.1)
    assert trace_divergence([], [], "x", "x", None, 0.5) == pytest.approx(0.1)
    assert trace_divergence([], [], "x", "x", float("nan"), -2.0) == 0.0


# ------------------------------------------------------------------ roles

_ZERO = {"delta_corr": 0.0, "delta_f1": 0.0, "delta_grnd": 0.0, "delta_cal": 0.0}


@pytest.mark.parametrize(
    ("deltas", "d", "role"),
    [
        # constructive: delta_corr > 0 (the paper's Brown County case: D 0.98)
        ({**_ZERO, "delta_corr": 1.0, "delta_f1": 1.0, "delta_cal": -0.9}, 0.98, "constructive"),
        # constructive through grounding alone
        ({**_ZERO, "delta_grnd": 0.5}, 0.2, "constructive"),
        # redundant: every |delta| <= eps and D <= eps (the Derrickson duplicate: all 0)
        (_ZERO, 0.0, "redundant"),
        ({**_ZERO, "delta_f1": 0.04, "delta_cal": -0.05}, 0.05, "redundant"),
        # distractive: D >= tau and a utility worsens (here F1), without a corr/grnd drop
        ({**_ZERO, "delta_f1": 0.2}, 0.6, "distractive"),
        # distractive through confidence error worsening (delta_cal < 0)
        ({**_ZERO, "delta_cal": -0.03}, 0.5, "distractive"),
        # confidence-distorting: |delta_cal| > eps, delta_corr ~ 0 (Badly Drawn Boy: conf
        # 0.9 -> 0.5 on a correct answer: CE 0.1 -> 0.5, delta_cal -0.4, D 0.08)
        ({**_ZERO, "delta_cal": -0.4}, 0.08, "confidence_distorting"),
        # none of the rules: a small F1 change with small D
        ({**_ZERO, "delta_f1": 0.1}, 0.1, "unassigned"),
    ],
)
def test_role_rules(deltas, d, role):
    assert evidence_role(deltas, d) == role


def test_role_flags_overlap_and_thresholds():
    deltas = {**_ZERO, "delta_corr": 1.0}
    assert role_flags(deltas, 0.8) == {
        "constructive": True, "redundant": False, "distractive": True,
        "confidence_distorting": False,
    }  # fmt: skip
    assert role_flags(deltas, 0.8, tau=0.9)["distractive"] is False
    # eps decides "negligible": delta_f1 0.1 is redundant with eps 0.1, not with 0.05.
    assert evidence_role({**_ZERO, "delta_f1": 0.1}, 0.1, eps=0.1) == "redundant"
    # NaN deltas (no gold evidence -> grounding NaN) are left out of every rule.
    assert evidence_role({**_ZERO, "delta_grnd": math.nan}, 0.0) == "redundant"
    assert ROLES[-1] == "unassigned"


# ------------------------------------------------------------------ pairing and aggregates


def _row(iid, cond, variant, *, corr, f1, grnd, ce, answer="a", cited=("p1",), conf=0.9,
         error=None, meta=None, at="entity", rt="single_hop"):  # fmt: skip
    return {
        "run": "r", "instance_id": iid, "condition": cond, "variant": variant, "answer": answer,
        "cited_ids": list(cited), "confidence": conf, "error": error, "meta": meta,
        "soft_correct": corr, "f1_relaxed": f1, "title_grounding": grnd,
        "confidence_error": ce, "answer_type": at, "reasoning_type": rt,
    }  # fmt: skip


def _frame():
    rows = [
        _row("a", "retrieved", "", corr=1, f1=1.0, grnd=1.0, ce=0.1),
        _row("a", "intervention", "remove|p1", corr=0, f1=0.0, grnd=0.0, ce=0.2,
             answer="unknown", cited=(), conf=0.2),
        _row("a", "intervention", "duplicate:end|p1", corr=1, f1=1.0, grnd=1.0, ce=0.1),
        _row("a", "intervention", "zero_retrieval", corr=0, f1=0.0, grnd=0.0, ce=0.05,
             answer="unknown", cited=(), conf=0.05),
        _row("b", "retrieved", "", corr=1, f1=0.5, grnd=0.5, ce=0.5, conf=0.5, cited=("p1", "p2")),
        _row("b", "intervention", "remove|p2", corr=0, f1=0.0, grnd=0.0, ce=0.0,
             answer="unknown", cited=(), conf=0.0, meta='{"rule": "cited", "target": "p2"}'),
        # a Case-view rerun of the planned call (same key) replaced the planned row: kept
        _row("b", "intervention", "duplicate:end|p2", corr=1, f1=0.5, grnd=1.0, ce=0.5,
             conf=0.5, cited=("p2",), meta='{"rule": "user", "target": "p2"}'),
        # a failed call: a missing pair (no delta, no role); a Case-view rerun and another
        # base: left out of the pairs
        _row("b", "intervention", "replace:easy|p2", corr=None, f1=None, grnd=None, ce=None,
             error="HTTP 500"),
        _row("b", "intervention", "remove|p1", corr=0, f1=0, grnd=0, ce=0,
             meta='{"rule": "user"}'),
        _row("b", "intervention", "move:0|p2", corr=0, f1=0, grnd=0, ce=0,
             meta='{"rule": "user"}'),
        _row("b", "intervention", "remove|p1@oracle", corr=0, f1=0, grnd=0, ce=0),
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_intervention_pairs_deltas_divergence_roles():
    pairs = intervention_pairs(_frame())
    assert list(pairs["variant"]) == [
        "remove|p1", "duplicate:end|p1", "zero_retrieval", "remove|p2", "duplicate:end|p2",
        "replace:easy|p2",
    ]
    assert list(pairs["missing"]) == [False] * 5 + [True]
    gone = pairs.iloc[5]
    assert math.isnan(gone["delta_corr"]) and math.isnan(gone["trace_divergence"])
    assert pd.isna(gone["role"])
    rm = pairs.iloc[0]
    assert (rm["operator"], rm["param"], rm["target"]) == ("remove", "", "p1")
    assert (rm["delta_corr"], rm["delta_f1"], rm["delta_grnd"]) == (1.0, 1.0, 1.0)
    assert rm["delta_cal"] == pytest.approx(-0.1)
    # {p1} vs {}: 0.5; "a" -> "unknown": 0.3; |0.9 - 0.2| * 0.2 = 0.14
    assert rm["trace_divergence"] == pytest.approx(0.94)
    assert rm["role"] == "constructive" and rm["is_distractive"]
    dup_b = pairs.iloc[4]
    # {p1, p2} vs {p2}: 0.5 * 0.5 = 0.25; same answer, same confidence
    assert dup_b["trace_divergence"] == pytest.approx(0.25)
    assert dup_b["delta_grnd"] == pytest.approx(-0.5)
    assert dup_b["role"] == "unassigned"
    assert pairs.iloc[1]["role"] == "redundant"
    assert pd.isna(pairs.iloc[2]["role"])  # zero retrieval describes no item


def test_utility_profile_means():
    frame = _frame()
    prof = utility_profile(frame, n_resamples=200).aggregate
    assert list(zip(prof["operator"], prof["variant"], prof["n"], prof["missing"])) == [
        ("original", "", 2, 0), ("remove", "", 2, 0), ("replace", "easy", 0, 1),
        ("duplicate", "end", 2, 0), ("zero_retrieval", "", 1, 0),
    ]
    orig = prof.iloc[0]
    assert orig["correctness"] == 1.0 and orig["answer_f1"] == 0.75
    assert orig["grounding"] == 0.75 and orig["confidence_error"] == pytest.approx(0.3)
    assert orig["trace_divergence"] == 0.0
    rm = prof.iloc[1]
    assert rm["correctness"] == 0.0 and rm["confidence_error"] == pytest.approx(0.1)
    # b: {p1, p2} vs {}: 0.5; answer changed 0.3; 0.2 * 0.5 = 0.1 -> 0.9; a: 0.94
    assert rm["trace_divergence"] == pytest.approx((0.94 + 0.9) / 2)
    assert rm["correctness_ci_low"] == 0.0 and rm["correctness_ci_high"] == 0.0


def test_paired_deltas_table3_layout():
    pairs = intervention_pairs(_frame())
    agg = paired_deltas(pairs, n_resamples=500).aggregate
    rm = agg[(agg["operator"] == "remove")].set_index("metric")
    # Both instances lose correctness 1 -> 0: every paired difference is 1, so the CI is
    # [1, 1] and no resample mean is <= 0: p = 2 * min(1, 0) = 0.
    assert rm.loc["correctness", ["delta", "ci_low", "ci_high", "p"]].tolist() == [1, 1, 1, 0]
    assert rm.loc["answer_f1", "delta"] == pytest.approx(0.75)
    assert rm.loc["trace_divergence", "delta"] == pytest.approx(-(0.94 + 0.9) / 2)
    dup = agg[(agg["operator"] == "duplicate")].set_index("metric")
    # No change in correctness: every difference 0 -> p = min(1, 2 * 1) = 1.
    assert dup.loc["correctness", ["delta", "p"]].tolist() == [0.0, 1.0]
    assert dup.loc["grounding", "delta"] == pytest.approx(-0.25)
    assert list(agg.columns[:4]) == ["run", "operator", "variant", "metric"]
    assert list(agg["metric"][:5]) == [
        "correctness", "answer_f1", "grounding", "confidence_error", "trace_divergence",
    ]


def test_role_counts():
    agg = role_counts(intervention_pairs(_frame())).aggregate
    got = {(o, v, r): n for o, v, r, n in agg[["operator", "variant", "role", "n"]].itertuples(
        index=False) if n}  # fmt: skip
    assert got == {
        ("remove", "", "constructive"): 2,
        ("duplicate", "end", "redundant"): 1,
        ("duplicate", "end", "unassigned"): 1,
    }


def _two(iid, orig, one, two, both):
    return [
        _row(iid, "retrieved", "", corr=1, f1=orig, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:1|p1", corr=1, f1=one, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:2|p2", corr=1, f1=two, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:both|p1+p2", corr=1, f1=both, grnd=1, ce=0),
    ]


def test_synergy_arithmetic():
    rows = (
        _two("a", 1.0, 1.0, 1.0, 0.0)      # drops 0, 0, 1: synergy 1, strong complementary
        + _two("b", 1.0, 0.5, 0.0, 0.0)    # drops 0.5, 1, 1: synergy 0
        + _two("c", 0.5, 0.5, 0.25, 0.0)   # drops 0, 0.25, 0.5: synergy 0.25, positive
        + _two("d", 1.0, 1.0, 1.0, 0.0)[:3]  # no joint removal: not eligible
    )  # fmt: skip
    res = synergy(intervention_pairs(pd.DataFrame(rows)))
    per = res.per_instance.set_index("instance_id")
    assert per["synergy"].to_dict() == {"a": 1.0, "b": 0.0, "c": 0.25}
    assert per["positive"].to_dict() == {"a": True, "b": False, "c": True}
    assert per["strong_complementary"].to_dict() == {"a": True, "b": False, "c": False}
    assert per.loc["a", "supports"] == "p1+p2"
    agg = res.aggregate.iloc[0]
    assert agg["n"] == 3
    assert agg["mean_drop_1"] == pytest.approx(0.5 / 3)
    assert agg["mean_drop_2"] == pytest.approx(1.25 / 3)
    assert agg["mean_drop_both"] == pytest.approx(2.5 / 3)
    assert agg["mean_synergy"] == pytest.approx(1.25 / 3)
    assert agg["pct_positive_synergy"] == pytest.approx(200 / 3)
    assert agg["pct_strong_complementary"] == pytest.approx(100 / 3)
    # eps decides "harmless": with eps 0.3, c's single drops (0, 0.25) are harmless too.
    assert synergy(intervention_pairs(pd.DataFrame(rows)), eps=0.3).aggregate.iloc[0][
        "pct_strong_complementary"
    ] == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="unknown synergy metric 'em'"):
        synergy(intervention_pairs(pd.DataFrame(rows)), metric="em")
