"""Fixed prompt templates and the answer contract: (instance, condition) -> chat messages.

SPEC §5.1, seed 000 §5.7 and §6.1. The templates are constants; their text, joined, gives
:func:`template_hash`, which a run records beside :data:`TEMPLATE_VERSION`. Change any of them
and bump the version: stored predictions then no longer match the templates in the code.

Layout of every prompt (so one instance's calls share their longest prefix, which Ollama's
per-slot KV cache reuses):

1. the system message: the unchanging instructions and the answer contract;
2. the user message: the passages (or the statement that none are given), then the question.

Passages are shown as ``[passage_id: p0003] Title: <title>`` + newline + text, separated by a
blank line; retrieved chunks are shown as their own text, which already carries the markers.
Only neutral passage ids, titles and texts reach a prompt: never roles, gold flags, gold
answers, instance ids or any other metadata.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.types import Instance, Passage

__all__ = [
    "ANSWER_SCHEMA",
    "MESSAGE_CONDITIONS",
    "NO_PASSAGES",
    "PASSAGE_TEMPLATE",
    "PROBE_INSTRUCTION",
    "SYSTEM_CONTEXT",
    "SYSTEM_NO_EVIDENCE",
    "TEMPLATE_VERSION",
    "USER_CONTEXT",
    "USER_NO_EVIDENCE",
    "build_messages",
    "prompt_hash",
    "render_evidence",
    "render_passage",
    "template_hash",
]

#: Bump whenever a template, the schema or the rendering changes.
TEMPLATE_VERSION = "1"

#: The answer contract as a JSON schema (Ollama's ``format``; OpenAI ``response_format``).
#: Property order is the order a model should write them: answer first.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "evidence_ids": {"type": "array", "items": {"type": "string"}},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "explanation": {"type": "string"},
    },
    "required": ["answer", "evidence_ids", "confidence", "explanation"],
    "additionalProperties": False,
}

_CONTRACT = """\
Reply with exactly one JSON object and nothing else, in this form:
{"answer": "<short answer>", "evidence_ids": ["<passage id>", ...], "confidence": <number \
from 0 to 1>, "explanation": "<one sentence>"}
- "answer": the shortest span that answers the question (a name, a number, a date, "yes" or \
"no"), not a sentence.
- "evidence_ids": the ids of the passages that support the answer, exactly as written after \
"passage_id:" (for example "p0003"); an empty list if none.
- "confidence": your probability that the answer is correct.
- "explanation": one short sentence saying how the passages give the answer."""

#: System message of the contextual conditions (full context, retrieved, oracle, interventions).
SYSTEM_CONTEXT = (
    "You answer a question using the passages given with it. Each passage begins with a line "
    "of the form [passage_id: p0001] Title: <title>, followed by its text. Use the passages to "
    "find the answer and cite the passages you used.\n\n" + _CONTRACT
)

#: System message of the no-evidence condition.
SYSTEM_NO_EVIDENCE = (
    "You answer a question without any passages: no passages are given, so answer from what "
    "you already know. Cite no passages.\n\n" + _CONTRACT
)

#: Added to the system message of DOLCE probe prompts (SPEC §8).
PROBE_INSTRUCTION = (
    'If the text shown does not contain the answer, set "answer" to "unanswerable", '
    '"evidence_ids" to [] and "confidence" to 0.'
)

#: One passage as shown to a model.
PASSAGE_TEMPLATE = "[passage_id: {passage_id}] Title: {title}\n{text}"

#: User message of the contextual conditions; ``{passages}`` is :func:`render_evidence`.
USER_CONTEXT = "Passages:\n\n{passages}\n\nQuestion: {question}"

#: Statement opening a no-evidence user message.
NO_PASSAGES = "No passages are given for this question."

#: User message of the no-evidence condition.
USER_NO_EVIDENCE = NO_PASSAGES + "\n\nQuestion: {question}"

#: Conditions :func:`build_messages` accepts.
MESSAGE_CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle", "intervention")

_TEMPLATES = (
    ("SYSTEM_CONTEXT", SYSTEM_CONTEXT),
    ("SYSTEM_NO_EVIDENCE", SYSTEM_NO_EVIDENCE),
    ("PROBE_INSTRUCTION", PROBE_INSTRUCTION),
    ("PASSAGE_TEMPLATE", PASSAGE_TEMPLATE),
    ("USER_CONTEXT", USER_CONTEXT),
    ("USER_NO_EVIDENCE", USER_NO_EVIDENCE),
    ("ANSWER_SCHEMA", json.dumps(ANSWER_SCHEMA, sort_keys=True)),
)


def template_hash() -> str:
    """Hex SHA-256 of every template and the answer schema (recorded on each run)."""
    text = "\n\x1e\n".join(f"{name}\n{body}" for name, body in _TEMPLATES)
    return hashlib.sha256(f"{TEMPLATE_VERSION}\n{text}".encode()).hexdigest()


def prompt_hash(messages: Sequence[Mapping[str, str]]) -> str:
    """Stable hex SHA-256 of a message list (role and content only, key order ignored)."""
    canon = [{"role": m["role"], "content": m["content"]} for m in messages]
    blob = json.dumps(canon, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def render_passage(passage: Passage) -> str:
    """One passage as ``[passage_id: pXXXX] Title: <title>`` + newline + text."""
    return PASSAGE_TEMPLATE.format(
        passage_id=passage.passage_id, title=passage.title.strip(), text=passage.text.strip()
    )


def render_evidence(items: Sequence[Any]) -> str:
    """Passages, chunks or ranked chunks, in the given order, separated by blank lines.

    A :class:`~core.types.Passage` is rendered with :func:`render_passage`; a chunk
    (``core.retrieval.retrievers.Chunk``, or a ``RankedChunk`` holding one) is shown as its own
    text,
    which already carries its passages' markers; a plain string is shown as it is (a DOLCE
    span already rendered by the caller).

    Raises:
        TypeError: an item of another kind.
    """
    return "\n\n".join(_render_item(item) for item in items)


def _render_item(item: Any) -> str:
    if isinstance(item, Passage):
        return render_passage(item)
    chunk = getattr(item, "chunk", item)
    if hasattr(chunk, "passage_ids") and isinstance(getattr(chunk, "text", None), str):
        return chunk.text.strip()
    if isinstance(item, str):
        return item.strip()
    raise TypeError(f"cannot render {type(item).__name__} as evidence (Passage or Chunk)")


def build_messages(
    instance: Instance,
    condition: str,
    passages_or_chunks: Sequence[Any] | None = None,
    probe: bool = False,
) -> list[dict[str, str]]:
    """Chat messages for one call: a system message, then a user message.

    Args:
        instance: the instance (only its question and, per condition, passages are used).
        condition: ``no_evidence`` (question only), ``full_context`` (all passages in stored
            order), ``oracle`` (gold passages in stored order), ``retrieved`` (the given
            chunks, in rank order) or ``intervention`` (the given passages/chunks, in order).
        passages_or_chunks: the evidence for ``retrieved`` and ``intervention``; must be None
            for the other conditions. An empty list gives the no-evidence prompt (there is
            nothing to show, and the prompt says so).
        probe: add the DOLCE instruction to answer "unanswerable" when the shown text lacks
            the answer.

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Raises:
        ValueError: unknown condition, evidence missing or given where it does not belong, or
            ``oracle`` on an instance without gold passages.
    """
    if condition not in MESSAGE_CONDITIONS:
        raise ValueError(
            f"unknown condition {condition!r}; choose one of: {', '.join(MESSAGE_CONDITIONS)}"
        )
    if condition in ("retrieved", "intervention"):
        if passages_or_chunks is None:
            raise ValueError(
                f"condition {condition!r} needs passages_or_chunks (e.g. from "
                "core.retrieval.retrievers.retrieve)"
            )
        items = list(passages_or_chunks)
    else:
        if passages_or_chunks is not None:
            raise ValueError(
                f"condition {condition!r} takes its passages from the instance; "
                "passages_or_chunks must be None"
            )
        if condition == "no_evidence":
            items = []
        elif condition == "full_context":
            items = list(instance.passages)
        else:
            items = [p for p in instance.passages if p.is_gold]
            if not items:
                raise ValueError(
                    f"instance {instance.instance_id!r} has no gold passages: the oracle "
                    "condition does not apply to it"
                )
    question = instance.question.strip()
    if items:
        system = SYSTEM_CONTEXT
        user = USER_CONTEXT.format(passages=render_evidence(items), question=question)
    else:
        system = SYSTEM_NO_EVIDENCE
        user = USER_NO_EVIDENCE.format(question=question)
    if probe:
        system = f"{system}\n\n{PROBE_INSTRUCTION}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
