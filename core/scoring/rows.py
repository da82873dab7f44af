"""Per-prediction scores and failure labels (SPEC §6.2-6.4).

Pure functions over strings and id sets (the reference definitions), plus
:func:`score_frame`, which scores a whole predictions-joined-with-instances DataFrame at once
with the column scorer of :mod:`core.scoring.vector` (each distinct string normalized once,
array operations for EM, F1, evidence and labels; equal to :func:`score_frame_rows`, the same
frame scored row by row, on every row and field), and :func:`score_arrow`, the same over Arrow
columns read from the store.

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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.scoring.normalize import (
    ANSWER_SCORES,
    CONTEXTUAL_CONDITIONS,
    EVIDENCE_SCORES,
    FAILURE_LABELS,
    MULTI_EVIDENCE_REASONING,
    NO_WORDS,
    NUMBER_WORDS,
    SCORE_COLUMNS,
    SOFT_F1,
    YES_WORDS,
    canonical_yes_no,
    keeps_synthetic_suffix,
    list_cell,
    normalize_relaxed,
    normalize_strict,
    parse_number,
    relaxed_tokens,
    strict_tokens,
    truthy_cell,
)
from core.scoring.vector import LABEL_CODES, inputs_from_arrow, inputs_from_frame, score_inputs

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
    "score_arrow",
    "score_frame",
    "score_frame_rows",
    "soft_correct",
    "stored_differs_by_column",
    "token_f1",
]

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
        return relaxed_tokens(s or "", keeps_synthetic_suffix(answer_type, reasoning_type))
    return strict_tokens(s or "")


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
    if p == g or f1 >= SOFT_F1:
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
            t = strict_cache[s] = strict_tokens(s)
        return t

    def rt(s: str) -> tuple[str, ...]:
        key = (s, keep)
        t = relaxed_cache.get(key)
        if t is None:
            t = relaxed_cache[key] = relaxed_tokens(s, keep)
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
    title_grounding is NaN when ``titles`` is None or no gold support title is known (an empty
    title is none: imported passages carry ``''``, which would make it equal precision).

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
        support = {t for t in support if t is not None and str(t).strip()}  # '' is no title
        if not support:  # gold passages without titles: nothing to ground against
            tg = math.nan
        else:
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
    _check_fields(correct_field, confidence_against)
    _check_columns(df)
    inputs = inputs_from_frame(df)
    if inputs is None:  # a value only the per-row functions read as published
        return score_frame_rows(df, correct_field, confidence_against)
    scores, label = score_inputs(inputs, correct_field, confidence_against)
    result = pd.DataFrame(scores, index=df.index)
    labels = np.array([*LABEL_CODES, None], dtype=object)[label]  # -1 -> None
    result["failure_label"] = pd.Series(labels, index=df.index, dtype=object)
    return result[list(SCORE_COLUMNS)]


def score_arrow(
    table: pa.Table | pa.RecordBatch,
    correct_field: str = "em_strict",
    confidence_against: str = "soft_correct",
) -> pa.Table:
    """:func:`score_frame` of the store's scoring columns as Arrow, without Python objects.

    ``table`` has the columns of :meth:`core.store.Store.scoring_frame`; the result has
    ``SCORE_COLUMNS`` (NaN as null), row for row.
    """
    _check_fields(correct_field, confidence_against)
    inputs = inputs_from_arrow(table)
    if inputs is None:
        frame = score_frame_rows(table.to_pandas(), correct_field, confidence_against)
        return pa.Table.from_pandas(frame, preserve_index=False)
    scores, label = score_inputs(inputs, correct_field, confidence_against)
    cols = {k: pa.array(v, from_pandas=True) for k, v in scores.items()}
    codes = pa.array(label, mask=label < 0)
    cols["failure_label"] = pa.array(LABEL_CODES, pa.string()).take(codes)
    return pa.table({k: cols[k] for k in SCORE_COLUMNS})


def stored_differs_by_column(scores: pa.Table, stored: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Per score column and row, whether ``scores`` differ from the stored ones.

    ``stored`` has ``stored_<column>`` for each score column, row for row (as
    :meth:`core.store.Store.scoring_batches` gives them with ``stored=True``); two values are
    the same when both are null or both equal. Shape ``(len(SCORE_COLUMNS), rows)``.
    """
    out = np.zeros((len(SCORE_COLUMNS), scores.num_rows), dtype=bool)
    for j, col in enumerate(SCORE_COLUMNS):
        new, old = scores.column(col), stored.column(f"stored_{col}")
        if new.type != old.type:
            new = new.cast(old.type)
        new_null = np.asarray(new.is_null(), dtype=bool)
        old_null = np.asarray(old.is_null(), dtype=bool)
        equal = np.asarray(pc.fill_null(pc.equal(new, old), False), dtype=bool)
        out[j] = ~(equal | (new_null & old_null))
    return out


def _check_fields(correct_field: str, confidence_against: str) -> None:
    if correct_field not in ANSWER_SCORES:
        raise ValueError(f"correct_field '{correct_field}' is not one of {ANSWER_SCORES}")
    if confidence_against not in ANSWER_SCORES:
        raise ValueError(f"confidence_against '{confidence_against}' is not one of {ANSWER_SCORES}")


def _check_columns(df: pd.DataFrame) -> None:
    missing = [
        c
        for c in (
            "answer",
            "gold_answer",
            "answer_type",
            "reasoning_type",
            "cited_ids",
            "gold_ids",
            "condition",
        )
        if c not in df.columns
    ]
    if missing:
        raise ValueError(f"score_frame: missing column(s) {missing}")


def score_frame_rows(
    df: pd.DataFrame,
    correct_field: str = "em_strict",
    confidence_against: str = "soft_correct",
) -> pd.DataFrame:
    """:func:`score_frame` computed row by row with the per-row functions: the reference.

    The definitions as published, one prediction at a time (answer scores cached per
    (prediction, golds) key); :func:`score_frame` must equal it on every row and field, and
    falls back to it for frames the column scorer cannot represent exactly.
    """
    _check_fields(correct_field, confidence_against)
    _check_columns(df)
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
        if truthy_cell(err):
            continue  # a failed call: no answer to score (NaN scores, no label)
        is_parse = truthy_cell(perr)
        golds = tuple(g for g in (gold, *list_cell(aliases)) if isinstance(g, str)) or ("",)
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
            cited_l = list_cell(cited)
        for k in ANSWER_SCORES:
            out[k][i] = answer[k]
        gold_l = list_cell(gids)
        titles = None
        if has_titles and not is_parse:
            titles = dict(zip(cited_l, list_cell(ctit), strict=False))
        elif has_titles:
            titles = {}
        ev = evidence_scores(
            cited_l, gold_l, titles, list_cell(gtit) if "gold_titles" in df.columns else None
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
