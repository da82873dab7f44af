"""CRUX retrieval-context coverage (seed 002 §3; SPEC §9): hand-computed values."""

from __future__ import annotations

import html
import math
from dataclasses import replace

import pandas as pd
import pytest

from core.crux.metrics import (
    K_REQUIRED,
    alpha_ndcg,
    answerability_from_gold,
    answerability_from_ratings,
    answerability_note,
    context_scores,
    coverage,
    crux_evaluate,
    crux_report,
    density,
    parse_rating,
    required_subset,
)
from core.judges.runs import run_judge
from core.retrieval.retrievers import Chunk
from core.store import Store
from core.types import Dataset, Instance, Passage

L3 = math.log2(3)


# ------------------------------------------------------------------------------ alpha-nDCG


def test_alpha_ndcg_repeated_subtopic_hand_computed():
    # gains: {a,b} -> 2; {a} again -> (1-0.5)^1 = 0.5; {c} -> 1.
    # DCG = 2/log2(2) + 0.5/log2(3) + 1/log2(4); greedy ideal of the same items puts {c}
    # before the repeated {a}: 2 + 1/log2(3) + 0.5/2.
    ranking = [{"a", "b"}, {"a"}, {"c"}]
    dcg = 2.0 + 0.5 / L3 + 0.5
    ideal = 2.0 + 1.0 / L3 + 0.25
    assert dcg == pytest.approx(2.815464876785729)
    assert alpha_ndcg(ranking) == pytest.approx(dcg / ideal)
    assert alpha_ndcg(ranking) == pytest.approx(0.9772765, abs=1e-6)


def test_alpha_discount_is_what_makes_the_repeat_cost():
    ranking = [{"a", "b"}, {"a"}, {"c"}]
    # alpha = 0: a repeat is as good as a new subtopic; the order is then ideal.
    assert alpha_ndcg(ranking, alpha=0.0) == pytest.approx(1.0)
    # alpha = 1: a repeat earns nothing: DCG = 2 + 0 + 1/2, ideal = 2 + 1/log2(3) + 0.
    assert alpha_ndcg(ranking, alpha=1.0) == pytest.approx(2.5 / (2.0 + 1.0 / L3))


def test_alpha_ndcg_ideal_is_greedy_over_the_pool_and_cut_at_depth():
    # One item answering c, while the pool's best item answers {a, b}: 1 / 2.
    assert alpha_ndcg([{"c"}], pool=[{"a"}, {"a", "b"}, {"c"}]) == pytest.approx(0.5)
    # Depth 2: DCG = 1 + 1/log2(3); ideal = {a,b} (2) then {a} (0.5, tie with {b}, first).
    got = alpha_ndcg([{"a"}, {"b"}], pool=[{"a", "b"}, {"a"}, {"b"}])
    assert got == pytest.approx((1 + 1 / L3) / (2 + 0.5 / L3))
    assert got == pytest.approx(0.7043638, abs=1e-6)
    # Explicit depth cuts the ranking too: only {c} at rank 1 counts against ideal {a,b}.
    assert alpha_ndcg([{"c"}, {"a", "b"}], depth=1) == pytest.approx(0.5)
    # A perfect ranking scores 1; a pool that answers nothing has no ideal (NaN).
    assert alpha_ndcg([{"a", "b"}, {"c"}], pool=[{"c"}, {"a", "b"}]) == pytest.approx(1.0)
    assert math.isnan(alpha_ndcg([set(), set()]))


def test_alpha_ndcg_rejects_bad_arguments():
    with pytest.raises(ValueError, match="alpha"):
        alpha_ndcg([{"a"}], alpha=1.5)
    with pytest.raises(ValueError, match="depth"):
        alpha_ndcg([{"a"}], depth=-1)


# ------------------------------------------------------------------- coverage and density


def test_coverage_counts_answerable_sub_questions_only():
    assert coverage([{"a"}, {"a", "b"}, {"d"}], {"a", "b", "c"}) == pytest.approx(2 / 3)
    assert coverage([], {"a"}) == 0.0
    assert math.isnan(coverage([{"a"}], set()))


