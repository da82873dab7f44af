"""RULER-lite generator: three synthetic long-context tasks at 4K-32K tokens (SPEC §3.3).

In the spirit of RULER (Hsieh et al., 2024), rebuilt offline and deterministically, with the
instance contract of the controlled benchmark (neutral passage ids, gold flags, fan-in):

- ``kv_retrieval`` (single_hop, answer a number): the context is a registry of key-value lines
  ``Key K-48213-QX holds 58213.`` in blocks of 30 to 60 lines; the question asks for the value
  of one key. The gold passage is the block holding that key; three blocks hold look-alike keys
  (same digits, other letters) with other values (role ``distractor``); all other blocks are
  ``filler``. Instance i of a cell puts the gold block in the front / middle / end third for
  ``i % 3`` = 0 / 1 / 2. Every key digit string and value in an instance is distinct.
- ``multi_hop_trace`` (multi_hop, answer a number): a chain of h = 2 + (i % 3) assignments
  ``VAR QKXJP = 48213.``, ``VAR ABCDE = VAR QKXJP.`` ... hidden one per passage in filler prose,
  in chain order through the context; the question asks for the value of the last variable.
  Gold passages = the h chain passages (fan-in h); two decoy chains of the same length and
  form, with other start values, sit in ``distractor`` passages.
- ``aggregation_sum`` (arithmetic, answer a number): ledger entries ``Ledger entry: category
  AMBER, amount 42.`` hidden in filler prose; the question asks for the sum of the amounts of one
  category. m = 3 + (i % 4) gold passages hold one target entry each (plus 0-2 entries of other
  categories); ``distractor`` passages hold entries of other categories only.

Context length: the cell's target ``T``; passages sum to between ``T - 59`` and ``T`` tokens
(whitespace tokens of title + text). Evidence position: the third holding the midpoints of all
gold passages (front / middle / end), else ``scattered`` -- the rule of
``core.datasets.records.evidence_position``. Evidence density: 1 gold passage low, 2-3 medium, 4+
high. Distractor similarity is ``high`` for every task (decoys share the gold's exact form).
Each instance has its own generator seeded from SHA-256 of ``("ruler-lite", seed, task,
length, i)``, so equal arguments give byte-identical datasets.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Any

from core.datasets.controlled import density_label, gold_offsets
from core.datasets.records import make_instance
from core.datasets.synthetic_text import (
    Block,
    assemble,
    derive_rng,
    filler_title,
    free_slot,
    pad_sentences,
    to_passages,
)
from core.names import check_name
from core.types import Dataset, Instance, Passage

__all__ = ["TASKS", "build_ruler_lite"]

#: Task name -> reasoning type.
TASKS = {
    "kv_retrieval": "single_hop",
    "multi_hop_trace": "multi_hop",
    "aggregation_sum": "arithmetic",
}
_THIRDS = ("front", "middle", "end")
_CATEGORIES = (
    "AMBER",
    "COBALT",
    "CRIMSON",
    "JADE",
    "OCHRE",
    "SCARLET",
    "SILVER",
    "TEAL",
    "UMBER",
    "VIOLET",
)


def _position_label(passages: Sequence[Passage]) -> str:
    thirds = {min(2, int(mid * 3)) for _, mid in gold_offsets(passages)}
    if not thirds:
        return "unknown"
    return _THIRDS[thirds.pop()] if len(thirds) == 1 else "scattered"


def _letters(rng: random.Random, k: int) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(k))


# ---------------------------------------------------------------------------- kv retrieval
def _kv(rng: random.Random, total: int, i: int) -> dict[str, Any]:
    title_tokens, line_tokens, lo, hi = 3, 4, 30, 60
    sizes: list[int] = []  # lines per block
    remaining = total
    while remaining > 0:
        if remaining <= title_tokens + line_tokens * (hi + lo):
            m = (remaining - title_tokens) // line_tokens
            if m > hi:  # split the rest in two blocks
                sizes.append(m // 2)
                m -= m // 2
            sizes.append(m)
            break
        m = rng.randint(lo, hi)
        sizes.append(m)
        remaining -= title_tokens + line_tokens * m
    n_lines = sum(sizes)
    # key digits and values are drawn together, so no number is both a key and a value
    numbers = rng.sample(range(10000, 100000), 2 * n_lines + 3)
    digits, values = numbers[:n_lines], numbers[n_lines:]
    keys = [f"K-{d}-{_letters(rng, 2)}" for d in digits]
    lines = [[] for _ in sizes]
    k = 0
    for b, m in enumerate(sizes):
        for _ in range(m):
            lines[b].append(k)
            k += 1
    # block offsets -> candidates whose start and midpoint are in the wanted third
    want = i % 3
    starts, cursor = [], 0
    for m in sizes:
        starts.append(cursor)
        cursor += title_tokens + line_tokens * m
    candidates = [
        b
        for b, m in enumerate(sizes)
        if min(2, int(3 * starts[b] / cursor)) == want
        and min(2, int(3 * (starts[b] + (title_tokens + line_tokens * m) / 2) / cursor)) == want
    ]
    gold_block = rng.choice(candidates)
    gold_line = rng.choice(lines[gold_block])
    key, value = keys[gold_line], values[gold_line]
    # three look-alike keys in other blocks, with the three spare values
    others = rng.sample([b for b in range(len(sizes)) if b != gold_block], 3)
    look_alikes = []
    for j, b in enumerate(others):
        line = rng.choice(lines[b])
        suffix = _letters(rng, 2)
        while suffix == key[-2:]:
            suffix = _letters(rng, 2)
        keys[line] = f"{key[:-2]}{suffix}"
        values[line] = values[n_lines + j]
        look_alikes.append({"key": keys[line], "value": str(values[line])})
    blocks = []
    for b in range(len(sizes)):
        role = "gold" if b == gold_block else "distractor" if b in others else "filler"
        text = " ".join(f"Key {keys[k]} holds {values[k]}." for k in lines[b])
        blocks.append(Block(f"Registry block {b + 1}", text, role, f"b{b}"))
    return {
        "blocks": blocks,
        "question": f"What value does key {key} hold in the registry?",
        "answer": str(value),
        "numbers": {"key": key, "value": str(value), "look_alikes": look_alikes},
    }


# ---------------------------------------------------------------------------- trace, sum
def _statement_block(rng: random.Random, sentences: list[str], role: str, doc: str) -> Block:
    title = filler_title(rng)
    n = rng.randint(100, 160) - len(title.split())
    return Block(title, pad_sentences(rng, sentences, n), role, doc)


def _place(rng: random.Random, total: int, ordered: list[Block], loose: list[Block]) -> list[Block]:
    """Anchor ``ordered`` blocks in their given order and ``loose`` anywhere, then fill."""
    occupied: list[tuple[int, int]] = []
    anchored: list[tuple[int, Block]] = []
    starts: list[int] = []
    for block in ordered:
        start = free_slot(rng, occupied, block.n_tokens, total)
        if start is None:  # pragma: no cover - contexts are far larger than the blocks
            raise RuntimeError(f"no room for a passage in a {total}-token context")
        occupied.append((start, start + block.n_tokens))
        starts.append(start)
    anchored += zip(sorted(starts), ordered, strict=True)
    for block in loose:
        start = free_slot(rng, occupied, block.n_tokens, total)
        if start is None:  # pragma: no cover
            raise RuntimeError(f"no room for a passage in a {total}-token context")
        occupied.append((start, start + block.n_tokens))
        anchored.append((start, block))
    return assemble(rng, total, anchored)


def _trace(rng: random.Random, total: int, i: int) -> dict[str, Any]:
    hops = 2 + i % 3
    used: set[str] = set()

    def var() -> str:
        while True:
            name = _letters(rng, 5)
            if name not in used:
                used.add(name)
                return name

    start_values = rng.sample(range(10000, 100000), 3)
    chains = []
    for value in start_values:
        names = [var() for _ in range(hops)]
        stmts = [f"VAR {names[0]} = {value}."]
        stmts += [f"VAR {names[j]} = VAR {names[j - 1]}." for j in range(1, hops)]
        chains.append((names, stmts))
    gold = [_statement_block(rng, [s], "gold", f"g{j}") for j, s in enumerate(chains[0][1])]
    decoys = [
        _statement_block(rng, [s], "distractor", f"d{c}.{j}")
        for c in (1, 2)
        for j, s in enumerate(chains[c][1])
    ]
    blocks = _place(rng, total, gold, decoys)
    names = chains[0][0]
    return {
        "blocks": blocks,
        "question": (
            "After all the variable assignments in the text are carried out, "
            f"what numeric value does VAR {names[-1]} hold?"
        ),
        "answer": str(start_values[0]),
        "numbers": {
            "chain": [f"VAR {n}" for n in names],
            "value": str(start_values[0]),
            "decoy_values": [str(v) for v in start_values[1:]],
        },
    }


def _entry(category: str, amount: int) -> str:
    return f"Ledger entry: category {category}, amount {amount}."


def _aggregate(rng: random.Random, total: int, i: int) -> dict[str, Any]:
    m = 3 + i % 4
    target = rng.choice(_CATEGORIES)
    others = [c for c in _CATEGORIES if c != target]
    amounts = [rng.randint(10, 99) for _ in range(m)]
    gold = []
    for j, amount in enumerate(amounts):
        entries = [
            _entry(rng.choice(others), rng.randint(10, 99)) for _ in range(rng.randint(0, 2))
        ]
        entries.insert(rng.randint(0, len(entries)), _entry(target, amount))
        gold.append(_statement_block(rng, entries, "gold", f"g{j}"))
    decoys = []
    for j in range(3 + total // 1000):
        entries = [
            _entry(rng.choice(others), rng.randint(10, 99)) for _ in range(rng.randint(1, 3))
        ]
        decoys.append(_statement_block(rng, entries, "distractor", f"d{j}"))
    rng.shuffle(gold)
    blocks = _place(rng, total, gold, decoys)
    return {
        "blocks": blocks,
        "question": f"What is the sum of all amounts recorded under category {target}?",
        "answer": str(sum(amounts)),
        "numbers": {"category": target, "amounts": amounts, "result": sum(amounts)},
    }


_BUILDERS = {"kv_retrieval": _kv, "multi_hop_trace": _trace, "aggregation_sum": _aggregate}


def build_ruler_lite(
    seed: int = 42,
    name: str | None = None,
    lengths: Sequence[int] = (4000, 8000, 16000, 32000),
    per_cell: int = 20,
    *,
    tasks: Sequence[str] = tuple(TASKS),
) -> Dataset:
    """Build RULER-lite: ``len(tasks) x len(lengths) x per_cell`` instances (default 240).

    Args:
        seed: seed of every instance's generator; same arguments -> byte-identical instances.
        name: dataset name (default ``ruler-lite``).
        lengths: target context lengths in whitespace tokens (each at least 2000).
        per_cell: instances per (task, length) cell.
        tasks: any of ``kv_retrieval``, ``multi_hop_trace``, ``aggregation_sum``.

    Returns:
        The dataset, ordered by task, length, then index; ids ``ruler_000001``...

    Raises:
        ValueError: unknown task, a length below 2000, a negative ``per_cell``, a bad seed, or
            a name that ``core.names.check_name`` refuses.
    """
    if name is not None:
        check_name("dataset", name)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    for task in tasks:
        if task not in TASKS:
            raise ValueError(f"unknown RULER-lite task {task!r}; allowed: {', '.join(TASKS)}")
    for length in lengths:
        if isinstance(length, bool) or not isinstance(length, int) or length < 2000:
            raise ValueError(f"context length must be an integer >= 2000, got {length!r}")
    if isinstance(per_cell, bool) or not isinstance(per_cell, int) or per_cell < 0:
        raise ValueError(f"per_cell must be a non-negative integer, got {per_cell!r}")
    instances: list[Instance] = []
    for task in tasks:
        for length in lengths:
            for i in range(per_cell):
                rng = derive_rng("ruler-lite", seed, task, length, i)
                built = _BUILDERS[task](rng, length, i)
                passages, _ = to_passages(built["blocks"])
                n_gold = sum(p.is_gold for p in passages)
                offsets = gold_offsets(passages)
                instances.append(
                    make_instance(
                        f"ruler_{len(instances) + 1:06d}",
                        built["question"],
                        built["answer"],
                        passages,
                        answer_type="number",
                        reasoning_type=TASKS[task],
                        context_length=length,
                        evidence_position=_position_label(passages),
                        distractor_similarity="high",
                        evidence_density=density_label(n_gold),
                        oracle_applicable=True,
                        source="ruler-lite",
                        metadata={
                            "task": task,
                            "seed": seed,
                            "index": i,
                            "token_unit": "whitespace",
                            "context_tokens": sum(p.n_tokens for p in passages),
                            "n_gold_passages": n_gold,
                            "gold_offsets": [[round(s, 4), round(m, 4)] for s, m in offsets],
                            "numbers": built["numbers"],
                        },
                    )
                )
    return Dataset(
        name=name or "ruler-lite",
        source="ruler-lite",
        builder="ruler-lite",
        builder_params={
            "seed": seed,
            "lengths": list(lengths),
            "per_cell": per_cell,
            "tasks": list(tasks),
            "token_unit": "whitespace",
        },
        instances=tuple(instances),
    )
