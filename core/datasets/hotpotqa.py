"""HotpotQA and 2WikiMultiHopQA records (original JSON list format) -> instances.

Both datasets share one record shape::

    {"_id", "question", "answer", "type", "level"?, "evidences"? (2Wiki),
     "supporting_facts": [[title, sent_id], ...],
     "context": [[title, [sentence, ...]], ...]}

Mapping (SPEC §3.3):
- each context paragraph -> one passage, ``passage_id`` p0001, p0002 ... in context order,
  ``doc_id`` = ``title`` = the paragraph title;
- passage text = the sentences, each stripped of surrounding whitespace, empty ones dropped,
  joined with one space (HotpotQA sentences carry their own leading space; 2Wiki's do not, and
  a few HotpotQA sentences lack it, so plain concatenation would glue words together);
- gold passages (role ``gold``) = paragraphs whose title is named in ``supporting_facts``; the
  others have role ``distractor``; fan-in = distinct doc_ids (titles) among gold passages;
- a supporting title absent from the context keeps the record, listed in
  ``metadata.import_notes.missing_support_titles``; with no gold passage at all the instance is
  not oracle-applicable; supporting facts whose sentence index is out of range are listed in
  ``import_notes.unaligned_supporting_facts``;
- ``type`` -> reasoning type (HotpotQA bridge -> multi_hop, comparison -> comparison; 2Wiki
  compositional / inference -> multi_hop, comparison / bridge_comparison -> comparison; any
  other label is kept as given); the raw ``type`` and ``level`` stay in metadata, as do the
  ``supporting_facts`` and 2Wiki's ``evidences`` triples;
- answer type: yes_no / number / entity (``infer_answer_type``); context length = whitespace
  tokens of all passages (titles included); evidence position by thirds
  (``evidence_position``); distractor similarity and evidence density ``unknown`` (the share of
  context tokens in gold passages is kept as ``import_notes.gold_token_fraction``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.datasets.records import Fields, SkipRecord, gold_token_fraction, make_instance, neutral_id
from core.types import Instance, Passage

__all__ = ["HOTPOT_REASONING", "TWOWIKI_REASONING", "hotpotqa_instance", "twowiki_instance"]

#: HotpotQA ``type`` -> reasoning type.
HOTPOT_REASONING = {"bridge": "multi_hop", "comparison": "comparison"}

#: 2WikiMultiHopQA ``type`` -> reasoning type.
TWOWIKI_REASONING = {
    "compositional": "multi_hop",
    "inference": "multi_hop",
    "comparison": "comparison",
    "bridge_comparison": "comparison",
}


def hotpotqa_instance(rec: Fields) -> Instance:
    """Map one HotpotQA record to an instance.

    Args:
        rec: the record (a JSON object).

    Returns:
        The instance, source ``hotpotqa``.

    Raises:
        DataError: a required field is missing or has the wrong type.
        SkipRecord: empty question, empty answer or empty context.
    """
    return _instance(rec, source="hotpotqa", reasoning=HOTPOT_REASONING, evidences=False)


def twowiki_instance(rec: Fields) -> Instance:
    """Map one 2WikiMultiHopQA record to an instance (``evidences`` kept in metadata).

    Args:
        rec: the record (a JSON object).

    Returns:
        The instance, source ``2wikimultihopqa``.

    Raises:
        DataError: a required field is missing or has the wrong type.
        SkipRecord: empty question, empty answer or empty context.
    """
    return _instance(rec, source="2wikimultihopqa", reasoning=TWOWIKI_REASONING, evidences=True)


def _paragraphs(rec: Fields) -> list[tuple[str, list[str]]]:
    context = rec["context"]
    if isinstance(context.value, dict):
        raise context.error(
            "expected a list of [title, [sentences]] pairs, got an object (the Hugging Face "
            "column layout is not supported: use the original JSON release)"
        )
    out = []
    for item in context.items():
        pair = item.items()
        if len(pair) != 2:
            raise item.error(f"expected [title, [sentences]], got a list of {len(pair)} items")
        out.append((pair[0].text(), [s.text() for s in pair[1].items()]))
    return out


def _supporting_facts(rec: Fields) -> list[tuple[str, int]]:
    out = []
    for item in rec["supporting_facts"].items():
        pair = item.items()
        if len(pair) != 2:
            raise item.error(f"expected [title, sent_id], got a list of {len(pair)} items")
        out.append((pair[0].text(), pair[1].integer()))
    return out


def _instance(
    rec: Fields, *, source: str, reasoning: Mapping[str, str], evidences: bool
) -> Instance:
    instance_id = rec["_id"].ident()
    question = rec["question"].text()
    answer = rec["answer"].answer()
    raw_type = rec.opt_text("type")
    level = rec.opt_text("level")
    facts = _supporting_facts(rec)
    paragraphs = _paragraphs(rec)
    triples = [t.value for t in rec.opt_items("evidences")] if evidences else []

    if not question.strip():
        raise SkipRecord("empty question")
    if not answer.strip():
        raise SkipRecord("empty answer")
    if not paragraphs:
        raise SkipRecord("no passages (empty context)")

    support: list[str] = list(dict.fromkeys(title for title, _ in facts))
    support_set = set(support)
    passages = tuple(
        Passage(
            passage_id=neutral_id(i + 1),
            ord=i,
            title=title,
            text=" ".join(s for s in (x.strip() for x in sentences) if s),
            doc_id=title,
            role="gold" if title in support_set else "distractor",
            is_gold=title in support_set,
        )
        for i, (title, sentences) in enumerate(paragraphs)
    )

    n_sentences = {title: len(sentences) for title, sentences in paragraphs}
    notes: dict[str, Any] = {"gold_token_fraction": gold_token_fraction(passages)}
    missing = [t for t in support if t not in n_sentences]
    if missing:
        notes["missing_support_titles"] = missing
    unaligned = [[t, s] for t, s in facts if t in n_sentences and not 0 <= s < n_sentences[t]]
    if unaligned:
        notes["unaligned_supporting_facts"] = unaligned

    metadata: dict[str, Any] = {"type": raw_type}
    if level or not evidences:
        metadata["level"] = level
    metadata["supporting_facts"] = [[t, s] for t, s in facts]
    if evidences:
        metadata["evidences"] = triples
    metadata["import_notes"] = notes

    return make_instance(
        instance_id,
        question,
        answer,
        passages,
        source=source,
        metadata=metadata,
        default_answer_type="entity",
        reasoning_type=reasoning.get(raw_type, raw_type),
    )
