"""Statistics shared by every method (SPEC §6.6), vectorized with numpy.

* Bootstrap: ``n_resamples`` (5,000) resamples with replacement, seed 42, two-sided percentile
  interval. Resamples are drawn as index matrices in chunks of bounded size, so memory stays
  near ``_CHUNK_CELLS`` integers whatever the sample size.
* Canonical order (issue 17 item 7): index resampling draws unit positions, so one seed gives
  one set of numbers only for one order of the units. Callers order them canonically: ONCU
  groups by their type-normalized key (:func:`core.oncu.metrics.canonical_groups`:
  ``context_length``
  as text or integer sorts alike), paired differences by instance id. Examples of the
  sample-level CIs keep their import order instead (issue 34 item 4: the released scripts
  resample their file's rows; :func:`bootstrap_percentiles` then gives their CIs bit for bit).
  :func:`canonical_order` / :func:`canonical_rows` order units by value where they have no
  key (a bootstrap distribution depends only on the multiset of units).
* Two estimators of a mean's bootstrap distribution (:data:`CI_METHODS`, issue 17 item 6):
  ``resample`` draws index matrices (cost resamples x n: the estimator of seed 000's released
  scripts and of this project before); ``multinomial`` draws, per resample, how often each
  distinct value is drawn: ``Multinomial(n, count(v) / n)`` over the distinct values (NaN one
  more category, skipped by the mean). Summing the index draws of equal values gives exactly
  these counts, so the resampled mean has exactly the same distribution (not the same
  numbers for one seed); cost resamples x distinct values. Above :data:`MAX_CATEGORIES`
  distinct values (continuous scores) the values are pooled into :data:`BINS` equal-width
  bins: the counts per bin are drawn exactly and the sum within a bin, given its count c, is
  drawn as Normal(c mean_b, c var_b) (``multinomial-binned``; only the shape of within-bin
  sums is approximated: each bin is at most 1/64 of the range wide). ``auto`` (the default)
  uses ``resample`` for samples up to :data:`RESAMPLE_MAX` units and ``multinomial`` above.
* Paired contrasts: mean difference, paired bootstrap CI, standardized effect = mean / sd of the
  differences (ddof=1, as seed 000 §7.6 and its released script), two-sided p: the normal
  approximation erfc(|z| / sqrt 2) of seed 000 §7.6 by default, the bootstrap p by option
  (:data:`P_TESTS`); printed by :func:`format_p` (``< 0.001``, never 0) under
  :func:`p_label` headers that name the test and adjustment.
* McNemar's exact test, Holm and Benjamini-Hochberg adjustment, OLS with SE and p, calibration
  (Brier, ECE over equal-width bins, reliability-diagram table).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BINS",
    "CI_METHODS",
    "MAX_CATEGORIES",
    "OLS_P_TESTS",
    "P_TESTS",
    "RESAMPLE_MAX",
    "benjamini_hochberg",
    "bootstrap_mean_ci",
    "bootstrap_means",
    "bootstrap_percentiles",
    "calibration",
    "canonical_order",
    "canonical_rows",
    "format_p",
    "ci_method",
    "holm",
    "mcnemar_exact",
    "normal_p",
    "multinomial_counts",
    "multinomial_means",
    "ols",
    "p_label",
    "paired_contrast",
    "percentiles",
]

#: Tests of a paired contrast's p (issue 34 item 4): ``normal`` (the default, seed 000 §7.6:
#: z = mean(d) / (sd(d) / sqrt(n)), p = erfc(|z| / sqrt 2)) or ``bootstrap`` (two-sided,
#: over the resampled mean differences; this project's p before issue 34).
P_TESTS = ("normal", "bootstrap")
#: Tests of an OLS coefficient's p: ``normal`` (the default, seed 000 Table 30: z = coef /
#: SE, p = erfc(|z| / sqrt 2)) or ``t`` (Student's t over n - rank degrees of freedom, as
#: statsmodels; this project's p before issue 34).
OLS_P_TESTS = ("normal", "t")
#: Upper bound on the number of index cells (resamples x sample size) drawn at once.
_CHUNK_CELLS = 4_000_000
#: Bootstrap estimators of a mean: auto (resample up to RESAMPLE_MAX units, else multinomial),
#: resample (index matrices, the published estimator), multinomial (counts per distinct value).
CI_METHODS = ("auto", "resample", "multinomial")
#: Largest sample ``auto`` bootstraps by index resampling (5,000 x 2,000 = 1e7 index draws).
RESAMPLE_MAX = 2_000
#: Most distinct values the multinomial estimator draws counts for exactly.
MAX_CATEGORIES = 256
#: Equal-width bins of the multinomial estimator above MAX_CATEGORIES distinct values.
BINS = 64


def canonical_order(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Indices that sort units by value: first column first, ties by the next; NaN last.

    The canonical order of bootstrap units (module docstring); -0.0 counts as 0.0.
    """
    cols = [np.asarray(c, dtype=float) + 0.0 for c in columns]
    if not cols or len(cols[0]) < 2:
        return np.arange(len(cols[0]) if cols else 0)
    return np.lexsort(cols[::-1])


