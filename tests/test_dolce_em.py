"""DOLCE EM (Algorithms 1 and 2), categories, thresholds, dip test and the whole pipeline.

``simulate`` draws outcomes from the COW / PIG models themselves (known lambda, k, oracle
share and background noise); ``bench/bench_dolce.py`` times the fits on its output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.dolce import (
    IDK,
    Thresholds,
    assign_category,
    candidate_grid,
    code_outcomes,
    cover_probability_cow,
    default_thresholds,
    dip_scenario,
    fit_cow,
    fit_dolce,
    fit_pig,
    is_idk,
    mixture_curve,
    partial_point_distribution_pig,
)
from core.probes import exponential_ladder

#: Background noise of the simulations: P(x = 0), P(x = 1), P(IDK) without context.
NOISE = (0.5, 0.2, 0.3)
#: The oracle's "chaotic" outcomes below lambda (hybrid component): P(0), P(1), P(IDK).
CHAOS = (0.2, 0.1, 0.7)


def _truth(rng: np.random.Generator, L: int) -> tuple[int, int]:
    # lambda away from the category thresholds (lam_p = k_p = 5 for these ladders), so the
    # true category is well defined: I, II/III, IV and V (L + 1: never answerable from a span).
    lam = int(rng.choice([0, 1, 2, 20, 50, 200, L + 1]))
    k = int(rng.choice([1, 2, 20]))
    if lam >= 1:
        k = min(k, max(1, L // lam))
    return lam, k


def simulate(
    n: int,
    *,
    scenario: str = "COW",
    per_length: int | None = None,
    obs: int | None = None,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Outcomes drawn from the model: one row per probe, and the truth per problem.

    Args:
        n: problems (L uniform in [200, 1000) units, observed on the exponential ladder).
        scenario: ``COW`` (columns ``x``) or ``PIG`` (columns ``s``).
        per_length: observations at every ladder length (default 30).
        obs: total observations per problem instead (spread over the ladder).
        seed: random seed.
    """
    rng = np.random.default_rng(seed)
    rows, truth = [], []
    for i in range(n):
        L = int(rng.integers(200, 1000))
        lam, k = _truth(rng, L)
        p_oracle = float(rng.uniform(0.85, 0.95))
        ladder = exponential_ladder(L)
        if obs is not None:
            base, extra = divmod(obs, len(ladder))
            counts = [base + (j < extra) for j in range(len(ladder))]
        else:
            counts = [per_length or 30] * len(ladder)
        truth.append((i, L, lam, k, p_oracle))
        for C, m in zip(ladder, counts, strict=True):
            if scenario == "COW":
                pi = cover_probability_cow(lam, k, L, C) if lam <= L else 0.0
                for _ in range(m):
                    if rng.random() >= p_oracle:
                        x = int(rng.choice(3, p=NOISE))
                    elif C < lam:
                        x = int(rng.choice(3, p=CHAOS))
                    else:
                        x = 1 if rng.random() < pi else IDK
                    rows.append((i, L, C, x))
            else:
                dist = partial_point_distribution_pig(min(lam, L), k, L, C) if lam <= L else None
                for _ in range(m):
                    if rng.random() >= p_oracle or dist is None:
                        s = np.nan if rng.random() < 0.3 else float(rng.uniform(0, 0.4))
                    elif lam == 0:
                        s = 1.0
                    else:
                        g = int(rng.choice(len(dist), p=dist / dist.sum()))
                        s = np.nan if g == 0 and rng.random() < 0.8 else g / lam
                    rows.append((i, L, C, s))
    col = "x" if scenario == "COW" else "s"
    frame = pd.DataFrame(rows, columns=["problem", "L", "C", col])
    return frame, pd.DataFrame(truth, columns=["problem", "L", "lam", "k", "p_oracle"])


def _categories(lam, k, L) -> np.ndarray:
    th = np.array([default_thresholds(exponential_ladder(int(x)), int(x)) for x in L])
    return assign_category(lam, k, th[:, 0], th[:, 1], th[:, 2])


