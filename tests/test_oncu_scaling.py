"""Length-position scaling statistics, core/oncu/scaling.py (SPEC §6.7; seed 000 §8.11).

Hand-computed values on small grids, an independent OLS (numpy least squares, the classical
covariance sigma^2 (X'X)^-1, scipy's normal and t distributions), Holm and Benjamini-Hochberg
against statsmodels (the families of seed 000 Tables 29 and 30, issue 34), the
published numbers the paper's own cells give, and the product paths: ``report scaling``
through the CLI, the export tables and the Length & position page.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from test_cli import run_cli

from core.datasets.controlled import DECILES, position_region
from core.oncu.metrics import (
    SCALING_TERMS,
    oncu_groups,
    position_fraction,
    scaling_by_length,
    scaling_cells,
    scaling_contrasts,
    scaling_length_wide,
    scaling_regression,
    scaling_report,
)
from core.stats.inference import holm, paired_contrast


# ------------------------------------------------------------------ position fraction
def test_module_constants_match_core_oncu():
    """core.oncu.scaling cannot import core.oncu.metrics (which re-exports it): its copies agree."""
    import core.oncu.scaling as sc
    from core.oncu.metrics import ONCU_CONDITIONS, UNIT_KEYS

    assert sc._UNIT_KEYS == UNIT_KEYS and sc._CONDITIONS == ONCU_CONDITIONS


def test_position_fraction_is_the_region_midpoint():
    labels = [
        "pos_00",
        "pos_04",
        "pos_09",
        "front",
        "middle",
        "end",
        "scattered",
        "unknown",
        "0.3",
        "pos_10",
        "1.5",
        None,
    ]
    got = position_fraction(labels)
    np.testing.assert_allclose(got[:6], [0.05, 0.45, 0.95, 1 / 6, 0.5, 5 / 6])
    assert got[8] == pytest.approx(0.3)
    assert np.isnan(got[[6, 7, 9, 10, 11]]).all()
    # the same midpoints as the generator's regions
    for lab in (*DECILES, "front", "middle", "end"):
        lo, hi = position_region(lab)
        assert position_fraction([lab])[0] == pytest.approx((lo + hi) / 2)


# ------------------------------------------------------------------------- regression
def _grid3(eps: float = 0.03) -> pd.DataFrame:
    """3 lengths x 3 positions, ONCU = 0.5 - 0.2 l + 0.3 p + 0.6 d + eps l_i p_j.

    l = log2 length centered: 4K/8K/16K -> -1, 0, 1. Positions front/middle/end: fraction
    1/6, 1/2, 5/6, p = fraction - 1/2 = -1/3, 0, 1/3; d = |fraction - 1/2| - mean = 1/3 - 2/9,
    -2/9, 1/3 - 2/9 = 1/9, -2/9, 1/9. The residual pattern eps * (i-1) * (j-1) is orthogonal
    to 1, l, p and d, so the OLS coefficients are exactly 0.5, -0.2, 0.3, 0.6.
    """
    rows = []
    for i, length in enumerate((4000, 8000, 16000)):
        for j, pos in enumerate(("front", "middle", "end")):
            frac = (1 / 6, 0.5, 5 / 6)[j]
            l_c, p_c, d_c = i - 1, frac - 0.5, abs(frac - 0.5) - 2 / 9
            rows.append(
                {
                    "context_length": length,
                    "evidence_position": pos,
                    "position_fraction": frac,
                    "oncu": 0.5 - 0.2 * l_c + 0.3 * p_c + 0.6 * d_c + eps * (i - 1) * (j - 1),
                }
            )
    return pd.DataFrame(rows)


def _reference_ols(y, columns):
    """Independent OLS: numpy lstsq, sigma^2 (X'X)^-1, scipy t p; (coef, se, p, r2)."""
    y = np.asarray(y, float)
    X = np.column_stack([np.ones(len(y)), *columns])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    df = len(y) - X.shape[1]
    sigma2 = resid @ resid / df
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(X.T @ X)))
    p = 2 * sps.t.sf(np.abs(coef / se), df)
    r2 = 1 - resid @ resid / np.sum((y - y.mean()) ** 2)
    return coef, se, p, r2


def test_scaling_regression_on_a_hand_solved_3x3_grid():
    """SSR = 4 corners x 0.03^2 = 0.0036, df = 9 - 4 = 5, sigma^2 = 0.00072. The design is
    orthogonal, so SE_k = sqrt(sigma^2 / sum x_k^2) with sum l^2 = 6, sum p^2 = 3 * 2/9 = 2/3,
    sum d^2 = 3 * 6/81 = 2/9, intercept 9: SE = sqrt(0.00008), sqrt(0.00012), sqrt(0.00108),
    sqrt(0.00324). SST = 0.04*6 + 0.09*2/3 + 0.36*2/9 + 0.0036 = 0.3836, R^2 = 1 -
    0.0036/0.3836."""
    out = scaling_regression(_grid3())
    assert out["term"].tolist() == list(SCALING_TERMS)
    t = out.set_index("term")
    np.testing.assert_allclose(t["coefficient"], [0.5, -0.2, 0.3, 0.6], atol=1e-12)
    se = np.sqrt([0.00008, 0.00012, 0.00108, 0.00324])
    np.testing.assert_allclose(t["se"], se, rtol=1e-9)
    np.testing.assert_allclose(t["se"], [0.0089443, 0.0109545, 0.0328634, 0.0569210], atol=1e-7)
    np.testing.assert_allclose(t["t"], np.array([0.5, -0.2, 0.3, 0.6]) / se, rtol=1e-9)
    # issue 34: seed 000 Table 30's p is the normal approximation of t (scipy as reference)
    assert (t["p_test"] == "normal").all()
    np.testing.assert_allclose(t["p"], 2 * sps.norm.sf(np.abs(t["t"])), rtol=1e-9)
    # by hand: t = 0.3 / sqrt(0.00108) = 9.1287, p = erfc(9.1287 / sqrt 2) = 6.932e-20
    assert t.loc["position_fraction_centered", "p"] == pytest.approx(6.93208e-20, rel=1e-5)
    # the t-test p (this project's before issue 34) stays an option, df = 9 - 4 = 5
    tt = scaling_regression(_grid3(), p_test="t").set_index("term")
    np.testing.assert_allclose(tt["p"], 2 * sps.t.sf(np.abs(t["t"]), 5), rtol=1e-9)
    assert (tt["p_test"] == "t").all()
    # BH across the table's rows (statsmodels as reference)
    np.testing.assert_allclose(t["p_bh"], multipletests(t["p"], method="fdr_bh")[1], rtol=1e-12)
    assert t["r_squared"].iloc[0] == pytest.approx(1 - 0.0036 / 0.3836)
    assert (t["n"] == 9).all() and (t["left_out"] == 0).all() and t["note"].isna().all()