def test_density_exponent():
    # ((0.5 / 600) / (1.0 / 200)) = 1/6; w = 0.5 -> sqrt(1/6).
    assert density(0.5, 600, 1.0, 200) == pytest.approx(math.sqrt(1 / 6))
    assert density(0.5, 600, 1.0, 200) == pytest.approx(0.4082483, abs=1e-6)
    assert density(0.5, 600, 1.0, 200, w=1.0) == pytest.approx(1 / 6)
    assert density(0.5, 600, 1.0, 200, w=0.0) == pytest.approx(1.0)
    # Twice the reference density: sqrt(2) (the exponent dampens, it does not cap).
    assert density(1.0, 100, 1.0, 200) == pytest.approx(math.sqrt(2))
    assert density(0.0, 600, 1.0, 200) == 0.0
    assert math.isnan(density(0.5, 600, 0.0, 200))
    with pytest.raises(ValueError, match="cov must be >= 0"):
        density(-0.1, 600, 1.0, 200)


def test_required_subset_is_greedy_set_cover_with_first_wins_ties():
    sets = {"p1": {"a", "b"}, "p2": {"b", "c"}, "p3": {"c", "d"}, "p4": {"a"}}
    # p1, p2, p3 each answer 2: p1 (first) joins; then p3 adds {c, d} (2) > p2 adds {c} (1).
    assert required_subset(sets) == ["p1", "p3"]
    # Greedy, not optimal: {1,2,3,4} first, then {1,2,5} and {3,4,6} are both still needed.
    classic = {"s1": {1, 2, 3, 4}, "s2": {1, 2, 5}, "s3": {3, 4, 6}}
    assert required_subset(classic) == ["s1", "s2", "s3"]
    assert required_subset({"x": {"a"}, "y": {"a"}}) == ["x"]
    assert required_subset({"y": {"a"}, "x": {"a"}}) == ["y"]
    assert required_subset({"x": set()}) == []
    assert required_subset({}) == []


# ------------------------------------------------------------------- answerability, contexts


def _instance() -> Instance:
    # Each passage renders to 3 label tokens + 1 title token + 6 text tokens = 10 tokens.
    texts = (
        "alpha beta gamma delta one two",
        "alpha beta gamma delta three four",
        "epsilon zeta eta theta five six",
    )
    gold = (True, True, False)
    passages = tuple(
        Passage(f"p{i + 1:04d}", i, "T", texts[i], f"d{i}", "gold" if g else "filler", g)
        for i, g in enumerate(gold)
    )
    return Instance("q1", "What is alpha beta?", "x", passages=passages, fan_in=2)


def test_answerability_from_gold_gives_each_gold_passage_its_own_sub_question():
    ans = answerability_from_gold(_instance())
    assert ans.source == "gold"
    assert ans.answerable == frozenset({"p0001", "p0002"})
    assert ans.answers == {"p0001": frozenset({"p0001"}), "p0002": frozenset({"p0002"})}
    assert ans.required == ("p0001", "p0002")


def _ratings():
    # (passage, sub-question, rating 0..5); eta = 3. s3 is answered by nothing.
    return [
        ("p0001", "s1", 5),
        ("p0002", "s1", 1),
        ("p0003", "s1", 4),
        ("p0001", "s2", 0),
        ("p0002", "s2", 3),
        ("p0003", "s2", 2),
        ("p0001", "s3", 2),
        ("p0002", "s3", 0),
        ("p0003", "s3", 0),
    ]


def test_answerability_from_ratings_thresholds_at_eta():
    ans = answerability_from_ratings(_instance(), ["s1", "s2", "s3"], _ratings(), "j1")
    assert ans.source == "judge:j1"
    assert ans.answers["p0001"] == {"s1"}
    assert ans.answers["p0002"] == {"s2"}  # rating 3 = eta counts
    assert ans.answers["p0003"] == {"s1"}  # 4 on s1; 2 on s2 does not
    assert ans.answerable == {"s1", "s2"}
    assert ans.required == ("p0001", "p0002")
    with pytest.raises(ValueError, match="outside 0..5"):
        answerability_from_ratings(_instance(), ["s1"], [("p0001", "s1", 6)], "j1")
    with pytest.raises(ValueError, match="unknown passage"):
        answerability_from_ratings(_instance(), ["s1"], [("p0009", "s1", 4)], "j1")


