"""Fan-in degradation (AuthTrace, seed 003; SPEC §9): hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import pearsonr

from core.fanin.metrics import (
    correlation_note,
    crossover,
    evidence_pack,
    evidence_precision,
    evidence_recall,
    fan_in,
    fan_in_bucket,
    fanin_analysis,
    jaccard,
    pearson,
    relative_degradation,
)


def test_fan_in_counts_distinct_documents_and_buckets():
    assert fan_in(["d1", "d1", "d2"]) == 2
    assert [fan_in_bucket(f) for f in (1, 2, 3, 4, 5, 9)] == [
        "single",
        "low",
        "low",
        "high",
        "high",
        "high",
    ]
    assert fan_in_bucket(0) is None
    with pytest.raises(ValueError, match="non-negative"):
        fan_in_bucket(-1)


def test_er_ep_count_duplicate_ids_once():
    pack = ["p1", "p1", "p2", "p3"]  # p1 twice (two chunks of one passage)
    assert evidence_recall(pack, ["p1", "p4"]) == 0.5
    assert evidence_precision(pack, ["p1", "p4"]) == pytest.approx(1 / 3)  # {p1,p2,p3}
    assert evidence_precision(["p1", "p1"], ["p1"]) == 1.0
    assert evidence_recall([], ["p1"]) == 0.0
    assert evidence_precision([], ["p1"]) == 0.0
    assert math.isnan(evidence_recall(["p1"], []))


def test_evidence_pack_per_condition():
    assert evidence_pack("retrieved", ["p1", "p2"], ["p2"]) == ["p1", "p2"]
    assert evidence_pack("oracle", ["p1"], []) == ["p1"]
    assert evidence_pack("full_context", ["p1", "p2", "p3"], ["p3"]) == ["p3"]
    assert evidence_pack("no_evidence", [], []) is None
    with pytest.raises(ValueError, match="intervention"):
        evidence_pack("intervention", [], [])


def test_pearson_on_a_known_set():
    x, y = [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]
    # sum dx dy = 6, sum dx^2 = 10, sum dy^2 = 6: r = 6 / sqrt(60); slope 0.6, intercept 2.2.
    got = pearson(x, y, n_resamples=2000)
    assert got["r"] == pytest.approx(6 / math.sqrt(60))
    assert got["r"] == pytest.approx(pearsonr(x, y).statistic)
    assert got["slope"] == pytest.approx(0.6) and got["intercept"] == pytest.approx(2.2)
    assert got["n"] == 5
    assert -1.0 <= got["ci_low"] <= got["r"] <= got["ci_high"] <= 1.0
    line = pearson([1, 2, 3, 4], [3, 5, 7, 9], n_resamples=500)
    assert line["r"] == pytest.approx(1.0) and line["ci_low"] == pytest.approx(1.0)
    assert math.isnan(pearson([1, 2], [3, 4])["r"])  # n < 3
    assert math.isnan(pearson([1, 1, 1], [3, 4, 5])["r"])  # constant side


def test_relative_degradation_arithmetic_matches_seed_table_8():
    assert relative_degradation(80.0, 60.0) == -0.25
    assert math.isnan(relative_degradation(0.0, 10.0))
    # Seed 003 Table 8: oracle 81.6 -> 69.8 is -14.5%; HippoRAG2 78.6 -> 44.1 is -43.9% and
    # its oracle-normalized construction loss -29.4pp.
    oracle = relative_degradation(81.6, 69.8)
    hippo = relative_degradation(78.6, 44.1)
    assert round(100 * oracle, 1) == -14.5
    assert round(100 * hippo, 1) == -43.9
    assert round(100 * (hippo - oracle), 1) == -29.4


def test_jaccard_and_crossover():
    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert jaccard(set(), {1}) == 0.0
    assert math.isnan(jaccard(set(), set()))
    # Seed 003 Table 5: HippoRAG2 leads at f=1, LLM-Wiki from f=2 on.
    hippo = {1: 78.6, 2: 58.9, 3: 47.2, 4: 43.8, 5: 43.5}
    wiki = {1: 73.0, 2: 60.9, 3: 55.6, 4: 52.4, 5: 48.1}
    got = crossover(hippo, wiki)
    assert got["leader_first"] == "a" and got["crossover_fan_in"] == 2
    assert got["crossovers"] == [2]
    assert got["gaps"][1] == pytest.approx(5.6)
    ever = {1: 53.9, 2: 56.0, 3: 47.7, 4: 47.7, 5: 40.6}
    assert crossover(hippo, ever)["crossovers"] == [3, 5]
    # Ties have no leader and are skipped.
    assert crossover({1: 5.0, 2: 5.0, 3: 1.0}, {1: 4.0, 2: 5.0, 3: 2.0})["crossover_fan_in"] == 3
    assert crossover({1: 5.0}, {1: 4.0})["crossover_fan_in"] is None


def _frame() -> pd.DataFrame:
    gold = {
        "i1": ["p1"],
        "i2": ["p1"],
        "i3": ["p1", "p2", "p3", "p4"],
        "i4": ["p1", "p2"],
        "i5": [],
    }
    fan = {"i1": 1, "i2": 1, "i3": 4, "i4": 2, "i5": 0}
    rows = []

    def add(cond, iid, shown, cited, f1):
        rows.append(
            {
                "run": "r",
                "model": "m",
                "dataset": "d",
                "instance_id": iid,
                "condition": cond,
                "input_passage_ids": shown,
                "cited_ids": cited,
                "gold_ids": gold[iid],
                "fan_in": fan[iid],
                "f1_relaxed": f1,
            }
        )

    for iid, f1 in (("i1", 1.0), ("i2", 0.6), ("i3", 0.6), ("i4", 0.8)):
        add("oracle", iid, gold[iid], gold[iid], f1)
    add("retrieved", "i1", ["p1", "p9"], ["p1"], 1.0)
    add("retrieved", "i2", ["p1", "p1", "p9"], ["p1"], 0.6)
    add("retrieved", "i3", ["p1", "p9", "p8"], [], 0.2)
    add("retrieved", "i4", ["p1", "p2"], [], 0.1)
    add("retrieved", "i5", ["p3"], [], 0.0)  # no gold evidence: left out, counted
    add("full_context", "i1", ["p1", "p9"], ["p1", "p1"], 0.0)
    add("full_context", "i2", ["p1", "p9"], [], 0.3)
    add("full_context", "i3", ["p1", "p2", "p3", "p4"], ["p1", "p2"], 0.2)
    add("full_context", "i4", ["p1", "p2"], ["p3"], 0.5)
    add("no_evidence", "i1", [], [], 0.0)
    return pd.DataFrame(rows)


def test_fanin_analysis_hand_computed():
    res = fanin_analysis(_frame(), n_resamples=500)
    assert res.n_no_gold == 1
    b = res.by_bucket.set_index(["condition", "bucket"])
    # retrieved, single: AC (100 + 60) / 2 = 80; ER 1, 1; EP 1/2 and {p1, p9} -> 1/2.
    assert b.loc[("retrieved", "single"), "n"] == 2
    assert b.loc[("retrieved", "single"), "ac"] == pytest.approx(80.0)
    assert b.loc[("retrieved", "single"), "er"] == 1.0
    assert b.loc[("retrieved", "single"), "ep"] == 0.5
    assert b.loc[("retrieved", "high"), "er"] == 0.25
    assert b.loc[("retrieved", "high"), "ep"] == pytest.approx(1 / 3)
    assert b.loc[("retrieved", "all"), "n"] == 4
    # full context: the pack is what was cited.
    assert b.loc[("full_context", "single"), "er"] == 0.5  # i1 cited p1, i2 nothing
    assert b.loc[("full_context", "high"), "ep"] == 1.0
    assert math.isnan(b.loc[("no_evidence", "single"), "er"])
    assert b.loc[("no_evidence", "single"), "ac"] == 0.0
    # Degradation: oracle 80 -> 60 is -25%; retrieved 80 -> 20 is -75%: loss -50pp.
    d = res.degradation.set_index("condition")
    assert d.loc["oracle", "rel_degradation"] == pytest.approx(-0.25)
    assert d.loc["retrieved", "rel_degradation"] == pytest.approx(-0.75)
    assert d.loc["retrieved", "oracle_rel_degradation"] == pytest.approx(-0.25)
    assert d.loc["retrieved", "construction_loss_pp"] == pytest.approx(-50.0)
    assert math.isnan(d.loc["oracle", "construction_loss_pp"])
    assert d.loc["retrieved", "rel_ci_low"] <= -0.75 <= d.loc["retrieved", "rel_ci_high"]
    # Failure attribution: retrieved failures i3 (AC 20, ER .25) and i4 (AC 10, ER 1).
    a = res.attribution.set_index("condition")
    assert a.loc["retrieved", "n_failures"] == 2 and a.loc["retrieved", "n_low_er"] == 1
    assert a.loc["retrieved", "share"] == 0.5
    assert a.loc["oracle", "n_failures"] == 0 and math.isnan(a.loc["oracle", "share"])
    # No-evidence fails too (i1, AC 0) but has no pack to attribute the failure to.
    assert a.loc["no_evidence", "n_failures"] == 1 and math.isnan(a.loc["no_evidence", "share"])
    # Failure sets: retrieved {i3, i4}, full context {i1, i2, i3}: Jaccard 1/4.
    o = res.overlap.set_index(["system_a", "system_b"])
    pair = o.loc[("r:retrieved", "r:full_context")]
    assert pair["jaccard"] == 0.25 and pair["n_common"] == 4
    assert o.loc[("r:oracle", "r:retrieved"), "jaccard"] == 0.0
    # Pearson points by default (seed 003 Fig. 3): the retrieved system x buckets single, low,
    # high; with the oracle and full context over exact fan-in: 3 systems x fan-in {1, 2, 4}.
    assert res.correlation["er_ac"]["n"] == 3
    every = fanin_analysis(
        _frame(), points="fan_in", include_oracle=True, include_full_context=True, n_resamples=100
    )
    assert every.correlation["er_ac"]["n"] == 9
    # Exact fan-in curves: oracle {1: 80, 2: 80, 4: 60}, retrieved {1: 80, 2: 10, 4: 20}.
    f = res.by_fan_in.set_index(["condition", "fan_in"])
    assert f.loc[("retrieved", 2), "ac"] == pytest.approx(10.0)
    assert o.loc[("r:oracle", "r:retrieved"), "leader_first"] == "a"
    assert o.loc[("r:oracle", "r:retrieved"), "crossover_fan_in"] is None


def test_fanin_analysis_rejects_bad_field():
    with pytest.raises(ValueError, match="f1_relaxed"):
        fanin_analysis(_frame(), "accuracy")
    with pytest.raises(ValueError, match="points"):
        fanin_analysis(_frame(), points="x")


# ------------------------------------------------------------------ Pearson r as reported


def test_pearson_reproduces_seed_003_figure_3_from_table_4():
    """Figure 3's r from Table 4's 15 (system, bucket) rows: the five evidence-selection systems
    (Flat RAG, HippoRAG2, Mem0, EverMemOS, LLM-Wiki) x single / low / high; no oracle, no
    long-context, no closed-book (Table 4 gives them no ER / EP)."""
    ac = [72.8, 78.6, 65.0, 53.9, 73.0, 43.0, 58.9, 35.8, 56.0, 60.9, 32.7, 44.1, 28.5, 45.0, 52.1]
    er = [91.0, 95.1, 83.5, 81.8, 95.1, 54.9, 83.0, 41.4, 74.1, 82.0, 31.9, 65.4, 25.7, 54.5, 67.8]
    ep = [10.7, 1.2, 19.8, 2.6, 15.9, 15.9, 3.2, 21.1, 8.9, 16.5, 15.9, 4.7, 20.2, 10.6, 12.5]
    er_ac = pearson(er, ac, n_resamples=2000)
    ep_ac = pearson(ep, ac, n_resamples=2000)
    assert er_ac["r"] == pytest.approx(pearsonr(er, ac).statistic)
    assert ep_ac["r"] == pytest.approx(pearsonr(ep, ac).statistic)
    assert round(er_ac["r"], 2) == 0.96  # the published r = 0.96
    assert round(ep_ac["r"], 3) == -0.396  # published "-0.39" (truncated)
    assert er_ac["n"] == 15
    # App. G: bootstrap 95% CI [0.92, 0.99] for ER-AC; the EP-AC CI includes zero.
    assert 0.9 < er_ac["ci_low"] < 0.96 < er_ac["ci_high"] <= 1.0
    assert ep_ac["ci_low"] < 0 < ep_ac["ci_high"]


def _r_frame() -> pd.DataFrame:
    """Two retrieved systems, an oracle, full context and no-evidence on four instances.

    Buckets: i1 single (fan-in 1), i2 and i2b low (fan-in 2 and 3), i3 high (fan-in 4).
    """
    gold = {
        "i1": ["p1"],
        "i2": ["p1", "p2"],
        "i2b": ["p1", "p2", "p3"],
        "i3": ["p1", "p2", "p3", "p4"],
    }
    fan = {"i1": 1, "i2": 2, "i2b": 3, "i3": 4}
    rows = []

    def add(run, cond, iid, shown, cited, f1):
        rows.append(
            {
                "run": run,
                "model": "m",
                "dataset": "d",
                "instance_id": iid,
                "condition": cond,
                "input_passage_ids": shown,
                "cited_ids": cited,
                "gold_ids": gold[iid],
                "fan_in": fan[iid],
                "f1_relaxed": f1,
            }
        )

    # r1 retrieved: (ER, EP, AC) i1 (1, 1, 80); i2 (1, 1, 70), i2b (0, 0, 30); i3 (0, 0, 20)
    for iid, shown, f1 in (
        ("i1", ["p1"], 0.8),
        ("i2", ["p1", "p2"], 0.7),
        ("i2b", ["p9"], 0.3),
        ("i3", ["p9"], 0.2),
    ):
        add("r1", "retrieved", iid, shown, [], f1)
    # r2 retrieved: i1 (1, 1/2, 60); i2 (1, 1, 60), i2b (0, 0, 40); i3 (0, 0, 40)
    for iid, shown, f1 in (
        ("i1", ["p1", "p9"], 0.6),
        ("i2", ["p1", "p2"], 0.6),
        ("i2b", ["p9"], 0.4),
        ("i3", ["p9"], 0.4),
    ):
        add("r2", "retrieved", iid, shown, [], f1)
    # r1 oracle: the pack is the gold evidence (ER = EP = 1); AC 100, 70, 70, 70
    for iid, f1 in (("i1", 1.0), ("i2", 0.7), ("i2b", 0.7), ("i3", 0.7)):
        add("r1", "oracle", iid, gold[iid], gold[iid], f1)
    # r1 full context: the pack is what was cited; AC 10 everywhere
    for iid, cited in (("i1", []), ("i2", ["p1"]), ("i2b", ["p1"]), ("i3", ["p1", "p2"])):
        add("r1", "full_context", iid, gold[iid] + ["p9"], cited, 0.1)
    for iid in gold:
        add("r1", "no_evidence", iid, [], [], 0.0)
    return pd.DataFrame(rows)


def test_r_over_system_bucket_points_hand_computed():
    res = fanin_analysis(_r_frame(), n_resamples=2000)
    corr = res.correlation
    # Bucket means (ER, EP, AC): r1 single (1, 1, 80), low (1/2, 1/2, 50), high (0, 0, 20);
    # r2 single (1, 1/2, 60), low (1/2, 1/2, 50), high (0, 0, 40). Low averages fan-in 2 and 3.
    pts = pd.DataFrame(corr["points"]).set_index(["system", "bucket"])
    assert corr["points_level"] == "bucket" and len(pts) == 6
    assert pts.loc[("r1:retrieved", "low"), ["er", "ep", "ac"]].tolist() == [0.5, 0.5, 50.0]
    assert pts.loc[("r1:retrieved", "low"), "n"] == 2
    assert pts.loc[("r2:retrieved", "single"), ["er", "ep", "ac"]].tolist() == [1.0, 0.5, 60.0]
    # ER-AC: dx = +-1/2, 0; dy = 30, 0, -30, 10, 0, -10: Sxy = 40, Sxx = 1, Syy = 2000,
    # r = 40 / sqrt(2000) = 2 / sqrt(5).
    assert corr["er_ac"]["r"] == pytest.approx(2 / math.sqrt(5))
    assert corr["er_ac"]["r"] == pytest.approx(0.8944272, abs=1e-7)
    # EP-AC: mean EP 5/12; Sxy = 420/12 = 35, Sxx = 102/144, Syy = 2000.
    assert corr["ep_ac"]["r"] == pytest.approx(35 / math.sqrt(102 / 144 * 2000))
    # Reference: scipy over the listed points.
    assert corr["er_ac"]["r"] == pytest.approx(pearsonr(pts["er"], pts["ac"]).statistic)
    assert corr["ep_ac"]["r"] == pytest.approx(pearsonr(pts["ep"], pts["ac"]).statistic)
    # Least-squares line: slope Sxy / Sxx = 40 AC per unit ER, intercept 50 - 40 x 1/2 = 30.
    assert corr["er_ac"]["slope"] == pytest.approx(40.0)
    assert corr["er_ac"]["intercept"] == pytest.approx(30.0)
    # What was used and what was left out, stated.
    assert corr["systems"] == ["r1:retrieved", "r2:retrieved"]
    assert corr["levels"] == ["single", "low", "high"]
    assert corr["excluded"] == {"oracle": 3, "full_context": 3, "no_evidence": 3}
    note = correlation_note(corr)
    assert note.startswith(
        "Pearson r over 6 (system, bucket) points: 2 systems "
        "(r1:retrieved, r2:retrieved) x buckets single, low, high"
    )
    assert "left out: oracle (3 points: its pack is the gold evidence: ER = EP = 1" in note
    assert "full_context (3 points: cited passages" in note


def test_r_includes_the_oracle_and_full_context_only_on_request():
    frame = _r_frame()
    res = fanin_analysis(frame, include_oracle=True, n_resamples=500)
    corr = res.correlation
    # + oracle (1, 100), (1, 70), (1, 70): 9 points, mean ER 2/3, mean AC 60;
    # Sxy = 70, Sxx = 3/2, Syy = 4400: r = 70 / sqrt(6600).
    assert corr["er_ac"]["n"] == 9
    assert corr["er_ac"]["r"] == pytest.approx(70 / math.sqrt(6600))
    assert corr["er_ac"]["r"] == pytest.approx(0.8616404, abs=1e-7)
    pts = pd.DataFrame(corr["points"])
    assert corr["er_ac"]["r"] == pytest.approx(pearsonr(pts["er"], pts["ac"]).statistic)
    assert set(pts.loc[pts["condition"] == "oracle", "er"]) == {1.0}
    assert "oracle" not in corr["excluded"]
    assert "included on request: oracle" in correlation_note(corr)
    # The default leaves it out: r = 2 / sqrt(5) (above).
    assert fanin_analysis(frame, n_resamples=100).correlation["er_ac"]["r"] == pytest.approx(
        2 / math.sqrt(5)
    )
    # + full context (cited packs): ER single 0, low (1/2 + 1/3) / 2 = 5/12, high 1/2; AC 10.
    full = fanin_analysis(frame, include_full_context=True, n_resamples=100).correlation
    fpts = pd.DataFrame(full["points"])
    assert full["er_ac"]["n"] == 9 and full["excluded"] == {"oracle": 3, "no_evidence": 3}
    low = fpts[(fpts["condition"] == "full_context") & (fpts["bucket"] == "low")].iloc[0]
    assert low["er"] == pytest.approx(5 / 12) and low["ac"] == pytest.approx(10.0)
    assert full["er_ac"]["r"] == pytest.approx(pearsonr(fpts["er"], fpts["ac"]).statistic)
    both = fanin_analysis(
        frame, include_oracle=True, include_full_context=True, n_resamples=100
    ).correlation
    assert both["er_ac"]["n"] == 12 and both["excluded"] == {"no_evidence": 3}


def test_r_over_exact_fan_in_is_a_named_option():
    corr = fanin_analysis(_r_frame(), points="fan_in", n_resamples=100).correlation
    # r1 (1, 80), (1, 70), (0, 30), (0, 20); r2 (1, 60), (1, 60), (0, 40), (0, 40):
    # Sxy = 1/2 x 140 = 70, Sxx = 2, Syy = 3000: r = 70 / sqrt(6000).
    assert corr["points_level"] == "fan_in" and corr["er_ac"]["n"] == 8
    assert corr["levels"] == [1, 2, 3, 4]
    assert corr["er_ac"]["r"] == pytest.approx(70 / math.sqrt(6000))
    assert "8 (system, exact fan-in) points" in correlation_note(corr)


def test_scatter_figure_states_the_points_used():
    from core.figures.fanin import fanin_scatter_figure

    fig, data = fanin_scatter_figure(fanin_analysis(_r_frame(), n_resamples=200))
    assert len(data) == 6 and set(data["condition"]) == {"retrieved"}
    assert list(data.columns) == ["system", "run", "condition", "bucket", "n", "ac", "er", "ep"]
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0].startswith("ER-AC: r = 0.89 [") and "6 (system, bucket) points" in titles[0]
    note = titles[-1].replace("<br>", " ")
    assert "Pearson r over 6 (system, bucket) points" in note
    assert "left out: oracle (3 points" in note
