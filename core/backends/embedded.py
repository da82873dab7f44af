"""The embedded baseline reader: a deterministic extractive reader with no server, no weights.

SPEC §5.2. It reads only what a model would read -- the chat messages built by
:mod:`core.prompts` -- and never sees gold labels. For each call it:

1. parses the ``[passage_id: ...]`` blocks (title line, text) and the question (after the last
   ``Question:``) out of the user message; a DOLCE probe prompt is recognised by its
   "unanswerable" instruction in the system message;
2. splits the shown passages into sentences and scores each against the question's content
   words with BM25 (k1=1.2, b=0.75, idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the
   sentences shown; light suffix stemming; a sentence also gets half the idf of question words
   in its passage title, since later sentences say "He" where the title names the entity);
3. decides the question type from its wording: yes/no (starts with an auxiliary verb),
   choice between named candidates ("..., A or B?", "...: A, B, and C?"), arithmetic ("how
   many more", "in total", "combined" ... with two or more named entities), number ("how
   many", "what year", "what accuracy" ...) or entity;
4. extracts a typed span: entity (a capitalised name or quoted title not in the question,
   nearest the matched question words), number, date/year, yes/no, the comparison winner
   (each candidate's value read from its best sentence; larger wins unless the question says
   fewer / lower / younger / earlier ...) or the arithmetic result (sum, or difference for
   "how many more / fewer / difference");
5. follows one bridge hop for entity/number questions whose best sentence leaves question
   words uncovered: the entity extracted from that sentence becomes the bridge, sentences
   mentioning it are re-scored with the uncovered words plus the bridge, and the answer is
   read from the best of them -- only when that sentence matches question words the first
   one missed (one hop only: longer chains, and bridges stated in paraphrase, fail);
6. answers ``"unknown"`` (``"unanswerable"`` under a probe prompt) when no passage is shown,
   when the best sentence covers less than ``threshold`` of the question's idf mass, or when
   no span of the expected type is found;
7. cites the passages of the sentences it used and sets confidence from the best sentence's
   coverage and its margin over the runner-up.

Known failure modes (it is a plain lexical baseline, and they are left in on purpose): a
distractor that repeats the question's wording outscores a true passage that paraphrases it,
so conflicting passages and look-alike entities can fool it; paraphrases without shared words
are missed; multi-hop chains longer than two facts, and comparisons without a readable number,
are mostly wrong. Settings: ``threshold`` (0.45), BM25 ``k1`` (1.2) and ``b`` (0.75).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.backends.base import Message, Reply

__all__ = ["LABEL", "READER_VERSION", "EmbeddedReader", "parse_prompt"]

#: Bump when the reader's behaviour changes (part of the model digest, hence of cache keys).
READER_VERSION = "1"
#: How the UI and reports label this backend.
LABEL = "embedded baseline reader"

_MARKER_RE = re.compile(r"\[passage_id:\s*(p\d+)\]")
# Reader tokens: lowercase, punctuation (ASCII and common Unicode) -> space, split.
_TRANSLATE = str.maketrans(
    {c: " " for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~–—‒―“”„‘’‚«»‹›…·•′″§¶†‡°"}
)
_NUM_RE = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?$")
_YEAR_RE = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_QUOTE_RE = re.compile(r"[\"“]([^\"“”]{2,80})[\"”]")
_PUNCT = "\"'“”‘’()[]{}.,;:!?"

_STOP = frozenset(
    """a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once
    here there all any both each few more most other some such no nor not only own same so
    than too very s t can will just don should now is are was were be been being have has had
    having do does did doing i me my myself we our ours you your he him his she her it its they
    them their what which who whom whose this that these those am would could might must shall
    may also as when where why how""".split()
)
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
_DIFF_Q = re.compile(r"\bhow (?:many|much) (?:more|fewer|less)\b|\bdifference\b")
_MIN_WORDS = frozenset(
    """lower lowest fewer fewest less least smaller smallest shorter shortest earlier earliest
    first""".split()
)
_AGE_WORDS = {
    "older": "min_year",
    "oldest": "min_year",
    "younger": "max_year",
    "youngest": "max_year",
}

# Share of the question's idf mass a bridge sentence must add before the reader hops.
_MIN_HOP_GAIN = 0.05

_STEMS: dict[str, str] = {}


def _stem(word: str) -> str:
    out = _STEMS.get(word)
    if out is None:
        out = word
        if not word[:1].isdigit():
            if len(out) > 3 and out[-1] == "s" and out[-2] not in "su":
                out = out[:-1]
            if len(out) > 5:
                if out.endswith("ing"):
                    out = out[:-3]
                elif out.endswith(("ed", "er")):
                    out = out[:-2]
        if len(_STEMS) > 500_000:
            _STEMS.clear()
        _STEMS[word] = out
    return out


def _words(text: str) -> list[str]:
    """Reader tokens of ``text``."""
    return text.lower().translate(_TRANSLATE).split()


def _content_stems(text: str) -> list[str]:
    out: dict[str, None] = {}
    for w in _words(text):
        if w not in _STOP:
            out.setdefault(_stem(w), None)
    return list(out)


# --------------------------------------------------------------------------- prompt parsing


def parse_prompt(messages: Sequence[Message]) -> tuple[str, list[tuple[str, str, str]], bool]:
    """Read a :mod:`core.prompts` message list back into question, passages and probe flag.

    Args:
        messages: the chat messages.

    Returns:
        ``(question, [(passage_id, title, text), ...], probe)``; a block continued from an
        earlier chunk has an empty title.
    """
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    user = users[-1] if users else ""
    cut = user.rfind("Question:")
    question = user[cut + len("Question:") :].strip() if cut >= 0 else user.strip()
    body = user[:cut] if cut >= 0 else ""
    blocks: list[tuple[str, str, str]] = []
    marks = list(_MARKER_RE.finditer(body))
    for j, m in enumerate(marks):
        seg = body[m.end() : marks[j + 1].start() if j + 1 < len(marks) else len(body)]
        seg = seg.strip()
        title = ""
        if seg.startswith("Title:"):
            line, _, seg = seg.partition("\n")
            title = line[len("Title:") :].strip()
        blocks.append((m.group(1), title, seg.strip()))
    probe = "unanswerable" in system.lower()
    return question, blocks, probe


# ---------------------------------------------------------------------------- the index


@dataclass(frozen=True, slots=True)
class _Sent:
    pid: str
    text: str
    toks: list[str]
    title: set[str]


class _Sents:
    """Read-only view of the index's parallel lists as :class:`_Sent` records (made lazily)."""

    def __init__(self, pids, texts, toks, titles):
        self._cols = (pids, texts, toks, titles)
        self._made: dict[int, _Sent] = {}

    def __getitem__(self, i: int) -> _Sent:
        got = self._made.get(i)
        if got is None:
            pids, texts, toks, titles = self._cols
            got = self._made[i] = _Sent(pids[i], texts[i], toks[i], titles[i])
        return got

    def __len__(self) -> int:
        return len(self._cols[0])