def test_scaling_regression_matches_an_independent_ols_and_counts_left_out_cells():
    rng = np.random.default_rng(7)
    rows = [
        {"context_length": n, "position_fraction": (d + 0.5) / 10, "oncu": float(rng.uniform())}
        for n in (4000, 8000, 16000, 32000)
        for d in range(10)
    ]
    cells = pd.DataFrame(rows)
    cells.loc[5, "oncu"] = np.nan  # no valid group
    cells.loc[17, "position_fraction"] = np.nan  # scattered
    out = scaling_regression(cells).set_index("term")
    keep = cells.dropna()
    l2 = np.log2(keep["context_length"].to_numpy(float))
    pf = keep["position_fraction"].to_numpy(float)
    dm = np.abs(pf - 0.5)
    coef, se, p, r2 = _reference_ols(keep["oncu"], [l2 - l2.mean(), pf - pf.mean(), dm - dm.mean()])
    np.testing.assert_allclose(out["coefficient"], coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(out["se"], se, rtol=1e-9)
    np.testing.assert_allclose(out["p"], 2 * sps.norm.sf(np.abs(coef / se)), rtol=1e-7)
    t_test = scaling_regression(cells, p_test="t").set_index("term")
    np.testing.assert_allclose(t_test["p"], p, rtol=1e-7)
    assert out["r_squared"].iloc[0] == pytest.approx(r2)
    assert (out["n"] == 38).all() and (out["left_out"] == 2).all()
    assert out["note"].iloc[0] == (
        "left out 2 of 40 cells (1 without a valid ONCU group, 1 without a numeric length or "
        "position fraction)"
    )


def test_published_distance_from_end_splits_the_position_slope():
    """distance_from_end = 1 - fraction is minus the position term: the pseudo-inverse gives
    each half the position-only slope 0.3 (d is orthogonal to p, so that slope is 0.3).
    Residual of the position-only model: 0.6 d + eps pattern, SSR = 0.36 * 2/9 + 0.0036 =
    0.0836, df = 9 - 3 = 6; its slope SE sqrt(0.0836 / 6 / (2/3)) = 0.144568, halved
    0.072284; t = 0.3 / 0.144568 = 2.0752 for both terms."""
    out = scaling_regression(_grid3(), distance="end").set_index("term")
    assert list(out.index) == [
        "intercept",
        "log2_context_length_centered",
        "position_fraction_centered",
        "distance_from_end_centered",
    ]
    assert out.loc["position_fraction_centered", "coefficient"] == pytest.approx(0.15)
    assert out.loc["distance_from_end_centered", "coefficient"] == pytest.approx(-0.15)
    full_se = math.sqrt(0.0836 / 6 / (2 / 3))
    assert full_se == pytest.approx(0.144568, abs=1e-6)
    # issue 34: the released script's residual df counts the 4 design columns, 9 - 4 = 5
    # (statsmodels: the rank, 9 - 3 = 6), so each SE is full_se / 2 * sqrt(6 / 5)
    for term in ("position_fraction_centered", "distance_from_end_centered"):
        assert out.loc[term, "se"] == pytest.approx(full_se / 2 * math.sqrt(6 / 5))
        assert abs(out.loc[term, "t"]) == pytest.approx(0.3 / full_se / math.sqrt(1.2))
        assert out.loc[term, "p"] == pytest.approx(2 * sps.norm.sf(0.3 / full_se / math.sqrt(1.2)))
    # the released script's arithmetic written out (lstsq, pinv(X'X) * RSS / (n - 4), erfc)
    g = _grid3()
    l2 = np.log2(g["context_length"].to_numpy(float))
    pf = g["position_fraction"].to_numpy(float)
    X = np.column_stack([np.ones(9), l2 - l2.mean(), pf - pf.mean(), (1 - pf) - (1 - pf).mean()])
    y = g["oncu"].to_numpy(float)
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    rss = float(np.sum((y - X @ beta) ** 2))
    se = np.sqrt(np.diag(rss / max(9 - 4, 1) * np.linalg.pinv(X.T @ X)))
    np.testing.assert_allclose(out["coefficient"], beta, atol=1e-12)
    np.testing.assert_allclose(out["se"], se, rtol=1e-9)
    np.testing.assert_allclose(
        out["p"],
        [math.erfc(abs(b / e) / math.sqrt(2)) for b, e in zip(beta, se, strict=True)],
        rtol=1e-9,
    )
    # the position-only model, fit independently, has the same t
    g = _grid3()
    l2 = np.log2(g["context_length"].to_numpy(float))
    pf = g["position_fraction"].to_numpy(float)
    coef, se, p, _ = _reference_ols(g["oncu"], [l2 - l2.mean(), pf - pf.mean()])
    assert coef[2] == pytest.approx(0.3) and se[2] == pytest.approx(full_se)
    assert out.loc["log2_context_length_centered", "coefficient"] == pytest.approx(-0.2)


@pytest.mark.parametrize(
    ("model", "by_length", "published"),
    [
        ("Qwen2.5-14B", (0.999, 0.599, 0.301, 0.163), -0.281),
        ("Qwen3-14B", (0.980, 0.618, 0.300, 0.150), -0.281),
        ("Gemma3-12B", (0.791, 0.543, 0.307, 0.157), -0.214),
    ],
)
@pytest.mark.parametrize("distance", ["middle", "end"])
def test_log2_coefficient_reproduces_table_30_from_table_10(model, by_length, published, distance):
    """On the balanced 4 lengths x 10 deciles grid the length term is orthogonal to the
    position terms, so its coefficient depends only on the per-length means of Table 10:
    (-1.5 m4 - 0.5 m8 + 0.5 m16 + 1.5 m32) / 5. Qwen2.5-14B: -1.403 / 5 = -0.2806."""
    rng = np.random.default_rng(0)
    rows = []
    for n, mean in zip((4000, 8000, 16000, 32000), by_length, strict=True):
        profile = rng.uniform(-0.1, 0.1, 10)
        profile -= profile.mean()  # any position profile with the length's mean
        rows += [
            {"context_length": n, "position_fraction": (d + 0.5) / 10, "oncu": mean + profile[d]}
            for d in range(10)
        ]
    out = scaling_regression(pd.DataFrame(rows), distance=distance).set_index("term")
    coef = out.loc["log2_context_length_centered", "coefficient"]
    assert round(coef, 3) == published, model


@pytest.mark.parametrize(
    ("cells", "note"),
    [
        (
            pd.DataFrame(
                {
                    "context_length": [4000] * 3,
                    "position_fraction": [0.1, 0.5, 0.9],
                    "oncu": [1.0, 0.5, 0.8],
                }
            ),
            "scaling OLS not fit: needs cells at 2 or more context lengths, got only 4K",
        ),
        (
            pd.DataFrame(
                {
                    "context_length": [4000, 4000, 8000, 8000],
                    "position_fraction": [0.1, 0.9] * 2,
                    "oncu": [1.0, 0.5, 0.4, 0.2],
                }
            ),
            "scaling OLS not fit: needs 3 or more distinct evidence positions, got 2 (0.1, 0.9)",
        ),
        (
            pd.DataFrame(
                {
                    "context_length": [4000, 4000, 4000, 8000, 8000, 8000],
                    "position_fraction": [0.6, 0.7, 0.8] * 2,
                    "oncu": [1.0, 0.5, 0.4, 0.2, 0.3, 0.1],
                }
            ),
            "scaling OLS not fit: distance_from_middle is collinear with the position fraction "
            "on these cells (all positions on one side of the middle, or mirror pairs only)",
        ),
        (
            pd.DataFrame(
                {
                    "context_length": [4000, 4000, 8000, 8000],
                    "position_fraction": [0.1, 0.5, 0.5, 0.9],
                    "oncu": [1.0, 0.5, 0.4, 0.2],
                }
            ),
            "scaling OLS not fit: needs at least 5 cells (4 estimated terms + 1 residual degree "
            "of freedom), got 4",
        ),
        (
            pd.DataFrame(
                {
                    "context_length": [4000] * 3 + [8000] * 3,
                    "position_fraction": [0.1, 0.5, 0.9] * 2,
                    "oncu": [1.0] * 6,
                }
            ),
            "scaling OLS not fit: ONCU is 1.000 in every cell: no variation to regress",
        ),
        (
            pd.DataFrame(
                {
                    "context_length": [4000, 8000],
                    "position_fraction": [0.1, 0.5],
                    "oncu": [np.nan, np.nan],
                }
            ),
            "scaling OLS not fit: no cell with ONCU and a length and position fraction; left out "
            "2 of 2 cells (2 without a valid ONCU group, 0 without a numeric length or position "
            "fraction)",
        ),
    ],
)
def test_unsupported_regressions_say_what_is_missing(cells, note):
    out = scaling_regression(cells)
    assert out[["coefficient", "se", "t", "p", "r_squared"]].isna().all().all()
    assert (out["note"] == note).all()


def test_exact_fit_has_no_se_and_says_so():
    cells = _grid3(eps=0.0)
    out = scaling_regression(cells)
    np.testing.assert_allclose(out["coefficient"], [0.5, -0.2, 0.3, 0.6], atol=1e-12)
    assert out[["se", "t", "p"]].isna().all().all()
    assert out["note"].iloc[0] == "the fit is exact (no residual variance): SE and p undefined"


def test_regression_input_errors_are_value_errors():
    with pytest.raises(ValueError, match=r"need column\(s\) \['oncu'\]"):
        scaling_regression(pd.DataFrame({"context_length": [1], "position_fraction": [0.5]}))
    with pytest.raises(ValueError, match="unknown distance 'start'; choose one of: middle, end"):
        scaling_regression(_grid3(), distance="start")
    with pytest.raises(ValueError, match="unknown p test 'bootstrap'; choose one of: normal, t"):
        scaling_regression(_grid3(), p_test="bootstrap")


# -------------------------------------------------------------------------- contrasts
#: Toy grid (also the CLI store below): relaxed F1 = ONCU of each single-instance group
#: (no evidence 0, oracle 1). Full context per decile, retrieved per decile.
FULL = {4000: [1.0] * 10, 8000: [2 / 3] * 10, 32000: [0, 0, 0, 0.4, 0, 0, 0, 0, 2 / 3, 1.0]}
RETRIEVED = {4000: [1.0] * 10, 8000: [1.0] * 10, 32000: [1, 1, 1, 1, 1, 6 / 7, 1, 1, 1, 1]}


def _toy_cells(full=FULL, retrieved=RETRIEVED) -> pd.DataFrame:
    rows = []
    for cond, grid in (("full_context", full), ("retrieved", retrieved)):
        for n, values in grid.items():
            rows += [
                {
                    "condition": cond,
                    "context_length": n,
                    "evidence_position": f"pos_{d:02d}",
                    "oncu": v,
                }
                for d, v in enumerate(values)
            ]
    return pd.DataFrame(rows)


def test_contrasts_on_the_toy_grid_by_hand():
    """4K - 32K: d = 1 - full32 = 1,1,1,0.6,1,1,1,1,1/3,0 -> mean 7.9333/10 = 0.79333.
    Final decile: d_i = 1 - full32(pos_i), i < 8 = seven 1s and 0.6 -> mean 0.95, sd
    sqrt((7 * 0.05^2 + 0.35^2) / 7) = sqrt(0.02) -> effect 0.95 / 0.141421 = 6.7175.
    Retrieved - full at 32K: 1,1,1,0.6,1,6/7,1,1,1/3,0 -> mean 7.790476/10 = 0.7790476."""
    out = scaling_contrasts(_toy_cells()).set_index("contrast")
    assert list(out.index) == ["length", "final_decile", "retrieved_full"]
    assert out.loc["length", "mean"] == pytest.approx(7.9333333 / 10)
    assert out.loc["final_decile", "mean"] == pytest.approx(0.95)
    assert out.loc["final_decile", "effect"] == pytest.approx(0.95 / math.sqrt(0.02))
    assert out.loc["final_decile", "effect"] == pytest.approx(6.7175, abs=1e-4)
    assert out.loc["retrieved_full", "mean"] == pytest.approx(7.790476 / 10)
    assert out["n"].tolist() == [10, 8, 10]
    assert out["label"].tolist() == [
        "4K - 32K full-context ONCU",
        "pos_09 - mean(pos_00..pos_07) at 32K",
        "retrieved - full at 32K",
    ]
    assert out["note"].isna().all()
    # the pairing, checked against paired_contrast on the hand-listed cells
    f32 = np.array(FULL[32000])
    ref = paired_contrast(np.ones(8), f32[:8])
    for k in ("mean", "ci_low", "ci_high", "effect", "p"):
        assert out.loc["final_decile", k] == pytest.approx(ref[k]), k
    ref = paired_contrast(np.array(RETRIEVED[32000]), f32)
    for k in ("mean", "ci_low", "ci_high", "effect", "p"):
        assert out.loc["retrieved_full", k] == pytest.approx(ref[k]), k


# seed 000 Table 11, 32K full-context ONCU per decile
QWEN25_32K = [0.013, 0.000, 0.007, 0.047, 0.048, 0.055, 0.020, 0.007, 0.431, 1.000]
GEMMA_32K = [0.007, 0.030, 0.068, 0.072, 0.000, 0.107, 0.028, 0.055, 0.454, 0.750]


def test_contrasts_reproduce_table_29_from_the_published_cells():
    """Qwen2.5-14B, retrieved ONCU 1.000 at 32K (Table 10) and Table 11's full-context row:
    retrieved - full 0.837 [0.638, 0.982], effect 2.606; final decile 0.975, effect 44.659
    (44.56 from the 3-decimal cells); 4K - 32K with 4K at 0.999: 0.836, effect 2.608.
    Gemma3-12B final decile 0.704, effect 19.459 (19.44 from rounded cells)."""
    cells = _toy_cells(full={4000: [0.999] * 10, 32000: QWEN25_32K}, retrieved={32000: [1.0] * 10})
    out = scaling_contrasts(cells).set_index("contrast")
    r = out.loc["retrieved_full"]
    assert round(r["mean"], 3) == 0.837 and round(r["effect"], 3) == 2.606
    assert abs(r["ci_low"] - 0.638) <= 0.01 and abs(r["ci_high"] - 0.982) <= 0.01
    f = out.loc["final_decile"]
    assert round(f["mean"], 3) == 0.975 and abs(f["effect"] - 44.659) < 0.2
    ln = out.loc["length"]
    assert round(ln["mean"], 3) == 0.836 and abs(ln["effect"] - 2.608) < 0.01
    assert abs(ln["ci_low"] - 0.638) <= 0.01 and abs(ln["ci_high"] - 0.980) <= 0.01
    assert (out["p"] < 0.001).all() and (out["p_holm"] < 0.001).all()
    gemma = scaling_contrasts(_toy_cells(full={32000: GEMMA_32K}, retrieved={}))
    g = gemma.set_index("contrast").loc["final_decile"]
    assert round(g["mean"], 3) == 0.704 and abs(g["effect"] - 19.459) < 0.05
    assert abs(g["ci_low"] - 0.679) <= 0.01 and abs(g["ci_high"] - 0.726) <= 0.01


def test_holm_by_hand_and_against_statsmodels():
    """Holm: sort 0.01 < 0.03 < 0.04 -> 3 * 0.01 = 0.03, max(0.03, 2 * 0.03) = 0.06,
    max(0.06, 1 * 0.04) = 0.06; a NaN stays NaN and is not counted in the family."""
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    got = holm([0.02, np.nan, 0.04])
    np.testing.assert_allclose(got[[0, 2]], [0.04, 0.04])
    assert np.isnan(got[1])
    p = np.array([0.001, 0.2, 0.012, 0.5, 0.03])
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])
    # by hand: 5 * 0.001, 4 * 0.012, 3 * 0.03, max(0.09, 2 * 0.2), max(0.4, 0.5)
    np.testing.assert_allclose(holm(p), [0.005, 0.4, 0.048, 0.5, 0.09])


