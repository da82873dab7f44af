"""CUE-R: the interventions planner, per-instance effects, operator coverage.

One concept per module:

- :mod:`core.cuer.coverage`: where a planned CUE-R operator could not apply: counted beside its rows
  (issue 34 item 3);
- :mod:`core.cuer.evidence`: what an intervention acts on: a base call's evidence items, the target,
  replacement passages;
- :mod:`core.cuer.interventions`: CUE-R interventions as planned model calls (SPEC §7;
- :mod:`core.cuer.metrics`: CUE-R: multi-axis utility, trace divergence, evidence roles and synergy
  (SPEC §7;
- :mod:`core.cuer.pairs`: CUE-R's per-instance pairs: each intervened call beside its original, with
  the axes' deltas;
- :mod:`core.cuer.signals`: CUE-R's per-pair signals: the axes and their deltas, answer change,
  trace divergence, roles.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("NOT_APPLICABLE_HELP", "with_not_applicable"),
        "coverage",
    ),
    **dict.fromkeys(
        (
            "BASE_TOP_K",
            "DUPLICATE_POSITION",
            "DUPLICATE_POSITIONS",
            "DUPLICATE_POSITIONS_PARAM",
            "EPS",
            "EvidenceItem",
            "MOVE_TO",
            "OPERATORS",
            "OPERATORS_PARAM",
            "OPERATOR_PARAMS",
            "PLANNER_VERSION",
            "PLAN_OPERATORS",
            "REPLACE_HARDNESS",
            "REPLACE_HARDNESS_PARAM",
            "REPLACE_LEVEL",
            "REPLACE_SEED",
            "REPORT_PARAMS",
            "RUN_PARAMS",
            "TARGET_RULES",
            "TAU",
            "TWO_SUPPORT",
            "TWO_SUPPORT_PARTS",
            "Target",
            "ZERO_RETRIEVAL",
            "check_plan_options",
            "evidence_items",
            "format_variant",
            "parse_variant",
            "perturb",
            "plan_interventions",
            "plan_rerun",
            "plan_settings",
            "replacement_candidates",
            "select_target",
            "shown_passage_ids",
        ),
        "interventions",
    ),
    **dict.fromkeys(
        (
            "AXES",
            "CORRECTNESS_AXIS",
            "CORRECTNESS_SCORES",
            "CuerResult",
            "DEFAULT_EPS",
            "DEFAULT_TAU",
            "METRICS",
            "OPERATOR_ORDER",
            "PRIMARY_ROLE_ORDER",
            "PROFILE_METRICS",
            "ROLES",
            "ROLE_FLAGS",
            "answer_changed",
            "evidence_role",
            "intervention_pairs",
            "intervention_report",
            "jaccard_distance",
            "jaccard_similarity",
            "load_pairs",
            "paired_deltas",
            "primary_role",
            "role_combinations",
            "role_counts",
            "role_flags",
            "synergy",
            "trace_divergence",
            "utility_profile",
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
