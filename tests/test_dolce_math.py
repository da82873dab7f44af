"""DOLCE closed forms (seed App. A.1, B.1, B.2) against independent counts of the models.

The enumerations and simulations below are written from the generative descriptions in the
paper (k non-overlapping copies of a lambda-unit span / lambda groups of k single units, a
uniformly placed window of C units), not from the closed forms.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, permutations
from math import comb

import numpy as np
import pytest

from core.dolce import closed_forms as dolce
from core.dolce import (
    cover_probability_cow,
    cover_probability_cow_vec,
    partial_point_density_pig,
    partial_point_density_pig_vec,
    partial_point_distribution_pig,
    partial_point_mode_pig,
    partial_point_probability_pig,
    partial_point_probability_pig_vec,
)


# ------------------------------------------------------------------ independent references
def _enumerate_cow(lam: int, k: int, L: int, C: int) -> Fraction:
    """Every placement of k non-overlapping copies x every window start; count covering."""
    total = covered = 0
    for starts in combinations(range(L - lam + 1), k):
        if any(b - a < lam for a, b in zip(starts, starts[1:], strict=False)):
            continue
        for o in range(L - C + 1):
            total += 1
            covered += any(o <= s and s + lam <= o + C for s in starts)
    return Fraction(covered, total)


def _enumerate_pig(lam: int, k: int, L: int, C: int) -> list[Fraction]:
    """Every labelling of L units (lam groups of k units, rest empty) x every window start."""
    labels = [g for g in range(lam) for _ in range(k)] + [-1] * (L - k * lam)
    counts = [0] * (lam + 1)
    total = 0
    for seq in set(permutations(labels)):
        for o in range(L - C + 1):
            counts[len({x for x in seq[o : o + C] if x >= 0})] += 1
            total += 1
    return [Fraction(c, total) for c in counts]


def _mc_cow(lam: int, k: int, L: int, C: int, n: int, rng: np.random.Generator) -> float:
    """Monte Carlo: uniform placement of copies (stars and bars), uniform window start."""
    hits = 0
    for _ in range(n):
        # k gaps + k blocks: choose the blocks' ranks among L - k*lam + k slots.
        ranks = np.sort(rng.choice(L - k * lam + k, size=k, replace=False))
        starts = ranks + np.arange(k) * (lam - 1)
        o = rng.integers(0, L - C + 1)
        hits += bool(np.any((starts >= o) & (starts + lam <= o + C)))
    return hits / n


def _mc_pig(lam: int, k: int, L: int, C: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Monte Carlo: k*lam distinct uniform units split into lam groups, uniform window."""
    counts = np.zeros(lam + 1)
    for _ in range(n):
        pos = rng.choice(L, size=k * lam, replace=False).reshape(lam, k)
        o = rng.integers(0, L - C + 1)
        inside = (pos >= o) & (pos < o + C)
        counts[int(inside.any(axis=1).sum())] += 1
    return counts / n


