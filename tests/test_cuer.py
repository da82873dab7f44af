"""CUE-R metrics (core.cuer) on hand-computed cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from core.cuer.metrics import (
    PRIMARY_ROLE_ORDER,
    ROLE_FLAGS,
    ROLES,
    answer_changed,
    evidence_role,
    intervention_pairs,
    jaccard_distance,
    jaccard_similarity,
    paired_deltas,
    primary_role,
    role_combinations,
    role_counts,
    role_flags,
    synergy,
    trace_divergence,
    utility_profile,
)
from core.figures.cuer import (
    COLUMN_HELP,
    duplicate_positions_table,
    hardness_table,
    role_examples,
    role_table,
    roles_figure,
)
from core.scoring.rows import score_answer

# ------------------------------------------------------------------ trace divergence


def test_jaccard_distance():
    assert jaccard_distance([], []) == 0.0
    assert jaccard_distance(["p1", "p2"], ["p2", "p1"]) == 0.0
    assert jaccard_distance(["p1"], ["p2"]) == 1.0
    assert jaccard_distance(["p1", "p2"], ["p2", "p3"]) == pytest.approx(2 / 3)
    assert jaccard_distance(["p1"], []) == 1.0


@pytest.mark.parametrize(
    ("e", "e2", "similarity"),
    [
        (["a", "b"], ["b", "c"], 1 / 3),  # |{b}| / |{a, b, c}|
        (["a", "b", "c"], ["a"], 1 / 3),  # |{a}| / |{a, b, c}|
        (["a", "b"], ["b", "a"], 1.0),  # same set, other order
        (["a", "a", "b"], ["b"], 1 / 2),  # sets: a repeated id counts once
        (["a"], [], 0.0),  # everything cited is gone
        (["a", "b", "c", "d"], ["c", "d", "e"], 2 / 5),  # |{c, d}| / |{a, b, c, d, e}|
        ([], [], 1.0),  # both empty: nothing differs (the Jaccard term of D is 0)
    ],
)
def test_jaccard_similarity_and_evidence_divergence(e, e2, similarity):
    # d_Jaccard(E, E') = 1 - |E & E'| / |E | E'| (seed 004 §3.4, App. B)
    assert jaccard_similarity(e, e2) == pytest.approx(similarity)
    assert jaccard_distance(e, e2) == pytest.approx(1 - similarity)
    assert jaccard_similarity(e2, e) == pytest.approx(similarity)  # symmetric


def test_answer_changed_is_the_relaxed_indicator_of_d():
    assert answer_changed("The Eiffel Tower.", "eiffel tower") is False  # article, punctuation
    assert answer_changed("Paris", "Rome") is True
    assert answer_changed(None, "") is False  # a parse error has no answer: ""
    assert answer_changed(None, "x") is True


def test_trace_divergence_both_citation_sets_empty():
    # Jaccard term 0 when both sets are empty; same answer; same confidence -> 0.
    assert trace_divergence([], [], "unknown", "unknown", 0.1, 0.1) == 0.0
    # Both empty, answer changed, confidence 0.9 -> 0.5: 0.3 + 0.2 * 0.4 = 0.38.
    assert trace_divergence([], [], "Paris", "Rome", 0.9, 0.5) == pytest.approx(0.38)


def test_trace_divergence_identical_sets():
    # Same sets; "Draco Labs 07064" and "draco labs" are equal relaxed-normalized for an
    # entity answer (the synthetic suffix is dropped): only 0.2 * |0.9 - 0.5| = 0.08 remains.
    d = trace_divergence(
        ["p1", "p2"],
        ["p2", "p1"],
        "Draco Labs 07064",
        "draco labs",
        0.9,
        0.5,
        answer_type="entity",
        reasoning_type="single_hop",
    )
    assert d == pytest.approx(0.08)
    # For a number answer the suffix rule is off: "07064" is kept, so the answers differ.
    d = trace_divergence(
        ["p1"], ["p1"], "Draco Labs 07064", "draco labs", 0.9, 0.9, answer_type="number"
    )
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
_NONE = dict.fromkeys(ROLE_FLAGS, False)

#: Hand-built items (deltas, D) with the flags the paper's rules give at eps 0.05, tau 0.5
#: (seed 004 §3.5), each checked by hand in the comment.
_ITEMS = [
    # A: Brown County (§6.9): removal kills the answer. Δcorr 1 > 0 -> constructive; D 0.94 >=
    #    0.5 with Δcorr > 0 -> distractive; |Δcorr| 1 > eps -> not confidence-distorting.
    (
        "A",
        {"delta_corr": 1.0, "delta_f1": 1.0, "delta_grnd": 1.0, "delta_cal": -0.8},
        0.94,
        {"constructive", "distractive"},
        "constructive",
    ),
    # B: Derrickson duplicate (§6.9): every Δ 0 and D 0 -> redundant only.
    ("B", _ZERO, 0.0, {"redundant"}, "redundant"),
    # C: Badly Drawn Boy (§6.9): CE 0.1 -> 0.5, Δcal -0.4, Δcorr 0, D 0.08 -> conf.-distorting.
    ("C", {**_ZERO, "delta_cal": -0.4}, 0.08, {"confidence_distorting"}, "confidence_distorting"),
    # D: grounding lost (Δgrnd 0.5 > 0), D 0.6 >= tau, |Δcal| 0.3 > eps with Δcorr 0 ->
    #    constructive, distractive and confidence-distorting at once.
    (
        "D",
        {**_ZERO, "delta_grnd": 0.5, "delta_cal": 0.3},
        0.6,
        {"constructive", "distractive", "confidence_distorting"},
        "constructive",
    ),
    # E: grounding improved (Δgrnd -0.5), D 0.3: no rule holds (|Δgrnd| > eps, D < tau).
    ("E", {**_ZERO, "delta_grnd": -0.5}, 0.3, set(), "unassigned"),
    # F: Δgrnd 0.03 > 0 -> constructive; every |Δ| <= 0.05 and D 0.02 <= 0.05 -> redundant.
    ("F", {**_ZERO, "delta_grnd": 0.03}, 0.02, {"constructive", "redundant"}, "constructive"),
    # G: only F1 drops (0.2) with D 0.6: F1 is no role axis (eq. 7) -> nothing.
    ("G", {**_ZERO, "delta_f1": 0.2}, 0.6, set(), "unassigned"),
    # H: CE worsens by 0.03 (<= eps) with D 0.5: no correctness/grounding harm -> nothing.
    ("H", {**_ZERO, "delta_cal": -0.03}, 0.5, set(), "unassigned"),
    # I: no gold evidence (Δgrnd NaN, left out), the rest 0, D 0 -> redundant.
    ("I", {**_ZERO, "delta_grnd": math.nan}, 0.0, {"redundant"}, "redundant"),
    # J: correctness lost (Δcorr 1) but D 0.3 < tau -> constructive, not distractive.
    ("J", {**_ZERO, "delta_corr": 1.0}, 0.3, {"constructive"}, "constructive"),
    # K: the manga case (§6.9): wrong both times, confidence 0.5 -> 0.9 (Δcal -0.4), D 0.88
    #    >= tau but nothing worsens on correctness/grounding -> confidence-distorting only.
    ("K", {**_ZERO, "delta_cal": -0.4}, 0.88, {"confidence_distorting"}, "confidence_distorting"),
]


@pytest.mark.parametrize(("name", "deltas", "d", "flags", "primary"), _ITEMS)
def test_role_flags_hand_checked(name, deltas, d, flags, primary):
    assert role_flags(deltas, d) == {**_NONE, **dict.fromkeys(flags, True)}, name
    assert evidence_role(deltas, d) == primary == primary_role(role_flags(deltas, d))


def test_role_flag_counts_of_the_hand_built_items():
    got = [role_flags(deltas, d) for _, deltas, d, _, _ in _ITEMS]
    counts = {f: sum(g[f] for g in got) for f in ROLE_FLAGS}
    # constructive A D F J; redundant B F I; distractive A D; conf.-distorting C D K
    assert counts == {
        "constructive": 4,
        "redundant": 3,
        "distractive": 2,
        "confidence_distorting": 3,
    }
    assert sum(sum(g.values()) >= 2 for g in got) == 3  # A, D, F
    assert sum(not any(g.values()) for g in got) == 3  # E, G, H
    # the paper's distractive needs Δcorr > 0 or Δgrnd > 0: always constructive as well
    assert all(g["constructive"] for g in got if g["distractive"])


def test_role_thresholds_and_precedence():
    deltas = {**_ZERO, "delta_corr": 1.0}
    assert role_flags(deltas, 0.8)["distractive"] is True
    assert role_flags(deltas, 0.8, tau=0.9)["distractive"] is False
    # eps decides "negligible": Δcal 0.1 is redundant with eps 0.1, confidence-distorting
    # with 0.05.
    assert role_flags({**_ZERO, "delta_cal": 0.1}, 0.1, eps=0.1)["redundant"] is True
    assert evidence_role({**_ZERO, "delta_cal": 0.1}, 0.1) == "confidence_distorting"
    # Constructive before distractive, as the paper's Table 10 labels its exemplars
    # (tests/test_cuer_table10.py).
    assert PRIMARY_ROLE_ORDER == (
        "constructive",
        "distractive",
        "confidence_distorting",
        "redundant",
    )
    assert primary_role({}) == "unassigned" and ROLES[-1] == "unassigned"


# ------------------------------------------------------------------ pairing and aggregates


def _row(
    iid,
    cond,
    variant,
    *,
    corr,
    f1,
    grnd,
    ce,
    answer="a",
    cited=("p1",),
    conf=0.9,
    error=None,
    meta=None,
    at="entity",
    rt="single_hop",
):
    return {
        "run": "r",
        "instance_id": iid,
        "condition": cond,
        "variant": variant,
        "answer": answer,
        "cited_ids": list(cited),
        "confidence": conf,
        "error": error,
        "meta": meta,
        "soft_correct": corr,
        "f1_relaxed": f1,
        "title_grounding": grnd,
        "confidence_error": ce,
        "answer_type": at,
        "reasoning_type": rt,
    }


def _frame():
    rows = [
        _row("a", "retrieved", "", corr=1, f1=1.0, grnd=1.0, ce=0.1),
        _row(
            "a",
            "intervention",
            "remove|p1",
            corr=0,
            f1=0.0,
            grnd=0.0,
            ce=0.2,
            answer="unknown",
            cited=(),
            conf=0.2,
        ),
        _row("a", "intervention", "duplicate:end|p1", corr=1, f1=1.0, grnd=1.0, ce=0.1),
        _row(
            "a",
            "intervention",
            "zero_retrieval",
            corr=0,
            f1=0.0,
            grnd=0.0,
            ce=0.05,
            answer="unknown",
            cited=(),
            conf=0.05,
        ),
        _row("b", "retrieved", "", corr=1, f1=0.5, grnd=0.5, ce=0.5, conf=0.5, cited=("p1", "p2")),
        _row(
            "b",
            "intervention",
            "remove|p2",
            corr=0,
            f1=0.0,
            grnd=0.0,
            ce=0.0,
            answer="unknown",
            cited=(),
            conf=0.0,
            meta='{"rule": "cited", "target": "p2"}',
        ),
        # a Case-view rerun of the planned call (same key) replaced the planned row: kept
        _row(
            "b",
            "intervention",
            "duplicate:end|p2",
            corr=1,
            f1=0.5,
            grnd=1.0,
            ce=0.5,
            conf=0.5,
            cited=("p2",),
            meta='{"rule": "user", "target": "p2"}',
        ),
        # a failed call: a missing pair (no delta, no role); a Case-view rerun and another
        # base: left out of the pairs
        _row(
            "b",
            "intervention",
            "replace:easy|p2",
            corr=None,
            f1=None,
            grnd=None,
            ce=None,
            error="HTTP 500",
        ),
        _row("b", "intervention", "remove|p1", corr=0, f1=0, grnd=0, ce=0, meta='{"rule": "user"}'),
        _row("b", "intervention", "move:0|p2", corr=0, f1=0, grnd=0, ce=0, meta='{"rule": "user"}'),
        _row("b", "intervention", "remove|p1@oracle", corr=0, f1=0, grnd=0, ce=0),
    ]
    return pd.DataFrame(rows)


def test_intervention_pairs_deltas_divergence_roles():
    pairs = intervention_pairs(_frame())
    assert list(pairs["variant"]) == [
        "remove|p1",
        "duplicate:end|p1",
        "zero_retrieval",
        "remove|p2",
        "duplicate:end|p2",
        "replace:easy|p2",
    ]
    assert list(pairs["missing"]) == [False] * 5 + [True]
    gone = pairs.iloc[5]
    assert math.isnan(gone["delta_corr"]) and math.isnan(gone["trace_divergence"])
    assert math.isnan(gone["evidence_divergence"]) and gone["answer_changed"] is None
    assert pd.isna(gone["primary_role"]) and gone["is_constructive"] is None
    rm = pairs.iloc[0]
    assert (rm["operator"], rm["param"], rm["target"]) == ("remove", "", "p1")
    assert (rm["delta_corr"], rm["delta_f1"], rm["delta_grnd"]) == (1.0, 1.0, 1.0)
    assert rm["delta_cal"] == pytest.approx(-0.1)
    # {p1} vs {}: 0.5; "a" -> "unknown": 0.3; |0.9 - 0.2| * 0.2 = 0.14
    assert rm["trace_divergence"] == pytest.approx(0.94)
    assert rm["evidence_divergence"] == 1.0  # {p1} vs {}: nothing shared
    assert rm["answer_changed"] is True and rm["correctness_changed"] is True
    # Δcorr 1 > 0 and D 0.94 >= 0.5: constructive and distractive at once
    assert (rm["is_constructive"], rm["is_distractive"]) == (True, True)
    assert (rm["is_redundant"], rm["is_confidence_distorting"]) == (False, False)
    assert (rm["flags"], rm["n_flags"], rm["primary_role"]) == (
        "constructive+distractive",
        2,
        "constructive",
    )
    dup_b = pairs.iloc[4]
    # {p1, p2} vs {p2}: 0.5 * 0.5 = 0.25; same answer, same confidence
    assert dup_b["trace_divergence"] == pytest.approx(0.25)
    assert dup_b["evidence_divergence"] == pytest.approx(0.5)  # 1 - 1/2
    assert dup_b["answer_changed"] is False
    assert dup_b["delta_grnd"] == pytest.approx(-0.5)
    assert (dup_b["flags"], dup_b["n_flags"], dup_b["primary_role"]) == (
        "unassigned",
        0,
        "unassigned",
    )
    assert pairs.iloc[1]["flags"] == pairs.iloc[1]["primary_role"] == "redundant"
    assert pd.isna(pairs.iloc[2]["primary_role"])  # zero retrieval describes no item


def test_utility_profile_means():
    frame = _frame()
    prof = utility_profile(frame, n_resamples=200).aggregate
    assert list(zip(prof["operator"], prof["variant"], prof["n"], prof["missing"])) == [
        ("original", "", 2, 0),
        ("remove", "", 2, 0),
        ("replace", "easy", 0, 1),
        ("duplicate", "end", 2, 0),
        ("zero_retrieval", "", 1, 0),
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
        "correctness",
        "answer_f1",
        "grounding",
        "confidence_error",
        "trace_divergence",
    ]


def test_role_counts():
    agg = role_counts(intervention_pairs(_frame())).aggregate
    # remove a: Δcorr 1, D 0.94; remove b: Δcorr 1, Δgrnd 0.5, D 0.5 + 0.3 + 0.2 * 0.5 = 0.9:
    # both constructive + distractive. duplicate a: all 0 -> redundant; duplicate b: Δgrnd
    # -0.5, D 0.25 -> no flag. replace b: the call failed -> missing.
    got = agg.drop(columns="run").to_dict("records")
    zero = {
        "constructive": 0,
        "redundant": 0,
        "distractive": 0,
        "confidence_distorting": 0,
        "unassigned": 0,
        "several_flags": 0,
    }
    assert got == [
        {
            "operator": "remove",
            "variant": "",
            "n": 2,
            "missing": 0,
            **zero,
            "constructive": 2,
            "distractive": 2,
            "several_flags": 2,
        },
        {"operator": "replace", "variant": "easy", "n": 0, "missing": 1, **zero},
        {
            "operator": "duplicate",
            "variant": "end",
            "n": 2,
            "missing": 0,
            **zero,
            "redundant": 1,
            "unassigned": 1,
        },
    ]
    combos = role_combinations(intervention_pairs(_frame())).aggregate
    assert combos.drop(columns="run").to_dict("records") == [
        {
            "operator": "remove",
            "variant": "",
            "flags": "constructive+distractive",
            "n_flags": 2,
            "n": 2,
        },
        {"operator": "duplicate", "variant": "end", "flags": "redundant", "n_flags": 1, "n": 1},
        {"operator": "duplicate", "variant": "end", "flags": "unassigned", "n_flags": 0, "n": 1},
    ]


def _hand_items() -> pd.DataFrame:
    """Six remove interventions whose flags are checked by hand (eps 0.05, tau 0.5)."""
    rows = [
        # i1: correct -> wrong ("a" -> "b"), grounding 1 -> 0, CE 0.1 -> 0.8, {p1} -> {}:
        # D = 0.5 + 0.3 + 0.2 * |0.9 - 0.8| = 0.82; Δcorr 1 -> constructive + distractive
        _row("i1", "retrieved", "", corr=1, f1=1, grnd=1, ce=0.1),
        _row(
            "i1",
            "intervention",
            "remove|p1",
            corr=0,
            f1=0,
            grnd=0,
            ce=0.8,
            answer="b",
            cited=(),
            conf=0.8,
        ),
        # i2: nothing changes ({p1, p2} -> {p2, p1}): D 0 -> redundant
        _row("i2", "retrieved", "", corr=1, f1=1, grnd=1, ce=0.1, cited=("p1", "p2")),
        _row("i2", "intervention", "remove|p3", corr=1, f1=1, grnd=1, ce=0.1, cited=("p2", "p1")),
        # i3: wrong both times ("x" -> "y"), grounding 0.5 both, confidence 0.5 -> 0.9 (CE 0.5
        # -> 0.9, Δcal -0.4), {p1, p2} -> {p2, p3}: D = 0.5 * 2/3 + 0.3 + 0.2 * 0.4 = 0.7133
        # -> confidence-distorting only (D >= tau, but nothing worsens on corr / grnd)
        _row(
            "i3",
            "retrieved",
            "",
            corr=0,
            f1=0,
            grnd=0.5,
            ce=0.5,
            answer="x",
            cited=("p1", "p2"),
            conf=0.5,
        ),
        _row(
            "i3",
            "intervention",
            "remove|p1",
            corr=0,
            f1=0,
            grnd=0.5,
            ce=0.9,
            answer="y",
            cited=("p2", "p3"),
            conf=0.9,
        ),
        # i4: grounding 1 -> 0.5 ({p1} -> {p1, p3}), same answer and confidence: D = 0.5 *
        # 1/2 = 0.25 < tau -> constructive only
        _row("i4", "retrieved", "", corr=1, f1=1, grnd=1, ce=0.1),
        _row("i4", "intervention", "remove|p2", corr=1, f1=1, grnd=0.5, ce=0.1, cited=("p1", "p3")),
        # i5: the call failed -> missing (no flags)
        _row("i5", "retrieved", "", corr=1, f1=1, grnd=1, ce=0.1),
        _row(
            "i5",
            "intervention",
            "remove|p1",
            corr=None,
            f1=None,
            grnd=None,
            ce=None,
            error="HTTP 500",
            answer=None,
            cited=(),
            conf=None,
        ),
        # i6: wrong both times, the answer changes ("x" -> "y"): D 0.3, every Δ 0 -> no flag
        _row("i6", "retrieved", "", corr=0, f1=0, grnd=0, ce=0.2, answer="x", cited=(), conf=0.2),
        _row(
            "i6",
            "intervention",
            "remove|p1",
            corr=0,
            f1=0,
            grnd=0,
            ce=0.2,
            answer="y",
            cited=(),
            conf=0.2,
        ),
    ]
    return pd.DataFrame(rows)


def test_hand_built_items_flags_and_counts():
    pairs = intervention_pairs(_hand_items()).set_index("instance_id")
    assert pairs["trace_divergence"].round(4).to_dict() == pytest.approx(
        {"i1": 0.82, "i2": 0.0, "i3": 0.7133, "i4": 0.25, "i5": math.nan, "i6": 0.3},
        nan_ok=True,
    )
    assert pairs["evidence_divergence"].to_dict() == pytest.approx(
        {"i1": 1.0, "i2": 0.0, "i3": 2 / 3, "i4": 0.5, "i5": math.nan, "i6": 0.0}, nan_ok=True
    )
    assert pd.isna(pairs.loc["i5", "flags"]) and pd.isna(pairs.loc["i5", "primary_role"])
    answered = pairs.drop(index="i5")
    assert answered["flags"].to_dict() == {
        "i1": "constructive+distractive",
        "i2": "redundant",
        "i3": "confidence_distorting",
        "i4": "constructive",
        "i6": "unassigned",
    }
    assert answered["primary_role"].to_dict() == {
        "i1": "constructive",
        "i2": "redundant",
        "i3": "confidence_distorting",
        "i4": "constructive",
        "i6": "unassigned",
    }
    agg = role_counts(intervention_pairs(_hand_items())).aggregate.iloc[0].to_dict()
    assert agg == {
        "run": "r",
        "operator": "remove",
        "variant": "",
        "n": 5,
        "missing": 1,
        "constructive": 2,
        "redundant": 1,
        "distractive": 1,
        "confidence_distorting": 1,
        "unassigned": 1,
        "several_flags": 1,
    }
    # a lower tau makes i4 (D 0.25) distractive too; the counts follow
    low = role_counts(intervention_pairs(_hand_items(), tau=0.25)).aggregate.iloc[0]
    assert (low["distractive"], low["several_flags"]) == (2, 2)


# ------------------------------------------------------------------ correctness axis


def _axis_frame() -> pd.DataFrame:
    """Gold "Barack Obama": base "Obama Barack" (soft 1 via F1 1, strict EM 0), confidence
    0.9; duplicate "Barack Obama" (soft 1, EM 1), confidence 0.6."""
    gold = ["Barack Obama"]
    base = score_answer("Obama Barack", gold, "entity")
    dup = score_answer("Barack Obama", gold, "entity")
    assert (base["soft_correct"], base["em_strict"]) == (1.0, 0.0)
    assert (dup["soft_correct"], dup["em_strict"]) == (1.0, 1.0)
    rows = [
        {
            **_row(
                "o",
                "retrieved",
                "",
                corr=1.0,
                f1=1.0,
                grnd=1.0,
                ce=0.1,
                answer="Obama Barack",
                conf=0.9,
            ),
            "em_strict": base["em_strict"],
        },
        {
            **_row(
                "o",
                "intervention",
                "duplicate:end|p1",
                corr=1.0,
                f1=1.0,
                grnd=1.0,
                ce=0.4,
                answer="Barack Obama",
                conf=0.6,
            ),
            "em_strict": dup["em_strict"],
        },
    ]
    return pd.DataFrame(rows)


def test_strict_em_correctness_axis():
    frame = _axis_frame()
    soft = intervention_pairs(frame).iloc[0]
    strict = intervention_pairs(frame, correctness="strict").iloc[0]
    # soft: correct both times, CE 0.1 -> 0.4 (the stored |c - soft|)
    assert (soft["correctness_orig"], soft["correctness"]) == (1.0, 1.0)
    assert soft["delta_corr"] == 0.0 and soft["delta_cal"] == pytest.approx(-0.3)
    # strict: wrong -> right, CE |0.9 - 0| = 0.9 -> |0.6 - 1| = 0.4
    assert (strict["correctness_orig"], strict["correctness"]) == (0.0, 1.0)
    assert strict["confidence_error_orig"] == pytest.approx(0.9)
    assert strict["confidence_error"] == pytest.approx(0.4)
    assert strict["delta_corr"] == -1.0 and strict["delta_cal"] == pytest.approx(0.5)
    # D does not depend on the axis: "obama barack" != "barack obama" (0.3) + 0.2 * 0.3
    assert soft["trace_divergence"] == strict["trace_divergence"] == pytest.approx(0.36)
    # soft: |Δcal| 0.3 > eps with Δcorr 0 -> confidence-distorting; strict: |Δcorr| 1 -> no
    # flag at all (the perturbed run got better)
    assert soft["flags"] == "confidence_distorting" and strict["flags"] == "unassigned"
    assert (soft["correctness_changed"], strict["correctness_changed"]) == (False, True)
    prof_s = utility_profile(frame, correctness="strict", n_resamples=50).aggregate
    orig, dup = prof_s.iloc[0], prof_s.iloc[1]
    assert (orig["correctness_axis"], orig["correctness"], orig["confidence_error"]) == (
        "strict",
        0.0,
        pytest.approx(0.9),
    )
    assert (dup["correctness"], dup["pct_correctness_changed"]) == (1.0, 100.0)
    prof = utility_profile(frame, n_resamples=50).aggregate
    assert prof.iloc[0]["correctness"] == 1.0 and prof.iloc[1]["pct_correctness_changed"] == 0
    with pytest.raises(ValueError, match="unknown correctness axis 'fuzzy'"):
        intervention_pairs(frame, correctness="fuzzy")
    with pytest.raises(ValueError, match="needs the score column 'em_strict'"):
        intervention_pairs(frame.drop(columns="em_strict"), correctness="strict")
    with pytest.raises(ValueError, match="pairs use correctness axis 'soft'"):
        utility_profile(frame, intervention_pairs(frame), correctness="strict")


# ------------------------------------------------------------------ sweeps


def _positions_frame() -> pd.DataFrame:
    """Four instances duplicated front / after / end (gold-correct base answers "a")."""
    rows = []
    for iid in ("i1", "i2", "i3", "i4"):
        cited = ("p1", "p2") if iid == "i2" else ("p1",)
        rows.append(
            _row(
                iid,
                "retrieved",
                "",
                corr=1 if iid != "i4" else 0,
                f1=1,
                grnd=1,
                ce=0.1,
                cited=cited,
            )
        )
    dup = [
        # front: i1 answer "b" (wrong now) and cites {p1, p2}; i4 answer "c" (wrong before
        # and after); i2, i3 unchanged -> answers changed 2/4, correctness flipped 1/4,
        # evidence divergence (1/2 + 0 + 0 + 0) / 4 = 0.125
        ("front", "i1", dict(corr=0, answer="b", cited=("p1", "p2"))),
        ("front", "i2", dict(corr=1, cited=("p1", "p2"))),
        ("front", "i3", dict(corr=1)),
        ("front", "i4", dict(corr=0, answer="c")),
        # after: i1 answer "The a." (relaxed-equal to "a": not changed); i2 cites {p2, p3}
        # (divergence 2/3), i3 answer "d" still counted correct (an alias) -> changed 1/4,
        # flipped 0/4, evidence divergence (2/3) / 4 = 1/6
        ("after", "i1", dict(corr=1, answer="The a.")),
        ("after", "i2", dict(corr=1, cited=("p2", "p3"))),
        ("after", "i3", dict(corr=1, answer="d")),
        ("after", "i4", dict(corr=0)),
        # end: nothing changes; i4's call failed -> n 3, missing 1, 0 %
        ("end", "i1", dict(corr=1)),
        ("end", "i2", dict(corr=1, cited=("p1", "p2"))),
        ("end", "i3", dict(corr=1)),
        ("end", "i4", dict(corr=None, error="timeout", answer=None, cited=())),
    ]
    for pos, iid, kw in dup:
        kw = {"f1": 1, "grnd": 1, "ce": 0.1, **kw}
        rows.append(_row(iid, "intervention", f"duplicate:{pos}|p1", **kw))
    return pd.DataFrame(rows)


def test_duplicate_position_sweep_changed_answers_and_evidence_divergence():
    frame = _positions_frame()
    pairs = intervention_pairs(frame)
    result = {"profile": utility_profile(frame, pairs, n_resamples=50)}
    table = duplicate_positions_table(result)
    assert list(zip(table["operator"], table["variant"])) == [
        ("original", ""),
        ("duplicate", "front"),
        ("duplicate", "after"),
        ("duplicate", "end"),
    ]
    assert list(table["n"]) == [4, 4, 4, 3] and list(table["missing"]) == [0, 0, 0, 1]
    assert list(table["answers_changed"]) == [0, 2, 1, 0]
    assert list(table["pct_answer_changed"]) == [0.0, 50.0, 25.0, 0.0]
    assert list(table["correctness_changed"]) == [0, 1, 0, 0]
    assert list(table["pct_correctness_changed"]) == [0.0, 25.0, 0.0, 0.0]
    assert list(table["evidence_divergence"]) == pytest.approx([0.0, 0.125, 1 / 6, 0.0])
    # front: correctness (0 + 1 + 1 + 0) / 4; the original (1 + 1 + 1 + 0) / 4
    assert list(table["correctness"]) == pytest.approx([0.75, 0.5, 0.75, 1.0])
    assert set(table["correctness_axis"]) == {"soft"}
    # no replace interventions: the hardness table is empty (its figure says why)
    assert hardness_table(result).empty


def test_role_table_figure_and_examples_show_overlapping_flags():
    pairs = intervention_pairs(_hand_items()).assign(dataset="d")
    result = {"roles": role_counts(pairs)}
    fig, data = roles_figure(result)
    assert fig.layout.barmode == "group"  # not stacked: the flags overlap
    bars = {t.name: list(t.y) for t in fig.data}
    assert bars == {
        "constructive": [2],
        "redundant": [1],
        "distractive": [1],
        "confidence_distorting": [1],
        "unassigned": [1],
        "several flags": [1],
    }
    assert "of 5 (missing: 1)" in fig.data[0].text[0]
    assert role_table(result).iloc[0]["several_flags"] == 1
    ex = role_examples(result).set_index("instance_id")
    assert ex.loc[
        "i1", ["flags", "is_constructive", "is_distractive", "primary_role"]
    ].tolist() == ["constructive+distractive", True, True, "constructive"]


def test_every_column_of_the_cuer_tables_has_a_tooltip_with_a_section():
    frame = _frame()
    pairs = intervention_pairs(frame).assign(dataset="d")
    result = {"profile": utility_profile(frame, pairs, n_resamples=20), "roles": role_counts(pairs)}
    shown = {
        *result["profile"].aggregate.columns,
        *role_table(result).columns,
        *role_examples(result).columns,
        *duplicate_positions_table(result).columns,
        *paired_deltas(pairs, n_resamples=20).aggregate.columns,
        "stars",
        *synergy(pairs).aggregate.columns,
    }
    keys = {
        "run",
        "dataset",
        "instance_id",
        "operator",
        "variant",
        "metric",
        "target",
        "rule",
        "answer_orig",
        "answer",
        "effect",
    }
    numbers = shown - keys
    assert not numbers - set(COLUMN_HELP), sorted(numbers - set(COLUMN_HELP))
    for col in numbers:
        assert any(k in COLUMN_HELP[col] for k in ("§", "App.", "Table")), col
    assert "1 - |E ∩ E'| / |E ∪ E'|" in COLUMN_HELP["evidence_divergence"]


def _two(iid, orig, one, two, both):
    return [
        _row(iid, "retrieved", "", corr=1, f1=orig, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:1|p1", corr=1, f1=one, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:2|p2", corr=1, f1=two, grnd=1, ce=0),
        _row(iid, "intervention", "two_support:both|p1+p2", corr=1, f1=both, grnd=1, ce=0),
    ]


def test_synergy_arithmetic():
    rows = (
        _two("a", 1.0, 1.0, 1.0, 0.0)  # drops 0, 0, 1: synergy 1, strong complementary
        + _two("b", 1.0, 0.5, 0.0, 0.0)  # drops 0.5, 1, 1: synergy 0
        + _two("c", 0.5, 0.5, 0.25, 0.0)  # drops 0, 0.25, 0.5: synergy 0.25, positive
        + _two("d", 1.0, 1.0, 1.0, 0.0)[:3]  # no joint removal: not eligible
    )
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


def test_cis_do_not_depend_on_the_row_order():
    """The bootstrap units are taken in instance-id order (issue 17 item 7)."""
    frame = _frame()
    shuffled = frame.iloc[::-1].reset_index(drop=True)
    a = utility_profile(frame, n_resamples=300).aggregate
    b = utility_profile(shuffled, n_resamples=300).aggregate
    pd.testing.assert_frame_equal(a, b)
    da = paired_deltas(intervention_pairs(frame), n_resamples=300).aggregate
    db = paired_deltas(intervention_pairs(shuffled), n_resamples=300).aggregate
    pd.testing.assert_frame_equal(da, db)
