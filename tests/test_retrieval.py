"""Chunking, retriever families and retrieval-only diagnostics (core/retrieval/retrievers.py)."""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pytest
from conftest import shared_fixture
from rank_bm25 import BM25Okapi

from core.execution.prompts import render_passage
from core.retrieval import retrievers as R
from core.types import Instance, Passage

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"


def _hotpot_instance(rec: dict) -> Instance:
    """HotpotQA record -> Instance, the mapping of SPEC §3.3 (independent of the importer)."""
    support = {t for t, _ in rec["supporting_facts"]}
    passages = []
    for i, (title, sents) in enumerate(rec["context"]):
        text = " ".join(s.strip() for s in sents if s.strip())
        gold = title in support
        passages.append(
            Passage(f"p{i + 1:04d}", i, title, text, title, "gold" if gold else "distractor", gold)
        )
    return Instance(rec["_id"], rec["question"], rec["answer"], tuple(passages), source="hotpotqa")


@lru_cache(maxsize=1)
def _hotpot_cached(path: str) -> tuple[Instance, ...]:
    with open(path, encoding="utf-8") as fh:
        return tuple(_hotpot_instance(r) for r in json.load(fh))


def hotpot() -> tuple[Instance, ...]:
    return _hotpot_cached(str(shared_fixture(HOTPOT)))


def _p(i: int, text: str, title: str = "", role: str = "filler", gold: bool = False) -> Passage:
    return Passage(f"p{i:04d}", i - 1, title, text, f"d{i}", role, gold)


def _words(n: int, stem: str) -> str:
    return " ".join(f"{stem}{j}" for j in range(n))


# ------------------------------------------------------------------------------ chunking


def test_chunk_windows_overlap_and_cover_the_stream():
    inst = Instance("x", "q", "a", (_p(1, _words(30, "a"), "A"), _p(2, _words(25, "b"), "B B")))
    # stream: 3 label + 1 title + 30 text = 34 tokens, then 3 + 2 + 25 = 30 tokens -> 64
    chunks = R.chunk_instance(inst, chunk_size=20, overlap=5)
    assert [(c.start, c.end) for c in chunks] == [(0, 20), (15, 35), (30, 50), (45, 64)]
    assert [c.chunk_id for c in chunks] == ["c0001", "c0002", "c0003", "c0004"]
    assert [c.ord for c in chunks] == [0, 1, 2, 3]
    # window 15..35 reaches only "[passage_id:" of p0002 (stream token 34): not an overlap
    assert [c.passage_ids for c in chunks] == [
        ("p0001",),
        ("p0001",),
        ("p0001", "p0002"),
        ("p0002",),
    ]
    assert all(c.n_tokens <= 20 for c in chunks)
    assert chunks[-1].end == 64


def test_chunk_text_keeps_markers_and_carries_them_into_continued_windows():
    inst = Instance("x", "q", "a", (_p(1, _words(30, "a"), "A"), _p(2, _words(25, "b"), "B B")))
    chunks = R.chunk_instance(inst, chunk_size=20, overlap=5)
    a = _words(30, "a").split()
    b = _words(25, "b").split()
    assert chunks[0].text == "[passage_id: p0001] Title: A\n" + " ".join(a[:16])
    # windows starting mid-passage carry the passage's marker
    assert chunks[1].text == "[passage_id: p0001] " + " ".join(a[11:])
    assert chunks[2].text == (
        "[passage_id: p0001] " + " ".join(a[26:]) + "\n\n"
        "[passage_id: p0002] Title: B B\n" + " ".join(b[:11])
    )
    assert chunks[3].text == "[passage_id: p0002] " + " ".join(b[6:])


def test_window_reaching_only_the_label_tokens_does_not_claim_the_passage():
    # stream: p1 = 3 + 1 + 6 = 10 tokens; window 0..12 holds "[passage_id: p0002] Title:" only
    inst = Instance("x", "q", "a", (_p(1, _words(6, "a"), "A"), _p(2, _words(20, "b"), "B")))
    chunks = R.chunk_instance(inst, chunk_size=13, overlap=3)
    assert chunks[0].passage_ids == ("p0001",)
    assert chunks[0].text == "[passage_id: p0001] Title: A\n" + _words(6, "a")
    assert chunks[1].passage_ids == ("p0002",)
    assert chunks[1].text.startswith("[passage_id: p0002] Title: B\nb0")


