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
- :mod:`core.dolce.pipeline`: :func:`fit_dolce`, the whole pipeline.
"""

from __future__ import annotations

from core.dolce.categories import (
    CATEGORIES,
    CATEGORY_NAMES,
    Thresholds,
    assign_category,
    candidate_grid,
    category_distribution,
    default_thresholds,
)
from core.dolce.closed_forms import (
    cover_probability_cow,
    cover_probability_cow_vec,
    partial_point_density_pig,
    partial_point_density_pig_vec,
    partial_point_distribution_pig,
    partial_point_mode_pig,
    partial_point_probability_pig,
    partial_point_probability_pig_vec,
)
from core.dolce.em import COW_STEPS, PIG_STEPS, fit_cow, fit_pig
from core.dolce.outcomes import IDK, code_outcomes, dip_scenario, is_idk, outcomes_from_probes
from core.dolce.pipeline import DolceFit, fit_dolce, mixture_curve

__all__ = [
    "CATEGORIES",
    "CATEGORY_NAMES",
    "COW_STEPS",
    "DolceFit",
    "IDK",
    "PIG_STEPS",
    "Thresholds",
    "assign_category",
    "candidate_grid",
    "category_distribution",
    "code_outcomes",
    "cover_probability_cow",
    "cover_probability_cow_vec",
    "default_thresholds",
    "dip_scenario",
    "fit_cow",
    "fit_dolce",
    "fit_pig",
    "is_idk",
    "mixture_curve",
    "outcomes_from_probes",
    "partial_point_density_pig",
    "partial_point_density_pig_vec",
    "partial_point_distribution_pig",
    "partial_point_mode_pig",
    "partial_point_probability_pig",
    "partial_point_probability_pig_vec",
]
