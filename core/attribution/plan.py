"""Attribution runs as planned model calls: random ablations of the shown passages (issue 40).

Pure planning: no store, no backend. ContextCite (Cohen-Wang et al., NeurIPS 2024) attributes
one answer to the passages of its context by answering many *ablated* contexts, each passage
kept independently with probability ``keep``, and fitting a sparse linear surrogate of a
target (how much of the unablated answer each ablated call keeps) on the ablation masks
(:mod:`core.attribution`). This module plans those calls for one instance:

- ``full``: the unablated context of the chosen condition (``full_context``: every passage in
  stored order; ``oracle``: the gold passages; ``retrieved``: the retriever's top-k chunks,
  viewed as passage segments like CUE-R's, :func:`core.cuer.interventions.evidence_items`). Its
  prompt is exactly that condition's prompt, so a conditions run's stored reply is reused
  through the response cache;
- ``abl:0000`` ... ``abl:NNNN``: one call per mask. Passage ``j`` (in shown order) is kept
  when ``mask[j]``; the other passages are dropped and nothing else changes (the kept ones
  stay where they were, like CUE-R's ``remove``). Masks are drawn from a generator seeded by
  ``(seed, instance id)`` (:func:`ablation_masks`), so the same settings give the same masks
  on every machine and a resumed run plans the same calls. A mask that keeps nothing is the
  no-evidence prompt;
- ``top1drop`` / ``top2drop``: the unablated context without the ``k`` passages of highest
  surrogate weight (:func:`plan_topk_drop`, planned after the ablations are answered).

Every call is stored as a prediction of the attribution run: condition = the condition,
variant = the names above, ``meta["attribution"]`` = the mask as ``0``/``1`` text over the
shown passages, the kept ids, the seed and ``keep`` (the ``full`` call also lists the shown
passages in order). Gold labels choose the oracle's passages only; they never reach a prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.cuer.interventions import evidence_items, shown_passage_ids
from core.execution.prompts import build_messages, prompt_hash
from core.oncu.conditions import retrieval_config
from core.params import Param
from core.retrieval.retrievers import CHUNK_SIZE, OVERLAP, TOP_K, retrieve
from core.types import Instance, PlannedCall

__all__ = [
    "ABLATIONS",
    "ATTRIBUTION_CONDITIONS",
    "CONDITION",
    "FULL",
    "INSTANCES",
    "KEEP",
    "MASK_SEED",
    "RETRIEVED_TOP_K",
    "RUN_PARAMS",
    "TARGET",
    "TARGETS",
    "TOPK_DROPS",
    "ablation_masks",
    "ablation_variant",
    "attribution_settings",
    "mask_text",
    "pick_instances",
    "plan_run",
    "run_config",
    "plan_attribution",
    "plan_topk_drop",
    "shown_evidence",
    "topk_variant",
]

#: Conditions whose context an attribution run ablates.
ATTRIBUTION_CONDITIONS = ("full_context", "retrieved", "oracle")
#: Targets of an ablated call (:mod:`core.attribution`): ``retention`` (default: answer F1 of
#: the ablated answer against the unablated answer), ``logprob`` (refused: no backend here
#: scores a forced continuation), ``correct`` (the score field against gold).
TARGETS = ("retention", "logprob", "correct")
#: The variant of the unablated call.
FULL = "full"
#: The top-k drops planned after the ablations (ContextCite's top-k removal, k = 1, 2).
TOPK_DROPS = (1, 2)

# ------------------------------------------------------------------- declared parameters
CONDITION = Param(
    "condition",
    str,
    "full_context",
    "the context that is ablated: every passage, the retrieved top-k chunks, or the gold passages",
    choices=ATTRIBUTION_CONDITIONS,
    section="issue 40",
)
ABLATIONS = Param(
    "ablations",
    int,
    32,
    "ablated calls per instance (ContextCite: 32-256)",
    minimum=4,
    maximum=4096,
    section="ContextCite (Cohen-Wang et al., NeurIPS 2024) §3",
)
KEEP = Param(
    "keep",
    float,
    0.5,
    "probability that an ablation keeps each shown passage",
    minimum=0.01,
    maximum=0.99,
    section="ContextCite §3",
)
MASK_SEED = Param(
    "seed",
    int,
    0,
    "seed of the ablation masks (with the instance id)",
    minimum=0,
    section="issue 40",
)
TARGET = Param(
    "target",
    str,
    "retention",
    "what the surrogate predicts per ablated call: retention "
    "(answer F1 against the unablated answer; the default), logprob (needs forced-continuation "
    "scoring: no backend here has it) or correct (the score field against gold)",
    choices=TARGETS,
    section="issue 40 item 2",
)
#: What an attribution run plans (``run-attribution`` flags after the retrieval ones).
RUN_PARAMS = (CONDITION, ABLATIONS, KEEP, MASK_SEED, TARGET)
#: Chunks shown in the ``retrieved`` condition (the four-condition protocol's default, 3).
RETRIEVED_TOP_K = Param(
    "top_k",
    int,
    TOP_K.default,
    "chunks of the retrieved condition",
    minimum=TOP_K.minimum,
    maximum=TOP_K.maximum,
    section="seed 000 §6.1",
)


def ablation_variant(index: int) -> str:
    """The variant of ablation ``index`` (``abl:0007``)."""
    return f"abl:{int(index):04d}"


def topk_variant(k: int) -> str:
    """The variant of the top-``k`` drop (``top1drop``)."""
    return f"top{int(k)}drop"


def mask_text(mask: Sequence[bool]) -> str:
    """A mask as ``0``/``1`` text over the shown passages (``"1011"``)."""
    return "".join("1" if m else "0" for m in mask)


def ablation_masks(
    instance_id: str, n_passages: int, ablations: int, keep: float, seed: int
) -> np.ndarray:
    """The ablation masks of one instance: ``(ablations, n_passages)`` booleans.

    Each passage is kept independently with probability ``keep`` (a Bernoulli draw per cell)
    from ``numpy.random.default_rng([seed, h])``, ``h`` the first 8 bytes of the SHA-256 of
    the instance id: the same on every machine and numpy 2 release (PCG64).
    """
    h = int.from_bytes(hashlib.sha256(str(instance_id).encode("utf-8")).digest()[:8], "big")
    rng = np.random.default_rng([int(seed), h])
    return rng.random((int(ablations), int(n_passages))) < float(keep)


def shown_evidence(
    instance: Instance,
    condition: str,
    *,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> list[Any]:
    """The unablated evidence of ``condition`` as a flat list of passage items, in order.

    Empty for ``oracle`` on an instance without gold passages.

    Raises:
        ValueError: an unknown condition or retriever.
    """
    if condition == "full_context":
        return evidence_items(instance.passages)
    if condition == "oracle":
        return evidence_items([p for p in instance.passages if p.is_gold])
    if condition == "retrieved":
        return evidence_items(retrieve(instance, retriever, top_k, chunk_size, overlap))
    raise ValueError(
        f"unknown attribution condition {condition!r}; choose from: "
        f"{', '.join(ATTRIBUTION_CONDITIONS)}"
    )


def _call(
    instance: Instance, condition: str, items: Sequence[Any], variant: str, meta: dict
) -> PlannedCall:
    # "intervention" renders the given items under the contextual template (the no-evidence
    # one when empty): for the unablated items it is the condition's own prompt.
    messages = tuple(build_messages(instance, "intervention", list(items)))
    return PlannedCall(
        instance_id=instance.instance_id,
        condition=condition,
        variant=variant,
        messages=messages,
        input_passage_ids=tuple(shown_passage_ids(items)),
        prompt_hash=prompt_hash(messages),
        meta={"attribution": meta},
    )


def _kept_items(items: Sequence[Any], dropped: set[str]) -> list[Any]:
    """``items`` without those holding a dropped passage.

    An unsplittable chunk segment goes with any of its passages, as CUE-R's ``remove`` takes it.
    """
    return [it for it in items if not set(it.passage_ids) & dropped]


def plan_attribution(
    instance: Instance,
    *,
    condition: str = CONDITION.default,
    ablations: int = ABLATIONS.default,
    keep: float = KEEP.default,
    seed: int = MASK_SEED.default,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    shown: Sequence[Any] | None = None,
) -> list[PlannedCall]:
    """Plan one instance's unablated call and its ``ablations`` masked calls.

    Args:
        instance: the instance.
        condition: ``full_context``, ``retrieved`` or ``oracle``.
        ablations: masked calls.
        keep: probability that a mask keeps each shown passage.
        seed: mask seed (:func:`ablation_masks`).
        retriever: retriever family of the ``retrieved`` condition.
        top_k: chunks of the ``retrieved`` condition.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        shown: the unablated evidence when the caller has it (default:
            :func:`shown_evidence`).

    Returns:
        ``full`` first, then the ablations ordered by mask (masks sharing their first kept
        passages are adjacent, so prompts sharing the longest prefix follow each other for
        the model server's prefix cache); none when nothing is shown (an oracle condition on
        an instance without gold passages).

    Raises:
        ValueError: an unknown condition or retriever, or a value its declaration refuses.
    """
    condition = CONDITION.coerce(condition)
    ablations, keep, seed = ABLATIONS.coerce(ablations), KEEP.coerce(keep), MASK_SEED.coerce(seed)
    items = (
        list(shown)
        if shown is not None
        else shown_evidence(
            instance,
            condition,
            retriever=retriever,
            top_k=top_k,
            chunk_size=chunk_size,
            overlap=overlap,
        )
    )
    items = evidence_items(items)
    order = shown_passage_ids(items)
    if not order:
        return []
    common = {"seed": seed, "keep": keep}
    full = {**common, "mask": "1" * len(order), "kept": order, "passages": order}
    calls = [_call(instance, condition, items, FULL, full)]
    masks = ablation_masks(instance.instance_id, len(order), ablations, keep, seed)
    planned = []
    for i, mask in enumerate(masks):
        text = mask_text(mask)
        kept = [pid for pid, m in zip(order, mask, strict=True) if m]
        new = _kept_items(items, {pid for pid, m in zip(order, mask, strict=True) if not m})
        meta = {**common, "index": i, "mask": text, "kept": kept}
        planned.append((text, _call(instance, condition, new, ablation_variant(i), meta)))
    planned.sort(key=lambda t: (t[0].translate(_DESCENDING), t[1].variant))
    return calls + [c for _, c in planned]


_DESCENDING = str.maketrans("01", "10")  # sort masks with '1' before '0'


def plan_topk_drop(
    instance: Instance,
    condition: str,
    shown: Sequence[Any],
    ranked_ids: Sequence[str],
    k: int,
    *,
    seed: int = MASK_SEED.default,
    keep: float = KEEP.default,
) -> PlannedCall | None:
    """The unablated context without the ``k`` passages of highest weight.

    Args:
        instance: the instance.
        condition: the run's condition.
        shown: the unablated evidence (:func:`shown_evidence`).
        ranked_ids: passage ids by surrogate weight, highest first.
        k: passages dropped.
        seed: the run's mask seed (recorded).
        keep: the run's keep probability (recorded).

    Returns:
        The call (variant :func:`topk_variant`), or None when fewer than ``k`` passages are
        ranked.
    """
    if len(ranked_ids) < k:
        return None
    items = evidence_items(shown)
    order = shown_passage_ids(items)
    drop = list(ranked_ids[:k])
    mask = [pid not in drop for pid in order]
    meta = {
        "seed": seed,
        "keep": keep,
        "k": int(k),
        "dropped": drop,
        "mask": mask_text(mask),
        "kept": [pid for pid, m in zip(order, mask, strict=True) if m],
    }
    return _call(instance, condition, _kept_items(items, set(drop)), topk_variant(k), meta)


def attribution_settings(
    condition: str = CONDITION.default,
    ablations: int = ABLATIONS.default,
    keep: float = KEEP.default,
    seed: int = MASK_SEED.default,
    target: str = TARGET.default,
    instances: str | None = None,
) -> dict[str, Any]:
    """The checked settings of an attribution run, as recorded on the run row.

    Raises:
        ValueError: a value its declaration refuses, or target ``logprob`` (no backend here
            scores a forced continuation; :data:`core.attribution.metrics.LOGPROB_UNSUPPORTED`).
    """
    out = {
        "condition": CONDITION.coerce(condition),
        "ablations": ABLATIONS.coerce(ablations),
        "keep": KEEP.coerce(keep),
        "seed": MASK_SEED.coerce(seed),
        "target": TARGET.coerce(target),
    }
    if instances:
        out["instances"] = str(instances)
    return out


#: Which instances a run attributes: the first N, or ids (comma-separated).
INSTANCES = Param(
    "instances",
    str,
    None,
    "the first N instances, or instance ids (comma-separated); default every instance",
)


def pick_instances(instances: Sequence[Instance], spec: str | None) -> list[Instance]:
    """The instances ``spec`` names (:data:`INSTANCES`), in dataset order.

    Raises:
        ValueError: N below 1, or an id that is not in the dataset (named).
    """
    if spec is None or not str(spec).strip():
        return list(instances)
    text = str(spec).strip()
    if text.isdigit():
        n = int(text)
        if n < 1:
            raise ValueError(f"--instances {text}: give N >= 1 or instance ids")
        return list(instances[:n])
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    known = {i.instance_id for i in instances}
    missing = [t for t in wanted if t not in known]
    if missing:
        raise ValueError(f"--instances: no instance {missing[0]!r} in the dataset")
    chosen = set(wanted)
    return [i for i in instances if i.instance_id in chosen]


def run_config(
    settings: dict[str, Any],
    *,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> dict[str, Any]:
    """What an attribution run records as its ``retrieval`` configuration.

    ``{"attribution": settings}`` (:func:`attribution_settings`), with the retrieval
    configuration (:func:`core.oncu.conditions.retrieval_config`) for the ``retrieved`` condition.
    """
    config: dict[str, Any] = {"attribution": dict(settings)}
    if settings.get("condition") == "retrieved":
        config.update(retrieval_config(retriever, top_k, chunk_size, overlap))
    return config


def plan_run(
    instances: Sequence[Instance],
    settings: dict[str, Any],
    *,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> tuple[dict[str, list[Any]], list[PlannedCall]]:
    """Phase 1 of an attribution run: every instance's unablated and ablated calls.

    Returns:
        ``(shown evidence by instance id, calls)``; the shown evidence plans the top-k drops
        of phase 2 (:func:`core.attribution.metrics.plan_drops`).
    """
    cond = settings["condition"]
    look = {"retriever": retriever, "top_k": top_k, "chunk_size": chunk_size, "overlap": overlap}
    shown = {i.instance_id: shown_evidence(i, cond, **look) for i in instances}
    calls = [
        call
        for i in instances
        for call in plan_attribution(
            i,
            condition=cond,
            ablations=settings["ablations"],
            keep=settings["keep"],
            seed=settings["seed"],
            shown=shown[i.instance_id],
        )
    ]
    return shown, calls
