"""Fan-in degradation of answer quality and evidence packs (AuthTrace, seed 003; SPEC §9).

Fan-in of an instance = number of distinct ``doc_id`` among its gold passages (seed 003 eq. 1),
bucketed ``single`` (1), ``low`` (2-3), ``high`` (>= 4); instances without gold evidence have
fan-in 0 and no bucket (they are left out of every aggregate and counted).

A *system* is one (run, condition) of the four plain conditions. Its evidence pack per
instance is:

- ``retrieved`` / ``oracle``: the passages shown (the prediction's ``input_passage_ids``);
- ``full_context``: the passages the model cited (``cited_ids``) -- showing everything is no
  selection, so the citations are the pack;
- ``no_evidence``: no pack (ER / EP are NaN; AC is still reported, the closed-book baseline);
- a retrieved / oracle prediction whose shown passages are not stored (an imported release
  keeps no ids of what its retrieved calls showed) has no pack either: ER / EP are NaN and
  counted per cell in ``no_pack`` -- never measured as 0.

Metrics per instance (seed 003 §3), over passage-id *sets* -- a pack listing an id twice
(e.g. two overlapping chunks of one passage, or a CUE-R duplicate) counts that id once in both
numerator and denominator:

- ``ER = |pack ∩ gold| / |gold|``;
- ``EP = |pack ∩ gold| / |pack|``, 0 for an empty pack (as citation precision, SPEC §6.3);
- ``AC = 100 x score`` with score = relaxed token F1 by default (any answer score of
  :mod:`core.scoring`), so 0-100. A parse error (the model answered, unparseably) scores 0 and
  stays in every denominator. A failed call (``error`` set) is not an answer, and a row with a
  NaN score is unscored: both are *missing* -- AC, ER and EP NaN (a failed call has no pack
  of its own either), left out of every ``n`` and counted in ``missing`` beside it.

Aggregates (every one derived from the per-instance rows, which are returned too):

- per system and exact fan-in / bucket: mean AC, ER, EP with bootstrap CIs (SPEC §6.6:
  5,000 resamples, seed 42, instances resampled within the cell), drawn from per-cell value
  summaries (:mod:`core.fanin.stats`: exact multinomial counts, or stratified above 8 values);
  the store path aggregates in DuckDB (:func:`fanin_store`), with no per-row frame;
- relative degradation ``(AC_high - AC_single) / AC_single``; the oracle condition of the same
  run is the synthesis-difficulty baseline and ``construction_loss_pp = 100 x (rel_system -
  rel_oracle)`` (seed 003 Table 8, "Oracle-norm."; negative = loss beyond synthesis);
- Pearson r of ER-AC and EP-AC with a bootstrap CI over points and the least-squares line
  (seed 003 Fig. 3, App. G), by default exactly as Figure 3 reports it: one point per
  (system, fan-in bucket) -- "method-fan-in pairs" over the three settings of Table 4 --
  of the evidence-selection systems, i.e. the ``retrieved`` condition of each run. Left out by
  default, each with an option to include it: the ``oracle`` (its pack *is* the gold
  evidence, so ER = EP = 1 by construction and its points only stretch r; Table 4 gives the
  oracle no ER / EP) and ``full_context`` (the paper's long-context baseline "does not
  produce a compact predicted evidence pack for ER/EP evaluation", Table 4 and §5, so Figure
  3 has no such points; here its pack would be its citations). ``no_evidence`` has no pack.
  Recomputing r from Table 4's 15 (system, bucket) rows gives the published r = 0.96 (ER-AC)
  and -0.40 (EP-AC; printed -0.39), which ``tests/test_fanin.py`` pins. Points per exact
  fan-in are a named option (``points="fan_in"``);
- failure attribution: among failures (AC < 33), the share with ER < 50% (seed 003 §6.1);
- Jaccard overlap of failure sets between two systems over their common instances (§6.3);
- crossover fan-in: the exact fan-in at which the leader (higher AC) of two systems changes
  (§6.4, Table 5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from core.fanin.cells import BUCKET_FANS, METRICS, CellStats, ci95
from core.fanin.measures import (
    BUCKETS,
    FAILURE_AC,
    LOW_ER,
    PACK_CONDITIONS,
    PER_COLS,
    PLAIN,
    answer_correctness,
    crossover,
    evidence_pack,
    evidence_precision,
    evidence_recall,
    fan_in,
    fan_in_bucket,
    jaccard,
    pearson,
    per_instance,
    relative_degradation,
)
from core.fanin.stats import (
    FaninSummaries,
    StoreSummaries,
    summaries_from_rows,
)
from core.jsonable import json_plain
from core.scoring.rows import ANSWER_SCORES
from core.store import Store
from core.store.fanin_rows import SCALE_ROWS, fanin_rows

__all__ = [
    "BUCKETS",
    "FAILURE_AC",
    "LOW_ER",
    "PACK_CONDITIONS",
    "R_CONDITIONS",
    "R_LEFT_OUT",
    "FaninResult",
    "answer_correctness",
    "correlation_note",
    "crossover",
    "evidence_pack",
    "evidence_precision",
    "evidence_recall",
    "fan_in",
    "fan_in_bucket",
    "fanin_analysis",
    "fanin_from_summaries",
    "fanin_report",
    "fanin_store",
    "jaccard",
    "pearson",
    "per_instance",
    "relative_degradation",
]


# ------------------------------------------------------------------------ per instance


# ------------------------------------------------------------------------ statistics


# ------------------------------------------------------------------------ aggregates


@dataclass(frozen=True, slots=True)
class FaninResult:
    """Per-instance rows and every fan-in aggregate.

    Attributes:
        per_instance: see :func:`per_instance`.
        by_fan_in: per (system, exact fan-in): ``n`` (answered predictions), ``missing``
            (failed calls, left out), ``no_pack`` (answered predictions without an evidence
            pack: ER / EP left out of their means; see the module docstring) and
            ``ac``/``er``/``ep`` means with ``_ci_low``/``_ci_high`` (AC on 0-100; ER and EP
            as fractions in [0, 1]).
        by_bucket: the same per (system, bucket), plus ``bucket == "all"``.
        degradation: per system: ``ac_single``, ``ac_high`` (with ``n_single``,
            ``missing_single``, ``n_high``, ``missing_high``), ``rel_degradation`` (with a
            bootstrap CI), ``oracle_rel_degradation``, ``construction_loss_pp``.
        correlation: ``er_ac`` / ``ep_ac`` (:func:`pearson`), ``points`` (the points used:
            system, run, condition, bucket or fan_in, n, ac, er, ep), ``points_level``,
            ``systems``, ``levels``, ``include_oracle``, ``include_full_context``,
            ``excluded`` (condition -> points left out) and ``n_empty`` (points of an
            included system without a value); :func:`correlation_note` says it in a line.
        attribution: per system: ``n``, ``missing``, ``n_failures``, ``n_low_er``,
            ``share``.
        overlap: per system pair: ``jaccard`` of failure sets over common instances,
            ``n_common`` (instances both answered), ``missing`` (instances both hold where
            either call failed), and the crossover fields of :func:`crossover`.
        n_no_gold: predictions left out because their instance has no gold evidence.
        score_field: the answer score AC is built from (the proxy's, also under ``judged``).
        source: ``proxy`` (AC from the score field, ER / EP over passage ids) or ``judged``
            (AuthTrace's judges: :func:`core.fanin.judged.fanin_from_judged`).
    """

    per_instance: pd.DataFrame
    by_fan_in: pd.DataFrame
    by_bucket: pd.DataFrame
    degradation: pd.DataFrame
    correlation: dict[str, Any]
    attribution: pd.DataFrame
    overlap: pd.DataFrame
    n_no_gold: int
    score_field: str
    source: str = "proxy"

    def to_dict(self, with_instances: bool = True) -> dict[str, Any]:
        """JSON-ready dict (NaN -> None)."""
        out = {
            "score_field": self.score_field,
            "source": self.source,
            "n_no_gold": self.n_no_gold,
            "by_bucket": _records(self.by_bucket),
            "by_fan_in": _records(self.by_fan_in),
            "degradation": _records(self.degradation),
            "correlation": json_plain(self.correlation),
            "attribution": _records(self.attribution),
            "overlap": _records(self.overlap),
        }
        if with_instances:
            out["per_instance"] = _records(self.per_instance)
        return out


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [json_plain(r) for r in df.to_dict("records")]


_KEYS = ("system", "run", "model", "dataset", "condition")
_STAT_COLS = [f"{m}{s}" for m in METRICS for s in ("", "_ci_low", "_ci_high")]


def _by(cells: CellStats, col: str) -> pd.DataFrame:
    rows = []
    for sys, head in cells.heads.items():
        fans = cells.fans(sys)
        if col == "fan_in":
            rows += [{**head, "fan_in": f, **cells.row(sys, [f])} for f in fans]
            continue
        for bucket in BUCKETS:
            chosen = [f for f in fans if BUCKET_FANS[bucket](f)]
            if chosen:
                rows.append({**head, "bucket": bucket, **cells.row(sys, chosen)})
        rows.append({**head, "bucket": "all", **cells.row(sys, fans)})
    return pd.DataFrame(
        rows, columns=[*_KEYS, col, "n", "missing", "no_pack", *_STAT_COLS, "ci_method"]
    )


def _degradation(cells: CellStats) -> pd.DataFrame:
    rows = []
    oracle_rel: dict[Any, float] = {}
    for sys, head in cells.heads.items():
        fans = cells.fans(sys)
        single = [f for f in fans if f == 1]
        high = [f for f in fans if f >= 4]
        counts: dict[str, int] = {}
        for b, chosen in (("single", single), ("high", high)):
            c = cells.counts(sys, chosen)
            counts[f"n_{b}"] = c["n_rows"] - c["n_missing"]
            counts[f"missing_{b}"] = c["n_missing"]
        ac_s, bs = cells.stat(sys, "ac", single, cells.seed)
        ac_h, bh = cells.stat(sys, "ac", high, cells.seed + 1)
        rel = relative_degradation(ac_s, ac_h)
        lo = hi = math.nan
        if np.isfinite(bs).any() and np.isfinite(bh).any():
            with np.errstate(invalid="ignore", divide="ignore"):
                lo, hi = ci95((bh - bs) / bs)
        if head["condition"] == "oracle":
            oracle_rel[head["run"]] = rel
        rows.append(
            {
                **head,
                "ac_single": ac_s,
                "ac_high": ac_h,
                **counts,
                "rel_degradation": rel,
                "rel_ci_low": lo,
                "rel_ci_high": hi,
            }
        )
    for row in rows:
        base = oracle_rel.get(row["run"], math.nan)
        row["oracle_rel_degradation"] = base
        if row["condition"] == "oracle" or math.isnan(base) or math.isnan(row["rel_degradation"]):
            row["construction_loss_pp"] = math.nan
        else:
            row["construction_loss_pp"] = 100.0 * (row["rel_degradation"] - base)
    cols = [
        *_KEYS,
        "ac_single",
        "ac_high",
        "n_single",
        "missing_single",
        "n_high",
        "missing_high",
        "rel_degradation",
        "rel_ci_low",
        "rel_ci_high",
        "oracle_rel_degradation",
        "construction_loss_pp",
    ]
    return pd.DataFrame(rows, columns=cols)


def _attribution(cells: CellStats) -> pd.DataFrame:
    rows = []
    for sys, head in cells.heads.items():
        c = cells.counts(sys, cells.fans(sys))
        share = c["n_fail_low"] / c["n_fail_packed"] if c["n_fail_packed"] else math.nan
        rows.append(
            {
                **head,
                "n": c["n_rows"] - c["n_missing"],
                "missing": c["n_missing"],
                "n_failures": c["n_fail"],
                "n_low_er": c["n_fail_low"],
                "share": share,
            }
        )
    return pd.DataFrame(rows, columns=[*_KEYS, "n", "missing", "n_failures", "n_low_er", "share"])


#: Conditions whose points Pearson r always uses: the evidence-selection systems.
R_CONDITIONS = ("retrieved",)
#: Why a condition's points are left out of Pearson r by default (seed 003 Fig. 3, Table 4).
R_LEFT_OUT = {
    "oracle": "its pack is the gold evidence: ER = EP = 1 by construction",
    "full_context": "cited passages, not a selected evidence pack (seed 003 Table 4 gives the "
    "long-context baseline no ER / EP)",
    "no_evidence": "no evidence pack",
}


def _correlation(
    cells: pd.DataFrame,
    level: str,
    n_resamples: int,
    seed: int,
    include_oracle: bool,
    include_full_context: bool,
) -> dict[str, Any]:
    """Pearson r of ER-AC and EP-AC over (system, ``level``) cells, with what was used."""
    if level == "bucket":
        cells = cells[cells["bucket"] != "all"]
    use = set(R_CONDITIONS)
    use |= {"oracle"} if include_oracle else set()
    use |= {"full_context"} if include_full_context else set()
    vals = cells[["ac", "er", "ep"]].to_numpy(dtype=float)
    finite = np.isfinite(vals).all(axis=1) if len(cells) else np.zeros(0, dtype=bool)
    chosen = cells["condition"].isin(sorted(use)).to_numpy()
    pts = cells[chosen & finite]
    # answered, but no pack: ER / EP not measured (the shown passages are not stored)
    no_pack = np.isfinite(vals[:, 0]) & ~np.isfinite(vals[:, 1]) if len(cells) else finite
    excluded = {
        cond: int((cells["condition"] == cond).sum())
        for cond in R_LEFT_OUT
        if cond not in use and (cells["condition"] == cond).any()
    }
    order = list(BUCKETS) if level == "bucket" else sorted(int(v) for v in set(pts[level]))
    present = set(pts[level])
    return {
        "points_level": level,
        "include_oracle": bool(include_oracle),
        "include_full_context": bool(include_full_context),
        "er_ac": pearson(pts["er"], pts["ac"], n_resamples, seed),
        "ep_ac": pearson(pts["ep"], pts["ac"], n_resamples, seed),
        "points": [
            {
                "system": s,
                "run": r,
                "condition": c,
                level: lv,
                "n": int(n),
                "ac": a,
                "er": e,
                "ep": p,
            }
            for s, r, c, lv, n, a, e, p in zip(
                pts["system"],
                pts["run"],
                pts["condition"],
                pts[level],
                pts["n"],
                pts["ac"],
                pts["er"],
                pts["ep"],
                strict=True,
            )
        ],
        "systems": list(dict.fromkeys(pts["system"])),
        "levels": [lv for lv in order if lv in present],
        "excluded": excluded,
        "n_empty": int((chosen & ~finite & ~no_pack).sum()),
        "n_no_pack": int((chosen & ~finite & no_pack).sum()),
    }


def correlation_note(corr: dict[str, Any]) -> str:
    """One line saying which points Pearson r used: count, systems, levels, what was left out.

    Args:
        corr: :attr:`FaninResult.correlation` (or its JSON form).
    """
    level = corr["points_level"]
    what = "bucket" if level == "bucket" else "exact fan-in"
    n = corr["er_ac"]["n"]
    systems = corr["systems"]
    levels = ", ".join(str(v) for v in corr["levels"]) or "none"
    text = (
        f"Pearson r over {n} (system, {what}) points: {len(systems)} system"
        f"{'' if len(systems) == 1 else 's'} ({', '.join(systems) or 'none'}) x "
        f"{'buckets' if level == 'bucket' else 'fan-in'} {levels}"
    )
    inc = [
        c
        for c, on in (
            ("oracle", corr.get("include_oracle")),
            ("full_context", corr.get("include_full_context")),
        )
        if on
    ]
    if inc:
        text += "; included on request: " + ", ".join(f"{c} ({R_LEFT_OUT[c]})" for c in inc)
    left = corr.get("excluded") or {}
    if left:
        text += "; left out: " + ", ".join(
            f"{c} ({k} point{'' if k == 1 else 's'}: {R_LEFT_OUT[c]})" for c, k in left.items()
        )
    if corr.get("n_empty"):
        text += f"; {corr['n_empty']} point(s) without a value (every call failed) skipped"
    if corr.get("n_no_pack"):
        text += (
            f"; {corr['n_no_pack']} point(s) without ER / EP skipped (the store does not "
            "say which passages those calls showed)"
        )
    return text + "."


def _overlap(cells: CellStats, by_fan_in: pd.DataFrame) -> pd.DataFrame:
    names = {sys: head["system"] for sys, head in cells.heads.items()}
    curves = {
        s: dict(zip(g["fan_in"].astype(int), g["ac"], strict=True))
        for s, g in by_fan_in.groupby("system", sort=False)
    }
    counts = {(int(r["sys_a"]), int(r["sys_b"])): r for r in cells.summ.pairs.to_dict("records")}
    rows = []
    for a, b in combinations(list(names), 2):
        r = counts.get((min(a, b), max(a, b)))
        swap = a > b
        n_common = int(r["n_common"]) if r else 0
        fa = int(r["n_fail_b" if swap else "n_fail_a"]) if r else 0
        fb = int(r["n_fail_a" if swap else "n_fail_b"]) if r else 0
        both = int(r["n_fail_both"]) if r else 0
        union = fa + fb - both
        cross = crossover(curves.get(names[a], {}), curves.get(names[b], {}))
        rows.append(
            {
                "system_a": names[a],
                "system_b": names[b],
                "n_common": n_common,
                "missing": (int(r["n_held"]) if r else 0) - n_common,
                "n_fail_a": fa,
                "n_fail_b": fb,
                "jaccard": both / union if union else math.nan,
                "leader_first": cross["leader_first"],
                "crossover_fan_in": cross["crossover_fan_in"],
                "crossovers": cross["crossovers"],
            }
        )
    cols = [
        "system_a",
        "system_b",
        "n_common",
        "missing",
        "n_fail_a",
        "n_fail_b",
        "jaccard",
        "leader_first",
        "crossover_fan_in",
        "crossovers",
    ]
    out = pd.DataFrame(rows, columns=cols)
    # Object dtype keeps "no crossover" as None rather than NaN (JSON null, `is None`).
    out["crossover_fan_in"] = pd.Series([r["crossover_fan_in"] for r in rows], dtype=object)
    return out


def _check_options(score_field: str, points: str) -> None:
    if score_field not in ANSWER_SCORES:
        raise ValueError(
            f"unknown score field {score_field!r}; allowed: {', '.join(ANSWER_SCORES)}"
        )
    if points not in ("bucket", "fan_in"):
        raise ValueError(f"points must be 'bucket' or 'fan_in', got {points!r}")


def fanin_from_summaries(
    summ: FaninSummaries,
    score_field: str = "f1_relaxed",
    *,
    points: str = "bucket",
    include_oracle: bool = False,
    include_full_context: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
    per_instance_rows: pd.DataFrame | None = None,
) -> FaninResult:
    """Every fan-in aggregate from cell summaries (:mod:`core.fanin.stats`).

    Args:
        summ: the summaries (from the store or from per-instance rows).
        score_field, points, include_oracle, include_full_context, n_resamples, seed: as
            :func:`fanin_analysis`.
        per_instance_rows: the per-instance rows to keep in the result (None: an empty frame
            with the columns; the store path does not build them).

    Raises:
        ValueError: unknown score field or ``points`` value.
    """
    _check_options(score_field, points)
    cells = CellStats(summ, n_resamples, seed)
    cells.prefetch_tables()  # the tables' bootstraps, on two threads
    by_fan_in = _by(cells, "fan_in")
    by_bucket = _by(cells, "bucket")
    corr_src = by_bucket if points == "bucket" else by_fan_in
    rows = per_instance_rows if per_instance_rows is not None else pd.DataFrame(columns=PER_COLS)
    return FaninResult(
        per_instance=rows,
        by_fan_in=by_fan_in,
        by_bucket=by_bucket,
        degradation=_degradation(cells),
        correlation=_correlation(
            corr_src, points, n_resamples, seed, include_oracle, include_full_context
        ),
        attribution=_attribution(cells),
        overlap=_overlap(cells, by_fan_in),
        n_no_gold=summ.n_no_gold,
        score_field=score_field,
    )


def fanin_analysis(
    frame: pd.DataFrame,
    score_field: str = "f1_relaxed",
    *,
    points: str = "bucket",
    include_oracle: bool = False,
    include_full_context: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
) -> FaninResult:
    """Every fan-in view of the predictions in ``frame`` (see the module docstring).

    The per-instance rows (:func:`per_instance`) are summarized per (system, fan-in) cell
    (:func:`core.fanin.stats.summaries_from_rows`) and every aggregate is computed from the
    summaries, as the store path (:func:`fanin_store`) does.

    Args:
        frame: a :meth:`core.store.Store.fanin_frame` frame (or the same columns).
        score_field: answer score giving AC (default relaxed F1).
        points: Pearson points per (system, ``bucket``) as seed 003 Fig. 3 (default) or per
            (system, exact ``fan_in``).
        include_oracle: add the oracle's points to Pearson r (ER = EP = 1 by construction).
        include_full_context: add full-context points (pack = cited passages) to Pearson r.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.

    Raises:
        ValueError: unknown score field or ``points`` value, missing columns.
    """
    _check_options(score_field, points)
    rows = per_instance(frame, score_field)
    n_no_gold = int((rows["fan_in"] == 0).sum())
    per = rows[rows["fan_in"] > 0].reset_index(drop=True)
    return fanin_from_summaries(
        summaries_from_rows(per, n_no_gold),
        score_field,
        points=points,
        include_oracle=include_oracle,
        include_full_context=include_full_context,
        n_resamples=n_resamples,
        seed=seed,
        per_instance_rows=rows,
    )


def fanin_store(
    store: Store,
    run_ids: Sequence[str],
    score_field: str = "f1_relaxed",
    *,
    allowed: pd.DataFrame | None = None,
    pair: bool = False,
    scale: bool = False,
    **options: Any,
) -> FaninResult:
    """:func:`fanin_analysis` of stored runs from one DuckDB query (no per-row frame).

    Args:
        store: the store.
        run_ids: run ids.
        score_field: as :func:`fanin_analysis`.
        allowed: ``dataset, instance_id`` pairs to keep (the selection's filters; None: all).
        pair: several runs of one dataset on their common instances.
        scale: read the rows as at study scale (:func:`core.store.fanin_rows.fanin_rows`:
            the same rows, from three cheaper reads).
        options: ``points``, ``include_oracle``, ``include_full_context``, ``n_resamples``,
            ``seed`` of :func:`fanin_analysis`.

    Raises:
        ValueError: unknown score field or option, or no plain-condition predictions.
    """
    _check_options(score_field, options.get("points", "bucket"))
    raw = fanin_rows(store, list(run_ids), allowed=allowed, pair=pair, scale=scale)
    if not len(raw["rows"]["fan_in"]):
        raise ValueError(
            f"runs {', '.join(run_ids)} hold no predictions of the plain conditions "
            f"({', '.join(PLAIN)})"
        )
    summ = StoreSummaries(raw, [score_field])[score_field]
    return fanin_from_summaries(summ, score_field, **options)


def fanin_report(
    store: Store,
    runs: Sequence[str],
    score_field: str = "f1_relaxed",
    *,
    points: str = "bucket",
    include_oracle: bool = False,
    include_full_context: bool = False,
    n_resamples: int = 5000,
    seed: int = 42,
    instances: bool = False,
) -> FaninResult:
    """:func:`fanin_analysis` of stored runs (aggregates from :func:`fanin_store`).

    Above :data:`core.store.fanin_rows.SCALE_ROWS` predictions the rows are read as at study
    scale (the same rows, from three cheaper reads).

    Args:
        store: the store holding the runs.
        runs: run ids, or dataset names standing for their runs.
        score_field, points, include_oracle, include_full_context, n_resamples, seed: as
            :func:`fanin_analysis`.
        instances: also build the per-instance rows (a Python pass over every prediction).

    Raises:
        ValueError: no runs given, or the runs hold no plain-condition predictions.
        StoreError: a run or dataset that is not stored.
    """
    ids: list[str] = []
    for sel in runs:
        for rid in store.resolve_runs(sel):
            if rid not in ids:
                ids.append(rid)
    if not ids:
        raise ValueError("no runs given")
    table = store.runs_frame(live=False)
    n = int(table.loc[table["run_id"].isin(ids), "n_predictions"].sum())
    res = fanin_store(
        store,
        ids,
        score_field,
        scale=n > SCALE_ROWS,
        points=points,
        include_oracle=include_oracle,
        include_full_context=include_full_context,
        n_resamples=n_resamples,
        seed=seed,
    )
    if not instances:
        return res
    rows = per_instance(store.fanin_frame(ids), score_field)
    return replace(res, per_instance=rows)
