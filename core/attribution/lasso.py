"""The attribution surrogate's fit: Lasso by coordinate descent, alpha cross-validated."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ALPHA_RATIO",
    "CV_FOLDS",
    "MAX_SWEEPS",
    "N_ALPHAS",
    "TOL",
    "alpha_max",
    "cv_many",
    "lasso",
    "lasso_path_cv",
    "moments",
    "solve",
]


#: Alphas tried by the cross-validation.
N_ALPHAS = 12


#: Folds of the cross-validation over the masks.
CV_FOLDS = 5


#: The smallest alpha tried is ``alpha_max * ALPHA_RATIO`` (scikit-learn's ``eps``).
ALPHA_RATIO = 1e-2


#: Coordinate descent stops when the duality gap is at most ``TOL * var(y)`` (scikit-learn).
TOL = 1e-4


#: ... or after this many sweeps.
MAX_SWEEPS = 100


#: Designs cross-validated in one batch (sorted by width first).
_CV_GROUP = 50


def _soft(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


@dataclass(frozen=True, slots=True)
class _Moments:
    """Weighted, centred moments of one design under ``k`` row weightings."""

    g: np.ndarray  # (k, p, p) centred Gram matrices / N
    c: np.ndarray  # (k, p) centred x'y / N
    xbar: np.ndarray  # (k, p)
    ybar: np.ndarray  # (k,)
    yvar: np.ndarray  # (k,)


def moments(x: np.ndarray, y: np.ndarray, s: np.ndarray, width: int | None = None) -> _Moments:
    """The moments of design ``x`` (n, p) and targets ``y`` (n,) under row weights ``s`` (k, n).

    A weighting's ``N`` is its sum (a bootstrap's counts sum to n). ``width`` pads the design
    with zero columns (a batch of designs of different widths).
    """
    if width is not None and width > x.shape[1]:
        x = np.pad(x, ((0, 0), (0, width - x.shape[1])))
    n, p = x.shape
    tot = s.sum(axis=1)
    xbar = (s @ x) / tot[:, None]
    ybar = (s @ y) / tot
    outer = (x[:, :, None] * x[:, None, :]).reshape(n, p * p)
    g = (s @ outer).reshape(-1, p, p) / tot[:, None, None]  # one matrix product for all k
    g -= xbar[:, :, None] * xbar[:, None, :]
    c = ((s * y) @ x) / tot[:, None] - xbar * ybar[:, None]
    yvar = (s @ (y * y)) / tot - ybar**2
    return _Moments(g, c, xbar, ybar, np.maximum(yvar, 0.0))


def _cd(
    g: np.ndarray,
    c: np.ndarray,
    alpha: np.ndarray,
    yvar: np.ndarray,
    w0: np.ndarray | None,
    rel_tol: float = TOL,
) -> np.ndarray:
    """Coordinate descent on ``(1/2) w'Gw - c'w + alpha |w|_1`` for a batch of problems.

    Cyclic sweeps over every coordinate until each problem's duality gap is at most
    ``TOL * var(y)`` (scikit-learn's stopping rule, ``tol=1e-4``), or :data:`MAX_SWEEPS`. A
    problem stops changing in the sweep where its own gap first meets the tolerance, so its
    solution does not depend on the other problems of the batch; stopped problems leave the
    batch (a quarter at a time), so a slow one does not make the others sweep on.
    """
    m, p = c.shape
    out = np.zeros((m, p)) if w0 is None else w0.astype(float, copy=True)
    live = np.arange(m)
    g, c, alpha, tol = g, c, np.asarray(alpha, dtype=float), rel_tol * yvar
    w = out.copy()
    q = np.einsum("bpq,bq->bp", g, w)  # q = G w, kept up to date
    diag = np.einsum("bjj->bj", g)
    ok = diag > 1e-12
    safe = np.where(ok, diag, 1.0)
    going = _gap(c, q, w, alpha, yvar) > tol  # a warm start may be converged already
    for _ in range(MAX_SWEEPS):
        if not going.any():
            break
        for j in range(p):
            old = w[:, j]
            new = np.where(ok[:, j], _soft(c[:, j] - q[:, j] + diag[:, j] * old, alpha), 0.0)
            new /= safe[:, j]
            d = np.where(going, new - old, 0.0)
            moved = np.flatnonzero(d)
            if moved.size:
                w[:, j] = old + d
                if moved.size * 2 > len(d):
                    q += g[:, j, :] * d[:, None]  # G is symmetric: row j, contiguous
                else:  # most problems left this weight alone: update only the others
                    q[moved] += g[moved, j, :] * d[moved, None]
        going &= _gap(c, q, w, alpha, yvar[live]) > tol
        if (~going).sum() * 4 >= len(live) and going.any():
            out[live[~going]] = w[~going]
            keep = going
            live, g, c, w, q = live[keep], g[keep], c[keep], w[keep], q[keep]
            alpha, tol, diag, ok, safe = alpha[keep], tol[keep], diag[keep], ok[keep], safe[keep]
            going = going[keep]
    out[live] = w
    return out


def _gap(c: np.ndarray, q: np.ndarray, w: np.ndarray, alpha: np.ndarray, yvar: np.ndarray):
    """The Lasso duality gap per problem (scikit-learn's, divided by the sample count)."""
    cw = np.einsum("bp,bp->b", c, w)
    r2 = np.maximum(yvar - 2.0 * cw + np.einsum("bp,bp->b", q, w), 0.0)
    dnorm = np.abs(c - q).max(axis=1) if c.shape[1] else np.zeros(len(c))
    const = np.where(dnorm > alpha, alpha / np.where(dnorm > 0, dnorm, 1.0), 1.0)
    return 0.5 * r2 * (1.0 + const**2) + alpha * np.abs(w).sum(axis=1) - const * (yvar - cw)


def solve(
    mom: Sequence[_Moments], alpha: np.ndarray, w0: np.ndarray | None = None, tol: float = TOL
) -> np.ndarray:
    """Solve every weighting of every design at once; returns (sum k, p).

    The designs have one width (pad them with :func:`moments`'s ``width``); ``alpha``: one
    per weighting, in order.
    """
    g = mom[0].g if len(mom) == 1 else np.concatenate([mm.g for mm in mom])
    c = np.concatenate([mm.c for mm in mom])
    yvar = np.concatenate([mm.yvar for mm in mom])
    return _cd(g, c, np.asarray(alpha, dtype=float), yvar, w0, tol)


def lasso(
    x: np.ndarray,
    y: np.ndarray,
    alpha: float | np.ndarray,
    weights: np.ndarray | None = None,
    tol: float = TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Lasso with intercept: ``min (1/2N) sum_i s_i (y_i - b - x_i . w)^2 + alpha |w|_1``.

    Args:
        x: design (n, p).
        y: targets (n,).
        alpha: the penalty; with ``weights`` of shape (m, n), one per problem (or one for
            all).
        weights: row weights (m, n), ``N = sum_i s_i``; default one problem of unit weights
            (scikit-learn's ``Lasso(alpha).fit(x, y)``).
        tol: stop when the duality gap is at most ``tol * var(y)``.

    Returns:
        ``(intercepts (m,), weights (m, p))``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    s = np.ones((1, len(y))) if weights is None else np.asarray(weights, dtype=float)
    mom = moments(x, y, s)
    a = np.broadcast_to(np.asarray(alpha, dtype=float), (len(s),)).copy()
    w = solve([mom], a, tol=tol)
    return mom.ybar - np.einsum("bp,bp->b", mom.xbar, w), w


def _folds(n: int, k: int) -> list[np.ndarray]:
    """Contiguous folds, the first ``n % k`` one longer (scikit-learn's ``KFold``)."""
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    edges = np.concatenate([[0], np.cumsum(sizes)])
    return [np.arange(edges[i], edges[i + 1]) for i in range(k)]


def alpha_max(x: np.ndarray, y: np.ndarray) -> float:
    """The smallest alpha at which the centred Lasso keeps no coefficient."""
    if not x.shape[1]:
        return 0.0
    return float(np.abs((x - x.mean(axis=0)).T @ (y - y.mean())).max() / len(y))


def cv_many(
    designs: Sequence[tuple[np.ndarray, np.ndarray]], n_alphas: int, folds: int
) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`lasso_path_cv` of several designs at once, and the full-data fit.

    Designs are solved in groups of similar width (a batch is as wide as its widest design).

    Returns ``(alpha, out-of-fold predictions, full-data weights at alpha, grid)`` per design.
    """
    order = sorted(range(len(designs)), key=lambda i: designs[i][0].shape[1])
    out: list[Any] = [None] * len(designs)
    for start in range(0, len(order), _CV_GROUP):
        group = order[start : start + _CV_GROUP]
        for i, res in zip(
            group, _cv_group([designs[i] for i in group], n_alphas, folds), strict=True
        ):
            out[i] = res
    return out


def _cv_group(
    designs: Sequence[tuple[np.ndarray, np.ndarray]], n_alphas: int, folds: int
) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`cv_many` of one batch."""
    ratios = np.logspace(0.0, math.log10(ALPHA_RATIO), n_alphas)
    parts, moms, grids = [], [], []
    width = max(x.shape[1] for x, _ in designs)
    for x, y in designs:
        n = len(y)
        fold = _folds(n, min(folds, n))
        s = np.ones((len(fold) + 1, n))  # the folds' training rows, then every row
        for f, test in enumerate(fold):
            s[f, test] = 0.0
        parts.append(fold)
        moms.append(moments(x, y, s, width))
        grids.append(alpha_max(x, y) * ratios)
    g = np.concatenate([m.g for m in moms])
    c = np.concatenate([m.c for m in moms])
    yvar = np.concatenate([m.yvar for m in moms])
    w = None
    path = []
    for a in range(n_alphas):  # largest alpha first, each solve warm-started from the last
        alpha = np.concatenate(
            [np.full(len(fold) + 1, grid[a]) for fold, grid in zip(parts, grids, strict=True)]
        )
        w = _cd(g, c, alpha, yvar, w)
        path.append(w)
    out = []
    at = 0
    for (x, y), fold, mom, grid in zip(designs, parts, moms, grids, strict=True):
        k, p = len(fold), x.shape[1]
        ws = np.stack([wa[at : at + k + 1, :p] for wa in path])  # (alphas, k + 1, p)
        b = mom.ybar[None] - np.einsum("akp,kp->ak", ws, mom.xbar[:, :p])
        err = np.zeros(n_alphas)
        for f, test in enumerate(fold):
            pred = b[:, f, None] + ws[:, f] @ x[test].T
            err += ((pred - y[test]) ** 2).mean(axis=1)
        best = int(np.argmin(err))
        oof = np.empty(len(y))
        for f, test in enumerate(fold):
            oof[test] = b[best, f] + x[test] @ ws[best, f]
        out.append((float(grid[best]), oof, ws[best, k], grid))
        at += k + 1
    return out


def lasso_path_cv(
    x: np.ndarray, y: np.ndarray, n_alphas: int = N_ALPHAS, folds: int = CV_FOLDS
) -> tuple[float, np.ndarray, np.ndarray]:
    """Choose alpha by K-fold cross-validation over the rows (masks).

    Returns:
        ``(alpha, out-of-fold predictions at that alpha (n,), the alpha grid)``. The grid runs
        from ``alpha_max = max_j |x_j' (y - ybar)| / n`` down to ``alpha_max * 1e-2``; the
        chosen alpha has the least mean held-out squared error over the folds (the larger
        alpha on ties); each fold's path is solved from the largest alpha down, warm-started.

    Raises:
        ValueError: constant targets or no column (``alpha_max == 0``: nothing to choose).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if alpha_max(x, y) <= 0.0:
        raise ValueError("alpha_max is 0 (constant targets or no column): nothing to fit")
    alpha, oof, _, grid = cv_many([(x, y)], n_alphas, folds)[0]
    return alpha, oof, grid