def test_contrasts_are_holm_adjusted_within_the_family():
    """Mixed-sign cell differences give non-trivial p; p_holm is Holm over the family's
    three p values (statsmodels' multipletests as the reference)."""
    full4 = [0.5, 0.2, 0.7, 0.3, 0.6, 0.4, 0.5, 0.2, 0.6, 0.5]
    full32 = [0.4, 0.5, 0.3, 0.6, 0.2, 0.5, 0.6, 0.1, 0.3, 0.55]
    ret32 = [0.5, 0.4, 0.45, 0.65, 0.3, 0.45, 0.7, 0.3, 0.2, 0.6]
    out = scaling_contrasts(
        _toy_cells(full={4000: full4, 32000: full32}, retrieved={32000: ret32}), n_resamples=2000
    )
    p = out["p"].to_numpy(float)
    assert ((p > 0.001) & (p < 1)).all()
    np.testing.assert_allclose(out["p_holm"], multipletests(p, method="holm")[1])
    order = np.argsort(p)
    step = np.maximum.accumulate(np.minimum(1, p[order] * np.array([3, 2, 1])))
    np.testing.assert_allclose(out["p_holm"].to_numpy()[order], step)


def test_report_adjusts_across_the_families_of_tables_29_and_30():
    """issue 34: Table 29's Holm family is the scaling contrasts of every model shown, not one
    run's three; Table 30's BH family is every regression row. statsmodels as reference."""
    rep = scaling_report(_predictions(), n_resamples=200)
    con, reg = rep["contrasts"], rep["regression"]
    assert len(con) == 6 and (con["p_test"] == "normal").all()
    p = con["p"].to_numpy(float)
    ok = np.isfinite(p)
    np.testing.assert_allclose(
        con["p_holm"].to_numpy(float)[ok], multipletests(p[ok], method="holm")[1], rtol=1e-12
    )
    rp = reg["p"].to_numpy(float)
    ok = np.isfinite(rp)
    assert ok.sum() == 8  # r1, r2 full context x 4 terms (retrieved is constant: no fit)
    np.testing.assert_allclose(
        reg["p_bh"].to_numpy(float)[ok], multipletests(rp[ok], method="fdr_bh")[1], rtol=1e-12
    )
    assert reg["p_bh"][~ok].isna().all()
    boot = scaling_report(_predictions(), n_resamples=200, p_test="bootstrap", ols_p_test="t")
    assert (boot["contrasts"]["p_test"] == "bootstrap").all()
    assert (boot["regression"]["p_test"] == "t").all()


