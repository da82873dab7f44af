"""Ranked coverage: alpha-nDCG computed as ndeval computes it (seed 002 eq. 4; issue 38).

CRUX's ranked coverage is alpha-nDCG (Clarke et al., SIGIR 2008) with the sub-questions as
subtopics; the paper's implementation is ndeval (``ndeval.c``, via ir-measures / pyndeval).
This module follows ndeval step for step, so values agree with it bit for bit:

- gain at rank r: ``ng(r) = sum_i J(p_r, i) (1 - alpha)^{c_i(r-1)}``, each subtopic's gain
  starting at 1 and multiplied by ``1 - alpha`` after every item answering it, an item's gain
  summed over its subtopics in ascending subtopic order (ndeval's subtopic numbers; ids that
  do not compare are taken in order of first appearance); discount 1 at rank 1 and
  ``log(2) / log(r + 1)`` after;
- the ideal is ndeval's ``idealResult``: the greedy ordering of the judged pool, at each rank
  the unplaced item of largest gain, **ties to the greater docno** (``strcmp``; Python's
  ``str`` order is the same on UTF-8 text). ndeval orders the pool once, so the ideal at
  cut-off k is that ordering's prefix of length k: one greedy run to the deepest cut-off;
- both DCGs are divided, from rank 2 on, by ndeval's "ideal ideal" scale before their ratio
  is taken (the same rounding as ndeval).

Checked bit for bit against a port of ndeval's C code (``tests/test_crux_ndcg.py``) at any
alpha, and against pyndeval at alpha = 0.5 (pyndeval renumbers subtopics in the order it first
meets them across all topics, so at other alpha its sums may round differently, by 1 ulp).

One difference, on purpose: where the pool answers nothing ndeval prints 0; here it is NaN
(unscored and counted by the callers), as every metric of this tool.

:func:`alpha_ndcg_topics` computes many topics and cut-offs at once, vectorized over topics
(``bench/bench_crux.py`` times it beside pyndeval); :func:`alpha_ndcg` is one topic and one
cut-off, with the greedy ideal of a pool kept for the next cut-off.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, count
from typing import Any

import numpy as np

__all__ = ["ALPHA", "alpha_ndcg", "alpha_ndcg_topics"]

#: Novelty discount of alpha-nDCG (seed 002 §3.3; ndeval's default).
ALPHA = 0.5


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return a


def _check_depth(depth: Any) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    return int(depth)


@functools.lru_cache(maxsize=64)
def _discounts(n: int) -> np.ndarray:
    """The rank discount of ndeval: 1 at rank 1, ``log(2) / log(r + 1)`` after (libm log)."""
    out = np.array([1.0] + [math.log(2.0) / math.log(i + 2.0) for i in range(1, n)])
    out.flags.writeable = False
    return out


def _by_docno(pool: Sequence[Iterable[Hashable]], ids: Sequence[Any] | None, t: int = 0) -> list:
    """The pool's items, greatest docno first (the first of equal gains is ndeval's pick).

    Without ids the positions are the docnos: the later item comes first.
    """
    n = len(pool)
    if ids is None:
        return list(pool)[::-1]
    if len(ids) != n or len(set(ids)) != n:
        raise ValueError(f"topic {t}: pool ids must be {n} unique docnos, one an item")
    return [pool[i] for i in sorted(range(n), key=ids.__getitem__, reverse=True)]


#: Up to this many distinct subtopics over all topics, :func:`_topic_arrays` numbers them
#: once for every topic (no per-topic Python loop); above it, per topic.
_SHARED_SUBTOPICS = 64


def _numbered(subtopics: Iterable[Hashable], fallback: bool = True) -> dict[Hashable, int] | None:
    """Subtopic -> its number: ascending ids (ndeval's subtopic numbers), else first seen.

    ndeval sums an item's subtopic gains in subtopic-number order; with another order a sum
    of three or more gains can round differently, and a tie become a non-tie. Ids that do not
    compare (mixed types) are numbered in order of first appearance, or give None when
    ``fallback`` is False.
    """
    seen = list(dict.fromkeys(subtopics))
    try:
        seen.sort()
    except TypeError:
        if not fallback:
            return None
    return dict(zip(seen, count()))


def _items_of(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Topic and position within its topic of each item, given the items per topic."""
    topic = np.repeat(np.arange(len(sizes)), sizes)
    return topic, np.arange(len(topic)) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _docno_slots(pool_ids: Sequence[Sequence[Any]] | None, sizes: np.ndarray) -> np.ndarray:
    """Each pool item's slot in its topic, greatest docno in slot 0 (ndeval's tie order).

    Without ids the positions are the docnos: the later item takes the earlier slot.
    """
    topic, pos = _items_of(sizes)
    if pool_ids is None:
        return sizes[topic] - 1 - pos
    order: list[int] = []  # per topic, its items' positions in docno order, greatest first
    for t, n in enumerate(sizes.tolist()):
        ids = pool_ids[t]
        if len(ids) != n or len(set(ids)) != n:
            raise ValueError(f"topic {t}: pool ids must be {n} unique docnos, one an item")
        order += sorted(range(n), key=ids.__getitem__, reverse=True)
    slots = np.empty(len(pos), dtype=np.int64)
    slots[(np.cumsum(sizes) - sizes)[topic] + np.asarray(order, dtype=np.int64)] = pos
    return slots


def _topic_arrays(
    rankings: Sequence[Sequence[Iterable[Hashable]]],
    pools: Sequence[Sequence[Iterable[Hashable]]],
    pool_ids: Sequence[Sequence[Any]] | None,
    depth: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-topic judgments as dense boolean arrays, subtopic-major.

    Returns ``pool_rel`` (S, T, P) with each topic's pool in docno order, greatest first (so
    the first maximum is ndeval's tie winner), ``run_rel`` (S, T, depth) for the rankings cut
    at ``depth`` and ``actual`` (T,), the subtopics some pool item answers. Subtopics are
    numbered by :func:`_numbered` over a topic's pool and ranking (one numbering for all
    topics when the ids compare and are few: the same order within every topic).
    """
    n_topics = len(pools)
    cut = [r[:depth] for r in rankings]
    sizes = np.array([[len(p) for p in pools], [len(r) for r in cut]], dtype=np.int64)
    sizes = sizes.reshape(2, n_topics)
    items = [list(chain.from_iterable(pools)), list(chain.from_iterable(cut))]
    lens = [np.fromiter(map(len, x), np.int64, len(x)) for x in items]
    subs = [list(chain.from_iterable(x)) for x in items]
    shared = _numbered(chain(*subs), fallback=False)
    if shared is not None and len(shared) <= _SHARED_SUBTOPICS:
        nums = [np.fromiter(map(shared.__getitem__, x), np.int64, len(x)) for x in subs]
        n_sub = max(1, len(shared))
    else:  # per topic: the judgments of topic t are a slice of subs[0] / subs[1]
        bounds = []
        for ln, sz in zip(lens, sizes, strict=True):
            per_topic = np.bincount(_items_of(sz)[0], weights=ln, minlength=n_topics)
            bounds.append([0, *np.cumsum(per_topic.astype(np.int64)).tolist()])
        out: list[list[int]] = [[], []]
        n_sub = 1
        for t in range(n_topics):
            part = [x[b[t] : b[t + 1]] for x, b in zip(subs, bounds, strict=True)]
            sub = _numbered(chain(*part))
            for o, x in zip(out, part, strict=True):
                o += map(sub.__getitem__, x)
            n_sub = max(n_sub, len(sub))
        nums = [np.asarray(o, dtype=np.int64) for o in out]
    width = max(1, int(sizes[0].max(initial=0)))
    item_topic, _ = _items_of(sizes[0])
    j_topic = np.repeat(item_topic, lens[0])
    j_slot = np.repeat(_docno_slots(pool_ids, sizes[0]), lens[0])
    pool_rel = np.zeros((n_sub, n_topics, width), dtype=bool)
    pool_rel[nums[0], j_topic, j_slot] = True
    run_topic, run_pos = _items_of(sizes[1])
    run_rel = np.zeros((n_sub, n_topics, max(depth, 1)), dtype=bool)
    run_rel[nums[1], np.repeat(run_topic, lens[1]), np.repeat(run_pos, lens[1])] = True
    actual = pool_rel.any(axis=2).sum(axis=0)
    return pool_rel, run_rel, actual


def _gains(rel: np.ndarray, keep: float) -> np.ndarray:
    """Novelty gain of each rank of ``rel`` (S, T, R), in rank order (ndeval's computeDCG).

    Each subtopic's gain starts at 1 and is multiplied by ``keep = 1 - alpha`` after every
    item answering it; an item's gain sums its subtopics' gains in subtopic order (the same
    floating-point operations as ndeval, so ties and values agree bit for bit).
    """
    n_sub, n_topics, depth = rel.shape
    sub_gain = np.ones((n_sub, n_topics))
    out = np.zeros((n_topics, depth))
    for r in range(depth):
        hit = rel[:, :, r]
        score = out[:, r]
        for j in range(n_sub):
            score += hit[j] * sub_gain[j]
        sub_gain = np.where(hit, sub_gain * keep, sub_gain)
    return out


def _ideal_gains(pool_rel: np.ndarray, keep: float, depth: int) -> np.ndarray:
    """Gains of ndeval's greedy ideal (``idealResult``) at ranks 1..depth, every topic at once.

    At each rank the unplaced item of largest novelty gain joins; ties go to the greater docno
    (the pool is sorted greatest docno first, and argmax takes the first maximum). Ranks past
    the pool gain 0.
    """
    n_sub, n_topics, width = pool_rel.shape
    rows = np.arange(n_topics)
    sub_gain = np.ones((n_sub, n_topics))
    placed = np.zeros((n_topics, width), dtype=bool)
    out = np.zeros((n_topics, depth))
    score = np.empty((n_topics, width))
    for r in range(min(depth, width)):
        score.fill(0.0)
        for j in range(n_sub):
            score += pool_rel[j] * sub_gain[j][:, None]
        score[placed] = -1.0
        best = score.argmax(axis=1)
        out[:, r] = np.maximum(score[rows, best], 0.0)
        placed[rows, best] = True
        hit = pool_rel[:, rows, best]
        sub_gain = np.where(hit, sub_gain * keep, sub_gain)
    return out


def _normalized(
    ideal_gains: np.ndarray, run_gains: np.ndarray, actual: np.ndarray, keep: float, ks: list[int]
) -> np.ndarray:
    """alpha-nDCG@k per topic from the gains at each rank, with ndeval's floating-point steps.

    ndeval discounts each gain, cumulates, divides both DCGs from rank 2 on by the "ideal
    ideal" (``|subtopics| * (1 - alpha)^(r-1)``, discounted and cumulated) and takes their
    ratio; NaN where the ideal is 0.
    """
    n_topics, deep = ideal_gains.shape
    out = np.full((n_topics, len(ks)), math.nan)
    disc = _discounts(deep)
    scale = np.cumprod(np.column_stack([actual, np.full((n_topics, deep - 1), keep)]), axis=1)
    scale = np.cumsum(scale * disc, axis=1)
    scale[:, 0] = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal = np.cumsum(ideal_gains * disc, axis=1) / scale
        run = np.cumsum(run_gains[:, :deep] * disc, axis=1) / scale
        for c, k in enumerate(ks):
            if k:
                den = ideal[:, k - 1]
                out[:, c] = np.where(den > 0, run[:, k - 1] / den, math.nan)
    return out


class _Greedy:
    """ndeval's greedy ideal of one pool (``idealResult``), extended rank by rank on demand.

    The same floating-point steps as :func:`_ideal_gains`: an item's gain is the sum of its
    subtopics' gains in subtopic order, recomputed for the items that share a subtopic with
    the one just placed.
    """

    def __init__(self, pool: tuple[frozenset, ...], ids: tuple | None, keep: float) -> None:
        sub = _numbered(chain.from_iterable(pool))
        self.items = [sorted(sub[x] for x in items) for items in _by_docno(pool, ids)]
        self.by_sub: list[list[int]] = [[] for _ in sub]
        for i, js in enumerate(self.items):
            for j in js:
                self.by_sub[j].append(i)
        self.keep = keep
        self.n_sub = len(sub)
        self.sub_gain = [1.0] * len(sub)
        self.score = [float(len(js)) for js in self.items]
        self.placed = [False] * len(self.items)
        self.gains: list[float] = []
        self.lock = threading.Lock()

    def prefix(self, depth: int) -> list[float]:
        """The ideal's gains at ranks 1..depth (0 past the pool)."""
        with self.lock:
            score, sub_gain, placed = self.score, self.sub_gain, self.placed
            n = len(self.items)
            while len(self.gains) < min(depth, n):
                best = max(range(n), key=score.__getitem__)  # the first maximum
                self.gains.append(score[best])
                placed[best], score[best] = True, -1.0
                touched: set[int] = set()
                for j in self.items[best]:
                    sub_gain[j] *= self.keep
                    touched.update(self.by_sub[j])
                for i in touched:
                    if not placed[i]:
                        total = 0.0
                        for j in self.items[i]:
                            total += sub_gain[j]
                        score[i] = total
            return (self.gains + [0.0] * depth)[:depth]


@functools.lru_cache(maxsize=256)
def _greedy(pool: tuple[frozenset, ...], ids: tuple | None, keep: float) -> _Greedy:
    """One :class:`_Greedy` per pool, so the cut-offs of a topic share its ideal."""
    return _Greedy(pool, ids, keep)


def _run_gains(
    ranking: Sequence[frozenset], pool: Iterable[frozenset], keep: float, depth: int
) -> list[float]:
    """Novelty gains of one ranking's first ``depth`` items (:func:`_gains`, one topic)."""
    ranked = ranking[:depth]
    sub = _numbered(chain(chain.from_iterable(pool), chain.from_iterable(ranked)))
    sub_gain = [1.0] * len(sub)
    out = []
    for items in ranked:
        total = 0.0
        for j in sorted(sub[x] for x in items):
            total += sub_gain[j]
            sub_gain[j] *= keep
        out.append(total)
    return out + [0.0] * (depth - len(out))


def alpha_ndcg_topics(
    rankings: Sequence[Sequence[Iterable[Hashable]]],
    pools: Sequence[Sequence[Iterable[Hashable]]] | None = None,
    depths: Sequence[int] = (5, 10, 20),
    alpha: float = ALPHA,
    pool_ids: Sequence[Sequence[Any]] | None = None,
) -> np.ndarray:
    """alpha-nDCG at several cut-offs for many topics at once, computed as ndeval computes it.

    ndeval (Clarke et al.'s ``ndeval.c``, the implementation ir-measures / pyndeval wrap)
    orders each topic's judged pool greedily once (``idealResult``); the ideal at cut-off k is
    the prefix of length k of that one ordering, so the greedy runs once per topic to the
    deepest cut-off, vectorized over topics. Ties of the greedy go to the greater docno
    (``strcmp``; Python's ``str`` order is the same on UTF-8 text).

    Args:
        rankings: per topic, ``rankings[t][r]`` = the subtopics the item at rank r + 1 answers.
        pools: per topic, the subtopic sets of every judged item; defaults to the rankings.
        depths: the cut-offs k (non-negative integers).
        alpha: redundancy discount in [0, 1].
        pool_ids: per topic, the pool items' docnos (unique), which break ties; None: the
            positions in the pool (a tie goes to the later item).

    Returns:
        Array (topics, cut-offs) of DCG@k / ideal DCG@k with gain ``sum_i J(p_r, i) (1 -
        alpha)^{c_i(r-1)}`` and discount ``1 / log2(r + 1)``; NaN where the ideal gain is 0
        (the pool answers nothing: ndeval prints 0 there, this tool counts it unscored).

    Raises:
        ValueError: alpha outside [0, 1], a negative depth, pools / ids of other lengths
            than the rankings, or duplicate ids in a pool.
    """
    a = _check_alpha(alpha)
    ks = [_check_depth(k) for k in depths]
    pools = rankings if pools is None else pools
    if len(pools) != len(rankings):
        raise ValueError(f"{len(pools)} pools for {len(rankings)} rankings")
    if pool_ids is not None and len(pool_ids) != len(pools):
        raise ValueError(f"{len(pool_ids)} pool id lists for {len(pools)} pools")
    out = np.full((len(rankings), len(ks)), math.nan)
    deep = max(ks, default=0)
    if not len(rankings) or deep == 0:
        return out
    pool_rel, run_rel, actual = _topic_arrays(rankings, pools, pool_ids, deep)
    keep = 1.0 - a
    out[:] = _normalized(
        _ideal_gains(pool_rel, keep, deep), _gains(run_rel, keep), actual, keep, ks
    )
    return out


def alpha_ndcg(
    ranking: Sequence[Iterable[Hashable]],
    pool: Sequence[Iterable[Hashable]] | None = None,
    alpha: float = ALPHA,
    depth: int | None = None,
    pool_ids: Sequence[Any] | None = None,
) -> float:
    """Ranked coverage: alpha-nDCG with sub-questions as subtopics (seed 002 eq. 4), as ndeval.

    Args:
        ranking: ``ranking[r]`` = the sub-question ids the item at rank r + 1 answers.
        pool: the sub-question sets of every judged item of the instance; the ideal is
            their greedy ordering. Defaults to the ranking's own items.
        alpha: redundancy discount in [0, 1]; 0 ignores repeats, 1 gives repeats no gain.
        depth: cut-off for both the ranking and the ideal; default ``len(ranking)``.
        pool_ids: the pool items' ids (ndeval's docnos): a tie of the greedy ideal goes to
            the greater id; None: the later item of the pool.

    Returns:
        DCG / ideal DCG (:func:`alpha_ndcg_topics` for one topic and one cut-off); NaN when
        the ideal gain is 0 (the pool answers nothing).

    Raises:
        ValueError: alpha outside [0, 1], a negative depth, or bad pool ids.
    """
    keep = 1.0 - _check_alpha(alpha)
    sets = [frozenset(s) for s in ranking]
    pool_sets = tuple(sets if pool is None else (frozenset(s) for s in pool))
    d = len(sets) if depth is None else _check_depth(depth)
    if d == 0:
        return math.nan
    greedy = _greedy(pool_sets, None if pool_ids is None else tuple(pool_ids), keep)
    gains = np.array([greedy.prefix(d), _run_gains(sets, pool_sets, keep, d)])
    return float(_normalized(gains[:1], gains[1:], np.array([greedy.n_sub]), keep, [d])[0, 0])