def test_chunk_of_a_whole_passage_matches_the_prompt_rendering():
    p1, p2 = _p(1, "Alpha beta gamma.", "First"), _p(2, "Delta epsilon.", "Second")
    (chunk,) = R.chunk_instance(Instance("x", "q", "a", (p1, p2)))
    assert chunk.text == render_passage(p1) + "\n\n" + render_passage(p2)
    assert chunk.passage_ids == ("p0001", "p0002")


def test_chunking_real_hotpotqa_covers_every_passage_and_token():
    for inst in hotpot()[:10]:
        chunks = R.chunk_instance(inst)
        total = sum(3 + len(p.title.split()) + len(p.text.split()) for p in inst.passages)
        assert chunks[0].start == 0 and chunks[-1].end == total
        for a, b in zip(chunks, chunks[1:], strict=False):
            assert b.start == a.start + 180 and a.end - b.start == 40
        seen = {pid for c in chunks for pid in c.passage_ids}
        assert seen == {p.passage_id for p in inst.passages}
        # every text token of every passage is shown by some chunk
        shown = " ".join(c.text for c in chunks).split()
        for p in inst.passages:
            assert set(p.text.split()) <= set(shown)


def test_chunking_rejects_bad_windows_and_handles_empty_instances():
    inst = Instance("x", "q", "a", (_p(1, "text"),))
    with pytest.raises(ValueError, match="overlap must be smaller"):
        R.chunk_instance(inst, chunk_size=10, overlap=10)
    with pytest.raises(ValueError, match="chunk_size"):
        R.chunk_instance(inst, chunk_size=0)
    with pytest.raises(ValueError, match="overlap"):
        R.chunk_instance(inst, chunk_size=10, overlap=-1)
    assert R.chunk_instance(Instance("x", "q", "a")) == []
    assert R.retrieve(Instance("x", "q", "a")) == []


# ---------------------------------------------------------------------------- retrievers


def _toy() -> Instance:
    return Instance(
        "toy",
        "Which river flows through Zarnovia?",
        "Velka",
        (
            _p(
                1,
                "The Velka river flows through Zarnovia and its capital.",
                "Zarnovia",
                "gold",
                True,
            ),
            _p(2, "Bread is baked every morning in the old town.", "Bakery", "distractor"),
            _p(3, "Zarnovia exports glass and timber.", "Economy", "distractor"),
            _p(4, "Bread is baked every morning in the old town.", "Bakery", "filler"),
        ),
    )


def test_lexical_is_rank_bm25_okapi_over_marker_free_tokens():
    inst = _toy()
    chunks = R.chunk_instance(inst, chunk_size=12, overlap=2)
    ranked = R.rank_chunks(inst, "lexical", 12, 2)
    corpus = [R.lexical_tokens(c.text) for c in chunks]
    assert not any("passage" in toks or "title" in toks for toks in corpus)
    expected = BM25Okapi(corpus, k1=1.5, b=0.75).get_scores(R.lexical_tokens(inst.question))
    assert [rc.score for rc in sorted(ranked, key=lambda rc: rc.chunk.ord)] == pytest.approx(
        list(expected)
    )
    assert ranked[0].chunk.passage_ids[0] == "p0001"
    assert [rc.rank for rc in ranked] == list(range(1, len(chunks) + 1))


def test_ties_are_broken_by_chunk_order():
    inst = Instance("x", "zzz", "a", tuple(_p(i, "same words here", "T") for i in (1, 2, 3)))
    ranked = R.retrieve(inst, "lexical", k=3, chunk_size=7, overlap=0)
    assert [rc.chunk.ord for rc in ranked] == [0, 1, 2]
    assert len({rc.score for rc in ranked}) == 1


def test_rrf_formula_on_a_hand_example():
    fused = R.rrf_fuse([[0, 1, 2], [2, 0, 1]])
    assert fused == [
        (0, pytest.approx(1 / 61 + 1 / 62)),
        (2, pytest.approx(1 / 63 + 1 / 61)),
        (1, pytest.approx(1 / 62 + 1 / 63)),
    ]
    assert R.rrf_fuse([[5], [7]]) == [(5, 1 / 61), (7, 1 / 61)]  # tie -> smaller id first
    assert R.rrf_fuse([[1, 0]], k=1) == [(1, 0.5), (0, 1 / 3)]


