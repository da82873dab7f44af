"""alpha-nDCG as ndeval computes it (core.crux.ndcg; issues 34 and 38).

The reference is a port of ndeval's ``idealResult``, ``computeDCG`` and ``renormalize``
(``ndeval.c`` version 4.5, the code pyndeval and ir-measures wrap) written here, loop for loop:
the qrels of a topic sorted by docno, the ideal built by assigning ranks 1, 2, ... to the
unranked document of largest score, a tie going to the document whose docno ``strcmp`` puts
greater; both DCGs divided by the "ideal ideal" from rank 2 on. The tool's batch
(:func:`alpha_ndcg_topics`) and single-topic (:func:`alpha_ndcg`) paths must agree with it on
random topics full of ties.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from core.crux.metrics import alpha_ndcg, alpha_ndcg_topics

L3 = math.log2(3)
DEPTH = 20  # ndeval's deepest cut-off


# ------------------------------------------------------------------ the reference port


def _discount(i: int) -> float:
    return 1.0 if i == 0 else math.log(2.0) / math.log(i + 2.0)


def _dcg_per_rank(rels: list[list[int]], n_sub: int, actual: int, alpha: float) -> list[float]:
    """ndeval's computeDCG: cumulated gain at ranks 1..DEPTH, over the "ideal ideal"."""
    gain = [1.0] * n_sub
    dcg = [0.0] * DEPTH
    if actual == 0:
        return dcg
    for i in range(min(DEPTH, len(rels))):
        score = 0.0
        for j in range(n_sub):
            if rels[i][j]:
                score += gain[j]
                gain[j] *= 1.0 - alpha
        dcg[i] = score * _discount(i)
    ideal_ideal, g = [0.0] * DEPTH, float(actual)
    for i in range(DEPTH):
        ideal_ideal[i] = g * _discount(i)
        g *= 1.0 - alpha
    for i in range(1, DEPTH):
        dcg[i] += dcg[i - 1]
        ideal_ideal[i] += ideal_ideal[i - 1]
    for i in range(1, DEPTH):
        dcg[i] /= ideal_ideal[i]
    return dcg


def ndeval_port(qrels: dict[str, list[int]], run: list[str], n_sub: int, alpha: float):
    """alpha-nDCG@1..20 of one topic: ``qrels`` docno -> 0/1 per subtopic, ``run`` docnos."""
    docs = sorted(qrels)  # qrelSort: by docno (Python's str order is strcmp's on ASCII)
    rank = dict.fromkeys(docs, 0)
    gain = [1.0] * n_sub
    for r in range(1, len(docs) + 1):  # idealResult
        where, best = None, 0.0
        for d in docs:
            if rank[d] == 0:
                score = 0.0
                for j in range(n_sub):
                    if qrels[d][j]:
                        score += gain[j]
                if where is None or score > best or (score == best and d > where):
                    best, where = score, d
        rank[where] = r
        for j in range(n_sub):
            if qrels[where][j]:
                gain[j] *= 1.0 - alpha
    actual = sum(any(qrels[d][j] for d in docs) for j in range(n_sub))
    ideal = _dcg_per_rank([qrels[d] for d in sorted(docs, key=rank.get)], n_sub, actual, alpha)
    got = _dcg_per_rank([qrels.get(d, [0] * n_sub) for d in run], n_sub, actual, alpha)
    return [got[i] / ideal[i] if got[i] else 0.0 for i in range(DEPTH)]  # renormalize


