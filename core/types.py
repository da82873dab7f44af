"""Frozen records passed between pipeline stages.

This module imports nothing from ``core``: every other module may depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = [
    "ANSWER_TYPES",
    "CONDITIONS",
    "DataError",
    "Dataset",
    "Instance",
    "Passage",
    "PlannedCall",
    "REASONING_TYPES",
    "ROLES",
    "count_tokens",
    "stored_ids",
]

#: Passage roles. ``role`` and ``is_gold`` are stored for the user and never shown to a model.
ROLES = ("gold", "distractor", "conflicting", "filler")

#: The four evidence conditions of the protocol (SPEC §6.1).
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")

REASONING_TYPES = ("single_hop", "multi_hop", "comparison", "arithmetic")
ANSWER_TYPES = ("entity", "number", "yes_no", "string")


def count_tokens(text: str) -> int:
    """Whitespace token count, the project's default token unit (SPEC §3.2)."""
    return len(text.split())


class DataError(ValueError):
    """Bad input data: names the file, the record and the field in one line.

    Attributes:
        file: path of the offending file (as given by the user).
        record: 1-based record number (line for JSONL, list index + 1 for JSON), or None.
        field: name of the offending field, or None when the record as a whole is bad.
        reason: what is wrong, in a few words.
    """

    def __init__(self, file: str, record: int | None, field: str | None, reason: str):
        self.file = str(file)
        self.record = record
        self.field = field
        self.reason = reason
        where = [self.file]
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(": ".join(where) + ": " + reason.replace("\n", " "))


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage of an instance's context.

    Attributes:
        passage_id: neutral visible id (``p0001`` ...), the only id a model ever sees.
        ord: 0-based position in the stored context order.
        title: passage title (may be empty).
        text: passage text.
        doc_id: source document the passage comes from (fan-in counts distinct gold doc_ids).
        role: one of ``ROLES``; never shown to a model.
        is_gold: True for gold evidence; never shown to a model.
    """

    passage_id: str
    ord: int
    title: str
    text: str
    doc_id: str
    role: str = "filler"
    is_gold: bool = False

    @property
    def n_tokens(self) -> int:
        """Whitespace tokens of title and text."""
        return count_tokens(self.title) + count_tokens(self.text)


@dataclass(frozen=True, slots=True)
class Instance:
    """One benchmark question with its ordered passages and metadata cells (SPEC §3.1).

    Attributes:
        instance_id: unique id within the dataset.
        question: the question shown to the model.
        gold_answer: reference answer (never shown to a model).
        answer_aliases: further accepted answers; scores take the max over gold + aliases.
        answer_type: entity / number / yes_no / string (free text for imported data).
        reasoning_type: single_hop / multi_hop / comparison / arithmetic, or the source's label.
        context_length: nominal context length in tokens (the generator's target cell, or the
            measured whitespace-token length for imported data).
        evidence_position: front / middle / end / scattered / pos_00..pos_09 / unknown.
        distractor_similarity: none / low / high / conflicting / unknown.
        evidence_density: low / medium / high / unknown.
        fan_in: number of distinct ``doc_id`` among gold passages.
        oracle_applicable: False when the instance has no gold evidence to isolate.
        source: where the instance comes from (``controlled``, ``hotpotqa`` ...).
        passages: ordered passages.
        metadata: anything else worth keeping (JSON-serialisable).
    """

    instance_id: str
    question: str
    gold_answer: str
    passages: tuple[Passage, ...] = ()
    answer_aliases: tuple[str, ...] = ()
    answer_type: str = "string"
    reasoning_type: str = "unknown"
    context_length: int = 0
    evidence_position: str = "unknown"
    distractor_similarity: str = "unknown"
    evidence_density: str = "unknown"
    fan_in: int = 0
    oracle_applicable: bool = True
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gold_ids(self) -> tuple[str, ...]:
        """Passage ids of the gold evidence, in context order."""
        return tuple(p.passage_id for p in self.passages if p.is_gold)


@dataclass(frozen=True, slots=True)
class Dataset:
    """A named collection of instances and how it was made.

    Attributes:
        name: unique dataset name in the store (what the user types).
        source: origin (``controlled``, ``hotpotqa``, a file path ...).
        builder: the builder or importer that made it (``controlled``, ``import:hotpotqa`` ...).
        builder_params: parameters that reproduce it (preset, seed, file, format ...).
        instances: the instances, in a deterministic order.
    """

    name: str
    source: str
    builder: str
    builder_params: Mapping[str, Any]
    instances: tuple[Instance, ...]


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One model call a planner wants made; the engine executes it and stores a prediction.

    Planners (conditions, interventions, probes) are pure functions that return these; the
    engine skips those already stored under ``(run_id, instance_id, condition, variant)``,
    serves repeats from the response cache, and writes one prediction per call.

    Attributes:
        instance_id: the instance the call is about.
        condition: ``no_evidence`` / ``full_context`` / ``retrieved`` / ``oracle`` /
            ``intervention`` / ``probe``.
        variant: canonical variant id, ``""`` for the four plain conditions; e.g.
            ``replace:hard|p0004`` for an intervention, ``C=5|start=12`` for a probe. Together
            with the condition it is the prediction's key within a run.
        messages: the chat messages (system, user), built from fixed templates only.
        input_passage_ids: neutral ids of the passages shown, in prompt order.
        prompt_hash: hex SHA-256 of the messages (:func:`core.execution.prompts.prompt_hash`).
        meta: planner notes stored with the prediction as JSON (e.g. the CUE-R target and the
            rule that chose it, a probe's span); never shown to the model.
    """

    instance_id: str
    condition: str
    variant: str
    messages: tuple[Mapping[str, str], ...]
    input_passage_ids: tuple[str, ...]
    prompt_hash: str
    meta: Mapping[str, Any] = field(default_factory=dict)


def stored_ids(value: Any) -> list[str]:
    """A stored id-list cell (cited, shown or gold passage ids) as a list of strings.

    The one reader of such cells: a missing cell (None, pandas' NA, a float NaN: an imported
    run keeps no shown ids) is empty, a string is one id (empty: none), any other iterable its
    items as strings; a value that is not a list at all is empty.
    """
    if value is None or type(value).__name__ == "NAType":
        return []
    if isinstance(value, float):
        return []  # NaN: missing (a float is never an id list)
    if isinstance(value, str):
        return [value] if value else []
    try:
        return [str(v) for v in value]
    except TypeError:
        return []
