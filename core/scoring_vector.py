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
* evidence sets are (row, id) integer keys: overlaps, sizes and title grounding are counts.

:func:`inputs_from_frame` and :func:`inputs_from_arrow` build the :class:`ScoreInputs` (None
when a value is outside what this path represents exactly, e.g. a non-string passage id: the
caller then scores with the reference); :func:`score_inputs` returns the score arrays.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.answer_norm import (
    ANSWER_SCORES,
    EVIDENCE_SCORES,
    MULTI_EVIDENCE_REASONING,
    NO_WORDS,
    NUMBER_WORDS,
    SOFT_F1,
    YES_WORDS,
    _as_list,
    _flag,
    _relaxed_tokens,
    _strict_tokens,
    parse_number,
)

__all__ = ["LABEL_CODES", "ScoreInputs", "inputs_from_arrow", "inputs_from_frame", "score_inputs"]

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


@dataclass(slots=True)
class ScoreInputs:
    """One column per scoring input, ``n`` rows (see :func:`core.scoring.score_frame`).

    String columns are Arrow string arrays (null: not a string); list columns Arrow list
    arrays of strings (a null list is empty; id lists hold no null); the titles are None when
    the frame has no such column.
    """

    n: int
    answer: pa.Array
    gold_answer: pa.Array
    aliases: pa.Array | None
    answer_type: pa.Array
    reasoning_type: pa.Array
    cited_ids: pa.Array
    gold_ids: pa.Array
    cited_titles: pa.Array | None
    gold_titles: pa.Array | None
    parse: np.ndarray  # bool: parse error (scored 0, label "parse")
    error: np.ndarray  # bool: failed call (not scored)
    labeled: np.ndarray  # bool: condition gets a failure label (not no_evidence)
    confidence: np.ndarray  # float64, NaN when unknown


# ---------------------------------------------------------------------------- building inputs
def _text(values: Any) -> pa.Array:
    return pa.array([x if isinstance(x, str) else None for x in values], type=pa.string())


def _list_column(values: Any, kind: str) -> pa.Array | None:
    """A list<string> array of ``_as_list`` of each value, or None (not representable).

    ``kind`` ``"ids"`` takes strings only, ``"titles"`` strings and None,
    ``"aliases"`` drops what is not a string (as the reference does).
    """
    lists = [_as_list(x) for x in values]
    if kind == "aliases":
        lists = [[v for v in x if isinstance(v, str)] for x in lists]
    flat = list(chain.from_iterable(lists))
    if kind == "ids" and not all(isinstance(v, str) for v in flat):
        return None
    if kind == "titles" and not all(v is None or isinstance(v, str) for v in flat):
        return None
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    if lists:
        np.cumsum([len(x) for x in lists], out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.string()))


def _confidence(col: pd.Series | None, n: int) -> np.ndarray | None:
    if col is None:
        return np.full(n, np.nan)
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        return np.array(
            [math.nan if x is None or x is pd.NA else float(x) for x in col], dtype=np.float64
        )
    except (TypeError, ValueError):
        return None


def inputs_from_frame(df: pd.DataFrame) -> ScoreInputs | None:
    """The inputs of a scoring frame, or None when only the per-row reference scores it."""
    n = len(df)

    def col(name: str) -> Any:
        return df[name].tolist() if name in df.columns else [None] * n

    cited = _list_column(col("cited_ids"), "ids")
    gold = _list_column(col("gold_ids"), "ids")
    ctit = _list_column(col("cited_titles"), "titles") if "cited_titles" in df.columns else None
    gtit = _list_column(col("gold_titles"), "titles") if "gold_titles" in df.columns else None
    conf = _confidence(df["confidence"] if "confidence" in df.columns else None, n)
    if cited is None or gold is None or conf is None:
        return None
    if ("cited_titles" in df.columns and ctit is None) or ("gold_titles" in df.columns
                                                          and gtit is None):  # fmt: skip
        return None
    return ScoreInputs(
        n=n,
        answer=_text(col("answer")),
        gold_answer=_text(col("gold_answer")),
        aliases=_list_column(col("answer_aliases"), "aliases"),
        answer_type=_text(col("answer_type")),
        reasoning_type=_text(col("reasoning_type")),
        cited_ids=cited,
        gold_ids=gold,
        cited_titles=ctit,
        gold_titles=gtit,
        parse=np.array([_flag(x) for x in col("parse_error")], dtype=bool),
        error=np.array([_flag(x) for x in col("error")], dtype=bool),
        labeled=np.array(
            [str(c).split("|", 1)[0] != "no_evidence" for c in col("condition")], dtype=bool
        ),
        confidence=conf,
    )


