"""The embedded reader's spans and questions: typed candidate answers and question analysis.

A span is a capitalised name, a quoted title, a date or a number in a sentence; a question is
analysed into its content stems, its kind (yes/no, choice, arithmetic, number, entity), the
type of span it wants and the names and choices it mentions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.backends.reader_index import STOPWORDS, content_stems, stem_word, tokens

__all__ = [
    "AGE_WORDS",
    "DIFF_Q",
    "MIN_WORDS",
    "YEAR_RE",
    "Question",
    "Span",
    "analyse_question",
    "find_spans",
    "format_number",
    "positions_of",
    "span_distance",
]

_NUM_RE = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?$")
YEAR_RE = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_QUOTE_RE = re.compile(r"[\"“]([^\"“”]{2,80})[\"”]")
_PUNCT = "\"'“”‘’()[]{}.,;:!?"

_AUX = frozenset(
    "is are was were do does did can could has have had will would should shall may might".split()
)
_MONTHS = frozenset(
    """january february march april may june july august september october november
    december""".split()
)
_CONNECT = frozenset("of the de du da von van der la le del y".split())
_NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_MEASURE = frozenset(
    """accuracy score population number percentage percent age year height length capacity
    size count rate price cost salary budget temperature distance weight area amount total
    revenue attendance""".split()
)
_NUMBER_Q = re.compile(
    r"\bhow (?:many|much)\b|^how (?:old|long|tall|far|big|large|high|often)\b"
    r"|\b(?:what|which) year\b|^when\b"
)
_ARITH_Q = re.compile(
    r"\bhow (?:many|much) (?:more|fewer|less)\b|\bdifference\b|\bin total\b|\btotal\b"
    r"|\bcombined\b|\bsum\b|\baltogether\b|\btogether\b"
)
DIFF_Q = re.compile(r"\bhow (?:many|much) (?:more|fewer|less)\b|\bdifference\b")
MIN_WORDS = frozenset(
    """lower lowest fewer fewest less least smaller smallest shorter shortest earlier earliest
    first""".split()
)
AGE_WORDS = {
    "older": "min_year",
    "oldest": "min_year",
    "younger": "max_year",
    "youngest": "max_year",
}


@dataclass(frozen=True, slots=True)
class Span:
    """A candidate answer: its text, token range ``[start, end)``, kind, tokens and value."""

    text: str
    start: int
    end: int
    kind: str  # entity | number | date | quote
    toks: tuple[str, ...]
    value: float | None = None


def _core(tok: str) -> str:
    core = tok.strip(_PUNCT)
    if core.endswith(("'s", "’s")):
        core = core[:-2]
    return core


def find_spans(text: str) -> list[Span]:
    """Entity / date, number and quoted-title spans of one sentence, by token position."""
    raw = text.split()
    cores = [_core(t) for t in raw]
    out: list[Span] = []
    i = 0
    while i < len(raw):
        core = cores[i]
        low = core.lower()
        starts = core[:1].isupper() and not (i == 0 and (low in STOPWORDS or low in _AUX))
        if not starts:
            i += 1
            continue
        j = i
        while not _ends_span(raw[j], cores[j]) and j + 1 < len(raw):
            nxt = cores[j + 1]
            if raw[j + 1][:1] in '([{"“':
                break
            if nxt[:1].isupper() or (nxt[:1].isdigit() and nxt.isalnum()):
                j += 1
            elif (
                nxt.lower() in _CONNECT
                and j + 2 < len(raw)
                and cores[j + 2][:1].isupper()
                and not _ends_span(raw[j + 1], nxt)
            ):
                j += 2
            else:
                break
        words = [c for c in cores[i : j + 1] if c]
        if words:
            kind = "date" if words[0].lower() in _MONTHS else "entity"
            name = " ".join(words)
            out.append(Span(name, i, j + 1, kind, tuple(tokens(name))))
        i = j + 1
    for pos, tok in enumerate(cores):
        value = _number(tok)
        if value is None:
            continue
        prev = cores[pos - 1] if pos else ""
        # "Alpha 00654", "Evaluation 00012": a number right after a name word is part of it.
        if (
            pos
            and prev[:1].isupper()
            and prev.lower() not in _MONTHS
            and prev.lower() not in STOPWORDS
            and not _ends_span(raw[pos - 1], prev)
            and tok[:1].isdigit()
        ):
            continue
        out.append(Span(tok.rstrip("%"), pos, pos + 1, "number", (tok.lower(),), value))
    for m in _QUOTE_RE.finditer(text):
        name = m.group(1).strip(" ,.")
        pos = len(text[: m.start()].split())
        out.append(Span(name, pos, pos + len(name.split()), "quote", tuple(tokens(name))))
    return out


def _ends_span(raw: str, core: str) -> bool:
    tail = raw.rstrip("\"'”’")
    if tail.endswith((",", ";", ":", ")", "!", "?")):
        return True
    return tail.endswith(".") and len(core) > 1


def _number(tok: str) -> float | None:
    low = tok.lower()
    if low in _NUMBER_WORDS:
        return _NUMBER_WORDS[low]
    if not _NUM_RE.match(tok):
        return None
    try:
        return float(tok.replace(",", "").rstrip("%"))
    except ValueError:
        return None


def positions_of(text: str, stems: set[str]) -> list[int]:
    """Token positions in ``text`` whose word stems are among ``stems``."""
    out = []
    for pos, tok in enumerate(text.split()):
        if any(stem_word(w) in stems for w in tokens(tok)):
            out.append(pos)
    return out


def span_distance(span: Span, positions: Sequence[int]) -> int:
    """Token distance from ``span`` to the nearest of ``positions`` (its start if none)."""
    if not positions:
        return span.start
    return min(
        0 if span.start <= p < span.end else min(abs(p - span.start), abs(p - span.end + 1))
        for p in positions
    )


def format_number(value: float) -> str:
    """A number as the reader writes it: integers plain, else at most two decimals."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


