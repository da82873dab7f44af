"""The dense retriever's vectors kept in the store, embedded with progress (issue 18 item 5).

- the store's ``embeddings`` table round-trips float32 vectors, ignores keys it holds, and a
  store without the table holds none;
- a dense ranking through the store cache equals the ranking through the in-memory cache;
- :func:`core.retrieval.dense_fill.embed_into` reports progress per batch, a stop keeps the written
  batches and the next fill embeds only the rest;
- the Retrieval view reads every vector from the store once filled: a second audit in a
  fresh cache does not run the model at all (the model is replaced by one that fails);
- the Retrieval page (AppTest) shows the progress text and then the figure; Stop keeps what
  was embedded and offers Resume.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.datasets.controlled import build_controlled
from core.retrieval import dense_fill
from core.retrieval import retrievers as R
from core.selection import Selection
from core.store import Store
from core.store.embeddings import StoreEmbeddingCache
from core.views import retrieval as V
from core.views.common import clear_cache

_N = 4  # instances of controlled-200 (a few hundred chunks and questions)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("dense") / "store.duckdb")
    store.write_dataset(build_controlled("controlled-200", limit=_N, name="tiny"))
    return store


def _selection(retrievers=("dense",)) -> Selection:
    return Selection(dataset="tiny", options={"retrievers": list(retrievers), "ks": [1, 3]})


def test_store_round_trips_vectors_and_ignores_known_keys(tmp_path):
    s = Store(tmp_path / "s.duckdb")
    assert s.stored_embeddings("m", ["a"]) == {}  # no table yet: none stored
    v = np.array([0.1, -2.5, 3e-8], dtype=np.float32)
    assert s.save_embeddings("m", {"a": v, "b": v * 2}) == 2
    assert s.save_embeddings("m", {"a": v * 9, "c": v}) == 1  # "a" keeps its first vector
    got = s.stored_embeddings("m", ["a", "b", "c", "zz"])
    assert sorted(got) == ["a", "b", "c"]
    assert got["a"].dtype == np.float32 and np.array_equal(got["a"], v)
    assert np.array_equal(got["b"], v * 2)
    assert s.stored_embeddings("other model", ["a"]) == {}


def test_dense_ranking_through_the_store_equals_the_memory_cache(store):
    inst = store.load_instances("tiny", store.list_instance_ids("tiny", 1))[0]
    memory = R.rank_chunks(inst, "dense", embedding_cache=R.MemoryEmbeddingCache())
    first = StoreEmbeddingCache(store, "test-model")
    assert R.rank_chunks(inst, "dense", embedding_cache=first) == memory
    assert first.flush() == len(R.chunk_instance(inst)) + 1  # chunks and the question
    again = StoreEmbeddingCache(store, "test-model")  # a fresh process's cache
    assert R.rank_chunks(inst, "dense", embedding_cache=again) == memory
    assert again.flush() == 0  # every vector came from the store


class _Stop(Exception):
    pass


def test_fill_reports_progress_and_a_stop_keeps_the_batches(tmp_path):
    s = Store(tmp_path / "fill.duckdb")
    s.write_dataset(build_controlled("controlled-200", limit=2, name="two"))
    texts = dense_fill.dense_texts(s.load_instances("two", s.list_instance_ids("two", 2)), 220, 40)
    assert len(texts) == len(set(texts)) > 10
    seen = []

    def stop_after_two(done: int, total: int, seconds: float) -> None:
        seen.append((done, total))
        if len(seen) == 3:  # 0, one batch, two batches: stop
            raise _Stop

    cache = StoreEmbeddingCache(s, "m")
    with pytest.raises(_Stop):
        dense_fill.embed_into(texts, cache, stop_after_two, batch=4)
    assert seen == [(0, len(texts)), (4, len(texts)), (8, len(texts))]
    rest = dense_fill.missing_texts(texts, StoreEmbeddingCache(s, "m"))
    assert rest == texts[8:]  # the two batches were written before the stop
    assert dense_fill.embed_into(rest, StoreEmbeddingCache(s, "m")) == len(texts) - 8
    assert dense_fill.missing_texts(texts, StoreEmbeddingCache(s, "m")) == []


def test_view_reads_stored_vectors_without_the_model(store, monkeypatch):
    sel = _selection(("dense", "hybrid"))
    todo, total = V.dense_todo(store, sel)
    assert total > 0 and len(todo) <= total
    dense_fill.embed_into(todo, V.embedding_cache(store))
    assert V.dense_todo(store, sel) == ([], total)
    expected = V.retrieval_audit_frames(store, sel)

    def no_model():
        raise AssertionError("the model ran although every vector is stored")

    monkeypatch.setattr(R, "dense_model", no_model)
    clear_cache()  # as in a fresh process: the audit is computed again, from stored vectors
    per, agg = V.retrieval_audit_frames(store, sel)
    assert agg.equals(expected[1]) and per.equals(expected[0])
    assert set(agg["retriever"]) == {"dense", "hybrid"}


def test_lexical_only_selection_needs_no_embeddings(store):
    assert V.dense_todo(store, _selection(("lexical", "oracle"))) == ([], 0)


def test_retrieval_page_embeds_with_progress_then_stops_and_resumes(tmp_path, monkeypatch):
    from conftest import open_page

    db = tmp_path / "page.duckdb"
    Store(db).write_dataset(build_controlled("controlled-200", limit=2, name="two"))
    at = open_page(monkeypatch, db, "screens/retrieval.py", "two")
    # the user stopped the embedding: no dense figure, the count of what is left, Resume
    at.session_state["retrieval.embed_paused"] = True
    at.multiselect(key="retrieval.retrievers").set_value(["lexical", "dense"]).run()
    assert not at.exception, [e.value for e in at.exception]
    info = " ".join(i.value for i in at.info)
    assert "Dense ranking stopped: 0 of" in info and "Resume embeds the other" in info
    assert not at.get("plotly_chart")
    # Resume: everything is embedded (progress bar while it runs), then the figure shows
    at.button(key="retrieval.embed_resume").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.get("plotly_chart")
    store = Store(db)
    sel = Selection(dataset="two", options={"retrievers": ["dense"], "ks": [1]})
    todo, total = V.dense_todo(store, sel)
    assert todo == [] and total > 0
