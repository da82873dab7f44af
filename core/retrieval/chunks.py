"""Chunking: an instance's passages cut into windows of tokens, the chunk records, the knobs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.params import Param
from core.types import Instance, Passage

__all__ = [
    "CHUNK_SIZE",
    "Chunk",
    "OVERLAP",
    "RankedChunk",
    "TOKEN_RE",
    "TOP_K",
    "check_window",
    "chunk_instance",
    "lexical_tokens",
    "search_text",
]


_MARKER_RE = re.compile(r"\[passage_id:\s*p\d+\]\s*(?:Title:)?")


TOKEN_RE = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One window of the passage-annotated context.

    Attributes:
        chunk_id: neutral id ``c0001`` ... in context order.
        ord: 0-based position among the instance's chunks.
        text: the window's text with ``[passage_id: ...]`` markers visible; a window that
            starts inside a passage begins with that passage's marker.
        passage_ids: ids of the passages the window overlaps, in context order.
        start: first token of the window in the context's whitespace-token stream.
        end: one past the last token of the window (``end - start <= chunk_size``).
    """

    chunk_id: str
    ord: int
    text: str
    passage_ids: tuple[str, ...]
    start: int
    end: int

    @property
    def n_tokens(self) -> int:
        """Context tokens the window spans (carried-over markers not counted)."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class RankedChunk:
    """A chunk with its place in a retriever's ranking.

    Attributes:
        rank: 1-based rank.
        score: the retriever's score (higher is better; for ``oracle`` the lexical score
            within its tier, so scores need not decrease across the gold/non-gold boundary).
        chunk: the chunk.
    """

    rank: int
    score: float
    chunk: Chunk


_RETRIEVAL_SECTION = "SPEC §4; seed 000 §6.1.3"


#: Chunks given to the reader (``--top-k`` on the command line, "top-k" on the Runs page).
TOP_K = Param(
    "k",
    int,
    3,
    "number of chunks given to the reader",
    minimum=1,
    maximum=1000,
    section=_RETRIEVAL_SECTION,
)


#: Chunk window length.
CHUNK_SIZE = Param(
    "chunk_size",
    int,
    220,
    "chunk length in whitespace tokens",
    minimum=1,
    maximum=100_000,
    section=_RETRIEVAL_SECTION,
)


#: Tokens shared by consecutive chunks.
OVERLAP = Param(
    "overlap",
    int,
    40,
    "tokens shared by consecutive chunks",
    minimum=0,
    maximum=100_000,
    section=_RETRIEVAL_SECTION,
)


# Label tokens opening every rendered passage: "[passage_id:", "p0003]", "Title:".
_N_LABEL = 3


def _header_tokens(p: Passage) -> list[str]:
    return ["[passage_id:", f"{p.passage_id}]", "Title:", *p.title.split()]


def chunk_instance(
    instance: Instance, chunk_size: int = CHUNK_SIZE.default, overlap: int = OVERLAP.default
) -> list[Chunk]:
    """Split the passage-annotated context into overlapping token windows.

    The context is every passage rendered as ``[passage_id: pXXXX] Title: <title>`` + newline +
    text, in stored order; its whitespace tokens form one stream (marker and title tokens
    count). Windows start every ``chunk_size - overlap`` tokens; the last one ends at the end
    of the stream. Inside a window, each passage segment is rendered on its own (segments
    separated by a blank line); a segment that starts after its passage's first token begins
    with the passage's marker, so the reader can still cite it. A window that reaches only the
    label tokens of a passage (``[passage_id: p0004] Title:``) does not count as overlapping
    it and does not show them.

    Args:
        instance: the instance.
        chunk_size: window length in tokens (>= 1).
        overlap: tokens shared by consecutive windows (0 <= overlap < chunk_size).

    Returns:
        The chunks in context order (empty for an instance without passages).

    Raises:
        ValueError: bad ``chunk_size`` or ``overlap``.
    """
    chunk_size, overlap = check_window(chunk_size, overlap)
    # (passage, header length, tokens) and the stream offset where each passage starts.
    blocks: list[tuple[Passage, int, list[str]]] = []
    starts: list[int] = []
    total = 0
    for p in instance.passages:
        head = _header_tokens(p)
        toks = head + p.text.split()
        blocks.append((p, len(head), toks))
        starts.append(total)
        total += len(toks)
    if total == 0:
        return []
    step = chunk_size - overlap
    chunks: list[Chunk] = []
    begin = 0
    first_block = 0
    while True:
        end = min(begin + chunk_size, total)
        while starts[first_block] + len(blocks[first_block][2]) <= begin:
            first_block += 1
        parts: list[str] = []
        ids: list[str] = []
        b = first_block
        while b < len(blocks) and starts[b] < end:
            p, n_head, toks = blocks[b]
            lo = max(begin - starts[b], 0)
            hi = min(end - starts[b], len(toks))
            b += 1
            # A window holding only the label tokens of a passage ("[passage_id: p0004]
            # Title:") shows none of its content: it neither overlaps nor renders it.
            if hi <= _N_LABEL and len(toks) > _N_LABEL:
                continue
            parts.append(_render_segment(p, n_head, toks, lo, hi))
            ids.append(p.passage_id)
        chunks.append(
            Chunk(
                chunk_id=f"c{len(chunks) + 1:04d}",
                ord=len(chunks),
                text="\n\n".join(parts),
                passage_ids=tuple(ids),
                start=begin,
                end=end,
            )
        )
        if end >= total:
            return chunks
        begin += step


def _render_segment(p: Passage, n_head: int, toks: list[str], lo: int, hi: int) -> str:
    # Tokens 0-1 are the marker; 2..n_head-1 are "Title:" and the title; the rest is text.
    marker = f"[passage_id: {p.passage_id}]"
    head = " ".join(toks[max(lo, 2) : min(hi, n_head)])
    body = " ".join(toks[max(lo, n_head) : hi])
    first = f"{marker} {head}" if head else marker
    if hi <= n_head:
        return first
    if lo >= n_head:
        return f"{marker} {body}"
    return f"{first}\n{body}"


def check_window(chunk_size: Any, overlap: Any) -> tuple[int, int]:
    """The chunk size and overlap checked and coerced (overlap below the size)."""
    chunk_size = CHUNK_SIZE.coerce(chunk_size)
    overlap = OVERLAP.coerce(overlap)
    if overlap >= chunk_size:
        raise ValueError(f"overlap must be smaller than chunk_size, got {overlap} >= {chunk_size}")
    return chunk_size, overlap


def search_text(text: str) -> str:
    """``text`` without ``[passage_id: ...]`` markers and ``Title:`` labels (what is scored)."""
    return _MARKER_RE.sub(" ", text)


def lexical_tokens(text: str) -> list[str]:
    """Lowercase runs of letters and digits of ``text`` (markers removed): BM25 tokens."""
    return TOKEN_RE.findall(search_text(text).lower())
