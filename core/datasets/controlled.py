"""Controlled benchmark generator (SPEC §3.2; seed 000 §5.3, extended with a fan-in axis).

Every instance is built from one cell of a grid (context length x evidence position x
distractor similarity x reasoning type, plus fan-in and a replicate number) and its own random
generator, seeded from SHA-256 of ``("controlled", preset, seed, grid index)``. So the same
preset and seed give byte-identical instances, a subset of a preset gives exactly the instances
of the full build, and no global state (``random``, ``hash()``, time) is involved.

Definitions (tokens are whitespace tokens of title + text, ``core.types.count_tokens``):

- **Context length**: the cell's target ``T`` (4000 / 8000 / 16000 / 32000). Filler is generated
  to exact token counts, so the passages sum to between ``T - 59`` and ``T`` tokens.
- **Relative offset** of a passage: tokens before it / total context tokens; its **midpoint
  offset** adds half its own tokens. Position regions are half-open fractions of the context:
  front ``[0, 1/3)``, middle ``[1/3, 2/3)``, end ``[2/3, 1]``, decile ``pos_0d``
  ``[d/10, (d+1)/10)`` (``pos_09``: ``[0.9, 1]``). In a front / middle / end / decile cell
  *every* gold passage has both its offset and its midpoint offset inside the region (so
  ``core.datasets.records.evidence_position``, which uses midpoints, agrees with the label).
  **Scattered**: at least two gold passages; gold passage ``j`` of ``k`` (in context order)
  lies, offset and midpoint, in third ``round(2j / (k - 1))`` -- so the first is in the front
  third, the last in the end third, and they never share a single third. Interior region
  bounds keep an 80-token margin, so labels survive the context being up to 59 tokens short.
- **Reasoning**: ``single_hop`` (one fact; answer an entity or a number stated verbatim),
  ``multi_hop`` (a chain of k facts through bridge entities, e.g. "Model X was developed by
  Lab Y" + "Lab Y is headquartered in City Z" -> "In which city is the developer of Model X
  headquartered?"), ``comparison`` (one numeric attribute of k entities; the answer is the
  entity with the largest value), ``arithmetic`` (sum of k integer values, or for k = 2 the
  difference larger - smaller; answer type number).
- **Single-hop in a scattered cell**: one fact cannot be in two places, so the fact is stated by
  two gold passages from different documents (a primary record and an independent audit that
  restates it, ``metadata.evidence_mode == "corroborated"``); either one alone suffices.
- **Fan-in**: distinct ``doc_id`` among gold passages. Gold passage j (in fact order) belongs
  to gold document ``j mod f`` for the cell's fan-in f; by default f = number of gold passages
  (each gold passage its own document). Filler passages come in documents of 1 to 3
  consecutive passages; every distractor is its own document. Public doc ids ``doc_00001``...
  are numbered in order of first appearance in the context.
- **Evidence density**: the number of gold passages an instance has -- ``low`` = 1, ``medium``
  = 2 or 3, ``high`` = 4 or more. It is deliberately independent of context length (the length
  axis already measures dilution); the share of context tokens in gold passages is kept in
  ``metadata.gold_token_fraction``.
- **Distractor similarity**: ``none`` = filler only; ``low`` = ``max(4, k)`` passages stating
  facts with other relations about fresh entities of other stems; ``high`` = ``max(4, k)``
  passages stating the same relation as a gold fact about a *near-identical* entity (same name
  stem, suffix differing in exactly one of its last three digits: ``Model Alpha 00655`` for
  ``Model Alpha 00654``) with a different value; ``conflicting`` = the ``high`` passages plus,
  for each distinct gold fact, a role-``conflicting`` near-duplicate of the gold passage (same
  title pattern and sentence template) asserting a different value for a near-identical
  entity; in comparison questions the conflicting values reverse the order (the winner's
  look-alike scores below every other entity, the others' look-alikes above the winner).
  Entity-valued distractors never reuse the gold object's or the answer's name stem, and no
  distractor states the gold answer, so only gold passages support it.
- **Entities** are ``{stem} {5-digit zero-padded suffix}`` (suffix 00100..09999), so answers
  cannot be guessed without the evidence; filler prose comes from ``core.datasets.synthetic_text``.

Presets (see ``PRESETS``): ``controlled-200`` (each of the 192 cells 4K/8K/16K x 4 positions x
4 distractor settings x 4 reasoning types once, plus 8 extra cells spread over the grid),
``scaling-3200`` (4 lengths x 10 deciles x 4 distractor settings x 4 reasoning types x 5
replicates) and ``fanin-grid`` (fan-in 1..6 x multi_hop / comparison / arithmetic x 4K, 8K x 4
replicates = 144; replicate r uses position ``POSITIONS[r]`` and distractor setting
``DISTRACTORS[(r + fan_in) % 4]``; k = max(2, fan_in) gold passages).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import product
from typing import Any

from core.datasets.facts import (
    RELS,
    TITLES,
    Fact,
    Names,
    Rel,
    Spec,
    arithmetic,
    comparison,
    fmt,
    multi_hop,
    new_fact,
    single_hop,
    title_stem,
)
from core.datasets.records import make_instance
from core.datasets.synthetic_text import (
    MIN_FILLER,
    Block,
    assemble,
    derive_rng,
    free_slot,
    pad_sentences,
)
from core.datasets.synthetic_text import to_passages as _to_passages
from core.names import check_name
from core.types import Dataset, Instance, Passage

__all__ = [
    "DECILES",
    "DISTRACTORS",
    "LENGTHS",
    "POSITIONS",
    "PRESETS",
    "REASONING",
    "build_controlled",
    "density_label",
    "gold_offsets",
    "position_region",
    "preset_cells",
]

LENGTHS = (4000, 8000, 16000, 32000)
POSITIONS = ("front", "middle", "end", "scattered")
DECILES = tuple(f"pos_{d:02d}" for d in range(10))
DISTRACTORS = ("none", "low", "high", "conflicting")
REASONING = ("single_hop", "multi_hop", "comparison", "arithmetic")
_MULTI_DOC = ("multi_hop", "comparison", "arithmetic")
_SUBSET_KEYS = (
    "context_length",
    "evidence_position",
    "distractor_similarity",
    "reasoning_type",
    "fan_in",
    "replicate",
)

#: Interior region bounds keep this many tokens of margin (see the module docstring).
_MARGIN = 80


def _controlled_200_extras() -> list[tuple[int, str, str, str]]:
    # 8 extra cells, balanced over reasoning types, positions and distractor settings.
    return [
        (
            LENGTHS[i % 3],
            POSITIONS[(3 * i + 1) % 4],
            DISTRACTORS[(i + i // 4) % 4],
            REASONING[i % 4],
        )
        for i in range(8)
    ]


#: Preset name -> description and grid parameters.
PRESETS: dict[str, dict[str, Any]] = {
    "controlled-200": {
        "description": (
            "200 instances balanced over the 192 cells up to 16K (3 lengths x 4 positions x "
            "4 distractor settings x 4 reasoning types, each once) plus 8 extra cells"
        ),
        "n_instances": 200,
        "lengths": LENGTHS[:3],
        "positions": POSITIONS,
        "distractors": DISTRACTORS,
        "reasoning_types": REASONING,
        "replicates": 1,
        "extra_cells": _controlled_200_extras(),
    },
    "scaling-3200": {
        "description": (
            "length-position scaling grid: 4 lengths x 10 decile positions x 4 distractor "
            "settings x 4 reasoning types x 5 replicates"
        ),
        "n_instances": 3200,
        "lengths": LENGTHS,
        "positions": DECILES,
        "distractors": DISTRACTORS,
        "reasoning_types": REASONING,
        "replicates": 5,
    },
    "fanin-grid": {
        "description": (
            "fan-in 1..6 x multi-document reasoning (multi_hop, comparison, arithmetic) x "
            "4K, 8K x 4 replicates; replicate r at position POSITIONS[r] with distractor "
            "setting DISTRACTORS[(r + fan_in) % 4]"
        ),
        "n_instances": 144,
        "lengths": (4000, 8000),
        "positions": POSITIONS,
        "distractors": DISTRACTORS,
        "reasoning_types": _MULTI_DOC,
        "fan_in": (1, 2, 3, 4, 5, 6),
        "replicates": 4,
    },
}


@dataclass(frozen=True, slots=True)
class _Cell:
    context_length: int
    evidence_position: str
    distractor_similarity: str
    reasoning_type: str
    fan_in: int | None = None  # None: one document per gold passage
    replicate: int = 0


def _cells(preset: str) -> list[_Cell]:
    if preset == "controlled-200":
        extras: dict[tuple[int, str, str, str], int] = {}
        for cell in PRESETS[preset]["extra_cells"]:
            extras[cell] = extras.get(cell, 0) + 1
        out = []
        for key in product(LENGTHS[:3], POSITIONS, DISTRACTORS, REASONING):
            for r in range(1 + extras.get(key, 0)):
                out.append(_Cell(*key, replicate=r))
        return out
    if preset == "scaling-3200":
        return [
            _Cell(length, pos, dis, rea, replicate=r)
            for length, pos, dis, rea, r in product(
                LENGTHS, DECILES, DISTRACTORS, REASONING, range(5)
            )
        ]
    if preset == "fanin-grid":
        return [
            _Cell(length, POSITIONS[r], DISTRACTORS[(r + f) % 4], rea, fan_in=f, replicate=r)
            for f, rea, length, r in product(range(1, 7), _MULTI_DOC, (4000, 8000), range(4))
        ]
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")


def preset_cells(preset: str) -> list[dict[str, Any]]:
    """The grid cells of a preset in instance order (one dict per instance).

    Args:
        preset: a key of ``PRESETS``.

    Returns:
        Dicts with ``context_length``, ``evidence_position``, ``distractor_similarity``,
        ``reasoning_type``, ``fan_in`` (None = one document per gold passage), ``replicate``.

    Raises:
        ValueError: unknown preset.
    """
    return [asdict(c) for c in _cells(preset)]


# ---------------------------------------------------------------------------- positions
def position_region(position: str) -> tuple[float, float]:
    """The fraction interval ``[lo, hi)`` of a front / middle / end / ``pos_0d`` position.

    Args:
        position: an evidence-position label other than ``scattered``.

    Returns:
        ``(lo, hi)``; the last region of the context (end, ``pos_09``) includes 1.0.

    Raises:
        ValueError: unknown label, or ``scattered`` (which is not one interval).
    """
    thirds = {"front": (0.0, 1 / 3), "middle": (1 / 3, 2 / 3), "end": (2 / 3, 1.0)}
    if position in thirds:
        return thirds[position]
    if position in DECILES:
        d = int(position[4:])
        return d / 10, (d + 1) / 10
    allowed = ", ".join([*POSITIONS[:3], *DECILES])
    raise ValueError(f"no single region for position {position!r}; allowed: {allowed}")


def gold_offsets(
    passages: Sequence[Passage], n_tokens: Sequence[int] | None = None
) -> list[tuple[float, float]]:
    """Relative offset and midpoint offset of every gold passage, in context order.

    Args:
        passages: an instance's passages in context order.
        n_tokens: their token counts when the caller has them (else counted here).

    Returns:
        ``(tokens before / total, (tokens before + own / 2) / total)`` per gold passage.
    """
    counts = [p.n_tokens for p in passages] if n_tokens is None else n_tokens
    total = sum(counts)
    out: list[tuple[float, float]] = []
    before = 0
    for p, n in zip(passages, counts, strict=True):
        if p.is_gold and total:
            out.append((before / total, (before + n / 2) / total))
        before += n
    return out


def _in(frac: float, lo: float, hi: float) -> bool:
    return lo <= frac < hi or (hi >= 1.0 and frac <= 1.0 and frac >= lo)


def _placement_ok(position: str, offsets: Sequence[tuple[float, float]]) -> bool:
    if not offsets:
        return False
    if position == "scattered":
        k = len(offsets)
        if k < 2:
            return False
        for j, (start, mid) in enumerate(offsets):
            t = round(2 * j / (k - 1))
            lo, hi = position_region(POSITIONS[t])
            if not (_in(start, lo, hi) and _in(mid, lo, hi)):
                return False
        return True
    lo, hi = position_region(position)
    return all(_in(s, lo, hi) and _in(m, lo, hi) for s, m in offsets)


def density_label(n_gold: int) -> str:
    """Evidence density from the number of gold passages: 1 low, 2-3 medium, 4+ high."""
    if n_gold <= 1:
        return "low"
    return "medium" if n_gold <= 3 else "high"


def _other_number(
    rng: random.Random, rel: Rel, forbidden: set[str], lo: int | None = None, hi: int | None = None
) -> int:
    """A value in ``[lo, hi]`` (default: the relation's range) whose text is not forbidden."""
    lo = rel.low if lo is None else max(rel.low, lo)
    hi = rel.high if hi is None else min(rel.high, hi)
    while True:
        v = rng.randint(lo, hi)
        if fmt(rel, v) not in forbidden and str(v) not in forbidden:
            return v


# ---------------------------------------------------------------------------- passages
def _fact_block(rng: random.Random, fact: Fact, role: str, doc_key: str, *, audit=False) -> Block:
    if audit:
        title = f"Audit summary for {fact.subject}"
        core = "An independent audit confirmed that " + fact.sentence()
    else:
        title = TITLES[fact.title].format(s=fact.subject)
        core = fact.sentence()
    n = rng.randint(80, 120) if role == "gold" else rng.randint(100, 180)
    n_body = n - len(title.split())
    return Block(title, pad_sentences(rng, [core], n_body), role, doc_key, fact.as_dict())


def _forbidden(spec: Spec) -> tuple[set[str], set[str]]:
    """Name stems and number texts a distractor must not use (it never states the answer)."""
    stems = {title_stem(spec.answer)} if spec.answer_type == "entity" else set()
    numbers = {spec.answer, *spec.aliases} if spec.answer_type == "number" else set()
    for f in spec.facts:
        if f.number is None:
            stems.add(title_stem(f.value))
        else:
            numbers.add(f.value)
    return stems, numbers


def _variant(
    rng: random.Random,
    names: Names,
    fact: Fact,
    stems: set[str],
    numbers: set[str],
    lo: int | None = None,
    hi: int | None = None,
) -> Fact:
    """The same relation about a near-identical entity, with a different value."""
    rel = RELS[fact.relation]
    subject = names.near(fact.subject)
    if rel.obj == "number":
        v = _other_number(rng, rel, numbers | {fact.value}, lo, hi)
        return new_fact(rng, subject, fact.relation, fmt(rel, v), v)
    return new_fact(
        rng, subject, fact.relation, names.new(rel.obj, avoid=stems | {title_stem(subject)})
    )


def _distractors(rng: random.Random, names: Names, spec: Spec, similarity: str) -> list[Block]:
    if similarity == "none":
        return []
    stems, numbers = _forbidden(spec)
    unique: list[Fact] = []
    for f in spec.facts:
        if all(f is not u for u in unique):
            unique.append(f)
    n = max(4, len(spec.facts))
    blocks: list[Block] = []
    if similarity == "low":
        gold_rels = {f.relation for f in spec.facts}
        gold_fams = {RELS[f.relation].subj for f in spec.facts}
        pool = [r for r in RELS if r not in gold_rels and RELS[r].subj not in gold_fams]
        pool = pool or [r for r in RELS if r not in gold_rels]
        gold_stems = stems | {title_stem(f.subject) for f in spec.facts}
        for i in range(n):
            relation = rng.choice(pool)
            rel = RELS[relation]
            subject = names.new(rel.subj, avoid=gold_stems)
            if rel.obj == "number":
                v = _other_number(rng, rel, numbers)
                fact = new_fact(rng, subject, relation, fmt(rel, v), v)
            else:
                fact = new_fact(rng, subject, relation, names.new(rel.obj, avoid=gold_stems))
            blocks.append(_fact_block(rng, fact, "distractor", f"d{i}"))
        return blocks
    for i in range(n):
        fact = _variant(rng, names, unique[i % len(unique)], stems, numbers)
        blocks.append(_fact_block(rng, fact, "distractor", f"d{i}"))
    if similarity == "conflicting":
        for i, gold in enumerate(unique):
            lo = hi = None
            if spec.mode == "compare":
                ranked = sorted(f.number or 0 for f in unique)
                if gold.number == ranked[-1]:
                    hi = ranked[0] - 1  # the winner's look-alike scores below every entity
                else:
                    lo = ranked[-1] + 1  # the others' look-alikes score above the winner
            fact = _variant(rng, names, gold, stems, numbers, lo, hi)
            fact.phrasing, fact.title = gold.phrasing, gold.title
            blocks.append(_fact_block(rng, fact, "conflicting", f"c{i}"))
    return blocks


# ---------------------------------------------------------------------------- layout
def _bounds(position: str, total: int) -> tuple[int, int, bool]:
    """Token window for a gold group: first start >= lo; last midpoint < hi (or end <= hi)."""
    lo_f, hi_f = position_region(position)
    lo = 0 if lo_f == 0 else math.ceil(lo_f * total) + _MARGIN
    if hi_f >= 1.0:
        return lo, total, True
    return lo, math.floor(hi_f * total) - _MARGIN, False


def _place_group(
    rng: random.Random, sizes: Sequence[int], lo: int, hi: int, end_cap: bool
) -> list[int]:
    need = sum(sizes[:-1]) + (sizes[-1] if end_cap else (sizes[-1] + 1) // 2)
    slack = hi - lo - need
    if slack < 0:
        raise RuntimeError(f"gold passages of {sum(sizes)} tokens do not fit in [{lo}, {hi})")
    cuts = sorted(rng.randint(0, slack) for _ in sizes)
    starts, cursor, prev = [], lo, 0
    for i, (cut, size) in enumerate(zip(cuts, sizes, strict=True)):
        gap = cut - prev
        if i and gap < MIN_FILLER:
            gap = 0  # the gap would be too small for a filler passage: keep them adjacent
        cursor += gap
        prev = cut
        starts.append(cursor)
        cursor += size
    return starts


def _gold_targets(rng: random.Random, position: str, sizes: Sequence[int], total: int) -> list[int]:
    if position != "scattered":
        return _place_group(rng, sizes, *_bounds(position, total))
    k = len(sizes)
    thirds = [round(2 * j / (k - 1)) for j in range(k)]
    starts: list[int] = []
    for t in range(3):
        members = [sizes[j] for j in range(k) if thirds[j] == t]
        if members:
            starts += _place_group(rng, members, *_bounds(POSITIONS[t], total))
    return starts


def _layout(
    rng: random.Random, cell: _Cell, gold: list[Block], distractors: list[Block]
) -> list[Block]:
    total = cell.context_length
    targets = _gold_targets(rng, cell.evidence_position, [b.n_tokens for b in gold], total)
    anchored = list(zip(targets, gold, strict=True))
    # A distractor never ends within MIN_FILLER tokens before a gold passage, so every gap in
    # front of a gold passage is either filled exactly or empty and gold lands on its target.
    occupied = [(t - MIN_FILLER, t + b.n_tokens) for t, b in anchored]
    for block in distractors:
        start = free_slot(rng, occupied, block.n_tokens, total)
        if start is None:
            raise RuntimeError(f"no room for a distractor in a {total}-token context")
        occupied.append((start, start + block.n_tokens))
        anchored.append((start, block))
    return assemble(rng, total, anchored)


# ---------------------------------------------------------------------------- instances
def _build_instance(preset: str, seed: int, index: int, cell: _Cell) -> Instance:
    rng = derive_rng("controlled", preset, seed, index)
    names = Names(rng)
    scattered = cell.evidence_position == "scattered"
    k = max(2, cell.fan_in or 2)
    if cell.reasoning_type == "single_hop":
        spec = single_hop(rng, names, scattered)
    elif cell.reasoning_type == "multi_hop":
        spec = multi_hop(rng, names, k)
    elif cell.reasoning_type == "comparison":
        spec = comparison(rng, names, k)
    else:
        spec = arithmetic(rng, names, k)
    n_gold = len(spec.facts)
    fan_in = cell.fan_in or n_gold
    gold = [
        _fact_block(rng, f, "gold", f"g{j % fan_in}", audit=spec.corroborate and j == 1)
        for j, f in enumerate(spec.facts)
    ]
    rng.shuffle(gold)  # context order is independent of the reasoning order
    distractors = _distractors(rng, names, spec, cell.distractor_similarity)
    for _ in range(20):
        blocks = _layout(rng, cell, gold, distractors)
        passages, facts = _to_passages(blocks)
        counts = [p.n_tokens for p in passages]  # counted once: each is a split of the text
        offsets = gold_offsets(passages, counts)
        total = sum(counts)
        if _placement_ok(cell.evidence_position, offsets) and abs(total - cell.context_length) <= (
            0.05 * cell.context_length
        ):
            break
    else:  # pragma: no cover - the margins make this unreachable
        raise RuntimeError(f"could not place the evidence of {preset} #{index} ({cell})")
    gold_tokens = sum(n for p, n in zip(passages, counts, strict=True) if p.is_gold)
    cell_dict = asdict(cell)
    cell_dict["fan_in"] = fan_in
    metadata = {
        "preset": preset,
        "seed": seed,
        "grid_index": index,
        "replicate": cell.replicate,
        "cell": cell_dict,
        "token_unit": "whitespace",
        "context_tokens": total,
        "n_gold_passages": n_gold,
        "gold_token_fraction": round(gold_tokens / total, 4),
        "gold_offsets": [[round(s, 4), round(m, 4)] for s, m in offsets],
        "evidence_mode": spec.mode,
        "gold_facts": [f.as_dict() for f in spec.facts],
        "numbers": spec.numbers,
        "passage_facts": facts,
    }
    return make_instance(
        f"controlled_{index + 1:06d}",
        spec.question,
        spec.answer,
        passages,
        source="controlled",
        metadata=metadata,
        aliases=spec.aliases,
        answer_type=spec.answer_type,
        reasoning_type=cell.reasoning_type,
        context_length=cell.context_length,
        evidence_position=cell.evidence_position,
        distractor_similarity=cell.distractor_similarity,
        evidence_density=density_label(n_gold),
        oracle_applicable=True,
    )


def _check_subset(subset: Mapping[str, Iterable[Any]] | None) -> dict[str, set[Any]]:
    if subset is None:
        return {}
    out: dict[str, set[Any]] = {}
    for key, values in subset.items():
        if key not in _SUBSET_KEYS:
            raise ValueError(f"unknown subset key {key!r}; allowed: {', '.join(_SUBSET_KEYS)}")
        if isinstance(values, (str, int)):
            values = [values]
        out[key] = set(values)
    return out


def build_controlled(
    preset: str = "controlled-200",
    seed: int = 42,
    name: str | None = None,
    *,
    limit: int | None = None,
    subset: Mapping[str, Iterable[Any]] | None = None,
) -> Dataset:
    """Build a controlled benchmark preset (SPEC §3.2); pure, deterministic, offline.

    Args:
        preset: ``controlled-200``, ``scaling-3200`` or ``fanin-grid`` (see ``PRESETS``).
        seed: seed of every instance's generator; same seed -> byte-identical instances.
        name: dataset name (default: the preset name).
        limit: keep only the first ``limit`` instances (after ``subset``).
        subset: keep only cells whose fields take the given values, e.g.
            ``{"context_length": [32000], "evidence_position": ["pos_09"]}``; keys are
            ``context_length``, ``evidence_position``, ``distractor_similarity``,
            ``reasoning_type``, ``fan_in``, ``replicate``. Kept instances are exactly those of
            the full build (same ids and content).

    Returns:
        The dataset (``source`` and ``builder`` ``controlled``; ``builder_params`` reproduce it).

    Raises:
        ValueError: unknown preset, bad seed, limit or subset key, or a name that
            ``core.names.check_name`` refuses.
    """
    if name is not None:
        check_name("dataset", name)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    cells = _cells(preset)
    wanted = _check_subset(subset)
    instances: list[Instance] = []
    for index, cell in enumerate(cells):
        if limit is not None and len(instances) >= limit:
            break
        if any(getattr(cell, key) not in values for key, values in wanted.items()):
            continue
        instances.append(_build_instance(preset, seed, index, cell))
    params: dict[str, Any] = {"preset": preset, "seed": seed, "token_unit": "whitespace"}
    if limit is not None:
        params["limit"] = limit
    if wanted:
        params["subset"] = {k: sorted(v, key=str) for k, v in wanted.items()}
    return Dataset(
        name=name or preset,
        source="controlled",
        builder="controlled",
        builder_params=params,
        instances=tuple(instances),
    )
