"""The PIG likelihood estimator (issue 16 item 1): hand-checked values and a plain reference.

``observation_probability`` is checked against hypergeometric / inclusion-exclusion counts
worked out by hand; the EM against a hand-run of its steps on a problem small enough to
follow, and against a plain loop over problems, candidates and observations.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
from test_dolce_em import simulate

from core.dolce import fit_dolce, fit_pig, observation_probability
from core.dolce.categories import candidate_grid
from core.dolce.likelihood import PRIOR_STEPS


# ------------------------------------------------------------------ one observation
def test_observation_probability_hypergeometric_k1():
    # L = 10, C = 5, lambda = 2 aspects of k = 1 unit: P(g covered) = C(2,g) C(8,5-g) / C(10,5)
    # = 56/252, 140/252, 56/252 = 2/9, 5/9, 2/9.
    assert observation_probability(0.5, 2, 1, 10, 5) == pytest.approx(5 / 9, abs=1e-12)
    assert observation_probability(1.0, 2, 1, 10, 5) == pytest.approx(2 / 9, abs=1e-12)
    # A score of 0 or IDK: P(g = 0) = 2/9 split by the oracle's IDK share eta.
    assert observation_probability(0.0, 2, 1, 10, 5, eta=0.25) == pytest.approx(2 / 9 * 0.75)
    assert observation_probability(None, 2, 1, 10, 5, eta=0.25) == pytest.approx(2 / 9 * 0.25)
    assert observation_probability(float("nan"), 2, 1, 10, 5, eta=0.25) == pytest.approx(1 / 18)


def test_observation_probability_k2_by_hand():
    # L = 6, lambda = 2 groups of k = 2 units (4 units) and 2 free units; a span of C = 2:
    # 15 pairs; none of the 4 aspect units: 1 pair (1/15); one unit of each group: 2 x 2 = 4
    # pairs (4/15); exactly one group: the other 10 pairs (2/3).
    assert observation_probability(0.0, 2, 2, 6, 2, eta=0.0) == pytest.approx(1 / 15)
    assert observation_probability(0.5, 2, 2, 6, 2) == pytest.approx(2 / 3)
    assert observation_probability(1.0, 2, 2, 6, 2) == pytest.approx(4 / 15)


def test_off_lattice_scores_and_the_tolerance_window():
    # 0.3 is not within 0.005 of 0, 0.5 or 1 (lambda = 2): the oracle cannot give it.
    assert observation_probability(0.3, 2, 1, 10, 5) == 0.0
    # 0.503 is within 0.005 of 0.5: the lattice point's 5/9; with tolerance 0.002 it is not.
    assert observation_probability(0.503, 2, 1, 10, 5) == pytest.approx(5 / 9)
    assert observation_probability(0.503, 2, 1, 10, 5, tolerance=0.002) == 0.0
    # A window holding two interior lattice points sums them: L = 6, C = 3, lambda = 4, k = 1
    # gives C(4,g) C(2,3-g) / 20 = 0.2, 0.6, 0.2 for g = 1, 2, 3; s = 0.375 +- 0.13 holds
    # 0.25 and 0.5: 0.2 + 0.6.
    assert observation_probability(0.375, 4, 1, 6, 3, tolerance=0.13) == pytest.approx(0.8)
    # Endpoints are exact outcomes, not interior windows: 0.003 is no score of 0.
    assert observation_probability(0.003, 2, 1, 10, 5, tolerance=0.1) == 0.0
    # Closed book (lambda = 0): the oracle scores 1; k * lambda > L is impossible.
    assert observation_probability(1.0, 0, 1, 10, 5) == 1.0
    assert observation_probability(0.5, 0, 1, 10, 5) == 0.0
    assert observation_probability(0.5, 6, 2, 10, 5) == 0.0
    with pytest.raises(ValueError, match="tolerance"):
        observation_probability(0.5, 2, 1, 10, 5, tolerance=0.0)
    with pytest.raises(ValueError, match=r"s must be in \[0, 1\]"):
        observation_probability(1.5, 2, 1, 10, 5)


# ------------------------------------------------------------------ the EM by hand
def test_em_by_hand_on_a_one_unit_context():
    # L = 1: the empty span (C = 0) scores 0, the whole context (C = 1) scores 1. Candidates
    # 0, 1, 2 (0, max C + 1 = 2, L = 1); lambda = 1, k = 1 gives both outcomes surely, every
    # other valid candidate gives one of them probability 0 (lambda = 0 never scores 0).
    # Step 1: q = 0.5, so the noise is p_N(0) = p_N(1) = 1/2; eta = 0 (no IDK). The candidate's
    # own P(O) from 1/2 by PRIOR_STEPS = 3 EM steps on it: pi <- pi / (pi + (1 - pi) / 2),
    # i.e. 1/2 -> 2/3 -> 4/5 -> 8/9. The log-likelihood: 2 log(8/9 + 1/9 * 1/2) = 2 log(17/18).
    assert PRIOR_STEPS == 3
    frame = pd.DataFrame({"problem": ["p", "p"], "L": [1, 1], "C": [0, 1], "s": [0.0, 1.0]})
    problems, curves = fit_pig(frame, steps=1)
    row = problems.iloc[0]
    assert (row["lam"], row["k"], row["estimator"]) == (1, 1, "likelihood")
    assert row["p_oracle"] == pytest.approx(8 / 9, abs=1e-12)
    assert row["log_likelihood"] == pytest.approx(2 * math.log(17 / 18), abs=1e-12)
    # Step 2: q(O) = (8/9) / (17/18) = 16/17 for both, so the noise is again 1/2, 1/2, and
    # three more prior steps give 16/17 -> 32/33 -> 64/65: log-likelihood 2 log(129/130).
    problems, curves = fit_pig(frame, steps=2)
    assert problems["p_oracle"].iloc[0] == pytest.approx(64 / 65, abs=1e-12)
    assert problems["log_likelihood"].iloc[0] == pytest.approx(2 * math.log(129 / 130), abs=1e-12)
    # The fitted mean score: the oracle's 1 - binom(L - k, C) / binom(L, C) (0 at C = 0, 1
    # at C = 1) x 64/65 + the noise's mean score (1/2) x 1/65.
    assert list(curves["fit_s"]) == pytest.approx([0.5 / 65, 64 / 65 + 0.5 / 65], abs=1e-12)


def test_fit_dolce_pig_uses_the_likelihood_estimator_by_default():
    frame = pd.DataFrame(
        {
            "problem": ["p", "p"],
            "L": [1, 1],
            "C": [0, 1],
            "score": [0.0, 1.0],
            "idk": [False, False],
        }
    )
    fit = fit_dolce(frame, scenario="PIG")
    assert fit.settings["pig_estimator"] == "likelihood" and fit.settings["pig_steps"] == 10
    assert fit.problems["estimator"].iloc[0] == "likelihood"
    assert bool(fit.problems["identified"].iloc[0]) is True
    pub = fit_dolce(frame, scenario="PIG", pig_estimator="published")
    assert pub.settings["pig_steps"] == 5
    assert list(pub.problems["estimator"]) == ["published"]
    assert list(pub.problems["identified"]) == [False]
    assert int(pub.tasks["n_not_identified"].iloc[0]) == 1
    with pytest.raises(ValueError, match="unknown PIG estimator 'nope'; choose one of"):
        fit_dolce(frame, scenario="PIG", pig_estimator="nope")
    with pytest.raises(ValueError, match="tolerance"):
        fit_dolce(frame, scenario="PIG", pig_tolerance=0.7)


# ------------------------------------------------------------------ against a plain reference
_TINY = 1e-300


@lru_cache(maxsize=None)
def _p_oracle(s: float, lam: int, k: int, L: int, C: int, eta: float) -> float:
    return observation_probability(None if math.isnan(s) else s, lam, k, L, C, eta=eta)


def _noise(s: float, p_n: list[float], tol: float = 0.005) -> float:
    if math.isnan(s):
        return p_n[2]
    if s == 0.0:
        return p_n[0]
    if s == 1.0:
        return p_n[1]
    return p_n[3] * (min(s + tol, 1.0) - max(s - tol, 0.0))


def _cls(s: float) -> int:
    return 2 if math.isnan(s) else 0 if s == 0.0 else 1 if s == 1.0 else 3


def _reference(frame: pd.DataFrame, steps: int) -> pd.DataFrame:
    """The estimator written plainly: one problem, candidate and observation at a time."""
    probs = []
    for pid, f in frame.groupby("problem", sort=False):
        L = int(f["L"].max())
        obs = [(int(c), float(s)) for c, s in zip(f["C"], f["s"])]
        cand = [int(c) for c in candidate_grid([c for c, _ in obs], L)]
        probs.append(
            {"id": pid, "L": L, "obs": obs, "q": [0.5] * len(obs), "prior": 0.5, "cand": cand}
        )
    for _ in range(steps):
        w = [0.0] * 4
        for p in probs:
            for (_, s), q in zip(p["obs"], p["q"]):
                w[_cls(s)] += 1.0 - q
        p_n = [x / sum(w) for x in w]
        for p in probs:
            eta = {}
            for C in {c for c, _ in p["obs"]}:
                idk = sum(q for (c, s), q in zip(p["obs"], p["q"]) if c == C and _cls(s) == 2)
                zero = sum(q for (c, s), q in zip(p["obs"], p["q"]) if c == C and _cls(s) == 0)
                eta[C] = idk / (idk + zero) if idk + zero > 0 else 0.5
            pn = [_noise(s, p_n) for _, s in p["obs"]]
            best = None
            for lam in p["cand"]:
                for k in p["cand"]:
                    if k < 1 or (lam > 0 and lam * k > p["L"]):
                        continue
                    po = [_p_oracle(s, lam, k, p["L"], C, eta[C]) for C, s in p["obs"]]
                    pi = p["prior"]
                    for _ in range(PRIOR_STEPS):
                        resp = sum(
                            pi * o / max(pi * o + (1 - pi) * n, _TINY) for o, n in zip(po, pn)
                        )
                        pi = min(max(resp / len(po), 1e-6), 1.0)
                    ll = sum(math.log(max(pi * o + (1 - pi) * n, _TINY)) for o, n in zip(po, pn))
                    if best is None or ll > best[0]:
                        best = (ll, lam, k, pi, po)
            _, p["lam"], p["k"], p["prior"], po = best
            p["q"] = [
                p["prior"] * o / max(p["prior"] * o + (1 - p["prior"]) * n, _TINY)
                for o, n in zip(po, pn)
            ]
            p["ll"] = sum(
                math.log(max(p["prior"] * o + (1 - p["prior"]) * n, _TINY)) for o, n in zip(po, pn)
            )
    rows = [(p["id"], p["lam"], p["k"], p["prior"], p["ll"]) for p in probs]
    return pd.DataFrame(rows, columns=["problem", "lam", "k", "p_oracle", "log_likelihood"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_likelihood_em_equals_a_plain_per_problem_reference(seed):
    # Simulated with background noise (IDK and uniform scores in [0, 0.4], off every lattice
    # but the finest) and the oracle's IDK for spans that cover nothing.
    frame, _ = simulate(12, scenario="PIG", per_length=3, lengths=(6, 20, 45), seed=seed)
    problems, _ = fit_pig(frame, steps=3)
    want = _reference(frame, steps=3)
    assert list(problems["problem"]) == list(want["problem"])
    assert list(problems["lam"]) == list(want["lam"])
    assert list(problems["k"]) == list(want["k"])
    assert problems["p_oracle"].to_numpy() == pytest.approx(want["p_oracle"], abs=1e-9)
    assert np.abs(problems["log_likelihood"] - want["log_likelihood"]).max() < 1e-8
    assert len(set(want["lam"])) >= 3