def _topics(n: int, seed: int):
    """Random topics with many ties: few subtopics, docnos whose strcmp order is not numeric."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        n_sub = rng.randint(1, 6)
        size = rng.randint(1, 40)
        docs = list(dict.fromkeys(f"d{rng.randrange(1, 200)}" for _ in range(size)))
        p = rng.choice((0.15, 0.3, 0.5))
        qrels = {d: [int(rng.random() < p) for _ in range(n_sub)] for d in docs}
        run = rng.sample(docs, rng.randint(0, len(docs)))
        run += [f"u{i}" for i in range(rng.randint(0, 3))]  # unjudged documents gain nothing
        rng.shuffle(run)
        out.append((qrels, run, n_sub))
    return out


def _as_sets(qrels, run, name=lambda j: j):
    docs = list(qrels)
    pool = [frozenset(name(j) for j, r in enumerate(qrels[d]) if r) for d in docs]
    ranking = [frozenset(name(j) for j, r in enumerate(qrels.get(d, ())) if r) for d in run]
    return ranking, pool, docs


CUTS = (1, 3, 5, 10, 20)


@pytest.mark.parametrize("alpha", [0.5, 0.3, 1.0])  # 0.3: sums that round
def test_alpha_ndcg_matches_the_ndeval_port_on_1200_random_topics(alpha):
    topics = _topics(1200, seed=11)
    rankings, pools, ids = zip(*(_as_sets(q, r) for q, r, _ in topics), strict=True)
    got = alpha_ndcg_topics(rankings, pools, CUTS, alpha, ids)
    ref = np.array([[ndeval_port(q, r, s, alpha)[k - 1] for k in CUTS] for q, r, s in topics])
    answered = np.array([any(map(any, q.values())) for q, _, _ in topics])
    # ndeval prints 0 where nothing in the pool is relevant; the tool says NaN (unscored)
    assert np.isnan(got[~answered]).all() and (ref[~answered] == 0).all()
    # the same floating-point steps in the same order: bit for bit, whatever alpha
    assert np.array_equal(got[answered], ref[answered])
    # the single-topic path is the same computation
    for t in range(0, 1200, 7):
        for c, k in enumerate(CUTS):
            one = alpha_ndcg(rankings[t], pools[t], alpha, depth=k, pool_ids=ids[t])
            assert one == got[t, c] or (math.isnan(one) and math.isnan(got[t, c]))


@pytest.mark.parametrize("kind", ["many", "mixed"])
def test_subtopics_numbered_per_topic_keep_ndevals_order(kind):
    # Over 64 distinct subtopic ids in all (topic t's subtopic j is 100 t + j), or ids that
    # do not compare across topics (ints, then zero-padded strings): each topic is numbered
    # on its own, in ascending id order as ndeval's subtopic numbers: bit for bit again.
    topics = _topics(300, seed=3)
    sets = []
    for t, (q, r, _) in enumerate(topics):
        name = (
            (lambda j, t=t: 100 * t + j)
            if kind == "many"
            else ((lambda j: j) if t % 2 else (lambda j: f"s{j:02d}"))
        )
        sets.append(_as_sets(q, r, name))
    rankings, pools, ids = zip(*sets, strict=True)
    got = alpha_ndcg_topics(rankings, pools, CUTS, 0.3, ids)
    ref = np.array([[ndeval_port(q, r, s, 0.3)[k - 1] for k in CUTS] for q, r, s in topics])
    assert np.array_equal(np.nan_to_num(got), ref)
    for t in range(0, 300, 11):
        one = [alpha_ndcg(rankings[t], pools[t], 0.3, depth=k, pool_ids=ids[t]) for k in CUTS]
        assert np.array_equal(one, got[t], equal_nan=True)


def test_ids_that_do_not_compare_within_a_topic_are_taken_as_first_seen():
    pool = [{1, "a"}, {"a", 2}, {1, 2, "b"}, {"b"}]
    ranking = [{"b"}, {1, "a"}, {"a", 2}]
    got = alpha_ndcg_topics([ranking], [pool], [1, 2, 3], 0.3, [["x", "y", "z", "w"]])[0]
    one = [alpha_ndcg(ranking, pool, 0.3, depth=k, pool_ids="xyzw") for k in (1, 2, 3)]
    assert np.array_equal(got, one)
    # ideal: {1, 2, b} (3), then {1, a} and {a, 2} tie at 0.7 + 1 ("y", {a, 2}, goes first);
    # the ranking gains 1, then 2 ({1, a} both new)
    assert got[0] == pytest.approx(1 / 3)
    assert got[1] == pytest.approx((1 + 2 / L3) / (3 + 1.7 / L3))


def test_the_tie_rule_matters_on_random_topics():
    # Ties broken toward the later pool item instead of the greater docno (ids left out)
    # change some topics' values: the comparison above would catch the wrong rule.
    topics = _topics(1200, seed=11)
    rankings, pools, ids = zip(*(_as_sets(q, r) for q, r, _ in topics), strict=True)
    by_docno = alpha_ndcg_topics(rankings, pools, CUTS, 0.5, ids)
    by_position = alpha_ndcg_topics(rankings, pools, CUTS, 0.5)
    differ = ~np.isclose(by_docno, by_position, rtol=0, atol=1e-12, equal_nan=True)
    assert differ.any(axis=1).sum() >= 20


def test_ties_go_to_the_greater_docno_hand_computed():
    # X = {a, b}, Y = {a, c}, Z = {b, d} all gain 2 at rank 1. ndeval takes the greatest
    # docno by strcmp: "d9" (Z) > "d2" (Y) > "d10" (X), although 10 > 9 as numbers.
    # After Z, Y = {a, c} still gains 2 (X: 1 + 0.5), then X gains 0.5 + 0.5 = 1.
    # Ideal DCG@3 = 2 + 2/log2(3) + 1/2. The ranking X, Y, Z gains 2, 1.5, 1.5:
    # DCG@3 = 2 + 1.5/log2(3) + 0.75.
    pool = [{"a", "b"}, {"a", "c"}, {"b", "d"}]
    ids = ["d10", "d2", "d9"]
    want = (2 + 1.5 / L3 + 0.75) / (2 + 2 / L3 + 0.5)
    assert alpha_ndcg(pool, pool, depth=3, pool_ids=ids) == pytest.approx(want)
    assert want == pytest.approx(0.9825977, abs=1e-7)
    # Taking the first item (X) at the tie would give the ranking's own order: nDCG 1.
    assert alpha_ndcg(pool, pool, depth=3, pool_ids=["d9", "d2", "d10"]) == pytest.approx(1.0)
    # Without ids the later item wins (positions as docnos): Z, as with these docnos.
    assert alpha_ndcg(pool, pool, depth=3) == pytest.approx(want)
    assert alpha_ndcg_topics([pool], [pool], [1, 2, 3], pool_ids=[ids])[0] == pytest.approx(
        [1.0, (2 + 1.5 / L3) / (2 + 2 / L3), want]
    )


def test_shallow_ideals_are_prefixes_of_the_deepest():
    # ndeval orders the pool once; the ideal at cut-off k is the first k of that order, so
    # one greedy run to the deepest cut-off gives every cut-off's value.
    rankings, pools, ids = zip(*(_as_sets(q, r) for q, r, _ in _topics(300, seed=5)), strict=True)
    together = alpha_ndcg_topics(rankings, pools, (20, 5, 10), 0.5, ids)
    for c, k in enumerate((20, 5, 10)):
        alone = alpha_ndcg_topics(rankings, pools, (k,), 0.5, ids)[:, 0]
        assert np.array_equal(together[:, c], alone, equal_nan=True)


def test_alpha_ndcg_topics_rejects_bad_input():
    with pytest.raises(ValueError, match="unique docnos"):
        alpha_ndcg_topics([[{"a"}]], [[{"a"}, {"b"}]], [1], pool_ids=[["d1", "d1"]])
    with pytest.raises(ValueError, match="unique docnos"):
        alpha_ndcg_topics([[{"a"}]], [[{"a"}, {"b"}]], [1], pool_ids=[["d1"]])
    with pytest.raises(ValueError, match="pools for"):
        alpha_ndcg_topics([[{"a"}], [{"b"}]], [[{"a"}]], [1])
    with pytest.raises(ValueError, match="depth"):
        alpha_ndcg_topics([[{"a"}]], None, [-1])
    with pytest.raises(ValueError, match="alpha"):
        alpha_ndcg_topics([[{"a"}]], None, [1], alpha=-0.1)
    assert alpha_ndcg_topics([], None, [5]).shape == (0, 1)
    assert np.isnan(alpha_ndcg_topics([[{"a"}]], None, [0])).all()
