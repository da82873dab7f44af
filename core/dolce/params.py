"""Declared DOLCE fit knobs that live with the method (imports nothing heavy).

The other fit knobs (thresholds, scenario, COW threshold, task column) are declared in
:mod:`core.dolce.probes` beside the probe knobs; the CLI builds its flags from both on every call,
so
this module must stay free of scipy and pandas (``core/dolce/__init__.py`` loads the method
modules lazily for the same reason).
"""

from __future__ import annotations

from core.params import Param

__all__ = [
    "LIKELIHOOD_STEPS",
    "PIG_ESTIMATOR",
    "PIG_ESTIMATORS",
    "PUBLISHED",
    "THRESHOLD_RULE",
]

#: The default lambda_p = k_p rule in words (help texts and tooltips;
#: :func:`core.dolce.categories.default_thresholds` computes it).
THRESHOLD_RULE = (
    "the first tertile of the N observed lengths other than 0 and L: the one at index "
    "floor(N/3) counted from 0 (the 1/3-quantile; 5 on the ladder 0, 1, 2, 5, 10, 20, 50, "
    "100, L)"
)

#: The published PIG estimator's name (Algorithm 2 as printed; does not identify lambda).
PUBLISHED = "published"
#: PIG estimators: the per-observation likelihood (default; identifies lambda) and the
#: published Algorithm 2 (seed App. C; its lambda and categories are "not identified").
PIG_ESTIMATORS = ("likelihood", PUBLISHED)
#: EM steps of the likelihood estimator (the published Algorithm 2 takes the paper's 5). With
#: each candidate's P(oracle) refined inside every step (core.dolce.likelihood), 5 steps
#: already recover 98-100 % of the exact (lambda, k) of problems simulated from the PIG model
#: (tests/test_dolce_pig_identify.py, 8 seeds, with and without noise); 10 leave a margin.
LIKELIHOOD_STEPS = 10

#: Which PIG estimator fits lambda and k.
PIG_ESTIMATOR = Param(
    "pig_estimator",
    str,
    "likelihood",
    "PIG estimator: likelihood (every observed score scored by the exact rho-tilde pmf on "
    "the 1/lambda lattice; identifies lambda) or published (Algorithm 2 as printed: scores "
    "only the per-length mean score, whose expectation does not depend on lambda, so PIG "
    "lambda and categories are not identified)",
    choices=PIG_ESTIMATORS,
    section="seed dolce_lambda_k App. B-C, App. L; issue 16",
)
