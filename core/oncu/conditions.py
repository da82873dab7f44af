"""The four evidence conditions as planned model calls (SPEC §6.1; seed 000 §6.1).

:func:`plan_conditions` turns instances into :class:`~core.types.PlannedCall` records, one per
(instance, condition), with variant ``""``:

- ``no_evidence``: the question only;
- ``full_context``: every passage in stored order;
- ``retrieved``: the top-k chunks of the configured retriever (SPEC §4), in rank order;
- ``oracle``: the gold passages only, in stored order. Not planned for an instance that is not
  oracle-applicable or has no gold passage (there is nothing to isolate; ONCU reports such
  groups as invalid with ``empty_oracle_evidence``).

Prompts come from the fixed templates of :mod:`core.execution.prompts` only, so gold labels never
reach
a model. Call order serves the model server's prefix cache (Ollama reuses the KV cache of the
longest common token prefix per slot): instances keep their dataset order and one instance's
calls run together, sorted by their rendered prompt text, which puts prompts that share the
longest prefix next to each other (sorted order maximizes the sum of adjacent common-prefix
lengths). The order is a pure function of the inputs, so the same store and configuration give
the same plan.

:func:`retrieval_audit` is the retrieval-only side of the retrieved condition (seed 000
App. A.10-A.11): per (instance, retriever, k) recall, full-chain coverage, evidence F1,
distractor rate and passages per context, and their means per (retriever, k).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.execution.prompts import build_messages, prompt_hash
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP, TOP_K
from core.retrieval.retrievers import (
    RERANK_POOL,
    EmbeddingCache,
    check_rerank_pool,
    chunk_instance,
    default_rerank_model,
    rank_chunks,
    reranker,
    retrieval_condition_id,
    retrieval_diagnostics,
    retrieve,
)
from core.types import CONDITIONS, Instance, PlannedCall

__all__ = [
    "AUDIT_METRICS",
    "RetrievalAudit",
    "check_conditions",
    "plan_conditions",
    "planned_keys",
    "retrieval_audit",
    "retrieval_config",
]

#: Per-context metrics of the retrieval audit (means are reported per retriever and k).
AUDIT_METRICS = (
    "recall",
    "full_chain_coverage",
    "evidence_f1",
    "distractor_rate",
    "passages_per_context",
)


def check_conditions(conditions: Iterable[str]) -> tuple[str, ...]:
    """Validate condition names; returns them de-duplicated, in the given order.

    Raises:
        ValueError: an unknown condition (the message names it and the allowed ones), or none.
    """
    out: list[str] = []
    for cond in conditions:
        cond = str(cond).strip()
        if cond not in CONDITIONS:
            raise ValueError(f"unknown condition {cond!r}; choose from: {', '.join(CONDITIONS)}")
        if cond not in out:
            out.append(cond)
    if not out:
        raise ValueError(f"no condition given; choose from: {', '.join(CONDITIONS)}")
    return tuple(out)


def retrieval_config(
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    rerank: int | None = None,
    rerank_model: str | None = None,
) -> dict[str, Any]:
    """The retrieved condition's configuration as recorded on a run.

    Args:
        retriever: retriever family (the first stage when ``rerank`` is given).
        top_k: chunks shown to the reader (k).
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        rerank: CE@N->k: the first-stage candidates N a reranker rescores (N >= k); None for
            no rerank stage.
        rerank_model: the reranker (:func:`core.retrieval.retrievers.reranker`; default
            :func:`core.retrieval.retrievers.default_rerank_model`), recorded only with ``rerank``.

    Returns:
        ``retriever``, ``top_k``, ``chunk_size``, ``overlap``, with ``rerank`` (N) and
        ``rerank_model`` when reranking, and ``condition_id`` (the canonical id, e.g.
        ``retrieved|lexical@3|chunk220/40``, or ``...|rerank=<model>@<N>``): another N or
        model is another configuration, which a stored run refuses to resume with.

    Raises:
        ValueError: unknown retriever, a bad value, or a rerank N smaller than ``top_k``.
    """
    config: dict[str, Any] = {
        "retriever": retriever,
        "top_k": int(top_k),
        "chunk_size": int(chunk_size),
        "overlap": int(overlap),
    }
    model = None
    if rerank is not None:
        config["rerank"] = check_rerank_pool(rerank, top_k)
        config["rerank_model"] = model = rerank_model or default_rerank_model()
    config["condition_id"] = retrieval_condition_id(
        retriever,
        top_k,
        chunk_size,
        overlap,
        rerank=model,
        rerank_pool=config.get("rerank", RERANK_POOL.default),
    )
    return config


def _oracle_applies(instance: Instance) -> bool:
    return bool(instance.oracle_applicable) and bool(instance.gold_ids)


def planned_keys(instance: Instance, conditions: Iterable[str]) -> list[tuple[str, str, str]]:
    """The ``(instance_id, condition, variant)`` keys of one instance's planned calls.

    The keys :func:`plan_conditions` gives, without building a prompt (the engine skips fully
    stored instances with it).
    """
    return [
        (instance.instance_id, c, "")
        for c in check_conditions(conditions)
        if c != "oracle" or _oracle_applies(instance)
    ]


#: JSON's escapes of backslash, quote, newline, CR and tab as byte replacements (backslash
#: first, so the backslashes the others add are not doubled).
_JSON_ESCAPES = (
    (b"\\", b"\\\\"),
    (b'"', b'\\"'),
    (b"\n", b"\\n"),
    (b"\r", b"\\r"),
    (b"\t", b"\\t"),
)


def _json_body(text: str) -> bytes | None:
    """``json.dumps(text, ensure_ascii=False)[1:-1]`` in UTF-8, or None for the slow cases.

    Byte replacements run at memory speed where the JSON encoder walks the text character by
    character. Control characters other than newline, CR and tab (rare in prompts) have
    special escapes; None leaves those texts to the encoder.
    """
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: prompt_hash raises the same error
        return None
    octets = np.frombuffer(raw, dtype=np.uint8)
    if octets[octets < 0x20].tobytes().translate(None, b"\n\r\t"):
        return None
    for old, new in _JSON_ESCAPES:
        raw = raw.replace(old, new)
    return raw


def _prompt_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """:func:`core.execution.prompts.prompt_hash` of the messages, without JSON-encoding them.

    ``prompt_hash`` hashes ``[{"content":...,"role":...},...]`` (compact, sorted keys, UTF-8);
    this builds the same bytes piece by piece, so the digest (the response-cache key) is
    identical, at about a fifth of the cost on a 50 KB prompt. Anything unusual (a
    non-string field, a rare control character) takes ``prompt_hash`` itself.
    """
    digest = hashlib.sha256(b"[")
    for i, message in enumerate(messages):
        content, role = message["content"], message["role"]
        if not (isinstance(content, str) and isinstance(role, str)):
            return prompt_hash(messages)
        body, role_body = _json_body(content), _json_body(role)
        if body is None or role_body is None:
            return prompt_hash(messages)
        digest.update(b',{"content":"' if i else b'{"content":"')
        digest.update(body)
        digest.update(b'","role":"')
        digest.update(role_body)
        digest.update(b'"}')
    digest.update(b"]")
    return digest.hexdigest()


def _call(
    instance: Instance,
    condition: str,
    evidence: Sequence[Any] | None,
    input_ids: Sequence[str],
    meta: Mapping[str, Any],
) -> PlannedCall:
    messages = tuple(build_messages(instance, condition, evidence))
    return PlannedCall(
        instance_id=instance.instance_id,
        condition=condition,
        variant="",
        messages=messages,
        input_passage_ids=tuple(input_ids),
        prompt_hash=_prompt_hash(messages),
        meta=dict(meta),
    )


def _plan_instance(
    instance: Instance,
    conditions: Sequence[str],
    config: Mapping[str, Any],
    embedding_cache: EmbeddingCache | None,
    scorer: Callable[[str, Sequence[str]], Sequence[float]] | None = None,
) -> list[PlannedCall]:
    calls = []
    for cond in conditions:
        if cond == "no_evidence":
            calls.append(_call(instance, cond, None, (), {}))
        elif cond == "full_context":
            ids = [p.passage_id for p in instance.passages]
            calls.append(_call(instance, cond, None, ids, {}))
        elif cond == "oracle":
            if _oracle_applies(instance):
                calls.append(_call(instance, cond, None, instance.gold_ids, {}))
        else:
            ranked = retrieve(
                instance,
                config["retriever"],
                config["top_k"],
                config["chunk_size"],
                config["overlap"],
                rerank=scorer,
                rerank_pool=config.get("rerank", RERANK_POOL.default),
                embedding_cache=embedding_cache,
            )
            ids = list(dict.fromkeys(pid for rc in ranked for pid in rc.chunk.passage_ids))
            meta = {
                "retrieval": config["condition_id"],
                "chunk_ids": [rc.chunk.chunk_id for rc in ranked],
                "chunk_scores": [round(float(rc.score), 6) for rc in ranked],
            }
            calls.append(_call(instance, cond, ranked, ids, meta))
    if len(calls) < 2:
        return calls
    # Prompts sharing the longest prefix end up adjacent; ties keep a fixed order.
    return sorted(
        calls,
        key=lambda c: (
            "\x00".join(m["content"] for m in c.messages),
            CONDITIONS.index(c.condition),
        ),
    )


def plan_conditions(
    instances: Iterable[Instance],
    conditions: Iterable[str],
    *,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    rerank: int | None = None,
    rerank_model: str | None = None,
    embedding_cache: EmbeddingCache | None = None,
    each: Callable[[PlannedCall], None] | None = None,
) -> list[PlannedCall]:
    """Plan the calls of the four-condition protocol (SPEC §6.1).

    Args:
        instances: the instances, in dataset order.
        conditions: any of ``no_evidence``, ``full_context``, ``retrieved``, ``oracle``.
        retriever: retriever family of the retrieved condition (``lexical`` by default).
        top_k: chunks shown in the retrieved condition.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        rerank: CE@N->k: rescore the retriever's top N chunks with ``rerank_model`` and show
            the best ``top_k`` (None: no rerank stage); the retrieved calls' chunk scores are
            then the reranker's.
        rerank_model: the reranker (:func:`core.retrieval.retrievers.reranker`), loaded once, before
            any instance is planned.
        embedding_cache: where embedding retrievers keep vectors (default: in-process).
        each: called with each call as soon as it is planned (the engine sends the first
            prompts to the reader while the rest are planned).

    Returns:
        One call per (instance, condition), variant ``""``; oracle is left out for instances
        without gold evidence. Retrieved calls carry ``meta`` with the canonical retrieval
        id, the chunk ids shown and their scores.

    Raises:
        ValueError: an unknown condition or retriever, a bad retrieval setting, or a rerank
            model that is not available offline.
    """
    conds = check_conditions(conditions)
    config = retrieval_config(retriever, top_k, chunk_size, overlap, rerank, rerank_model)
    scorer = None
    if "rerank" in config and "retrieved" in conds:
        scorer = reranker(config["rerank_model"])
    calls: list[PlannedCall] = []
    for instance in instances:
        planned = _plan_instance(instance, conds, config, embedding_cache, scorer)
        if each is not None:
            for call in planned:
                each(call)
        calls.extend(planned)
    return calls


# ------------------------------------------------------------------------ retrieval audit


@dataclass(frozen=True, slots=True)
class RetrievalAudit:
    """Retrieval-only diagnostics (seed 000 App. A.11, Table 32).

    Attributes:
        per_instance: one row per (instance, retriever, k): ``instance_id``, ``retriever``,
            ``k`` and :data:`AUDIT_METRICS` (recall, coverage and evidence F1 are NaN for an
            instance without gold evidence).
        aggregate: one row per (retriever, k): ``n_instances``, ``n_with_gold`` and the mean
            of each metric (NaN rows skipped, so recall, coverage and F1 average over the
            instances that have gold evidence).
    """

    per_instance: pd.DataFrame
    aggregate: pd.DataFrame


def retrieval_audit(
    instances: Iterable[Instance],
    retrievers: Sequence[str] = ("lexical",),
    ks: Sequence[int] = (3,),
    *,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    embedding_cache: EmbeddingCache | None = None,
) -> RetrievalAudit:
    """Recall, chain coverage, evidence F1, distractor rate and passages per context.

    Each (instance, retriever) is ranked once and cut at every k, so the top-k lists are
    exactly those of :func:`core.retrieval.retrievers.retrieve` with the same settings.

    Args:
        instances: the instances (gold labels are read here, never shown to a model).
        retrievers: retriever families (``lexical``, ``dense``, ``hybrid``, ``iterative``,
            ``oracle``).
        ks: retrieval budgets.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        embedding_cache: where embedding retrievers keep vectors.

    Returns:
        The per-instance rows and the per-(retriever, k) means.

    Raises:
        ValueError: an unknown retriever, a k below 1, or an unavailable model.
    """
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"k values must be integers >= 1, got {list(ks)}")
    for name in retrievers:
        retrieval_condition_id(name, ks[0], chunk_size, overlap)  # validates name and window
    rows = []
    for instance in instances:
        chunks = chunk_instance(instance, chunk_size, overlap)
        for name in retrievers:
            ranked = rank_chunks(
                instance,
                name,
                chunk_size,
                overlap,
                embedding_cache=embedding_cache,
                chunks=chunks,
            )
            for k in ks:
                d = retrieval_diagnostics(instance, ranked[:k])
                rows.append(
                    {"instance_id": instance.instance_id, "retriever": name, "k": k}
                    | {m: d["f1" if m == "evidence_f1" else m] for m in AUDIT_METRICS}
                )
    per = pd.DataFrame(rows, columns=["instance_id", "retriever", "k", *AUDIT_METRICS])
    agg_rows = []
    for name in retrievers:
        for k in ks:
            sub = per[(per["retriever"] == name) & (per["k"] == k)]
            row: dict[str, Any] = {
                "retriever": name,
                "k": k,
                "n_instances": int(len(sub)),
                "n_with_gold": int(sub["recall"].notna().sum()),
            }
            for m in AUDIT_METRICS:
                vals = pd.to_numeric(sub[m], errors="coerce").dropna()
                row[m] = float(vals.mean()) if len(vals) else math.nan
            agg_rows.append(row)
    agg = pd.DataFrame(
        agg_rows, columns=["retriever", "k", "n_instances", "n_with_gold", *AUDIT_METRICS]
    )
    return RetrievalAudit(per_instance=per, aggregate=agg)
