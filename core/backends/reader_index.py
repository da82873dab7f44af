"""The embedded reader's text index: tokens, light stemming, sentences and BM25 over them.

Everything here depends only on the shown passages (and a question's words): the reader in
:mod:`core.backends.embedded` builds one :class:`SentenceIndex` per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["STOPWORDS", "TRANSLATE", "SentenceIndex", "content_stems", "stem_word", "tokens"]

# Reader tokens: lowercase, punctuation (ASCII and common Unicode) -> space, split.
TRANSLATE = str.maketrans(
    {c: " " for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~–—‒―“”„‘’‚«»‹›…·•′″§¶†‡°"}
)

STOPWORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once
    here there all any both each few more most other some such no nor not only own same so
    than too very s t can will just don should now is are was were be been being have has had
    having do does did doing i me my myself we our ours you your he him his she her it its they
    them their what which who whom whose this that these those am would could might must shall
    may also as when where why how""".split()
)
_STEMS: dict[str, str] = {}


def stem_word(word: str) -> str:
    """Light suffix stem of a reader token (plural -s, -ing, -ed, -er), memoised."""
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


def tokens(text: str) -> list[str]:
    """Reader tokens of ``text``."""
    return text.lower().translate(TRANSLATE).split()


def content_stems(text: str) -> list[str]:
    """Stems of the non-stopword tokens of ``text``, in first-seen order, each once."""
    out: dict[str, None] = {}
    for w in tokens(text):
        if w not in STOPWORDS:
            out.setdefault(stem_word(w), None)
    return list(out)


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


class SentenceIndex:
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
                tset.update(tokens(title))
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
        joined = "\x00".join(sent for _, sent, _ in raw).lower().translate(TRANSLATE)
        toks = [part.split() for part in joined.split("\x00")] if raw else []
        if len(toks) != len(raw):  # a separator inside a sentence (never in real text)
            toks = [tokens(sent) for _, sent, _ in raw]
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
            self.vocab_stems.setdefault(stem_word(w), []).append(w)
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
        return {stem_word(w) for w in self.sets[i] | self._titles[i]}

    def mentions(self, name_toks: Sequence[str]) -> dict[int, float]:
        """Per sentence, the share of an entity's idf mass its text or title holds (> 0 only)."""
        weights = {w: self.idf(stem_word(w)) for w in name_toks}
        total = sum(weights.values())
        if total <= 0:
            return {}
        acc: dict[int, float] = {}
        for w, wt in weights.items():
            for i in set(self.postings(w)).union(self.title_postings(w)):
                acc[i] = acc.get(i, 0.0) + wt
        return {i: v / total for i, v in acc.items()}
