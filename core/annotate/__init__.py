"""Blind annotation: the sample, its CSV round trip, judged items as raters.

One concept per module:

- :mod:`core.annotate.judged`: the blind annotation round trip for judge rubrics: people rate what a
  judge rated (issue 20);
- :mod:`core.annotate.raters`: raters of an annotation sample: rule labels, annotators, judge runs;
- :mod:`core.annotate.roundtrip`: the blind annotation round trip: export a sample, import people's
  labels, report agreement.

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
            "JUDGE_PREFIX",
            "PASSAGE_RUBRIC",
            "SAMPLED_RUBRICS",
            "UNRATED",
            "judge_raters",
            "judged_pool",
            "judged_prompts",
            "rubric_labels",
        ),
        "judged",
    ),
    **dict.fromkeys(
        (
            "AMBIGUOUS",
            "CSV_COLUMNS",
            "DEFAULT_RUBRIC",
            "ExportSummary",
            "ImportSummary",
            "JUDGE_ITEM_COLUMN",
            "RUBRICS",
            "RULE_RATER",
            "RaterSource",
            "Rubric",
            "agreement_report",
            "allocate",
            "check_annotator",
            "export_sample",
            "import_labels",
            "item_id",
            "rater_labels",
            "register_rater_source",
        ),
        "roundtrip",
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
