"""Retrieval-context coverage (CRUX, seed 002 §3; SPEC §9).

A retrieval context Z (the top-k chunks of a retriever) is judged by which sub-questions of the
instance its items can answer. Answerability ratings G(p, q) in 0..5 come from the store
(``sub_questions`` / ``answerability``, e.g. an LLM judge with the CRUX rubric); an item answers
q when G >= eta (default eta = 3, seed 002 eq. 2 and fn. 3; §4.4 repeats the analysis at
eta = 5, which ``eta`` allows). Where no ratings exist, binary answerability is *derived from
gold evidence*: every gold passage answers its own sub-question (sub-question id = the passage
id) and nothing else does -- binary, so eta has no effect on it. Every result says which source
it used per context (``answerability_source``: ``"gold"`` or ``"judge:<name>"``), counts the
instances of each (:attr:`CruxResult.answerability_counts`, the aggregate's ``judged`` /
``gold_derived`` columns) and says it in a line (:func:`answerability_note`).

Context size. A fixed top-k (``ks``), and optionally ``k = |Z*|`` per instance
(``k_required``): CRUX sets the number of passages in the retrieval context "to match the size
of the oracle retrieval context, |Z*|" (seed 002 §4.2; "the size of oracle retrieval (|Z*|)",
§4.4). Those rows carry ``k = "|Z*|"`` and their size in ``k_size``; an instance whose
required subset is empty (its gold passages answer no answerable sub-question) has no such
context and is counted unscored.

Definitions (seed 002 eqs. 3-5):

- ``Cov(Z) = |{q in Q_ans : max_{p in Z} G(p, q) >= eta}| / |Q_ans|`` with ``Q_ans`` the
  sub-questions the oracle context answers: those some gold passage answers (the required
  subset Z* answers them all, so Cov(Z*) = 1 by construction). The others are discarded from
  every metric, as the paper's filtering discards them (§3.2; App. A.3: "the 2 unanswered
  questions are discarded"), also when a distractor passage judged with ``judge --passages
  all`` answers one (:attr:`Answerability.discarded`);
- ranked coverage ``alpha-nDCG`` with the sub-questions of ``Q_ans`` as subtopics: gain at
  rank r ``ng(r) = sum_i J(p_r, i) (1 - alpha)^{c_i(r-1)}`` (``c_i(r-1)`` = earlier items
  answering i), discount ``log2(r + 1)``, normalized by the greedy ideal ordering of the pool,
  both cut at depth |Z|, computed as ndeval computes it (:mod:`core.crux.ndcg`: ties of the
  ideal go to the greater chunk id, i.e. the later chunk);
- ``Den(Z) = ((Cov(Z) / tokens(Z)) / (Cov(Z*) / tokens(Z*)))^w`` with w = 0.5 and Z* the
  required subset: a greedy set cover of the answerable sub-questions by the gold passages.

Units. Retrieved contexts are chunks (:func:`core.retrieval.retrievers.retrieve`); a chunk answers
the
union of the sub-questions of the passages it overlaps (the same overlap rule as
:func:`core.retrieval.retrievers.retrieval_diagnostics`). The alpha-nDCG ideal is the greedy
ordering of
*every chunk of the instance under the same chunking* -- the judged units of that context type;
an ideal over whole passages could be beaten by one chunk spanning two gold passages (nDCG > 1).
``tokens(Z)`` = the context-stream tokens the chunks span (``Chunk.n_tokens``, overlaps counted
each time they are shown); ``tokens(Z*)`` = the same stream tokens of the required passages
(title + text + the 3 label tokens ``[passage_id: pXXXX] Title:``), so both are in one unit.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.crux.answerability import (
    ETA,
    JUDGE_TEMPLATE,
    JUDGE_TEMPLATE_VERSION,
    Answerability,
    answerability_from_gold,
    answerability_from_ratings,
    check_eta,
    judge_messages,
    parse_rating,
    required_subset,
)
from core.crux.ndcg import ALPHA, alpha_ndcg, alpha_ndcg_topics
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP
from core.retrieval.retrievers import Chunk, chunk_instance, rank_chunks, rankable
from core.stats.inference import bootstrap_means
from core.store import Store
from core.types import Instance

__all__ = [
    "ALPHA",
    "ETA",
    "JUDGE_TEMPLATE",
    "JUDGE_TEMPLATE_VERSION",
    "METRICS",
    "W",
    "K_REQUIRED",
    "Answerability",
    "CruxResult",
    "alpha_ndcg",
    "alpha_ndcg_topics",
    "answerability_from_gold",
    "answerability_from_ratings",
    "answerability_note",
    "context_pool",
    "context_scores",
    "coverage",
    "crux_evaluate",
    "crux_report",
    "density",
    "judge_messages",
    "parse_rating",
    "passage_tokens",
    "required_subset",
]

#: The ``k`` label of contexts sized to the required subset, k = |Z*| (seed 002 §4.2).
K_REQUIRED = "|Z*|"
#: Density exponent (seed 002 eq. 5).
W = 0.5
#: Per-context metrics, averaged per (retriever, k).
METRICS = ("coverage", "alpha_ndcg", "density")

#: Tokens that open every rendered passage in the context stream: ``[passage_id:``,
#: ``pXXXX]``, ``Title:`` (see :func:`core.retrieval.retrievers.chunk_instance`).
_LABEL_TOKENS = 3


# ------------------------------------------------------------------------ metric functions


def coverage(ranking: Iterable[Iterable[Hashable]], answerable: Iterable[Hashable]) -> float:
    """Cov(Z): share of the answerable sub-questions that some item of Z answers (eq. 3).

    Args:
        ranking: per item of Z, the sub-question ids it answers (rating >= eta).
        answerable: the instance's answerable sub-questions ``Q_ans``.

    Returns:
        ``|answered ∩ Q_ans| / |Q_ans|``; NaN when ``Q_ans`` is empty.
    """
    target = set(answerable)
    if not target:
        return math.nan
    got: set[Hashable] = set()
    for s in ranking:
        got.update(s)
    return len(got & target) / len(target)


def density(cov: float, tokens: float, cov_ref: float, tokens_ref: float, w: float = W) -> float:
    """Den(Z) = ((cov / tokens) / (cov_ref / tokens_ref))^w, relative to Z* (eq. 5).

    Args:
        cov: Cov(Z).
        tokens: tokens of Z (> 0 unless ``cov`` is 0).
        cov_ref: Cov(Z*).
        tokens_ref: tokens of Z* (> 0).
        w: exponent (0.5: diminishing returns near the optimum).

    Returns:
        The density; 0 when ``cov`` is 0; NaN when any input is NaN or ``cov_ref`` is 0.

    Raises:
        ValueError: a negative input, or a positive coverage over zero tokens.
    """
    vals = {"cov": cov, "tokens": tokens, "cov_ref": cov_ref, "tokens_ref": tokens_ref, "w": w}
    if any(isinstance(v, float) and math.isnan(v) for v in vals.values()):
        return math.nan
    for name, v in vals.items():
        if v < 0:
            raise ValueError(f"density: {name} must be >= 0, got {v!r}")
    if cov_ref == 0:
        return math.nan
    if tokens_ref == 0:
        raise ValueError("density: tokens_ref must be > 0 when cov_ref > 0")
    if cov == 0:
        return 0.0
    if tokens == 0:
        raise ValueError("density: tokens must be > 0 when cov > 0")
    return float(((cov / tokens) / (cov_ref / tokens_ref)) ** w)


# ------------------------------------------------------------------------ answerability


# ------------------------------------------------------------------------ contexts


def _chunk_sets(chunks: Sequence[Chunk], ans: Answerability) -> list[frozenset[str]]:
    empty: frozenset[str] = frozenset()
    return [
        frozenset().union(*(ans.answers.get(pid, empty) for pid in c.passage_ids)) for c in chunks
    ]


def context_pool(
    all_chunks: Sequence[Chunk], ans: Answerability
) -> tuple[list[frozenset[str]], list[str]]:
    """The ideal's pool of an instance's contexts: each chunk's answered sub-questions, ids."""
    return _chunk_sets(all_chunks, ans), [c.chunk_id for c in all_chunks]


