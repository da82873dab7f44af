"""DOLCE estimators: EM for COW (Algorithm 1) and PIG, one task at a time (App. C).

PIG has two estimators (:data:`PIG_ESTIMATORS`):

- ``likelihood`` (default): EM with a per-observation likelihood, every observed score scored
  by the exact rho-tilde pmf on the ``1 / lambda`` lattice (:mod:`core.dolce.likelihood`); the
  task-level background noise and the hybrid oracle's 0 / IDK split are kept as in Algorithm 2.
  It identifies lambda: on problems simulated from the PIG model it recovers the exact
  ``(lambda, k)`` (``tests/test_dolce_pig_identify.py``).
- ``published``: Algorithm 2 as printed, implemented line by line. It does not identify
  lambda. It scores a candidate ``(lambda, k)`` by rho at the per-length oracle hit rate
  ``P_{i,C}(y = 1 | O)`` (line 1108), not at each observed score, so the data enter only
  through the mean score curve over C. That curve's expectation,
  ``1 - binom(L - k, C) / binom(L, C)`` (the chance that one group is covered), does not depend
  on lambda (App. L); lambda only sets how peaked rho-tilde is around it, and the
  ``(lambda + 1)``-scaled density there grows with lambda (about ``sqrt(lambda)``). The
  brute-force argmax therefore identifies k, but for lambda it favours the large candidates
  compatible with the curve (``k * lambda <= L``), whatever the true lambda: on 200 simulated
  problems (``tests/test_dolce_em.py``) the exact category comes out for 37-52% at 30, 100 or
  300 spans per length, with or without background noise, while whether ``k > k_p`` is
  recovered for 92-98%. Its lambda and categories are reported as the paper's algorithm gives
  them and flagged "not identified" (``identified = False``) by :func:`core.dolce.fit_dolce`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.dolce.categories import candidate_grid
from core.dolce.closed_forms import TINY, cover_probability_cow_vec, log_pig_pmf, pig_mode_s
from core.dolce.likelihood import PIG_TOLERANCE, check_tolerance, em_pig_likelihood
from core.dolce.outcomes import IDK
from core.dolce.params import LIKELIHOOD_STEPS, PIG_ESTIMATORS, PUBLISHED

__all__ = [
    "COW_STEPS",
    "PIG_ESTIMATORS",
    "PIG_STEPS",
    "PIG_TOLERANCE",
    "check_pig_estimator",
    "fit_cow",
    "fit_pig",
    "require_columns",
]

#: EM steps of Algorithm 1 (COW) and Algorithm 2 (PIG), as in the paper (§4).
COW_STEPS = 10
PIG_STEPS = 5


def check_pig_estimator(estimator: str) -> str:
    """``estimator`` if it is one of :data:`PIG_ESTIMATORS`, else ValueError naming them."""
    if estimator not in PIG_ESTIMATORS:
        raise ValueError(
            f"unknown PIG estimator {estimator!r}; choose one of: {', '.join(PIG_ESTIMATORS)}"
        )
    return estimator


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
    if any(int(c.max()) > int(n) for c, n in zip(cs, L, strict=True)):
        raise ValueError("an observation length C exceeds its problem's L")
    cands = [candidate_grid(c, n) for c, n in zip(cs, L, strict=True)]
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


def _oracle_prior_and_noise_share(
    weights: np.ndarray, q_n: np.ndarray, n_tot: np.ndarray, p_n: np.ndarray, p_o: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The M-step prior P(oracle) per problem and the E-step noise posterior (both algorithms).

    ``weights[p, c, x]`` are the outcome counts (COW) or summed outcomes y (PIG), ``q_n`` the
    current noise posteriors, ``n_tot`` the observations per problem, ``p_n`` the task's noise
    distribution and ``p_o[p, c, x]`` the oracle's.
    """
    prior_o = (weights * (1.0 - q_n)).sum(axis=(1, 2)) / np.maximum(n_tot, TINY)
    num_n = p_n[None, None, :] * (1.0 - prior_o)[:, None, None]
    num_o = p_o * prior_o[:, None, None]
    tot = num_n + num_o
    return prior_o, np.where(tot > 0, num_n / np.maximum(tot, TINY), 0.5)