def test_context_scores_hand_computed():
    inst = _instance()
    # Hand-made chunks: c1 spans p3 only, c2 spans p1 and p3, c3 spans p2; 20 tokens each.
    c1 = Chunk("c0001", 0, "", ("p0003",), 0, 20)
    c2 = Chunk("c0002", 1, "", ("p0001", "p0003"), 20, 40)
    c3 = Chunk("c0003", 2, "", ("p0002",), 40, 60)
    ans = answerability_from_gold(inst)
    got = context_scores([c1, c2], [c1, c2, c3], ans, inst)
    assert got["coverage"] == 0.5
    # Ranked sets: {}, {p1}; DCG = 1/log2(3); ideal over the chunks {p1}, {p2}: 1 + 1/log2(3).
    assert got["alpha_ndcg"] == pytest.approx((1 / L3) / (1 + 1 / L3))
    # tokens(Z) = 40; Z* = p1, p2 at 10 stream tokens each; ((0.5/40) / (1/20))^0.5 = 0.5.
    assert got["tokens"] == 40 and got["tokens_ref"] == 20
    assert got["density"] == pytest.approx(0.5)
    assert got["answered"] == ["p0001"]


# ------------------------------------------------------------------- eta and k = |Z*|


def test_eta_5_keeps_only_top_ratings():
    # eta = 5 (seed 002 §4.4): only p1's 5 on s1 answers; p2's 3 and p3's 4 no longer do.
    ans = answerability_from_ratings(_instance(), ["s1", "s2", "s3"], _ratings(), "j1", eta=5)
    assert ans.answers == {"p0001": {"s1"}, "p0002": set(), "p0003": set()}
    assert ans.answerable == {"s1"} and ans.required == ("p0001",) and ans.eta == 5
    assert answerability_from_gold(_instance()).eta is None  # binary: no threshold
    for bad in (0, 6, -1, "x", True):
        with pytest.raises(ValueError, match="eta must be a number in"):
            answerability_from_ratings(_instance(), ["s1"], _ratings(), "j1", eta=bad)


def _q3() -> Instance:
    """_instance() asked about the filler: lexical ranks p3 first, then p1, p2 (score ties)."""
    return replace(_instance(), instance_id="q3", question="What is epsilon zeta?")


def _judged_q3(eta):
    return {"q3": answerability_from_ratings(_q3(), ["s1", "s2", "s3"], _ratings(), "j1", eta)}


def test_crux_at_eta_3_and_5_differ_hand_computed():
    # Lexical ranks chunks (10 tokens = one passage each) p3, p1, p2.
    at3 = crux_evaluate(
        [_q3()],
        ["lexical"],
        [1, 3],
        _judged_q3(3),
        eta=3,
        chunk_size=10,
        overlap=0,
        n_resamples=100,
    ).per_context.set_index("k")
    at5 = crux_evaluate(
        [_q3()],
        ["lexical"],
        [1, 3],
        _judged_q3(5),
        eta=5,
        chunk_size=10,
        overlap=0,
        n_resamples=100,
    ).per_context.set_index("k")
    # eta 3: Q_ans {s1, s2}, p3 -> {s1}, p1 -> {s1}, p2 -> {s2}. k=1 (p3): Cov 1/2, nDCG 1
    # (ideal rank 1 gains 1 too), density ((1/2)/10 / (1/20))^0.5 = 1.
    assert at3.loc[1, "coverage"] == 0.5 and at3.loc[1, "alpha_ndcg"] == pytest.approx(1.0)
    assert at3.loc[1, "density"] == pytest.approx(1.0)
    # k=3: Cov 1; DCG = 1 + 0.5/log2(3) + 1/2, ideal {s1}, {s2}, {s1}: 1 + 1/log2(3) + 0.5/2;
    # density ((1/30) / (1/20))^0.5 = sqrt(2/3).
    assert at3.loc[3, "coverage"] == 1.0
    assert at3.loc[3, "alpha_ndcg"] == pytest.approx((1.5 + 0.5 / L3) / (1.25 + 1 / L3))
    assert at3.loc[3, "density"] == pytest.approx(math.sqrt(2 / 3))
    # eta 5: Q_ans {s1}, only p1 answers; Z* = (p1), 10 tokens. k=1 (p3): nothing answered.
    assert at5.loc[1, "coverage"] == 0.0 and at5.loc[1, "alpha_ndcg"] == 0.0
    assert at5.loc[1, "density"] == 0.0
    # k=3: Cov 1; DCG = 1/log2(3) (p1 at rank 2) over ideal 1; density ((1/30)/(1/10))^0.5.
    assert at5.loc[3, "coverage"] == 1.0
    assert at5.loc[3, "alpha_ndcg"] == pytest.approx(1 / L3)
    assert at5.loc[3, "density"] == pytest.approx(math.sqrt(1 / 3))


