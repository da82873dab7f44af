"""Fan-in: degradation with the number of passages, its statistics, judged scores.

One concept per module:

- :mod:`core.fanin.cells`: cell statistics of the fan-in tables: counts, means and bootstrap
  CIs per system and fan-in levels;
- :mod:`core.fanin.judged`: authTrace's judged AC / ER / EP beside the fan-in proxies (issue 20 item
  2;
- :mod:`core.fanin.measures`: fan-in's per-item measures: fan-in, buckets, evidence recall and
  precision, per-instance rows;
- :mod:`core.fanin.metrics`: fan-in degradation of answer quality and evidence packs (AuthTrace,
  seed 003;
- :mod:`core.fanin.stats`: cell summaries of the fan-in analysis and the bootstrap over them (issue
  17 items 6, 7).

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
            "JudgedFanin",
            "fanin_from_judged",
            "fanin_judged",
            "judged_rows",
            "judged_values",
            "require_judged",
        ),
        "judged",
    ),
    **dict.fromkeys(
        (
            "BUCKETS",
            "FAILURE_AC",
            "FaninResult",
            "LOW_ER",
            "PACK_CONDITIONS",
            "R_CONDITIONS",
            "R_LEFT_OUT",
            "answer_correctness",
            "correlation_note",
            "crossover",
            "evidence_pack",
            "evidence_precision",
            "evidence_recall",
            "fan_in",
            "fan_in_bucket",
            "fanin_analysis",
            "fanin_from_summaries",
            "fanin_report",
            "fanin_store",
            "jaccard",
            "pearson",
            "per_instance",
            "relative_degradation",
        ),
        "metrics",
    ),
    **dict.fromkeys(
        (
            "BINS",
            "FaninSummaries",
            "METRIC_SCALE",
            "STRATA",
            "StoreSummaries",
            "item_bins",
            "merge_items",
            "merged_items",
            "pair_counts",
            "summaries_from_rows",
            "summary_bootstrap",
        ),
        "stats",
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
