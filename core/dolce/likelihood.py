"""PIG estimator that identifies lambda: EM with a per-observation likelihood (issue 16).

Why (the default PIG estimator; Algorithm 2 stays selectable as ``published``). Algorithm 2
scores a candidate ``(lambda, k)`` by rho at the per-length mean score, whose expectation
``1 - binom(L - k, C) / binom(L, C)`` does not depend on lambda (seed App. L concedes lambda
enters only the higher moments), while the ``(lambda + 1)``-scaled density there grows with
lambda: its argmax is the largest feasible lambda. Here every observed score is scored by the
exact pmf rho-tilde of App. B.1 on the ``1 / lambda`` lattice, so the spread of the scores and
the lattice they fall on identify lambda; the mean still identifies k.

The model (per task; everything not named here is as in Algorithm 2):

- outcomes: IDK, a score of exactly 0, exactly 1, or an interior score ``0 < s < 1``;
- **background noise** (task level, non-parametric, as in Algorithm 2): probabilities
  ``p_N(IDK), p_N(0), p_N(1), p_N(interior)``; interior noise scores are uniform on (0, 1);
- **hybrid oracle** (problem level): the span covers ``g`` of the ``lambda`` aspect groups
  with probability rho-tilde(g / lambda), and the oracle scores ``g / lambda``; when it
  covers nothing (``g = 0``) it says IDK with a non-parametric share ``eta`` per (problem,
  length) and scores 0 otherwise, as Algorithm 2 splits the oracle's misses between "0" and
  "IDK" (line 1116). ``lambda = 0`` (closed book): the oracle scores 1 at every length (the
  mode convention of :mod:`core.dolce.closed_forms`). ``k = 0`` is no PIG candidate, nor is
  ``k * lambda > L`` (Assumption 2 needs ``k * lambda <= L``).

Scores off the lattice (the tolerance). Both components give the probability of the same
event, so candidates with different lattices compare on one footing: a score of exactly 0 or
1 is that outcome; an interior score ``s`` is the event "an interior score within
``tolerance`` of s". The oracle's probability of it is the sum of rho-tilde(g / lambda) over
the interior lattice points ``0 < g / lambda < 1`` in ``[s - tolerance, s + tolerance]``
(0 when none is, i.e. s is off this candidate's lattice), the noise's
``p_N(interior) * |[s - tolerance, s + tolerance] & (0, 1)|``. An off-lattice score thus
costs a candidate the oracle's share of it but never zeroes the likelihood: the noise
explains it. The default tolerance 0.005 treats scores as resolved to 0.01 (relaxed F1 of
short answers is a ratio of small token counts: 2/3 = 0.667 is on the lattice of lambda = 3,
6, ... within it). Candidates with lambda >= 1 / (2 * tolerance) = 100 have a lattice point
within the tolerance of every score; their pmf is spread over ``lambda + 1`` points, so they
win only where the scores really are that finely spread.

EM (as Algorithm 2, from ``q = 0.5``): per step the M-step re-estimates the task's noise
probabilities and each (problem, length)'s IDK share from the current posteriors, picks
``(lambda, k)`` per problem by brute force over the candidate grid maximising
``sum_j log(P(O) p(x_j | O; lambda, k) + P(N) p(x_j | N))``, and the E-step updates the
posteriors. One departure from Algorithm 2, which scores every candidate at the problem's
current P(O): each candidate is scored at its own P(O), :data:`PRIOR_STEPS` EM steps on the
prior alone from the current one (``P(O) <- mean_j P(O | x_j)``), and the selected
candidate's becomes the problem's. Otherwise a candidate that needs the noise to explain part
of the data (a larger k, with the zeros left to the noise) keeps winning at the P(O) it set
in the first step (P(O) = 0.83 for the true 0.99 on noise-free problems with lambda = 1),
while the true candidate at its own P(O) fits better. rho-tilde is evaluated once per
(candidate, observed value) before the loop: unlike Algorithm 2, the data the candidates are
scored on do not move.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.dolce.closed_forms import TINY, log_pig_pmf

#: The problems' arrays (``core.dolce.em._Problems``; em.py imports this module, so the type
#: is not imported here).
_Problems = Any

__all__ = [
    "PIG_TOLERANCE",
    "PRIOR_STEPS",
    "check_tolerance",
    "em_pig_likelihood",
    "observation_probability",
]

#: Default half-width of the window an interior score stands for (scores resolved to 0.01).
PIG_TOLERANCE = 0.005
# Outcome classes: a score of exactly 0, exactly 1, IDK, an interior score.
_ZERO, _ONE, _IDK, _MID = 0, 1, 2, 3
# Lattice points within the window are found with this slack (s * lambda is a float).
_EPS = 1e-9
#: EM steps on each candidate's own P(oracle) inside every brute-force step.
PRIOR_STEPS = 3
# P(oracle) is kept above this, so the noise can take over again in a later step.
_PRIOR_MIN = 1e-6


def check_tolerance(tolerance: float) -> float:
    """``tolerance`` as a float, or ValueError unless ``0 < tolerance < 0.5``."""
    t = float(tolerance)
    if not 0.0 < t < 0.5:
        raise ValueError(f"PIG tolerance must be in (0, 0.5), got {tolerance!r}")
    return t


def _classes(s: np.ndarray) -> np.ndarray:
    """Outcome class of each score (NaN = IDK)."""
    return np.where(
        np.isnan(s), _IDK, np.where(s == 0.0, _ZERO, np.where(s == 1.0, _ONE, _MID))
    ).astype(np.int64)


def _window(s: np.ndarray, lam: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Interior lattice points ``g`` (``1 <= g <= lambda - 1``) with ``|g / lambda - s| <= tol``."""
    lo = np.maximum(np.ceil((s - tol) * lam - _EPS), 1).astype(np.int64)
    hi = np.minimum(np.floor((s + tol) * lam + _EPS), lam - 1).astype(np.int64)
    return lo, hi