def test_k_equal_to_the_required_subset_size_hand_computed():
    kw = {"k_required": True, "chunk_size": 10, "overlap": 0, "n_resamples": 100}
    at3 = crux_evaluate([_q3()], ["lexical"], [1], _judged_q3(3), eta=3, **kw)
    per = at3.per_context.set_index("k")
    # eta 3: Z* = (p1, p2) -> k = |Z*| = 2: chunks p3 {s1}, p1 {s1}. Cov 1/2;
    # DCG = 1 + 0.5/log2(3), ideal {s1}, {s2}: 1 + 1/log2(3); density ((1/2)/20 / (1/20))^0.5.
    assert per.loc[K_REQUIRED, "k_size"] == 2
    assert per.loc[K_REQUIRED, "chunk_ids"] == ["c0003", "c0001"]
    assert per.loc[K_REQUIRED, "coverage"] == 0.5
    assert per.loc[K_REQUIRED, "alpha_ndcg"] == pytest.approx((1 + 0.5 / L3) / (1 + 1 / L3))
    assert per.loc[K_REQUIRED, "alpha_ndcg"] == pytest.approx(0.8065735, abs=1e-6)
    assert per.loc[K_REQUIRED, "density"] == pytest.approx(math.sqrt(0.5))
    agg = at3.aggregate.set_index("k")
    assert list(agg.index) == [1, K_REQUIRED] and agg.loc[K_REQUIRED, "k_mean"] == 2.0
    assert at3.to_dict()["k_required"] is True
    # eta 5: Z* = (p1) -> k = 1: the p3 chunk alone answers nothing.
    at5 = crux_evaluate([_q3()], ["lexical"], [], _judged_q3(5), eta=5, **kw)
    row = at5.per_context.set_index("k").loc[K_REQUIRED]
    assert row["k_size"] == 1 and row["coverage"] == 0.0
    # Gold-derived answerability, every gold passage its own sub-question: Z* = (p1, p2),
    # k = 2: p3, p1 -> Cov 1/2, DCG 1/log2(3) over 1 + 1/log2(3), density sqrt(1/2).
    gold = crux_evaluate([_q3()], ["lexical"], [], **kw).per_context.iloc[0]
    assert (gold["k"], gold["k_size"], gold["coverage"]) == (K_REQUIRED, 2, 0.5)
    assert gold["alpha_ndcg"] == pytest.approx((1 / L3) / (1 + 1 / L3))
    assert gold["density"] == pytest.approx(math.sqrt(0.5))
    with pytest.raises(ValueError, match="no k given"):
        crux_evaluate([_q3()], ["lexical"], [])