def _arrow_text(arr: Any) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr if arr.type == pa.string() else arr.cast(pa.string())


def _arrow_list(arr: Any) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr if arr.type == pa.list_(pa.string()) else arr.cast(pa.list_(pa.string()))


def _arrow_flags(arr: pa.Array) -> np.ndarray:
    """``_flag`` of each string: set and not only whitespace (Python's ``str.strip``)."""
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    out = pc.fill_null(pc.match_substring_regex(arr, "[0-9A-Za-z]"), False).to_numpy(
        zero_copy_only=False
    )
    rest = np.flatnonzero(valid & ~out)
    if len(rest):
        out = out.copy()
        out[rest] = [_flag(x) for x in arr.take(pa.array(rest)).to_pylist()]
    return out


def inputs_from_arrow(batch: pa.RecordBatch | pa.Table) -> ScoreInputs | None:
    """The inputs of the store's scoring columns (:meth:`core.store.Store.scoring_batches`).

    None when only the per-row reference scores them (a NULL passage id in a list).
    """
    cited = _arrow_list(batch.column("cited_ids"))
    gold = _arrow_list(batch.column("gold_ids"))
    if pc.list_flatten(cited).null_count or pc.list_flatten(gold).null_count:
        return None
    cond = _arrow_text(batch.column("condition"))
    no_ev = pc.or_(pc.equal(cond, "no_evidence"), pc.starts_with(cond, "no_evidence|"))
    conf = batch.column("confidence")
    if isinstance(conf, pa.ChunkedArray):
        conf = conf.combine_chunks()
    return ScoreInputs(
        n=batch.num_rows,
        answer=_arrow_text(batch.column("answer")),
        gold_answer=_arrow_text(batch.column("gold_answer")),
        aliases=_arrow_list(batch.column("answer_aliases")),
        answer_type=_arrow_text(batch.column("answer_type")),
        reasoning_type=_arrow_text(batch.column("reasoning_type")),
        cited_ids=cited,
        gold_ids=gold,
        cited_titles=_arrow_list(batch.column("cited_titles")),
        gold_titles=_arrow_list(batch.column("gold_titles")),
        parse=_arrow_flags(_arrow_text(batch.column("parse_error"))),
        error=_arrow_flags(_arrow_text(batch.column("error"))),
        labeled=~pc.fill_null(no_ev, False).to_numpy(zero_copy_only=False),
        confidence=pc.fill_null(conf.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False),
    )


