"""Statistics (SPEC §6.6), each pinned to a hand-computed value."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from core.stats.inference import (
    benjamini_hochberg,
    bootstrap_mean_ci,
    bootstrap_means,
    calibration,
    holm,
    mcnemar_exact,
    ols,
    paired_contrast,
)


def test_bootstrap_constant_and_two_point():
    assert bootstrap_mean_ci([1.0, 1.0, 1.0]) == {
        "mean": 1.0,
        "ci_low": 1.0,
        "ci_high": 1.0,
        "n": 3,
    }
    # resample means of {0, 1}: 0 (p=.25), .5 (p=.5), 1 (p=.25) -> 2.5th pct 0, 97.5th pct 1
    r = bootstrap_mean_ci([0.0, 1.0, float("nan")])  # NaN dropped
    assert (r["mean"], r["ci_low"], r["ci_high"], r["n"]) == (0.5, 0.0, 1.0, 2)
    empty = bootstrap_mean_ci([])
    assert empty["n"] == 0 and math.isnan(empty["mean"]) and math.isnan(empty["ci_low"])


def test_bootstrap_matches_normal_theory_and_is_seeded():
    v = np.arange(100, dtype=float)
    r = bootstrap_mean_ci(v)
    # mean 49.5; se = sd(ddof=0) / sqrt(n) = 28.866 / 10 = 2.887; 95% ~ 49.5 -/+ 5.66
    assert r["ci_low"] == pytest.approx(49.5 - 5.66, abs=0.4)
    assert r["ci_high"] == pytest.approx(49.5 + 5.66, abs=0.4)
    assert bootstrap_mean_ci(v) == r  # seed 42 by default: reproducible
    assert bootstrap_mean_ci(v, seed=7) != r
    assert bootstrap_mean_ci(v, level=0.5)["ci_high"] < r["ci_high"]
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean_ci(v, level=95)


def test_bootstrap_means_shared_resample_and_nan_skipping():
    x = np.array([[1.0, np.nan], [3.0, 4.0], [5.0, 6.0]])
    boot = bootstrap_means(x, n_resamples=2000, seed=3)
    assert boot.shape == (2000, 2)
    # reference: the same index draws, column by column, NaN cells skipped
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 3, size=(2000, 3), dtype=np.int32)
    ref0 = x[idx, 0].mean(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # resamples that drew only the NaN
        ref1 = np.nanmean(x[idx, 1], axis=1)
    np.testing.assert_allclose(boot[:, 0], ref0)
    np.testing.assert_allclose(boot[:, 1], ref1, equal_nan=True)
    # the 1-D path equals the first column of the 2-D path
    np.testing.assert_allclose(bootstrap_means(x[:, 0], 2000, 3), ref0)


def test_paired_contrast_hand_values():
    r = paired_contrast([1, 2, 3, 4], [0, 0, 0, 0])
    # d = 1..4: mean 2.5, sd(ddof=1) = sqrt(5/3) = 1.290994 -> effect 1.936492
    assert r["mean"] == 2.5
    assert r["effect"] == pytest.approx(2.5 / math.sqrt(5 / 3))
    # issue 34: the default p is seed 000 §7.6's normal approximation, z = mean / (sd / sqrt n)
    # = 2.5 / (sqrt(5/3) / 2) = sqrt(15), p = erfc(sqrt(15) / sqrt(2)) = erfc(sqrt(7.5))
    assert r["p_test"] == "normal"
    assert r["p"] == pytest.approx(1.0751e-4, abs=5e-9)
    assert r["p"] == math.erfc(math.sqrt(7.5))
    # the bootstrap p stays an option: every resampled mean > 0
    assert paired_contrast([1, 2, 3, 4], [0, 0, 0, 0], p_test="bootstrap")["p"] == 0.0
    assert r["n"] == 4
    assert 1.0 <= r["ci_low"] < r["ci_high"] <= 4.0
    same = paired_contrast([0.5, 0.5], [0.5, 0.5])
    assert (same["mean"], same["effect"], same["p"]) == (0.0, 0.0, 1.0)
    # sd = 0 with a non-zero mean: p 0, as the released script (its z is infinite)
    assert paired_contrast([1.0, 1.0], [0.0, 0.0])["p"] == 0.0
    assert math.isnan(paired_contrast([1.0], [0.0])["p"])  # n = 1: no sd, no p
    # d = (-1, 1): z = 0 -> p = erfc(0) = 1; bootstrap: 2 min(.75, .75) capped at 1
    assert paired_contrast([0, 1], [1, 0])["p"] == 1.0
    assert paired_contrast([0, 1], [1, 0], p_test="bootstrap")["p"] == 1.0
    with pytest.raises(ValueError, match="unknown p test 't'"):
        paired_contrast([0, 1], [1, 0], p_test="t")


def test_paired_contrast_bootstrap_p():
    # d = (1, 1, -1): P(mean* <= 0) = P(>= 2 of 3 draws are -1) = 7/27 -> p = 14/27 = 0.5185
    r = paired_contrast([1, 1, 0], [0, 0, 1], p_test="bootstrap")
    assert r["p"] == pytest.approx(14 / 27, abs=0.04)
    # normal: mean 1/3, sd 2/sqrt(3), z = (1/3) / (2/3) = 0.5, p = erfc(0.5 / sqrt 2) = 0.6171
    assert paired_contrast([1, 1, 0], [0, 0, 1])["p"] == pytest.approx(0.617075, abs=1e-6)
    with pytest.raises(ValueError, match="paired_contrast"):
        paired_contrast([1, 2], [1])
    nan_pair = paired_contrast([1.0, np.nan, 3.0], [0.0, 1.0, 1.0])  # NaN pair dropped
    assert nan_pair["n"] == 2 and nan_pair["mean"] == 1.5


def test_mcnemar_exact():
    # a=1,b=0 at 0,1,2 (b=3); a=0,b=1 at 4 (c=1): binom(3 of 4, .5) two-sided = (1+4+4+1)/16
    r = mcnemar_exact([1, 1, 1, 0, 0, 1], [0, 0, 0, 0, 1, 1])
    assert (r["b"], r["c"], r["n_discordant"]) == (3, 1, 4)
    assert r["p"] == pytest.approx(10 / 16)
    assert mcnemar_exact([1] * 10, [0] * 10)["p"] == pytest.approx(2 * 0.5**10)
    assert mcnemar_exact([1, 0], [1, 0])["p"] == 1.0


def test_holm_and_bh():
    # Holm: sorted .01,.03,.04 x (3,2,1) = .03,.06,.04 -> running max .03,.06,.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    # BH: .01*3/1 = .03, .03*3/2 = .045, .04*3/3 = .04 -> running min from the top .03,.04,.04
    np.testing.assert_allclose(benjamini_hochberg([0.01, 0.04, 0.03]), [0.03, 0.04, 0.04])
    out = holm([0.01, float("nan")])
    assert out[0] == pytest.approx(0.01) and math.isnan(out[1])


def test_ols_hand_values():
    # x = 0..3, y = 1,3,2,5: Sxx = 5, Sxy = 5.5 -> slope 1.1, intercept 2.75 - 1.65 = 1.1;
    # residuals -.1,.8,-1.3,.6 -> RSS 2.7, sigma^2 = 1.35; se(slope) = sqrt(1.35/5) = 0.519615;
    # se(intercept) = sqrt(1.35 (1/4 + 2.25/5)) = 0.972111; t = 2.116951, df 2:
    # p = 1 - t / sqrt(2 + t^2) = 0.168484; R^2 = 1 - 2.7 / 8.75 = 0.691429
    r = ols([1, 3, 2, 5], {"x": [0, 1, 2, 3]})
    t = r["table"].set_index("term")
    assert list(t.index) == ["intercept", "x"]
    assert t.loc["x", "coef"] == pytest.approx(1.1)
    assert t.loc["intercept", "coef"] == pytest.approx(1.1)
    assert t.loc["x", "se"] == pytest.approx(math.sqrt(0.27))
    assert t.loc["intercept", "se"] == pytest.approx(math.sqrt(0.945))
    tx = 1.1 / math.sqrt(0.27)
    assert t.loc["x", "p"] == pytest.approx(1 - tx / math.sqrt(2 + tx**2))
    assert r["r_squared"] == pytest.approx(1 - 2.7 / 8.75)
    assert r["n"] == 4
    r2 = ols([1, 3, 2, 5, np.nan], pd.DataFrame({"x": [0, 1, 2, 3, 4]}))  # NaN row dropped
    assert r2["n"] == 4


def test_calibration_hand_values():
    conf = [0.1, 0.15, 0.8, 0.95, 1.0]
    correct = [0, 1, 1, 1, 0]
    r = calibration(conf, correct)
    # Brier: (.01 + .7225 + .04 + .0025 + 1) / 5 = 0.355
    assert r["brier"] == pytest.approx(0.355)
    # bins: 1 -> {.1,.15} conf .125 acc .5; 8 -> {.8} acc 1; 9 -> {.95, 1.0} conf .975 acc .5
    # ECE = 2/5 * .375 + 1/5 * .2 + 2/5 * .475 = .15 + .04 + .19 = 0.38
    assert r["ece"] == pytest.approx(0.38)
    bins = r["bins"].set_index("bin")
    assert list(r["bins"].columns) == ["bin", "lo", "hi", "count", "mean_conf", "accuracy"]
    assert bins["count"].tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 1, 2]
    assert bins.loc[9, "mean_conf"] == pytest.approx(0.975)
    assert (bins.loc[9, "lo"], bins.loc[9, "hi"]) == (0.9, 1.0)
    assert math.isnan(bins.loc[0, "accuracy"])
    clamped = calibration([1.5, -1.0, float("nan")], [1, 0, 1])
    assert clamped["brier"] == 0.0 and clamped["n"] == 2
    assert math.isnan(calibration([], [])["brier"])
