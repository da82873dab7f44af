"""ONCU release instance records (JSON Lines) -> instances.

One JSON object per line::

    {"id", "source", "question", "gold_answer", "oracle_evidence": [{evidence_id, text, title}],
     "long_context": "[passage_id: p0001] ... (blank line) [passage_id: p0002] ...",
     "distractors": [{distractor_id, text, title}], "context_length", "evidence_position",
     "evidence_density", "distractor_similarity", "reasoning_type", "answer_type", "metadata"}

Splitting ``long_context`` (the release writes marked blocks and unmarked filler paragraphs,
separated by blank lines):
- a ``[passage_id: X]`` marker starts a passage with id X; it runs to the first blank line or
  the next marker, whichever comes first;
- text that belongs to no marker (before the first marker, or after a blank line that ends a
  marked passage) becomes a ``filler`` passage with a fresh id (the next free ``pNNNN`` above
  every id the record uses), so no context text is lost;
- a passage that starts with a ``Title: ...`` line gets that title (the line is removed from
  the text); otherwise the title is empty (titles from ``oracle_evidence`` are not added to
  the text, so gold passages do not look different from the others);
- a marker id repeated with the same text (the release duplicates the single evidence block of
  ``scattered`` cells) keeps the first occurrence and lists the id in
  ``metadata.import_notes.repeated_passages``; a repeat with different text skips the record.

Labels: gold = passages whose id is an ``oracle_evidence`` ``evidence_id``; an evidence id not
in the context is appended as a gold passage built from the evidence's text and title (listed
in ``import_notes.oracle_outside_context``). Passages named in ``distractors`` get role
``distractor`` (``conflicting`` when the record's distractor similarity is ``conflicting``);
all other passages are ``filler``. ``doc_id`` = the evidence title (gold) or the passage title,
else the passage id. No gold passage, or ``metadata.cue_applicable`` false -> not
oracle-applicable.

The record's cells are kept as given (``context_length``, positions ...); absent ones are
derived: context length = whitespace tokens of ``long_context``, evidence position by thirds,
answer type yes_no / number / string. The record's ``metadata`` object is kept as is.
"""

from __future__ import annotations

import re
from typing import Any

from core.datasets.records import Fields, SkipRecord, make_instance, neutral_id
from core.types import Instance, Passage, count_tokens

__all__ = ["oncu_instance", "split_long_context"]

# The order the cells are read in, so that the first bad one reported stays the same.
_CELL_ORDER = (
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "reasoning_type",
    "answer_type",
)

_MARKER = re.compile(r"\[passage_id:\s*([^\]\s]+)\s*\]")
_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
_TITLE = re.compile(r"Title:[ \t]*([^\n]*)\n?")
_PNUM = re.compile(r"p(\d+)")


def _title_and_text(block: str) -> tuple[str, str]:
    m = _TITLE.match(block)
    if m is None:
        return "", block
    return m.group(1).strip(), block[m.end() :].strip()


def split_long_context(text: str) -> list[tuple[str | None, str, str]]:
    """Split an ONCU ``long_context`` into ``(marker id or None, title, text)`` blocks.

    ``None`` marks unmarked (filler) text. Blocks keep context order; empty text is dropped.

    Args:
        text: the ``long_context`` string.

    Returns:
        The blocks, in order.
    """
    blocks: list[tuple[str | None, str, str]] = []

    def unmarked(chunk: str) -> None:
        chunk = chunk.strip()
        if chunk:
            blocks.append((None, *_title_and_text(chunk)))

    markers = list(_MARKER.finditer(text))
    unmarked(text[: markers[0].start()] if markers else text)
    for i, m in enumerate(markers):
        end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        body = text[m.end() : end].lstrip()
        parts = _BLANK_LINE.split(body, maxsplit=1)
        blocks.append((m.group(1), *_title_and_text(parts[0].strip())))
        if len(parts) > 1:
            unmarked(parts[1])
    return blocks


