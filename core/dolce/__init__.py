"""DOLCE: complexity lambda and redundancy k of a problem from span-sampling probes (SPEC §8).

Seed ``dolce_lambda_k.txt``: §3 (the COW and PIG outcome models), App. A.1 (the COW cover
probability pi), App. B (the PIG partial-point probability rho-tilde and its interpolated,
``(lambda + 1)``-scaled density rho), App. C (Algorithms 1 and 2: EM with a task-level
non-parametric background-noise component and a problem-level hybrid oracle component) and the
focus categories I-V of Figure 1 with the thresholds of §4.

One concept per module:

- :mod:`core.dolce.closed_forms`: pi (COW) and rho-tilde / rho (PIG), their numerics and the
  conventions beyond the paper (lambda = 0, k = 0);
- :mod:`core.dolce.outcomes`: IDK detection, outcome coding, the dip test, stored probes;
- :mod:`core.dolce.categories`: candidate grid, thresholds and the categories I-V;
- :mod:`core.dolce.em`: Algorithms 1 and 2 (and the PIG identifiability caveat);
- :mod:`core.dolce.likelihood`: the PIG estimator that identifies lambda (the default);
- :mod:`core.dolce.params`: the declared knobs that live here (no heavy imports);
- :mod:`core.dolce.pipeline`: :func:`fit_dolce`, the whole pipeline;
- :mod:`core.dolce.probes`: the planner of the span-sampling probes and its knobs.

The names below are loaded on first use (PEP 562), so importing :mod:`core.dolce.params` (the
CLI does, on every call) does not load scipy.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
# a table, one row per line: the formatter would put each item on a line of its own
_WHERE = {
    **dict.fromkeys(
        ("CATEGORIES", "CATEGORY_NAMES", "NOT_COVERED", "Thresholds", "assign_category",
         "candidate_grid", "category_distribution", "default_thresholds"),
        "categories",
    ),
    **dict.fromkeys(
        ("cover_probability_cow", "cover_probability_cow_vec", "partial_point_density_pig",
         "partial_point_density_pig_vec", "partial_point_distribution_pig",
         "partial_point_mode_pig", "partial_point_probability_pig",
         "partial_point_probability_pig_vec"),
        "closed_forms",
    ),
    **dict.fromkeys(("COW_STEPS", "PIG_STEPS", "fit_cow", "fit_pig"), "em"),
    **dict.fromkeys(("PIG_TOLERANCE", "observation_probability"), "likelihood"),
    **dict.fromkeys(("PIG_ESTIMATOR", "PIG_ESTIMATORS"), "params"),
    **dict.fromkeys(("IDK", "code_outcomes", "dip_scenario", "is_idk", "outcomes_from_probes",
                     "task_scenarios"), "outcomes"),
    **dict.fromkeys(("DolceFit", "fit_dolce", "mixture_curve"), "pipeline"),
    **dict.fromkeys(("FIT_PARAMS", "K_P", "LAM_P", "LAM_Q", "MAX_SPANS", "PAPER_STEP",
                     "PARAMS", "PER_LENGTH", "PROBE_CONDITION", "SCENARIO", "SEED",
                     "STRATEGIES", "STRATEGY", "TASK_BY", "THRESHOLD", "UNITS",
                     "UNITS_PARAM", "Unit", "exponential_ladder", "paper_stride",
                     "parse_strategy", "parse_variant", "plan_line", "plan_probes",
                     "probe_variant", "render_span", "span_starts", "split_sentences",
                     "split_units", "summarize_plan"),
                    "probes"),
}  # fmt: skip

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
