"""DOLCE closed forms: the COW cover probability pi and the PIG partial-point rho (App. A, B).

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
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.special import gammaln

__all__ = [
    "TINY",
    "cover_probability_cow",
    "cover_probability_cow_vec",
    "log_pig_pmf",
    "partial_point_density_pig",
    "partial_point_density_pig_vec",
    "partial_point_distribution_pig",
    "partial_point_mode_pig",
    "partial_point_probability_pig",
    "partial_point_probability_pig_vec",
    "pig_mode_s",
]

#: Floor of divisors and probabilities (keeps logs and ratios finite).
TINY = 1e-300


# ================================================================== binomials in log space
def _log_binom(n: Any, r: Any) -> np.ndarray:
    """Log binom(n, r) elementwise; -inf where the binomial is 0 (r < 0, r > n or n < 0)."""
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
        log_b = np.where(coef > 0, np.log(np.maximum(coef, TINY)), -np.inf) + _log_binom(w + u, km)
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
    """Log binom(n, r) for integer arrays already known to satisfy 0 <= r <= n."""
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


def log_pig_pmf(g: Any, lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """Log rho_tilde for integer g = s * lambda, elementwise over broadcast arrays."""
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
    return float(np.exp(log_pig_pmf(g, lam, k, L, C)))


def partial_point_probability_pig_vec(g: Any, lam: Any, k: Any, L: Any, C: Any) -> np.ndarray:
    """rho-tilde for integer numbers of covered groups ``g = s * lambda`` (broadcast arrays)."""
    return np.exp(log_pig_pmf(g, lam, k, L, C))


def partial_point_distribution_pig(lam: int, k: int, L: int, C: int) -> np.ndarray:
    """rho-tilde(i / lambda) for i = 0..lambda: the distribution of covered groups."""
    lam, k, L, C = _check_args(lam, k, L, C)
    return np.exp(log_pig_pmf(np.arange(lam + 1), lam, k, L, C))


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
    p_lo = np.exp(log_pig_pmf(lo, lam, k, L, C))
    p_hi = np.where(frac > 0, np.exp(log_pig_pmf(np.minimum(hi, lam), lam, k, L, C)), 0.0)
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
    logp = log_pig_pmf(cand, lam[..., None], k[..., None], L[..., None], C[..., None])
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
    return float(pig_mode_s(np.asarray(lam), np.asarray(k), np.asarray(L), np.asarray(C)))


def pig_mode_s(lam: np.ndarray, k: np.ndarray, L: np.ndarray, C: np.ndarray) -> np.ndarray:
    """argmax_s rho elementwise (Algorithm 2's oracle hit rate); 1 where lambda = 0."""
    lam_f = np.asarray(lam, dtype=float)
    g = _pig_mode_g(lam, k, L, C)
    return np.where(lam_f == 0, 1.0, g / np.maximum(lam_f, 1.0))
