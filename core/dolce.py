"""DOLCE: complexity lambda and redundancy k of a problem from span-sampling probes (SPEC §8).

Seed ``dolce_lambda_k.txt``: §3 (the COW and PIG outcome models), App. A.1 (the COW cover
probability pi), App. B (the PIG partial-point probability rho-tilde and its interpolated,
``(lambda + 1)``-scaled density rho), App. C (Algorithms 1 and 2: EM with a task-level
non-parametric background-noise component and a problem-level hybrid oracle component) and the
focus categories I-V of Figure 1 with the thresholds of §4.

Generative models (what the closed forms count):

- **COW** (Assumption 1): ``k`` non-overlapping copies of a ``lambda``-unit sufficient span sit
  in a context of ``L`` units, every placement equally likely (``binom(L - k*lambda + k, k)``
  placements); an observation span of ``C`` contiguous units starts uniformly in
  ``[0, L - C]``. The oracle answers ("1") iff the observation contains one whole copy, and
  says "IDK" otherwise: ``pi(lambda, k; L, C)`` is the probability of covering.
- **PIG** (Assumption 2): ``lambda`` aspects, each repeated as ``k`` single units, all
  ``k * lambda`` units distinct and uniformly placed; a group is covered when the observation
  contains at least one of its ``k`` units; ``rho_tilde(s)`` is the probability that exactly
  ``s * lambda`` groups are covered.

Numerics. Binomials are computed in log space (``scipy.special.gammaln``), so nothing overflows
for ``L`` up to 100,000 units and beyond. rho-tilde is the paper's inclusion-exclusion sum
``binom(lambda, g) / binom(L, C) * sum_t (-1)^t binom(g, t) binom(L - (lambda - g + t) k, C)``
(``g = s * lambda``), a ``g``-th finite difference whose terms cancel catastrophically once
``g`` is a few dozen. Each cell takes the cheaper of two evaluations:

- the alternating sum itself (``g + 1`` terms), kept only where it is well conditioned
  (``sum |terms| <= 1.5 |sum|``, so its rounding error stays that of a positive sum);
- the positive form, counting the covering spans by how many units ``d`` of the ``g`` covered
  groups they hold:

      sum_t (-1)^t binom(g, t) binom(X - t k, C) = sum_d Surj_k(g, d) binom(L - lambda k, C - d),
      Surj_k(g, d) = [x^d] ((1 + x)^k - 1)^g,  X = L - (lambda - g) k,

  whose terms are all positive, at most ``min(g k, C) - g + 1`` of them (``k = 1``: the
  hypergeometric pmf; ``g = 1``: ``binom(k, d)``; ``k = 2``: ``binom(g, d - g) 2^(2g - d)``;
  otherwise a per-``k`` table built by repeated convolution in log space).

The EM grid (``problems x lambda x k x C``) is evaluated in one flat, vectorized pass per
step, and only where ``floor(s lambda)`` moved since the last step. The tests check every
path against the literal alternating sum in exact integer arithmetic, exhaustive enumeration
and Monte Carlo placement, and the EM against a plain per-problem reference.

PIG identifiability (a limit of Algorithm 2, which is implemented line by line). Algorithm 2
scores a candidate ``(lambda, k)`` by rho at the per-length oracle hit rate
``P_{i,C}(y = 1 | O)`` (line 1108), not at each observed score, so the data enter only through
the mean score curve over C. That curve's expectation, ``1 - binom(L - k, C) / binom(L, C)``
(the chance that one group is covered), does not depend on lambda; lambda only sets how peaked
rho-tilde is around it, and the ``(lambda + 1)``-scaled density there grows with lambda (about
``sqrt(lambda)``). The brute-force argmax therefore identifies k, but for lambda it favours the
large candidates compatible with the curve (``k * lambda <= L``), whatever the true lambda:
on 200 simulated problems (``tests/test_dolce_em.py``) the exact category comes out for
37-52% at 30, 100 or 300 spans per length, with or without background noise, while whether
``k > k_p`` is recovered for 92-98%. Evaluating rho at each observation's own score does not
cure it either (56-61%): scores of 0 / IDK at short C get ``(lambda + 1) * P(0 groups)``,
again largest for large lambda. PIG categories (and lambda) are thus reported as the paper's
algorithm gives them and should be read with this bias in mind; k is the reliable output.

Conventions beyond the paper (documented because estimates depend on them):

- ``lambda = 0`` (closed book): the empty span is always covered, ``pi = 1`` for ``k >= 1``.
  For PIG the formula gives ``rho_tilde = 1`` for every ``s`` (``s * 0 = 0``), so rho is the
  uniform density 1; its mode is taken as ``s = 1`` (full points without context).
- ``k = 0``: no copy exists; ``pi = 0`` and PIG covers no group (``s = 0`` surely).
- Ties in the brute-force argmax go to the smallest lambda, then the smallest k.
- The non-parametric oracle distribution of Algorithm 1 is undefined when no observation (or
  no oracle weight) lies below lambda; it is then uniform (1/3 each) and unused or harmless.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import gammaln

__all__ = [
    "CATEGORIES",
    "CATEGORY_NAMES",
    "COW_STEPS",
    "DolceFit",
    "IDK",
    "PIG_STEPS",
    "Thresholds",
    "assign_category",
    "candidate_grid",
    "category_distribution",
    "code_outcomes",
    "cover_probability_cow",
    "cover_probability_cow_vec",
    "default_thresholds",
    "dip_scenario",
    "fit_cow",
    "fit_dolce",
    "fit_pig",
    "is_idk",
    "mixture_curve",
    "outcomes_from_probes",
    "partial_point_density_pig",
    "partial_point_density_pig_vec",
    "partial_point_distribution_pig",
    "partial_point_mode_pig",
    "partial_point_probability_pig",
    "partial_point_probability_pig_vec",
]

#: Outcome code of "I don't know" (COW outcomes are 1, 0 or IDK).
IDK = 2
#: EM steps of Algorithm 1 (COW) and Algorithm 2 (PIG), as in the paper (§4).
COW_STEPS = 10
PIG_STEPS = 5
#: Focus categories of Figure 1, in order.
CATEGORIES = ("I", "II", "III", "IV", "V")
#: What each category means (shown in the UI).
CATEGORY_NAMES = {
    "I": "closed-book / zero-shot (lambda = 0)",
    "II": "easy (lambda <= lambda_p, k > k_p)",
    "III": "retrieval (lambda <= lambda_p, k <= k_p)",
    "IV": "balanced (lambda_p < lambda <= lambda_q)",
    "V": "holistic understanding (lambda > lambda_q)",
}

_TINY = 1e-300


# ================================================================== binomials in log space
def _log_binom(n: Any, r: Any) -> np.ndarray:
    """log binom(n, r) elementwise; -inf where the binomial is 0 (r < 0, r > n or n < 0)."""
    n, r = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(r, dtype=float))
    out = np.full(n.shape, -np.inf)
    ok = (r >= 0) & (n >= r)
    if np.any(ok):
        nn, rr = n[ok], r[ok]
        out[ok] = gammaln(nn + 1.0) - gammaln(rr + 1.0) - gammaln(nn - rr + 1.0)
    return out


_LOGFACT = np.zeros(1)
_LOGFACT_LOCK = threading.Lock()


def _logfact_table(n_max: int) -> np.ndarray:
    """log(n!) for n = 0..n_max (at least), cached and grown on demand."""
    global _LOGFACT
    table = _LOGFACT
    if len(table) > n_max:
        return table
    with _LOGFACT_LOCK:
        if len(_LOGFACT) <= n_max:
            size = max(int(n_max) + 1, 2 * len(_LOGFACT), 1024)
            _LOGFACT = gammaln(np.arange(size, dtype=float) + 1.0)
        return _LOGFACT


def _check_int(name: str, value: Any, low: int = 0) -> int:
    if isinstance(value, bool) or not float(value).is_integer() or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_args(lam: Any, k: Any, L: Any, C: Any) -> tuple[int, int, int, int]:
    lam_i, k_i, L_i, C_i = (
        _check_int("lam", lam),
        _check_int("k", k),
        _check_int("L", L, 1),
        _check_int("C", C),
    )
    if C_i > L_i:
        raise ValueError(f"C must be in [0, L] = [0, {L_i}], got {C_i}")
    return lam_i, k_i, L_i, C_i


# ================================================================== COW: pi (App. A.1)
def cover_probability_cow_vec(lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """pi(lambda, k; L, C) of App. A.1, elementwise over broadcast arrays.

    Args:
        lam: span length(s) lambda (integers >= 0).
        k: number(s) of copies (integers >= 0).
        L: context length(s) in units.
        C: observation length(s) in units, ``0 <= C <= L``.

    Returns:
        Array of cover probabilities; 0 where ``k < 1``, ``k * lam > L`` or ``C < lam``; 1 where
        ``lam = 0`` and ``k >= 1``.
    """
    lam, k, L, C = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (lam, k, L, C)))
    out = np.zeros(lam.shape)
    live = (k >= 1) & (k * lam <= L) & (C >= lam)
    out[live & (lam == 0)] = 1.0
    m = live & (lam >= 1)
    if not np.any(m):
        return out
    lm, km, Lm, Cm = lam[m], k[m], L[m], C[m]
    w = Lm - Cm - km * lm + km
    u = np.minimum(Cm, 2.0 * lm - 2.0)
    log_a = math.log(2.0) + _log_binom(w + lm, km + 1.0)
    coef = (km - 1.0) / (km + 1.0) * (2 * km * lm + 2 * lm + w - 2 * km - km * u - 1.0)
    with np.errstate(divide="ignore"):
        log_b = np.where(coef > 0, np.log(np.maximum(coef, _TINY)), -np.inf) + _log_binom(
            w + u, km
        )
    log_den = _log_binom(Lm - km * lm + km, km) + np.log(Lm - Cm + 1.0)
    out[m] = np.clip(-np.expm1(np.logaddexp(log_a, log_b) - log_den), 0.0, 1.0)
    return out


def cover_probability_cow(lam: int, k: int, L: int, C: int) -> float:
    """pi(lambda, k; L, C): probability that a random C-unit span covers one whole copy.

    App. A.1: with ``w = L - C - k*lam + k`` and ``u = min(C, 2*lam - 2)``,
    ``pi = 1 - [2 binom(w+lam, k+1) + (k-1)/(k+1) (2k lam + 2 lam + w - 2k - k u - 1)
    binom(w+u, k)] / [binom(L - k lam + k, k) (L - C + 1)]``; 0 when ``k < 1``,
    ``k * lam > L`` or ``C < lam``; 1 when ``lam = 0`` and ``k >= 1``.

    Raises:
        ValueError: a negative or non-integer argument, ``L < 1`` or ``C`` outside [0, L].
    """
    lam, k, L, C = _check_args(lam, k, L, C)
    return float(cover_probability_cow_vec(lam, k, L, C))


# ================================================================== PIG: rho (App. B)
# Terms (cells x summands) evaluated at once by the ragged sums below.
_CHUNK_TERMS = 1 << 21
# The alternating sum is used where it is this well conditioned (sum |terms| / |sum|):
# its rounding error is then at most ~2.5x that of a sum of positive terms.
_MAX_CANCEL = 1.5
_LOG2 = math.log(2.0)


def _lb(n: np.ndarray, r: np.ndarray, table: np.ndarray) -> np.ndarray:
    """log binom(n, r) for integer arrays already known to satisfy 0 <= r <= n."""
    return table[n] - table[r] - table[n - r]


def _ragged(
    counts: np.ndarray,
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """Chunks of consecutive cells with their summands laid out flat.

    Yields ``(lo, hi, row, pos, starts)``: cells ``lo:hi``, the (chunk-local) cell and the
    summand index of every flat term, and each cell's first term. Every count must be >= 1.
    A cell's sum only ever sees its own terms, so results do not depend on the chunking.
    """
    n = len(counts)
    cum = np.cumsum(counts)
    lo = 0
    while lo < n:
        base = cum[lo - 1] if lo else 0
        hi = max(int(np.searchsorted(cum, base + _CHUNK_TERMS, side="right")), lo + 1)
        c = counts[lo:hi]
        starts = cum[lo:hi] - c - base
        row = np.repeat(np.arange(hi - lo), c)
        pos = np.arange(int(cum[hi - 1] - base)) - starts[row]
        yield lo, hi, row, pos, starts
        lo = hi


class _SurjTable:
    """log Surj(g, d) = log [x^d] ((1 + x)^k - 1)^g for one k, grown on demand (thread-safe).

    Surj(g, d) counts the d-subsets of ``g`` groups of ``k`` units that meet every group.
    Row ``g`` holds offsets ``e = d - g`` up to ``min(g k, D) - g`` for a length bound ``D``
    (at least the largest C asked for). An entry depends only on the previous row at smaller
    or equal offsets, so its value is the same whatever ``D`` and the order of requests.
    """

    def __init__(self, k: int):
        self.k = k
        self.d_max = -1
        self.rows: list[np.ndarray] = []
        self.tab = np.zeros((0, 0))
        self.lock = threading.Lock()

    def table(self, g_max: int, d_max: int) -> np.ndarray:
        """The rows ``0..g_max`` (at least) for lengths up to ``d_max``, padded with -inf."""
        with self.lock:
            k = self.k
            if d_max > self.d_max:
                self.d_max = max(d_max, 2 * self.d_max)
                self.rows = [np.zeros(1)]
            D = self.d_max
            # Surj(g, d) = sum_{j=1..k} binom(k, j) Surj(g - 1, d - j): offset e takes the
            # previous row's e - (j - 1); window column c is j = k - c.
            coef = _lb(np.full(k, k), np.arange(k, 0, -1), _logfact_table(k))
            while len(self.rows) <= g_max:
                g = len(self.rows)
                w = min(g * (k - 1), D - g) + 1
                if w <= 0:  # g > D: no span of D units meets g groups
                    break
                pad = np.full(k - 1, -np.inf)
                seq = np.concatenate([pad, self.rows[-1], pad, [-np.inf]])
                win = np.lib.stride_tricks.sliding_window_view(seq, k)[:w] + coef
                top = win.max(axis=1)
                self.rows.append(np.log(np.exp(win - top[:, None]).sum(axis=1)) + top)
            if self.tab.shape[0] != len(self.rows) or self.tab.shape[1] < len(self.rows[-1]):
                tab = np.full((len(self.rows), max(len(r) for r in self.rows)), -np.inf)
                for g, row in enumerate(self.rows):
                    tab[g, : len(row)] = row
                self.tab = tab
            return self.tab


_SURJ_TABLES: dict[int, _SurjTable] = {}
_SURJ_LOCK = threading.Lock()


def _surj_table(k: int, g_max: int, d_max: int) -> np.ndarray:
    with _SURJ_LOCK:
        tab = _SURJ_TABLES.setdefault(k, _SurjTable(k))
    return tab.table(g_max, d_max)


def _log_alternating(g, k, X, C, table) -> tuple[np.ndarray, np.ndarray]:
    """The paper's sum ``sum_t (-1)^t binom(g, t) binom(X - t k, C)`` where well conditioned.

    Returns ``(log_sum, ok)``; ``ok`` is False where the terms cancel by more than
    ``_MAX_CANCEL`` (those cells need the positive form).
    """
    top = np.minimum(g, (X - C) // k)  # binom(X - t k, C) = 0 beyond
    out = np.full(len(g), -np.inf)
    ok = top >= 0  # top < 0: every term is 0 (X < C), and so is the sum
    live = np.flatnonzero(ok)
    for lo, hi, row, t, starts in _ragged(top[live] + 1):
        cell = live[lo:hi]
        gr, kr, Xr, Cr = g[cell][row], k[cell][row], X[cell][row], C[cell][row]
        vals = _lb(gr, t, table) + _lb(Xr - t * kr, Cr, table)
        m = np.maximum.reduceat(vals, starts)
        e = np.exp(vals - m[row])
        odd = (t & 1).astype(bool)
        neg = np.add.reduceat(np.where(odd, e, 0.0), starts)
        pos = np.add.reduceat(np.where(odd, 0.0, e), starts)
        diff = pos - neg
        good = (diff > 0) & (pos + neg <= _MAX_CANCEL * diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[cell] = np.where(good, np.log(diff) + m, -np.inf)
        ok[cell] = good
    return out, ok


def _log_positive(g, lam, k, L, C, table) -> np.ndarray:
    """The same sum as ``sum_d Surj(g, d) binom(L - lam k, C - d)``: positive terms only.

    The g-th difference counts the C-subsets of the ``X = L - (lam - g) k`` units outside the
    ``lam - g`` uncovered groups that meet each of the other ``g`` groups: d of their units
    (in Surj(g, d) ways) and ``C - d`` of the ``L - lam k`` free units.
    """
    N = L - lam * k
    d_lo = np.maximum(g, C - N)
    d_hi = np.minimum(g * k, C)
    out = np.full(len(g), -np.inf)
    live = np.flatnonzero(d_hi >= d_lo)
    if live.size == 0:
        return out
    # g <= 1 (Surj = binom(k, d)) and k = 2 (Surj = binom(g, e) 2^(g - e)) need no table.
    closed = (g[live] <= 1) | (k[live] == 2)
    groups = [(live[closed], None)]
    rest = live[~closed]
    for kv in np.unique(k[rest]):
        sel = rest[k[rest] == kv]
        groups.append((sel, _surj_table(int(kv), int(g[sel].max()), int(C[sel].max()))))
    for cells, surj in groups:
        if cells.size == 0:
            continue
        for lo, hi, row, j, starts in _ragged(d_hi[cells] - d_lo[cells] + 1):
            cell = cells[lo:hi]
            gr = g[cell][row]
            d = d_lo[cell][row] + j
            e = d - gr
            if surj is None:
                kr = k[cell][row]
                w = np.where(
                    gr <= 1,
                    _lb(np.maximum(kr, d), np.minimum(d, kr), table),
                    _lb(np.maximum(gr, e), np.minimum(e, gr), table) + (gr - e) * _LOG2,
                )
            else:
                w = surj[gr, e]
            vals = w + _lb(N[cell][row], C[cell][row] - d, table)
            m = np.maximum.reduceat(vals, starts)
            s = np.add.reduceat(np.exp(vals - m[row]), starts)
            out[cell] = np.log(s) + m
    return out


def _log_pig_pmf(g: Any, lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """log rho_tilde for integer g = s * lambda, elementwise over broadcast arrays."""
    g, lam, k, L, C = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.int64) for a in (g, lam, k, L, C))
    )
    out = np.full(g.shape, -np.inf)
    # lambda = 0: s * 0 = 0 for every s, and the formula gives 1.
    out[lam == 0] = 0.0
    # k = 0: no copies, so no group is covered.
    out[(lam >= 1) & (k == 0) & (g == 0)] = 0.0
    live = (lam >= 1) & (k >= 1) & (k * lam <= L) & (g >= 0) & (g <= lam) & (g <= C) & (C <= L)
    if not np.any(live):
        return out
    idx = np.flatnonzero(live)
    gi, li, ki, Li, Ci = (a.ravel()[idx] for a in (g, lam, k, L, C))
    table = _logfact_table(int(Li.max()) + 1)
    head = _lb(li, gi, table) - _lb(Li, Ci, table)
    val = np.full(idx.size, -np.inf)
    one = ki == 1
    # Hypergeometric: g of the lam aspect units among the C shown.
    free = Li[one] - li[one]
    take = Ci[one] - gi[one]
    fits = take <= free
    val[np.flatnonzero(one)[fits]] = _lb(free[fits], take[fits], table)
    many = np.flatnonzero(~one)
    if many.size:
        gm, lm, km, Lm, Cm = gi[many], li[many], ki[many], Li[many], Ci[many]
        X = Lm - (lm - gm) * km
        # The alternating sum has g + 1 terms, the positive form up to g (k - 1) + 1: try the
        # alternating one first where it is shorter, keep it where it does not cancel.
        n_pos = np.minimum(gm * km, Cm) - np.maximum(gm, Cm - (Lm - lm * km)) + 1
        alt = np.flatnonzero(gm + 1 < n_pos)
        res = np.full(many.size, np.nan)
        if alt.size:
            v, ok = _log_alternating(gm[alt], km[alt], X[alt], Cm[alt], table)
            res[alt[ok]] = v[ok]
        todo = np.flatnonzero(np.isnan(res))
        if todo.size:
            res[todo] = _log_positive(gm[todo], lm[todo], km[todo], Lm[todo], Cm[todo], table)
        val[many] = res
    out.reshape(-1)[idx] = head + val
    return out


def _g_of(s: float, lam: int) -> int:
    x = s * lam
    g = round(x)
    if abs(x - g) > 1e-9 * max(1, lam):
        raise ValueError(
            f"s * lam must be an integer (s a multiple of 1/lam), got s={s!r}, lam={lam}"
        )
    return int(g)


def partial_point_probability_pig(s: float, lam: int, k: int, L: int, C: int) -> float:
    """rho-tilde(s, lambda, k; L, C) of App. B.1 for ``s`` a multiple of ``1 / lambda``.

    The probability that a random C-unit span covers exactly ``s * lambda`` of the
    ``lambda`` aspect groups (each ``k`` single units, all ``k * lambda`` distinct, uniformly
    placed). 0 when ``k * lambda > L``; see the module docstring for lambda = 0 and k = 0.

    Raises:
        ValueError: bad integers, ``C`` outside [0, L], ``s`` outside [0, 1] or not a
            multiple of ``1 / lambda``.
    """
    lam, k, L, C = _check_args(lam, k, L, C)
    if not 0.0 <= float(s) <= 1.0:
        raise ValueError(f"s must be in [0, 1], got {s!r}")
    g = 0 if lam == 0 else _g_of(float(s), lam)
    return float(np.exp(_log_pig_pmf(g, lam, k, L, C)))


def partial_point_probability_pig_vec(g: Any, lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """rho-tilde for integer numbers of covered groups ``g = s * lambda`` (broadcast arrays)."""
    return np.exp(_log_pig_pmf(g, lam, k, L, C))


def partial_point_distribution_pig(lam: int, k: int, L: int, C: int) -> np.ndarray:
    """rho-tilde(i / lambda) for i = 0..lambda: the distribution of covered groups."""
    lam, k, L, C = _check_args(lam, k, L, C)
    return np.exp(_log_pig_pmf(np.arange(lam + 1), lam, k, L, C))


def partial_point_density_pig_vec(s: Any, lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """rho(s, lambda, k; L, C) of App. B.2 elementwise (s in [0, 1], integer lam, k, L, C).

    ``(lambda + 1) * rho_tilde`` at multiples of ``1 / lambda``, linearly interpolated between
    them; 1 (uniform) where ``lambda = 0``.
    """
    s, lam, k, L, C = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (s, lam, k, L, C)))
    x = np.clip(s, 0.0, 1.0) * lam
    near = np.rint(x)
    exact = np.abs(x - near) <= 1e-9 * np.maximum(lam, 1.0)
    lo = np.where(exact, near, np.floor(x))
    hi = np.where(exact, near, lo + 1.0)
    frac = np.where(exact, 0.0, x - lo)
    p_lo = np.exp(_log_pig_pmf(lo, lam, k, L, C))
    p_hi = np.where(frac > 0, np.exp(_log_pig_pmf(np.minimum(hi, lam), lam, k, L, C)), 0.0)
    out = (lam + 1.0) * ((1.0 - frac) * p_lo + frac * p_hi)
    return np.where(lam == 0, 1.0, out)


def partial_point_density_pig(s: float, lam: int, k: int, L: int, C: int) -> float:
    """rho(s, lambda, k; L, C): the interpolated, (lambda+1)-scaled rho-tilde (App. B.2).

    Raises:
        ValueError: bad integers, ``C`` outside [0, L] or ``s`` outside [0, 1].
    """
    lam, k, L, C = _check_args(lam, k, L, C)
    if not 0.0 <= float(s) <= 1.0:
        raise ValueError(f"s must be in [0, 1], got {s!r}")
    return float(partial_point_density_pig_vec(s, lam, k, L, C))


def _pig_mode_g(lam: np.ndarray, k: np.ndarray, L: np.ndarray, C: np.ndarray) -> np.ndarray:
    """argmax_g rho_tilde(g) (covered groups), searched within 4 of the mean; ties -> larger g."""
    lam, k, L, C = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in (lam, k, L, C)))
    # P(a given group is entirely outside the span) = binom(L - k, C) / binom(L, C).
    p_out = np.exp(_log_binom(L - k, C) - _log_binom(L, C))
    mean = lam * (1.0 - p_out)
    offsets = np.arange(-4, 6)
    cand = np.floor(mean)[..., None] + offsets
    cap = np.minimum(lam, C)[..., None]
    cand = np.clip(cand, 0, cap).astype(np.int64)
    logp = _log_pig_pmf(cand, lam[..., None], k[..., None], L[..., None], C[..., None])
    # Ties (within rounding; and all -inf) -> the largest g: search the reversed candidates.
    top = np.max(logp, axis=-1, keepdims=True)
    near = logp >= np.where(np.isfinite(top), top - 1e-9, -np.inf)
    best = cand.shape[-1] - 1 - np.argmax(near[..., ::-1], axis=-1)
    g = np.take_along_axis(cand, best[..., None], axis=-1)[..., 0]
    return g


def partial_point_mode_pig(lam: int, k: int, L: int, C: int) -> float:
    """argmax_s rho(s, lambda, k; L, C) (Algorithm 2's oracle hit rate at length C).

    rho is piecewise linear between multiples of 1/lambda, so the maximum is the mode of
    rho-tilde; 1 for lambda = 0 (see the module docstring).
    """
    lam, k, L, C = _check_args(lam, k, L, C)
    return float(_pig_mode_s(np.asarray(lam), np.asarray(k), np.asarray(L), np.asarray(C)))


def _pig_mode_s(lam: np.ndarray, k: np.ndarray, L: np.ndarray, C: np.ndarray) -> np.ndarray:
    lam_f = np.asarray(lam, dtype=float)
    g = _pig_mode_g(lam, k, L, C)
    return np.where(lam_f == 0, 1.0, g / np.maximum(lam_f, 1.0))


# ================================================================== outcome coding
_IDK_WORDS = frozenset(
    """unanswerable unknown idk none_given not_answerable cannot_answer no_answer
    insufficient_information not_enough_information""".split()
)
_IDK_PHRASES = (
    "unanswerable",
    "not answerable",
    "cannot be answered",
    "can't be answered",
    "cannot answer",
    "can not answer",
    "i don't know",
    "i do not know",
    "don't know",
    "not enough information",
    "enough information",
    "insufficient information",
    "not enough context",
    "cannot be determined",
    "can't be determined",
    "not mentioned",
    "not stated",
    "not provided",
    "not given in",
    "no answer",
)


def is_idk(answer: Any) -> bool:
    """True when an answer says the shown text does not contain the answer.

    Matches (case-insensitively, punctuation ignored) the probe instruction's
    ``unanswerable`` and the usual variants: ``unknown``, ``I don't know``, ``not enough
    information``, ``cannot be determined``, ``not mentioned`` ...
    """
    if answer is None or (isinstance(answer, float) and math.isnan(answer)):
        return False
    text = " ".join(str(answer).lower().replace("’", "'").split()).strip(" .!\"'()[]")
    if not text:
        return False
    if text.replace(" ", "_") in _IDK_WORDS:
        return True
    return any(p in text for p in _IDK_PHRASES)


def code_outcomes(
    answers: Sequence[Any], scores: Sequence[float], threshold: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """COW codes and PIG scores of probe answers (SPEC §8).

    Args:
        answers: the parsed answers.
        scores: their relaxed F1 (NaN = unscored, e.g. a failed call).
        threshold: COW binarization threshold on the score (default 0.5).

    Returns:
        ``(x, s)``: ``x`` in {1, 0, IDK (=2)} (-1 where the score is NaN) and ``s`` the PIG
        score (NaN for IDK and unscored).
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    sc = np.asarray(scores, dtype=float)
    idk = np.array([is_idk(a) for a in answers], dtype=bool)
    x = np.where(sc >= threshold, 1, 0)
    x = np.where(idk, IDK, x)
    x = np.where(np.isnan(sc), -1, x)
    s = np.where(idk | np.isnan(sc), np.nan, sc)
    return x.astype(np.int64), s


def dip_scenario(scores: Sequence[float]) -> tuple[str, float]:
    """Hartigan's dip test on one problem's outcome scores, bucketized into bins of 0.1.

    Each score (IDK counts as 0) is replaced by its bin's centre (1.0 falls in the last bin);
    COW when the dip test's p-value is below 0.5 (multi-modal), else PIG (seed §3.1).

    Returns:
        ``(scenario, p_value)``; fewer than 4 scores -> ``("COW", nan)``.
    """
    import diptest

    sc = np.asarray(scores, dtype=float)
    sc = np.where(np.isnan(sc), 0.0, sc)
    if sc.size < 4:
        return "COW", float("nan")
    bins = (np.minimum(np.floor(np.clip(sc, 0.0, 1.0) * 10.0 + 1e-9), 9.0) + 0.5) / 10.0
    _, p = diptest.diptest(bins)
    p = float(p)
    return ("COW" if p < 0.5 else "PIG"), p


# ================================================================== candidates & categories
def candidate_grid(observed_C: Sequence[int], L: int) -> np.ndarray:
    """lambda and k candidates: the observed C values plus 0, max C + 1 and L (sorted, unique)."""
    obs = np.unique(np.asarray(list(observed_C), dtype=np.int64))
    if obs.size == 0:
        raise ValueError("no observations: the candidate grid needs at least one C")
    return np.unique(np.concatenate([obs, [0, int(obs.max()) + 1, int(L)]]))


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Category thresholds (Figure 1); None = the paper's default for each problem.

    Attributes:
        lam_p: lambda threshold between retrieval/easy (II, III) and balanced (IV).
        k_p: k threshold between easy (II, k > k_p) and retrieval (III).
        lam_q: lambda threshold between balanced (IV) and holistic (V).
    """

    lam_p: float | None = None
    k_p: float | None = None
    lam_q: float | None = None


def default_thresholds(observed_C: Sequence[int], L: int) -> tuple[float, float, float]:
    """The paper's thresholds (§4): ``lam_p = k_p`` = first tertile, ``lam_q = max C``.

    The N exponential candidates are the observed C values without 0, L and max C + 1; with
    ``p = floor(N / 3)`` (at least 1) the threshold is the p-th smallest of them. ``lam_q`` is
    the longest observed *span*: the full-context observation ``C = L`` (the ladder's last
    rung) shows everything and is not a span, so it is left out; otherwise a problem that
    needs the whole context (lambda = L) could never be holistic (V), which is what the
    paper's ``max C + 1`` candidate is there to detect (seed §4). With no span shorter than L,
    ``lam_q = L``.
    """
    obs = np.unique(np.asarray(list(observed_C), dtype=np.int64))
    if obs.size == 0:
        raise ValueError("no observations: thresholds need at least one C")
    expo = [int(c) for c in obs if c not in (0, L)]
    if not expo:
        expo = [1]
    p = max(len(expo) // 3, 1)
    t = float(expo[p - 1])
    spans = [int(c) for c in obs if c < L]
    return t, t, float(max(spans) if spans else L)


def assign_category(lam: Any, k: Any, lam_p: Any, k_p: Any, lam_q: Any) -> np.ndarray:
    """Focus category I-V of Figure 1, elementwise.

    I when lambda = 0; II when lambda <= lam_p and k > k_p; III when lambda <= lam_p and
    k <= k_p; IV when lam_p < lambda <= lam_q; V when lambda > lam_q.
    """
    lam, k, lam_p, k_p, lam_q = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (lam, k, lam_p, k_p, lam_q))
    )
    return np.select(
        [lam == 0, (lam <= lam_p) & (k > k_p), lam <= lam_p, lam <= lam_q],
        ["I", "II", "III", "IV"],
        default="V",
    ).astype(object)


# ================================================================== EM (Algorithms 1 and 2)
@dataclass(frozen=True, slots=True)
class _Problems:
    """One task's problems, observations aggregated by (problem, observed length)."""

    ids: list[Any]
    L: np.ndarray  # (P,)
    C: np.ndarray  # (P, nC) observed lengths, padded with -1
    cmask: np.ndarray  # (P, nC)
    cand: np.ndarray  # (P, nK) candidates, padded with -1
    kmask: np.ndarray  # (P, nK)


def _aggregate(frame: pd.DataFrame) -> tuple[_Problems, pd.DataFrame]:
    """Problems of one task with their unique C values and candidate grids."""
    ids = list(dict.fromkeys(frame["problem"].tolist()))
    pos = {p: i for i, p in enumerate(ids)}
    L = frame.groupby("problem", sort=False)["L"].max().reindex(ids).to_numpy(dtype=np.int64)
    uniq = frame.groupby("problem", sort=False)["C"].unique().reindex(ids)
    cs = [np.sort(np.asarray(u, dtype=np.int64)) for u in uniq]
    if any(int(c.max()) > int(l) for c, l in zip(cs, L, strict=True)):
        raise ValueError("an observation length C exceeds its problem's L")
    cands = [candidate_grid(c, l) for c, l in zip(cs, L, strict=True)]
    nC = max(len(c) for c in cs)
    nK = max(len(c) for c in cands)
    C = np.full((len(ids), nC), -1, dtype=np.int64)
    cand = np.full((len(ids), nK), -1, dtype=np.int64)
    for i, (c, kk) in enumerate(zip(cs, cands, strict=True)):
        C[i, : len(c)] = c
        cand[i, : len(kk)] = kk
    # Each observation's column: the rank of its C among its problem's sorted unique lengths
    # (problem-major keys sort as the problems' C lists laid end to end).
    p_idx = np.array([pos[p] for p in frame["problem"]], dtype=np.int64)
    span = int(max(int(c.max()) for c in cs)) + 1
    keys = p_idx * span + frame["C"].to_numpy(dtype=np.int64)
    width = np.array([len(c) for c in cs], dtype=np.int64)
    col = np.searchsorted(np.unique(keys), keys) - (np.cumsum(width) - width)[p_idx]
    idx = frame.assign(_p=p_idx, _c=col)
    return _Problems(ids, L, C, C >= 0, cand, cand >= 0), idx


def _cow_pi(pr: _Problems) -> np.ndarray:
    """pi[p, a, b, c] for lambda = cand[a], k = cand[b] (0 on padding)."""
    lam = pr.cand[:, :, None, None]
    k = pr.cand[:, None, :, None]
    L = pr.L[:, None, None, None]
    C = pr.C[:, None, None, :]
    valid = (lam >= 0) & (k >= 0) & (C >= 0)
    pi = cover_probability_cow_vec(np.maximum(lam, 0), np.maximum(k, 0), L, np.clip(C, 0, None))
    return np.where(valid, pi, 0.0)


def _safe_log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def _em_cow(pr: _Problems, counts: np.ndarray, steps: int) -> dict[str, np.ndarray]:
    """Algorithm 1 on one task. ``counts[p, c, x]``: observations with outcome x at C[p, c]."""
    P, nC, _ = counts.shape
    nK = pr.cand.shape[1]
    pi = _cow_pi(pr)  # (P, nK, nK, nC)
    below = (pr.C[:, None, :] < pr.cand[:, :, None]) & pr.cmask[:, None, :]  # (P, nK, nC)
    valid = pr.kmask[:, :, None] & pr.kmask[:, None, :]  # (P, nK, nK)
    q_n = np.full((P, nC, 3), 0.5)
    prior_o = np.full(P, 0.5)
    sel = np.zeros((P, 2), dtype=np.int64)
    p_o_sel = np.full((P, nC, 3), 1.0 / 3.0)
    p_n = np.full(3, 1.0 / 3.0)
    for _ in range(steps):
        w_n = counts * q_n
        p_n = w_n.sum(axis=(0, 1)) / max(w_n.sum(), _TINY)
        w_o = counts * (1.0 - q_n)
        num = np.einsum("pac,pcx->pax", below.astype(float), w_o)  # (P, nK, 3)
        den = num.sum(axis=2, keepdims=True)
        nonpar = np.where(den > 0, num / np.maximum(den, _TINY), 1.0 / 3.0)
        po = prior_o[:, None, None, None]
        ll = np.zeros((P, nK, nK))
        for x in range(3):
            if x == 1:
                par = pi
            elif x == 0:
                par = np.zeros_like(pi)
            else:
                par = 1.0 - pi
            p_ox = np.where(below[:, :, None, :], nonpar[:, :, None, None, x], par)
            mix = p_ox * po + p_n[x] * (1.0 - po)
            n = counts[:, None, None, :, x]
            ll += (n * np.where(n > 0, _safe_log(mix), 0.0)).sum(axis=3)
        ll = np.where(valid, ll, -np.inf)
        flat = ll.reshape(P, -1)
        best = np.argmax(flat, axis=1)
        a, b = np.divmod(best, nK)
        sel = np.stack([a, b], axis=1)
        rows = np.arange(P)
        pi_sel = pi[rows, a, b, :]  # (P, nC)
        below_sel = below[rows, a, :]
        nonpar_sel = nonpar[rows, a, :]  # (P, 3)
        par_sel = np.stack([np.zeros_like(pi_sel), pi_sel, 1.0 - pi_sel], axis=2)
        p_o_sel = np.where(below_sel[:, :, None], nonpar_sel[:, None, :], par_sel)
        n_tot = counts.sum(axis=(1, 2))
        prior_o = (counts * (1.0 - q_n)).sum(axis=(1, 2)) / np.maximum(n_tot, _TINY)
        num_n = p_n[None, None, :] * (1.0 - prior_o)[:, None, None]
        num_o = p_o_sel * prior_o[:, None, None]
        tot = num_n + num_o
        q_n = np.where(tot > 0, num_n / np.maximum(tot, _TINY), 0.5)
    mix = p_o_sel * prior_o[:, None, None] + p_n[None, None, :] * (1.0 - prior_o)[:, None, None]
    loglik = (counts * np.where(counts > 0, _safe_log(mix), 0.0)).sum(axis=(1, 2))
    rows = np.arange(P)
    return {
        "lam": pr.cand[rows, sel[:, 0]],
        "k": pr.cand[rows, sel[:, 1]],
        "p_oracle": prior_o,
        "loglik": loglik,
        "p_noise_x": p_n,
        "p_oracle_x": p_o_sel,  # (P, nC, 3)
    }


class _DensityCache:
    """rho over one task's grid of (problem, lambda, k, C), reusing rho-tilde across EM steps.

    Only the cells with a formula are held (``lambda >= 1``, ``k >= 1``, ``k lambda <= L``,
    an observed C); rho is 1 where lambda = 0 and 0 elsewhere (k = 0 cells are never a PIG
    candidate). EM steps change the oracle hit rates s a little; most cells keep their
    neighbouring multiples of 1/lambda, so their rho-tilde values are reused, and the upper
    neighbour is only computed where s falls strictly between two multiples.
    """

    def __init__(self, pr: _Problems):
        P, nK = pr.cand.shape
        nC = pr.C.shape[1]
        lam = pr.cand[:, :, None, None]
        k = pr.cand[:, None, :, None]
        formula = (lam >= 1) & (k >= 1) & (k * lam <= pr.L[:, None, None, None])
        cells = np.flatnonzero(formula & (pr.C >= 0)[:, None, None, :])
        p, a, b, c = np.unravel_index(cells, (P, nK, nK, nC))
        self.cells = cells
        self.args = (pr.cand[p, a], pr.cand[p, b], pr.L[p], pr.C[p, c])
        # The oracle hit rate of a cell is s[p, c].
        self.pc = (p, c)
        self.lam = self.args[0].astype(float)
        # lambda = 0 (and padding): rho = 1 for every s (see the module docstring).
        self.base = np.broadcast_to(np.where(lam <= 0, 1.0, 0.0), (P, nK, nK, nC))
        self.lo = np.full(cells.size, -1, dtype=np.int64)
        self.hi_of = np.full(cells.size, -1, dtype=np.int64)
        self.p_lo = np.zeros(cells.size)
        self.p_hi = np.zeros(cells.size)

    def density(self, s: np.ndarray) -> np.ndarray:
        """rho at the oracle hit rates ``s[p, c]`` for every grid cell ``(p, a, b, c)``."""
        x = np.clip(s[self.pc], 0.0, 1.0) * self.lam
        near = np.rint(x)
        exact = np.abs(x - near) <= 1e-9 * np.maximum(self.lam, 1.0)
        lo = np.where(exact, near, np.floor(x)).astype(np.int64)
        frac = np.where(exact, 0.0, x - lo)
        redo = np.flatnonzero(lo != self.lo)
        if redo.size:
            self.p_lo[redo] = np.exp(_log_pig_pmf(lo[redo], *(a[redo] for a in self.args)))
            self.lo[redo] = lo[redo]
        # frac > 0 implies lo < s * lambda <= lambda, so lo + 1 is a valid number of groups.
        between = frac > 0
        redo = np.flatnonzero(between & (self.hi_of != lo))
        if redo.size:
            g = lo[redo] + 1
            self.p_hi[redo] = np.exp(_log_pig_pmf(g, *(a[redo] for a in self.args)))
            self.hi_of[redo] = lo[redo]
        val = np.where(between, (1.0 - frac) * self.p_lo + frac * self.p_hi, self.p_lo)
        out = np.array(self.base)
        out.reshape(-1)[self.cells] = (self.lam + 1.0) * val
        return out


def _em_pig(
    pr: _Problems, y: np.ndarray, n_obs: np.ndarray, steps: int
) -> dict[str, np.ndarray]:
    """Algorithm 2 on one task. ``y[p, c, v]``: summed y_ij(v) (v = 0, 1, IDK) at C[p, c]."""
    P, nC, _ = y.shape
    nK = pr.cand.shape[1]
    # k = 0 is left out under PIG: its rho-tilde is a point mass at s = 0 whose "density"
    # (lambda + 1) grows without bound in lambda, so it would always win near s = 0.
    valid = pr.kmask[:, :, None] & (pr.kmask & (pr.cand >= 1))[:, None, :]
    cache = _DensityCache(pr)
    q_n = np.full((P, nC, 3), 0.5)
    prior_o = np.full(P, 0.5)
    p_o = np.full((P, nC, 3), 1.0 / 3.0)
    p_n = np.full(3, 1.0 / 3.0)
    sel = np.zeros((P, 2), dtype=np.int64)
    rho_sel = np.zeros((P, nC))
    rows = np.arange(P)
    n = n_obs[:, None, None, :]
    # The oracle hit rate at each length depends only on the selected (lambda, k): it is
    # recomputed for the problems whose selection changed.
    mode = np.zeros((P, nC))
    known = np.full((P, 2), -1, dtype=np.int64)
    C_0 = np.clip(pr.C, 0, None)
    for _ in range(steps):
        w_n = q_n * y
        p_n = w_n.sum(axis=(0, 1)) / max(w_n.sum(), _TINY)
        w_o = (1.0 - q_n) * y
        den = w_o.sum(axis=2, keepdims=True)
        p_o = np.where(den > 0, w_o / np.maximum(den, _TINY), 1.0 / 3.0)
        rho = cache.density(p_o[:, :, 1])
        po = prior_o[:, None, None, None]
        mix = rho * po + 1.0 * (1.0 - po)
        ll = (n * np.where(n > 0, _safe_log(mix), 0.0)).sum(axis=3)
        ll = np.where(valid, ll, -np.inf)
        best = np.argmax(ll.reshape(P, -1), axis=1)
        a, b = np.divmod(best, nK)
        sel = np.stack([a, b], axis=1)
        rho_sel = rho[rows, a, b, :]
        moved = np.flatnonzero((sel != known).any(axis=1))
        if moved.size:
            lam_s = np.broadcast_to(pr.cand[moved, a[moved]][:, None], (moved.size, nC))
            k_s = np.broadcast_to(pr.cand[moved, b[moved]][:, None], (moved.size, nC))
            L_s = np.broadcast_to(pr.L[moved, None], (moved.size, nC))
            mode[moved] = _pig_mode_s(lam_s, k_s, L_s, C_0[moved])
            known[moved] = sel[moved]
        rest = p_o[:, :, 0] + p_o[:, :, 2]
        share0 = np.where(rest > 0, p_o[:, :, 0] / np.maximum(rest, _TINY), 0.5)
        p_o = np.stack([(1.0 - mode) * share0, mode, (1.0 - mode) * (1.0 - share0)], axis=2)
        prior_o = ((1.0 - q_n) * y).sum(axis=(1, 2)) / np.maximum(n_obs.sum(axis=1), _TINY)
        num_n = p_n[None, None, :] * (1.0 - prior_o)[:, None, None]
        num_o = p_o * prior_o[:, None, None]
        tot = num_n + num_o
        q_n = np.where(tot > 0, num_n / np.maximum(tot, _TINY), 0.5)
    po = prior_o[:, None]
    loglik = (n_obs * np.where(n_obs > 0, _safe_log(rho_sel * po + (1.0 - po)), 0.0)).sum(axis=1)
    rows = np.arange(P)
    return {
        "lam": pr.cand[rows, sel[:, 0]],
        "k": pr.cand[rows, sel[:, 1]],
        "p_oracle": prior_o,
        "loglik": loglik,
        "p_noise_y": p_n,
        "p_oracle_y": p_o,  # (P, nC, 3)
    }


def _require(frame: pd.DataFrame, cols: Sequence[str], what: str) -> pd.DataFrame:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}; need {', '.join(cols)}")
    out = frame.copy()
    if "task" not in out.columns:
        out["task"] = ""
    return out


