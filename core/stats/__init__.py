"""Statistics shared by every method, and agreement between raters.

One concept per module:

- :mod:`core.stats.agreement`: agreement between raters: Cohen's κ, Fleiss' κ, Krippendorff's α,
  confusion matrices;
- :mod:`core.stats.inference`: statistics shared by every method (SPEC §6.6), vectorized with numpy.

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
            "LEVELS",
            "LabelAgreement",
            "PairAgreement",
            "UndefinedAgreement",
            "WEIGHTS",
            "cohen_kappa",
            "confusion_matrix",
            "fleiss_kappa",
            "krippendorff_alpha",
            "label_agreement",
            "pair_agreement",
        ),
        "agreement",
    ),
    **dict.fromkeys(
        (
            "BINS",
            "CI_METHODS",
            "MAX_CATEGORIES",
            "OLS_P_TESTS",
            "P_TESTS",
            "RESAMPLE_MAX",
            "benjamini_hochberg",
            "bootstrap_mean_ci",
            "bootstrap_means",
            "bootstrap_percentiles",
            "calibration",
            "canonical_order",
            "canonical_rows",
            "ci_method",
            "format_p",
            "holm",
            "mcnemar_exact",
            "multinomial_counts",
            "multinomial_means",
            "normal_p",
            "ols",
            "p_label",
            "paired_contrast",
            "percentiles",
        ),
        "inference",
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