def _sentences(text: str) -> list[str]:
    """Split at ". ", "? ", "! " (also after a closing quote) and at line breaks."""
    out: list[str] = []
    for line in text.split("\n"):
        if "? " in line or "! " in line or '." ' in line:
            line = line.replace("? ", "?\x00").replace("! ", "!\x00").replace('." ', '."\x00')
            pieces = line.replace(". ", ".\x00").split("\x00")
        else:
            pieces = line.split(". ")
            last = len(pieces) - 1
            pieces = [p if j == last else p + "." for j, p in enumerate(pieces)]
        out.extend(pieces)
    return out


class _Index:
    """Sentences of the shown passages with BM25 statistics for one question.

    Postings (which sentences hold a word) are built lazily, only for the words a question
    needs, so an 8K-token context costs one tokenization pass plus a few set lookups per
    question word.
    """

    def __init__(self, blocks: Sequence[tuple[str, str, str]], k1: float, b: float):
        self.k1, self.b = k1, b
        seen: set[tuple[str, str]] = set()
        titles: dict[str, set[str]] = {}
        raw: list[tuple[str, str, set[str]]] = []
        # Overlapping chunks repeat sentences of one passage; count each once.
        dedupe = len({pid for pid, _, _ in blocks}) < len(blocks)
        for pid, title, text in blocks:
            tset = titles.setdefault(pid, set())
            if title:
                tset.update(_words(title))
            for sent in _sentences(text):
                sent = sent.strip()
                if len(sent) < 2:
                    continue
                if dedupe:
                    if (pid, sent) in seen:
                        continue
                    seen.add((pid, sent))
                raw.append((pid, sent, tset))
        # Tokenize every sentence in one pass: far cheaper than one call per sentence.
        joined = "\x00".join(sent for _, sent, _ in raw).lower().translate(_TRANSLATE)
        toks = [part.split() for part in joined.split("\x00")] if raw else []
        if len(toks) != len(raw):  # a separator inside a sentence (never in real text)
            toks = [_words(sent) for _, sent, _ in raw]
        self._toks = toks
        self._titles = [tset for _, _, tset in raw]
        self._pids = [pid for pid, _, _ in raw]
        self.sents = _Sents(self._pids, [sent for _, sent, _ in raw], toks, self._titles)
        self.sets = [set(t) for t in toks]
        self.n = len(raw)
        # 1.0 when no sentence has a token (text of punctuation only): BM25 needs avgdl > 0
        self.avgdl = ((sum(map(len, toks)) / self.n) if self.n else 0.0) or 1.0
        self._by_pid: dict[str, list[int]] = {}
        for i, pid in enumerate(self._pids):
            self._by_pid.setdefault(pid, []).append(i)
        self._title_sets = titles
        vocab: set[str] = set().union(*self.sets, *titles.values()) if raw else set()
        self.vocab_stems: dict[str, list[str]] = {}
        for w in vocab:
            self.vocab_stems.setdefault(_stem(w), []).append(w)
        self._df: dict[str, int] = {}
        self._post: dict[str, list[int]] = {}
        self._tpost: dict[str, list[int]] = {}

    def postings(self, word: str) -> list[int]:
        """Sentences whose text holds ``word``."""
        got = self._post.get(word)
        if got is None:
            got = self._post[word] = [i for i, s in enumerate(self.sets) if word in s]
        return got

    def title_postings(self, word: str) -> list[int]:
        """Sentences whose passage title holds ``word``."""
        got = self._tpost.get(word)
        if got is None:
            pids = [pid for pid, t in self._title_sets.items() if word in t]
            got = self._tpost[word] = sorted(i for pid in pids for i in self._by_pid.get(pid, ()))
        return got

    def surfaces(self, stems: Sequence[str]) -> dict[str, str]:
        """Surface words in the context whose stem is one of ``stems``."""
        out = {}
        for st in stems:
            for w in self.vocab_stems.get(st, ()):
                out[w] = st
        return out

    def idf(self, stem: str) -> float:
        """``ln(1 + (N - df + 0.5) / (df + 0.5))`` over sentences (df of the stem's words)."""
        df = self._df.get(stem)
        if df is None:
            words = self.vocab_stems.get(stem, ())
            if len(words) == 1:
                df = len(self.postings(words[0]))
            else:
                df = len({i for w in words for i in self.postings(w)})
            self._df[stem] = df
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def score(self, stems: Sequence[str], only: Sequence[int] | None = None) -> list[float]:
        """BM25 (+ half-weight title match) of each sentence (or of ``only``) for ``stems``."""
        surf = self.surfaces(stems)
        idf = {st: self.idf(st) for st in set(stems)}
        k1, b, avgdl = self.k1, self.b, self.avgdl
        hits: dict[int, list[str]] = {}
        for w in surf:
            for i in self.postings(w):
                hits.setdefault(i, []).append(w)
        titled: dict[int, set[str]] = {}
        for w in surf:
            for i in self.title_postings(w):
                titled.setdefault(i, set()).add(surf[w])
        keep = None if only is None else set(only)
        out = [0.0] * self.n
        for i in hits.keys() | titled.keys():
            if keep is not None and i not in keep:
                continue
            toks = self._toks[i]
            tf: dict[str, int] = {}
            for w in hits.get(i, ()):
                st = surf[w]
                tf[st] = tf.get(st, 0) + toks.count(w)
            norm = k1 * (1.0 - b + b * len(toks) / avgdl)
            score = 0.0
            for st, f in tf.items():
                score += idf[st] * f * (k1 + 1.0) / (f + norm)
            for st in titled.get(i, ()):
                if st not in tf:
                    score += 0.5 * idf[st]
            out[i] = score
        return out

    def coverage(self, i: int, stems: Sequence[str]) -> float:
        """Share of the idf mass of ``stems`` present in sentence ``i`` or its title."""
        return self.coverage_of(self.stems_in(i), stems)

    def coverage_of(self, have: set[str], stems: Sequence[str]) -> float:
        """Share of the idf mass of ``stems`` that is in ``have``."""
        total = sum(self.idf(st) for st in stems)
        if total <= 0:
            return 0.0
        return sum(self.idf(st) for st in stems if st in have) / total

    def stems_in(self, i: int) -> set[str]:
        """Stems of sentence ``i`` and its title."""
        return {_stem(w) for w in self.sets[i] | self._titles[i]}

    def mentions(self, name_toks: Sequence[str]) -> dict[int, float]:
        """Per sentence, the share of an entity's idf mass its text or title holds (> 0 only)."""
        weights = {w: self.idf(_stem(w)) for w in name_toks}
        total = sum(weights.values())
        if total <= 0:
            return {}
        acc: dict[int, float] = {}
        for w, wt in weights.items():
            for i in set(self.postings(w)).union(self.title_postings(w)):
                acc[i] = acc.get(i, 0.0) + wt
        return {i: v / total for i, v in acc.items()}


