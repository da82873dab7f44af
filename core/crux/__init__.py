"""CRUX: coverage metrics, alpha-nDCG as ndeval computes it, answer coverage.

One concept per module:

- :mod:`core.crux.answerability`: CRUX answerability: required sub-questions, ratings from gold or a
  judge, the judge's prompt;
- :mod:`core.crux.answers`: CRUX on the generated answer: Cov(y), Den(y) and Kendall tau with the
  context metrics (issue 20);
- :mod:`core.crux.metrics`: retrieval-context coverage (CRUX, seed 002 §3;
- :mod:`core.crux.ndcg`: ranked coverage: alpha-nDCG computed as ndeval computes it (seed 002 eq.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        (
            "AnswerCoverage",
            "CONTEXT_METRICS",
            "answer_coverage",
            "answer_scores",
            "kendall_table",
            "ranking_metrics",
        ),
        "answers",
    ),
    **dict.fromkeys(
        (
            "ALPHA",
            "Answerability",
            "CruxResult",
            "ETA",
            "JUDGE_TEMPLATE",
            "JUDGE_TEMPLATE_VERSION",
            "K_REQUIRED",
            "METRICS",
            "W",
            "alpha_ndcg",
            "alpha_ndcg_topics",
            "answerability_from_gold",
            "answerability_from_ratings",
            "answerability_note",
            "context_pool",
            "context_scores",
            "coverage",
            "crux_evaluate",
            "crux_report",
            "density",
            "judge_messages",
            "parse_rating",
            "passage_tokens",
            "required_subset",
        ),
        "metrics",
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