def _noise_width(s: np.ndarray, tol: float) -> np.ndarray:
    """Length of ``[s - tol, s + tol]`` inside (0, 1): the uniform noise's share of it."""
    return np.minimum(s + tol, 1.0) - np.maximum(s - tol, 0.0)


def observation_probability(
    s: float | None,
    lam: int,
    k: int,
    L: int,
    C: int,
    *,
    eta: float = 0.5,
    tolerance: float = PIG_TOLERANCE,
) -> float:
    """The oracle's probability of one observed PIG outcome under ``(lambda, k)``.

    Args:
        s: the score in [0, 1], or None / NaN for IDK.
        lam: number of aspects lambda (0: closed book, the oracle scores 1).
        k: copies of each aspect (>= 1).
        L: context length in units.
        C: observation length in units.
        eta: the oracle's IDK share of the spans that cover no aspect.
        tolerance: half-width of the window an interior score stands for.

    Returns:
        ``rho_tilde(0) * (1 - eta)`` for a score of 0, ``rho_tilde(0) * eta`` for IDK,
        ``rho_tilde(1)`` for a score of 1, and for an interior score the sum of
        ``rho_tilde(g / lambda)`` over ``0 < g < lambda`` with ``|g / lambda - s| <=
        tolerance``; 0 where ``k * lambda > L``.
    """
    tol = check_tolerance(tolerance)
    value = np.nan if s is None else float(s)
    if not (np.isnan(value) or 0.0 <= value <= 1.0):
        raise ValueError(f"s must be in [0, 1] or None (IDK), got {s!r}")
    cls = int(_classes(np.array([value]))[0])
    if lam == 0:
        return 1.0 if cls == _ONE else 0.0
    if k < 1 or k * lam > L:
        return 0.0
    if cls in (_ZERO, _IDK):
        p0 = float(np.exp(log_pig_pmf(0, lam, k, L, C)))
        return p0 * (eta if cls == _IDK else 1.0 - eta)
    if cls == _ONE:
        return float(np.exp(log_pig_pmf(lam, lam, k, L, C)))
    lo, hi = _window(np.array([value]), np.array([lam]), tol)
    g = np.arange(int(lo[0]), int(hi[0]) + 1)
    return float(np.exp(log_pig_pmf(g, lam, k, L, C)).sum()) if g.size else 0.0