# ------------------------------------------------------------------------------- spans


@dataclass(frozen=True, slots=True)
class _Span:
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


def _spans(text: str) -> list[_Span]:
    raw = text.split()
    cores = [_core(t) for t in raw]
    out: list[_Span] = []
    i = 0
    while i < len(raw):
        core = cores[i]
        low = core.lower()
        starts = core[:1].isupper() and not (i == 0 and (low in _STOP or low in _AUX))
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
            out.append(_Span(name, i, j + 1, kind, tuple(_words(name))))
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
            and prev.lower() not in _STOP
            and not _ends_span(raw[pos - 1], prev)
            and tok[:1].isdigit()
        ):
            continue
        out.append(_Span(tok.rstrip("%"), pos, pos + 1, "number", (tok.lower(),), value))
    for m in _QUOTE_RE.finditer(text):
        name = m.group(1).strip(" ,.")
        pos = len(text[: m.start()].split())
        out.append(_Span(name, pos, pos + len(name.split()), "quote", tuple(_words(name))))
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


def _positions(text: str, stems: set[str]) -> list[int]:
    out = []
    for pos, tok in enumerate(text.split()):
        if any(_stem(w) in stems for w in _words(tok)):
            out.append(pos)
    return out


def _dist(span: _Span, positions: Sequence[int]) -> int:
    if not positions:
        return span.start
    return min(
        0 if span.start <= p < span.end else min(abs(p - span.start), abs(p - span.end + 1))
        for p in positions
    )


