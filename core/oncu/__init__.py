"""ONCU: metrics, length-position scaling, shared page frames, CIs, the planner.

One concept per module:

- :mod:`core.oncu.cells`: ONCU and sample-level means of stored runs from cell aggregates read in
  the store (study scale);
- :mod:`core.oncu.cis`: bootstrap CIs of the sample-level means
  (:func:`core.oncu.metrics.sample_level_means`);
- :mod:`core.oncu.conditions`: the four evidence conditions as planned model calls (SPEC §6.1;
- :mod:`core.oncu.groups`: ONCU's groups: the group key, length buckets and the length grid, per-
  group ONCU, group sizes;
- :mod:`core.oncu.metrics`: oracle-referenced normalized context utilization (ONCU, seed 000 §3.3,
  §4.4;
- :mod:`core.oncu.scaling`: length-position scaling statistics of ONCU (SPEC §6.7;
- :mod:`core.oncu.share`: one computation per shared page frame (issue 17 item 6).

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("add_mean_cis", "add_multinomial_cis"),
        "cis",
    ),
    **dict.fromkeys(
        ("MEAN_SCORES", "store_oncu_summary", "store_sample_means"),
        "cells",
    ),
    **dict.fromkeys(
        (
            "AUDIT_METRICS",
            "RetrievalAudit",
            "check_conditions",
            "plan_conditions",
            "planned_keys",
            "retrieval_audit",
            "retrieval_config",
        ),
        "conditions",
    ),
    **dict.fromkeys(
        (
            "BUCKET_LENGTH",
            "DEFAULT_GROUP_KEY",
            "EARLY_DECILES",
            "EXACT_LENGTH",
            "FINAL_DECILE",
            "GRID_MAX_VALUES",
            "INVALID_REASONS",
            "LENGTH_BOUNDARIES",
            "LENGTH_LADDER",
            "LENGTH_RULE",
            "ONCU_CONDITIONS",
            "PER_INSTANCE_KEY",
            "PUBLISHED_SCALING_TERMS",
            "SCALING_CONTRASTS",
            "SCALING_DEFINITIONS",
            "SCALING_DISTANCES",
            "SCALING_LONG",
            "SCALING_SHORT",
            "SCALING_TERMS",
            "SCORE_FIELDS",
            "SIZE_BINS",
            "SMALL_GROUP",
            "UNIT_KEYS",
            "canonical_groups",
            "coarser_group_key",
            "condition_contrast",
            "failure_breakdown",
            "group_size_distribution",
            "length_bucket",
            "length_label",
            "on_length_grid",
            "oncu_groups",
            "oncu_summary",
            "position_fraction",
            "resolve_length_cell",
            "sample_level_means",
            "scaling_by_length",
            "scaling_cells",
            "scaling_contrasts",
            "scaling_length_wide",
            "scaling_regression",
            "scaling_report",
            "share_frame",
            "summary_frame",
        ),
        "metrics",
    ),
    **dict.fromkeys(
        ("CONTRAST_COLUMNS", "REGRESSION_COLUMNS"),
        "scaling",
    ),
    **dict.fromkeys(
        (
            "SHARED",
            "cell_ids",
            "error_mask",
            "frame_memo",
            "is_error",
            "isnan",
            "paired_columns",
            "scoped_memo",
        ),
        "share",
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
