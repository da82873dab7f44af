"""DOLCE EM (Algorithms 1 and 2), categories, thresholds, dip test and the whole pipeline.

``simulate`` draws outcomes from the COW / PIG models themselves (known lambda, k, oracle
share and background noise); ``bench/bench_dolce.py`` times the fits on its output.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from math import comb

import numpy as np
import pandas as pd
import pytest

from core.dolce import (
    IDK,
    NOT_COVERED,
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
    partial_point_density_pig,
    partial_point_distribution_pig,
    partial_point_mode_pig,
)
from core.dolce.probes import exponential_ladder

#: Background noise of the simulations: P(x = 0), P(x = 1), P(IDK) without context.
NOISE = (0.5, 0.2, 0.3)
#: The oracle's "chaotic" outcomes below lambda (hybrid component): P(0), P(1), P(IDK).
CHAOS = (0.2, 0.1, 0.7)


def _truth(rng: np.random.Generator, L: int) -> tuple[int, int]:
    # lambda away from the category thresholds (lam_p = k_p = 5 or 10 here), so the
    # true category is well defined: I, II/III, IV and V (L + 1: never answerable from a span;
    # under PIG, which needs k * lambda <= L, simulate() turns it into lambda = L, k = 1).
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
    lengths: tuple[int, ...] | None = None,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Outcomes drawn from the model: one row per probe, and the truth per problem.

    Args:
        n: problems (L uniform in [200, 1000) units unless ``lengths`` is given, observed on the
            exponential ladder).
        scenario: ``COW`` (columns ``x``) or ``PIG`` (columns ``s``).
        per_length: observations at every ladder length (default 30).
        obs: total observations per problem instead (spread over the ladder).
        lengths: draw L from these instead (short contexts keep exact references cheap).
        seed: random seed.
    """
    rng = np.random.default_rng(seed)
    rows, truth = [], []
    for i in range(n):
        L = int(rng.choice(lengths)) if lengths else int(rng.integers(200, 1000))
        lam, k = _truth(rng, L)
        p_oracle = float(rng.uniform(0.85, 0.95))
        ladder = exponential_ladder(L)
        if obs is not None:
            base, extra = divmod(obs, len(ladder))
            counts = [base + (j < extra) for j in range(len(ladder))]
        else:
            counts = [per_length or 30] * len(ladder)
        if scenario != "COW" and lam > L:
            # Assumption 2 needs k * lambda <= L: the most aspects a PIG context can hold is
            # L single units (lambda = L, k = 1; s = C / L surely), still above lam_q (V).
            lam, k = L, 1
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
                dist = partial_point_distribution_pig(lam, k, L, C)
                for _ in range(m):
                    if rng.random() >= p_oracle:
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


def row_count(frame: pd.DataFrame, col: str) -> int:
    """The single row's ``col`` as an int."""
    return int(frame[col].iloc[0])


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
    # The candidate at index floor(N/3) counted from 0 (seed §4; Table 2: tests/
    # test_dolce_table2.py). Without 0 and L: 1 2 5 10 20 50 100 200 500 (N=9, p=3 -> 10).
    assert default_thresholds(exponential_ladder(700), 700) == (10.0, 10.0, 500.0)
    # N = 8 (1..200), p = 2 -> 5; the longest span below L = 350 is 200.
    assert default_thresholds(exponential_ladder(350), 350) == (5.0, 5.0, 200.0)
    # Fewer than 3 candidates: p = 0, the smallest.
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


@pytest.mark.parametrize("estimator", ["likelihood", "published"])
def test_pig_em_runs_on_simulated_problems(estimator):
    frame, _ = simulate(30, scenario="PIG", per_length=20, seed=5)
    problems, curves = fit_pig(frame, estimator=estimator)
    assert set(problems["estimator"]) == {estimator}
    assert len(problems) == 30 and set(problems["scenario"]) == {"PIG"}
    assert problems["p_oracle"].between(0, 1).all()
    assert np.isfinite(problems["log_likelihood"]).all()
    # k = 0 is not a PIG candidate (its point mass at s = 0 has unbounded density).
    assert (problems["k"] >= 1).all()
    assert curves["fit_s"].between(0, 1).all()
    again, _ = fit_pig(frame, estimator=estimator)
    pd.testing.assert_frame_equal(problems, again)


