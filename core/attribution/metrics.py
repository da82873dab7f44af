"""Context attribution: the sparse linear surrogate of an attribution run (issue 40 item 3).

ContextCite (Cohen-Wang et al., "ContextCite: Attributing Model Generation to Context",
NeurIPS 2024) attributes one answer to the passages of its context: answer many ablated
contexts (each passage kept independently with probability ``keep``, :mod:`core.
attribution_plan`), record a *target* per ablated call, and fit a sparse linear model of the
target on the ablation masks. The fitted weights are the attributions; the linear
datamodeling score (LDS: the Spearman rank correlation between the surrogate's predictions
and the observed targets on ablations it was not fitted on) says how far to trust them.

What is computed here, per instance (:func:`fit_surrogate`):

- **the surrogate**: a Lasso, ``min_w,b (1/2n) sum_i (y_i - b - m_i . w)^2 + alpha ||w||_1``
  (scikit-learn's objective, with an intercept, no feature scaling: a weight is the change
  of the target when its passage is kept, everything else equal), solved by cyclic
  coordinate descent on the centred Gram matrix (:func:`lasso`; checked against
  scikit-learn's ``Lasso`` and the KKT conditions in ``tests/test_attribution.py``).
  ``alpha`` is chosen by K-fold cross-validation over the masks (K = 5 contiguous folds, as
  scikit-learn's ``LassoCV`` with ``cv=5``): :data:`N_ALPHAS` values log-spaced from
  ``alpha_max`` (the smallest alpha that zeroes every weight) down to ``alpha_max * 1e-2``
  (:data:`ALPHA_RATIO`; scikit-learn's default goes to 1e-3, where a fold with more passages
  than masks is an interpolation the masks cannot check), the one with the least mean
  held-out squared error (ties: the larger alpha). Coordinate descent stops when the duality
  gap is at most ``1e-4 var(y)`` (scikit-learn's rule) or after :data:`MAX_SWEEPS` sweeps;
- **bootstrap CIs**: the Lasso refitted at the chosen alpha on ``n_boot`` resamples of the
  masks (with replacement, as multiplicity weights), the 2.5 / 97.5 percentiles of each
  weight. A passage is **causal** when its CI's lower end is above 0;
- **LDS**: the Spearman correlation between the out-of-fold predictions (each mask predicted
  by the fold fit that did not see it, at the chosen alpha) and the observed targets;
- **honesty notes**: a passage every answered mask kept (or dropped) carries no
  information: its weight and CI are NaN and the note says ``always kept`` /
  ``always dropped``; constant targets (every ablation kept the answer) give zero weights
  and an undefined LDS, said in ``reason``.

Targets (:func:`targets`): ``retention`` (the default) is the SQuAD token F1 (strict
normalization) of the ablated call's answer against the *unablated* call's answer: 1 when
the ablation left the answer as it was, 0 when it changed it completely; it needs no gold
and no log-probabilities, so every backend (the embedded reader included) has it.
``correct`` is the score field (default ``soft_correct``) of the ablated answer against
gold. ``logprob`` (ContextCite's own target) needs the log-probability of the unablated
answer's tokens given the ablated context, i.e. a backend that scores a forced
continuation; neither the embedded reader, Ollama's chat API nor the OpenAI chat API used
here can (they give log-probabilities of generated tokens only), so it is refused
(:data:`LOGPROB_UNSUPPORTED`). A failed call (``error`` set) has no target: it is left out
of the fit and counted, never a target of 0.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.attribution.plan import FULL, TARGETS, TOPK_DROPS, plan_topk_drop
from core.params import Param
from core.scoring.rows import ANSWER_SCORES, token_f1
from core.types import Instance, PlannedCall

__all__ = [
    "Ablations",
    "BOOTSTRAP",
    "BOOT_SEED",
    "CV_FOLDS",
    "GROUPS",
    "LDS_LOW",
    "LOGPROB_UNSUPPORTED",
    "N_ALPHAS",
    "REPORT_PARAMS",
    "SCORE_FIELD",
    "Surrogate",
    "ablation_tables",
    "fit_surrogate",
    "fit_surrogates",
    "lasso",
    "lasso_path_cv",
    "plan_drops",
    "ranked_passages",
    "retention",
    "spearman",
]

#: Instance metadata the run aggregates are grouped by (gold reliance).
GROUPS = ("context_length", "evidence_position", "distractor_similarity")
#: Why ``--target logprob`` is refused (one line).
LOGPROB_UNSUPPORTED = (
    "target 'logprob' needs a backend that scores a forced continuation (the log-probability "
    "of the unablated answer's tokens given an ablated context); none of embedded, ollama or "
    "openai does here (their chat APIs return log-probabilities of generated tokens only): "
    "use --target retention (the default) or correct"
)
#: Alphas tried by the cross-validation.
N_ALPHAS = 12
#: Folds of the cross-validation over the masks.
CV_FOLDS = 5
#: The smallest alpha tried is ``alpha_max * ALPHA_RATIO`` (scikit-learn's ``eps``).
ALPHA_RATIO = 1e-2
#: An instance with fewer answered ablations is not fitted (too few masks for 5 folds).
MIN_ROWS = 8

BOOTSTRAP = Param(
    "n_boot", int, 200, "bootstrap resamples of the masks per instance (CI of each weight)",
    minimum=50, maximum=10000, section="issue 40 item 3",
)  # fmt: skip
BOOT_SEED = Param("boot_seed", int, 0, "seed of the bootstrap over masks", minimum=0)
LDS_LOW = Param(
    "lds_low", float, 0.3, "an instance whose LDS is below this is counted as poorly fitted",
    minimum=-1.0, maximum=1.0, section="ContextCite §4 (LDS)",
)  # fmt: skip
SCORE_FIELD = Param(
    "score_field", str, "soft_correct", "the score of the 'correct' target (against gold)",
    choices=ANSWER_SCORES, section="SPEC §6",
)  # fmt: skip
#: Knobs of ``report attribution``.
REPORT_PARAMS = (BOOTSTRAP, BOOT_SEED, LDS_LOW)

#: Coordinate descent stops when the duality gap is at most ``TOL * var(y)`` (scikit-learn).
TOL = 1e-4
#: ... or after this many sweeps.
MAX_SWEEPS = 100
#: Designs cross-validated in one batch (sorted by width first).
_CV_GROUP = 50
#: Gram-matrix cells solved in one batch (memory: 8 bytes each).
_BATCH_CELLS = 8_000_000


# ------------------------------------------------------------------------------ targets


def retention(ablated: str | None, unablated: str | None) -> float:
    """Answer F1 (SQuAD, strict normalization) of an ablated answer against the unablated one.

    NaN when the unablated answer is missing or empty (nothing to retain).
    """
    if not unablated or not str(unablated).strip():
        return math.nan
    return token_f1(str(ablated or ""), str(unablated))


# ------------------------------------------------------------------------------ Lasso


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


def _moments(x: np.ndarray, y: np.ndarray, s: np.ndarray, width: int | None = None) -> _Moments:
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


def _solve(
    mom: Sequence[_Moments], alpha: np.ndarray, w0: np.ndarray | None = None, tol: float = TOL
) -> np.ndarray:
    """Solve every weighting of every design at once; returns (sum k, p).

    The designs have one width (pad them with :func:`_moments`'s ``width``); ``alpha``: one
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
    mom = _moments(x, y, s)
    a = np.broadcast_to(np.asarray(alpha, dtype=float), (len(s),)).copy()
    w = _solve([mom], a, tol=tol)
    return mom.ybar - np.einsum("bp,bp->b", mom.xbar, w), w


def _folds(n: int, k: int) -> list[np.ndarray]:
    """Contiguous folds, the first ``n % k`` one longer (scikit-learn's ``KFold``)."""
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    edges = np.concatenate([[0], np.cumsum(sizes)])
    return [np.arange(edges[i], edges[i + 1]) for i in range(k)]


def _alpha_max(x: np.ndarray, y: np.ndarray) -> float:
    if not x.shape[1]:
        return 0.0
    return float(np.abs((x - x.mean(axis=0)).T @ (y - y.mean())).max() / len(y))


def _cv_many(
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
        for i, res in zip(group, _cv_group([designs[i] for i in group], n_alphas, folds),
                          strict=True):  # fmt: skip
            out[i] = res
    return out


def _cv_group(
    designs: Sequence[tuple[np.ndarray, np.ndarray]], n_alphas: int, folds: int
) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`_cv_many` of one batch."""
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
        moms.append(_moments(x, y, s, width))
        grids.append(_alpha_max(x, y) * ratios)
    g = np.concatenate([m.g for m in moms])
    c = np.concatenate([m.c for m in moms])
    yvar = np.concatenate([m.yvar for m in moms])
    w = None
    path = []
    for a in range(n_alphas):  # largest alpha first, each solve warm-started from the last
        alpha = np.concatenate([np.full(len(fold) + 1, grid[a]) for fold, grid in
                                zip(parts, grids, strict=True)])  # fmt: skip
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
    if _alpha_max(x, y) <= 0.0:
        raise ValueError("alpha_max is 0 (constant targets or no column): nothing to fit")
    alpha, oof, _, grid = _cv_many([(x, y)], n_alphas, folds)[0]
    return alpha, oof, grid


# ------------------------------------------------------------------------------ LDS


def _ranks(v: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their ranks), 1-based."""
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(len(v))
    sv = v[order]
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson on average ranks).

    NaN when either side is constant or fewer than 3 finite pairs remain.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return math.nan
    rx, ry = _ranks(x) - (len(x) + 1) / 2.0, _ranks(y) - (len(y) + 1) / 2.0
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else math.nan


# ------------------------------------------------------------------------------ surrogate


@dataclass(frozen=True, slots=True)
class Surrogate:
    """One instance's fitted surrogate.

    Attributes:
        passages: the shown passage ids, in prompt order (the mask's columns).
        weights: the Lasso weight of each passage (NaN: no information, see ``notes``).
        ci_low: the bootstrap CI's lower end per passage (2.5th percentile).
        ci_high: its upper end (97.5th percentile).
        intercept: the surrogate's intercept (the predicted target with every passage
            dropped).
        alpha: the cross-validated penalty.
        lds: the held-out linear datamodeling score (NaN when undefined, see ``reason``).
        n: answered ablations the fit used.
        notes: per passage, ``always kept`` / ``always dropped`` / ``""``.
        reason: why the fit or the LDS is missing or degenerate (``""`` when neither is).
    """

    passages: tuple[str, ...]
    weights: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    intercept: float
    alpha: float
    lds: float
    n: int
    notes: tuple[str, ...] = field(default=())
    reason: str = ""


def fit_surrogate(
    passages: Sequence[str],
    masks: np.ndarray,
    y: np.ndarray,
    *,
    n_boot: int = BOOTSTRAP.default,
    seed: int = BOOT_SEED.default,
) -> Surrogate:
    """Fit the surrogate of one instance (see the module docstring).

    Args:
        passages: the shown passage ids (the mask's columns).
        masks: (n, p) booleans, one row per answered ablation (failed calls left out).
        y: the ablations' targets (n,); rows with a NaN target are left out.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.

    Returns:
        The :class:`Surrogate`.
    """
    return fit_surrogates([(passages, masks, y)], n_boot=n_boot, seed=seed)[0]


def fit_surrogates(
    items: Sequence[tuple[Sequence[str], np.ndarray, np.ndarray]],
    *,
    n_boot: int = BOOTSTRAP.default,
    seed: int = BOOT_SEED.default,
    keys: Sequence[str] | None = None,
) -> list[Surrogate]:
    """:func:`fit_surrogate` of many instances, solved in batches (the same results).

    The bootstrap resamples of an item come from ``numpy.random.default_rng([seed, h])``,
    ``h`` the first 8 bytes of the SHA-256 of its key (``keys``: the instance ids; default
    the item's position), so an instance's CIs do not depend on the others fitted with it.
    ``n_boot=0`` skips the bootstrap (CIs NaN: the run's top-k ranking needs the weights
    only).
    """
    out: list[Surrogate | None] = [None] * len(items)
    todo = []
    for i, (passages, masks, y) in enumerate(items):
        res = _prepare(passages, masks, y)
        if isinstance(res, Surrogate):
            out[i] = res
        else:
            todo.append((i, *res))
    if todo:
        fits = _cv_many([(x, y) for _, x, y, *_ in todo], N_ALPHAS, CV_FOLDS)
        seeds = [[seed, _key_hash(keys[t[0]] if keys is not None else str(t[0]))]
                 for t in todo]  # fmt: skip
        boots = _bootstrap([(x, y, fit[0], fit[2]) for (_, x, y, *_), fit in
                            zip(todo, fits, strict=True)], n_boot, seeds) if n_boot else [
            np.full((1, len(fit[2])), np.nan) for fit in fits]  # fmt: skip
        for (i, x, y, cols, passages, notes), fit, wb in zip(todo, fits, boots, strict=True):
            alpha, oof, w, _ = fit
            p = len(passages)
            weights, lo, hi = np.full(p, np.nan), np.full(p, np.nan), np.full(p, np.nan)
            weights[cols] = w
            lo[cols] = np.percentile(wb, 2.5, axis=0)
            hi[cols] = np.percentile(wb, 97.5, axis=0)
            intercept = float(y.mean() - x.mean(axis=0) @ w)
            lds = spearman(oof, y)
            reason = "" if math.isfinite(lds) else "held-out predictions constant: LDS undefined"
            out[i] = Surrogate(tuple(passages), weights, lo, hi, intercept, alpha, lds, len(y),
                               notes, reason)  # fmt: skip
    return [s for s in out if s is not None]


def _prepare(passages: Sequence[str], masks: np.ndarray, y: np.ndarray):
    """The fit's design, or the :class:`Surrogate` of an instance that cannot be fitted."""
    p = len(passages)
    m = np.asarray(masks, dtype=bool).reshape(-1, p)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(y)
    m, y = m[ok], y[ok]
    n = len(y)
    nan = np.full(p, np.nan)
    kept, dropped = m.all(axis=0), ~m.any(axis=0)
    notes = tuple(
        "always kept" if n and k else "always dropped" if n and d else ""
        for k, d in zip(kept, dropped, strict=True)
    )
    if n < MIN_ROWS:
        return Surrogate(tuple(passages), nan, nan.copy(), nan.copy(), math.nan, math.nan,
                         math.nan, n, notes, f"{n} answered ablations (fewer than {MIN_ROWS})")
    cols = np.flatnonzero(~(kept | dropped))
    x = m[:, cols].astype(float)
    if np.ptp(y) == 0.0 or _alpha_max(x, y) <= 0.0:
        weights, lo, hi = nan.copy(), nan.copy(), nan.copy()
        weights[cols] = lo[cols] = hi[cols] = 0.0
        why = "constant targets" if np.ptp(y) == 0.0 else "no passage varies with the target"
        return Surrogate(tuple(passages), weights, lo, hi, float(y.mean()), 0.0, math.nan, n,
                         notes, f"{why}: every weight 0, LDS undefined")
    return x, y, cols, tuple(passages), notes


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def _bootstrap(
    fits: Sequence[tuple[np.ndarray, np.ndarray, float, np.ndarray]],
    n_boot: int,
    seeds: Sequence[Sequence[int]],
) -> list[np.ndarray]:
    """The bootstrap weights (n_boot, p) of each ``(x, y, alpha, full-data weights)``.

    The masks are resampled with replacement (as counts); each refit starts from the full fit.
    """
    order = sorted(range(len(fits)), key=lambda i: fits[i][0].shape[1])  # similar widths
    out: list[np.ndarray] = [np.empty(0)] * len(fits)
    batch: list[int] = []

    def flush() -> None:
        moms, alphas, starts = [], [], []
        pmax = max(fits[i][0].shape[1] for i in batch)
        for i in batch:
            x, y, alpha, w = fits[i]
            n = len(y)
            rng = np.random.default_rng(seeds[i])
            counts = rng.multinomial(n, np.full(n, 1.0 / n), n_boot)
            moms.append(_moments(x, y, counts.astype(float), pmax))
            alphas.append(np.full(n_boot, alpha))
            starts.append(np.tile(np.pad(w, (0, pmax - len(w))), (n_boot, 1)))
        wb = _solve(moms, np.concatenate(alphas), np.concatenate(starts))
        for k, i in enumerate(batch):
            out[i] = wb[k * n_boot : (k + 1) * n_boot, : fits[i][0].shape[1]]
        batch.clear()

    for i in order:
        p = fits[i][0].shape[1]
        if batch and (len(batch) + 1) * n_boot * p * p > _BATCH_CELLS:
            flush()
        batch.append(i)
    if batch:
        flush()
    return out


# ------------------------------------------------------------------------------ stored calls


@dataclass(frozen=True, slots=True)
class Ablations:
    """One instance's answered calls, ready for :func:`fit_surrogate`.

    Attributes:
        instance_id: the instance.
        condition: the run's condition.
        passages: the shown passage ids, in prompt order (the masks' columns).
        masks: (n, p) booleans of the ablations that have a target.
        y: their targets (n,).
        n_planned: ablations stored (answered or failed).
        n_failed: ablations whose call failed (``error`` set): left out, never a target of 0.
        full_answer: the unablated call's answer (None when it failed).
        full_cited: the ids the unablated answer cited.
        full_failed: the unablated call failed.
        full_target: the unablated call's target (1 for retention; the score for correct).
        drops: ``{k: (dropped ids, target or NaN)}`` of the stored top-k drops.
        reason: why the instance has no targets (``""`` when it has).
    """

    instance_id: str
    condition: str
    passages: tuple[str, ...]
    masks: np.ndarray
    y: np.ndarray
    n_planned: int
    n_failed: int
    full_answer: str | None
    full_cited: tuple[str, ...]
    full_failed: bool
    full_target: float
    drops: dict[int, tuple[tuple[str, ...], float]]
    reason: str = ""


def _meta(x: object) -> dict:
    if isinstance(x, dict):
        return x
    try:
        out = json.loads(x) if isinstance(x, str) and x else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _failed(err: object) -> bool:
    return isinstance(err, str) and bool(err.strip())


def _ids(x: object) -> tuple[str, ...]:
    if x is None or isinstance(x, float):
        return ()
    if isinstance(x, str):
        try:
            x = json.loads(x)
        except ValueError:
            return (x,) if x else ()
    return tuple(str(v) for v in x)


def _target(row: dict, target: str, score_field: str, reference: str | None) -> float:
    if _failed(row.get("error")):
        return math.nan
    if target == "retention":
        return retention(row.get("answer"), reference)
    v = row.get(score_field)
    return float(v) if v is not None and not pd.isna(v) else math.nan


def ablation_tables(
    preds: pd.DataFrame, target: str = TARGETS[0], score_field: str = SCORE_FIELD.default
) -> list[Ablations]:
    """Every instance's :class:`Ablations` from an attribution run's stored predictions.

    Args:
        preds: the run's prediction rows with scores (:meth:`core.store.Store.
            prediction_rows`): ``instance_id``, ``condition``, ``variant``, ``answer``,
            ``cited_ids``, ``error``, ``meta`` and ``score_field``.
        target: ``retention`` or ``correct``.
        score_field: the score of the ``correct`` target.

    Returns:
        One per instance with a stored ``full`` call, by instance id; each instance's
        ablations in mask order (``abl:0000`` first), whatever order the rows came in.

    Raises:
        ValueError: ``logprob`` (:data:`LOGPROB_UNSUPPORTED`) or an unknown target.
    """
    if target == "logprob":
        raise ValueError(LOGPROB_UNSUPPORTED)
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose from: {', '.join(TARGETS)}")
    if score_field not in ANSWER_SCORES:
        raise ValueError(f"unknown score field {score_field!r}; choose from: "
                         f"{', '.join(ANSWER_SCORES)}")  # fmt: skip
    out = []
    if preds.empty:
        return out
    cols = ["instance_id", "condition", "variant", "answer", "cited_ids", "error", "meta",
            score_field]  # fmt: skip
    rows = preds[[c for c in cols if c in preds.columns]].to_dict("records")
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["instance_id"], []).append(r)
    for iid in sorted(by):  # an order of its own: the store returns rows in any order
        group = sorted(by[iid], key=lambda r: str(r["variant"]))  # abl:0000, abl:0001, ...
        full = next((r for r in group if r["variant"] == FULL), None)
        if full is None:
            continue
        meta = _meta(full.get("meta")).get("attribution", {})
        passages = tuple(meta.get("passages") or ())
        full_failed = _failed(full.get("error"))
        ref = None if full_failed else full.get("answer")
        reason = ""
        if full_failed:
            reason = "the unablated call failed: no reference answer"
        elif target == "retention" and not (ref and str(ref).strip()):
            reason = "the unablated answer is empty (parse error): nothing to retain"
        masks, ys, n_planned, n_failed, drops = [], [], 0, 0, {}
        for r in group:
            v = r["variant"]
            if v == FULL:
                continue
            m = _meta(r.get("meta")).get("attribution", {})
            y = _target(r, target, score_field, ref) if not reason else math.nan
            if v.startswith("abl:"):
                n_planned += 1
                if _failed(r.get("error")):
                    n_failed += 1
                    continue
                mask = str(m.get("mask", ""))
                if len(mask) != len(passages):
                    continue
                masks.append([ch == "1" for ch in mask])
                ys.append(y)
            elif v.startswith("top") and v.endswith("drop"):
                drops[int(m.get("k", v[3:-4]))] = (tuple(m.get("dropped") or ()), y)
        full_target = (_target(full, target, score_field, ref) if not reason else math.nan)
        out.append(Ablations(
            iid, str(full["condition"]), passages,
            np.asarray(masks, dtype=bool).reshape(len(masks), len(passages)),
            np.asarray(ys, dtype=float), n_planned, n_failed, ref, _ids(full.get("cited_ids")),
            full_failed, full_target, drops, reason,
        ))  # fmt: skip
    return out


