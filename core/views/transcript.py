"""What a model saw and said: one stored prediction as a transcript (the Case view).

The store keeps each call's prompt *hash* (:func:`core.execution.prompts.prompt_hash`), its shown
passage ids, the retrieval ranking (chunk ids and scores in ``meta``), the raw reply and the
parsed fields, not the prompt text. The transcript rebuilds the messages from the fixed
templates and the stored instance and shows them only when their hash equals the stored one:
those are then, byte for byte, the messages that were sent. A prompt that cannot be rebuilt
(a CUE-R replacement drawn from another instance, a DOLCE span, an imported run) is said to be
so, never shown approximately.

Gold / distractor roles are attached to the shown items for the user's eyes only; they are
not part of any message (:mod:`core.execution.prompts` never renders them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.cuer.interventions import plan_interventions
from core.execution.prompts import build_messages, prompt_hash
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP
from core.retrieval.retrievers import RankedChunk, chunk_instance, parse_retrieval_condition
from core.scoring.parsing import split_reasoning
from core.types import Instance, stored_ids

__all__ = ["parse_notes", "transcript"]

#: Conditions whose evidence is the instance's own passages, in stored or given order.
_PLAIN = ("no_evidence", "full_context", "oracle")


def transcript(
    instance: Instance,
    pred: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    base: Mapping[str, Any] | None = None,
) -> dict:
    """One prediction as the model saw and answered it.

    Args:
        instance: the instance (its passages carry the roles shown to the user).
        pred: the stored prediction row (``condition``, ``variant``, ``prompt_hash``,
            ``input_passage_ids``, ``meta`` JSON text, ``raw_response``, ``answer``,
            ``cited_ids``, ``confidence``, ``explanation``, ``parse_error``, ``error``, token
            and latency columns).
        run: the run's row (its ``retrieval`` configuration), or None.
        base: for an intervention, its run's base ``retrieved`` prediction row (the CUE-R
            planner perturbs its chunks and picks targets from its cited ids); else None.

    Returns:
        ``messages`` (the rebuilt messages, or None when they could not be rebuilt to the
        stored hash), ``prompt_note`` (how the messages were obtained, one line), ``items``
        (the shown evidence in prompt order: ``rank``, ``score`` (retrieval score or None),
        ``chunk_id`` (or None), ``passage_ids``, ``roles``, ``titles``, ``text``, ``cited``,
        ``contains_answer``: the model's answer occurs in the text as whole words),
        ``truncated_note`` (None, or "reply cut to M of N bytes when stored"), ``meta`` (the
        decoded meta dict), ``parse`` (:func:`parse_notes`).
    """
    meta = _meta(pred.get("meta"))
    cond = str(pred.get("condition") or "")
    cited = set(stored_ids(pred.get("cited_ids")))
    shown = stored_ids(pred.get("input_passage_ids"))
    by_id = {p.passage_id: p for p in instance.passages}
    items: list[dict[str, Any]] = []
    evidence: list[Any] | None = None
    chunks = _chunks(instance, meta, run) if cond == "retrieved" else None
    if chunks is not None:
        scores = list(meta.get("chunk_scores") or [])
        for i, ch in enumerate(chunks):
            score = scores[i] if i < len(scores) else None
            items.append(_item(i + 1, score, ch.chunk_id, ch.passage_ids, ch.text, by_id, cited))
        evidence = list(chunks)
    else:
        for i, pid in enumerate(shown):
            p = by_id.get(pid)
            text = p.text if p is not None else "(passage not in this instance: text not stored)"
            items.append(_item(i + 1, None, None, (pid,), text, by_id, cited))
        if all(pid in by_id for pid in shown):
            evidence = [by_id[pid] for pid in shown]
    answer = pred.get("answer")
    if isinstance(answer, str) and answer.strip():
        # the answer as a whole word sequence ("no" is not found inside "not")
        found = re.compile(r"(?<!\w)" + re.escape(answer.strip()) + r"(?!\w)", re.IGNORECASE)
        for it in items:
            it["contains_answer"] = found.search(it["text"]) is not None
    stored_hash = str(pred.get("prompt_hash") or "")
    messages, note = _rebuild(instance, cond, evidence, stored_hash)
    if messages is None and cond == "intervention" and base is not None:
        messages, note = _replan(
            instance, str(pred.get("variant") or ""), run, base, stored_hash, note
        )
    cut = meta.get("raw_response_truncated")
    truncated = None
    if isinstance(cut, Mapping) and "bytes" in cut:
        truncated = f"reply cut to {cut.get('kept_bytes')} of {cut.get('bytes')} bytes when stored"
    return {
        "messages": messages,
        "prompt_note": note,
        "items": items,
        "truncated_note": truncated,
        "meta": meta,
        "parse": parse_notes(pred, meta),
    }


def parse_notes(pred: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """What the reply said that the parse set apart (SPEC §5.1): never scored, always shown.

    Returns:
        ``unshown_ids`` and ``over_cap_ids`` (cited ids not shown or not passage ids, and shown
        ids past the run's cap), ``salvaged`` (what a lenient reading found in a reply off the
        contract, ``""`` when none), ``reasoning`` (the reasoning the server returned apart,
        else the reasoning blocks of the stored reply, ``""`` when none), ``reasoning_note``
        (where it came from, or None) and ``lines`` (one sentence per non-empty part, e.g.
        "cited 2 passages that were not shown: p0009, p0012").
    """
    record = meta.get("parse") if isinstance(meta.get("parse"), Mapping) else {}
    unshown = [str(x) for x in record.get("unshown_ids") or []]
    over = [str(x) for x in record.get("over_cap_ids") or []]
    salvaged = str(record.get("salvaged") or "")
    reasoning, note = "", None
    if isinstance(meta.get("reasoning"), str) and meta["reasoning"]:
        reasoning, note = meta["reasoning"], "returned by the server apart from the reply"
    elif isinstance(pred.get("raw_response"), str):
        thought, _, unclosed = split_reasoning(pred["raw_response"])
        if thought or unclosed:
            reasoning = thought
            note = (
                "the reply ended inside its reasoning"
                if unclosed
                else "reasoning blocks of the reply, removed before parsing"
            )
    lines = []
    if unshown:
        lines.append(
            f"cited {_count(len(unshown), 'passage')} that {_were(unshown)} not shown "
            f"(or not passage ids), not scored: {', '.join(unshown)}"
        )
    if over:
        lines.append(
            f"cited {_count(len(over), 'shown passage')} past the cap, not scored: "
            f"{', '.join(over)}"
        )
    if salvaged:
        lines.append(f"salvaged from a reply off the contract, not scored: {salvaged}")
    return {
        "unshown_ids": unshown,
        "over_cap_ids": over,
        "salvaged": salvaged,
        "reasoning": reasoning,
        "reasoning_note": note,
        "lines": lines,
    }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _were(items: Sequence[str]) -> str:
    return "was" if len(items) == 1 else "were"


def _rebuild(
    instance: Instance, cond: str, evidence: list[Any] | None, stored_hash: str
) -> tuple[list[dict[str, str]] | None, str]:
    """The messages rebuilt from the templates, kept only when their hash is the stored one."""
    if not stored_hash:
        return None, "The store has no prompt for this prediction (imported results)."
    tries: list[list[dict[str, str]]] = []
    try:
        if cond in _PLAIN:
            tries.append(build_messages(instance, cond))
        elif evidence is not None and cond in ("retrieved", "intervention", "probe"):
            kind = "intervention" if cond == "probe" else cond
            tries.append(build_messages(instance, kind, evidence, probe=cond == "probe"))
    except ValueError:
        pass
    for messages in tries:
        if prompt_hash(messages) == stored_hash:
            return messages, (
                "Rebuilt from the fixed templates and the stored instance; its SHA-256 equals "
                "the stored prompt hash, so these are the messages exactly as sent."
            )
    return None, (
        f"The store keeps this call's prompt hash ({stored_hash[:12]}…), not its text, and "
        "the prompt cannot be rebuilt to that hash from the stored rows (a CUE-R replacement, "
        "a DOLCE span, or templates changed since the run): it is not shown."
    )


def _replan(
    instance: Instance,
    variant: str,
    run: Mapping[str, Any] | None,
    base: Mapping[str, Any],
    stored_hash: str,
    note: str,
) -> tuple[list[dict[str, str]] | None, str]:
    """A CUE-R call planned again on its base trace's stored chunks, kept on a hash match."""
    cfg = dict((run or {}).get("retrieval") or {})
    meta = _meta(base.get("meta"))
    chunks = _chunks(instance, meta, run)
    if chunks is None:
        return None, note
    scores = list(meta.get("chunk_scores") or [0.0] * len(chunks))
    shown = [
        RankedChunk(i + 1, float(sc), ch)
        for i, (ch, sc) in enumerate(zip(chunks, scores, strict=False))
    ]
    try:
        calls = plan_interventions(
            instance,
            stored_ids(base.get("cited_ids")),
            top_k=int(cfg.get("top_k", 5)),
            retriever=str(cfg.get("retriever", "lexical")),
            chunk_size=int(cfg.get("chunk_size", CHUNK_SIZE.default)),
            overlap=int(cfg.get("overlap", OVERLAP.default)),
            operators=None,
            hardness=None,
            positions=None,
            two_support=True,
            zero_retrieval=True,
            shown=shown,
        )
    except (ValueError, TypeError):
        return None, note
    for call in calls:
        if call.variant == variant and call.prompt_hash == stored_hash:
            return [dict(m) for m in call.messages], (
                "Planned again with the run's CUE-R settings; its SHA-256 equals the stored "
                "prompt hash, so these are the messages exactly as sent."
            )
    return None, note


def _chunks(
    instance: Instance, meta: Mapping[str, Any], run: Mapping[str, Any] | None
) -> list | None:
    """The retrieved chunks in rank order, from the stored chunk ids; None when unknown."""
    ids = [str(c) for c in meta.get("chunk_ids") or []]
    if not ids:
        return None
    try:
        cfg = parse_retrieval_condition(str(meta.get("retrieval") or ""))
    except ValueError:
        cfg = dict((run or {}).get("retrieval") or {})
    try:
        chunks = {
            c.chunk_id: c
            for c in chunk_instance(
                instance,
                int(cfg.get("chunk_size", CHUNK_SIZE.default)),
                int(cfg.get("overlap", OVERLAP.default)),
            )
        }
    except (TypeError, ValueError):
        return None
    if not all(i in chunks for i in ids):
        return None
    return [chunks[i] for i in ids]


def _item(
    rank: int,
    score: Any,
    chunk_id: str | None,
    passage_ids: Sequence[str],
    text: str,
    by_id: Mapping[str, Any],
    cited: set[str],
) -> dict[str, Any]:
    roles = [by_id[p].role if p in by_id else "unknown" for p in passage_ids]
    titles = [by_id[p].title if p in by_id else "" for p in passage_ids]
    value = None
    if score is not None:
        try:
            value = float(score)
        except (TypeError, ValueError):
            value = None
        if value is not None and math.isnan(value):
            value = None
    return {
        "rank": rank,
        "score": value,
        "chunk_id": chunk_id,
        "passage_ids": list(passage_ids),
        "roles": roles,
        "titles": titles,
        "text": text,
        "cited": [p for p in passage_ids if p in cited],
        "contains_answer": False,
    }


def _meta(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str) or not value:
        return {}
    try:
        out = json.loads(value)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}
