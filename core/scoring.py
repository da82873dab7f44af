"""Per-prediction scores and failure labels (SPEC §6.2-6.4).

Pure functions over strings and id sets, plus :func:`score_frame`, which scores a whole
predictions-joined-with-instances DataFrame at once (normalization cached per unique string,
no per-row pandas overhead).

Conventions:

* Answer scores take the max over the gold answer and its aliases, each score separately.
* A parse error is scored: every answer score is 0 and the prediction stays in every
  denominator (seed 000 §8.1). Its citations are treated as empty.
* A failed call (non-empty ``error`` column in :func:`score_frame`: the backend never gave a
  reply) is not an answer: every score is NaN and it has no failure label, so aggregates
  count it as missing (and show how many are missing beside n); a rerun makes the call again.
* Evidence scores are NaN when the instance has no gold evidence ids: precision, recall, F1 and
  grounding of citations against an empty gold set measure nothing (BABILong-style instances).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "ANSWER_SCORES",
    "CONTEXTUAL_CONDITIONS",
    "EVIDENCE_SCORES",
    "FAILURE_LABELS",
    "MULTI_EVIDENCE_REASONING",
    "NO_WORDS",
    "NUMBER_WORDS",
    "SCORE_COLUMNS",
    "YES_WORDS",
    "canonical_yes_no",
    "confidence_error",
    "evidence_scores",
    "exact_match",
    "failure_label",
    "keeps_synthetic_suffix",
    "normalize_relaxed",
    "normalize_strict",
    "parse_number",
    "score_answer",
    "score_frame",
    "soft_correct",
    "token_f1",
]

#: Answer score columns, in table order.
ANSWER_SCORES = ("em_strict", "f1_strict", "em_relaxed", "f1_relaxed", "soft_correct")
#: Evidence score columns, in table order.
EVIDENCE_SCORES = ("ev_precision", "ev_recall", "ev_f1", "citation_grounding", "title_grounding")
#: Every column :func:`score_frame` returns, in order.
SCORE_COLUMNS = ANSWER_SCORES + EVIDENCE_SCORES + ("confidence_error", "failure_label")

#: Failure taxonomy labels (seed 000 App. A.5), in the order of its tables.
FAILURE_LABELS = ("localization", "selection", "integration", "conversion", "success", "parse")
#: Reasoning types that need more than one gold passage: missing gold -> ``integration``.
MULTI_EVIDENCE_REASONING = frozenset({"multi_hop", "comparison", "arithmetic", "contradiction"})
#: Conditions whose predictions get a failure label (all but ``no_evidence``).
CONTEXTUAL_CONDITIONS = ("full_context", "retrieved", "oracle", "intervention")

#: Relaxed-normalized answers that canonicalize to "yes" (soft correctness).
YES_WORDS = frozenset({"yes", "y", "true", "correct", "right", "yeah", "yep", "affirmative"})
#: Relaxed-normalized answers that canonicalize to "no" (soft correctness).
NO_WORDS = frozenset({"no", "n", "false", "incorrect", "wrong", "nope", "negative"})
#: Number words :func:`parse_number` reads (whole answer only, e.g. "three" == "3").
NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}

_STRICT_DROP = str.maketrans("", "", string.punctuation)
# Relaxed, as published: only Unicode punctuation (category P*) becomes a space. Of the ASCII
# characters that are the punctuation of string.punctuation; the ASCII symbols $ + < = > ^ ` | ~
# (category S*) are kept, so relaxed can be stricter than strict on symbol answers ("$100" vs
# "100": strict drops the "$", relaxed keeps it), which is the published scorer's behaviour.
_ASCII_PUNCT_TO_SPACE = str.maketrans(
    {c: " " for c in string.punctuation if unicodedata.category(c)[0] == "P"}
)
# Articles are removed from the string with the published word-boundary regex (SQuAD's
# remove_articles), not only as whole whitespace tokens: "a+b" loses its "a".
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_SYNTHETIC_SUFFIX = re.compile(r"0[0-9]{2,}")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.[0-9]+)?|[+-]?\.[0-9]+")
_SOFT_F1 = 0.8


# --------------------------------------------------------------------------------------------
# Normalization


def normalize_strict(s: str) -> str:
    r"""Strict normalization, as published (SQuAD's ``normalize_answer``).

    Lowercase; remove every character of ``string.punctuation``; replace the articles matched by
    ``\b(a|an|the)\b`` with a space; collapse whitespace. Example: ``"The Eiffel-Tower!"`` ->
    ``"eiffeltower"``.
    """
    return " ".join(_strict_tokens(s or ""))


def keeps_synthetic_suffix(answer_type: str | None, reasoning_type: str | None) -> bool:
    """True when the synthetic-suffix rule is off: number answers and arithmetic reasoning."""
    return answer_type == "number" or reasoning_type == "arithmetic"


def normalize_relaxed(
    s: str, answer_type: str | None = None, reasoning_type: str | None = None
) -> str:
    r"""Relaxed normalization; returns the tokens joined by one space.

    As published (seed oncu_four_condition_protocol and its released scorer): NFKD + drop
    combining marks (accents); lowercase; ``-`` and ``_`` -> space; every Unicode punctuation
    character (category ``P*``) -> space; replace the articles matched by ``\b(a|an|the)\b``
    with a space; split on whitespace; unless ``answer_type == "number"`` or
    ``reasoning_type == "arithmetic"``, repeatedly drop a trailing token matching
    ``^0\d{2,}$`` (the synthetic entity suffix: ``"Model Alpha 00654"`` -> ``"model alpha"``).
    Symbols (category ``S*``: ``$ + < = > ^ ` | ~``, ``°``, ``€`` ...) are kept, so relaxed
    can be stricter than strict on symbol answers (``"$100"`` vs ``"100"``), as published.

    Args:
        s: the answer text.
        answer_type: the instance's answer type.
        reasoning_type: the instance's reasoning type.
    """
    return " ".join(_relaxed_tokens(s or "", keeps_synthetic_suffix(answer_type, reasoning_type)))


def _strict_tokens(s: str) -> tuple[str, ...]:
    return tuple(_ARTICLES_RE.sub(" ", s.lower().translate(_STRICT_DROP)).split())


def _relaxed_tokens(s: str, keep_suffix: bool) -> tuple[str, ...]:
    folded = "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))
    # "-" and "_" are P* (Pd, Pc), so the table turns them into spaces with the rest.
    folded = folded.lower().translate(_ASCII_PUNCT_TO_SPACE)
    if not folded.isascii():
        folded = "".join(" " if unicodedata.category(c)[0] == "P" else c for c in folded)
    tokens = _ARTICLES_RE.sub(" ", folded).split()
    if not keep_suffix:
        while tokens and _SYNTHETIC_SUFFIX.fullmatch(tokens[-1]):
            tokens.pop()
    return tuple(tokens)


def canonical_yes_no(s: str) -> str | None:
    """``"yes"`` / ``"no"`` when the relaxed-normalized answer is in YES_WORDS / NO_WORDS."""
    norm = normalize_relaxed(s)
    if norm in YES_WORDS:
        return "yes"
    if norm in NO_WORDS:
        return "no"
    return None


def parse_number(s: str) -> float | None:
    """The number an answer states, or None.

    Accepted (after stripping whitespace and one trailing period): an optionally signed decimal
    with optional comma thousands separators (``"1,000"``, ``"-84.0"``, ``".5"``), or one of
    ``NUMBER_WORDS`` (``"three"``). Anything else (units, ranges, years in text) is not a number.
    """
    t = (s or "").strip()
    if t.endswith(".") and len(t) > 1:
        t = t[:-1].strip()
    if _NUMBER.fullmatch(t):
        return float(t.replace(",", ""))
    return NUMBER_WORDS.get(t.lower())


# --------------------------------------------------------------------------------------------
# Answer scores


def _f1(pred: Sequence[str], gold: Sequence[str]) -> float:
    """SQuAD multiset-overlap F1; both empty -> 1, one empty -> 0."""
    if not pred or not gold:
        return float(not pred and not gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _tokens(s: str, relaxed: bool, answer_type: str | None, reasoning_type: str | None):
    if relaxed:
        return _relaxed_tokens(s or "", keeps_synthetic_suffix(answer_type, reasoning_type))
    return _strict_tokens(s or "")


def exact_match(
    prediction: str,
    gold: str,
    *,
    relaxed: bool = False,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> float:
    """1.0 when the normalized strings are equal (strict, or relaxed with ``relaxed=True``)."""
    p = _tokens(prediction, relaxed, answer_type, reasoning_type)
    return float(p == _tokens(gold, relaxed, answer_type, reasoning_type))


def token_f1(
    prediction: str,
    gold: str,
    *,
    relaxed: bool = False,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> float:
    """SQuAD token F1 over normalized tokens; both empty -> 1, one empty -> 0."""
    p = _tokens(prediction, relaxed, answer_type, reasoning_type)
    return _f1(p, _tokens(gold, relaxed, answer_type, reasoning_type))


def _same_number(a: str, b: str) -> bool:
    x, y = parse_number(a), parse_number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)


def soft_correct(
    prediction: str,
    gold: str,
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> float:
    """Soft correctness (CUE-R App. B): 1.0 if any of the four rules holds, else 0.0.

    Rules: relaxed-normalized strings equal; both canonicalize to the same yes/no
    (:func:`canonical_yes_no`); both parse to the same number (:func:`parse_number`);
    relaxed token F1 >= 0.8.
    """
    p = _tokens(prediction, True, answer_type, reasoning_type)
    g = _tokens(gold, True, answer_type, reasoning_type)
    return _soft(prediction, gold, p, g, _f1(p, g))


def _soft(pred: str, gold: str, p: tuple[str, ...], g: tuple[str, ...], f1: float) -> float:
    if p == g or f1 >= _SOFT_F1:
        return 1.0
    pj, gj = " ".join(p), " ".join(g)
    if (pj in YES_WORDS and gj in YES_WORDS) or (pj in NO_WORDS and gj in NO_WORDS):
        return 1.0
    return float(_same_number(pred, gold))


def score_answer(
    prediction: str | None,
    golds: Sequence[str],
    answer_type: str | None = None,
    reasoning_type: str | None = None,
) -> dict[str, float]:
    """Every answer score of one prediction, each the max over ``golds`` (gold + aliases).

    Args:
        prediction: the model's answer (None is scored as the empty answer).
        golds: gold answer followed by its aliases.
        answer_type: instance answer type (switches the synthetic-suffix rule).
        reasoning_type: instance reasoning type (switches the synthetic-suffix rule).

    Returns:
        ``{em_strict, f1_strict, em_relaxed, f1_relaxed, soft_correct}``.
    """
    keep = keeps_synthetic_suffix(answer_type, reasoning_type)
    return _score_answer(prediction or "", tuple(golds), keep, {}, {})


def _score_answer(
    pred: str, golds: tuple[str, ...], keep: bool, strict_cache: dict, relaxed_cache: dict
) -> dict[str, float]:
    def st(s: str) -> tuple[str, ...]:
        t = strict_cache.get(s)
        if t is None:
            t = strict_cache[s] = _strict_tokens(s)
        return t

    def rt(s: str) -> tuple[str, ...]:
        key = (s, keep)
        t = relaxed_cache.get(key)
        if t is None:
            t = relaxed_cache[key] = _relaxed_tokens(s, keep)
        return t

    ps, pr = st(pred), rt(pred)
    out = dict.fromkeys(ANSWER_SCORES, 0.0)
    for gold in golds:
        if gold is None:
            continue
        gs, gr = st(gold), rt(gold)
        f1r = _f1(pr, gr)
        scores = (
            float(ps == gs),
            _f1(ps, gs),
            float(pr == gr),
            f1r,
            _soft(pred, gold, pr, gr, f1r),
        )
        for k, v in zip(ANSWER_SCORES, scores, strict=True):
            if v > out[k]:
                out[k] = v
    return out


# --------------------------------------------------------------------------------------------
# Evidence scores and failure labels


def evidence_scores(
    cited: Iterable[str],
    gold: Iterable[str],
    titles: Mapping[str, str | None] | None = None,
    gold_titles: Iterable[str] | None = None,
) -> dict[str, float]:
    """Evidence scores over passage-id sets (SPEC §6.3).

    precision = |cited ∩ gold| / |cited| (0 if none cited); recall = |cited ∩ gold| / |gold|;
    F1 their harmonic mean (0 when both are 0); citation_grounding = 1 if any overlap;
    title_grounding (CUE-R eq. 11) = fraction of cited ids whose title is a gold support title
    (0 if none cited). Every score is NaN when ``gold`` is empty (nothing to score against);
    title_grounding is NaN when ``titles`` is None.

    Args:
        cited: ids the model cited (duplicates ignored).
        gold: gold evidence ids.
        titles: title of each passage id (at least the cited ones); unknown ids never match.
        gold_titles: gold support titles; by default the titles of the ``gold`` ids.
    """
    c, g = set(cited), set(gold)
    if not g:
        return dict.fromkeys(EVIDENCE_SCORES, math.nan)
    hit = len(c & g)
    precision = hit / len(c) if c else 0.0
    recall = hit / len(g)
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    if titles is None:
        tg = math.nan
    else:
        support = set(gold_titles) if gold_titles is not None else {titles.get(x) for x in g}
        support.discard(None)
        tg = sum(titles.get(x) in support for x in c) / len(c) if c else 0.0
    return {
        "ev_precision": precision,
        "ev_recall": recall,
        "ev_f1": f1,
        "citation_grounding": float(hit > 0),
        "title_grounding": tg,
    }


def failure_label(
    parse_error: bool,
    correct: bool,
    cited: Iterable[str],
    gold: Iterable[str],
    reasoning_type: str | None,
) -> str:
    """Failure taxonomy label of one contextual prediction (SPEC §6.4), first rule that fires.

    parse error -> ``parse``; correct -> ``success``; nothing cited -> ``localization``; no
    overlap with gold -> ``selection``; multi-evidence reasoning (``MULTI_EVIDENCE_REASONING``)
    with some gold missing -> ``integration``; extra non-gold cited -> ``selection``; all gold
    cited -> ``conversion``; otherwise (single-evidence type, some gold missing, nothing extra)
    ``integration``.
    """
    if parse_error:
        return "parse"
    if correct:
        return "success"
    c, g = set(cited), set(gold)
    if not c:
        return "localization"
    if not c & g:
        return "selection"
    missing = bool(g - c)
    if missing and reasoning_type in MULTI_EVIDENCE_REASONING:
        return "integration"
    if c - g:
        return "selection"
    if not missing:
        return "conversion"
    return "integration"


def confidence_error(confidence: float | None, correct: float) -> float:
    """|c - correct| with the confidence clamped to [0, 1] (CUE-R App. B); NaN when unknown."""
    if confidence is None or confidence is pd.NA:
        return math.nan
    c = float(confidence)
    if math.isnan(c) or correct is None or math.isnan(float(correct)):
        return math.nan
    return abs(min(max(c, 0.0), 1.0) - float(correct))


# --------------------------------------------------------------------------------------------
# Frame-level scoring


def _as_list(x: Any) -> list:
    if x is None or x is pd.NA:
        return []
    if isinstance(x, str):
        return [x] if x else []
    if isinstance(x, float) and math.isnan(x):
        return []
    return list(x)


def _flag(x: Any) -> bool:
    """True for a non-empty error string (or a true bool); False for None/NaN/empty."""
    if x is None or x is pd.NA:
        return False
    if isinstance(x, str):
        return bool(x.strip())
    if isinstance(x, float):
        return not math.isnan(x) and bool(x)
    return bool(x)


def _col(df: pd.DataFrame, name: str, default: Any = None) -> list:
    return df[name].tolist() if name in df.columns else [default] * len(df)


def score_frame(
    df: pd.DataFrame,
    correct_field: str = "em_strict",
    confidence_against: str = "soft_correct",
) -> pd.DataFrame:
    """Score every prediction of a predictions-joined-with-instances frame.

    Required columns: ``answer`` (str or None), ``gold_answer``, ``answer_aliases`` (list or
    None), ``answer_type``, ``reasoning_type``, ``cited_ids`` (list), ``gold_ids`` (list),
    ``parse_error`` (str or None/empty), ``condition``. Optional: ``confidence``, ``error``,
    ``cited_titles`` (title of each cited id, aligned with ``cited_ids``) and ``gold_titles``
    (list) for title grounding (NaN without them).

    Errors are not answers: a row whose ``error`` is set (the call failed: transport, server,
    prompt too long) gets NaN in every score and no failure label, so every aggregate treats
    it as missing. A parse error (the model answered, unparseably) scores 0 with the label
    ``parse`` and stays in every denominator (seed 000 §8.1).

    Args:
        df: the frame.
        correct_field: answer score that decides "correct" for the failure label (SPEC §6.4:
            strict EM).
        confidence_against: answer score the confidence error compares with.

    Returns:
        A frame aligned to ``df.index`` with ``SCORE_COLUMNS``. ``failure_label`` is None for
        ``no_evidence`` and for failed calls (whose scores are all NaN).
    """
    if correct_field not in ANSWER_SCORES:
        raise ValueError(f"correct_field '{correct_field}' is not one of {ANSWER_SCORES}")
    if confidence_against not in ANSWER_SCORES:
        raise ValueError(f"confidence_against '{confidence_against}' is not one of {ANSWER_SCORES}")
    missing = [
        c
        for c in ("answer", "gold_answer", "answer_type", "reasoning_type", "cited_ids",
                  "gold_ids", "condition")
        if c not in df.columns
    ]  # fmt: skip
    if missing:
        raise ValueError(f"score_frame: missing column(s) {missing}")
    n = len(df)
    strict_cache: dict = {}
    relaxed_cache: dict = {}
    answer_cache: dict = {}
    out = {k: np.full(n, np.nan) for k in ANSWER_SCORES + EVIDENCE_SCORES}
    out["confidence_error"] = np.full(n, np.nan)
    labels: list[str | None] = [None] * n
    has_titles = "cited_titles" in df.columns
    rows = zip(
        _col(df, "answer"),
        _col(df, "gold_answer"),
        _col(df, "answer_aliases"),
        _col(df, "answer_type"),
        _col(df, "reasoning_type"),
        _col(df, "cited_ids"),
        _col(df, "gold_ids"),
        _col(df, "parse_error"),
        _col(df, "error"),
        _col(df, "condition"),
        _col(df, "confidence"),
        _col(df, "cited_titles"),
        _col(df, "gold_titles"),
        strict=True,
    )
    for i, row in enumerate(rows):
        ans, gold, aliases, at, rtype, cited, gids, perr, err, cond, conf, ctit, gtit = row
        if _flag(err):
            continue  # a failed call: no answer to score (NaN scores, no label)
        is_parse = _flag(perr)
        golds = tuple(g for g in (gold, *_as_list(aliases)) if isinstance(g, str)) or ("",)
        if is_parse:
            answer = dict.fromkeys(ANSWER_SCORES, 0.0)
            cited_l: list = []
        else:
            pred = ans if isinstance(ans, str) else ""
            keep = keeps_synthetic_suffix(at, rtype)
            key = (pred, golds, keep)
            answer = answer_cache.get(key)
            if answer is None:
                answer = answer_cache[key] = _score_answer(
                    pred, golds, keep, strict_cache, relaxed_cache
                )
            cited_l = _as_list(cited)
        for k in ANSWER_SCORES:
            out[k][i] = answer[k]
        gold_l = _as_list(gids)
        titles = None
        if has_titles and not is_parse:
            titles = dict(zip(cited_l, _as_list(ctit), strict=False))
        elif has_titles:
            titles = {}
        ev = evidence_scores(
            cited_l, gold_l, titles, _as_list(gtit) if "gold_titles" in df.columns else None
        )
        for k in EVIDENCE_SCORES:
            out[k][i] = ev[k]
        if conf is not None and conf is not pd.NA:
            out["confidence_error"][i] = confidence_error(conf, answer[confidence_against])
        if str(cond).split("|", 1)[0] != "no_evidence":
            labels[i] = failure_label(
                is_parse, answer[correct_field] >= 1.0, cited_l, gold_l, rtype
            )
    result = pd.DataFrame(out, index=df.index)
    result["failure_label"] = pd.Series(labels, index=df.index, dtype=object)
    return result[list(SCORE_COLUMNS)]
