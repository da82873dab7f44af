r"""Per-prediction scores over whole columns: the scores of :mod:`core.scoring`, vectorized.

The per-row functions of :mod:`core.scoring` are the reference; this module gives the same
values (every field, every row; floats computed with the same operations in the same order)
at scale:

* every distinct answer string (predictions, gold answers, aliases) is normalized once: ASCII
  strings with Arrow string kernels (the published steps, which on ASCII text are exactly
  lowercase, a character class, the ``\\b(a|an|the)\\b`` regex and whitespace runs), any other
  string with the reference functions;
* normalized strings become ids and their tokens integer ids; EM compares ids, token F1 is
  computed once per distinct (prediction, gold) pair of normalized ids as a multiset overlap
  of token ids, then broadcast; the max over gold aliases is an array reduction;
* evidence sets are (row, id) integer keys: overlaps, sizes and title grounding are counts
  (:class:`EvidenceCodes`; the store's re-score read gives the codes directly);
* an :class:`AnswerForms` keeps the normalized forms and token bags of every answer string
  it has met, so the batches of one re-score normalize each distinct string once.

:func:`inputs_from_frame` and :func:`inputs_from_arrow` build the :class:`ScoreInputs` (None
when a value is outside what this path represents exactly, e.g. a non-string passage id: the
caller then scores with the reference); :func:`score_inputs` returns the score arrays.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.scoring.inputs import (
    EvidenceCodes,
    ScoreInputs,
    as_numpy,
    column_codes,
    inputs_from_arrow,
    inputs_from_frame,
    list_cells,
)
from core.scoring.normalize import (
    ANSWER_SCORES,
    EVIDENCE_SCORES,
    MULTI_EVIDENCE_REASONING,
    NO_WORDS,
    NUMBER_WORDS,
    SCORE_COLUMNS,
    SOFT_F1,
    YES_WORDS,
    parse_number,
    relaxed_tokens,
    strict_tokens,
)

__all__ = [
    "LABEL_CODES",
    "AnswerForms",
    "EvidenceCodes",
    "ScoreInputs",
    "inputs_from_arrow",
    "inputs_from_frame",
    "score_inputs",
    "score_table",
]

#: Failure labels by code in :func:`score_inputs`'s ``label_code`` (-1: no label).
LABEL_CODES = ("localization", "selection", "integration", "conversion", "success", "parse")
_LOC, _SEL, _INT, _CONV, _SUCC, _PARSE = range(6)


def _hex_class(chars: str) -> str:
    return "[" + "".join(f"\\x{ord(c):02x}" for c in chars) + "]"


# On ASCII text the published steps are exactly these (NFKD and accent removal change
# nothing; Python's whitespace in ASCII is space, \t \n \v \f \r and \x1c-\x1f).
_STRICT_CLASS = _hex_class(string.punctuation)
_RELAXED_CLASS = _hex_class("".join(c for c in string.punctuation if c not in "$+<=>^`|~"))
_ARTICLES = r"\b(a|an|the)\b"
_WHITESPACE = r"[ \t\n\r\x0b\x0c\x1c-\x1f]+"
# The synthetic-suffix rule on tokens joined by one space: trailing tokens 0\d{2,}.
_SUFFIX_RUN = r"(?:^| )0[0-9]{2,}(?: 0[0-9]{2,})*$"
_WS = r"[ \t\n\r\x0b\x0c\x1c-\x1f]"
# What parse_number can accept (a superset): ASCII text that is only sign, digits, commas and
# periods inside whitespace; a number word; any non-ASCII text with a digit (Unicode spaces).
_NUMBER_HINT = (
    f"^{_WS}*[+\\-0-9,.]*[0-9][+\\-0-9,.]*({_WS}*\\.)?{_WS}*$"
    "|(?i:" + "|".join(NUMBER_WORDS) + ")|(?s:[^\\x00-\\x7f].*[0-9]|[0-9].*[^\\x00-\\x7f])"
)


def _row_of(lengths: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


# Sort-based set operations on int64 keys (np.unique's hash path is slow on wide keys).
def _unique(keys: np.ndarray) -> np.ndarray:
    if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):  # already sorted and distinct
        return keys
    s = np.sort(keys)
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def _unique_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.sort(keys)
    if not len(s):
        return s, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return s[starts], np.diff(np.append(starts, len(s)))


def _member(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``keys`` in ``sorted_set`` (sorted, distinct)."""
    if not len(sorted_set):
        return np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, keys), len(sorted_set) - 1)
    return sorted_set[pos] == keys