# ---------------------------------------------------------------------------- questions


@dataclass(frozen=True, slots=True)
class Question:
    """A question analysed: stems, kind, wanted span type, named entities and choices."""

    text: str
    stems: tuple[str, ...]
    kind: str  # yesno | choice | arith | number | entity
    want: str  # entity | number | year | date
    names: tuple[Span, ...]  # named entities in the question
    choices: tuple[str, ...]  # candidate answers for a choice question
    qtoks: frozenset[str]  # lowercase tokens of the question


def analyse_question(question: str) -> Question:
    """The question's kind (yesno, choice, arith, number, entity) and what it wants."""
    q = question.strip()
    low = q.lower()
    first = low.split(" ", 1)[0] if low else ""
    names = tuple(s for s in find_spans(q) if s.kind in ("entity", "quote", "date"))
    qtoks = frozenset(tokens(low))
    choices = _choices(q)
    if first in _AUX and len(choices) < 2:
        kind = "yesno"
    elif len(choices) >= 2:
        kind = "choice"
    elif _ARITH_Q.search(low) and low.startswith(("how", "what")) and len(names) >= 2:
        kind = "arith"
    elif _NUMBER_Q.search(low) or _measure_question(low):
        kind = "number"
    else:
        kind = "entity"
    if re.search(r"\b(?:what|which) year\b", low):
        want = "year"
    elif low.startswith("when"):
        want = "date"
    elif kind in ("number", "arith"):
        want = "number"
    else:
        want = "entity"
    return Question(q, tuple(content_stems(q)), kind, want, names, choices, qtoks)


def _measure_question(low: str) -> bool:
    m = re.match(r"^(?:what|which)\s+(?:\w+\s+)?(\w+)", low)
    return bool(m) and m.group(1) in _MEASURE


def _choices(q: str) -> tuple[str, ...]:
    body = q.rstrip(" ?.")
    if ":" in body:
        region = body.rsplit(":", 1)[1]
    elif re.search(r"\bor\b", body):
        head, _, tail = body.rpartition(" or ")
        region = (head.rsplit(",", 1)[1] if "," in head else head) + " or " + tail
        if "," not in head:
            # "Is A or B older?": keep the names around "or" only.
            left = [s for s in find_spans(head) if s.kind != "number"]
            right = [s for s in find_spans(tail) if s.kind != "number"]
            if left and right:
                return (left[-1].text, right[0].text)
            return ()
    else:
        return ()
    parts = re.split(r",|\bor\b|\band\b", region)
    out = []
    for part in parts:
        part = part.strip(" ,.?\"'")
        part = re.sub(r"^(?:either|both|the)\s+", "", part, flags=re.I)
        if part:
            out.append(part)
    return tuple(out) if len(out) >= 2 else ()