def canonical_rows(values: np.ndarray) -> np.ndarray:
    """``values`` (shape (n,) or (n, k)) with its rows in :func:`canonical_order`."""
    arr = np.asarray(values, dtype=float) + 0.0
    if arr.ndim == 1:
        return np.sort(arr)
    if arr.shape[0] < 2 or arr.shape[1] == 0:
        return arr
    return arr[canonical_order(list(arr.T))]


def ci_method(method: str, n: int) -> str:
    """The estimator a sample of ``n`` units gets: ``resample`` or ``multinomial``.

    Raises:
        ValueError: an unknown method (names the allowed ones).
    """
    if method not in CI_METHODS:
        raise ValueError(f"unknown CI method {method!r}; choose one of {', '.join(CI_METHODS)}")
    if method == "auto":
        return "resample" if n <= RESAMPLE_MAX else "multinomial"
    return method


def multinomial_means(
    values: Iterable[float], n_resamples: int = 5000, seed: int = 42
) -> tuple[np.ndarray, str]:
    """Bootstrap distribution of the mean of ``values`` by multinomial counts (module docstring).

    Args:
        values: the sample (NaN values are drawn like the others and skipped by the mean).
        n_resamples: number of resamples.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        ``(means, estimator)``: the resampled means (NaN where a resample drew only NaN) and
        ``multinomial`` (exact in distribution) or ``multinomial-binned``.
    """
    v = np.asarray(values, dtype=float).ravel() + 0.0
    n = int(v.size)
    if n == 0:
        return np.full(n_resamples, np.nan), "multinomial"
    finite = v[np.isfinite(v)]
    missing = n - int(finite.size)
    label = "multinomial"
    spread = None
    if finite.size:
        cats, counts = np.unique(finite, return_counts=True)
        if cats.size > MAX_CATEGORIES:
            label = "multinomial-binned"
            lo, hi = float(cats[0]), float(cats[-1])
            b = np.minimum(((finite - lo) / (hi - lo) * BINS).astype(np.int64), BINS - 1)
            counts = np.bincount(b, minlength=BINS)
            keep = counts > 0
            sums = np.bincount(b, weights=finite, minlength=BINS)
            cats = np.zeros(BINS)
            cats[keep] = sums[keep] / counts[keep]
            dev = np.bincount(b, weights=(finite - cats[b]) ** 2, minlength=BINS)
            spread = np.zeros(BINS)
            spread[keep] = dev[keep] / counts[keep]
            cats, counts, spread = cats[keep], counts[keep], spread[keep]
    else:
        cats, counts = np.empty(0), np.empty(0, dtype=np.int64)
    return multinomial_counts(cats, counts, missing, n_resamples, seed, spread), label