def test_iterative_fuses_question_and_expanded_query_rankings():
    inst = hotpot()[0]
    chunks = R.chunk_instance(inst)
    first = [rc.chunk.ord for rc in R.rank_chunks(inst, "lexical")]
    expanded = f"{inst.question} {R.search_text(chunks[first[0]].text)}"
    second = [rc.chunk.ord for rc in R.rank_chunks(inst, "lexical", query=expanded)]
    expected = R.rrf_fuse([first, second])
    got = R.rank_chunks(inst, "iterative")
    assert [(rc.chunk.ord, rc.score) for rc in got] == [(i, pytest.approx(s)) for i, s in expected]


@pytest.mark.parametrize("name", ["lexical", "iterative", "oracle"])
def test_retrievers_are_deterministic(name):
    for inst in hotpot()[:8]:
        a = R.retrieve(inst, name, k=4)
        b = R.retrieve(inst, name, k=4)
        assert a == b
        assert [rc.rank for rc in a] == [1, 2, 3, 4][: len(a)]


def test_oracle_puts_gold_chunks_first_and_reaches_full_recall_on_hotpotqa():
    recalls = []
    for inst in hotpot():
        chunks = R.chunk_instance(inst)
        gold = set(inst.gold_ids)
        n_gold_chunks = sum(1 for c in chunks if gold & set(c.passage_ids))
        ranked = R.retrieve(inst, "oracle", k=n_gold_chunks)
        assert all(gold & set(rc.chunk.passage_ids) for rc in ranked)
        recalls.append(R.retrieval_diagnostics(inst, ranked)["recall"])
    assert recalls == [1.0] * 53
    at3 = [R.retrieval_diagnostics(i, R.retrieve(i, "oracle", k=3))["recall"] for i in hotpot()]
    assert np.mean(at3) == 1.0


def test_bm25_k3_recall_on_the_hotpotqa_sample():
    diags = [R.retrieval_diagnostics(i, R.retrieve(i, "lexical", k=3)) for i in hotpot()]
    # The reported figure for the 53-example HotpotQA sample (lexical@3, chunk 220/40).
    assert np.mean([d["recall"] for d in diags]) == pytest.approx(96 / 106)
    assert np.mean([d["full_chain_coverage"] for d in diags]) == pytest.approx(43 / 53)
    assert np.mean([d["passages_per_context"] for d in diags]) == pytest.approx(401 / 53)


def test_dense_and_hybrid_on_a_few_instances():
    class CountingCache(R.MemoryEmbeddingCache):
        def __init__(self):
            super().__init__()
            self.puts = 0

        def put(self, key, vector):
            self.puts += 1
            super().put(key, vector)

    cache = CountingCache()
    for inst in hotpot()[:3]:
        n = len(R.chunk_instance(inst))
        dense = R.rank_chunks(inst, "dense", embedding_cache=cache)
        assert sorted(rc.chunk.ord for rc in dense) == list(range(n))
        assert all(-1.0 <= rc.score <= 1.0 for rc in dense)
        before = cache.puts
        again = R.rank_chunks(inst, "dense", embedding_cache=cache)
        assert cache.puts == before  # served from the cache
        assert again == dense
        lexical = [rc.chunk.ord for rc in R.rank_chunks(inst, "lexical")]
        expected = R.rrf_fuse([lexical, [rc.chunk.ord for rc in dense]])
        hybrid = R.rank_chunks(inst, "hybrid", embedding_cache=cache)
        assert [(rc.chunk.ord, rc.score) for rc in hybrid] == expected
    key = R.text_sha256(hotpot()[0].question)
    assert cache.get(key) is not None and cache.get(key).shape == (384,)


# ------------------------------------------------------------------ registry, ids, rerank


def test_registry_declares_parameters():
    assert R.list_retrievers()[:5] == ["lexical", "dense", "hybrid", "iterative", "oracle"]
    params = {p.name: p for p in R.retriever_params("lexical")}
    assert params["k1"].default == 1.5 and params["k1"].type is float
    assert params["b"].default == 0.75 and params["b"].description
    it = {p.name: p for p in R.retriever_params("iterative")}
    assert it["base"].choices == ("lexical", "dense", "hybrid")
    assert not R.RETRIEVERS["oracle"].deployable
    assert [p.name for p in R.COMMON_PARAMS] == ["k", "chunk_size", "overlap"]


