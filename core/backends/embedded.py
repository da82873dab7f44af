"""The embedded baseline reader: a deterministic extractive reader with no server, no weights.

SPEC §5.2. It reads only what a model would read -- the chat messages built by
:mod:`core.execution.prompts` -- and never sees gold labels. For each call it:

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
from functools import partial
from typing import Any

from core.backends.base import Message, Reply
from core.backends.reader_index import (
    STOPWORDS,
    SentenceIndex,
    content_stems,
    stem_word,
    tokens,
)
from core.backends.reader_spans import (
    AGE_WORDS,
    DIFF_Q,
    MIN_WORDS,
    YEAR_RE,
    Question,
    Span,
    analyse_question,
    find_spans,
    format_number,
    positions_of,
    span_distance,
)
from core.backends.workers import ReaderPool

__all__ = ["LABEL", "READER_VERSION", "EmbeddedReader", "parse_prompt"]

#: Bump when the reader's behaviour changes (part of the model digest, hence of cache keys).
READER_VERSION = "1"
#: How the UI and reports label this backend.
LABEL = "embedded baseline reader"

_MARKER_RE = re.compile(r"\[passage_id:\s*(p\d+)\]")
# Share of the question's idf mass a bridge sentence must add before the reader hops.
_MIN_HOP_GAIN = 0.05


# --------------------------------------------------------------------------- prompt parsing


def parse_prompt(messages: Sequence[Message]) -> tuple[str, list[tuple[str, str, str]], bool]:
    """Read a :mod:`core.execution.prompts` message list back into question, passages, probe flag.

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
        self._pool: ReaderPool | None = None

    def pool(self, size: int) -> ReaderPool | None:
        """A copy of this reader in each of ``size`` worker processes (a ``ReaderPool``).

        :class:`core.backends.workers.ReaderPool`, or None when the reader was made with
        ``workers=False``. The engine calls it for runs with many calls. The pool is kept for
        the next run and closed with the reader (or by :meth:`close`); its replies are this
        reader's: every copy is made by the same factory, with this reader's settings.
        """
        if not self.workers:
            return None
        if self._pool is None or self._pool.size != int(size):
            self.close()
            factory = partial(
                EmbeddedReader,
                self.model,
                threshold=self.threshold,
                k1=self.k1,
                b=self.b,
                workers=False,
            )
            self._pool = ReaderPool(factory, size)
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
        except Exception as exc:
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
        q = analyse_question(question)
        index = SentenceIndex(blocks, self.k1, self.b)
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

    def _ranked(self, index: SentenceIndex, stems: Sequence[str]) -> tuple[list[int], list[float]]:
        scores = index.score(stems)
        order = sorted((i for i in range(index.n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return order, scores

    def _confidence(self, cov: float, s1: float, s2: float) -> float:
        margin = (s1 - s2) / s1 if s1 > 0 else 0.0
        return min(max(0.1 + 0.55 * cov + 0.3 * margin, 0.05), 0.95)

    def _extract(self, q: Question, index: SentenceIndex, probe: bool) -> _Answer:
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
        q: Question,
        index: SentenceIndex,
        best: int,
        bridge: Span,
        uncovered: Sequence[str],
        exclude: set[str],
    ) -> tuple[int, Span] | None:
        btoks = bridge.toks
        shares = index.mentions(btoks)
        cands = sorted(i for i, m in shares.items() if i != best and m >= 0.5)
        if not cands:
            return None
        stems = list(dict.fromkeys([*uncovered, *(stem_word(w) for w in btoks)]))
        scores = index.score(stems, only=cands)
        ex = exclude | set(btoks)
        for i in sorted(cands, key=lambda i: (-scores[i], i)):
            text = index.sents[i].text
            near = set(uncovered) if positions_of(text, set(uncovered)) else set(stems)
            span = self._pick(text, q, near, ex)
            if span is not None:
                return i, span
        return None

    def _pick(
        self,
        text: str,
        q: Question,
        stems: set[str],
        exclude: set[str],
        want: str | None = None,
    ) -> Span | None:
        want = want or q.want
        spans = find_spans(text)
        pos = positions_of(text, stems)

        def fresh(s: Span) -> bool:
            toks = [t for t in s.toks if t not in STOPWORDS]
            return bool(toks) and sum(t in exclude for t in toks) < 0.5 * len(toks)

        def nearest(cands: list[Span], bonus: bool = False) -> Span | None:
            if not cands:
                return None
            return min(
                cands,
                key=lambda s: (
                    span_distance(s, pos) - (0.5 if bonus and len(s.toks) > 1 else 0),
                    s.start,
                ),
            )

        nums = [s for s in spans if s.kind == "number" and s.text.lower() not in exclude]
        if want == "year":
            years = [s for s in nums if YEAR_RE.match(s.text)]
            return nearest(years) or nearest(nums)
        if want == "date":
            dates = [s for s in spans if s.kind == "date" and fresh(s)]
            years = [s for s in nums if YEAR_RE.match(s.text)]
            return nearest(dates) or nearest(years) or nearest(nums)
        if want == "number":
            return nearest(nums)
        ents = [s for s in spans if s.kind in ("entity", "quote") and fresh(s)]
        return nearest(ents, bonus=True) or nearest(nums)

    def _entity_sentence(
        self, index: SentenceIndex, name: str, stems: Sequence[str], need_number: bool
    ) -> tuple[int, Span | None, float] | None:
        """Best sentence about ``name`` (and its value span when ``need_number``)."""
        ntoks = tuple(tokens(name))
        cands = sorted(i for i, m in index.mentions(ntoks).items() if m >= 0.5)
        if not cands:
            return None
        nstems = list(dict.fromkeys(stem_word(t) for t in ntoks))
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
                for s in find_spans(text)
                if s.kind == "number" and s.text.lower() not in ntoks and s.value is not None
            ]
            if nums:
                pos = positions_of(text, set(measure))
                span = min(nums, key=lambda s: (span_distance(s, pos), s.start))
                return i, span, scores[i]
        return None

    def _compare(self, q: Question, index: SentenceIndex) -> _Answer | None:
        low = q.text.lower()
        names = list(q.choices) if q.kind == "choice" else [s.text for s in q.names]
        age = next((v for w, v in AGE_WORDS.items() if re.search(rf"\b{w}\b", low)), None)
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
                years = [
                    s for s in find_spans(text) if s.kind == "number" and YEAR_RE.match(s.text)
                ]
                if years:
                    value = min(
                        years,
                        key=lambda s: (span_distance(s, positions_of(text, {"born"})), s.start),
                    ).value
            values.append((name, i, float(value)))
        if values and len(values) < len(names):
            return None  # some values were read, others are missing: nothing to compare
        if q.kind == "arith":
            if len(values) < 2:
                return None
            nums = [v for _, _, v in values]
            if DIFF_Q.search(low):
                result, how = abs(nums[0] - nums[1]), "difference"
            else:
                result, how = math.fsum(nums), "sum"
            ids = tuple(dict.fromkeys(index.sents[i].pid for _, i, _ in values))
            shown = ", ".join(
                f"{n} = {format_number(v)} ({index.sents[i].pid})" for n, i, v in values
            )
            return _Answer(
                format_number(result),
                ids,
                0.5,
                f"Read {shown}; the {how} is {format_number(result)}.",
            )
        if len(values) == len(names) and len(values) >= 2:
            if age == "min_year" or (
                age is None and any(re.search(rf"\b{w}\b", low) for w in MIN_WORDS)
            ):
                pick = min(values, key=lambda x: (x[2], names.index(x[0])))
            else:
                pick = max(values, key=lambda x: (x[2], -names.index(x[0])))
            vals = [v for _, _, v in values]
            tie = vals.count(pick[2]) > 1
            ids = tuple(dict.fromkeys(index.sents[i].pid for _, i, _ in values))
            shown = ", ".join(
                f"{n} = {format_number(v)} ({index.sents[i].pid})" for n, i, v in values
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
            rest = [st for st in q.stems if st not in content_stems(name)]
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

    def _yes_no(self, q: Question, index: SentenceIndex, probe: bool) -> _Answer:
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
                name_stems = {stem_word(t) for n in names for t in tokens(n)}
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

    def _attributes(self, text: str, q: Question) -> set[str]:
        out = set()
        for s in find_spans(text):
            if s.kind == "entity":
                for t in s.toks:
                    if t not in q.qtoks and t not in STOPWORDS:
                        out.add(t)
        return out
