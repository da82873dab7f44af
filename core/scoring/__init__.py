"""Scoring replies: parsing, normalizations, score rows, vectorized scores.

One concept per module:

- :mod:`core.scoring.inputs`: the vectorized scorer's inputs: score columns read from a frame or
  from Arrow, coded;
- :mod:`core.scoring.normalize`: answer normalization and the score vocabulary (SPEC §6.2-6.4),
  shared by both scorers;
- :mod:`core.scoring.parsing`: replies read into the answer contract as the ONCU protocol reads them
  (SPEC §5.1);
- :mod:`core.scoring.reparse`: stored replies read again by the current parser, before a re-score
  (issue 34 item 1);
- :mod:`core.scoring.rows`: per-prediction scores and failure labels (SPEC §6.2-6.4);
- :mod:`core.scoring.vector`: per-prediction scores over whole columns: the scores of
  :mod:`core.scoring`, vectorized.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("SOFT_F1", "list_cell", "relaxed_tokens", "strict_tokens", "truthy_cell"),
        "normalize",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_MAX_CITED",
            "INTERNAL_ERROR",
            "MAX_CANDIDATES",
            "MAX_CITED",
            "ParsedAnswer",
            "REASONING_UNCLOSED",
            "parse_reply",
            "run_max_cited",
            "split_reasoning",
        ),
        "parsing",
    ),
    **dict.fromkeys(
        ("ReparseSummary", "reparse_runs"),
        "reparse",
    ),
    **dict.fromkeys(
        (
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
        ),
        "rows",
    ),
    **dict.fromkeys(
        (
            "AnswerForms",
            "EvidenceCodes",
            "LABEL_CODES",
            "ScoreInputs",
            "inputs_from_arrow",
            "inputs_from_frame",
            "score_inputs",
            "score_table",
        ),
        "vector",
    ),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