def test_contrasts_say_loudly_what_is_missing():
    # no 32K at all
    out = scaling_contrasts(
        _toy_cells(full={4000: [1.0] * 10, 8000: [0.5] * 10}, retrieved={4000: [1.0] * 10})
    ).set_index("contrast")
    assert out[["mean", "ci_low", "effect", "p", "p_holm"]].isna().all().all()
    assert out.loc["length", "note"] == (
        "no full_context cell with ONCU at 32K (32000 tokens); lengths present: 4K, 8K"
    )
    assert out.loc["final_decile", "note"].startswith("no full_context cell with ONCU at 32K")
    assert out.loc["retrieved_full", "note"].startswith("no retrieved cell with ONCU at 32K")
    # 32K on thirds (no deciles); one matched position only for the length contrast
    thirds = pd.DataFrame(
        [
            {
                "condition": "full_context",
                "context_length": 32000,
                "evidence_position": p,
                "oncu": v,
            }
            for p, v in (("front", 0.2), ("middle", 0.1), ("end", 0.9))
        ]
        + [
            {
                "condition": "full_context",
                "context_length": 4000,
                "evidence_position": "front",
                "oncu": 1.0,
            }
        ]
    )
    out = scaling_contrasts(thirds).set_index("contrast")
    assert out.loc["final_decile", "note"] == (
        "no pos_09 full_context cell with ONCU at 32K; positions there: end, front, middle"
    )
    assert out.loc["length", "note"] == (
        "needs 2 or more matched cells, got 1; 2 cell(s) without a matched partner left out "
        "(32K end, 32K middle)"
    )
    assert math.isnan(out.loc["length", "mean"]) and out.loc["length", "n"] == 1
    # two early deciles without a valid group: computed over the other six, with a note
    full32 = list(FULL[32000])
    full32[2] = full32[5] = np.nan
    out = scaling_contrasts(_toy_cells(full={32000: full32}, retrieved={})).set_index("contrast")
    f = out.loc["final_decile"]
    assert f["n"] == 6 and f["mean"] == pytest.approx((5 + 0.6) / 6)
    assert f["note"] == "pos_02, pos_05 missing at 32K: paired over 6 of 8 early/middle deciles"
    # only the final-decile contrast has a p: Holm over a family of one leaves it unchanged
    assert f["p_holm"] == pytest.approx(f["p"])


