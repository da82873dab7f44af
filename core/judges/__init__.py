"""Judge runs: the papers' rubrics, the lexical judge, judge runs, agreement.

One concept per module:

- :mod:`core.judges.agreement`: agreement between judge runs of one rubric on the same items (issue
  20 item 4);
- :mod:`core.judges.lexical`: the embedded lexical judge: a deterministic, offline *baseline* for
  every rubric (issue 20);
- :mod:`core.judges.rubrics`: the papers' judge rubrics as fixed, versioned templates (issue 20);
- :mod:`core.judges.runs`: judge runs: a rubric (:mod:`core.judges`) applied by a judge backend, as
  a run (issue 20).

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("JUDGMENT_KEY", "judge_agreement"),
        "agreement",
    ),
    **dict.fromkeys(
        ("AC_CUTS", "CRUX_CUTS", "EVIDENCE_CUT", "LABEL", "LexicalJudge", "overlap", "tokens"),
        "lexical",
    ),
    **dict.fromkeys(
        (
            "AUTHTRACE_AC_SYSTEM",
            "AUTHTRACE_AC_USER",
            "AUTHTRACE_EP_USER",
            "AUTHTRACE_ER_USER",
            "AUTHTRACE_EVIDENCE_SYSTEM",
            "MAX_SEGMENTS",
            "RUBRICS",
            "Rubric",
            "SEGMENT_MAX",
            "SEGMENT_MIN",
            "SEGMENT_TARGET",
            "ac_from_score",
            "authtrace_messages",
            "canonical_segments",
            "count_tokens",
            "get_rubric",
            "parse_binary",
            "parse_crux",
            "parse_score03",
        ),
        "rubrics",
    ),
    **dict.fromkeys(
        (
            "DERIVED_SQ",
            "JudgeSummary",
            "JudgmentWork",
            "PlannedJudgment",
            "answerability_pairs",
            "default_conditions",
            "judge_config",
            "judgment_row",
            "make_judge",
            "plan_judgments",
            "run_judge",
        ),
        "runs",
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