def _oracle(rec: Fields) -> list[tuple[str, str, str]]:
    """``(evidence_id, text, title)`` of each ``oracle_evidence`` item."""
    out = []
    for item in rec.opt_items("oracle_evidence"):
        item.obj()  # must be an object
        out.append((item["evidence_id"].ident(), item.opt_text("text"), item.opt_text("title")))
    return out


def _distractor_ids(rec: Fields) -> list[str]:
    out = []
    for item in rec.opt_items("distractors"):
        if isinstance(item.value, dict):
            out.append(item["distractor_id"].ident())
        else:
            out.append(item.ident())
    return out


def oncu_instance(rec: Fields) -> Instance:
    """Map one ONCU release record to an instance.

    Args:
        rec: the record (a JSON object).

    Returns:
        The instance; ``source`` is the record's ``source`` (default ``oncu``).

    Raises:
        DataError: a required field is missing or has the wrong type.
        SkipRecord: empty question, answer or context, or a passage id repeated with
            different text.
    """
    instance_id = rec["id"].ident()
    question = rec["question"].text()
    answer = rec["gold_answer"].answer()
    aliases = tuple(a.answer() for a in rec.opt_items("answer_aliases"))
    long_context = rec["long_context"].text()
    oracle = _oracle(rec)
    distractors = set(_distractor_ids(rec))
    cells = rec.cells(_CELL_ORDER)
    source = rec.opt_text("source", "oncu")
    metadata = rec.opt_obj("metadata")

    if not question.strip():
        raise SkipRecord("empty question")
    if not answer.strip():
        raise SkipRecord("empty answer")
    blocks = split_long_context(long_context)
    if not blocks:
        raise SkipRecord("no passages (empty long_context)")

    notes: dict[str, Any] = {}
    kept: list[tuple[str | None, str, str]] = []
    seen: dict[str, str] = {}
    repeated: list[str] = []
    for pid, title, text in blocks:
        if pid is not None and pid in seen:
            if seen[pid] != text:
                raise SkipRecord("passage id repeated with different text")
            repeated.append(pid)
            continue
        if pid is not None:
            seen[pid] = text
        kept.append((pid, title, text))
    if repeated:
        notes["repeated_passages"] = repeated

    oracle_ids = {eid for eid, _, _ in oracle}
    oracle_titles = {eid: title for eid, _, title in oracle if title}
    outside: list[tuple[str, str, str]] = []  # evidence absent from the context, once per id
    for evidence in oracle:
        if evidence[0] not in seen and evidence[0] not in {o[0] for o in outside}:
            outside.append(evidence)
    if outside:
        notes["oracle_outside_context"] = [eid for eid, _, _ in outside]

    reserved = set(seen) | oracle_ids | distractors
    numbers = [int(m.group(1)) for m in map(_PNUM.fullmatch, reserved) if m]
    fresh = max(numbers, default=0)

    def new_id() -> str:
        nonlocal fresh
        while True:
            fresh += 1
            pid = neutral_id(fresh)
            if pid not in reserved:
                return pid

    distractor_role = (
        "conflicting" if cells["distractor_similarity"] == "conflicting" else "distractor"
    )
    passages: list[Passage] = []
    for pid, title, text in kept:
        if pid is None:
            pid = new_id()
            role = "filler"
        elif pid in oracle_ids:
            role = "gold"
        elif pid in distractors:
            role = distractor_role
        else:
            role = "filler"
        is_gold = role == "gold"
        doc_id = (oracle_titles.get(pid) if is_gold else None) or title or pid
        passages.append(Passage(pid, len(passages), title, text, doc_id, role, is_gold))
    for eid, text, title in outside:
        ord_ = len(passages)
        passages.append(Passage(eid, ord_, title, text, title or eid, "gold", True))
    passages_t = tuple(passages)

    has_gold = any(p.is_gold for p in passages_t)
    if cells["context_length"] is None:
        cells["context_length"] = count_tokens(long_context)
    if notes:
        metadata["import_notes"] = notes
    oracle = has_gold and metadata.get("cue_applicable") is not False
    return make_instance(
        instance_id,
        question,
        answer,
        passages_t,
        source=source,
        metadata=metadata,
        aliases=aliases,
        oracle_applicable=oracle,
        **cells,
    )