def _unique_rows(cols: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Distinct rows of non-negative integer columns, and each row's index among them."""
    radix = [int(c.max()) + 1 if c.size else 1 for c in cols]
    if float(np.prod(np.array(radix, dtype=float))) < 2.0**62:
        # Packed into one int64 key: a 1-D sort, far faster than unique(axis=0).
        key = np.zeros(cols[0].shape, dtype=np.int64)
        for c, r in zip(cols, radix, strict=True):
            key = key * r + c
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return tuple(c[first] for c in cols), inv.reshape(-1)
    uniq, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    return tuple(uniq.T), inv.reshape(-1)


def _interior_cells(
    pr: _Problems, rp: np.ndarray, rc: np.ndarray, rs: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (interior row, lambda, k) with a lattice point in the row's window.

    Returns ``(row, a, b, log_p)``: the row, the candidate indices of lambda and k, and the
    log of the oracle's probability of the row's window (a sum of rho-tilde over its points).
    """
    lam = pr.cand[rp]  # (R, nK)
    lo, hi = _window(rs[:, None], lam, tol)
    on = (lam >= 1) & pr.kmask[rp] & (lo <= hi)
    r_idx, a_idx = np.nonzero(on)
    lam_ra = lam[r_idx, a_idx]
    k_all = pr.cand[rp[r_idx]]  # (M, nK)
    ok = (k_all >= 1) & (k_all * lam_ra[:, None] <= pr.L[rp[r_idx], None])
    m_idx, b_idx = np.nonzero(ok)
    row, a, b = r_idx[m_idx], a_idx[m_idx], b_idx
    if row.size == 0:
        return row, a, b, np.zeros(0)
    g_lo, g_hi = lo[row, a], hi[row, a]
    n = g_hi - g_lo + 1
    starts = np.cumsum(n) - n
    owner = np.repeat(np.arange(row.size), n)
    g = g_lo[owner] + np.arange(int(n.sum())) - starts[owner]
    lam_f, k_f = pr.cand[rp[row], a][owner], pr.cand[rp[row], b][owner]
    L_f, C_f = pr.L[rp[row]][owner], pr.C[rp[row], rc[row]][owner]
    # One rho-tilde per distinct (g, lambda, k, L, C): problems share lengths and values.
    uniq, inv = _unique_rows((g, lam_f, k_f, L_f, C_f))
    logp = log_pig_pmf(*uniq)[inv]
    top = np.maximum.reduceat(logp, starts)
    with np.errstate(divide="ignore"):
        tot = np.log(
            np.add.reduceat(np.exp(logp - np.where(np.isfinite(top), top, 0)[owner]), starts)
        ) + np.where(np.isfinite(top), top, 0)
    keep = np.isfinite(tot)
    return row[keep], a[keep], b[keep], tot[keep]


def _score(
    prior_v: np.ndarray,
    p_ov: tuple[np.ndarray, np.ndarray, np.ndarray],
    p_n: np.ndarray,
    cnt_v: np.ndarray,
    rp: np.ndarray,
    vp: np.ndarray,
    r_n: np.ndarray,
    log_noise0: np.ndarray,
    sparse: tuple[np.ndarray, np.ndarray, np.ndarray],
    P: int,
    last: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood and oracle responsibility (sum over observations) of every candidate.

    ``prior_v`` is each candidate's P(oracle), ``p_ov`` the oracle's probabilities of a score
    of 0, of 1 and of IDK per (candidate, length), ``cnt_v`` the counts; interior rows are
    noise (``log_noise0``: log p_N(interior) x window) except the ``sparse`` entries ``(row,
    candidate slot, log p_O)``. With ``last`` only the log-likelihood is computed.
    """
    po = prior_v[:, None]
    ll_v = np.zeros(prior_v.size)
    resp_v = np.zeros(prior_v.size)
    for v, p_o in zip((_ZERO, _ONE, _IDK), p_ov, strict=True):
        n = cnt_v[:, :, v]
        mix = np.maximum(p_o * po + p_n[v] * (1.0 - po), TINY)
        ll_v += (n * np.log(mix, where=n > 0, out=np.zeros_like(mix))).sum(axis=1)
        if not last:
            resp_v += (n * p_o * po / mix).sum(axis=1)
    # Interior rows: all noise, plus each (lambda, k) whose lattice reaches the row.
    log_pn = np.log(np.maximum(1.0 - prior_v, TINY))
    n_mid = np.bincount(rp, weights=r_n, minlength=P)[vp]
    ll_v += np.bincount(rp, weights=r_n * log_noise0, minlength=P)[vp] + n_mid * log_pn
    row, slot, logp = sparse
    if row.size:
        noise = log_noise0[row] + log_pn[slot]
        oracle = np.log(np.maximum(prior_v[slot], TINY)) + logp
        both = np.logaddexp(oracle, noise)
        ll_v += np.bincount(slot, weights=r_n[row] * (both - noise), minlength=prior_v.size)
        if not last:
            resp_v += np.bincount(
                slot, weights=r_n[row] * np.exp(oracle - both), minlength=prior_v.size
            )
    return ll_v, resp_v


def em_pig_likelihood(
    pr: _Problems, p_idx: np.ndarray, c_idx: np.ndarray, s: np.ndarray, steps: int, tol: float
) -> dict[str, np.ndarray]:
    """EM with the per-observation likelihood on one task (module docstring).

    Args:
        pr: the task's problems, candidate grids and observed lengths.
        p_idx: each observation's problem (row of ``pr``).
        c_idx: each observation's length column (``pr.C[p_idx, c_idx]`` is its C).
        s: each observation's score (NaN = IDK).
        steps: EM steps.
        tol: the window half-width of an interior score.

    Returns:
        ``lam, k`` (candidate values), ``sel`` (their indices), ``p_oracle``, ``loglik``,
        ``p_noise`` (score 0, score 1, IDK, interior), ``noise_mean`` and ``noise_idk``
        (the noise's mean score, IDK as 0, and IDK probability), ``oracle_mean[p, c]`` and
        ``oracle_idk[p, c]`` (the oracle's mean score and IDK probability at the selected
        candidate).
    """
    P, nC = pr.C.shape
    nK = pr.cand.shape[1]
    cls = _classes(s)
    # Outcomes of exactly 0, exactly 1 and IDK, counted per (problem, length).
    cnt = np.zeros((P, nC, 3))
    fixed = cls != _MID
    np.add.at(cnt, (p_idx[fixed], c_idx[fixed], cls[fixed]), 1.0)
    # Interior scores, one row per distinct (problem, length, value) with its count.
    mid = np.flatnonzero(cls == _MID)
    keys = np.stack([p_idx[mid].astype(float), c_idx[mid].astype(float), s[mid]], axis=1)
    rows, r_n = np.unique(keys, axis=0, return_counts=True)
    rp = rows[:, 0].astype(np.int64)
    rc = rows[:, 1].astype(np.int64)
    rs = rows[:, 2]
    r_n = r_n.astype(float)
    r_w = _noise_width(rs, tol)
    r_sum = rs * r_n  # interior score mass per row (for the noise's mean score)

    # The candidates: (problem, lambda, k) with k >= 1 and k * lambda <= L (any k for the
    # closed book lambda = 0, where all tie and the smallest k is kept), flattened.
    lam3 = pr.cand[:, :, None]
    k3 = pr.cand[:, None, :]
    valid = pr.kmask[:, :, None] & pr.kmask[:, None, :] & (k3 >= 1)
    valid &= (lam3 == 0) | (lam3 * k3 <= pr.L[:, None, None])
    vcell = np.flatnonzero(valid)
    vp, va, vb = np.unravel_index(vcell, (P, nK, nK))
    # rho-tilde(0) and rho-tilde(lambda) per candidate and observed length.
    v_lam, v_k = pr.cand[vp, va], pr.cand[vp, vb]
    rho0 = np.zeros((vcell.size, nC))
    rho1 = np.zeros((vcell.size, nC))
    vi, ci = np.nonzero((v_lam >= 1)[:, None] & pr.cmask[vp])
    args = (v_lam[vi], v_k[vi], pr.L[vp[vi]], pr.C[vp[vi], ci])
    rho0[vi, ci] = np.exp(log_pig_pmf(0, *args))
    rho1[vi, ci] = np.exp(log_pig_pmf(args[0], *args))
    rho1[v_lam == 0] = 1.0  # lambda = 0: the oracle scores 1 at every length
    # Where each candidate sits in the flat list, for the interior rows.
    slot = np.full(P * nK * nK, -1, dtype=np.int64)
    slot[vcell] = np.arange(vcell.size)
    row, ra, rb, r_logp = _interior_cells(pr, rp, rc, rs, tol)
    r_slot = slot[(rp[row] * nK + ra) * nK + rb]
    cnt_v = cnt[vp]  # (V, nC, 3)

    q_o_fixed = np.full((P, nC, 3), 0.5)  # posteriors of the oracle, per class and length
    q_o_mid = np.full(rs.size, 0.5)
    prior_o = np.full(P, 0.5)
    rows_p = np.arange(P)
    n_tot = cnt.sum(axis=(1, 2)) + np.bincount(rp, weights=r_n, minlength=P)
    a = np.zeros(P, dtype=np.int64)
    b = np.zeros(P, dtype=np.int64)
    p_n = np.full(4, 0.25)
    eta = np.full((P, nC), 0.5)
    po_fixed = np.zeros((P, nC, 3))
    po_mid = np.zeros(rs.size)
    for _ in range(steps):
        # M-step: the task's noise, each (problem, length)'s IDK share of the oracle's misses.
        w_n = np.append(((1.0 - q_o_fixed) * cnt).sum(axis=(0, 1)), ((1.0 - q_o_mid) * r_n).sum())
        p_n = w_n / max(w_n.sum(), TINY)
        w_o = q_o_fixed * cnt
        miss = w_o[:, :, _ZERO] + w_o[:, :, _IDK]
        eta = np.where(miss > 0, w_o[:, :, _IDK] / np.maximum(miss, TINY), 0.5)
        # Brute force over (lambda, k): the mixture log-likelihood of every observation, each
        # candidate at its own P(oracle) (a few EM steps on the prior alone, from the
        # current one): a candidate that fits with less noise is not judged at the prior of
        # one that needed more.
        eta_v = eta[vp]
        p_ov = (rho0 * (1.0 - eta_v), rho1, rho0 * eta_v)  # classes 0, 1, IDK
        log_noise0 = np.log(np.maximum(p_n[_MID] * r_w, TINY))
        prior_v = prior_o[vp]
        for it in range(PRIOR_STEPS + 1):
            ll_v, resp_v = _score(
                prior_v,
                p_ov,
                p_n,
                cnt_v,
                rp,
                vp,
                r_n,
                log_noise0,
                (row, r_slot, r_logp),
                P,
                it == PRIOR_STEPS,
            )
            if it < PRIOR_STEPS:
                prior_v = np.clip(resp_v / np.maximum(n_tot[vp], TINY), _PRIOR_MIN, 1.0)
        ll = np.full(P * nK * nK, -np.inf)
        ll[vcell] = ll_v
        best = np.argmax(ll.reshape(P, -1), axis=1)
        a, b = np.divmod(best, nK)
        chosen = slot[(rows_p * nK + a) * nK + b]
        # The oracle's probabilities at the selected candidate.
        r0 = rho0[chosen]
        po_fixed = np.stack([r0 * (1.0 - eta), rho1[chosen], r0 * eta], axis=2)
        po_mid = np.zeros(rs.size)
        if row.size:
            hit = r_slot == chosen[rp[row]]
            po_mid[row[hit]] = np.exp(r_logp[hit])
        # P(oracle): the selected candidate's; then the E-step.
        prior_o = prior_v[chosen]
        num_o = po_fixed * prior_o[:, None, None]
        tot = num_o + p_n[None, None, :3] * (1.0 - prior_o)[:, None, None]
        q_o_fixed = np.where(tot > 0, num_o / np.maximum(tot, TINY), 0.5)
        num_m = po_mid * prior_o[rp]
        tot_m = num_m + p_n[_MID] * r_w * (1.0 - prior_o[rp])
        q_o_mid = np.where(tot_m > 0, num_m / np.maximum(tot_m, TINY), 0.5)
    # The log-likelihood of the final parameters.
    po = prior_o[:, None, None]
    mix = np.maximum(po_fixed * po + p_n[None, None, :3] * (1.0 - po), TINY)
    loglik = (cnt * np.where(cnt > 0, np.log(mix), 0.0)).sum(axis=(1, 2))
    mix_m = np.maximum(po_mid * prior_o[rp] + p_n[_MID] * r_w * (1.0 - prior_o[rp]), TINY)
    loglik += np.bincount(rp, weights=r_n * np.log(mix_m), minlength=P)
    # Mean scores (IDK as 0) for the fitted curves: the noise's, weighted by its posteriors.
    w_noise = (1.0 - q_o_fixed) * cnt
    noise_mass = w_noise[:, :, _ONE].sum() + ((1.0 - q_o_mid) * r_sum).sum()
    noise_mean = noise_mass / max(w_noise.sum() + ((1.0 - q_o_mid) * r_n).sum(), TINY)
    lam_s = pr.cand[rows_p, a][:, None]
    k_s = pr.cand[rows_p, b][:, None]
    C0 = np.clip(pr.C, 0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        uncovered = np.exp(log_pig_pmf(0, 1, k_s, pr.L[:, None], C0))  # one group missed
    oracle_mean = np.where(lam_s == 0, 1.0, 1.0 - uncovered)
    return {
        "lam": pr.cand[rows_p, a],
        "k": pr.cand[rows_p, b],
        "sel": np.stack([a, b], axis=1),
        "p_oracle": prior_o,
        "loglik": loglik,
        "p_noise": p_n,
        "noise_mean": np.float64(noise_mean),
        "noise_idk": np.float64(p_n[_IDK]),
        "oracle_mean": oracle_mean,
        "oracle_idk": po_fixed[:, :, _IDK],
    }
