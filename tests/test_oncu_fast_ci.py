"""The multinomial bootstrap estimator (issue 17 item 6) against index resampling.

Tolerances are Monte-Carlo error: with 5,000 resamples the 2.5th / 97.5th percentile of a
resampled mean with standard error se has a standard deviation of about
sqrt(.025 * .975 / 5000) / phi(1.96) * se = 0.038 se; the tolerance is 0.25 se (over 6 such
standard deviations) plus, for binary scores, one step of the 1/n lattice the means live on.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from core.figures.oncu import condition_matrix_table, contrasts_table
from core.oncu.metrics import condition_contrast, sample_level_means
from core.stats.inference import (
    RESAMPLE_MAX,
    bootstrap_means,
    multinomial_means,
    paired_contrast,
)


def _pct(boot: np.ndarray) -> np.ndarray:
    return np.percentile(boot[np.isfinite(boot)], [2.5, 97.5])


def test_binary_multinomial_matches_resample_and_the_exact_binomial():
    rng = np.random.default_rng(0)
    n = 400
    v = (rng.random(n) < 0.3).astype(float)
    k = int(v.sum())
    se = np.sqrt(k / n * (1 - k / n) / n)
    boot, label = multinomial_means(v, 5000, 42)
    assert label == "multinomial"
    # the exact bootstrap distribution of the mean is Binomial(n, k / n) / n
    exact = binom.ppf([0.025, 0.975], n, k / n) / n
    tol = 0.25 * se + 1 / n
    np.testing.assert_allclose(_pct(boot), exact, atol=tol)
    np.testing.assert_allclose(_pct(bootstrap_means(v, 5000, 42)), exact, atol=tol)


def test_continuous_binned_matches_resample_within_monte_carlo_error():
    rng = np.random.default_rng(1)
    v = rng.random(3000)
    v[::50] = np.nan  # missing values are drawn and skipped alike
    boot, label = multinomial_means(v, 5000, 42)
    assert label == "multinomial-binned"
    ref = bootstrap_means(v, 5000, 42)
    se = np.nanstd(v) / np.sqrt(np.isfinite(v).sum())
    np.testing.assert_allclose(_pct(boot), _pct(ref), atol=0.25 * se)
    assert np.nanstd(boot) == pytest.approx(np.nanstd(ref), rel=0.05)


def test_few_distinct_values_are_exact_in_distribution():
    # three distinct values and NaN: the mean of each resample is a function of the counts
    v = np.array([0.0, 0.5, 1.0, np.nan] * 100)
    boot, label = multinomial_means(v, 20000, 3)
    ref = bootstrap_means(v, 20000, 3)
    assert label == "multinomial"
    assert np.mean(boot) == pytest.approx(np.mean(ref), abs=5e-4)
    assert np.std(boot) == pytest.approx(np.std(ref), rel=0.03)
    # theory: var(v) = 1/6 over the 300 finite values; a resample draws about 300 of them
    # (400 draws, 3/4 finite), so se = sqrt((1/6) / 300) to first order
    assert np.std(boot) == pytest.approx(np.sqrt((1 / 6) / 300), rel=0.05)


def _frame(n: int, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for cond, acc in (("full_context", 0.55), ("retrieved", 0.7)):
        ok = rng.random(n) < acc
        rows.append(
            pd.DataFrame(
                {
                    "run": "r",
                    "instance_id": [f"i{i}" for i in range(n)],
                    "condition": cond,
                    "em_relaxed": ok.astype(float),
                    "f1_relaxed": np.where(ok, 1.0, rng.random(n) / 2),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def test_point_estimates_do_not_depend_on_the_estimator():
    df = _frame(2500)
    ref = sample_level_means(df, ci=True, ci_method="resample").set_index("condition")
    fast = sample_level_means(df, ci=True, ci_method="multinomial").set_index("condition")
    plain = sample_level_means(df).set_index("condition")
    for col in ("n", "em_relaxed", "f1_relaxed"):
        np.testing.assert_allclose(fast[col], plain[col], rtol=0, atol=1e-12)
        np.testing.assert_allclose(ref[col], plain[col], rtol=0, atol=1e-12)
    hand = df[df["condition"] == "retrieved"]["f1_relaxed"].mean()
    assert abs(fast.loc["retrieved", "f1_relaxed"] - hand) <= 1e-12
    assert set(ref["ci_method"]) == {"resample"} and set(fast["ci_method"]) == {
        "multinomial-binned"
    }
    for col in ("em_relaxed", "f1_relaxed"):
        se = df.groupby("condition")[col].std(ddof=0) / np.sqrt(2500)
        for end in ("_ci_low", "_ci_high"):
            diff = (fast[col + end] - ref[col + end]).abs()
            assert (diff <= 0.25 * se + (1 / 2500 if col == "em_relaxed" else 0)).all(), col


def test_paired_contrast_estimators_agree_and_binary_uses_three_patterns():
    df = _frame(3000)
    a = df[df["condition"] == "retrieved"]["em_relaxed"].to_numpy()
    b = df[df["condition"] == "full_context"]["em_relaxed"].to_numpy()
    ref = paired_contrast(a, b, method="resample")
    fast = paired_contrast(a, b, method="multinomial")
    assert fast["ci_method"] == "multinomial" and ref["ci_method"] == "resample"
    assert (fast["mean"], fast["effect"], fast["n"]) == (ref["mean"], ref["effect"], ref["n"])
    se = np.std(a - b) / np.sqrt(3000)
    assert abs(fast["ci_low"] - ref["ci_low"]) <= 0.25 * se + 1 / 3000
    assert abs(fast["ci_high"] - ref["ci_high"]) <= 0.25 * se + 1 / 3000
    # auto: index resampling up to RESAMPLE_MAX pairs, multinomial above
    auto = condition_contrast(df, "retrieved", "full_context", score_field="em_relaxed")
    assert auto["ci_method"].iloc[0] == ("multinomial" if 3000 > RESAMPLE_MAX else "resample")


def test_tables_name_the_estimator_and_resample_stays_available():
    df = _frame(300).assign(model="m", dataset="d")
    auto = condition_matrix_table(df)
    assert set(auto["ci_method"]) == {"resample"}  # small cells: the published estimator
    assert set(condition_matrix_table(df, ci="multinomial")["ci_method"]) <= {
        "multinomial",
        "multinomial-binned",
    }
    off = condition_matrix_table(df, ci="false")
    assert off["f1_relaxed_ci_low"].isna().all()
    con = contrasts_table(df, contrasts=[("retrieved", "full_context")], ci="resample")
    assert con["ci_method"].tolist() == ["resample"]
    with pytest.raises(ValueError, match="resample, multinomial"):
        condition_matrix_table(df, ci="sometimes")
