"""Retrieval: chunking, retrievers, fast BM25, reranking, dense embeddings.

One concept per module:

- :mod:`core.retrieval.bm25`: BM25 (Okapi) scores equal to ``rank_bm25.BM25Okapi``'s, bit for bit,
  at a fraction of its cost;
- :mod:`core.retrieval.chunks`: chunking: an instance's passages cut into windows of tokens, the
  chunk records, the knobs;
- :mod:`core.retrieval.dense_fill`: A dataset's chunks embedded ahead of a dense ranking, in
  batches, with progress (issue 18.5);
- :mod:`core.retrieval.embeddings`: the dense retriever's embeddings: the model loaded offline, the
  embedding caches, scores;
- :mod:`core.retrieval.rerank`: reranking, the optional second stage of retrieval: CE@N->k (SPEC §4;
- :mod:`core.retrieval.retrievers`: chunking and retriever families: Instance -> ranked chunks (SPEC
  §4.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("EPSILON", "bm25_okapi_scores", "chunk_tokens"),
        "bm25",
    ),
    **dict.fromkeys(
        ("dense_model_id", "dense_texts", "embed_into", "missing_texts"),
        "dense_fill",
    ),
    **dict.fromkeys(
        ("check_rerank_name", "rerank_order"),
        "rerank",
    ),
    **dict.fromkeys(
        (
            "CHUNK_SIZE",
            "COMMON_PARAMS",
            "Chunk",
            "DEFAULT_DENSE_MODEL",
            "DEFAULT_RERANK_MODEL",
            "EmbeddingCache",
            "MemoryEmbeddingCache",
            "NO_TEXT_REASON",
            "OVERLAP",
            "ParamInfo",
            "RERANK",
            "RERANKERS",
            "RERANK_MODEL",
            "RERANK_MODEL_ENV",
            "RERANK_POOL",
            "RETRIEVERS",
            "RRF_K",
            "RankedChunk",
            "RerankScorer",
            "RetrieverSpec",
            "TOP_K",
            "check_rerank_pool",
            "chunk_instance",
            "default_rerank_model",
            "dense_model",
            "has_passage_text",
            "lexical_tokens",
            "list_retrievers",
            "parse_retrieval_condition",
            "rank_chunks",
            "rankable",
            "register_reranker",
            "register_retriever",
            "rerank_available",
            "rerank_unavailable",
            "reranker",
            "retrieval_condition_id",
            "retrieval_diagnostics",
            "retrieve",
            "retriever_param",
            "retriever_params",
            "rrf_fuse",
            "search_text",
            "text_sha256",
        ),
        "retrievers",
    ),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