def test_duplicate_cells_are_an_error():
    cells = pd.concat([_toy_cells(), _toy_cells()])
    with pytest.raises(ValueError, match="more than one full_context cell at 4K"):
        scaling_contrasts(cells)


# ------------------------------------------------------- from predictions: cells, tables
def _predictions() -> pd.DataFrame:
    """Two runs; per (length, position) two instances with different distractor settings
    (two groups). Run r1: one group of cell (4000, pos_09) has S_oracle = S_none (invalid),
    so that cell's ONCU is the other group's alone."""
    rows = []
    for run in ("r1", "r2"):
        for n in (4000, 32000):
            for d in range(10):
                pos = f"pos_{d:02d}"
                for k, dist in enumerate(("none", "high")):
                    iid = f"{run}-{n}-{d}-{k}"
                    full = (1.0 if n == 4000 else (0.5 if d == 9 else 0.0)) - 0.1 * k
                    oracle = 0.0 if (run, n, d, k) == ("r1", 4000, 9, 1) else 1.0
                    for cond, s in (
                        ("no_evidence", 0.0),
                        ("oracle", oracle),
                        ("full_context", full),
                        ("retrieved", 1.0),
                    ):
                        rows.append(
                            {
                                "run": run,
                                "model": "m",
                                "dataset": "toy",
                                "instance_id": iid,
                                "condition": cond,
                                "source": "toy",
                                "reasoning_type": "single_hop",
                                "context_length": n,
                                "evidence_position": pos,
                                "evidence_density": "low",
                                "distractor_similarity": dist,
                                "f1_relaxed": s,
                                "gold_ids": ["p1"],
                            }
                        )
    return pd.DataFrame(rows)