def multinomial_counts(
    cats: np.ndarray,
    counts: np.ndarray,
    missing: int,
    n_resamples: int = 5000,
    seed: int = 42,
    spread: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`multinomial_means` from a sample's counts: the resampled means.

    Args:
        cats: the distinct finite values, ascending (or, binned, each bin's mean).
        counts: how many of the sample hold each.
        missing: how many values are NaN (drawn like the others, skipped by the mean).
        n_resamples: number of resamples.
        seed: seed of ``numpy.random.default_rng``.
        spread: binned only: each bin's mean squared deviation from its mean.
    """
    cats = np.asarray(cats, dtype=float)
    n = int(np.sum(counts)) + int(missing)
    if n == 0:
        return np.full(n_resamples, np.nan)
    probs = np.append(counts, missing).astype(float) / n
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n, probs, size=n_resamples)[:, : cats.size].astype(float)
    total = drawn @ cats
    if spread is not None:
        total += np.sqrt(drawn @ spread) * rng.standard_normal(n_resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / drawn.sum(axis=1)


def _floats(values: Iterable[float]) -> np.ndarray:
    """``values`` as a float array: an array as it is (no Python float per value), else listed."""
    if isinstance(values, np.ndarray):
        return np.asarray(values, dtype=float)
    return np.asarray(list(values), dtype=float)


def _clean(values: Iterable[float]) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    return v[np.isfinite(v)]


def bootstrap_means(values: np.ndarray, n_resamples: int = 5000, seed: int = 42) -> np.ndarray:
    """Bootstrap distribution of the column means of ``values``.

    Rows (units) are resampled with replacement, the same resample for every column; NaN cells
    are skipped within each resample (the mean is over the non-NaN cells drawn). The rows are
    resampled in the order given: callers put them in a canonical order (issue 17 item 7) or
    keep the import order (issue 34: the released CIs).

    Args:
        values: shape (n,) or (n, k); rows are the resampled units.
        n_resamples: number of resamples.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        Array (n_resamples,) for 1-D input, else (n_resamples, k); NaN where a resample drew
        no finite cell of a column. Empty input gives all-NaN. A 1-D sample without NaN is
        averaged as ``values[idx].mean(axis=1)`` (the released scripts' arithmetic, bit for
        bit); columns of a 2-D sample are summed by one count matrix product (equal to the
        last bits: :func:`bootstrap_percentiles` makes their percentiles exact).
    """
    return _bootstrap(values, n_resamples, seed)[0]


def _bootstrap(
    values: np.ndarray, n_resamples: int, seed: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(bootstrap_means(...), the index chunks drawn)``."""
    arr = np.asarray(values, dtype=float)
    one_d = arr.ndim == 1
    if one_d:
        arr = arr[:, None]
    n, k = arr.shape
    if n == 0:
        out = np.full((n_resamples, k), np.nan)
        return (out[:, 0] if one_d else out), []
    mask = np.isfinite(arr)
    filled = np.where(mask, arr, 0.0)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_CELLS // n))
    out = np.empty((n_resamples, k))
    all_finite = bool(mask.all())
    drawn = []
    for start in range(0, n_resamples, chunk):
        m = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(m, n), dtype=np.int64 if n > 2**31 - 1 else np.int32)
        drawn.append(idx)
        if k == 1 and all_finite:
            out[start : start + m, 0] = filled[idx, 0].mean(axis=1)
            continue
        # counts[r, j] = how often unit j was drawn in resample r: sums become one matmul.
        offsets = (np.arange(m, dtype=np.int64) * n)[:, None]
        counts = np.bincount((idx + offsets).ravel(), minlength=m * n).reshape(m, n)
        counts = counts.astype(float)
        sums = counts @ filled
        if all_finite:
            out[start : start + m] = sums / n
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start : start + m] = sums / (counts @ mask.astype(float))
    return (out[:, 0] if one_d else out), drawn


