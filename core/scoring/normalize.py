"""Answer normalization and the score vocabulary (SPEC §6.2-6.4), shared by both scorers.

The published normalizations (strict, relaxed with its synthetic-suffix rule), number parsing
and the yes/no words, with the score column names and failure labels. :mod:`core.scoring` (the
per-row reference functions and :func:`core.scoring.rows.score_frame`) and
:mod:`core.scoring.vector` (the same scores over whole columns) both build on this module.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from typing import Any

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
    "SOFT_F1",
    "YES_WORDS",
    "canonical_yes_no",
    "keeps_synthetic_suffix",
    "list_cell",
    "normalize_relaxed",
    "normalize_strict",
    "parse_number",
    "relaxed_tokens",
    "strict_tokens",
    "truthy_cell",
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
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.[0-9]+)?|[+-]?\.[0-9]+")
#: Relaxed token F1 at or above which an answer is soft-correct (CUE-R App. B).
SOFT_F1 = 0.8


# --------------------------------------------------------------------------------------------
# Normalization


def normalize_strict(s: str) -> str:
    r"""Strict normalization, as published (SQuAD's ``normalize_answer``).

    Lowercase; remove every character of ``string.punctuation``; replace the articles matched by
    ``\b(a|an|the)\b`` with a space; collapse whitespace. Example: ``"The Eiffel-Tower!"`` ->
    ``"eiffeltower"``.
    """
    return " ".join(strict_tokens(s or ""))


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
    return " ".join(relaxed_tokens(s or "", keeps_synthetic_suffix(answer_type, reasoning_type)))


def strict_tokens(s: str) -> tuple[str, ...]:
    """The strict normalizer's tokens: lower case, punctuation dropped, articles removed."""
    return tuple(_ARTICLES_RE.sub(" ", s.lower().translate(_STRICT_DROP)).split())


def _drop_combining(m: re.Match[str]) -> str:
    return "".join(c for c in m.group() if not unicodedata.combining(c))


def relaxed_tokens(s: str, keep_suffix: bool) -> tuple[str, ...]:
    """The relaxed normalizer's tokens (accents folded; ``keep_suffix``: synthetic ids kept)."""
    # NFKD, then drop the combining marks (no ASCII character is one: only the non-ASCII
    # runs are looked at, character by character)
    folded = _NON_ASCII_RUN.sub(_drop_combining, unicodedata.normalize("NFKD", s))
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


# Input conventions of the scoring frame (shared by the per-row and the column scorer).


def list_cell(x: Any) -> list:
    """A list cell as a list: None/NA/NaN/"" -> [], a string -> [it]."""
    if x is None or x is pd.NA:
        return []
    if isinstance(x, str):
        return [x] if x else []
    if isinstance(x, float) and math.isnan(x):
        return []
    return list(x)


def truthy_cell(x: Any) -> bool:
    """True for a non-empty error string (or a true bool); False for None/NaN/empty."""
    if x is None or x is pd.NA:
        return False
    if isinstance(x, str):
        return bool(x.strip())
    if isinstance(x, float):
        return not math.isnan(x) and bool(x)
    return bool(x)