def _estimates(
    pr: _Problems, sel: np.ndarray, prior_o: np.ndarray, loglik: np.ndarray
) -> dict[str, np.ndarray]:
    """Selected lambda and k, P(oracle) and log-likelihood per problem (both algorithms).

    The algorithms add their noise and oracle outcome distributions (``p_oracle_*`` of shape
    ``(P, nC, 3)``).
    """
    rows = np.arange(len(pr.ids))
    return {
        "lam": pr.cand[rows, sel[:, 0]],
        "k": pr.cand[rows, sel[:, 1]],
        "p_oracle": prior_o,
        "loglik": loglik,
    }


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
        p_n = w_n.sum(axis=(0, 1)) / max(w_n.sum(), TINY)
        w_o = counts * (1.0 - q_n)
        num = np.einsum("pac,pcx->pax", below.astype(float), w_o)  # (P, nK, 3)
        den = num.sum(axis=2, keepdims=True)
        nonpar = np.where(den > 0, num / np.maximum(den, TINY), 1.0 / 3.0)
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
        prior_o, q_n = _oracle_prior_and_noise_share(
            counts, q_n, counts.sum(axis=(1, 2)), p_n, p_o_sel
        )
    mix = p_o_sel * prior_o[:, None, None] + p_n[None, None, :] * (1.0 - prior_o)[:, None, None]
    loglik = (counts * np.where(counts > 0, _safe_log(mix), 0.0)).sum(axis=(1, 2))
    return {**_estimates(pr, sel, prior_o, loglik), "p_noise_x": p_n, "p_oracle_x": p_o_sel}


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
        # lambda = 0 (and padding): rho = 1 for every s (see core.dolce.closed_forms).
        self.base = np.broadcast_to(np.where(lam <= 0, 1.0, 0.0), (P, nK, nK, nC))
        self.lo = np.full(cells.size, -1, dtype=np.int64)
        self.hi_of = np.full(cells.size, -1, dtype=np.int64)
        self.p_lo = np.zeros(cells.size)
        self.p_hi = np.zeros(cells.size)

    def density(self, s: np.ndarray) -> np.ndarray:
        """Rho at the oracle hit rates ``s[p, c]`` for every grid cell ``(p, a, b, c)``."""
        x = np.clip(s[self.pc], 0.0, 1.0) * self.lam
        near = np.rint(x)
        exact = np.abs(x - near) <= 1e-9 * np.maximum(self.lam, 1.0)
        lo = np.where(exact, near, np.floor(x)).astype(np.int64)
        frac = np.where(exact, 0.0, x - lo)
        redo = np.flatnonzero(lo != self.lo)
        if redo.size:
            self.p_lo[redo] = np.exp(log_pig_pmf(lo[redo], *(a[redo] for a in self.args)))
            self.lo[redo] = lo[redo]
        # frac > 0 implies lo < s * lambda <= lambda, so lo + 1 is a valid number of groups.
        between = frac > 0
        redo = np.flatnonzero(between & (self.hi_of != lo))
        if redo.size:
            g = lo[redo] + 1
            self.p_hi[redo] = np.exp(log_pig_pmf(g, *(a[redo] for a in self.args)))
            self.hi_of[redo] = lo[redo]
        val = np.where(between, (1.0 - frac) * self.p_lo + frac * self.p_hi, self.p_lo)
        out = np.array(self.base)
        out.reshape(-1)[self.cells] = (self.lam + 1.0) * val
        return out


def _em_pig(pr: _Problems, y: np.ndarray, n_obs: np.ndarray, steps: int) -> dict[str, np.ndarray]:
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
        p_n = w_n.sum(axis=(0, 1)) / max(w_n.sum(), TINY)
        w_o = (1.0 - q_n) * y
        den = w_o.sum(axis=2, keepdims=True)
        p_o = np.where(den > 0, w_o / np.maximum(den, TINY), 1.0 / 3.0)
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
            mode[moved] = pig_mode_s(lam_s, k_s, L_s, C_0[moved])
            known[moved] = sel[moved]
        rest = p_o[:, :, 0] + p_o[:, :, 2]
        share0 = np.where(rest > 0, p_o[:, :, 0] / np.maximum(rest, TINY), 0.5)
        p_o = np.stack([(1.0 - mode) * share0, mode, (1.0 - mode) * (1.0 - share0)], axis=2)
        prior_o, q_n = _oracle_prior_and_noise_share(y, q_n, n_obs.sum(axis=1), p_n, p_o)
    po = prior_o[:, None]
    loglik = (n_obs * np.where(n_obs > 0, _safe_log(rho_sel * po + (1.0 - po)), 0.0)).sum(axis=1)
    return {**_estimates(pr, sel, prior_o, loglik), "p_noise_y": p_n, "p_oracle_y": p_o}


def require_columns(frame: pd.DataFrame, cols: Sequence[str], what: str) -> pd.DataFrame:
    """A copy of ``frame`` with a ``task`` column ("" when absent).

    Raises:
        ValueError: ``frame`` lacks one of ``cols``; ``what`` names the frame in the message.
    """
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}; need {', '.join(cols)}")
    out = frame.copy()
    if "task" not in out.columns:
        out["task"] = ""
    return out


