"""Context attribution (ContextCite): planner, surrogate, reports.

One concept per module:

- :mod:`core.attribution.lasso`: the attribution surrogate's fit: Lasso by coordinate descent, alpha
  cross-validated;
- :mod:`core.attribution.metrics`: context attribution: the sparse linear surrogate of an
  attribution run (issue 40 item 3);
- :mod:`core.attribution.plan`: attribution runs as planned model calls: random ablations of the
  shown passages (issue 40);
- :mod:`core.attribution.report`: analyses of attribution runs (issue 40 item 4): per passage, per
  instance, per run.

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
            "Ablations",
            "BOOTSTRAP",
            "BOOT_SEED",
            "CV_FOLDS",
            "GROUPS",
            "LDS_LOW",
            "LOGPROB_UNSUPPORTED",
            "N_ALPHAS",
            "REPORT_PARAMS",
            "SCORE_FIELD",
            "Surrogate",
            "ablation_tables",
            "fit_surrogate",
            "fit_surrogates",
            "lasso",
            "lasso_path_cv",
            "plan_drops",
            "ranked_passages",
            "retention",
            "spearman",
        ),
        "metrics",
    ),
    **dict.fromkeys(
        (
            "ABLATIONS",
            "ATTRIBUTION_CONDITIONS",
            "CONDITION",
            "FULL",
            "INSTANCES",
            "KEEP",
            "MASK_SEED",
            "RETRIEVED_TOP_K",
            "RUN_PARAMS",
            "TARGET",
            "TARGETS",
            "TOPK_DROPS",
            "ablation_masks",
            "ablation_variant",
            "attribution_settings",
            "mask_text",
            "pick_instances",
            "plan_attribution",
            "plan_run",
            "plan_topk_drop",
            "run_config",
            "shown_evidence",
            "topk_variant",
        ),
        "plan",
    ),
    **dict.fromkeys(
        (
            "AttributionResult",
            "PASSAGE_COLUMNS",
            "analyze",
            "attribution_report",
            "cited_vs_causal",
            "cuer_agreement",
            "gold_reliance",
        ),
        "report",
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