def test_k_required_without_a_required_subset_is_unscored():
    # Only the non-gold p3 answers s1: no gold passage does, so Z* is empty and s1 is
    # discarded (seed 002 §3.2: Q_ans is what the oracle context answers), leaving Q_ans
    # empty: every context of the instance is unscored and counted, none scores Cov 1.
    ans = answerability_from_ratings(_q3(), ["s1"], [("p0003", "s1", 5)], "j1")
    assert ans.required == () and ans.answerable == frozenset()
    assert ans.discarded == {"s1"} and ans.answers == {"p0003": frozenset()}
    res = crux_evaluate(
        [_q3()],
        ["lexical"],
        [1],
        {"q3": ans},
        k_required=True,
        chunk_size=10,
        overlap=0,
        n_resamples=50,
    )
    agg = res.aggregate.set_index("k")
    assert agg.loc[K_REQUIRED, "n"] == 0 and agg.loc[K_REQUIRED, "n_unscored"] == 1
    assert agg.loc[1, "n"] == 0 and agg.loc[1, "n_unscored"] == 1
    assert math.isnan(agg.loc[1, "coverage"])


def test_answerability_note_says_gold_derived_with_counts():
    assert answerability_note({"gold": 2}) == (
        "Answerability derived from gold evidence, not judged, for all 2 instances: each gold "
        "passage answers a sub-question of its own (binary, so eta = 3 does not apply to them)."
    )
    assert answerability_note({"gold": 1, "judge:j1": 3}, eta=5) == (
        "Answerability derived from gold evidence, not judged, for 1 of 4 instances: each gold "
        "passage answers a sub-question of its own (binary, so eta = 5 does not apply to it); "
        "judged by j1 (rating >= eta = 5) for the other 3."
    )
    assert answerability_note({"judge:j1": 1}) == (
        "Answerability judged by j1 (rating >= eta = 3) for the one instance."
    )
    assert answerability_note({"judge:j1": 2}, 3, discarded=3, distractor_only=0) == (
        "Answerability judged by j1 (rating >= eta = 3) for all 2 instances. 3 judged "
        "sub-questions that no gold passage answers are left out, as the paper filters them "
        "(0 answered only by a non-gold passage)."
    )


# ------------------------------------------------------------------- through the store


def _store_with_ratings(db_path, judges=("j1",)) -> Store:
    store = Store(db_path)
    inst = _instance()
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (inst, other)))
    sq = pd.DataFrame(
        {
            "instance_id": ["q1"] * 3,
            "sq_id": ["s1", "s2", "s3"],
            "text": ["what a?", "what b?", "what c?"],
        }
    )
    rows = [
        {"instance_id": "q1", "sq_id": s, "passage_id": p, "rating": r, "judge": j}
        for j in judges
        for p, s, r in _ratings()
    ]
    store.write_crux_judgments("tiny", sq, pd.DataFrame(rows))
    return store


def test_crux_report_uses_stored_ratings_and_falls_back_to_gold(db_path):
    store = _store_with_ratings(db_path)
    res = crux_report(
        store, "tiny", ["oracle"], [1, 2, 3], chunk_size=10, overlap=0, n_resamples=200
    )
    assert res.answerability_source == "mixed"  # q1 judged, q2 derived from gold
    per = res.per_context.set_index(["instance_id", "k"])
    assert per.loc[("q1", 1), "answerability_source"] == "judge:j1"
    assert per.loc[("q2", 1), "answerability_source"] == "gold"
    # Chunks align with passages (10 tokens each). Oracle puts a gold chunk first.
    # k=1: Cov 1/2, alpha-nDCG 1, density ((0.5/10) / (1/20))^0.5 = 1.
    assert per.loc[("q1", 1), "coverage"] == 0.5
    assert per.loc[("q1", 1), "alpha_ndcg"] == pytest.approx(1.0)
    assert per.loc[("q1", 1), "density"] == pytest.approx(1.0)
    # k=3: everything shown: Cov 1, density ((1/30) / (1/20))^0.5 = sqrt(2/3); the judged
    # non-gold p3 repeats s1 at rank 3, which the greedy ideal also places last: nDCG 1.
    assert per.loc[("q1", 3), "coverage"] == 1.0
    assert per.loc[("q1", 3), "density"] == pytest.approx(math.sqrt(2 / 3))
    assert per.loc[("q1", 3), "alpha_ndcg"] == pytest.approx(1.0)
    agg = res.aggregate.set_index("k")
    assert agg.loc[1, "n"] == 2 and agg.loc[1, "coverage"] == pytest.approx(0.5)