def passage_tokens(instance: Instance) -> dict[str, int]:
    """Each passage's tokens as a context counts them (text, title and its label)."""
    return {p.passage_id: p.n_tokens + _LABEL_TOKENS for p in instance.passages}


def context_scores(
    ranked: Sequence[Chunk],
    all_chunks: Sequence[Chunk],
    ans: Answerability,
    instance: Instance,
    alpha: float = ALPHA,
    w: float = W,
    *,
    pool: tuple[list[frozenset[str]], list[str]] | None = None,
    n_tokens: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """CRUX scores of one retrieval context (chunks in rank order) of one instance.

    Args:
        ranked: the context Z, best first.
        all_chunks: every chunk of the instance under the same chunking (the ideal's pool).
        ans: the instance's answerability.
        instance: the instance (passage token counts for Z*).
        alpha: alpha-nDCG redundancy discount.
        w: density exponent.
        pool: :func:`context_pool` of ``all_chunks`` when the caller scores several contexts
            of the instance (computed here otherwise).
        n_tokens: :func:`passage_tokens` of the instance, likewise.

    Returns:
        ``coverage``, ``alpha_ndcg``, ``density``, ``tokens``, ``coverage_ref`` (Cov(Z*)),
        ``tokens_ref``, ``n_answerable`` and ``answered`` (sub-question ids Z answers).
    """
    sets = _chunk_sets(ranked, ans)
    cov = coverage(sets, ans.answerable)
    pool_sets, pool_ids = context_pool(all_chunks, ans) if pool is None else pool
    ndcg = alpha_ndcg(sets, pool_sets, alpha=alpha, depth=len(sets), pool_ids=pool_ids)
    ntok = passage_tokens(instance) if n_tokens is None else n_tokens
    tokens_ref = sum(ntok[pid] for pid in ans.required)
    cov_ref = coverage([ans.answers[pid] for pid in ans.required], ans.answerable)
    tokens = sum(c.n_tokens for c in ranked)
    den = math.nan
    if not math.isnan(cov) and tokens_ref > 0:
        den = density(cov, tokens, cov_ref, tokens_ref, w=w)
    answered = sorted(frozenset().union(*sets) & ans.answerable) if sets else []
    return {
        "coverage": cov,
        "alpha_ndcg": ndcg,
        "density": den,
        "tokens": tokens,
        "coverage_ref": cov_ref,
        "tokens_ref": tokens_ref,
        "n_answerable": len(ans.answerable),
        "answered": answered,
    }


@dataclass(frozen=True, slots=True)
class CruxResult:
    """Per-context rows and their aggregate per (retriever, k).

    Attributes:
        per_context: one row per (instance, retriever, k): ``instance_id``, ``retriever``,
            ``k`` (the fixed top-k, or ``"|Z*|"``), ``k_size`` (chunks in the context),
            ``answerability_source``, the :func:`context_scores` fields and ``chunk_ids``.
        aggregate: one row per (retriever, k): ``k_mean`` (mean context size in chunks),
            ``n`` (contexts scored), ``n_unscored`` (instances without answerable
            sub-questions, or without a required subset for ``k = |Z*|``), ``judged`` and
            ``gold_derived`` (instances whose answerability was judged / derived from gold),
            ``answerability`` (the same in words), and per metric of ``METRICS`` the mean with
            a bootstrap CI (``<metric>``, ``<metric>_ci_low``, ``<metric>_ci_high``), plus
            ``tokens`` (mean) and ``answerability_source``.
        answerability_source: ``gold``, ``judge:<name>`` or ``mixed`` over the instances.
        eta: the answerability threshold the judged ratings were cut at.
        answerability_counts: source (``gold`` / ``judge:<name>``) -> instances using it.
        k_required: whether ``k = |Z*|`` contexts were scored.
        discarded: judged sub-questions no gold passage answers, left out (over the
            instances), and ``distractor_only`` of them some non-gold passage answers.
        no_text: instances without passage text (imported results), not ranked: their
            coverage would read 1.0 over a corpus of empty gold-only passages; the aggregate
            repeats the count in ``n_no_text`` and the reason in ``missing``.
        missing: why they are left out, with the count (None when none is).
    """

    per_context: pd.DataFrame
    aggregate: pd.DataFrame
    answerability_source: str
    eta: float = ETA
    answerability_counts: Mapping[str, int] = field(default_factory=dict)
    k_required: bool = False
    discarded: int = 0
    distractor_only: int = 0
    no_text: int = 0
    missing: str | None = None

    @property
    def note(self) -> str:
        """Where answerability came from, with counts (:func:`answerability_note`).

        Led by the instances left out for want of passage text, when any.
        """
        said = answerability_note(
            self.answerability_counts, self.eta, self.discarded, self.distractor_only
        )
        if not self.missing:
            return said
        return f"Missing: {self.missing}." + ("" if said == "No instances." else f" {said}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN -> None) of the aggregate and the per-context rows."""
        return {
            "answerability_source": self.answerability_source,
            "answerability_counts": dict(self.answerability_counts),
            "answerability_note": self.note,
            "eta": self.eta,
            "alpha": ALPHA,
            "w": W,
            "k_required": self.k_required,
            "discarded": self.discarded,
            "distractor_only": self.distractor_only,
            "n_no_text": self.no_text,
            "missing": self.missing,
            "aggregate": _records(self.aggregate),
            "per_context": _records(self.per_context),
        }


def _eta_text(eta: float) -> str:
    return f"{eta:g}"


def answerability_note(
    counts: Mapping[str, int], eta: float = ETA, discarded: int = 0, distractor_only: int = 0
) -> str:
    """One line saying whose answerability CRUX used, with instance counts.

    Derived-from-gold answerability is said first and loudly: it is binary (each gold passage
    answers a sub-question of its own), so the threshold eta does not apply to it.

    Args:
        counts: source (``gold`` / ``judge:<name>``) -> instances.
        eta: the threshold judged ratings were cut at.
        discarded: judged sub-questions left out because no gold passage answers them.
        distractor_only: how many of those a non-gold passage answers.
    """
    total = sum(counts.values())
    if not total:
        return "No instances."
    gold = int(counts.get("gold", 0))
    judged = {k.removeprefix("judge:"): v for k, v in counts.items() if k != "gold" and v}
    every = "the one instance" if total == 1 else f"all {total} instances"
    parts = []
    if gold:
        whom = every if gold == total else f"{gold} of {total} instances"
        parts.append(
            f"Answerability derived from gold evidence, not judged, for {whom}: each gold "
            f"passage answers a sub-question of its own (binary, so eta = {_eta_text(eta)} "
            f"does not apply to {'them' if gold > 1 else 'it'})"
        )
    if judged:
        n = sum(judged.values())
        who = ", ".join(judged)
        lead = "judged" if gold else "Answerability judged"
        scope = f"the other {n}" if gold else every
        parts.append(f"{lead} by {who} (rating >= eta = {_eta_text(eta)}) for {scope}")
    out = "; ".join(parts) + "."
    if discarded:
        some = "1 judged sub-question" if discarded == 1 else f"{discarded} judged sub-questions"
        out += (
            f" {some} that no gold passage answers {'is' if discarded == 1 else 'are'} left "
            f"out, as the paper filters them ({distractor_only} answered only by a non-gold "
            "passage)."
        )
    return out


def _source_counts_text(gold: int, judged: int) -> str:
    total = gold + judged
    if not gold:
        return f"judged {judged}/{total}"
    if not judged:
        return f"gold-derived {gold}/{total} (not judged)"
    return f"judged {judged}/{total}, gold-derived {gold}/{total}"


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.to_dict("records"):
        clean = {}
        for k, v in row.items():
            if hasattr(v, "item") and not isinstance(v, str | list | tuple | np.ndarray):
                v = v.item()
            if isinstance(v, float) and math.isnan(v):
                v = None
            clean[str(k)] = v
        out.append(clean)
    return out


def _check_ks(ks: Iterable[Any], allow_empty: bool = False) -> list[int]:
    out = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        out.append(int(k))
    if not out and not allow_empty:
        raise ValueError("no k given")
    return sorted(set(out))


#: Scores of a k = |Z*| = 0 context (no required subset): unscored, counted in n_unscored.
_NO_CONTEXT = {
    "coverage": math.nan,
    "alpha_ndcg": math.nan,
    "density": math.nan,
    "tokens": 0,
    "coverage_ref": math.nan,
    "tokens_ref": 0,
}


def crux_evaluate(
    instances: Sequence[Instance],
    retrievers: Sequence[str],
    ks: Sequence[int],
    answerability: Mapping[str, Answerability] | None = None,
    *,
    k_required: bool = False,
    eta: float = ETA,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    alpha: float = ALPHA,
    w: float = W,
    n_resamples: int = 5000,
    seed: int = 42,
    embedding_cache: Any = None,
) -> CruxResult:
    """Cov, alpha-nDCG and density of every (instance, retriever, k) retrieval context.

    Args:
        instances: the instances.
        retrievers: registered retriever names (e.g. ``lexical``, ``dense``, ``oracle``).
        ks: context sizes (top-k chunks); may be empty when ``k_required``.
        answerability: instance id -> stored judgments; an instance without an entry gets
            answerability derived from gold evidence.
        k_required: also score the context of ``k = |Z*|`` chunks per instance (seed 002
            §4.2), labelled ``k = "|Z*|"``.
        eta: the threshold the judgments in ``answerability`` were cut at (recorded; the
            cut happens in :func:`answerability_from_ratings`).
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        alpha: alpha-nDCG redundancy discount.
        w: density exponent.
        n_resamples: bootstrap resamples for the CIs.
        seed: bootstrap seed.
        embedding_cache: passed to embedding retrievers.

    Raises:
        ValueError: unknown retriever, bad k or window, eta outside (0, 5], or no context
            size at all.
    """
    k_list = _check_ks(ks, allow_empty=k_required)
    eta = check_eta(eta)
    rets = list(dict.fromkeys(retrievers))
    if not rets:
        raise ValueError("no retriever given")
    judged = dict(answerability or {})
    # no passage text (imported results): nothing to rank, counted instead of scored 1.0
    instances, no_text, missing = rankable(instances)
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    dropped = [0, 0]  # discarded sub-questions, those a non-gold passage answers
    labels: list[int | str] = [*k_list, *([K_REQUIRED] if k_required else [])]
    for inst in instances:
        ans = judged.get(inst.instance_id) or answerability_from_gold(inst)
        counts[ans.source] = counts.get(ans.source, 0) + 1
        dropped[0] += len(ans.discarded)
        dropped[1] += len(ans.distractor_only)
        chunks = chunk_instance(inst, chunk_size, overlap)
        pool, ntok = context_pool(chunks, ans), passage_tokens(inst)
        for ret in rets:
            ranked = rank_chunks(
                inst, ret, chunk_size, overlap, chunks=chunks, embedding_cache=embedding_cache
            )
            for label in labels:
                size = len(ans.required) if label == K_REQUIRED else int(label)
                top = [rc.chunk for rc in ranked[:size]]
                if size:
                    scores = context_scores(
                        top, chunks, ans, inst, alpha=alpha, w=w, pool=pool, n_tokens=ntok
                    )
                else:  # k = |Z*| = 0: no required subset, no context to score
                    scores = {**_NO_CONTEXT, "n_answerable": len(ans.answerable), "answered": []}
                rows.append(
                    {
                        "instance_id": inst.instance_id,
                        "retriever": ret,
                        "k": label,
                        "k_size": size,
                        "answerability_source": ans.source,
                        **scores,
                        "chunk_ids": [c.chunk_id for c in top],
                    }
                )
    per = pd.DataFrame(rows)
    sources = set(counts)
    source = sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")
    agg = _aggregate(per, rets, labels, n_resamples, seed)
    agg["n_no_text"], agg["missing"] = no_text, missing
    if missing and not instances:  # nothing ranked: no answerability to name
        agg["answerability"] = "none"
    return CruxResult(
        per,
        agg,
        source,
        eta=eta,
        answerability_counts=counts,
        k_required=k_required,
        discarded=dropped[0],
        distractor_only=dropped[1],
        no_text=no_text,
        missing=missing,
    )


def _aggregate(
    per: pd.DataFrame, rets: Sequence[str], ks: Sequence[int | str], n_resamples: int, seed: int
) -> pd.DataFrame:
    out = []
    for ret in rets:
        for k in ks:
            sub = per[(per["retriever"] == ret) & (per["k"] == k)] if len(per) else per
            scored = sub[sub["coverage"].notna()] if len(sub) else sub
            if len(scored):  # a canonical unit order: the CIs do not depend on the input's
                scored = scored.sort_values("instance_id", kind="stable")
            src = list(sub["answerability_source"]) if len(sub) else []
            n_gold = sum(s == "gold" for s in src)
            row: dict[str, Any] = {
                "retriever": ret,
                "k": k,
                "k_mean": float(sub["k_size"].mean()) if len(sub) else math.nan,
                "n": len(scored),
                "n_unscored": len(sub) - len(scored),
                "judged": len(src) - n_gold,
                "gold_derived": n_gold,
                "answerability": _source_counts_text(n_gold, len(src) - n_gold),
                "answerability_source": ",".join(sorted(set(src))),
            }
            vals = scored[list(METRICS)].to_numpy(dtype=float) if len(scored) else np.empty((0, 3))
            boot = bootstrap_means(vals, n_resamples, seed)
            for j, m in enumerate(METRICS):
                col = vals[:, j]
                fin = col[np.isfinite(col)]
                row[m] = float(fin.mean()) if fin.size else math.nan
                b = boot[:, j][np.isfinite(boot[:, j])]
                lo, hi = np.percentile(b, [2.5, 97.5]) if b.size else (math.nan, math.nan)
                row[f"{m}_ci_low"], row[f"{m}_ci_high"] = float(lo), float(hi)
            row["tokens"] = float(scored["tokens"].mean()) if len(scored) else math.nan
            out.append(row)
    return pd.DataFrame(out)


def crux_report(
    store: Store,
    dataset: str,
    retrievers: Sequence[str] = ("lexical",),
    ks: Sequence[int] = (3,),
    *,
    judge: str | None = None,
    eta: float = ETA,
    k_required: bool = False,
    instance_ids: Iterable[str] | None = None,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    n_resamples: int = 5000,
    seed: int = 42,
) -> CruxResult:
    """CRUX over a stored dataset: stored ratings where present, else derived from gold.

    Args:
        store: a :class:`core.store.Store`.
        dataset: the dataset name.
        retrievers: retriever names.
        ks: context sizes (may be empty when ``k_required``).
        judge: which judge's ratings to use; None uses the only judge present (ValueError
            naming them when there are several).
        eta: answerability threshold in (0, 5] for the judged ratings (default 3; seed 002
            §4.4 also reports 5). No effect on answerability derived from gold.
        k_required: also score contexts of ``k = |Z*|`` chunks per instance.
        instance_ids: only these instances (e.g. after the page's metadata filters).
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.

    Raises:
        ValueError: unknown dataset, judge, retriever, a bad k or eta.
    """
    _check_ks(ks, allow_empty=k_required)
    eta = check_eta(eta)
    if dataset not in store.dataset_names():
        raise ValueError(
            f"unknown dataset {dataset!r}; stored: {', '.join(store.dataset_names()) or 'none'}"
        )
    instances = store.load_instances(dataset)
    if instance_ids is not None:
        wanted = set(instance_ids)
        instances = [i for i in instances if i.instance_id in wanted]
    sq, ratings = store.crux_judgments(dataset)
    judged: dict[str, Answerability] = {}
    if len(ratings):
        judges = sorted(set(ratings["judge"]))
        if judge is None and len(judges) > 1:
            raise ValueError(
                f"dataset {dataset!r} has ratings from several judges; choose one of: "
                f"{', '.join(judges)}"
            )
        use = judge if judge is not None else judges[0]
        if use not in judges:
            raise ValueError(f"no ratings by judge {use!r}; judges: {', '.join(judges)}")
        ratings = ratings[ratings["judge"] == use]
        by_inst = {i.instance_id: i for i in instances}
        sq_by = sq.groupby("instance_id")["sq_id"].apply(list).to_dict() if len(sq) else {}
        for iid, grp in ratings.groupby("instance_id", sort=False):
            if iid not in by_inst:
                continue
            rows = zip(grp["passage_id"], grp["sq_id"], grp["rating"], strict=True)
            judged[iid] = answerability_from_ratings(
                by_inst[iid], sq_by.get(iid, []), rows, use, eta
            )
    elif judge is not None:
        raise ValueError(f"dataset {dataset!r} has no stored ratings (judge {judge!r})")
    return crux_evaluate(
        instances,
        retrievers,
        ks,
        judged,
        k_required=k_required,
        eta=eta,
        chunk_size=chunk_size,
        overlap=overlap,
        n_resamples=n_resamples,
        seed=seed,
    )


# ------------------------------------------------------------------------ optional judge
