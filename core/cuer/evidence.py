"""What an intervention acts on: a base call's evidence items, the target, replacement passages."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rank_bm25 import BM25Okapi

from core.execution.prompts import render_passage
from core.params import Param
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    Chunk,
    chunk_instance,
    lexical_tokens,
)
from core.types import Instance, Passage

__all__ = [
    "EvidenceItem",
    "Pool",
    "REPLACE_HARDNESS",
    "REPLACE_SEED",
    "Target",
    "evidence_items",
    "replacement_candidates",
    "select_target",
    "shown_passage_ids",
]


#: Replacement hardness levels (seed 004 §5.6).
REPLACE_HARDNESS = ("easy", "medium", "hard")


#: Seed of the ``easy`` (random) replacement.
REPLACE_SEED = Param(
    "replace_seed", int, 0, "seed of the easy replacement", section="seed 004 §5.6"
)


_BM25_K1 = 1.5


_BM25_B = 0.75


_SEGMENT_RE = re.compile(r"\[passage_id:\s*(p\d+)\]")


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One shown piece of evidence: a passage, or one passage's segment of a chunk.

    :func:`core.execution.prompts.render_evidence` renders it as its ``text`` (it has
    ``passage_ids``
    and a ``text`` like a chunk), so a list of items renders like the context it came from.

    Attributes:
        passage_ids: the passage(s) the text belongs to (one, except for a chunk whose text
            cannot be split into passage segments).
        text: the text as shown, marker included.
        source: where it comes from: a chunk id (``c0003``), a passage id, or
            ``replacement:<unit id>`` / ``duplicate:<unit id>``.
    """

    passage_ids: tuple[str, ...]
    text: str
    source: str


@dataclass(frozen=True, slots=True)
class Target:
    """The evidence item chosen for intervention and the rule that chose it.

    Attributes:
        passage_id: the target passage id.
        rule: one of :data:`TARGET_RULES`.
    """

    passage_id: str
    rule: str


def _chunk_of(item: Any) -> Chunk | None:
    chunk = getattr(item, "chunk", item)
    if hasattr(chunk, "passage_ids") and isinstance(getattr(chunk, "text", None), str):
        return chunk
    return None


def _split_chunk(chunk: Any) -> list[EvidenceItem]:
    """A chunk's passage segments (blank-line separated, each opening with its marker)."""
    text = chunk.text.strip()
    ids = tuple(chunk.passage_ids)
    source = getattr(chunk, "chunk_id", None) or getattr(chunk, "source", "")
    parts = text.split("\n\n")
    if len(parts) == len(ids) and all(
        (m := _SEGMENT_RE.match(part)) is not None and m.group(1) == pid
        for part, pid in zip(parts, ids, strict=True)
    ):
        pairs = zip(ids, parts, strict=True)
        return [EvidenceItem((pid,), part.strip(), source) for pid, part in pairs]
    return [EvidenceItem(ids, text, source)]


def evidence_items(shown: Iterable[Any]) -> list[EvidenceItem]:
    """The shown evidence as a flat list of items, one per passage segment.

    Args:
        shown: passages, chunks, ranked chunks or :class:`EvidenceItem` s, in prompt order.

    Returns:
        The items; ``render_evidence(evidence_items(x)) == render_evidence(x)``.

    Raises:
        TypeError: an item that is neither a passage nor a chunk.
    """
    out: list[EvidenceItem] = []
    for item in shown:
        if isinstance(item, EvidenceItem):
            out.append(item)
        elif isinstance(item, Passage):
            out.append(EvidenceItem((item.passage_id,), render_passage(item), item.passage_id))
        elif (chunk := _chunk_of(item)) is not None:
            out.extend(_split_chunk(chunk))
        else:
            raise TypeError(f"cannot use {type(item).__name__} as evidence (Passage or Chunk)")
    return out


def shown_passage_ids(shown: Iterable[Any]) -> list[str]:
    """Distinct passage ids of the shown evidence, in order of first appearance."""
    return list(dict.fromkeys(pid for it in evidence_items(shown) for pid in it.passage_ids))


def select_target(
    instance: Instance, shown: Sequence[Any], cited_ids: Iterable[str]
) -> Target | None:
    """Choose the intervention target by the four-step priority of seed 004 §5.5.

    Args:
        instance: the instance (gold titles are read here; never shown to a model).
        shown: the base trace's evidence, in rank order.
        cited_ids: the ids the model cited in the base trace (ids not shown are ignored).

    Returns:
        The target and its rule (:data:`TARGET_RULES`), or None when nothing is shown.
    """
    order = shown_passage_ids(shown)
    if not order:
        return None
    cited = set(cited_ids)
    titles = {p.passage_id: p.title.strip() for p in instance.passages}
    support = {p.title.strip() for p in instance.passages if p.is_gold}
    cited_shown = [pid for pid in order if pid in cited]
    for rule, pool in (
        ("cited_support_title", [pid for pid in cited_shown if titles.get(pid) in support]),
        ("cited", cited_shown),
        ("retrieved_support_title", [pid for pid in order if titles.get(pid) in support]),
        ("top_ranked", order),
    ):
        if pool:
            return Target(pool[0], rule)
    return None  # unreachable: ``order`` is not empty