# ---------------------------------------------------------------------------- normalization
def _normalize(strings: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Strict, relaxed (suffix kept) and relaxed (suffix dropped) forms of each string.

    Each form is the tokens joined by one space.
    """
    lower = pc.ascii_lower(strings)

    def steps(text: pa.Array, cls: str, repl: str) -> pa.Array:
        text = pc.replace_substring_regex(text, cls, repl)
        text = pc.replace_substring_regex(text, _ARTICLES, " ")
        text = pc.replace_substring_regex(text, _WHITESPACE, " ")
        return pc.utf8_trim(text, " ")

    strict = steps(lower, _STRICT_CLASS, "")
    keep = steps(lower, _RELAXED_CLASS, " ")
    drop = pc.replace_substring_regex(keep, _SUFFIX_RUN, "")
    other = ~as_numpy(pc.string_is_ascii(strings))
    if other.any():
        forms = [_python_forms(s) for s in strings.filter(pa.array(other)).to_pylist()]
        mask = pa.array(other)
        strict = pc.replace_with_mask(strict, mask, pa.array([f[0] for f in forms], pa.string()))
        relaxed = pa.array([f[1] for f in forms], pa.string())
        keep = pc.replace_with_mask(keep, mask, relaxed)
        # the suffix rule on tokens joined by a space, as for ASCII text
        drop = pc.replace_with_mask(
            drop, mask, pc.replace_substring_regex(relaxed, _SUFFIX_RUN, "")
        )
    return strict, keep, drop


@functools.lru_cache(maxsize=1 << 16)
def _python_forms(text: str) -> tuple[str, str]:
    """Strict and relaxed (suffix kept) forms of a non-ASCII string, by the row scorer.

    Cached across calls: a re-score meets each gold answer once per batch it appears in.
    """
    return " ".join(strict_tokens(text)), " ".join(relaxed_tokens(text, True))


_YES = pa.array(sorted(YES_WORDS), pa.string())
_NO = pa.array(sorted(NO_WORDS), pa.string())

#: :func:`core.scoring.normalize.parse_number`, cached across calls as :func:`_python_forms`.
_parse_number = functools.lru_cache(maxsize=1 << 16)(parse_number)


@dataclass(slots=True)
class _Tokens:
    """The tokens of each normalized string as a bag (multiset).

    Its distinct token ids, ascending (``distinct`` per string, ``starts`` into ``ids``),
    with their ``counts``; ``lengths`` counts every token.
    """

    lengths: np.ndarray
    distinct: np.ndarray
    starts: np.ndarray
    ids: np.ndarray
    counts: np.ndarray
    vocab: int

    def bag(self, which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner index into ``which``, token id, count) of ``which``'s strings' bags.

        Ordered by owner, then token id: ``owner * vocab + id`` is sorted and distinct.
        """
        lens = self.distinct[which]
        owner = _row_of(lens)
        pos = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        at = self.starts[which][owner] + pos
        return owner, self.ids[at], self.counts[at]


def _lookup(values: pa.Array, known: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Index of each value in ``known`` (-1: absent) and whether it is there."""
    if not len(known):
        return np.full(len(values), -1, dtype=np.int64), np.zeros(len(values), dtype=bool)
    pos = pc.index_in(values, value_set=known)
    there = as_numpy(pos.is_valid())
    return as_numpy(pc.fill_null(pos, -1)).astype(np.int64), there


class _FormSpace:
    """Distinct normalized forms (tokens joined by one space), numbered as first met.

    Each form's tokens are ids into a vocabulary that grows with the forms; both persist
    for the life of the object, so a form met again (another batch) is not split again.
    """

    def __init__(self) -> None:
        self.forms = pa.array([], pa.string())
        self.vocab = pa.array([], pa.string())
        self.lengths = np.zeros(0, dtype=np.int64)  # tokens of each form
        self.distinct = np.zeros(0, dtype=np.int64)  # distinct tokens of each form
        self.ids = np.zeros(0, dtype=np.int64)  # each form's distinct token ids, ascending
        self.counts = np.zeros(0, dtype=np.int64)  # and how often each occurs
        self.yes_no = np.zeros(0, dtype=np.int8)  # 1 yes, 2 no (canonical_yes_no), else 0

    @property
    def tokens(self) -> _Tokens:
        """The token bags of every form so far."""
        return _Tokens(
            self.lengths,
            self.distinct,
            np.cumsum(self.distinct) - self.distinct,
            self.ids,
            self.counts,
            len(self.vocab),
        )

    def add(self, joined: pa.Array) -> np.ndarray:
        """The form id of each string of ``joined`` (no nulls), adding the new forms."""
        codes, uniq = column_codes(joined)
        pos, there = _lookup(uniq, self.forms)
        new = uniq.filter(pa.array(~there))
        if len(new):
            pos[~there] = len(self.forms) + np.arange(len(new), dtype=np.int64)
            empty = as_numpy(pc.equal(new, ""))
            raw = pc.split_pattern(new, " ")
            raw_len = as_numpy(pc.list_value_length(raw)).astype(np.int64)
            flat = pc.list_flatten(raw).filter(pa.array(np.repeat(~empty, raw_len)))
            tok, known = _lookup(flat, self.vocab)
            if not known.all():
                fresh, words = column_codes(flat.filter(pa.array(~known)))
                tok[~known] = len(self.vocab) + fresh
                self.vocab = pa.concat_arrays([self.vocab, words])
            lengths = np.where(empty, 0, raw_len)
            v = np.int64(max(len(self.vocab), 1))
            keys, counts = _unique_counts(_row_of(lengths) * v + tok)
            yn = np.zeros(len(new), dtype=np.int8)
            yn[as_numpy(pc.is_in(new, _YES))] = 1
            yn[as_numpy(pc.is_in(new, _NO))] = 2
            self.forms = pa.concat_arrays([self.forms, new])
            self.lengths = np.concatenate([self.lengths, lengths])
            self.distinct = np.concatenate(
                [self.distinct, np.bincount(keys // v, minlength=len(new))]
            )
            self.ids = np.concatenate([self.ids, keys % v])
            self.counts = np.concatenate([self.counts, counts])
            self.yes_no = np.concatenate([self.yes_no, yn])
        return pos[codes]


def _same_memory(a: pa.Array, b: pa.Array) -> bool:
    """Whether two arrays view the same memory (so, ``a`` being alive, the same values)."""
    if a is b:
        return True
    if len(a) != len(b) or a.offset != b.offset or a.type != b.type:
        return False
    return [x and x.address for x in a.buffers()] == [x and x.address for x in b.buffers()]


class AnswerForms:
    """The normalized forms of every answer string met so far, as integer ids.

    :func:`score_inputs` normalizes each distinct answer string (prediction, gold answer,
    alias) once per object: pass one object to every batch of a re-score and a string met in
    an earlier batch costs a lookup. Forms are pure functions of the string, so sharing one
    object between unrelated inputs never changes a score. It holds at most about
    ``MAX_STRINGS`` strings: a batch (:meth:`begin`) that meets it with more starts afresh
    (memory stays bounded when nearly every answer is distinct).
    """

    #: Strings kept before :meth:`begin` starts afresh.
    MAX_STRINGS = 1 << 21

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._dictionary: tuple[pa.Array, np.ndarray] | None = None  # dictionary_ids' last
        self.raw = pa.array([], pa.string())
        self.strict = _FormSpace()
        self.relaxed = _FormSpace()
        # form ids of each raw string: strict, relaxed with the suffix kept, dropped
        self.of = np.zeros((3, 0), dtype=np.int64)
        self.number = np.zeros(0)  # parse_number (NaN: none); valid where self.parsed
        self.parsed = np.zeros(0, dtype=bool)

    def begin(self) -> None:
        """Start a batch: afresh when over ``MAX_STRINGS`` (ids hold until the next call)."""
        if len(self.raw) > self.MAX_STRINGS:
            self._reset()

    def dictionary_ids(self, dictionary: pa.Array) -> np.ndarray:
        """:meth:`ids` of a dictionary's strings (-1: null), kept while it is the same one."""
        if self._dictionary is None or not _same_memory(self._dictionary[0], dictionary):
            ids = np.full(len(dictionary), -1, dtype=np.int64)
            valid = as_numpy(dictionary.is_valid())
            ids[valid] = self.ids(dictionary.filter(pa.array(valid)))
            self._dictionary = (dictionary, ids)
        return self._dictionary[1]

    def ids(self, strings: pa.Array) -> np.ndarray:
        """Index into ``raw`` of each (non-null) string, adding the new ones."""
        pos, there = _lookup(strings, self.raw)
        if not there.all():
            codes, new = column_codes(strings.filter(pa.array(~there)))
            pos[~there] = len(self.raw) + codes
            strict, keep, drop = _normalize(new)
            rel = self.relaxed.add(pa.concat_arrays([keep, drop]))
            of = np.stack([self.strict.add(strict), rel[: len(new)], rel[len(new) :]])
            self.raw = pa.concat_arrays([self.raw, new])
            self.of = np.concatenate([self.of, of], axis=1)
            self.number = np.concatenate([self.number, np.full(len(new), np.nan)])
            self.parsed = np.concatenate([self.parsed, np.zeros(len(new), dtype=bool)])
        return pos

    def numbers(self, which: np.ndarray) -> np.ndarray:
        """``parse_number`` of the raw strings ``which`` (NaN: not a number)."""
        todo = _unique(which[~self.parsed[which]])
        if len(todo):
            self.number[todo] = _numbers(self.raw, todo)
            self.parsed[todo] = True
        return self.number[which]


def _pair_f1(a: np.ndarray, b: np.ndarray, tokens: _Tokens) -> np.ndarray:
    """SQuAD token F1 of normalized-id pairs (a, b), each distinct pair computed once."""
    n_ids = np.int64(len(tokens.lengths))
    keys, uniq = pd.factorize(a.astype(np.int64) * n_ids + b)
    ua, ub = uniq // n_ids, uniq % n_ids
    la, lb = tokens.lengths[ua], tokens.lengths[ub]
    f1 = np.where((la == 0) & (lb == 0), 1.0, 0.0)
    f1[(ua == ub) & (la > 0)] = 1.0  # same tokens: precision = recall = 1
    rest = np.flatnonzero((ua != ub) & (la > 0) & (lb > 0))
    if len(rest):
        v = np.int64(max(tokens.vocab, 1))
        oa, ta, ca = tokens.bag(ua[rest])
        ob, tb, cb = tokens.bag(ub[rest])
        ka, kb = oa * v + ta, ob * v + tb  # sorted and distinct (bags)
        ia = np.flatnonzero(_member(ka, kb))
        ib = np.searchsorted(kb, ka[ia])
        common = np.bincount(ka[ia] // v, weights=np.minimum(ca[ia], cb[ib]), minlength=len(rest))
        precision = common / la[rest]
        recall = common / lb[rest]
        with np.errstate(invalid="ignore", divide="ignore"):
            val = 2 * precision * recall / (precision + recall)
        f1[rest] = np.where(common == 0, 0.0, val)
    return f1[keys]


def _numbers(strings: pa.Array, which: np.ndarray) -> np.ndarray:
    """``parse_number`` of the distinct strings ``which`` (NaN: not a number)."""
    out = np.full(len(which), np.nan)
    sub = strings.take(pa.array(which))
    hint = as_numpy(pc.fill_null(pc.match_substring_regex(sub, _NUMBER_HINT), False))
    for i in np.flatnonzero(hint):
        x = _parse_number(sub[int(i)].as_py())
        if x is not None:
            out[i] = x
    return out


def _isclose(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)``; NaN (no number) is never close."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(y - x)
        finite = np.isfinite(x) & np.isfinite(y)
        close = (diff <= np.abs(1e-9 * y)) | (diff <= np.abs(1e-9 * x)) | (diff <= 1e-9)
    return (x == y) | (finite & close)


# ---------------------------------------------------------------------------- scores
def _answer_scores(inp: ScoreInputs, rows: np.ndarray, forms: AnswerForms) -> dict[str, np.ndarray]:
    """Answer scores of ``rows`` (answered, parseable), max over gold and aliases."""
    m = len(rows)
    take = pa.array(rows)
    forms.begin()
    pred = pc.fill_null(inp.answer.take(take), "")
    g0 = inp.gold_answer.take(take)
    if pa.types.is_dictionary(g0.type):  # the dictionary's strings looked up once
        g_raw = forms.dictionary_ids(g0.dictionary)[as_numpy(pc.fill_null(g0.indices, -1))]
        g_raw[as_numpy(g0.indices.is_null())] = -1
        g0_ok = g_raw >= 0
        g_raw = g_raw[g0_ok]
        parts_str = []
    else:
        g0_ok = as_numpy(g0.is_valid())
        g_raw = None
        parts_str = [g0.filter(pa.array(g0_ok))]
    parts_rows = [np.flatnonzero(g0_ok)]
    n_gold = g0_ok.astype(np.int64)
    if inp.aliases is not None:
        lengths, flat = list_cells(inp.aliases, rows)
        ok = as_numpy(flat.is_valid())
        alias_rows = _row_of(lengths)[ok]
        parts_rows.append(alias_rows)
        parts_str.append(flat.filter(pa.array(ok)))
        n_gold += np.bincount(alias_rows, minlength=m)
    none = np.flatnonzero(n_gold == 0)
    parts_rows.append(none)
    parts_str.append(pa.array([""] * len(none), pa.string()))
    e_rows = np.concatenate(parts_rows)
    raw = forms.ids(pa.concat_arrays([pred, *parts_str]))
    if g_raw is not None:  # the gold answers' ids go first among the gold strings
        raw = np.concatenate([raw[:m], g_raw, raw[m:]])
    pu, gu = raw[:m][e_rows], raw[m:]
    keep_rule = as_numpy(
        pc.fill_null(pc.equal(inp.answer_type.take(take), "number"), False)
    ) | as_numpy(pc.fill_null(pc.equal(inp.reasoning_type.take(take), "arithmetic"), False))
    rel = np.where(keep_rule[e_rows], 1, 2)  # the suffix kept, else dropped
    sp, sg, rp, rg = forms.of[0, pu], forms.of[0, gu], forms.of[rel, pu], forms.of[rel, gu]
    em_s = (sp == sg).astype(np.float64)
    f1_s = _pair_f1(sp, sg, forms.strict.tokens)
    em_r = (rp == rg).astype(np.float64)
    f1_r = _pair_f1(rp, rg, forms.relaxed.tokens)
    yn = forms.relaxed.yes_no
    soft = (em_r == 1.0) | (f1_r >= SOFT_F1) | ((yn[rp] == yn[rg]) & (yn[rp] != 0))
    open_ = np.flatnonzero(~soft)
    if len(open_):
        soft[open_] = _isclose(forms.numbers(pu[open_]), forms.numbers(gu[open_]))
    # the max over each row's gold strings: the gold answer and the no-gold "" rows are
    # each a row at most once (scores are >= 0), only the aliases need ``maximum.at``
    k0, k1 = len(parts_rows[0]), len(e_rows) - len(none)
    out = {}
    for name, vals in zip(
        ANSWER_SCORES, (em_s, f1_s, em_r, f1_r, soft.astype(np.float64)), strict=True
    ):
        best = np.zeros(m)
        best[e_rows[:k0]] = vals[:k0]
        best[none] = vals[k1:]
        np.maximum.at(best, e_rows[k0:k1], vals[k0:k1])
        out[name] = best
    return out


def _evidence_parts(inp: ScoreInputs, scored: np.ndarray) -> dict[str, Any]:
    """:func:`_evidence` of every row, in parts of ``ANSWER_ROWS`` rows.

    Every evidence value is a function of its own row's codes, so the parts give the values
    of one call; their temporaries (keys, positions, sets: about 200 bytes a row) stay
    bounded.
    """
    if inp.n <= ANSWER_ROWS:
        return _evidence(inp.n, inp.evidence, scored, inp.parse)
    parts = [
        _evidence(
            min(inp.n, lo + ANSWER_ROWS) - lo,
            _evidence_rows(inp.evidence, lo, min(inp.n, lo + ANSWER_ROWS)),
            scored[lo : lo + ANSWER_ROWS],
            inp.parse[lo : lo + ANSWER_ROWS],
        )
        for lo in range(0, inp.n, ANSWER_ROWS)
    ]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _evidence_rows(ev: EvidenceCodes, lo: int, hi: int) -> EvidenceCodes:
    """The codes of rows ``lo:hi`` (views into ``ev``'s arrays)."""

    def part(lengths: np.ndarray | None, flat: np.ndarray | None):
        if lengths is None or flat is None:
            return lengths, flat
        start = int(lengths[:lo].sum())
        return lengths[lo:hi], flat[start : start + int(lengths[lo:hi].sum())]

    c_len, c = part(ev.cited_len, ev.cited)
    g_len, g = part(ev.gold_len, ev.gold)
    t_len, t = part(ev.title_len, ev.cited_title)
    gt_len, gt = part(ev.gold_title_len, ev.gold_title)
    return EvidenceCodes(c_len, c, g_len, g, t_len, t, gt_len, gt)


def _evidence(n: int, ev: EvidenceCodes, scored: np.ndarray, parse: np.ndarray) -> dict[str, Any]:
    """Evidence counts and scores of ``n`` rows (cited ids of parse rows count as none)."""
    c_len, g_len = ev.cited_len, ev.gold_len
    c_row, g_row = _row_of(c_len), _row_of(g_len)
    c_pos = np.arange(len(c_row), dtype=np.int64) - np.repeat(np.cumsum(c_len) - c_len, c_len)
    v = np.int64(max(int(ev.cited.max(initial=0)), int(ev.gold.max(initial=0))) + 1)
    use_c = (scored & ~parse)[c_row]
    c_key = c_row * v + ev.cited
    g_key = _unique(g_row * v + ev.gold)
    c_set = _unique(c_key[use_c])
    hit_mask = _member(c_set, g_key)
    n_c = np.bincount(c_set // v, minlength=n)
    n_g = np.bincount(g_key // v, minlength=n)
    hit = np.bincount(c_set[hit_mask] // v, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n_c > 0, hit / np.maximum(n_c, 1), 0.0)
        recall = hit / n_g
        f1 = np.where(hit > 0, 2 * precision * recall / (precision + recall), 0.0)
    tg = np.full(n, np.nan)
    if ev.cited_title is not None:
        tg = _title_grounding(ev, n, v, c_key, c_row, c_pos, use_c, c_set, hit_mask, n_c)
    none = n_g == 0
    out = {
        "ev_precision": precision,
        "ev_recall": recall,
        "ev_f1": f1,
        "citation_grounding": (hit > 0).astype(np.float64),
        "title_grounding": tg,
    }
    for k in EVIDENCE_SCORES:
        out[k] = np.where(none, np.nan, out[k])
    return {**out, "n_cited": n_c, "n_gold": n_g, "hit": hit}


def _title_grounding(
    ev: EvidenceCodes,
    n: int,
    v: np.int64,
    c_key: np.ndarray,
    c_row: np.ndarray,
    c_pos: np.ndarray,
    use_c: np.ndarray,
    c_set: np.ndarray,
    hit_mask: np.ndarray,
    n_c: np.ndarray,
) -> np.ndarray:
    """Fraction of distinct cited ids whose title (the last given for the id) is gold.

    Gold support titles: ``gold_title`` when given, else the titles of the gold ids.
    """
    t_len, t_codes = ev.title_len, ev.cited_title
    if t_len is None or t_codes is None:
        return np.full(n, np.nan)
    top = int(t_codes.max(initial=0))
    if ev.gold_title is not None:
        top = max(top, int(ev.gold_title.max(initial=0)))
    w = np.int64(top + 1)
    starts = np.cumsum(t_len) - t_len
    has = use_c & (c_pos < t_len[c_row])
    idx = np.flatnonzero(has)  # the last title of an id wins (dict(zip(...)))
    order = np.argsort(c_key[idx], kind="stable")
    sk = c_key[idx][order]
    last = np.concatenate((sk[1:] != sk[:-1], [True])) if len(sk) else np.zeros(0, bool)
    src = idx[order][last]
    keys = sk[last]
    title = t_codes[starts[c_row[src]] + c_pos[src]]
    rows = keys // v
    if ev.gold_title is not None:
        ok = ev.gold_title >= 0
        support = _unique(_row_of(ev.gold_title_len)[ok] * w + ev.gold_title[ok])
    else:
        sel = _member(keys, c_set[hit_mask]) & (title >= 0)
        support = _unique(rows[sel] * w + title[sel])
    good = (title >= 0) & _member(rows * w + np.maximum(title, 0), support)
    count = np.bincount(rows[good], minlength=n)
    # no gold support title (passages without titles): nothing to ground against, NaN
    titled = np.bincount(support // w, minlength=n)[:n] > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(titled, np.where(n_c > 0, count / np.maximum(n_c, 1), 0.0), np.nan)


#: Rows of one part of :func:`score_inputs`'s answer scores.
ANSWER_ROWS = 1 << 18


def score_inputs(
    inp: ScoreInputs,
    correct_field: str = "em_strict",
    confidence_against: str = "soft_correct",
    forms: AnswerForms | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every score of every row, as :func:`core.scoring.rows.score_frame` defines them.

    ``forms`` keeps the normalized answer strings between calls (a re-score's batches);
    without it each call normalizes its own.

    Returns:
        ``({score column: float64 array}, label_code)`` where ``label_code`` indexes
        :data:`LABEL_CODES` (-1: no failure label).
    """
    scored = ~inp.error
    out = {k: np.where(scored, 0.0, np.nan) for k in ANSWER_SCORES}
    answered = np.flatnonzero(scored & ~inp.parse)
    if len(answered):
        forms = AnswerForms() if forms is None else forms
        # in parts of ANSWER_ROWS rows, as a re-score's batches: each row's scores are its
        # own (one forms object, each distinct string normalized once), and the temporaries
        # of the part (string ids, form ids, pair F1s: about 300 bytes a row) stay bounded
        for part in np.array_split(answered, -(-len(answered) // ANSWER_ROWS)):
            for k, vals in _answer_scores(inp, part, forms).items():
                out[k][part] = vals
    ev = _evidence_parts(inp, scored)
    for k in EVIDENCE_SCORES:
        out[k] = np.where(scored, ev[k], np.nan)
    conf = np.where(scored, inp.confidence, np.nan)
    with np.errstate(invalid="ignore"):
        out["confidence_error"] = np.abs(np.clip(conf, 0.0, 1.0) - out[confidence_against])
    n_c, n_g, hit = ev["n_cited"], ev["n_gold"], ev["hit"]
    missing = hit < n_g
    multi_types = pa.array(sorted(MULTI_EVIDENCE_REASONING))
    multi = as_numpy(pc.fill_null(pc.is_in(inp.reasoning_type, multi_types), False))
    label = np.select(
        [
            inp.parse,
            out[correct_field] >= 1.0,
            n_c == 0,
            hit == 0,
            missing & multi,
            n_c > hit,
            ~missing,
        ],
        [_PARSE, _SUCC, _LOC, _SEL, _INT, _SEL, _CONV],
        _INT,
    )
    label = np.where(scored & inp.labeled, label, -1)
    return out, label


def score_table(inp: ScoreInputs, forms: AnswerForms | None = None) -> pa.Table:
    """:func:`score_inputs` (default fields) as a table of ``SCORE_COLUMNS`` (NaN as null).

    The table :func:`core.scoring.rows.score_arrow` returns for the same rows.
    """
    scores, label = score_inputs(inp, forms=forms)
    cols = {k: pa.array(v, from_pandas=True) for k, v in scores.items()}
    cols["failure_label"] = pa.array(LABEL_CODES, pa.string()).take(pa.array(label, mask=label < 0))
    return pa.table({k: cols[k] for k in SCORE_COLUMNS})