def _alternating_exact(g: int, lam: int, k: int, L: int, C: int) -> Fraction:
    """The paper's App. B.1 sum, literally, in exact integer arithmetic."""
    d = Fraction(L - C, k) - (lam - g)
    top = min(g, int(d // 1)) if d >= 0 else -1
    acc = sum((-1) ** t * comb(L - k * (lam - g) - t * k, C) * comb(g, t) for t in range(top + 1))
    return Fraction(comb(lam, g) * acc, comb(L, C))


def _comb0(n: int, r: int) -> int:
    return comb(n, r) if 0 <= r <= n else 0


def _cow_exact(lam: int, k: int, L: int, C: int) -> Fraction:
    """App. A.1's closed form in exact rational arithmetic (for very large L)."""
    # binomials of negative tops are 0 (the combinatorial convention)
    w = L - C - k * lam + k
    u = min(C, 2 * lam - 2)
    num = 2 * _comb0(w + lam, k + 1) + Fraction(k - 1, k + 1) * (
        2 * k * lam + 2 * lam + w - 2 * k - k * u - 1
    ) * _comb0(w + u, k)
    return 1 - num / (_comb0(L - k * lam + k, k) * (L - C + 1))


# ------------------------------------------------------------------ COW
def test_cow_matches_exhaustive_enumeration_for_every_small_case():
    checked = 0
    for L in range(1, 10):
        for lam in range(1, L + 1):
            for k in range(1, L // lam + 1):
                for C in range(L + 1):
                    want = _enumerate_cow(lam, k, L, C)
                    assert cover_probability_cow(lam, k, L, C) == pytest.approx(
                        float(want), abs=1e-12
                    ), (lam, k, L, C)
                    checked += 1
    assert checked == 767


def test_cow_hand_checked_values():
    # One unit, one copy: the window covers it with probability C / L.
    assert cover_probability_cow(1, 1, 10, 1) == pytest.approx(0.1, abs=1e-12)
    assert cover_probability_cow(1, 1, 10, 4) == pytest.approx(0.4, abs=1e-12)
    # L = 4, lambda = 2, k = 1, C = 3: copies at 0,1,2 (3 ways) x windows at 0,1 (2 ways);
    # covering pairs: copy 0/window 0, copy 1/window 0, copy 1/window 1, copy 2/window 1 = 4/6.
    assert cover_probability_cow(2, 1, 4, 3) == pytest.approx(4 / 6, abs=1e-12)
    # The edge cases of App. A.1 and the lambda = 0 convention.
    assert cover_probability_cow(3, 0, 10, 5) == 0.0
    assert cover_probability_cow(4, 3, 10, 10) == 0.0  # k * lambda > L
    assert cover_probability_cow(5, 1, 10, 4) == 0.0  # C < lambda
    assert cover_probability_cow(0, 1, 10, 0) == 1.0
    assert cover_probability_cow(3, 2, 10, 10) == 1.0  # the whole context covers everything


@pytest.mark.parametrize(
    ("lam", "k", "L", "C"), [(3, 2, 60, 10), (5, 4, 120, 20), (10, 1, 200, 30), (2, 10, 80, 5)]
)
def test_cow_matches_monte_carlo_placement(lam, k, L, C):
    rng = np.random.default_rng(lam * 1000 + k)
    n = 20_000
    p = cover_probability_cow(lam, k, L, C)
    got = _mc_cow(lam, k, L, C, n, rng)
    assert abs(got - p) <= 4.5 * np.sqrt(p * (1 - p) / n) + 1e-9


def test_cow_vectorized_equals_scalar_and_broadcasts():
    lam = np.array([0, 1, 2, 5, 10, 50])[:, None]
    k = np.array([0, 1, 3, 20])[None, :]
    got = cover_probability_cow_vec(lam, k, 200, 20)
    assert got.shape == (6, 4)
    for i, a in enumerate(lam[:, 0]):
        for j, b in enumerate(k[0]):
            assert got[i, j] == cover_probability_cow(int(a), int(b), 200, 20)


@pytest.mark.parametrize(
    ("lam", "k", "C"), [(1, 1, 10), (100, 5, 5000), (20, 300, 400), (1000, 50, 60_000)]
)
def test_cow_large_L_no_overflow_and_exact(lam, k, C):
    L = 100_000
    got = cover_probability_cow(lam, k, L, C)
    assert np.isfinite(got)
    assert got == pytest.approx(float(_cow_exact(lam, k, L, C)), abs=1e-9)


@pytest.mark.parametrize("bad", [(-1, 1, 10, 5), (1, 1.5, 10, 5), (1, 1, 10, 11), (1, 1, 0, 0)])
def test_cow_rejects_bad_arguments(bad):
    with pytest.raises(ValueError, match="must be"):
        cover_probability_cow(*bad)


# ------------------------------------------------------------------ PIG
def test_pig_matches_exhaustive_enumeration_for_every_small_case():
    checked = 0
    for L in range(1, 8):
        for lam in range(1, L + 1):
            for k in range(1, L // lam + 1):
                for C in range(L + 1):
                    want = _enumerate_pig(lam, k, L, C)
                    got = partial_point_distribution_pig(lam, k, L, C)
                    assert np.allclose(got, [float(w) for w in want], atol=1e-12), (lam, k, L, C)
                    for g in range(lam + 1):
                        assert partial_point_probability_pig(g / lam, lam, k, L, C) == (
                            pytest.approx(float(want[g]), abs=1e-12)
                        )
                    checked += 1
    assert checked == 357


@pytest.mark.parametrize(
    ("lam", "k", "L", "C"), [(4, 3, 100, 15), (10, 2, 150, 30), (6, 5, 90, 40), (3, 1, 50, 10)]
)
def test_pig_matches_monte_carlo_placement(lam, k, L, C):
    rng = np.random.default_rng(lam * 100 + k)
    n = 20_000
    want = partial_point_distribution_pig(lam, k, L, C)
    got = _mc_pig(lam, k, L, C, n, rng)
    tol = 4.5 * np.sqrt(want * (1 - want) / n) + 1e-9
    assert np.all(np.abs(got - want) <= tol)


@pytest.mark.parametrize(
    ("g", "lam", "k", "L", "C"),
    [(3, 5, 2, 40, 10), (30, 40, 2, 400, 150), (45, 60, 3, 500, 300), (10, 20, 7, 300, 120)],
)
def test_pig_equals_the_papers_alternating_sum_in_exact_arithmetic(g, lam, k, L, C):
    # The literal App. B.1 sum cancels catastrophically in floating point for g of a few
    # dozen; the positive-term evaluation must still equal its exact value.
    want = float(_alternating_exact(g, lam, k, L, C))
    got = partial_point_probability_pig_vec(g, lam, k, L, C)
    assert got == pytest.approx(want, rel=1e-8, abs=1e-300)


def test_pig_hand_checked_values_and_conventions():
    # k = 1, lambda = 1: the single aspect unit is shown with probability C / L.
    assert partial_point_probability_pig(1.0, 1, 1, 10, 3) == pytest.approx(0.3, abs=1e-12)
    assert partial_point_probability_pig(0.0, 1, 1, 10, 3) == pytest.approx(0.7, abs=1e-12)
    # lambda = 2, k = 1, L = 4, C = 2: both aspects in a 2-unit window: 1 / binom(4, 2).
    assert partial_point_probability_pig(1.0, 2, 1, 4, 2) == pytest.approx(1 / 6, abs=1e-12)
    assert partial_point_probability_pig(2 / 3, 3, 2, 5, 2) == 0.0  # k * lambda > L
    assert partial_point_probability_pig(0.0, 3, 0, 10, 5) == 1.0  # no copies: nothing covered
    assert partial_point_probability_pig(0.3, 0, 1, 10, 5) == 1.0  # lambda = 0
    with pytest.raises(ValueError, match="multiple of 1/lam"):
        partial_point_probability_pig(0.3, 2, 1, 10, 5)
    with pytest.raises(ValueError, match=r"s must be in \[0, 1\]"):
        partial_point_probability_pig(1.5, 2, 1, 10, 5)


def test_pig_density_interpolates_and_scales_by_lambda_plus_one():
    lam, k, L, C = 4, 2, 60, 12
    dist = partial_point_distribution_pig(lam, k, L, C)
    # At multiples of 1/lambda: (lambda + 1) * rho_tilde.
    for g in range(lam + 1):
        assert partial_point_density_pig(g / lam, lam, k, L, C) == pytest.approx(5 * dist[g])
    # Between them: (lambda^2 + lambda) [(b - s) rho(a) + (s - a) rho(b)].
    s = 0.3  # a = 0.25, b = 0.5
    want = 20 * ((0.5 - s) * dist[1] + (s - 0.25) * dist[2])
    assert partial_point_density_pig(s, lam, k, L, C) == pytest.approx(want)
    vec = partial_point_density_pig_vec(np.array([0.3, 0.5, 1.0]), lam, k, L, C)
    assert vec == pytest.approx([want, 5 * dist[2], 5 * dist[4]])
    assert partial_point_density_pig(0.7, 0, 3, L, C) == 1.0


def test_pig_mode_is_the_argmax_of_the_full_distribution():
    for L in (30, 120):
        for lam in (1, 2, 5, 10, 25):
            for k in (1, 2, 4):
                if k * lam > L:
                    continue
                for C in (0, 1, 5, 20, 30):
                    dist = partial_point_distribution_pig(lam, k, L, C)
                    best = max(g for g in range(lam + 1) if dist[g] >= dist.max() * (1 - 1e-9))
                    assert partial_point_mode_pig(lam, k, L, C) == best / lam
    assert partial_point_mode_pig(0, 1, 10, 3) == 1.0


def test_pig_large_L_no_overflow():
    dist = partial_point_distribution_pig(300, 3, 100_000, 20_000)
    assert np.all(np.isfinite(dist))
    assert dist.sum() == pytest.approx(1.0, abs=1e-8)
    # Hypergeometric mean lambda * (1 - binom(L - k, C) / binom(L, C)) for the covered groups.
    p_out = np.prod([(80_000 - i) / (100_000 - i) for i in range(3)])
    assert (np.arange(301) * dist).sum() == pytest.approx(300 * (1 - p_out), rel=1e-6)


# ------------------------------------------------------------------ PIG evaluation paths
def _surj_exact(g: int, k: int) -> list[int]:
    """Coefficients of ((1 + x)^k - 1)^g (the d-subsets of g groups of k meeting every group)."""
    base = [comb(k, d) for d in range(k + 1)]
    base[0] = 0
    out = [1]
    for _ in range(g):
        nxt = [0] * (len(out) + k)
        for i, a in enumerate(out):
            for j, b in enumerate(base):
                nxt[i + j] += a * b
        out = nxt
    return out


def test_pig_every_evaluation_path_equals_the_exact_sum():
    # Each cell of a small EM-like grid (ladder lengths, candidates 0..L+1) takes the
    # alternating sum where it does not cancel, else the positive form (closed-form weights
    # for k = 2 or g <= 1, the convolution table otherwise); all must equal the exact value.
    cells = []
    for L in (12, 40, 90):
        ladder = [c for c in (0, 1, 2, 5, 10, 20, 50) if c < L] + [L]
        for lam in ladder[1:]:
            for k in ladder[1:]:
                if k * lam <= L:
                    cells += [(g, lam, k, L, C) for C in ladder for g in range(min(lam, C) + 1)]
    g, lam, k, L, C = (np.array(col) for col in zip(*cells, strict=True))
    got = partial_point_probability_pig_vec(g, lam, k, L, C)
    want = np.array([float(_alternating_exact(*map(int, c))) for c in cells])
    assert np.all((got == 0) == (want == 0))
    assert got == pytest.approx(want, rel=1e-10, abs=0)
    # Both evaluations are exercised: the alternating sum is kept for some cells with k >= 2
    # and the positive form (with its table, k >= 3 and g >= 2) is needed for others.
    many = k >= 2
    X = L[many] - (lam[many] - g[many]) * k[many]
    table = dolce._logfact_table(int(L.max()) + 1)
    _, ok = dolce._log_alternating(g[many], k[many], X, C[many], table)
    assert ok.any() and not ok.all()
    assert np.any(~ok & (k[many] >= 3) & (g[many] >= 2))


def test_pig_surjection_table_is_exact_and_independent_of_request_order():
    for k in (3, 5):
        first = dolce._SurjTable(k)
        first.table(2, 4)  # small first, then grown in both directions
        grown = first.table(6, 60).copy()
        fresh = dolce._SurjTable(k).table(6, 60)
        assert np.array_equal(grown[:7, : fresh.shape[1]], fresh[:7])
        for g in range(7):
            want = _surj_exact(g, k)
            for d in range(g, min(g * k, 60) + 1):
                assert np.exp(grown[g, d - g]) == pytest.approx(want[d], rel=1e-12)


def test_pig_values_do_not_depend_on_chunking_or_cached_tables(monkeypatch):
    rng = np.random.default_rng(3)
    L = rng.integers(50, 400, 300)
    lam = rng.integers(1, 30, 300)
    k = np.maximum(1, L // lam // rng.integers(1, 4, 300))
    C = rng.integers(0, L + 1)
    g = np.minimum(rng.integers(0, 30, 300), np.minimum(lam, C))
    want = partial_point_probability_pig_vec(g, lam, k, L, C)
    monkeypatch.setattr(dolce, "_CHUNK_TERMS", 7)
    monkeypatch.setattr(dolce, "_SURJ_TABLES", {})
    got = np.concatenate(
        [
            partial_point_probability_pig_vec(g[i::3], lam[i::3], k[i::3], L[i::3], C[i::3])
            for i in range(3)
        ]
    )
    order = np.concatenate([np.arange(300)[i::3] for i in range(3)])
    assert np.array_equal(got, want[order])
