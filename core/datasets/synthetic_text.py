"""Seeded text, entity and layout helpers shared by the synthetic benchmark builders.

Nothing here reads a corpus: filler prose comes from a small built-in vocabulary and sentence
templates, and every random choice is drawn from a ``random.Random`` that the caller derives
from its parameters with ``derive_rng`` (SHA-256 of the parts, so results do not depend on
``PYTHONHASHSEED``, the platform or the global ``random`` state).

Token counts are whitespace tokens (``core.types.count_tokens``). Every generator here hits an
exact token count, so a builder can place a passage at an exact token offset and a context at
an exact length.

Speed: filler sentences are drawn from a bank built once from a fixed seed (several hundred
distinct sentences for each length from 5 to 26 tokens, a few hand-written ones of 1 to 4
tokens); an instance's RNG picks the lengths and the sentences, so a 32K-token context costs a
few thousand RNG calls, not one per word.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from core.types import Passage, count_tokens

__all__ = [
    "MIN_FILLER",
    "Block",
    "SENTENCE_MAX",
    "assemble",
    "derive_rng",
    "filler_blocks",
    "filler_sentences",
    "filler_title",
    "free_slot",
    "pad_sentences",
    "to_passages",
]

#: Shortest filler passage the layout inserts (tokens); a smaller gap is left empty instead.
MIN_FILLER = 60
#: Longest filler passage (tokens).
MAX_FILLER = 300
#: Longest sentence in the bank (tokens).
SENTENCE_MAX = 26

_NOUNS = tuple(
    "archive bakery bridge canal choir clocktower committee council courtyard ferry "
    "festival garden greenhouse harbor lantern ledger library lighthouse market meadow "
    "mill museum orchard pathway pier quarry river schedule schoolhouse square station "
    "terrace theater tramline vineyard village warehouse workshop fountain barn".split()
)
_NOUNS_PL = tuple(
    "visitors families farmers students sailors painters neighbors bakers volunteers "
    "travelers musicians gardeners carpenters clerks".split()
)
_ADJS = tuple(
    "quiet annual old narrow bright northern careful seasonal wooden local gentle busy "
    "distant familiar modest sunny crowded ancient small eastern western painted restored "
    "shaded broad steady windy".split()
)
_VERBS = tuple(
    "reviewed repaired visited described painted organized measured cleaned extended "
    "documented admired inspected rebuilt planned decorated photographed surveyed "
    "renovated mapped praised".split()
)
_VERBS_PRES = tuple("gather linger walk rest meet wait talk sing work picnic".split())
_PREPS = ("near", "beside", "behind", "across", "along", "beyond", "around", "past", "below")
_ADVS = tuple(
    "slowly carefully again quietly eventually gladly twice early patiently together "
    "yesterday often".split()
)
_OPENERS2 = (
    "In spring,",
    "In autumn,",
    "In winter,",
    "In summer,",
    "By evening,",
    "At dawn,",
    "Each year,",
    "Last season,",
    "Most mornings,",
    "On weekends,",
)
_OPENERS3 = (
    "Early that year,",
    "As a rule,",
    "Later that week,",
    "For many years,",
    "Every other month,",
    "After the rain,",
    "Before the holidays,",
)
_PLACES = (
    "Ashford Vale",
    "Brackenridge",
    "Coldwater Bay",
    "Dovecote Hill",
    "Elmstead",
    "Fernhollow",
    "Greywater",
    "Hollins Reach",
    "Larkspur Green",
    "Millbrook",
    "Northcombe",
    "Pebble Cove",
    "Redfield",
    "Stonebridge",
    "Thornbury",
    "Willowmere",
)
_SHORT = {
    1: ("Noted.", "Indeed.", "Afterwards."),
    2: ("Work continued.", "Nothing changed.", "Visitors returned.", "Rain followed."),
    3: ("The ferry returned.", "The market reopened.", "Work resumed quietly."),
    4: ("The old bridge reopened.", "The choir sang again.", "The garden stayed open."),
}


def derive_rng(*parts: Any) -> random.Random:
    """A ``random.Random`` seeded from SHA-256 of the parts' ``str`` (stable everywhere).

    Args:
        *parts: anything with a stable ``str`` (builder name, seed, cell, index ...).

    Returns:
        A fresh generator; the same parts always give the same sequence.
    """
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


# ---------------------------------------------------------------------------- sentences
def _clause(rng: random.Random, n: int) -> str:
    """One sentence of exactly ``n >= 5`` whitespace tokens from the templates."""
    # Transitive template "The N V the N." (5 tokens) or plural "Many N V P the N." (6);
    # optional opener (2 or 3 tokens), prepositional phrases "P the A N" (4 each) and three
    # one-token slots (subject adjective, object adjective, trailing adverb) make any n >= 5.
    plural = n >= 6 and rng.random() < 0.3
    rest = n - (6 if plural else 5)
    opener = ""
    if rest >= 2 and rng.random() < 0.35:
        pool = _OPENERS3 if rest >= 3 and rng.random() < 0.5 else _OPENERS2
        opener = rng.choice(pool)
        rest -= count_tokens(opener)
    conj: list[str] = []
    if rest >= 6 and rng.random() < 0.5:
        # a second clause (6 tokens): ", while N_pl V P the N" / ", and the N V the N"
        if rng.random() < 0.5:
            conj = ["while", rng.choice(_NOUNS_PL), rng.choice(_VERBS_PRES)]
            conj += [rng.choice(_PREPS), "the", rng.choice(_NOUNS)]
        else:
            conj = ["and", "the", rng.choice(_NOUNS), rng.choice(_VERBS), "the"]
            conj.append(rng.choice(_NOUNS))
        rest -= 6
    n_pp, n_ones = divmod(rest, 4)
    ones = set(rng.sample(("subj", "obj", "adv"), n_ones))
    first = ("many" if plural else "the") if opener else ("Many" if plural else "The")
    words = [opener] if opener else []
    words.append(first)
    if "subj" in ones:
        words.append(rng.choice(_ADJS))
    if plural:
        words += [rng.choice(_NOUNS_PL), rng.choice(_VERBS_PRES), rng.choice(_PREPS), "the"]
    else:
        words += [rng.choice(_NOUNS), rng.choice(_VERBS), "the"]
    if "obj" in ones:
        words.append(rng.choice(_ADJS))
    words.append(rng.choice(_NOUNS))
    for _ in range(n_pp):
        words += [rng.choice(_PREPS), "the", rng.choice(_ADJS), rng.choice(_NOUNS)]
    if conj:
        words[-1] += ","
        words += conj
    if "adv" in ones:
        words.append(rng.choice(_ADVS))
    return " ".join(words) + "."


@cache
def _bank() -> dict[int, tuple[str, ...]]:
    """Sentences by exact token length, built once from a fixed seed."""
    rng = random.Random(20250517)
    bank: dict[int, tuple[str, ...]] = {k: v for k, v in _SHORT.items()}
    for n in range(5, SENTENCE_MAX + 1):
        seen: dict[str, None] = {}
        for _ in range(600):
            seen.setdefault(_clause(rng, n), None)
        bank[n] = tuple(seen)
    for n, sentences in bank.items():
        bad = [s for s in sentences if count_tokens(s) != n]
        if bad:  # programmer error in the templates
            raise RuntimeError(f"sentence bank length {n} holds {bad[0]!r}")
    return bank


def filler_sentences(rng: random.Random, n: int) -> list[str]:
    """Filler sentences totalling exactly ``n`` whitespace tokens (``n >= 0``).

    Args:
        rng: the caller's generator.
        n: exact number of tokens.

    Returns:
        Sentences (each 1 to ``SENTENCE_MAX`` tokens) whose token counts sum to ``n``.
    """
    bank = _bank()
    out: list[str] = []
    while n > SENTENCE_MAX:
        k = rng.randint(7, 20)
        if n - k < 5:
            k = n - 5
        out.append(rng.choice(bank[k]))
        n -= k
    if n > 0:
        out.append(rng.choice(bank[n]))
    return out


def pad_sentences(rng: random.Random, core: Sequence[str], n: int) -> str:
    """Text of exactly ``n`` tokens: the ``core`` sentences among generated filler sentences.

    Args:
        rng: the caller's generator.
        core: sentences that must appear verbatim (kept in their given order).
        n: exact token count of the result; at least the tokens of ``core``.

    Returns:
        The sentences joined with single spaces.
    """
    need = sum(count_tokens(s) for s in core)
    if n < need:
        raise ValueError(f"pad_sentences: {n} tokens cannot hold {need} core tokens")
    filler = filler_sentences(rng, n - need)
    # Insert the core sentences at sorted random slots so that they keep their order.
    slots = sorted(rng.randint(0, len(filler)) for _ in core)
    out: list[str] = []
    j = 0
    for i in range(len(filler) + 1):
        while j < len(core) and slots[j] == i:
            out.append(core[j])
            j += 1
        if i < len(filler):
            out.append(filler[i])
    return " ".join(out)


def filler_title(rng: random.Random) -> str:
    """A short title (3 to 5 tokens) for a filler passage."""
    form = rng.randrange(5)
    adj, noun, place = rng.choice(_ADJS), rng.choice(_NOUNS), rng.choice(_PLACES)
    if form == 0:
        return f"{adj.capitalize()} {noun} notes"
    if form == 1:
        return f"Notes on the {adj} {noun}"
    if form == 2:
        return f"The {noun} at {place}"
    if form == 3:
        return f"A history of {place}"
    return f"{place} {noun} report"


# ---------------------------------------------------------------------------- blocks
@dataclass(slots=True)
class Block:
    """A passage under construction (before it gets its neutral id and public doc id).

    Attributes:
        title: passage title.
        text: passage text.
        role: gold / distractor / conflicting / filler.
        doc_key: internal document key; passages with one key share a ``doc_id``.
        fact: the structured fact the passage states (None for filler), kept in metadata.
    """

    title: str
    text: str
    role: str = "filler"
    doc_key: str = ""
    fact: dict[str, Any] | None = field(default=None)

    @property
    def n_tokens(self) -> int:
        """Whitespace tokens of title and text."""
        return count_tokens(self.title) + count_tokens(self.text)


def _filler_block(rng: random.Random, n: int, doc_key: str) -> Block:
    title = filler_title(rng)
    body = n - count_tokens(title)
    return Block(title, " ".join(filler_sentences(rng, body)), "filler", doc_key)


def filler_blocks(rng: random.Random, n: int, doc_prefix: str) -> list[Block]:
    """Filler passages totalling exactly ``n`` tokens (``n == 0`` or ``n >= MIN_FILLER``).

    Passages are ``MIN_FILLER`` to ``MAX_FILLER`` tokens (mostly 120 to 260); runs of one to
    three consecutive passages share a document key ``{doc_prefix}{k}``.

    Args:
        rng: the caller's generator.
        n: exact total tokens.
        doc_prefix: prefix of the document keys (unique per call site).

    Returns:
        The passages, in order.
    """
    if n == 0:
        return []
    if n < MIN_FILLER:
        raise ValueError(f"filler_blocks: {n} tokens is below the minimum {MIN_FILLER}")
    sizes: list[int] = []
    while n > MAX_FILLER:
        k = rng.randint(120, 260)
        if n - k < MIN_FILLER:
            k = n - MIN_FILLER
        sizes.append(k)
        n -= k
    sizes.append(n)
    out: list[Block] = []
    doc, left = 0, 0
    for size in sizes:
        if left == 0:
            doc += 1
            left = rng.randint(1, 3)
        left -= 1
        out.append(_filler_block(rng, size, f"{doc_prefix}{doc}"))
    return out


def free_slot(
    rng: random.Random, occupied: Sequence[tuple[int, int]], length: int, total: int
) -> int | None:
    """A random start for ``length`` tokens in ``[0, total)`` that overlaps no occupied span.

    Args:
        rng: the caller's generator.
        occupied: ``(start, end)`` token spans already taken (any order).
        length: tokens to place.
        total: context length in tokens.

    Returns:
        The start offset (uniform over all feasible starts), or None when nothing fits.
    """
    spans = sorted(occupied)
    free: list[tuple[int, int]] = []
    cursor = 0
    for start, end in spans:
        if start - cursor >= length:
            free.append((cursor, start - length))
        cursor = max(cursor, end)
    if total - cursor >= length:
        free.append((cursor, total - length))
    if not free:
        return None
    weights = [hi - lo + 1 for lo, hi in free]
    pick = rng.randrange(sum(weights))
    for (lo, _), w in zip(free, weights, strict=True):
        if pick < w:
            return lo + pick
        pick -= w
    return None  # pragma: no cover - unreachable


def assemble(
    rng: random.Random, total: int, anchored: Sequence[tuple[int, Block]], doc_prefix: str = "f"
) -> list[Block]:
    """Lay out anchored blocks at target token offsets and fill the rest with filler.

    Walking the anchors in target order, the gap between the cursor and the next target is
    filled with filler passages of exactly that many tokens when it is at least ``MIN_FILLER``
    and left empty otherwise; the tail is filled up to ``total`` the same way. So a block starts
    exactly at its target, or fewer than ``MIN_FILLER`` tokens before it, or (only when the
    anchors overlap) right after the previous block; the context is ``total`` tokens, or up
    to ``MIN_FILLER - 1`` fewer, plus any overhang of the last anchored block past ``total``.

    Args:
        rng: the caller's generator.
        total: target context length (tokens).
        anchored: ``(target start offset, block)`` pairs.
        doc_prefix: prefix of the filler document keys.

    Returns:
        The blocks in context order.
    """
    out: list[Block] = []
    cursor = 0
    for k, (target, block) in enumerate(sorted(anchored, key=lambda tb: tb[0])):
        gap = target - cursor
        if gap >= MIN_FILLER:
            out += filler_blocks(rng, gap, f"{doc_prefix}{k}.")
            cursor += gap
        out.append(block)
        cursor += block.n_tokens
    gap = total - cursor
    if gap >= MIN_FILLER:
        out += filler_blocks(rng, gap, f"{doc_prefix}tail.")
    return out


def to_passages(blocks: Sequence[Block]) -> tuple[tuple[Passage, ...], dict[str, Any]]:
    """Neutral ids ``p0001``... in context order, public ``doc_00001``... in first-seen order.

    Args:
        blocks: the blocks in context order.

    Returns:
        The passages, and the facts of the non-filler passages keyed by passage id.
    """
    doc_ids: dict[str, str] = {}
    passages: list[Passage] = []
    facts: dict[str, Any] = {}
    for i, b in enumerate(blocks):
        doc_id = doc_ids.setdefault(b.doc_key, f"doc_{len(doc_ids) + 1:05d}")
        pid = f"p{i + 1:04d}"
        passages.append(Passage(pid, i, b.title, b.text, doc_id, b.role, b.role == "gold"))
        if b.fact is not None:
            facts[pid] = b.fact
    return tuple(passages), facts