def _problem_rows(
    task: Any,
    pr: _Problems,
    res: Mapping[str, np.ndarray],
    scenario: str,
    n_obs: np.ndarray,
    estimator: str,
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": task,
            "problem": pr.ids,
            "scenario": scenario,
            "estimator": estimator,
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
        ``(problems, curves)``: one row per problem (``task, problem, scenario, estimator``
        (``published``: Algorithm 1), ``L, n_obs, max_C, lam, k, p_oracle, log_likelihood``)
        and one row per (problem, observed C) with the observed outcome shares and the fitted
        mixture's ``fit_p1, fit_p0, fit_pidk``.
    """
    obs = require_columns(observations, ("problem", "L", "C", "x"), "COW observations")
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
        problems.append(_problem_rows(task, pr, res, "COW", counts.sum(axis=(1, 2)), "published"))
        prior = res["p_oracle"][:, None, None]
        fit = res["p_oracle_x"] * prior + res["p_noise_x"][None, None, :] * (1.0 - prior)
        n = counts.sum(axis=2)
        for i, pid in enumerate(pr.ids):
            for c in np.flatnonzero(pr.cmask[i]):
                tot = max(n[i, c], 1.0)
                curves.append(
                    (
                        task,
                        pid,
                        int(pr.C[i, c]),
                        int(n[i, c]),
                        counts[i, c, 1] / tot,
                        counts[i, c, 0] / tot,
                        counts[i, c, IDK] / tot,
                        np.nan,
                        fit[i, c, 1],
                        fit[i, c, 0],
                        fit[i, c, IDK],
                        np.nan,
                    )
                )
    return pd.concat(problems, ignore_index=True), _curves_frame(curves, "COW")


def fit_pig(
    observations: pd.DataFrame,
    *,
    steps: int | None = None,
    estimator: str = "likelihood",
    tolerance: float = PIG_TOLERANCE,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Estimate lambda and k per problem under PIG, one task at a time.

    Args:
        observations: one row per probe: ``problem``, ``L``, ``C``, ``s`` (score in [0, 1],
            NaN for IDK) and optionally ``task``.
        steps: EM steps (None: 5 for ``published`` as in the paper, 10 for ``likelihood``).
        estimator: ``likelihood`` (default: every observed score scored by the exact
            rho-tilde pmf; identifies lambda) or ``published`` (Algorithm 2 as printed; does
            not identify lambda). See the module docstring.
        tolerance: ``likelihood`` only: an interior score stands for the scores within this
            distance (default 0.005); see :mod:`core.dolce.likelihood`.

    Returns:
        ``(problems, curves)`` as :func:`fit_cow` (``estimator`` names the PIG estimator);
        curves carry the observed mean score ``obs_s`` (IDK as 0) and IDK share ``obs_pidk``
        and the mixture's expected score ``fit_s`` (``published``: oracle hit rate x
        P(oracle) + noise hit rate x P(noise); ``likelihood``: the oracle's mean score
        ``1 - binom(L - k, C) / binom(L, C)`` x P(oracle) + the noise's mean score x
        P(noise)), and for ``likelihood`` the mixture's IDK probability ``fit_pidk``.
    """
    check_pig_estimator(estimator)
    tol = check_tolerance(tolerance)
    if steps is None:
        steps = PIG_STEPS if estimator == PUBLISHED else LIKELIHOOD_STEPS
    obs = require_columns(observations, ("problem", "L", "C", "s"), "PIG observations")
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
        if estimator == PUBLISHED:
            res = _em_pig(pr, y, n_obs, steps)
            prior = res["p_oracle"][:, None]
            fit_s = res["p_oracle_y"][:, :, 1] * prior + res["p_noise_y"][1] * (1.0 - prior)
            fit_idk = np.full(pr.C.shape, np.nan)
        else:
            res = em_pig_likelihood(pr, pc[0], pc[1], sv, steps, tol)
            prior = res["p_oracle"][:, None]
            fit_s = res["oracle_mean"] * prior + res["noise_mean"] * (1.0 - prior)
            fit_idk = res["oracle_idk"] * prior + res["noise_idk"] * (1.0 - prior)
        problems.append(_problem_rows(task, pr, res, "PIG", n_obs.sum(axis=1), estimator))
        for i, pid in enumerate(pr.ids):
            for c in np.flatnonzero(pr.cmask[i]):
                tot = max(n_obs[i, c], 1.0)
                curves.append(
                    (
                        task,
                        pid,
                        int(pr.C[i, c]),
                        int(n_obs[i, c]),
                        np.nan,
                        np.nan,
                        y[i, c, 2] / tot,
                        y[i, c, 1] / tot,
                        np.nan,
                        np.nan,
                        fit_idk[i, c],
                        fit_s[i, c],
                    )
                )
    return pd.concat(problems, ignore_index=True), _curves_frame(curves, "PIG")


def _curves_frame(rows: list[tuple], scenario: str) -> pd.DataFrame:
    cols = [
        "task",
        "problem",
        "C",
        "n",
        "obs_p1",
        "obs_p0",
        "obs_pidk",
        "obs_s",
        "fit_p1",
        "fit_p0",
        "fit_pidk",
        "fit_s",
    ]
    out = pd.DataFrame(rows, columns=cols)
    out.insert(2, "scenario", scenario)
    return out