def test_a_sub_question_only_a_distractor_answers_is_discarded(db_path):
    # Ratings of every passage, as `judge --passages all` stores them: gold p1 answers s1,
    # gold p2 answers s2 and s3, the non-gold p3 answers s1 and s4. Seed 002 §3.2: Q_ans is
    # what the oracle context answers, {s1, s2, s3}; s4 (only a distractor answers it) is
    # discarded, so Cov(Z*) = 1 (Z* = p2, p1). Counting s4 gave Cov(Z*) = 3/4 before.
    ratings = [
        ("p0001", "s1", 5),
        ("p0002", "s2", 4),
        ("p0002", "s3", 3),
        ("p0003", "s1", 4),
        ("p0003", "s4", 5),
    ]
    ans = answerability_from_ratings(_q3(), ["s1", "s2", "s3", "s4"], ratings, "j1")
    assert ans.answerable == {"s1", "s2", "s3"} and ans.discarded == {"s4"}
    assert ans.required == ("p0002", "p0001")
    assert ans.answers["p0003"] == {"s1"}  # s4 is out of every metric, alpha-nDCG included
    store = Store(db_path)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_q3(),)))
    sq = pd.DataFrame(
        {
            "instance_id": ["q3"] * 4,
            "sq_id": ["s1", "s2", "s3", "s4"],
            "text": ["a?", "b?", "c?", "d?"],
        }
    )
    rows = pd.DataFrame(
        [
            {"instance_id": "q3", "sq_id": q, "passage_id": p, "rating": r, "judge": "j1"}
            for p, q, r in ratings
        ]
    )
    store.write_crux_judgments("tiny", sq, rows)
    res = crux_report(
        store,
        "tiny",
        ["lexical"],
        [1, 3],
        k_required=True,
        chunk_size=10,
        overlap=0,
        n_resamples=100,
    )
    per = res.per_context.set_index("k")
    assert (per["coverage_ref"] == 1.0).all() and (per["n_answerable"] == 3).all()
    # Lexical ranks p3, p1, p2 (one chunk each, 10 tokens). k=1, Z = (p3): answers s1 only.
    # Cov 1/3 (was 2/4); nDCG 1 / 2 (the ideal's first item is p2, gain 2); density
    # ((1/3)/10 / (1/20))^0.5 = sqrt(2/3) (was sqrt(4/3) > 1 against a Z* of Cov 3/4).
    assert per.loc[1, "coverage"] == pytest.approx(1 / 3)
    assert per.loc[1, "alpha_ndcg"] == pytest.approx(0.5)
    assert per.loc[1, "density"] == pytest.approx(math.sqrt(2 / 3))
    assert per.loc[1, "density"] == pytest.approx(0.8164966, abs=1e-6)
    # k=3: Cov 1; gains 1, 0.5 (s1 again), 2 -> DCG 2 + 0.5/log2(3); ideal p2 (2), then p1
    # and p3 tie at 1 (the greater chunk id, p3's c0003, goes first), then 0.5.
    assert per.loc[3, "coverage"] == 1.0
    assert per.loc[3, "alpha_ndcg"] == pytest.approx((2 + 0.5 / L3) / (2.25 + 1 / L3))
    assert per.loc[3, "alpha_ndcg"] == pytest.approx(0.8037214, abs=1e-6)
    # k = |Z*| = 2: Z = (p3, p1), both answer s1 only: Cov 1/3.
    assert per.loc[K_REQUIRED, "k_size"] == 2
    assert per.loc[K_REQUIRED, "coverage"] == pytest.approx(1 / 3)
    assert (res.discarded, res.distractor_only) == (1, 1)
    assert res.note.endswith(
        " 1 judged sub-question that no gold passage answers is left out, "
        "as the paper filters them (1 answered only by a non-gold "
        "passage)."
    )