def test_pig_published_em_recovers_the_redundancy_side_of_simulated_problems():
    # What Algorithm 2 (the published estimator) can identify (core.dolce.em docstring): k,
    # through the mean score curve E[s | C] = 1 - binom(L - k, C) / binom(L, C). Whether k
    # exceeds the category threshold k_p (the II/III split) is recovered for >= 90% of the
    # problems whose oracle covers something (1 <= lambda <= L); lambda, and with it
    # categories I-V, is not: exact categories come out for only 37-52% at 30, 100 or 300
    # spans per length, noise or not.
    frame, truth = simulate(200, scenario="PIG", per_length=30, seed=3)
    problems, curves = fit_pig(frame, estimator="published")
    got = problems.merge(truth, on="problem", suffixes=("", "_true"))
    live = (got["lam_true"] >= 1) & (got["lam_true"] <= got["L"])
    assert live.sum() >= 150
    k_p = np.array([default_thresholds(exponential_ladder(int(x)), int(x))[1] for x in got["L"]])
    share = float(np.mean(((got["k"] > k_p) == (got["k_true"] > k_p))[live]))
    assert share >= 0.90, f"k > k_p recovered for {share:.1%} of {int(live.sum())} problems"
    # The fitted mixture follows the observed mean score curve.
    err = (curves["fit_s"] - curves["obs_s"]).abs()
    assert float(err.mean()) < 0.15


def test_pig_algorithm_2_likelihood_does_not_identify_lambda():
    # Why PIG categories are not recovered: Algorithm 2 scores (lambda, k) by rho at the
    # per-length oracle hit rate, whose expectation does not depend on lambda, while the
    # (lambda + 1)-scaled density at that point grows with lambda. With noise-free data and
    # infinitely many spans, lambda = 200 beats the true lambda = 2 at every length.
    L, k = 700, 2
    for C in exponential_ladder(L):
        means = []
        for lam in (2, 20, 200):
            dist = partial_point_distribution_pig(lam, k, L, C)
            means.append(float(np.arange(lam + 1) @ dist) / lam)
        want = 1.0 - comb(L - k, C) / comb(L, C)
        assert means == pytest.approx([want] * 3, abs=1e-9)
        dens = [partial_point_density_pig(want, lam, k, L, C) for lam in (2, 20, 200)]
        assert dens[0] < dens[1] < dens[2], (C, dens)


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
    # COW fits with k = 0 (the simulated lambda = L + 1: never answerable) are in no category.
    expected = np.where(p["k"] == 0, NOT_COVERED, expected)
    assert list(p["category"]) == list(expected)
    assert (p["k"] == 0).sum() == 4 and row_count(fit.tasks, "n_not_covered") == 4
    row = fit.tasks.iloc[0]
    cats = sum(row[f"n_{c}"] for c in ("I", "II", "III", "IV", "V"))
    assert row["n"] == 40 and cats + row["n_not_covered"] == 40
    assert row["share_III"] == pytest.approx(row["n_III"] / 40)
    # Overridden thresholds apply to every problem.
    fit2 = fit_dolce(out, scenario="COW", thresholds=Thresholds(lam_p=1000, k_p=-1, lam_q=2000))
    assert set(fit2.problems["category"]) <= {"I", "II", NOT_COVERED}
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


# ------------------------------------------------------------------ PIG EM against a reference
@lru_cache(maxsize=None)
def _rho_tilde_exact(g: int, lam: int, k: int, L: int, C: int) -> float:
    """rho-tilde from the paper's alternating sum in exact integer arithmetic."""
    if lam == 0:
        return 1.0
    if k * lam > L or not 0 <= g <= min(lam, C):
        return 0.0
    X = L - (lam - g) * k
    acc = sum((-1) ** t * comb(g, t) * comb(X - t * k, C) for t in range(g + 1) if X - t * k >= C)
    return float(Fraction(comb(lam, g) * acc, comb(L, C)))


def _rho_exact(s: float, lam: int, k: int, L: int, C: int) -> float:
    """App. B.2: (lambda + 1) rho-tilde, linearly interpolated between multiples of 1/lambda."""
    if lam == 0:
        return 1.0
    x = min(max(s, 0.0), 1.0) * lam
    near = round(x)
    if abs(x - near) <= 1e-9 * max(lam, 1):
        lo, frac = near, 0.0
    else:
        lo, frac = math.floor(x), x - math.floor(x)
    hi = _rho_tilde_exact(lo + 1, lam, k, L, C) if frac > 0 else 0.0
    return (lam + 1) * ((1.0 - frac) * _rho_tilde_exact(lo, lam, k, L, C) + frac * hi)