def bootstrap_percentiles(
    values: np.ndarray, q: Sequence[float], n_resamples: int = 5000, seed: int = 42
) -> np.ndarray:
    """Percentiles ``q`` (in %) of each column's bootstrap mean distribution.

    The resamples of :func:`bootstrap_means`. For a column without NaN the percentiles are
    those of ``np.percentile(values[idx].mean(axis=1), q)`` bit for bit (the released
    scripts' arithmetic, issue 34 item 4) at the cost of the fast count-matrix sums: the
    percentile interpolates between two order statistics, and only the resamples whose fast
    mean lies within a margin far above the rounding error of one of them are averaged again
    the slow way (ties included), which fixes both order statistics exactly. Columns with a
    NaN get ``np.nanpercentile`` of their means (NaN skipped within each resample).

    Returns:
        Array (len(q), k) (k = 1 for 1-D input); NaN for a column with no finite mean.
    """
    arr = np.asarray(values, dtype=float)
    arr = arr[:, None] if arr.ndim == 1 else arr
    boot, drawn = _bootstrap(arr, n_resamples, seed)
    boot = boot[:, None] if boot.ndim == 1 else boot
    qs = np.asarray(q, dtype=float)
    out = np.full((len(qs), arr.shape[1]), np.nan)
    if not drawn:
        return out
    idx = np.concatenate(drawn) if len(drawn) > 1 else drawn[0]
    finite = np.isfinite(arr).all(axis=0)
    # position of each percentile among the sorted means (numpy's linear method)
    pos = (n_resamples - 1) * qs / 100.0
    ranks = np.unique(np.concatenate([np.floor(pos), np.ceil(pos)]).astype(np.int64))
    for j in range(arr.shape[1]):
        col = boot[:, j]
        if not finite[j]:
            if np.isfinite(col).any():
                out[:, j] = np.nanpercentile(col, qs)
            continue
        x = arr[:, j]
        margin = 1e-9 * max(1.0, float(np.abs(x).max()))
        near = np.sort(col)[ranks]
        redo = np.flatnonzero((np.abs(col[:, None] - near[None, :]) <= margin).any(axis=1))
        exact = col.copy()
        exact[redo] = x[idx[redo]].mean(axis=1)
        out[:, j] = np.percentile(exact, qs)
    return out


def percentiles(level: float) -> list[float]:
    """The two percentiles (in %) of a two-sided ``level`` interval: ``[2.5, 97.5]`` at 0.95.

    Rounded to 12 decimals, so 0.95 gives exactly the released scripts' ``[2.5, 97.5]``
    (``100 * (1 - 0.95) / 2`` is 2.500000000000002, which moves a percentile by an ulp).
    """
    return [round(50.0 * (1.0 - level), 12), round(50.0 * (1.0 + level), 12)]


def _percentile_ci(boot: np.ndarray, level: float) -> tuple[float, float]:
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return math.nan, math.nan
    lo, hi = np.percentile(finite, percentiles(level))
    return float(lo), float(hi)


