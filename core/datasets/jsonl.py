"""Generic JSON Lines benchmark records -> instances (schema: docs/JSONL_SCHEMA.md).

One JSON object per line::

    {"id": "q1", "question": "...", "answer": "...",
     "passages": [{"text": "...", "id"?, "title"?, "doc_id"?, "is_gold"?, "role"?}, ...],
     "aliases"?, "answer_type"?, "reasoning_type"?, "context_length"?, "evidence_position"?,
     "distractor_similarity"?, "evidence_density"?, "source"?, "metadata"?}

Passage ids are kept when every passage has one and all match ``p`` + 4 or more digits;
otherwise every passage gets a neutral id p0001, p0002 ... in order and the user's ids are kept
in ``metadata.import_notes.original_passage_ids``. Fields not in the schema are kept in
``metadata.import_notes.extra_fields``.
"""

from __future__ import annotations

import re
from typing import Any

from core.datasets.records import Fields, SkipRecord, gold_token_fraction, make_instance, neutral_id
from core.types import ROLES, Instance, Passage

__all__ = ["JSONL_FIELDS", "PASSAGE_FIELDS", "jsonl_instance"]

#: Top-level fields of the generic schema.
JSONL_FIELDS = (
    "id",
    "question",
    "answer",
    "passages",
    "aliases",
    "answer_type",
    "reasoning_type",
    "context_length",
    "evidence_position",
    "distractor_similarity",
    "evidence_density",
    "source",
    "metadata",
)
#: Fields of one passage object.
PASSAGE_FIELDS = ("id", "title", "text", "doc_id", "is_gold", "role")

_NEUTRAL = re.compile(r"p\d{4,}")


def _passage(item: Fields) -> tuple[str | None, str, str, str | None, str, bool]:
    """``(user id, title, text, doc_id, role, is_gold)`` of one passage object."""
    item.obj()  # must be an object
    user_id = item["id"].ident() if item.has("id") else None
    title = item.opt_text("title")
    text = item["text"].text()
    doc_id = item["doc_id"].ident() if item.has("doc_id") else None
    is_gold = item["is_gold"].boolean() if item.has("is_gold") else None
    role = item.opt_text("role") or None
    if role is not None and role not in ROLES:
        raise item["role"].error(f"unknown role {role!r}; allowed: {', '.join(ROLES)}")
    if role is not None and is_gold is not None and (role == "gold") != is_gold:
        raise item["is_gold"].error(f"is_gold {str(is_gold).lower()} contradicts role {role!r}")
    if role is None:
        role = "gold" if is_gold else "distractor"
    return user_id, title, text, doc_id, role, role == "gold"


def jsonl_instance(rec: Fields) -> Instance:
    """Map one generic JSONL record to an instance.

    Args:
        rec: the record (a JSON object).

    Returns:
        The instance; ``source`` is the record's ``source`` (default ``jsonl``).

    Raises:
        DataError: a required field is missing, a field has the wrong type, a role is unknown
            or contradicts ``is_gold``, or two passages share an id.
        SkipRecord: empty question, empty answer or no passages.
    """
    instance_id = rec["id"].ident()
    question = rec["question"].text()
    answer = rec["answer"].answer()
    aliases = tuple(a.answer() for a in rec.opt_items("aliases"))
    items = rec["passages"].items()
    raw = [_passage(item) for item in items]
    cells = rec.cells()
    source = rec.opt_text("source", "jsonl")
    metadata = rec.opt_obj("metadata")

    first_use: dict[str, int] = {}
    for i, (user_id, *_) in enumerate(raw):
        if user_id is None:
            continue
        if user_id in first_use:
            raise items[i]["id"].error(
                f"duplicate passage id {user_id!r} (also passages[{first_use[user_id]}])"
            )
        first_use[user_id] = i

    if not question.strip():
        raise SkipRecord("empty question")
    if not answer.strip():
        raise SkipRecord("empty answer")
    if not raw:
        raise SkipRecord("no passages")

    keep_ids = all(u is not None and _NEUTRAL.fullmatch(u) for u, *_ in raw)
    notes: dict[str, Any] = {}
    passages = []
    for i, (user_id, title, text, doc_id, role, is_gold) in enumerate(raw):
        pid = user_id if keep_ids and user_id is not None else neutral_id(i + 1)
        doc = doc_id or title or user_id or pid
        passages.append(Passage(pid, i, title, text, doc, role, is_gold))
    if not keep_ids and first_use:
        notes["original_passage_ids"] = {
            neutral_id(i + 1): u for i, (u, *_) in enumerate(raw) if u is not None
        }
    passages_t = tuple(passages)
    has_gold = any(p.is_gold for p in passages_t)
    if has_gold:
        notes["gold_token_fraction"] = gold_token_fraction(passages_t)
    extra = {k: v for k, v in rec.value.items() if k not in JSONL_FIELDS}
    if extra:
        notes["extra_fields"] = extra
    if notes:
        metadata["import_notes"] = notes

    return make_instance(
        instance_id,
        question,
        answer,
        passages_t,
        source=source,
        metadata=metadata,
        aliases=aliases,
        **cells,
    )