def _reference_fit_pig(frame: pd.DataFrame, steps: int = 5) -> tuple[pd.DataFrame, dict]:
    """Algorithm 2 written plainly: one problem and one (lambda, k) at a time, exact rho."""
    probs = []
    for pid, f in frame.groupby("problem", sort=False):
        L = int(f["L"].max())
        Cs = sorted(int(c) for c in f["C"].unique())
        y, n = [], []
        for C in Cs:
            s = f.loc[f["C"] == C, "s"].to_numpy(dtype=float)
            ok = s[~np.isnan(s)]
            y.append([float(np.sum(1.0 - ok)), float(np.sum(ok)), float(np.isnan(s).sum())])
            n.append(len(s))
        probs.append(
            {
                "id": pid,
                "L": L,
                "C": Cs,
                "y": y,
                "n": n,
                "cand": [int(c) for c in candidate_grid(Cs, L)],
                "q": [[0.5] * 3 for _ in Cs],
                "prior": 0.5,
            }
        )
    for _ in range(steps):
        w = [
            sum(p["q"][c][v] * p["y"][c][v] for p in probs for c in range(len(p["C"])))
            for v in range(3)
        ]
        p_n = [x / max(sum(w), 1e-300) for x in w]
        for p in probs:
            p_o = []
            for c in range(len(p["C"])):
                wo = [(1.0 - p["q"][c][v]) * p["y"][c][v] for v in range(3)]
                tot = sum(wo)
                p_o.append([x / tot for x in wo] if tot > 0 else [1.0 / 3.0] * 3)
            best = None
            for lam in p["cand"]:
                for k in p["cand"]:
                    if k < 1:
                        continue
                    rho = [_rho_exact(p_o[c][1], lam, k, p["L"], C) for c, C in enumerate(p["C"])]
                    mix = [r * p["prior"] + (1.0 - p["prior"]) for r in rho]
                    ll = sum(n * math.log(m) for n, m in zip(p["n"], mix, strict=True) if n > 0)
                    if best is None or ll > best[0]:
                        best = (ll, lam, k, rho)
            _, lam, k, p["rho"] = best
            p["lam"], p["k"] = lam, k
            oracle = sum(
                (1.0 - p["q"][c][v]) * p["y"][c][v] for c in range(len(p["C"])) for v in range(3)
            )
            for c, C in enumerate(p["C"]):
                mode = partial_point_mode_pig(lam, k, p["L"], C)
                rest = p_o[c][0] + p_o[c][2]
                share0 = p_o[c][0] / rest if rest > 0 else 0.5
                p_o[c] = [(1.0 - mode) * share0, mode, (1.0 - mode) * (1.0 - share0)]
            p["prior"] = oracle / sum(p["n"])
            for c in range(len(p["C"])):
                num = [p_n[v] * (1.0 - p["prior"]) for v in range(3)]
                tot = [num[v] + p_o[c][v] * p["prior"] for v in range(3)]
                p["q"][c] = [num[v] / tot[v] if tot[v] > 0 else 0.5 for v in range(3)]
            p["p_o"] = p_o
        p_n_last = p_n
    rows, fit_s = [], {}
    for p in probs:
        po = p["prior"]
        ll = sum(
            n * math.log(r * po + (1.0 - po))
            for n, r in zip(p["n"], p["rho"], strict=True)
            if n > 0
        )
        rows.append((p["id"], p["lam"], p["k"], po, ll))
        for c, C in enumerate(p["C"]):
            fit_s[(p["id"], C)] = p["p_o"][c][1] * po + p_n_last[1] * (1.0 - po)
    return pd.DataFrame(rows, columns=["problem", "lam", "k", "p_oracle", "log_likelihood"]), fit_s


@pytest.mark.parametrize("seed", [1, 2])
def test_pig_em_equals_a_plain_per_problem_reference(seed):
    # The vectorized grid (cached rho-tilde, alternating / positive sums, reused modes) must
    # pick the same (lambda, k) as a loop over problems and grid points with exact rho, with
    # log-likelihoods within 1e-9.
    frame, _ = simulate(16, scenario="PIG", per_length=3, lengths=(6, 20, 45, 90), seed=seed)
    problems, curves = fit_pig(frame, estimator="published")
    want, fit_s = _reference_fit_pig(frame)
    assert list(problems["problem"]) == list(want["problem"])
    assert list(problems["lam"]) == list(want["lam"])
    assert list(problems["k"]) == list(want["k"])
    assert problems["p_oracle"].to_numpy() == pytest.approx(want["p_oracle"], abs=1e-12)
    assert np.abs(problems["log_likelihood"] - want["log_likelihood"]).max() < 1e-9
    got_s = [fit_s[(p, c)] for p, c in zip(curves["problem"], curves["C"], strict=True)]
    assert curves["fit_s"].to_numpy() == pytest.approx(got_s, abs=1e-12)
    assert len(set(want["lam"])) >= 4  # closed book, short, long and holistic problems
