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

import numpy as np
import pandas as pd

from core.attribution.lasso import (
    CV_FOLDS,
    N_ALPHAS,
    alpha_max,
    cv_many,
    lasso,
    lasso_path_cv,
    moments,
    solve,
)
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
#: An instance with fewer answered ablations is not fitted (too few masks for 5 folds).
MIN_ROWS = 8

BOOTSTRAP = Param(
    "n_boot",
    int,
    200,
    "bootstrap resamples of the masks per instance (CI of each weight)",
    minimum=50,
    maximum=10000,
    section="issue 40 item 3",
)
BOOT_SEED = Param("boot_seed", int, 0, "seed of the bootstrap over masks", minimum=0)
LDS_LOW = Param(
    "lds_low",
    float,
    0.3,
    "an instance whose LDS is below this is counted as poorly fitted",
    minimum=-1.0,
    maximum=1.0,
    section="ContextCite §4 (LDS)",
)
SCORE_FIELD = Param(
    "score_field",
    str,
    "soft_correct",
    "the score of the 'correct' target (against gold)",
    choices=ANSWER_SCORES,
    section="SPEC §6",
)
#: Knobs of ``report attribution``.
REPORT_PARAMS = (BOOTSTRAP, BOOT_SEED, LDS_LOW)

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
        fits = cv_many([(x, y) for _, x, y, *_ in todo], N_ALPHAS, CV_FOLDS)
        seeds = [[seed, _key_hash(keys[t[0]] if keys is not None else str(t[0]))] for t in todo]
        boots = (
            _bootstrap(
                [(x, y, fit[0], fit[2]) for (_, x, y, *_), fit in zip(todo, fits, strict=True)],
                n_boot,
                seeds,
            )
            if n_boot
            else [np.full((1, len(fit[2])), np.nan) for fit in fits]
        )
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
            out[i] = Surrogate(
                tuple(passages), weights, lo, hi, intercept, alpha, lds, len(y), notes, reason
            )
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
        return Surrogate(
            tuple(passages),
            nan,
            nan.copy(),
            nan.copy(),
            math.nan,
            math.nan,
            math.nan,
            n,
            notes,
            f"{n} answered ablations (fewer than {MIN_ROWS})",
        )
    cols = np.flatnonzero(~(kept | dropped))
    x = m[:, cols].astype(float)
    if np.ptp(y) == 0.0 or alpha_max(x, y) <= 0.0:
        weights, lo, hi = nan.copy(), nan.copy(), nan.copy()
        weights[cols] = lo[cols] = hi[cols] = 0.0
        why = "constant targets" if np.ptp(y) == 0.0 else "no passage varies with the target"
        return Surrogate(
            tuple(passages),
            weights,
            lo,
            hi,
            float(y.mean()),
            0.0,
            math.nan,
            n,
            notes,
            f"{why}: every weight 0, LDS undefined",
        )
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
            moms.append(moments(x, y, counts.astype(float), pmax))
            alphas.append(np.full(n_boot, alpha))
            starts.append(np.tile(np.pad(w, (0, pmax - len(w))), (n_boot, 1)))
        wb = solve(moms, np.concatenate(alphas), np.concatenate(starts))
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
        raise ValueError(
            f"unknown score field {score_field!r}; choose from: {', '.join(ANSWER_SCORES)}"
        )
    out = []
    if preds.empty:
        return out
    cols = [
        "instance_id",
        "condition",
        "variant",
        "answer",
        "cited_ids",
        "error",
        "meta",
        score_field,
    ]
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
        full_target = _target(full, target, score_field, ref) if not reason else math.nan
        out.append(
            Ablations(
                iid,
                str(full["condition"]),
                passages,
                np.asarray(masks, dtype=bool).reshape(len(masks), len(passages)),
                np.asarray(ys, dtype=float),
                n_planned,
                n_failed,
                ref,
                _ids(full.get("cited_ids")),
                full_failed,
                full_target,
                drops,
                reason,
            )
        )
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
            call = plan_topk_drop(
                by_id[t.instance_id],
                t.condition,
                shown[t.instance_id],
                ranked,
                k,
                seed=seed,
                keep=keep,
            )
            if call is not None:
                calls.append(call)
    return calls