def test_bad_retriever_names_and_params_are_value_errors():
    inst = _toy()
    with pytest.raises(ValueError, match="unknown retriever 'bm99'.*lexical"):
        R.retrieve(inst, "bm99")
    with pytest.raises(ValueError, match="no parameter 'alpha'.*k1, b"):
        R.retrieve(inst, "lexical", alpha=1)
    with pytest.raises(ValueError, match="'b' must be <= 1"):
        R.retrieve(inst, "lexical", b=2)
    with pytest.raises(ValueError, match="'base'.*not one of"):
        R.retrieve(inst, "iterative", base="oracle")
    with pytest.raises(ValueError, match="'k' must be >= 1"):
        R.retrieve(inst, "lexical", k=0)
    assert R.retrieve(inst, "lexical", k="2", k1="1.2")  # CLI strings are coerced


def test_condition_ids_are_canonical_and_parse_back():
    assert R.retrieval_condition_id() == "retrieved|lexical@3|chunk220/40"
    assert R.retrieval_condition_id("lexical", 5, k1=1.5) == "retrieved|lexical@5|chunk220/40"
    cid = R.retrieval_condition_id("iterative", 8, 128, 16, expand_top=2, base="hybrid")
    assert cid == "retrieved|iterative@8|chunk128/16|base=hybrid|expand_top=2"
    assert R.parse_retrieval_condition(cid) == {
        "retriever": "iterative",
        "k": 8,
        "chunk_size": 128,
        "overlap": 16,
        "base": "hybrid",
        "expand_top": 2,
    }
    ce = R.retrieval_condition_id("hybrid", 16, rerank="ce-local", rerank_pool=64)
    assert ce == "retrieved|hybrid@16|chunk220/40|rerank=ce-local@64"
    assert R.parse_retrieval_condition(ce)["rerank_pool"] == 64
    with pytest.raises(ValueError, match="not a retrieved-condition id"):
        R.parse_retrieval_condition("full_context")


def test_rerank_without_a_local_model_is_a_clear_value_error(tmp_path):
    missing = str(tmp_path / "no-such-cross-encoder")
    with pytest.raises(ValueError, match="not available locally"):
        R.retrieve(_toy(), "lexical", rerank=missing)
    assert R.rerank_available(missing) is False


def test_rerank_with_a_scoring_callable_reorders_the_pool():
    inst = hotpot()[1]
    first = R.retrieve(inst, "lexical", k=4)

    def by_length(query, texts):
        return [float(len(t)) for t in texts]

    got = R.retrieve(inst, "lexical", k=2, rerank=by_length, rerank_pool=4)
    pool = sorted(first, key=lambda rc: (-len(R.search_text(rc.chunk.text)), rc.chunk.ord))
    assert [rc.chunk for rc in got] == [rc.chunk for rc in pool[:2]]
    assert [rc.rank for rc in got] == [1, 2]


# ----------------------------------------------------------------------------- diagnostics


def test_diagnostics_on_a_hand_example():
    inst = Instance(
        "x",
        "q",
        "a",
        (
            _p(1, "one", "A", "gold", True),
            _p(2, "two", "B", "distractor"),
            _p(3, "three", "C", "gold", True),
            _p(4, "four", "D", "conflicting"),
            _p(5, "five", "E", "filler"),
        ),
    )

    def rc(rank, *ids):
        return R.RankedChunk(rank, 1.0, R.Chunk(f"c{rank:04d}", rank - 1, "", ids, 0, 1))

    d = R.retrieval_diagnostics(inst, [rc(1, "p0001", "p0002"), rc(2, "p0002", "p0004")])
    assert d["recall"] == 0.5
    assert d["full_chain_coverage"] == 0.0
    assert d["precision"] == pytest.approx(1 / 3)
    assert d["f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert d["distractor_rate"] == pytest.approx(2 / 3)
    assert d["passages_per_context"] == 3
    assert d["retrieved_ids"] == ["p0001", "p0002", "p0004"]
    full = R.retrieval_diagnostics(inst, [rc(1, "p0001", "p0003", "p0005")])
    assert (full["recall"], full["full_chain_coverage"], full["distractor_rate"]) == (1.0, 1.0, 0)
    empty = R.retrieval_diagnostics(inst, [])
    assert (empty["recall"], empty["precision"], empty["passages_per_context"]) == (0.0, 0.0, 0)
    no_gold = R.retrieval_diagnostics(Instance("y", "q", "a", (_p(1, "x"),)), [rc(1, "p0001")])
    assert math.isnan(no_gold["recall"]) and math.isnan(no_gold["full_chain_coverage"])