def bootstrap_mean_ci(
    values: Iterable[float], n_resamples: int = 5000, seed: int = 42, level: float = 0.95
) -> dict[str, float]:
    """Mean and two-sided percentile bootstrap interval of ``values`` (NaN values dropped).

    Returns:
        ``{mean, ci_low, ci_high, n}``; NaN mean and bounds when no finite value is left.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level} must be in (0, 1)")
    v = _clean(values)
    if v.size == 0:
        return {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0}
    lo, hi = _percentile_ci(bootstrap_means(v, n_resamples, seed), level)
    return {"mean": float(v.mean()), "ci_low": lo, "ci_high": hi, "n": int(v.size)}


def normal_p(z: float | Iterable[float]) -> Any:
    """Two-sided normal-approximation p of ``z``: ``erfc(|z| / sqrt 2)`` (seed 000 §7.6).

    A float for a number, an array for an iterable; NaN stays NaN, an infinite z gives 0.
    """
    if isinstance(z, int | float | np.floating):
        return math.erfc(abs(float(z)) / math.sqrt(2.0))
    return np.array([math.erfc(abs(v) / math.sqrt(2.0)) for v in _floats(z)], dtype=float)


#: Words of each p test in a column header (:func:`p_label`).
_TEST_WORDS = {"normal": "normal", "bootstrap": "bootstrap", "t": "t-test"}


def p_label(test: str, adjustment: str | None = None) -> str:
    """Header of a p column naming its test and adjustment: ``p (normal, Holm across runs)``.

    ``adjustment``: None (raw p) or its words (``Holm across runs``, ``BH across rows``).
    """
    words = _TEST_WORDS.get(test, test)
    return f"p ({words}, {adjustment})" if adjustment else f"p ({words})"


def format_p(p: float | None, digits: int = 3) -> str:
    """A p as printed: ``< 0.001`` below 0.001 (never ``0`` or ``0.000``).

    Else ``digits`` decimals; ``-`` when missing (None or NaN).
    """
    if p is None or not math.isfinite(float(p)):
        return "-"
    return "< 0.001" if float(p) < 0.001 else f"{float(p):.{digits}f}"


def _check_p_test(p_test: str, allowed: tuple[str, ...]) -> None:
    if p_test not in allowed:
        raise ValueError(f"unknown p test {p_test!r}; choose one of {', '.join(allowed)}")


def paired_contrast(
    a: Iterable[float],
    b: Iterable[float],
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    method: str = "resample",
    p_test: str = "normal",
) -> dict[str, Any]:
    """Paired contrast ``a - b`` over aligned units (pairs with a NaN side are dropped).

    ``method`` is the bootstrap estimator of the mean difference (:data:`CI_METHODS`; the
    differences are the units, so ``multinomial`` draws counts of each distinct difference:
    for binary scores the three joint outcome patterns).

    ``p_test`` (:data:`P_TESTS`): ``normal`` (default; seed 000 §7.6 and its released
    script): z = mean(d) / (sd(d) / sqrt(n)), sd with ddof 1, p = erfc(|z| / sqrt 2); with
    sd(d) = 0 the p is 0 when the mean is not 0 and 1 when it is (NaN for n < 2).
    ``bootstrap``: p = min(1, 2 min(P(d* >= 0), P(d* <= 0))) over the resampled mean
    differences d*.

    Returns:
        ``{mean, ci_low, ci_high, effect, p, p_test, n, ci_method}``: mean difference, paired
        bootstrap percentile CI, standardized effect = mean / sd(differences, ddof=1) (±inf
        when sd is 0 and the mean is not, 0 when both are 0, NaN for n < 2), the two-sided p
        of ``p_test``, and the estimator that ran (``resample``, ``multinomial`` or
        ``multinomial-binned``).
    """
    _check_p_test(p_test, P_TESTS)
    av = np.asarray(list(a) if not isinstance(a, np.ndarray) else a, dtype=float).ravel()
    bv = np.asarray(list(b) if not isinstance(b, np.ndarray) else b, dtype=float).ravel()
    if av.shape != bv.shape:
        raise ValueError(f"paired_contrast: a has {av.size} values, b has {bv.size}")
    d = av - bv
    d = d[np.isfinite(d)]
    n = int(d.size)
    used = ci_method(method, n)
    if n == 0:
        return dict.fromkeys(("mean", "ci_low", "ci_high", "effect", "p"), math.nan) | {
            "p_test": p_test,
            "n": 0,
            "ci_method": used,
        }
    mean = float(d.mean())
    if used == "multinomial":
        boot, used = multinomial_means(d, n_resamples, seed)
    else:
        boot = bootstrap_means(d, n_resamples, seed)
    lo, hi = _percentile_ci(boot, level)
    sd = float(d.std(ddof=1)) if n >= 2 else math.nan
    if n < 2:
        effect = math.nan
    else:
        effect = mean / sd if sd > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
    if p_test == "bootstrap":
        p = min(1.0, 2.0 * min(float(np.mean(boot >= 0)), float(np.mean(boot <= 0))))
    elif n < 2:
        p = math.nan
    elif sd > 0:
        p = normal_p(mean / (sd / math.sqrt(n)))
    else:
        p = 0.0 if mean != 0 else 1.0
    return {
        "mean": mean,
        "ci_low": lo,
        "ci_high": hi,
        "effect": effect,
        "p": p,
        "p_test": p_test,
        "n": n,
        "ci_method": used,
    }


def mcnemar_exact(a_bin: Iterable[float], b_bin: Iterable[float]) -> dict[str, float]:
    """McNemar's exact test on paired binary outcomes (binomial test on discordant pairs).

    Returns:
        ``{b, c, n_discordant, p}`` with b = #(a=1, b=0), c = #(a=0, b=1) and the two-sided
        exact p of ``scipy.stats.binomtest(b, b + c, 0.5)`` (1.0 without discordant pairs).
    """
    from scipy.stats import binomtest  # lazy: scipy.stats takes about a second to import

    av, bv = _floats(a_bin), _floats(b_bin)
    if av.shape != bv.shape:
        raise ValueError(f"mcnemar_exact: a has {av.size} values, b has {bv.size}")
    keep = np.isfinite(av) & np.isfinite(bv)
    av, bv = av[keep] >= 0.5, bv[keep] >= 0.5
    b = int(np.sum(av & ~bv))
    c = int(np.sum(~av & bv))
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)
    return {"b": b, "c": c, "n_discordant": b + c, "p": p}


def holm(pvalues: Iterable[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error); NaN entries stay NaN.

    ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]`` over the finite
    entries, the same arithmetic written out (sorted p times m, m - 1, ..., 1, running
    maximum, capped at 1), without importing statsmodels and scipy.stats (seconds).
    """
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        finite = p[ok]
        order = np.argsort(finite)
        adjusted = np.maximum.accumulate(np.take(finite, order) * np.arange(len(finite), 0, -1))
        adjusted[adjusted > 1] = 1
        back = np.empty_like(adjusted)
        back[order] = adjusted
        out[ok] = back
    return out