def _fmt_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


# ---------------------------------------------------------------------------- questions


@dataclass(frozen=True, slots=True)
class _Question:
    text: str
    stems: tuple[str, ...]
    kind: str  # yesno | choice | arith | number | entity
    want: str  # entity | number | year | date
    names: tuple[_Span, ...]  # named entities in the question
    choices: tuple[str, ...]  # candidate answers for a choice question
    qtoks: frozenset[str]  # lowercase tokens of the question


def _analyse(question: str) -> _Question:
    q = question.strip()
    low = q.lower()
    first = low.split(" ", 1)[0] if low else ""
    names = tuple(s for s in _spans(q) if s.kind in ("entity", "quote", "date"))
    qtoks = frozenset(_words(low))
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
    return _Question(q, tuple(_content_stems(q)), kind, want, names, choices, qtoks)


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
            left = [s for s in _spans(head) if s.kind != "number"]
            right = [s for s in _spans(tail) if s.kind != "number"]
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


# ------------------------------------------------------------------------------- reader


@dataclass(frozen=True, slots=True)
class _Answer:
    answer: str
    ids: tuple[str, ...]
    confidence: float
    explanation: str


def _quote(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


class EmbeddedReader:
    """Deterministic extractive baseline reader (SPEC §5.2); see the module docstring.

    Attributes:
        name: ``embedded``.
        model: the reader's model name (recorded on the run).
        threshold: minimum share of the question's idf mass the best sentence must cover.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalization.
        workers: whether the engine may run this reader in worker processes (:meth:`pool`);
            False keeps every call in the caller's process.
    """

    name = "embedded"

    def __init__(
        self,
        model: str = "extractive-bm25",
        *,
        threshold: float = 0.45,
        k1: float = 1.2,
        b: float = 0.75,
        workers: bool = True,
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        self.model = model
        self.threshold = float(threshold)
        self.k1 = float(k1)
        self.b = float(b)
        self.workers = bool(workers)
        self._pool: Any = None

    def pool(self, size: int) -> Any:
        """A copy of this reader in each of ``size`` worker processes (a ``ReaderPool``).

        :class:`core.backends.workers.ReaderPool`, or None when the reader was made with
        ``workers=False``. The engine calls it for runs with many calls. The pool is kept for
        the next run and closed with the reader (or by :meth:`close`); its replies are this
        reader's.
        """
        from core.backends.workers import ReaderPool

        if not self.workers:
            return None
        if self._pool is None or self._pool.size != int(size):
            self.close()
            settings = {"model": self.model, "threshold": self.threshold, "k1": self.k1,
                        "b": self.b}  # fmt: skip
            self._pool = ReaderPool(settings, size)
        return self._pool

    def close(self) -> None:
        """Stop this reader's worker processes, if any (they also stop with the process)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def digest(self) -> str:
        """Content digest of the reader (version and settings): its "model digest"."""
        blob = json.dumps(
            [READER_VERSION, self.model, self.threshold, self.k1, self.b], separators=(",", ":")
        )
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """Description recorded on the run; ``label`` is what the UI shows."""
        return {
            "kind": self.name,
            "backend": self.name,
            "model": self.model,
            "model_digest": self.digest,
            "options": {},
            "label": LABEL,
            "baseline": True,
            "deterministic": True,
            "version": READER_VERSION,
            "digest": self.digest,
            "settings": {"threshold": self.threshold, "k1": self.k1, "b": self.b},
            "description": (
                "BM25 over the sentences of the shown passages, one bridge hop, typed span "
                "extraction; no model weights"
            ),
        }

    def generate(
        self, messages: Sequence[Message], options: Mapping[str, Any] | None = None
    ) -> Reply:
        """Answer the prompt in ``messages``; ``options`` (temperature ...) are ignored.

        Returns:
            A reply whose text is the answer-contract JSON; ``error`` is set only when the
            messages cannot be read at all.
        """
        t0 = time.perf_counter_ns()
        try:
            obj = self.read(messages)
            text = json.dumps(obj, ensure_ascii=False)
            error = None
        except Exception as exc:  # noqa: BLE001 - failures are data (SPEC §5.3)
            text, error = "", f"embedded reader failed: {type(exc).__name__}: {exc}"
        elapsed = time.perf_counter_ns() - t0
        n_prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
        return Reply(
            text=text,
            prompt_tokens=n_prompt,
            completion_tokens=len(text.split()),
            latency_ms=elapsed / 1e6,
            total_duration_ns=elapsed,
            load_duration_ns=0,
            prompt_eval_duration_ns=None,
            eval_duration_ns=None,
            logprobs=None,
            model_digest=self.digest,
            error=error,
        )

    def read(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The answer-contract object for ``messages`` (what :meth:`generate` serialises)."""
        question, blocks, probe = parse_prompt(messages)
        ans = self._answer(question, blocks, probe)
        return {
            "answer": ans.answer,
            "evidence_ids": list(ans.ids),
            "confidence": round(ans.confidence, 4),
            "explanation": ans.explanation,
        }

    # -- core -------------------------------------------------------------------------

    def _none(self, probe: bool, why: str) -> _Answer:
        return _Answer("unanswerable" if probe else "unknown", (), 0.05, why)

    def _answer(self, question: str, blocks: Sequence[tuple[str, str, str]], probe: bool):
        if not blocks:
            return self._none(probe, "No passages were shown, so nothing can be extracted.")
        q = _analyse(question)
        index = _Index(blocks, self.k1, self.b)
        if not index.n or not q.stems:
            return self._none(probe, "No sentence of the shown passages matches the question.")
        if q.kind in ("choice", "arith"):
            ans = self._compare(q, index)
            if ans is not None:
                return ans
            return self._none(probe, "The values needed for the comparison were not found.")
        if q.kind == "yesno":
            return self._yes_no(q, index, probe)
        return self._extract(q, index, probe)

    def _ranked(self, index: _Index, stems: Sequence[str]) -> tuple[list[int], list[float]]:
        scores = index.score(stems)
        order = sorted((i for i in range(index.n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return order, scores

    def _confidence(self, cov: float, s1: float, s2: float) -> float:
        margin = (s1 - s2) / s1 if s1 > 0 else 0.0
        return min(max(0.1 + 0.55 * cov + 0.3 * margin, 0.05), 0.95)

    def _extract(self, q: _Question, index: _Index, probe: bool) -> _Answer:
        order, scores = self._ranked(index, q.stems)
        if not order:
            return self._none(probe, "No sentence of the shown passages matches the question.")
        best = order[0]
        s1 = scores[best]
        s2 = scores[order[1]] if len(order) > 1 else 0.0
        cov = index.coverage(best, q.stems)
        sent = index.sents[best]
        exclude = set(q.qtoks)
        # One bridge hop when the best sentence leaves question words uncovered: the entity it
        # names is looked up in the other sentences, with the words still missing.
        have = index.stems_in(best)
        uncovered = [st for st in q.stems if st not in have]
        bridge = self._pick(sent.text, q, set(q.stems), exclude, want="entity")
        hop = None
        if uncovered and bridge is not None:
            hop = self._hop(q, index, best, bridge, uncovered, exclude)
        if hop is not None:
            h, hspan = hop
            hs = index.sents[h]
            both = have | index.stems_in(h)
            hcov = index.coverage_of(both, q.stems)
            # Take the hop only when the second sentence matches question words the first
            # one missed, and the two together clear the threshold.
            if hcov - cov >= _MIN_HOP_GAIN and hcov >= self.threshold:
                return _Answer(
                    hspan.text,
                    tuple(dict.fromkeys((sent.pid, hs.pid))),
                    0.8 * self._confidence(hcov, s1, s2),
                    f"Bridge '{bridge.text}' from {sent.pid} (\"{_quote(sent.text)}\"), then "
                    f'{hs.pid}: "{_quote(hs.text)}" gives the {hspan.kind} '
                    f"'{hspan.text}'; together they match {hcov:.0%} of the question.",
                )
        if cov < self.threshold:
            return self._none(
                probe,
                f"The best sentence ({sent.pid}) matches only {cov:.0%} of the question "
                f"(threshold {self.threshold:.0%}).",
            )
        span = self._pick(sent.text, q, set(q.stems), exclude)
        if span is None:
            return self._none(
                probe, f"The best sentence ({sent.pid}) holds no {q.want} span to extract."
            )
        return _Answer(
            span.text,
            (sent.pid,),
            self._confidence(cov, s1, s2),
            f'{sent.pid}: "{_quote(sent.text)}" matches {cov:.0%} of the question '
            f"(BM25 {s1:.2f}, runner-up {s2:.2f}); extracted {span.kind} '{span.text}'.",
        )

    def _hop(
        self,
        q: _Question,
        index: _Index,
        best: int,
        bridge: _Span,
        uncovered: Sequence[str],
        exclude: set[str],
    ) -> tuple[int, _Span] | None:
        btoks = bridge.toks
        shares = index.mentions(btoks)
        cands = sorted(i for i, m in shares.items() if i != best and m >= 0.5)
        if not cands:
            return None
        stems = list(dict.fromkeys([*uncovered, *(_stem(w) for w in btoks)]))
        scores = index.score(stems, only=cands)
        ex = exclude | set(btoks)
        for i in sorted(cands, key=lambda i: (-scores[i], i)):
            text = index.sents[i].text
            near = set(uncovered) if _positions(text, set(uncovered)) else set(stems)
            span = self._pick(text, q, near, ex)
            if span is not None:
                return i, span
        return None

    def _pick(
        self,
        text: str,
        q: _Question,
        stems: set[str],
        exclude: set[str],
        want: str | None = None,
    ) -> _Span | None:
        want = want or q.want
        spans = _spans(text)
        pos = _positions(text, stems)

        def fresh(s: _Span) -> bool:
            toks = [t for t in s.toks if t not in _STOP]
            return bool(toks) and sum(t in exclude for t in toks) < 0.5 * len(toks)

        def nearest(cands: list[_Span], bonus: bool = False) -> _Span | None:
            if not cands:
                return None
            return min(
                cands,
                key=lambda s: (_dist(s, pos) - (0.5 if bonus and len(s.toks) > 1 else 0), s.start),
            )

        nums = [s for s in spans if s.kind == "number" and s.text.lower() not in exclude]
        if want == "year":
            years = [s for s in nums if _YEAR_RE.match(s.text)]
            return nearest(years) or nearest(nums)
        if want == "date":
            dates = [s for s in spans if s.kind == "date" and fresh(s)]
            years = [s for s in nums if _YEAR_RE.match(s.text)]
            return nearest(dates) or nearest(years) or nearest(nums)
        if want == "number":
            return nearest(nums)
        ents = [s for s in spans if s.kind in ("entity", "quote") and fresh(s)]
        return nearest(ents, bonus=True) or nearest(nums)

    def _entity_sentence(
        self, index: _Index, name: str, stems: Sequence[str], need_number: bool
    ) -> tuple[int, _Span | None, float] | None:
        """Best sentence about ``name`` (and its value span when ``need_number``)."""
        ntoks = tuple(_words(name))
        cands = sorted(i for i, m in index.mentions(ntoks).items() if m >= 0.5)
        if not cands:
            return None
        nstems = list(dict.fromkeys(_stem(t) for t in ntoks))
        measure = [st for st in stems if st not in nstems]
        # Plain BM25 with the name and the measured words: a look-alike entity whose
        # sentence repeats the question's wording can outscore the true one.
        scores = index.score(list(dict.fromkeys(nstems + measure)), only=cands)
        order = sorted(cands, key=lambda i: (-scores[i], i))
        if not need_number:
            return order[0], None, scores[order[0]]
        for i in order[:4]:
            text = index.sents[i].text
            nums = [
                s
                for s in _spans(text)
                if s.kind == "number" and s.text.lower() not in ntoks and s.value is not None
            ]
            if nums:
                pos = _positions(text, set(measure))
                span = min(nums, key=lambda s: (_dist(s, pos), s.start))
                return i, span, scores[i]
        return None

    def _compare(self, q: _Question, index: _Index) -> _Answer | None:
        low = q.text.lower()
        names = list(q.choices) if q.kind == "choice" else [s.text for s in q.names]
        age = next((v for w, v in _AGE_WORDS.items() if re.search(rf"\b{w}\b", low)), None)
        values: list[tuple[str, int, float]] = []
        stems = [*q.stems, "born"] if age is not None else list(q.stems)
        for name in names:
            found = self._entity_sentence(index, name, stems, need_number=True)
            if found is None or found[1] is None:
                continue
            i, span, _ = found
            value = span.value
            if age is not None:
                text = index.sents[i].text
                years = [s for s in _spans(text) if s.kind == "number" and _YEAR_RE.match(s.text)]
                if years:
                    value = min(
                        years, key=lambda s: (_dist(s, _positions(text, {"born"})), s.start)
                    ).value
            values.append((name, i, float(value)))
        if values and len(values) < len(names):
            return None  # some values were read, others are missing: nothing to compare
        if q.kind == "arith":
            if len(values) < 2:
                return None
            nums = [v for _, _, v in values]
            if _DIFF_Q.search(low):
                result, how = abs(nums[0] - nums[1]), "difference"
            else:
                result, how = math.fsum(nums), "sum"
            ids = tuple(dict.fromkeys(index.sents[i].pid for _, i, _ in values))
            shown = ", ".join(
                f"{n} = {_fmt_number(v)} ({index.sents[i].pid})" for n, i, v in values
            )
            return _Answer(
                _fmt_number(result), ids, 0.5, f"Read {shown}; the {how} is {_fmt_number(result)}."
            )
        if len(values) == len(names) and len(values) >= 2:
            if age == "min_year" or (
                age is None and any(re.search(rf"\b{w}\b", low) for w in _MIN_WORDS)
            ):
                pick = min(values, key=lambda x: (x[2], names.index(x[0])))
            else:
                pick = max(values, key=lambda x: (x[2], -names.index(x[0])))
            vals = [v for _, _, v in values]
            tie = vals.count(pick[2]) > 1
            ids = tuple(dict.fromkeys(index.sents[i].pid for _, i, _ in values))
            shown = ", ".join(
                f"{n} = {_fmt_number(v)} ({index.sents[i].pid})" for n, i, v in values
            )
            return _Answer(
                pick[0],
                ids,
                0.35 if tie else 0.6,
                f"Read {shown}; '{pick[0]}' wins the comparison.",
            )
        if q.kind != "choice":
            return None
        # No readable values: choose the candidate whose best sentence covers the question best.
        best: tuple[float, int, str, int] | None = None
        for pos, name in enumerate(names):
            found = self._entity_sentence(index, name, q.stems, need_number=False)
            if found is None:
                continue
            i = found[0]
            rest = [st for st in q.stems if st not in _content_stems(name)]
            cov = index.coverage(i, rest) if rest else 0.0
            key = (cov, -pos, name, i)
            if best is None or key[:2] > best[:2]:
                best = key
        if best is None:
            return None
        cov, _, name, i = best
        return _Answer(
            name,
            (index.sents[i].pid,),
            0.3,
            f"No values to compare; {index.sents[i].pid} about '{name}' covers "
            f"{cov:.0%} of the question.",
        )

    def _yes_no(self, q: _Question, index: _Index, probe: bool) -> _Answer:
        names = [s.text for s in q.names if s.kind != "date"]
        low = q.text.lower()
        # Two entities joined by "and" / "both" / "same": judge each one's own sentence.
        if len(names) >= 2 and re.search(r"\b(?:and|both|same)\b", low):
            found = [self._entity_sentence(index, n, q.stems, need_number=False) for n in names[:2]]
            if any(f is None for f in found):
                return self._none(probe, "A sentence about each entity was not found.")
            i1, i2 = found[0][0], found[1][0]
            s1, s2 = index.sents[i1], index.sents[i2]
            ids = tuple(dict.fromkeys((s1.pid, s2.pid)))
            if re.search(r"\bsame\b", low):
                caps1 = self._attributes(s1.text, q)
                caps2 = self._attributes(s2.text, q)
                shared = sorted(caps1 & caps2)
                yes = bool(shared)
                why = f"both say '{shared[0]}'" if yes else "they share no attribute"
            else:
                name_stems = {_stem(t) for n in names for t in _words(n)}
                rest = [st for st in q.stems if st not in name_stems]
                covs = [index.coverage(i, rest) if rest else 1.0 for i in (i1, i2)]
                yes = min(covs) >= 0.5
                why = f"they cover {covs[0]:.0%} / {covs[1]:.0%} of the rest of the question"
            return _Answer(
                "yes" if yes else "no",
                ids,
                0.55,
                f"{s1.pid} and {s2.pid} describe the two entities; {why}.",
            )
        order, _ = self._ranked(index, q.stems)
        if not order:
            return self._none(probe, "No sentence of the shown passages matches the question.")
        best = order[0]
        cov = index.coverage(best, q.stems)
        sent = index.sents[best]
        if cov < self.threshold:
            return self._none(probe, f"The best sentence ({sent.pid}) covers only {cov:.0%}.")
        yes = cov >= 0.75
        return _Answer(
            "yes" if yes else "no",
            (sent.pid,),
            0.5,
            f'{sent.pid}: "{_quote(sent.text)}" covers {cov:.0%} of the question.',
        )

    def _attributes(self, text: str, q: _Question) -> set[str]:
        out = set()
        for s in _spans(text):
            if s.kind == "entity":
                for t in s.toks:
                    if t not in q.qtoks and t not in _STOP:
                        out.add(t)
        return out