def test_cells_by_length_and_report_from_predictions():
    df = _predictions()
    groups = oncu_groups(df)
    cells = scaling_cells(groups)
    c = cells.set_index(["run", "condition", "context_length", "evidence_position"])
    # r1 (4000, pos_09): the valid group scores 1.0, the other is invalid -> 1.0, 1 of 2
    assert c.loc[("r1", "full_context", 4000, "pos_09"), "oncu"] == pytest.approx(1.0)
    assert c.loc[("r1", "full_context", 4000, "pos_09"), "valid_groups"] == 1
    assert c.loc[("r2", "full_context", 4000, "pos_09"), "oncu"] == pytest.approx(0.95)
    assert c.loc[("r1", "full_context", 32000, "pos_09"), "oncu"] == pytest.approx(0.45)
    assert c.loc[("r1", "full_context", 32000, "pos_00"), "oncu"] == pytest.approx(0.0)
    assert c.loc[("r1", "full_context", 32000, "pos_00"), "position_fraction"] == 0.05
    by = scaling_by_length(groups).set_index(["run", "condition", "context_length"])
    # r1 4K full: 19 valid groups, 9 x (1.0 + 0.9) + 1.0 = 18.1 -> 18.1 / 19
    assert by.loc[("r1", "full_context", 4000), "oncu"] == pytest.approx(18.1 / 19)
    assert by.loc[("r1", "full_context", 4000), "valid_groups"] == 19
    # 32K full: pos_09 groups 0.5 and 0.4, the rest clip 0 and -0.1 to 0 -> 0.9 / 20
    assert by.loc[("r2", "full_context", 32000), "oncu"] == pytest.approx(0.9 / 20)
    wide = scaling_length_wide(scaling_by_length(groups)).set_index("run")
    assert list(wide.columns) == [
        "model",
        "dataset",
        "full_context 4K",
        "full_context 32K",
        "retrieved 4K",
        "retrieved 32K",
        "note",
    ]
    assert wide.loc["r2", "full_context 4K"] == pytest.approx(0.95)
    assert wide["note"].isna().all()

    rep = scaling_report(df, n_resamples=500)
    con = rep["contrasts"]
    assert con["run"].tolist() == ["r1"] * 3 + ["r2"] * 3
    r2 = con[con["run"] == "r2"].set_index("contrast")
    # r2: 4K cells 0.95, 32K cells 0 (pos_00..08) and 0.45 -> d = 0.95 x 9, 0.5
    assert r2.loc["length", "mean"] == pytest.approx((0.95 * 9 + 0.5) / 10)
    assert r2.loc["final_decile", "mean"] == pytest.approx(0.45)
    assert r2.loc["retrieved_full", "mean"] == pytest.approx(1 - 0.45 / 10)
    reg = rep["regression"]
    assert len(reg) == 2 * 2 * 4  # runs x conditions x terms
    # retrieved is 1.0 everywhere: nothing to regress, said so
    ret = reg[reg["condition"] == "retrieved"]
    assert ret["coefficient"].isna().all()
    assert ret["note"].str.contains("ONCU is 1.000 in every cell").all()
    full = reg[(reg["run"] == "r2") & (reg["condition"] == "full_context")].set_index("term")
    cc = cells[(cells["run"] == "r2") & (cells["condition"] == "full_context")]
    l2 = np.log2(cc["context_length"].to_numpy(float))
    pf = cc["position_fraction"].to_numpy(float)
    dm = np.abs(pf - 0.5)
    coef, se, _, _ = _reference_ols(cc["oncu"], [l2 - l2.mean(), pf - pf.mean(), dm - dm.mean()])
    np.testing.assert_allclose(full["coefficient"], coef, atol=1e-12)
    np.testing.assert_allclose(full["se"], se, rtol=1e-9)


def test_group_key_without_position_is_a_one_line_value_error():
    with pytest.raises(ValueError, match="keep context_length and evidence_position"):
        scaling_report(_predictions(), group_key=("source", "model"))


# --------------------------------------------------------------- CLI, export and page
_HEADER = [
    "sample_id",
    "model_name",
    "method",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "gold_answer",
    "predicted_answer",
    "gold_evidence_ids",
    "predicted_evidence_ids",
    "cue_applicable",
    "parse_error",
    "answer_f1_relaxed",
]
_GOLD = "alpha beta gamma delta"
#: Gold tokens the answer keeps -> relaxed F1 2k / (k + 4): 0, 0.4, 2/3, 6/7, 1.
_K = {0.0: 0, 0.4: 1, 2 / 3: 2, 6 / 7: 3, 1.0: 4}


