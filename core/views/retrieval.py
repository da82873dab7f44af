"""The retrieval-diagnostics view: the retrieval audit of the selection's dataset (SPEC §4)."""

from __future__ import annotations

import pandas as pd

from core.figures.retrieval import (
    CHUNK_SIZE,
    KS,
    MAX_INSTANCES,
    OFFERED_KS,
    OVERLAP,
    RETRIEVERS,
)
from core.oncu.conditions import retrieval_audit
from core.retrieval.dense_fill import dense_model_id, dense_texts, missing_texts
from core.retrieval.retrievers import EmbeddingCache, rankable, text_sha256
from core.selection import Selection, option
from core.store import Store
from core.store.embeddings import StoreEmbeddingCache
from core.types import Instance
from core.views.common import apply_filters, cached

__all__ = [
    "audit_dataset",
    "audit_with_text",
    "dense_todo",
    "embedding_cache",
    "retrieval_audit_frames",
]

#: Retriever families that embed texts with the dense model.
DENSE_FAMILIES = ("dense", "hybrid")


def audit_dataset(store: Store, selection: Selection) -> str | None:
    """``selection.dataset``, else the first selected run's dataset, else the first dataset."""
    if selection.dataset:
        return selection.dataset
    if selection.runs:
        row = store.run_row(selection.runs[0])
        return None if row is None else row.get("dataset_id")
    names = store.dataset_names()
    return names[0] if names else None


def audit_with_text(
    instances: list[Instance],
    retrievers: tuple[str, ...] | list[str],
    ks: tuple[int, ...] | list[int],
    chunk_size: int,
    overlap: int,
    embedding_cache: EmbeddingCache | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`core.oncu.conditions.retrieval_audit` of the instances with passage text.

    Instances without passage text (a dataset imported from results files) are not ranked:
    ranking their empty passages would report recall = coverage = 1 that nobody measured.
    The aggregate counts them in ``n_no_text`` and says why in ``missing``
    (:func:`core.retrieval.retrievers.rankable`; None when every instance was audited); with none
    left
    its metric columns are NaN (``n_instances`` 0).
    """
    keep, n_missing, reason = rankable(instances)
    audit = retrieval_audit(
        keep,
        retrievers=retrievers,
        ks=ks,
        chunk_size=chunk_size,
        overlap=overlap,
        embedding_cache=embedding_cache,
    )
    agg = audit.aggregate.copy()
    agg["n_no_text"] = n_missing
    agg["missing"] = reason
    return audit.per_instance, agg


def retrieval_audit_frames(store: Store, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_instance, aggregate)`` retrieval diagnostics of the selection's dataset.

    Metadata filters of the selection restrict the instances; at most ``max_instances`` (the
    first ones) are audited. Options: ``retrievers``, ``ks``, ``chunk_size``, ``overlap``,
    ``max_instances`` (:mod:`core.figures.retrieval`). Cached per store version.

    Raises:
        ValueError: unknown retriever, bad k, or an unavailable dense model.
    """
    name = audit_dataset(store, selection)
    if name is None:
        empty = pd.DataFrame(columns=["instance_id", "retriever", "k"])
        return empty, pd.DataFrame(columns=["retriever", "k", "n_instances"])

    cap = option(selection, MAX_INSTANCES)
    retrievers = tuple(option(selection, RETRIEVERS))
    chunk_size, overlap = option(selection, CHUNK_SIZE), option(selection, OVERLAP)
    ks = sorted({int(k) for k in option(selection, KS)})
    # every offered k is audited with the selected ones: each (retriever, k) row depends on
    # its k alone, so changing the top-k selection only picks other rows of this entry
    every_k = tuple(sorted({*ks, *OFFERED_KS})) if ks and ks[0] >= 1 else tuple(ks)
    filters = tuple(sorted((c, tuple(v)) for c, v in selection.filters.items()))

    def build() -> tuple[pd.DataFrame, pd.DataFrame]:
        instances = _audit_instances(store, selection, name)
        vectors = embedding_cache(store)
        if set(retrievers) & set(DENSE_FAMILIES):  # one store read for every stored vector
            vectors.get_many(text_sha256(t) for t in dense_texts(instances, chunk_size, overlap))
        frames = audit_with_text(instances, retrievers, every_k, chunk_size, overlap, vectors)
        vectors.flush()  # vectors embedded during the ranking (e.g. iterative queries)
        return frames

    key = (name, filters, cap, retrievers, chunk_size, overlap, every_k)
    per, agg = cached(store, "retrieval", key, build)
    per = per[per["k"].isin(ks)].reset_index(drop=True)
    agg = agg[agg["k"].isin(ks)].reset_index(drop=True)
    return per, agg


def _audit_instances(store: Store, selection: Selection, name: str) -> list:
    """The instances the audit of ``selection`` ranks: filtered, the first ``max_instances``."""
    cap = option(selection, MAX_INSTANCES)
    if selection.filters:
        frame = apply_filters(store.instances_frame(name), selection.filters)
        ids = frame["instance_id"].head(cap).tolist()
    else:
        ids = store.list_instance_ids(name, cap)
    return store.load_instances(name, ids) if ids else []


def embedding_cache(store: Store) -> StoreEmbeddingCache:
    """The dense model's vectors kept in ``store`` (read on demand, written in batches)."""
    return StoreEmbeddingCache(store, dense_model_id())


def dense_todo(store: Store, selection: Selection) -> tuple[list[str], int]:
    """``(texts still to embed, texts in all)`` for the selection's dense rankings.

    Nothing to do (``([], 0)``) unless a selected retriever family embeds texts
    (:data:`DENSE_FAMILIES`, or ``iterative``, whose default base is lexical: not counted).
    The texts are the audited instances' questions and chunks
    (:func:`core.retrieval.dense_fill.dense_texts`);
    those not in the store's embedding table are to embed.
    """
    if not set(option(selection, RETRIEVERS)) & set(DENSE_FAMILIES):
        return [], 0
    name = audit_dataset(store, selection)
    if name is None:
        return [], 0
    instances = rankable(_audit_instances(store, selection, name))[0]
    texts = dense_texts(instances, option(selection, CHUNK_SIZE), option(selection, OVERLAP))
    return missing_texts(texts, embedding_cache(store)), len(texts)