# ------------------------------------------------------------------ categories & thresholds
def test_assign_category_follows_figure_1():
    lam = [0, 0, 2, 2, 5, 6, 100, 101]
    k = [9, 1, 6, 5, 1, 1, 1, 1]
    got = assign_category(lam, k, 5, 5, 100)
    assert list(got) == ["I", "I", "II", "III", "III", "IV", "IV", "V"]


def test_default_thresholds_first_tertile_and_longest_span():
    # Exponential candidates without 0 and L: 1 2 5 10 20 50 100 200 500 (N=9, p=3 -> 5).
    assert default_thresholds(exponential_ladder(700), 700) == (5.0, 5.0, 500.0)
    # N = 8 (1..200), p = 2 -> 2; the longest span below L = 350 is 200.
    assert default_thresholds(exponential_ladder(350), 350) == (2.0, 2.0, 200.0)
    # Fewer than 3 candidates: p = 1.
    assert default_thresholds([0, 1, 2, 3], 3) == (1.0, 1.0, 2.0)


def test_candidate_grid_adds_zero_max_plus_one_and_L():
    assert list(candidate_grid([5, 1, 2, 5], 40)) == [0, 1, 2, 5, 6, 40]
    assert list(candidate_grid([0, 1, 40], 40)) == [0, 1, 40, 41]
    with pytest.raises(ValueError, match="at least one C"):
        candidate_grid([], 10)


# ------------------------------------------------------------------ outcome coding
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("unanswerable", True),
        ("Unanswerable.", True),
        ("Unknown", True),
        ("I don't know", True),
        ("The text does not contain enough information", True),
        ("cannot be determined from the passage", True),
        ("Draco Labs 07064", False),
        ("no", False),
        ("", False),
        (None, False),
    ],
)
def test_is_idk(answer, expected):
    assert is_idk(answer) is expected


def test_code_outcomes_binarizes_at_threshold_and_marks_idk():
    x, s = code_outcomes(["a", "b", "unanswerable", "c", "d"], [0.5, 0.49, 0.0, np.nan, 1.0])
    assert list(x) == [1, 0, IDK, -1, 1]
    assert s[0] == 0.5 and s[1] == 0.49 and np.isnan(s[2]) and np.isnan(s[3]) and s[4] == 1.0
    x, _ = code_outcomes(["a"], [0.5], threshold=0.75)
    assert list(x) == [0]
    with pytest.raises(ValueError, match="threshold"):
        code_outcomes(["a"], [0.5], threshold=1.5)


def test_dip_test_assigns_bimodal_to_cow_and_spread_to_pig():
    bimodal = [0.0] * 20 + [1.0] * 20
    scenario, p = dip_scenario(bimodal)
    assert scenario == "COW" and p < 0.5
    spread = list(np.linspace(0.0, 1.0, 41))
    scenario, p = dip_scenario(spread)
    assert scenario == "PIG" and p >= 0.5


# ------------------------------------------------------------------ EM recovery
def test_cow_em_recovers_categories_of_simulated_problems():
    frame, truth = simulate(200, scenario="COW", per_length=30, seed=3)
    problems, curves = fit_cow(frame)
    got = problems.merge(truth, on="problem", suffixes=("", "_true"))
    est = _categories(got["lam"], got["k"], got["L"])
    true = _categories(got["lam_true"], got["k_true"], got["L"])
    share = float(np.mean(est == true))
    assert share >= 0.90, f"exact category for {share:.1%} of 200 problems"
    # The mixture curve has one row per observed length, and its shares sum to 1.
    one = curves[curves["problem"] == 0]
    assert len(one) == len(exponential_ladder(int(truth.loc[0, "L"])))
    assert np.allclose(one[["fit_p1", "fit_p0", "fit_pidk"]].sum(axis=1), 1.0)
    assert np.allclose(one[["obs_p1", "obs_p0", "obs_pidk"]].sum(axis=1), 1.0)