def _write_grid(path, full=FULL, retrieved=RETRIEVED, positions=None) -> None:
    """A results file of one model whose groups are single instances (see FULL)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(_HEADER)
        for n in full:
            for d, f1 in enumerate(full[n]):
                pos = positions[d] if positions else f"pos_{d:02d}"
                r = retrieved[n][d]
                for method, value in (
                    ("no_evidence", 0.0),
                    ("oracle", 1.0),
                    ("direct", f1),
                    ("retrieve_then_read", r),
                ):
                    k = next(k for v, k in _K.items() if abs(v - value) < 1e-9)
                    answer = " ".join(_GOLD.split()[:k]) or "none"
                    w.writerow(
                        [
                            f"s{n}_{d}",
                            "m1",
                            method,
                            "toy",
                            "single_hop",
                            "entity",
                            n,
                            pos,
                            "low",
                            "none",
                            _GOLD,
                            answer,
                            "p1",
                            "p1" if k == 4 else "",
                            "True",
                            "",
                            "0",
                        ]
                    )


@pytest.fixture(scope="module")
def grid_db(tmp_path_factory):
    from core.datasets.results import import_results
    from core.store import Store

    tmp = tmp_path_factory.mktemp("scaling")
    db = tmp / "s.duckdb"
    _write_grid(tmp / "toy.csv")
    import_results(Store(db), tmp / "toy.csv", name="toy")
    thirds = {4000: [1.0, 0.4, 2 / 3, 1.0], 8000: [2 / 3, 0.4, 0.0, 1.0]}
    _write_grid(
        tmp / "thirds.csv",
        full=thirds,
        retrieved={n: [1.0] * 4 for n in thirds},
        positions=["front", "middle", "end", "scattered"],
    )
    import_results(Store(db), tmp / "thirds.csv", name="thirds")
    return db


def test_report_scaling_prints_the_paper_layouts(grid_db):
    res = run_cli("report", "scaling", "--db", grid_db, "--run", "toy")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("Scaling OLS over length x position cells (seed 000 Table 30")
    # issue 34: each p column names its test and adjustment
    assert lines[1].split("  ")[0] == "Analysis"
    assert [h.strip() for h in lines[1].split("  ") if h.strip()][-2:] == [
        "p (normal)",
        "p (normal, BH across rows)",
    ]
    ols_rows = [ln for ln in lines if ln.startswith("Scaling OLS (")]
    assert len(ols_rows) == 6  # 3 terms x full context, retrieved
    assert "Scaling OLS (full context)  m1 / toy" in ols_rows[0]
    assert [ln.split()[7] for ln in ols_rows[:3]] == [
        "log2_context_length_centered",
        "position_fraction_centered",
        "distance_from_middle_centered",
    ]
    contrasts = [ln for ln in lines if ln.startswith("Scaling: ")]
    assert [ln.split("  ")[0] for ln in contrasts] == [
        "Scaling: 4K minus 32K full-context ONCU",
        "Scaling: 32K final decile minus early/middle deciles",
        "Scaling: 32K retrieved minus full-context ONCU",
    ]
    # hand values (test_contrasts_on_the_toy_grid_by_hand): 0.793, 0.950 (effect 6.718), 0.779
    assert "4K - 32K full-context ONCU            0.793" in contrasts[0]
    assert "0.950" in contrasts[1] and "6.718" in contrasts[1] and "0.779" in contrasts[2]
    i = lines.index("Mean clipped ONCU by context length (seed 000 Table 10)")
    assert lines[i + 1].split() == ["Full-context", "ONCU", "Retrieved-evidence", "ONCU"]
    assert lines[i + 2].split() == ["Model", "4K", "8K", "32K", "4K", "8K", "32K"]
    # full 1, 2/3, (0.4 + 2/3 + 1) / 10; retrieved 1, 1, (9 + 6/7) / 10
    assert lines[i + 3].split() == [
        "m1",
        "/",
        "toy",
        "1.000",
        "0.667",
        "0.207",
        "1.000",
        "1.000",
        "0.986",
    ]
    assert not [ln for ln in lines if ln.startswith("WARNING")]

    rep = json.loads(
        run_cli(
            "report", "scaling", "--db", grid_db, "--run", "toy", "--json", "--n-resamples", "1000"
        ).stdout
    )
    assert set(rep) == {
        "score_field",
        "distance",
        "p_test",
        "ols_p_test",
        "by_length",
        "contrasts",
        "regression",
        "notes",
    }
    full = [r for r in rep["regression"] if r["condition"] == "full_context"]
    cells = _toy_cells()
    cells = cells[cells["condition"] == "full_context"]
    l2 = np.log2(cells["context_length"].to_numpy(float))
    pf = (np.tile(np.arange(10), 3) + 0.5) / 10
    dm = np.abs(pf - 0.5)
    coef, se, p, r2 = _reference_ols(
        cells["oncu"], [l2 - l2.mean(), pf - pf.mean(), dm - dm.mean()]
    )
    np.testing.assert_allclose([r["coefficient"] for r in full], coef, atol=1e-9)
    np.testing.assert_allclose([r["se"] for r in full], se, rtol=1e-6)
    np.testing.assert_allclose(
        [r["p"] for r in full], 2 * sps.norm.sf(np.abs(coef / se)), rtol=1e-6
    )
    assert {r["p_test"] for r in full} == {"normal"}
    assert full[0]["r_squared"] == pytest.approx(r2) and full[0]["n"] == 30
    by = {(r["condition"], r["context_length"]): r["oncu"] for r in rep["by_length"]}
    assert by["full_context", 32000] == pytest.approx(2.0666667 / 10)
    assert by["retrieved", 32000] == pytest.approx((9 + 6 / 7) / 10)


def test_report_scaling_warns_when_the_data_cannot_support_a_statistic(grid_db):
    res = run_cli("report", "scaling", "--db", grid_db, "--run", "thirds")
    assert res.returncode == 0, res.stderr
    warnings = [ln for ln in res.stdout.splitlines() if ln.startswith("WARNING: ")]
    assert (
        "WARNING: m1 / thirds: 4K - 32K full-context ONCU: no full_context cell with ONCU "
        "at 32K (32000 tokens); lengths present: 4K, 8K"
    ) in warnings
    assert any("retrieved - full at 32K: no retrieved cell with ONCU at 32K" in w for w in warnings)
    assert any(
        "scaling OLS retrieved: scaling OLS not fit: ONCU is 1.000 in every cell" in w
        for w in warnings
    )
    assert (
        "note: m1 / thirds: scaling OLS full_context: left out 2 of 8 cells (0 without a "
        "valid ONCU group, 2 without a numeric length or position fraction)" in res.stdout
    )
    assert "Traceback" not in res.stderr
    res = run_cli("report", "scaling", "--db", grid_db, "--group-key", "source,model")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "keep context_length and evidence_position" in res.stderr


def test_scaling_tables_export_as_csv_and_latex(grid_db, tmp_path):
    from core.export.render import export_table
    from core.figures import Selection
    from core.store import Store

    store, sel = Store(grid_db), Selection(dataset="toy")
    info = export_table(store, "scaling_regression", sel, tmp_path / "reg.csv")
    reg = pd.read_csv(tmp_path / "reg.csv")
    assert info["rows"] == 8 and reg["term"].tolist()[:4] == list(SCALING_TERMS)
    assert reg["n"].tolist()[:4] == [30] * 4 and (reg["left_out"] == 0).all()
    export_table(store, "scaling_contrasts", sel, tmp_path / "con.csv")
    con = pd.read_csv(tmp_path / "con.csv")
    assert con["mean"].tolist() == [0.793, 0.95, 0.779]  # 3 decimals, hand values
    info = export_table(store, "scaling_by_length", sel, tmp_path / "len.tex")
    tex = (tmp_path / "len.tex").read_text()
    assert r"\toprule" in tex and "full\\_context 32K" in tex
    assert "toy & m1 & toy & 1.000 & 0.667 & 0.207 & 1.000 & 1.000 & 0.986" in tex
    export_table(
        store,
        "scaling_regression",
        Selection(dataset="toy", options={"scaling_distance": "end"}),
        tmp_path / "end.csv",
    )
    assert "distance_from_end_centered" in set(pd.read_csv(tmp_path / "end.csv")["term"])


def test_length_page_shows_the_scaling_tables_and_the_notes(grid_db, monkeypatch):
    from conftest import open_page

    at = open_page(monkeypatch, grid_db, "screens/length_position.py", "toy")
    frames = [d.value for d in at.dataframe]
    wide = next(f for f in frames if "full_context 32K" in f.columns)
    assert round(wide["full_context 32K"].iloc[0], 3) == 0.207
    con = next(f for f in frames if "p_holm" in f.columns)
    assert con["mean"].round(3).tolist() == [0.793, 0.95, 0.779]
    # issue 34: p shown as text, a p below 0.001 as "< 0.001" (never 0)
    shown = con["p"].tolist() + con["p_holm"].tolist()
    assert all(isinstance(v, str) for v in shown) and "< 0.001" in shown, shown
    assert not {"0", "0.0", "0.0000"} & set(shown)
    reg = next(f for f in frames if "term" in f.columns and "coefficient" in f.columns)
    assert len(reg) == 8 and reg["left_out"].eq(0).all()
    # the only warning is the small-group one (every group here is one instance)
    assert all("Most valid ONCU groups are tiny" in w.value for w in at.warning)
    at = open_page(monkeypatch, grid_db, "screens/length_position.py", "thirds")
    # the notes as read (Markdown escapes, whichever characters core.views.case.md_escape
    # escapes, removed)
    texts = [w.value.replace("\\", "") for w in at.warning]
    assert any("no full_context cell with ONCU at 32K (32000 tokens)" in t for t in texts), texts
    assert any("no variation to regress" in t for t in texts), texts


def test_p_options_reach_the_tables_and_their_latex_headers(grid_db, tmp_path):
    """issue 34: the published p by default, the earlier p by option; the LaTeX headers name
    the test and the adjustment, a p below 0.001 reads $<0.001$."""
    from core.export.render import export_table
    from core.figures import Selection
    from core.store import Store

    store = Store(grid_db)
    export_table(store, "scaling_contrasts", Selection(dataset="toy"), tmp_path / "con.tex")
    tex = (tmp_path / "con.tex").read_text()
    assert r"$p$ (normal) & $p$ (normal, Holm across runs)" in tex
    assert "$<0.001$" in tex and "0.000" not in tex
    export_table(store, "scaling_regression", Selection(dataset="toy"), tmp_path / "reg.tex")
    tex = (tmp_path / "reg.tex").read_text()
    assert r"$p$ (normal) & $p$ (normal, BH across rows)" in tex
    sel = Selection(dataset="toy", options={"p_test": "bootstrap", "ols_p_test": "t"})
    export_table(store, "scaling_contrasts", sel, tmp_path / "boot.csv")
    assert set(pd.read_csv(tmp_path / "boot.csv")["p_test"]) == {"bootstrap"}
    export_table(store, "scaling_regression", sel, tmp_path / "t.tex")
    assert r"$p$ (t-test, BH across rows)" in (tmp_path / "t.tex").read_text()
    export_table(store, "paired_contrasts", sel, tmp_path / "pc.tex")
    tex = (tmp_path / "pc.tex").read_text()
    assert r"$p$ (bootstrap) & $p$ (bootstrap, Holm across runs)" in tex
    export_table(store, "paired_contrasts", sel, tmp_path / "pc.csv")
    pc = pd.read_csv(tmp_path / "pc.csv")
    assert set(pc["p_test"]) == {"bootstrap"} and pc["p_holm"].notna().all()