class Pool:
    """An instance's replacement units, with one BM25 index over them (seed 004 §5.6).

    Units are ``(id, passage ids, text)``: the instance's passages, whole (the paper's
    candidate paragraphs), or, for an instance with a single passage, its chunks (same
    chunking as the base retrieval). Built once per instance and reused for every hardness
    level (tokenizing and indexing dominate planning time).
    """

    def __init__(
        self,
        instance: Instance,
        shown: Sequence[Any],
        chunk_size: int,
        overlap: int,
        chunks: Sequence[Chunk] | None = None,
    ):
        self.instance = instance
        self.items = evidence_items(shown)
        self.shown_ids = set(shown_passage_ids(self.items))
        self.by_chunk = len(instance.passages) == 1
        if self.by_chunk:
            if chunks is None:
                chunks = chunk_instance(instance, chunk_size, overlap)
            self.units = [(c.chunk_id, tuple(c.passage_ids), c.text) for c in chunks]
        else:
            self.units = [
                (p.passage_id, (p.passage_id,), render_passage(p)) for p in instance.passages
            ]
        # Chunks shown as such (a single passage's windows: shown is not eligible).
        self.shown_units = {it.source for it in self.items}
        self._bm25: Any = None

    @property
    def pool(self) -> str:
        """``passages`` or ``chunks`` (a single-passage instance)."""
        return "chunks" if self.by_chunk else "passages"

    def scores(self, query: str) -> list[float]:
        """BM25 Okapi (k1=1.5, b=0.75) of every unit against ``query``."""
        q = lexical_tokens(query)
        if self._bm25 is None:
            corpus = [lexical_tokens(u[2]) for u in self.units]
            self._bm25 = BM25Okapi(corpus, k1=_BM25_K1, b=_BM25_B) if any(corpus) else False
        if self._bm25 is False or not q:
            return [0.0] * len(self.units)
        return [float(x) for x in self._bm25.get_scores(q)]

    def eligible(self, target_id: str) -> list[int]:
        """Indexes of the units that may replace ``target_id`` (the band), in unit order."""
        if self.by_chunk:
            # One passage: its gold label cannot tell its windows apart; any unshown one.
            return [i for i, u in enumerate(self.units) if u[0] not in self.shown_units]
        gold = set(self.instance.gold_ids)
        return [i for i, u in enumerate(self.units) if u[0] not in gold and u[0] != target_id]

    def target_text(self, target_id: str) -> str:
        """The target evidence's text: its whole passage (chunks: its shown segments)."""
        if not self.by_chunk:
            for p in self.instance.passages:
                if p.passage_id == target_id:
                    return render_passage(p)
        return "\n".join(it.text for it in self.items if target_id in it.passage_ids)

    def candidates(
        self, target_id: str, hardness: str, seed: int
    ) -> list[tuple[str, tuple[str, ...], str]]:
        """Eligible units for ``target_id``, best first (see :func:`replacement_candidates`)."""
        if hardness not in REPLACE_HARDNESS:
            raise ValueError(
                f"unknown replace hardness {hardness!r}; choose from: {', '.join(REPLACE_HARDNESS)}"
            )
        band = self.eligible(target_id)
        if hardness == "easy":
            rng = random.Random(f"{seed}|{self.instance.instance_id}|{target_id}")
            rng.shuffle(band)
            return [self.units[i] for i in band]
        if not band:
            return []
        query = self.instance.question if hardness == "medium" else self.target_text(target_id)
        scores = self.scores(query)
        return [self.units[i] for i in sorted(band, key=lambda i: (-scores[i], i))]


def replacement_candidates(
    instance: Instance,
    shown: Sequence[Any],
    target_id: str,
    hardness: str,
    *,
    seed: int = REPLACE_SEED.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> list[tuple[str, tuple[str, ...], str]]:
    """Replacement units for ``target_id`` in preference order (the first one is used).

    Seed 004 §4.3 / §5.6: the target is replaced by "a topically related but non-supporting
    passage", drawn from the instance's candidate paragraphs. Units are the instance's
    passages, whole; the band of eligible ones is every non-support passage (not gold) other
    than the target, shown or not, so ``replace`` applies to every instance with a
    non-support passage besides the target. An instance with a single passage (no other
    passage to draw from) uses its chunks of the base chunking instead: every chunk not shown.
    Order: ``easy`` a random non-support unit (a seeded order,
    ``random.Random(f"{seed}|{instance_id}|{target_id}")``), ``medium`` the highest BM25
    score against the question first, ``hard`` the highest BM25 score against the target's
    text (its whole passage) first; ties keep the earlier unit. BM25 Okapi (k1=1.5, b=0.75)
    indexes every unit of the instance (gold ones too), tokens of
    :func:`core.retrieval.retrievers.lexical_tokens`.

    Returns:
        ``(unit id, passage ids, text)`` tuples; empty when nothing is eligible.

    Raises:
        ValueError: unknown hardness.
    """
    return Pool(instance, shown, chunk_size, overlap).candidates(target_id, hardness, seed)