def test_cow_em_holistic_problem_needs_the_whole_context():
    # L = 20: "IDK" for every span shorter than 20 units, always right with all 20 shown.
    # lambda = 20, k = 1 explains it exactly (pi(20, 1; 20, 20) = 1, nothing below).
    rows = [("p", 20, C, 1 if C == 20 else IDK) for C in exponential_ladder(20) for _ in range(10)]
    problems, curves = fit_cow(pd.DataFrame(rows, columns=["problem", "L", "C", "x"]))
    row = problems.iloc[0]
    assert (row["lam"], row["k"], row["n_obs"], row["max_C"]) == (20, 1, 60, 20)
    full = curves[curves["C"] == 20].iloc[0]
    assert full["obs_p1"] == 1.0 and full["fit_p1"] > 0.5


def test_pig_em_runs_on_simulated_problems():
    frame, _ = simulate(30, scenario="PIG", per_length=20, seed=5)
    problems, curves = fit_pig(frame)
    assert len(problems) == 30 and set(problems["scenario"]) == {"PIG"}
    assert problems["p_oracle"].between(0, 1).all()
    assert np.isfinite(problems["log_likelihood"]).all()
    # k = 0 is not a PIG candidate (its point mass at s = 0 has unbounded density).
    assert (problems["k"] >= 1).all()
    assert curves["fit_s"].between(0, 1).all()
    again, _ = fit_pig(frame)
    pd.testing.assert_frame_equal(problems, again)


def test_fit_rejects_bad_outcomes():
    with pytest.raises(ValueError, match="outcome x"):
        fit_cow(pd.DataFrame({"problem": [1], "L": [5], "C": [1], "x": [7]}))
    with pytest.raises(ValueError, match="lacks column"):
        fit_cow(pd.DataFrame({"problem": [1], "L": [5], "C": [1]}))
    with pytest.raises(ValueError, match="exceeds"):
        fit_cow(pd.DataFrame({"problem": [1], "L": [5], "C": [6], "x": [1]}))
    with pytest.raises(ValueError, match=r"s must be in \[0, 1\]"):
        fit_pig(pd.DataFrame({"problem": [1], "L": [5], "C": [1], "s": [1.5]}))


# ------------------------------------------------------------------ the pipeline
def _outcomes_from(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": "sim",
            "problem": frame["problem"],
            "L": frame["L"],
            "C": frame["C"],
            "score": np.where(frame["x"] == 1, 1.0, 0.0),
            "idk": frame["x"] == IDK,
            "question": "q" + frame["problem"].astype(str),
        }
    )


def test_fit_dolce_pipeline_categories_thresholds_and_task_distribution():
    frame, truth = simulate(40, scenario="COW", per_length=30, seed=11)
    out = _outcomes_from(frame)
    fit = fit_dolce(out)
    p = fit.problems
    assert list(p["problem"]) == list(range(40))
    assert set(p["scenario"]) <= {"COW", "PIG"}
    assert (p["question"] == "q" + p["problem"].astype(str)).all()
    expected = assign_category(p["lam"], p["k"], p["lam_p"], p["k_p"], p["lam_q"])
    assert list(p["category"]) == list(expected)
    row = fit.tasks.iloc[0]
    assert row["n"] == 40 and sum(row[f"n_{c}"] for c in ("I", "II", "III", "IV", "V")) == 40
    assert row["share_III"] == pytest.approx(row["n_III"] / 40)
    # Overridden thresholds apply to every problem.
    fit2 = fit_dolce(out, scenario="COW", thresholds=Thresholds(lam_p=1000, k_p=-1, lam_q=2000))
    assert set(fit2.problems["category"]) <= {"I", "II"}
    assert fit2.settings["thresholds"] == {"lam_p": 1000, "k_p": -1, "lam_q": 2000}
    curve = mixture_curve(fit, 0)
    assert list(curve["C"]) == sorted(curve["C"])
    with pytest.raises(ValueError, match="unknown problem"):
        mixture_curve(fit, "nope")
    with pytest.raises(ValueError, match="unknown scenario"):
        fit_dolce(out, scenario="BOTH")


def test_fit_dolce_drops_unscored_and_rejects_empty():
    out = pd.DataFrame(
        {"problem": [1, 1], "L": [5, 5], "C": [1, 5], "score": [np.nan, np.nan], "idk": [0, 0]}
    )
    with pytest.raises(ValueError, match="no scored"):
        fit_dolce(out)