# ---------------------------------------------------------------------------- array helpers
def _np(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _codes(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Integer codes of a string array (null -> -1) and the distinct values."""
    enc = pc.dictionary_encode(arr)
    idx = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, enc.dictionary


def _lists(arr: pa.Array, rows: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
    """Per-row lengths (a null list is empty) and the flat values of a list array."""
    if rows is not None:
        arr = arr.take(pa.array(rows))
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    return lengths.astype(np.int64), pc.list_flatten(arr)


def _row_of(lengths: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


# Sort-based set operations on int64 keys (np.unique's hash path is slow on wide keys).
def _unique(keys: np.ndarray) -> np.ndarray:
    s = np.sort(keys)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


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
    other = ~_np(pc.string_is_ascii(strings))
    if other.any():
        texts = strings.filter(pa.array(other)).to_pylist()
        mask = pa.array(other)
        strict = pc.replace_with_mask(strict, mask, pa.array(
            [" ".join(_strict_tokens(s)) for s in texts], pa.string()))  # fmt: skip
        relaxed = pa.array([" ".join(_relaxed_tokens(s, True)) for s in texts], pa.string())
        keep = pc.replace_with_mask(keep, mask, relaxed)
        # the suffix rule on tokens joined by a space, as for ASCII text
        drop = pc.replace_with_mask(drop, mask, pc.replace_substring_regex(
            relaxed, _SUFFIX_RUN, ""))  # fmt: skip
    return strict, keep, drop


@dataclass(slots=True)
class _Tokens:
    """Token ids of each normalized string (``lengths``, ``starts`` into ``ids``)."""

    lengths: np.ndarray
    starts: np.ndarray
    ids: np.ndarray
    vocab: int

    @classmethod
    def of(cls, joined: pa.Array) -> _Tokens:
        empty = _np(pc.equal(joined, ""))
        raw = pc.split_pattern(joined, " ")
        raw_len = _np(pc.list_value_length(raw)).astype(np.int64)
        flat = pc.list_flatten(raw)
        flat = flat.filter(pa.array(np.repeat(~empty, raw_len)))
        ids, vocab = _codes(flat)
        lengths = np.where(empty, 0, raw_len)
        starts = np.cumsum(lengths) - lengths
        return cls(lengths, starts, ids, len(vocab))

    def gather(self, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(owner index into ``which``, token id) of every token of ``which``'s strings."""
        lens = self.lengths[which]
        owner = _row_of(lens)
        pos = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        return owner, self.ids[self.starts[which][owner] + pos]


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
        v = np.int64(tokens.vocab)
        oa, ta = tokens.gather(ua[rest])
        ob, tb = tokens.gather(ub[rest])
        ka, ca = _unique_counts(oa * v + ta)
        kb, cb = _unique_counts(ob * v + tb)
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
    hint = _np(pc.fill_null(pc.match_substring_regex(sub, _NUMBER_HINT), False))
    for i in np.flatnonzero(hint):
        x = parse_number(sub[int(i)].as_py())
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
def _answer_scores(inp: ScoreInputs, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Answer scores of ``rows`` (answered, parseable), max over gold and aliases."""
    m = len(rows)
    take = pa.array(rows)
    pred = pc.fill_null(inp.answer.take(take), "")
    g0 = inp.gold_answer.take(take)
    g0_ok = _np(g0.is_valid())
    parts_rows = [np.flatnonzero(g0_ok)]
    parts_str = [g0.filter(pa.array(g0_ok))]
    n_gold = g0_ok.astype(np.int64)
    if inp.aliases is not None:
        lengths, flat = _lists(inp.aliases, rows)
        ok = _np(flat.is_valid())
        alias_rows = _row_of(lengths)[ok]
        parts_rows.append(alias_rows)
        parts_str.append(flat.filter(pa.array(ok)))
        n_gold += np.bincount(alias_rows, minlength=m)
    none = np.flatnonzero(n_gold == 0)
    parts_rows.append(none)
    parts_str.append(pa.array([""] * len(none), pa.string()))
    e_rows = np.concatenate(parts_rows)
    codes, uniq = _codes(pa.concat_arrays([pred, *parts_str]))
    pu, gu = codes[:m][e_rows], codes[m:]
    strict, keep, drop = _normalize(uniq)
    sid, s_dict = _codes(strict)
    rid, r_dict = _codes(pa.concat_arrays([keep, drop]))
    nu = len(uniq)
    keep_rule = _np(pc.fill_null(pc.equal(inp.answer_type.take(take), "number"), False)) | _np(
        pc.fill_null(pc.equal(inp.reasoning_type.take(take), "arithmetic"), False)
    )
    off = np.where(keep_rule[e_rows], 0, nu)
    sp, sg, rp, rg = sid[pu], sid[gu], rid[pu + off], rid[gu + off]
    em_s = (sp == sg).astype(np.float64)
    f1_s = _pair_f1(sp, sg, _Tokens.of(s_dict))
    em_r = (rp == rg).astype(np.float64)
    f1_r = _pair_f1(rp, rg, _Tokens.of(r_dict))
    yn = np.zeros(len(r_dict), dtype=np.int8)
    yn[_np(pc.is_in(r_dict, pa.array(sorted(YES_WORDS))))] = 1
    yn[_np(pc.is_in(r_dict, pa.array(sorted(NO_WORDS))))] = 2
    soft = (em_r == 1.0) | (f1_r >= SOFT_F1) | ((yn[rp] == yn[rg]) & (yn[rp] != 0))
    open_ = np.flatnonzero(~soft)
    if len(open_):
        need = _unique(np.concatenate([pu[open_], gu[open_]]))
        num = np.full(nu, np.nan)
        num[need] = _numbers(uniq, need)
        soft[open_] = _isclose(num[pu[open_]], num[gu[open_]])
    out = {}
    for name, vals in zip(ANSWER_SCORES, (em_s, f1_s, em_r, f1_r, soft.astype(np.float64)),
                          strict=True):  # fmt: skip
        best = np.zeros(m)
        np.maximum.at(best, e_rows, vals)
        out[name] = best
    return out


def _evidence(inp: ScoreInputs, scored: np.ndarray, parse: np.ndarray) -> dict[str, Any]:
    """Evidence counts and scores of every row (cited ids of parse rows count as none)."""
    n = inp.n
    c_len, c_flat = _lists(inp.cited_ids)
    g_len, g_flat = _lists(inp.gold_ids)
    c_row, g_row = _row_of(c_len), _row_of(g_len)
    c_pos = np.arange(len(c_row), dtype=np.int64) - np.repeat(np.cumsum(c_len) - c_len, c_len)
    codes, ids = _codes(pa.concat_arrays([c_flat, g_flat]))
    v = np.int64(max(len(ids), 1))
    use_c = (scored & ~parse)[c_row]
    c_key = c_row * v + codes[: len(c_row)]
    g_key = _unique(g_row * v + codes[len(c_row) :])
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
    if inp.cited_titles is not None:
        tg = _title_grounding(inp, n, v, c_key, c_row, c_pos, use_c, c_set, hit_mask, n_c)
    none = n_g == 0
    out = {
        "ev_precision": precision, "ev_recall": recall, "ev_f1": f1,
        "citation_grounding": (hit > 0).astype(np.float64), "title_grounding": tg,
    }  # fmt: skip
    for k in EVIDENCE_SCORES:
        out[k] = np.where(none, np.nan, out[k])
    return {**out, "n_cited": n_c, "n_gold": n_g, "hit": hit}


def _title_grounding(
    inp: ScoreInputs, n: int, v: np.int64, c_key: np.ndarray, c_row: np.ndarray,
    c_pos: np.ndarray, use_c: np.ndarray, c_set: np.ndarray, hit_mask: np.ndarray,
    n_c: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Fraction of distinct cited ids whose title (the last given for the id) is gold.

    Gold support titles: ``gold_titles`` when given, else the titles of the gold ids.
    """
    t_len, t_flat = _lists(inp.cited_titles)
    gt_len, gt_flat = _lists(inp.gold_titles) if inp.gold_titles is not None else (None, None)
    flats = [t_flat] if gt_flat is None else [t_flat, gt_flat]
    t_codes, titles = _codes(pa.concat_arrays(flats))
    w = np.int64(max(len(titles), 1))
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
    if gt_flat is not None:
        gt_codes = t_codes[len(t_flat) :]
        ok = gt_codes >= 0
        support = _unique(_row_of(gt_len)[ok] * w + gt_codes[ok])
    else:
        sel = _member(keys, c_set[hit_mask]) & (title >= 0)
        support = _unique(rows[sel] * w + title[sel])
    good = (title >= 0) & _member(rows * w + np.maximum(title, 0), support)
    count = np.bincount(rows[good], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_c > 0, count / np.maximum(n_c, 1), 0.0)


def score_inputs(
    inp: ScoreInputs, correct_field: str = "em_strict", confidence_against: str = "soft_correct"
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every score of every row, as :func:`core.scoring.score_frame` defines them.

    Returns:
        ``({score column: float64 array}, label_code)`` where ``label_code`` indexes
        :data:`LABEL_CODES` (-1: no failure label).
    """
    scored = ~inp.error
    out = {k: np.where(scored, 0.0, np.nan) for k in ANSWER_SCORES}
    answered = np.flatnonzero(scored & ~inp.parse)
    if len(answered):
        for k, vals in _answer_scores(inp, answered).items():
            out[k][answered] = vals
    ev = _evidence(inp, scored, inp.parse)
    for k in EVIDENCE_SCORES:
        out[k] = np.where(scored, ev[k], np.nan)
    conf = np.where(scored, inp.confidence, np.nan)
    with np.errstate(invalid="ignore"):
        out["confidence_error"] = np.abs(np.clip(conf, 0.0, 1.0) - out[confidence_against])
    n_c, n_g, hit = ev["n_cited"], ev["n_gold"], ev["hit"]
    missing = hit < n_g
    multi_types = pa.array(sorted(MULTI_EVIDENCE_REASONING))
    multi = _np(pc.fill_null(pc.is_in(inp.reasoning_type, multi_types), False))
    label = np.select(
        [inp.parse, out[correct_field] >= 1.0, n_c == 0, hit == 0, missing & multi,
         n_c > hit, ~missing],
        [_PARSE, _SUCC, _LOC, _SEL, _INT, _SEL, _CONV],
        _INT,
    )  # fmt: skip
    label = np.where(scored & inp.labeled, label, -1)
    return out, label