def benjamini_hochberg(pvalues: Iterable[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate); NaN entries stay NaN.

    ``statsmodels.stats.multitest.multipletests(p, method="fdr_bh")[1]`` over the finite
    entries, the arithmetic written out (sorted p times m / rank, running minimum from the
    largest down, capped at 1), without importing statsmodels.
    """
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        finite = p[ok]
        m = len(finite)
        order = np.argsort(finite)[::-1]
        ranked = np.take(finite, order) * m / np.arange(m, 0, -1)
        adjusted = np.minimum(np.minimum.accumulate(ranked), 1.0)
        back = np.empty_like(adjusted)
        back[order] = adjusted
        out[ok] = back
    return out


def ols(
    y: Sequence[float],
    X_columns: Mapping[str, Sequence[float]] | pd.DataFrame,
    df_resid: int | None = None,
) -> dict[str, object]:
    """Ordinary least squares with an intercept, rows with a NaN dropped.

    The arithmetic of ``statsmodels.regression.linear_model.OLS(y, add_constant(X)).fit()``
    (its default ``pinv`` method) written out, without importing statsmodels (about half a
    second): coefficients ``pinv(X) y`` with statsmodels' pseudo-inverse (singular values
    below 1e-15 of the largest dropped), covariance ``pinv(X) pinv(X)' * RSS / (n - rank)``,
    two-sided t-test p over ``n - rank`` residual degrees of freedom, R² about the mean
    (``tests/test_oncu_pages_agg.py`` checks it against statsmodels). A rank-deficient
    design gives the minimum-norm coefficients, as there, without statsmodels' warning.

    Args:
        y: response.
        X_columns: predictors by name (mapping or DataFrame), same length as ``y``.
        df_resid: residual degrees of freedom of the variance estimate and the t-test;
            None: ``n - rank`` (statsmodels). The released ONCU script counts the design's
            columns instead (``max(n - columns, 1)``), which differs on a rank-deficient
            design (:func:`core.oncu.metrics.scaling_regression` ``distance="end"``).

    Returns:
        ``{"table": DataFrame(term, coef, se, t, p), "r_squared": float, "n": int}``; the
        first term is ``intercept``; p is the two-sided t-test p.
    """
    X = pd.DataFrame(dict(X_columns)) if not isinstance(X_columns, pd.DataFrame) else X_columns
    X = X.astype(float).reset_index(drop=True)
    yv = pd.Series(np.asarray(y, dtype=float))
    if len(yv) != len(X):
        raise ValueError(f"ols: y has {len(yv)} values, X has {len(X)} rows")
    keep = (yv.notna() & X.notna().all(axis=1)).to_numpy()
    x = X.to_numpy(dtype=float)[keep]
    design = np.column_stack([np.ones(len(x)), x])
    endog = yv.to_numpy()[keep]
    pinv, singular = _pinv_extended(design)
    cov = np.dot(pinv, np.transpose(pinv))
    rank = int(np.linalg.matrix_rank(np.diag(singular)))
    beta = np.dot(pinv, endog)
    resid = endog - np.dot(design, beta)
    ssr = np.dot(resid, resid)
    df_resid = len(endog) - rank if df_resid is None else df_resid
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = ssr / df_resid
        se = np.sqrt(np.diag(cov * scale))
        t = beta / se
        p = _t_sf(np.abs(t), df_resid) * 2
        centered = endog - endog.mean()
        r2 = 1 - ssr / np.dot(centered, centered)
    table = pd.DataFrame(
        {"term": ["intercept", *X.columns], "coef": beta, "se": se, "t": t, "p": p}
    )
    return {"table": table, "r_squared": float(r2), "n": int(keep.sum())}


def _pinv_extended(x: np.ndarray, rcond: float = 1e-15) -> tuple[np.ndarray, np.ndarray]:
    """``(pseudo-inverse of x, its singular values)``: ``statsmodels.tools.tools.pinv_extended``."""
    u, s, vt = np.linalg.svd(x, False)
    s_orig = np.copy(s)
    cutoff = rcond * np.maximum.reduce(s)
    for i in range(min(vt.shape[1], u.shape[0])):
        s[i] = 1.0 / s[i] if s[i] > cutoff else 0.0
    return np.dot(np.transpose(vt), np.multiply(s[:, np.newaxis], np.transpose(u))), s_orig


def _t_sf(x: np.ndarray, df: float) -> np.ndarray:
    """Student's t survival function: ``scipy.stats.t.sf(x, df)`` (its ``stdtr(df, -x)``).

    scipy.special, not scipy.stats (about half a second to import); NaN where df <= 0.
    """
    from scipy.special import stdtr  # lazy: the figures import it anyway

    x = np.asarray(x, dtype=float)
    if not df > 0:
        return np.full(x.shape, np.nan)
    return np.asarray(stdtr(df, -x), dtype=float)


def calibration(
    confidence: Iterable[float], correct: Iterable[float], n_bins: int = 10
) -> dict[str, object]:
    """Brier score, expected calibration error and reliability-diagram bins.

    Confidences are clamped to [0, 1]; pairs with a NaN are dropped. Bins are equal-width,
    ``[i/n, (i+1)/n)`` with the last bin closed at 1. ECE = sum over bins of
    (count / N) * |accuracy - mean confidence|.

    Returns:
        ``{brier, ece, n, bins}``; ``bins`` is a DataFrame (bin, lo, hi, count, mean_conf,
        accuracy) with NaN means for empty bins. NaN scores when nothing is left.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins {n_bins} must be >= 1")
    c, y = _floats(confidence), _floats(correct)
    if c.shape != y.shape:
        raise ValueError(f"calibration: {c.size} confidences, {y.size} outcomes")
    keep = np.isfinite(c) & np.isfinite(y)
    c, y = np.clip(c[keep], 0.0, 1.0), y[keep]
    n = int(c.size)
    b = np.minimum((c * n_bins).astype(int), n_bins - 1)
    count = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(b, weights=c, minlength=n_bins) / count
        accuracy = np.bincount(b, weights=y, minlength=n_bins) / count
    edges = np.arange(n_bins + 1) / n_bins
    bins = pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lo": edges[:-1],
            "hi": edges[1:],
            "count": count,
            "mean_conf": mean_conf,
            "accuracy": accuracy,
        }
    )
    if n == 0:
        return {"brier": math.nan, "ece": math.nan, "n": 0, "bins": bins}
    nz = count > 0
    ece = float(np.sum(count[nz] / n * np.abs(accuracy[nz] - mean_conf[nz])))
    return {"brier": float(np.mean((c - y) ** 2)), "ece": ece, "n": n, "bins": bins}