def test_crux_report_eta_5_and_the_gold_derived_note(db_path):
    store = _store_with_ratings(db_path)
    kw = {"chunk_size": 10, "overlap": 0, "n_resamples": 200}
    at3 = crux_report(store, "tiny", ["oracle"], [1, 3], **kw)
    at5 = crux_report(store, "tiny", ["oracle"], [1, 3], eta=5, **kw)
    assert (at3.eta, at5.eta) == (3, 5)
    p3 = at3.per_context.set_index(["instance_id", "k"])
    p5 = at5.per_context.set_index(["instance_id", "k"])
    # q1 judged. eta 3: k=1 Cov 1/2 (hand-checked above). eta 5: Q_ans {s1}, Z* = (p1):
    # the oracle's first chunk p1 answers it: Cov 1, density ((1/10)/(1/10))^0.5 = 1; k=3:
    # density ((1/30)/(1/10))^0.5 = sqrt(1/3).
    assert p3.loc[("q1", 1), "coverage"] == 0.5 and p5.loc[("q1", 1), "coverage"] == 1.0
    assert p5.loc[("q1", 3), "density"] == pytest.approx(math.sqrt(1 / 3))
    # q2 has no ratings: derived from gold, binary, the same at both thresholds.
    for col in ("coverage", "alpha_ndcg", "density"):
        assert p3.loc[("q2", 1), col] == p5.loc[("q2", 1), col]
    assert at5.answerability_counts == {"judge:j1": 1, "gold": 1}
    assert "derived from gold evidence, not judged, for 1 of 2 instances" in at5.note
    assert "judged by j1 (rating >= eta = 5) for the other 1" in at5.note
    agg = at5.aggregate.set_index("k")
    assert (agg.loc[1, "judged"], agg.loc[1, "gold_derived"]) == (1, 1)
    assert agg.loc[1, "answerability"] == "judged 1/2, gold-derived 1/2"
    out = at5.to_dict()
    assert out["eta"] == 5 and out["answerability_counts"] == {"judge:j1": 1, "gold": 1}
    assert out["answerability_note"] == at5.note
    with pytest.raises(ValueError, match="eta must be a number in"):
        crux_report(store, "tiny", ["oracle"], [1], eta=7)


def test_crux_figure_and_table_carry_the_gold_derived_note(db_path):
    from core.figures.fanin import crux_coverage_figure, crux_table

    store = _store_with_ratings(db_path)
    res = crux_report(
        store,
        "tiny",
        ["oracle"],
        [1, 3],
        eta=5,
        k_required=True,
        chunk_size=10,
        overlap=0,
        n_resamples=100,
    )
    fig, data = crux_coverage_figure(res)
    # the note under the panels, HTML-escaped for Plotly (which shows &gt; as >)
    note = html.unescape(fig.layout.annotations[-1].text.replace("<br>", " "))
    assert note == res.note
    assert "derived from gold evidence, not judged, for 1 of 2 instances" in note
    assert "eta = 5" in fig.layout.legend.title.text
    assert list(fig.data[0].x) == ["1", "3", K_REQUIRED]  # |Z*| its own category
    table = crux_table(res)
    assert table["eta"].tolist() == [5, 5, 5]
    assert table["k"].tolist() == ["1", "3", K_REQUIRED]
    assert set(table["answerability"]) == {"judged 1/2, gold-derived 1/2"}
    assert set(table["gold_derived"]) == {1} and set(table["judged"]) == {1}
    # Every instance gold-derived: the note and the column say so.
    gold = crux_table(
        crux_report(
            Store(db_path),
            "tiny",
            ["oracle"],
            [1],
            instance_ids=["q2"],
            chunk_size=10,
            overlap=0,
            n_resamples=50,
        )
    )
    assert gold["answerability"].tolist() == ["gold-derived 1/1 (not judged)"]