def ranked_passages(s: Surrogate) -> list[str]:
    """Passage ids by weight, highest first (ties: shown order); NaN weights left out."""
    w = s.weights
    order = sorted((j for j in range(len(w)) if np.isfinite(w[j])), key=lambda j: (-w[j], j))
    return [s.passages[j] for j in order]


def plan_drops(
    instances: Sequence[Instance],
    shown: dict[str, Sequence[object]],
    tables: Sequence[Ablations],
    *,
    seed: int,
    keep: float,
    ks: Sequence[int] = TOPK_DROPS,
) -> list[PlannedCall]:
    """The top-k drop calls (k in ``ks``) of every instance with a fitted surrogate.

    The top passages are the ``k`` of highest weight (whatever its sign, as ContextCite's
    top-k removal) in the surrogate fitted on the stored ablations (:func:`fit_surrogates`
    without bootstrap: the CIs are the report's); an instance with fewer than ``k`` weighted
    passages (the others always kept or dropped) gets no top-``k`` drop.
    """
    by_id = {i.instance_id: i for i in instances}
    usable = [t for t in tables if t.instance_id in by_id and not t.reason]
    fits = fit_surrogates([(t.passages, t.masks, t.y) for t in usable], n_boot=0)
    calls = []
    for t, s in zip(usable, fits, strict=True):
        ranked = ranked_passages(s)
        for k in ks:
            call = plan_topk_drop(by_id[t.instance_id], t.condition, shown[t.instance_id],
                                  ranked, k, seed=seed, keep=keep)  # fmt: skip
            if call is not None:
                calls.append(call)
    return calls
