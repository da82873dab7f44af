"""LongBench records (JSON Lines, THUDM/LongBench v1 / LongBench-E format) -> instances.

One JSON object per line, as LongBench ships every task (``data/hotpotqa.jsonl`` ...)::

    {"input": "question or query", "context": "the long context", "answers": ["...", ...],
     "length": 9151, "dataset": "hotpotqa", "language": "en", "all_classes": null,
     "_id": "..."}

Mapping:
- ``_id`` -> instance id; ``input`` -> question; ``answers[0]`` -> gold answer, the other
  answers -> aliases (blank answers dropped, repeats kept once);
- ``context`` -> passages, so that DOLCE probes can sample units
(:func:`core.dolce.probes.split_units`:
  ``passage`` units are these passages, ``sentence`` units the sentences and lines inside them):

  - a context with ``Passage N:`` / ``Paragraph N:`` markers at line starts (LongBench's
    multi-document QA tasks, passage_count, passage_retrieval_en) gives one passage per marked
    section: title = the marker without its colon (``Passage 3``), so the label a
    passage_retrieval answer names (``Paragraph 12``) stays visible to the model; text = what
    follows the marker up to the next one (the title line of a Wikipedia passage stays in the
    text, it is not guessed to be a title); text before the first marker becomes an untitled
    passage;
  - any other context is split at blank lines (LongBench's ``b`` unit of the DOLCE seed,
    Table 3: multi-line breaks), one untitled passage per block;

  passage ids p0001, p0002 ... in context order, ``doc_id`` = the marker label, else the id;
- LongBench marks no evidence: no passage is gold (role ``filler``), the instance is not
  oracle-applicable and fan-in is 0;
- ``dataset`` -> ``source`` ``longbench/<dataset>`` (``longbench`` when absent), so
  ``task_by=source`` separates the tasks of a file that mixes them; ``dataset``,
  ``language``, ``all_classes`` and ``length`` (LongBench's count of words, or characters for
  Chinese, of input + context + answers) stay in metadata; the context length cell is the
  whitespace tokens of the passages, as for every importer;
- an empty ``input`` (LongBench's prompts use none for gov_report, multi_news, vcsum,
  passage_count and lcc) or no non-blank answer skips the record; a blank context skips it
  too.
"""

from __future__ import annotations

import re
from typing import Any

from core.datasets.records import Fields, SkipRecord, make_instance, neutral_id
from core.types import Instance, Passage

__all__ = ["LONGBENCH_FIELDS", "longbench_instance", "split_context"]

#: Fields of a LongBench record (any other field is kept in ``import_notes.extra_fields``).
LONGBENCH_FIELDS = (
    "_id",
    "input",
    "context",
    "answers",
    "length",
    "dataset",
    "language",
    "all_classes",
)

_MARKER = re.compile(r"^(Passage|Paragraph) (\d+):[ \t]*", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


def split_context(context: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each passage of a LongBench context (empty sections dropped).

    ``Passage N:`` / ``Paragraph N:`` markers at line starts delimit titled sections (title =
    the marker without its colon; text before the first marker is an untitled passage);
    without markers, blank lines delimit untitled blocks.
    """
    marks = list(_MARKER.finditer(context))
    if not marks:
        blocks = _BLANK_LINES.split(context)
        return [("", b.strip()) for b in blocks if b.strip()]
    out = []
    head = context[: marks[0].start()].strip()
    if head:
        out.append(("", head))
    for m, nxt in zip(marks, marks[1:] + [None], strict=True):
        text = context[m.end() : nxt.start() if nxt is not None else len(context)].strip()
        if text:
            out.append((f"{m.group(1)} {m.group(2)}", text))
    return out


def longbench_instance(rec: Fields) -> Instance:
    """Map one LongBench record to an instance.

    Args:
        rec: the record (a JSON object).

    Returns:
        The instance, source ``longbench/<dataset>``.

    Raises:
        DataError: a required field (``_id``, ``input``, ``context``, ``answers``) is missing
            or null, or a field has the wrong type.
        SkipRecord: empty input, no non-blank answer, or a blank context.
    """
    instance_id = rec["_id"].ident()
    question = rec["input"].text()
    context = rec["context"].text()
    answers = [a.answer() for a in rec["answers"].items()]
    length = rec["length"].integer() if rec.has("length") else None
    dataset = rec.opt_text("dataset")
    language = rec.opt_text("language")
    classes_field = rec.get("all_classes")
    classes = None if classes_field is None else [c.answer() for c in classes_field.items()]

    if not question.strip():
        raise SkipRecord("empty question (input)")
    kept = list(dict.fromkeys(a for a in answers if a.strip()))
    if not kept:
        raise SkipRecord("empty answer")
    sections = split_context(context)
    if not sections:
        raise SkipRecord("no passages (empty context)")

    passages = tuple(
        Passage(neutral_id(i + 1), i, title, text, title or neutral_id(i + 1), "filler", False)
        for i, (title, text) in enumerate(sections)
    )
    metadata: dict[str, Any] = {
        "dataset": dataset,
        "language": language,
        "all_classes": classes,
        "length": length,
    }
    extra = {k: v for k, v in rec.value.items() if k not in LONGBENCH_FIELDS}
    if extra:
        metadata["import_notes"] = {"extra_fields": extra}
    return make_instance(
        instance_id,
        question,
        kept[0],
        passages,
        source=f"longbench/{dataset}" if dataset else "longbench",
        metadata=metadata,
        aliases=tuple(kept[1:]),
        oracle_applicable=False,
    )
