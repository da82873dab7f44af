"""Fan-in degradation (AuthTrace, seed 003; SPEC §9): hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import pearsonr

from core.fanin import (
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
        "single", "low", "low", "high", "high", "high",
    ]  # fmt: skip
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
    gold = {"i1": ["p1"], "i2": ["p1"], "i3": ["p1", "p2", "p3", "p4"], "i4": ["p1", "p2"],
            "i5": []}  # fmt: skip
    fan = {"i1": 1, "i2": 1, "i3": 4, "i4": 2, "i5": 0}
    rows = []

    def add(cond, iid, shown, cited, f1):
        rows.append({"run": "r", "model": "m", "dataset": "d", "instance_id": iid,
                     "condition": cond, "input_passage_ids": shown, "cited_ids": cited,
                     "gold_ids": gold[iid], "fan_in": fan[iid], "f1_relaxed": f1})  # fmt: skip

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
    # Pearson points: 3 systems with packs x fan-in {1, 2, 4}.
    assert res.correlation["er_ac"]["n"] == 9
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