def test_crux_report_needs_a_judge_choice_when_several_rated(db_path):
    store = _store_with_ratings(db_path, judges=("j1", "j2"))
    with pytest.raises(ValueError, match="j1, j2"):
        crux_report(store, "tiny", ["oracle"], [1], chunk_size=10, overlap=0)
    res = crux_report(
        store, "tiny", ["oracle"], [1], judge="j2", chunk_size=10, overlap=0, n_resamples=100
    )
    assert "judge:j2" in set(res.per_context["answerability_source"])
    with pytest.raises(ValueError, match="unknown dataset"):
        crux_report(store, "nope", ["oracle"], [1])
    with pytest.raises(ValueError, match="positive integer"):
        crux_report(store, "tiny", ["oracle"], [0])


# ------------------------------------------------------------------- optional judge


class _RubricDouble:
    """Model double: rates 5 when the context holds the question's last word, else 1."""

    name = "double"
    model = "rubric-double"

    def __init__(self) -> None:
        self.calls = 0

    def describe(self) -> dict:
        return {"kind": "double", "model": self.model}

    def generate(self, messages, options=None):
        from core.backends import Reply

        self.calls += 1
        text = messages[0]["content"]
        question = text.split("Question: ")[1].split("\n")[0]
        context = text.split("Context: ")[1].rsplit("\nRating:", 1)[0]
        word = question.rstrip("?").split()[-1]
        return Reply(text="5" if word in context.split() else "1")


def test_parse_rating_follows_the_rubric_format():
    assert parse_rating("4") == 4
    assert parse_rating(" Rating: 3\n") == 3
    assert parse_rating("5 - complete") == 5
    assert parse_rating("10") == 0  # not a 0..5 rating
    assert parse_rating("The context is relevant: 4") == 0  # incorrect format -> 0
    assert parse_rating(None) == 0
    # Backends that enforce the answer contract's JSON schema: the rating is the answer.
    assert parse_rating('{"answer": "4", "evidence_ids": [], "confidence": 0.9}') == 4


def _judge_crux(store, backend, passages="all"):
    """``judge crux``'s path: the crux-answerability judge run under the judge's name."""
    out = run_judge(
        store,
        "crux-answerability",
        backend,
        name="double:rubric-double|crux-v1",
        dataset="tiny",
        passages=passages,
    )
    return {
        "judge": out.run,
        "n_pairs": out.planned,
        "n_called": out.executed,
        "n_cached": out.cached + out.skipped_existing,
        "n_errors": out.errors,
    }


def test_judge_rates_pairs_caches_calls_and_feeds_crux(db_path):
    store = Store(db_path)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_instance(),)))
    sq = pd.DataFrame(
        {
            "instance_id": ["q1", "q1"],
            "sq_id": ["s1", "s2"],
            "text": ["Which word follows one?", "Which word follows three?"],
        }
    )
    store.write_crux_judgments("tiny", sq, pd.DataFrame())
    double = _RubricDouble()
    out = _judge_crux(store, double)
    assert out == {
        "judge": "double:rubric-double|crux-v1",
        "n_pairs": 6,
        "n_called": 6,
        "n_cached": 0,
        "n_errors": 0,
    }
    _, ratings = store.crux_judgments("tiny")
    got = {(r.passage_id, r.sq_id): r.rating for r in ratings.itertuples()}
    assert got == {
        ("p0001", "s1"): 5,
        ("p0002", "s1"): 1,
        ("p0003", "s1"): 1,
        ("p0001", "s2"): 1,
        ("p0002", "s2"): 5,
        ("p0003", "s2"): 1,
    }
    again = _judge_crux(store, double)
    assert again["n_cached"] == 6 and double.calls == 6  # served from the response cache
    res = crux_report(store, "tiny", ["oracle"], [1, 3], chunk_size=10, overlap=0, n_resamples=100)
    assert res.answerability_source == "judge:double:rubric-double|crux-v1"
    per = res.per_context.set_index("k")
    assert per.loc[1, "coverage"] == 0.5 and per.loc[3, "coverage"] == 1.0
    with pytest.raises(ValueError, match="'gold' or 'all'"):
        _judge_crux(store, double, passages="some")