def _problem_rows(
    task: Any, pr: _Problems, res: Mapping[str, np.ndarray], scenario: str, n_obs: np.ndarray
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": task,
            "problem": pr.ids,
            "scenario": scenario,
            "L": pr.L,
            "n_obs": n_obs.astype(np.int64),
            "max_C": np.where(pr.cmask, pr.C, -1).max(axis=1),
            "lam": res["lam"].astype(np.int64),
            "k": res["k"].astype(np.int64),
            "p_oracle": res["p_oracle"],
            "log_likelihood": res["loglik"],
        }
    )


def fit_cow(
    observations: pd.DataFrame, *, steps: int = COW_STEPS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Estimate lambda and k per problem under COW (Algorithm 1), one task at a time.

    Args:
        observations: one row per probe: ``problem``, ``L``, ``C``, ``x`` (1, 0 or
            ``IDK`` = 2) and optionally ``task`` (the background noise is shared per task).
        steps: EM steps (10 in the paper).

    Returns:
        ``(problems, curves)``: one row per problem (``task, problem, scenario, L, n_obs,
        max_C, lam, k, p_oracle, log_likelihood``) and one row per (problem, observed C) with
        the observed outcome shares and the fitted mixture's ``fit_p1, fit_p0, fit_pidk``.
    """
    obs = _require(observations, ("problem", "L", "C", "x"), "COW observations")
    bad = ~obs["x"].isin([0, 1, IDK])
    if bad.any():
        raise ValueError(
            f"COW outcome x must be 0, 1 or {IDK} (IDK), got {obs['x'][bad].iloc[0]!r}"
        )
    problems, curves = [], []
    for task, frame in obs.groupby("task", sort=False):
        pr, idx = _aggregate(frame)
        counts = np.zeros((len(pr.ids), pr.C.shape[1], 3))
        where = (idx["_p"].to_numpy(), idx["_c"].to_numpy(), idx["x"].to_numpy(dtype=np.int64))
        np.add.at(counts, where, 1.0)
        res = _em_cow(pr, counts, steps)
        problems.append(_problem_rows(task, pr, res, "COW", counts.sum(axis=(1, 2))))
        prior = res["p_oracle"][:, None, None]
        fit = res["p_oracle_x"] * prior + res["p_noise_x"][None, None, :] * (1.0 - prior)
        n = counts.sum(axis=2)
        for i, pid in enumerate(pr.ids):
            for c in np.flatnonzero(pr.cmask[i]):
                tot = max(n[i, c], 1.0)
                curves.append(
                    (task, pid, int(pr.C[i, c]), int(n[i, c]), counts[i, c, 1] / tot,
                     counts[i, c, 0] / tot, counts[i, c, IDK] / tot, np.nan,
                     fit[i, c, 1], fit[i, c, 0], fit[i, c, IDK], np.nan)
                )  # fmt: skip
    return pd.concat(problems, ignore_index=True), _curves_frame(curves, "COW")


def fit_pig(
    observations: pd.DataFrame, *, steps: int = PIG_STEPS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Estimate lambda and k per problem under PIG (Algorithm 2), one task at a time.

    Args:
        observations: one row per probe: ``problem``, ``L``, ``C``, ``s`` (score in [0, 1],
            NaN for IDK) and optionally ``task``.
        steps: EM steps (5 in the paper).

    Returns:
        ``(problems, curves)`` as :func:`fit_cow`; curves carry the observed mean score
        ``obs_s`` and the mixture's expected score ``fit_s`` (oracle hit rate x P(oracle) +
        noise hit rate x P(noise)).
    """
    obs = _require(observations, ("problem", "L", "C", "s"), "PIG observations")
    s = obs["s"].to_numpy(dtype=float)
    if np.any((s < 0) | (s > 1)):
        raise ValueError("PIG score s must be in [0, 1] (NaN for IDK)")
    problems, curves = [], []
    for task, frame in obs.groupby("task", sort=False):
        pr, idx = _aggregate(frame)
        sv = frame["s"].to_numpy(dtype=float)
        idk = np.isnan(sv)
        yv = np.stack([np.where(idk, 0.0, 1.0 - sv), np.where(idk, 0.0, sv), idk * 1.0], axis=1)
        y = np.zeros((len(pr.ids), pr.C.shape[1], 3))
        pc = (idx["_p"].to_numpy(), idx["_c"].to_numpy())
        for v in range(3):
            np.add.at(y[:, :, v], pc, yv[:, v])
        n_obs = np.zeros(pr.C.shape)
        np.add.at(n_obs, pc, 1.0)
        res = _em_pig(pr, y, n_obs, steps)
        problems.append(_problem_rows(task, pr, res, "PIG", n_obs.sum(axis=1)))
        prior = res["p_oracle"][:, None]
        fit_s = res["p_oracle_y"][:, :, 1] * prior + res["p_noise_y"][1] * (1.0 - prior)
        for i, pid in enumerate(pr.ids):
            for c in np.flatnonzero(pr.cmask[i]):
                tot = max(n_obs[i, c], 1.0)
                curves.append(
                    (task, pid, int(pr.C[i, c]), int(n_obs[i, c]), np.nan, np.nan,
                     y[i, c, 2] / tot, y[i, c, 1] / tot, np.nan, np.nan, np.nan, fit_s[i, c])
                )  # fmt: skip
    return pd.concat(problems, ignore_index=True), _curves_frame(curves, "PIG")


def _curves_frame(rows: list[tuple], scenario: str) -> pd.DataFrame:
    cols = [
        "task", "problem", "C", "n", "obs_p1", "obs_p0", "obs_pidk", "obs_s", "fit_p1",
        "fit_p0", "fit_pidk", "fit_s",
    ]  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    out.insert(2, "scenario", scenario)
    return out


# ================================================================== the whole pipeline
@dataclass(frozen=True, slots=True)
class DolceFit:
    """DOLCE estimates for a set of problems (per problem first, aggregates derived).

    Attributes:
        problems: one row per problem: ``task, problem, scenario, dip_p, L, n_obs, max_C,
            lam, k, p_oracle, log_likelihood, lam_p, k_p, lam_q, category`` (plus any
            ``extra`` columns passed to :func:`fit_dolce`).
        tasks: one row per task: ``task, n, n_cow, n_pig`` and the count and share of each
            category (``n_I`` ... ``n_V``, ``share_I`` ... ``share_V``).
        curves: one row per (problem, observed C): observed outcome shares / mean score and
            the fitted mixture's (see :func:`fit_cow`, :func:`fit_pig`).
        settings: the settings used (threshold, steps, thresholds, scenario).
    """

    problems: pd.DataFrame
    tasks: pd.DataFrame
    curves: pd.DataFrame
    settings: Mapping[str, Any] = field(default_factory=dict)


def fit_dolce(
    outcomes: pd.DataFrame,
    *,
    scenario: str = "auto",
    threshold: float = 0.5,
    thresholds: Thresholds | None = None,
    cow_steps: int = COW_STEPS,
    pig_steps: int = PIG_STEPS,
) -> DolceFit:
    """Scenario per problem, EM per task and scenario, categories: the DOLCE pipeline.

    Args:
        outcomes: one row per probe: ``problem``, ``L``, ``C``, ``score`` (relaxed F1, NaN for
            an unscored call, which is dropped), ``idk`` (bool), optionally ``task`` and any
            per-problem columns to carry along (``question`` ...).
        scenario: ``auto`` (Hartigan's dip test per problem), ``COW`` or ``PIG``.
        threshold: COW binarization threshold on the score (0.5).
        thresholds: category thresholds; None fields take the per-problem defaults.
        cow_steps: EM steps for COW (10).
        pig_steps: EM steps for PIG (5).

    Returns:
        The :class:`DolceFit`.
    """
    if scenario not in ("auto", "COW", "PIG"):
        raise ValueError(f"unknown scenario {scenario!r}; choose one of: auto, COW, PIG")
    obs = _require(outcomes, ("problem", "L", "C", "score", "idk"), "DOLCE outcomes")
    obs = obs[~obs["score"].isna()].reset_index(drop=True)
    if obs.empty:
        raise ValueError("no scored probe outcomes to fit")
    scores = np.where(obs["idk"].to_numpy(dtype=bool), 0.0, obs["score"].to_numpy(dtype=float))
    obs["_dip_score"] = scores
    scen: dict[Any, tuple[str, float]] = {}
    for pid, frame in obs.groupby("problem", sort=False):
        scen[pid] = dip_scenario(frame["_dip_score"]) if scenario == "auto" else (scenario, np.nan)
    obs["_scenario"] = obs["problem"].map(lambda p: scen[p][0])
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    idk = obs["idk"].to_numpy(dtype=bool)
    sc = obs["score"].to_numpy(dtype=float)
    obs["x"] = np.where(idk, IDK, np.where(sc >= threshold, 1, 0))
    obs["s"] = np.where(idk, np.nan, sc)
    parts, curves = [], []
    cow = obs[obs["_scenario"] == "COW"]
    if not cow.empty:
        p, c = fit_cow(cow, steps=cow_steps)
        parts.append(p)
        curves.append(c)
    pig = obs[obs["_scenario"] == "PIG"]
    if not pig.empty:
        p, c = fit_pig(pig, steps=pig_steps)
        parts.append(p)
        curves.append(c)
    problems = pd.concat(parts, ignore_index=True)
    problems.insert(3, "dip_p", problems["problem"].map(lambda p: scen[p][1]))
    th = thresholds or Thresholds()
    defaults = [
        default_thresholds(obs.loc[obs["problem"] == pid, "C"], L)
        for pid, L in zip(problems["problem"], problems["L"], strict=True)
    ]
    problems["lam_p"] = [th.lam_p if th.lam_p is not None else d[0] for d in defaults]
    problems["k_p"] = [th.k_p if th.k_p is not None else d[1] for d in defaults]
    problems["lam_q"] = [th.lam_q if th.lam_q is not None else d[2] for d in defaults]
    problems["category"] = assign_category(
        problems["lam"], problems["k"], problems["lam_p"], problems["k_p"], problems["lam_q"]
    )
    extra = [c for c in outcomes.columns if c not in _OUTCOME_COLUMNS and c not in problems.columns]
    if extra:
        carried = obs.groupby("problem", sort=False)[extra].first()
        problems = problems.join(carried, on="problem")
    order = {p: i for i, p in enumerate(dict.fromkeys(obs["problem"]))}
    problems = problems.sort_values("problem", key=lambda s: s.map(order), kind="stable")
    problems = problems.reset_index(drop=True)
    return DolceFit(
        problems=problems,
        tasks=category_distribution(problems),
        curves=pd.concat(curves, ignore_index=True),
        settings={
            "scenario": scenario,
            "threshold": threshold,
            "cow_steps": cow_steps,
            "pig_steps": pig_steps,
            "thresholds": {"lam_p": th.lam_p, "k_p": th.k_p, "lam_q": th.lam_q},
        },
    )


_OUTCOME_COLUMNS = ("problem", "task", "L", "C", "score", "idk", "start", "answer", "variant")


def category_distribution(problems: pd.DataFrame) -> pd.DataFrame:
    """Category counts and shares per task (and how many problems are COW / PIG)."""
    rows = []
    for task, frame in problems.groupby("task", sort=False):
        row: dict[str, Any] = {
            "task": task,
            "n": len(frame),
            "n_cow": int((frame["scenario"] == "COW").sum()),
            "n_pig": int((frame["scenario"] == "PIG").sum()),
        }
        for cat in CATEGORIES:
            row[f"n_{cat}"] = int((frame["category"] == cat).sum())
        for cat in CATEGORIES:
            row[f"share_{cat}"] = row[f"n_{cat}"] / len(frame)
        rows.append(row)
    return pd.DataFrame(rows)


def mixture_curve(fit: DolceFit, problem: Any) -> pd.DataFrame:
    """One problem's observed outcome curve P(x | C) and the fitted mixture, by C."""
    out = fit.curves[fit.curves["problem"] == problem]
    if out.empty:
        raise ValueError(f"unknown problem {problem!r}")
    return out.sort_values("C").reset_index(drop=True)


# ================================================================== probes stored as predictions
def outcomes_from_probes(frame: pd.DataFrame, task_by: str = "dataset") -> pd.DataFrame:
    """DOLCE outcomes from stored probe predictions (:meth:`core.store.Store.probe_frame`).

    C and the start come from the variant ``C=<C>|start=<s>``; L from the prediction's
    ``meta`` (the planner's ``L``), else the problem's largest C (the ladder ends at L).
    Failed calls (``error`` set) and unscored rows are dropped; IDK is :func:`is_idk` of the
    answer.

    Args:
        frame: probe rows with ``run, dataset, instance_id, variant, meta, answer, error,
            f1_relaxed`` and any instance cells.
        task_by: the column whose values are tasks (background noise is shared per task):
            ``dataset`` (default), or an instance cell such as ``reasoning_type``.

    Returns:
        One row per usable probe: ``task`` (``run | task`` when several runs are given),
        ``problem`` (the instance id; ``run:instance`` with several runs), ``L, C, start,
        score, idk, answer`` and the instance cells.
    """
    import json

    from core.probes import parse_variant

    if frame.empty:
        return pd.DataFrame(columns=["task", "problem", "L", "C", "start", "score", "idk"])
    if task_by not in frame.columns:
        raise ValueError(
            f"unknown task column {task_by!r}; choose one of: {', '.join(map(str, frame.columns))}"
        )
    out = frame.copy()
    parsed = [parse_variant(v) for v in out["variant"]]
    out["C"] = [c for c, _ in parsed]
    out["start"] = [s for _, s in parsed]

    def meta_L(text: Any) -> float:
        if not isinstance(text, str) or not text:
            return float("nan")
        try:
            value = json.loads(text).get("L")
        except (ValueError, AttributeError):
            return float("nan")
        return float(value) if isinstance(value, int | float) else float("nan")

    meta = out["meta"] if "meta" in out.columns else pd.Series([None] * len(out), index=out.index)
    out["L"] = [meta_L(m) for m in meta]
    several = out["run"].nunique() > 1 if "run" in out.columns else False
    out["problem"] = (
        out["run"].astype(str) + ":" + out["instance_id"].astype(str)
        if several
        else out["instance_id"].astype(str)
    )
    out["L"] = out["L"].fillna(out.groupby("problem")["C"].transform("max")).astype(np.int64)
    err = out["error"].notna() & (out["error"].astype(str) != "") if "error" in out else False
    out = out[~err & out["f1_relaxed"].notna()].copy()
    out["score"] = out["f1_relaxed"].astype(float)
    out["idk"] = [is_idk(a) for a in out["answer"]]
    # Different runs are different models: each run's problems form their own tasks.
    out["task"] = (
        out["run"].astype(str) + " | " + out[task_by].astype(str)
        if several
        else out[task_by].astype(str)
    )
    drop = ("variant", "meta", "error", "parse_error", "f1_relaxed")
    return out.drop(columns=[c for c in drop if c in out.columns]).reset_index(drop=True)
