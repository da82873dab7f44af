"""Fan-in and retrieval-context coverage reports (SPEC §9, issue 8).

``report fanin --runs R1,R2`` prints AC / ER / EP per fan-in bucket, relative degradation,
construction loss, ER-AC / EP-AC correlation (over (system, bucket) points of the retrieved
condition as seed 003 Fig. 3; ``--points fan_in``, ``--r-include-oracle`` and
``--r-include-full-context`` change that, and a line lists the points used), failure
attribution and system-pair overlap; ``report crux --dataset NAME --retrievers lexical,dense
--k 3,5`` prints Cov, alpha-nDCG and density per retriever and k (``--eta 5`` for the stricter
threshold, ``--k-required`` adds k = |Z*|) and says whose answerability it used, with counts;
when ``crux-coverage`` judge runs exist for the dataset it adds the answers' Cov(y) / Den(y)
per judged pipeline and Kendall tau-b in the layout of seed 002 Table 3
(:mod:`core.crux.answers`). ``report fanin`` adds judged AC / ER / EP beside the proxies, with
their Pearson and Spearman correlation and n, when AuthTrace judge runs judged the runs
(:mod:`core.fanin.judged`).
``--json`` prints the full result (per-instance rows included).
In the fan-in report ``n`` counts the answered predictions and ``missing`` the failed calls
left out of every aggregate (a parse error stays in ``n``, scored 0).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.crux.answers import CONTEXT_METRICS, AnswerCoverage, answer_coverage
from core.crux.metrics import crux_report
from core.fanin.judged import (
    JudgedFanin,
    fanin_from_judged,
    fanin_judged,
    judged_rows,
    require_judged,
)
from core.fanin.metrics import correlation_note, fanin_report
from core.figures.fanin import (
    CRUX_K_REQUIRED,
    ETA,
    POINTS,
    R_INCLUDE_FULL_CONTEXT,
    R_INCLUDE_ORACLE,
    SCORE_SOURCE,
)
from core.params import add_argument, add_arguments
from core.retrieval.retrievers import CHUNK_SIZE, OVERLAP, TOP_K, retriever_param

__all__ = ["register"]


#: CRUX context sizes: the top-k knob as a list (``--k 3,5``).
_KS = TOP_K.many((3,), "context sizes, e.g. 3,5")


def _fmt(v: Any, nd: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{nd}f}"


def _print_judged(jf: JudgedFanin) -> None:
    """Judged AC / ER / EP beside the proxies, and their correlation (issue 20)."""
    print(f"\njudged AC / ER / EP (AuthTrace judges: {', '.join(jf.judges)}) beside the proxies")
    print(
        f"{'system':40} {'bucket':7} {'AC':>6} {'AC-j':>6} {'ER':>6} {'ER-j':>6} {'EP':>6} "
        f"{'EP-j':>6} {'j-miss':>6}"
    )
    for r in jf.by_bucket.to_dict("records"):
        pct = {
            m: None if r[m] is None or math.isnan(r[m]) else 100 * r[m]
            for m in ("er", "ep", "er_judged", "ep_judged")
        }
        miss = max(r["ac_judged_missing"], r["er_judged_missing"])
        print(
            f"{r['system']:40} {r['bucket']:7} {_fmt(r['ac']):>6} {_fmt(r['ac_judged']):>6} "
            f"{_fmt(pct['er']):>6} {_fmt(pct['er_judged']):>6} {_fmt(pct['ep']):>6} "
            f"{_fmt(pct['ep_judged']):>6} {miss:>6}"
        )
    for m, c in jf.correlation.items():
        print(
            f"{m.upper()} proxy vs judged: Pearson r = {_fmt(c['pearson'], 3)}, Spearman rho = "
            f"{_fmt(c['spearman'], 3)} over n = {c['n']} instances"
        )
    for line in jf.notes:
        print(f"note: {line}")


def _cmd_fanin(args: argparse.Namespace) -> int:
    runs = split_csv(args.runs)
    if not runs:
        raise ValueError("--runs needs at least one run id (comma-separated)")
    store = open_store(args)
    judges = split_csv(args.judge_runs) or None
    if judges:
        frame = store.runs_frame(live=False)
        kinds = dict(zip(frame["run_id"], frame["kind"], strict=True))
        bad = [j for j in judges if kinds.get(j) != "judge"]
        if bad:
            raise ValueError(f"--judge-runs: not a stored judge run: {', '.join(bad)}")
    options = {
        "points": args.points,
        "include_oracle": args.r_include_oracle,
        "include_full_context": args.r_include_full_context,
        "n_resamples": args.resamples,
    }
    if args.score_source == "judged":
        ids = store_runs(store, runs)
        if not ids:
            raise ValueError("no runs given")
        judged = require_judged(store, ids, args.score_field, judges)
        res = fanin_from_judged(judged_rows(judged.per_instance), args.score_field, **options)
        if args.no_instances or not args.json:
            res = replace(res, per_instance=res.per_instance.iloc[0:0])
    else:
        judged = fanin_judged(store, store_runs(store, runs), args.score_field, judges)
        with_rows = bool(args.json and not args.no_instances)
        res = fanin_report(store, runs, args.score_field, instances=with_rows, **options)
    if args.json:
        out = res.to_dict(with_instances=not args.no_instances)
        if judged is not None:
            out["judged"] = judged.to_dict(with_instances=not args.no_instances)
        print_json(out)
        return 0
    if res.source == "judged":
        print(
            "judged AC (0-3 claim rubric / 3 x 100), judged ER and EP (%) per fan-in bucket "
            "(AuthTrace judges; missing: no judged AC)"
        )
    else:
        print(f"AC (100 x {res.score_field}), ER and EP (%) per fan-in bucket")
    print(f"{'system':40} {'bucket':7} {'n':>4} {'miss':>4} {'AC':>6} {'ER':>6} {'EP':>6}")
    for r in res.by_bucket.to_dict("records"):
        er = None if r["er"] is None or math.isnan(r["er"]) else 100 * r["er"]
        ep = None if r["ep"] is None or math.isnan(r["ep"]) else 100 * r["ep"]
        print(
            f"{r['system']:40} {r['bucket']:7} {r['n']:>4} {r['missing']:>4} {_fmt(r['ac']):>6} "
            f"{_fmt(er):>6} {_fmt(ep):>6}"
        )
    gone = [
        r
        for r in res.by_bucket.to_dict("records")
        if r["bucket"] == "all" and (r.get("no_pack") or 0) > 0
    ]
    if gone:  # answered, but what the call showed is not stored: ER / EP not measured
        print(
            "no evidence pack (ER / EP missing, not 0; the store does not say which passages "
            "those calls showed): "
            + "; ".join(f"{r['system']} {r['no_pack']} of {r['n']}" for r in gone)
        )
    print("\nrelative degradation (AC_high - AC_single) / AC_single and construction loss")
    for r in res.degradation.to_dict("records"):
        rel = r["rel_degradation"]
        print(
            f"{r['system']:40} single {_fmt(r['ac_single']):>6} (n {r['n_single']}, missing "
            f"{r['missing_single']}) high {_fmt(r['ac_high']):>6} (n {r['n_high']}, missing "
            f"{r['missing_high']}) rel {_fmt(None if math.isnan(rel) else 100 * rel):>6}% "
            f"loss {_fmt(r['construction_loss_pp']):>6}pp"
        )
    for key in ("er_ac", "ep_ac"):
        c = res.correlation[key]
        print(
            f"{key.replace('_', '-').upper()} r = {_fmt(c['r'], 3)} "
            f"[{_fmt(c['ci_low'], 3)}, {_fmt(c['ci_high'], 3)}] over {c['n']} points"
        )
    print(correlation_note(res.correlation))
    if judged is not None:
        _print_judged(judged)
    return 0


def store_runs(store: Any, selectors: list[str]) -> list[str]:
    """Run ids of ``--runs``: run ids or dataset names (:func:`core.fanin.metrics.fanin_report`)."""
    out: list[str] = []
    for sel in selectors:
        out.extend(r for r in store.resolve_runs(sel) if r not in out)
    return out


def _print_answer_coverage(ac: AnswerCoverage) -> None:
    """Cov(y) / Den(y) per judged pipeline and the Table 3 Kendall tau (issue 20)."""
    print(
        f"\nanswer coverage Cov(y) / Den(y) (crux-coverage judgments, eta = {ac.eta:g}; "
        f"judges: {', '.join(f'{r} = {m}' for r, m in ac.judges.items())})"
    )
    print(
        f"{'run':24} {'condition':10} {'retriever':10} {'k':>3} {'n':>4} {'unsc':>4} "
        f"{'Cov(y)':>7} {'Den(y)':>7} {'Cov(Z)':>7} {'Den(Z)':>7}"
    )
    for r in ac.pipelines.to_dict("records"):
        print(
            f"{r['run']:24} {r['condition']:10} {r['retriever'] or '-':10} {r['k']!s:>3} "
            f"{r['n']:>4} {r['n_unscored']:>4} {_fmt(r['cov_y'], 3):>7} "
            f"{_fmt(r['den_y'], 3):>7} {_fmt(r['cov_z'], 3):>7} "
            f"{_fmt(r['den_z'], 3):>7}"
        )
    print("Kendall tau-b with Cov(y) (Den(Z): with Den(y)), seed 002 Table 3 layout; (n) points")
    names = {
        "cov_z": "Cov(Z)",
        "alpha_ndcg": "a-nDCG",
        "recall": "Recall",
        "map": "MAP",
        "ndcg": "nDCG",
        "den_z": "Den(Z)",
    }
    print(f"{'k':>9} " + " ".join(f"{names[m]:>12}" for m in CONTEXT_METRICS))
    for r in ac.kendall.to_dict("records"):
        cells = [f"{_fmt(r[m], 3)} ({r[f'{m}_n']})" for m in CONTEXT_METRICS]
        print(f"{r['k']!s:>9} " + " ".join(f"{c:>12}" for c in cells))
    for line in ac.notes:
        print(f"note: {line}")


def _cmd_crux(args: argparse.Namespace) -> int:
    store = open_store(args)
    chosen = split_csv(args.coverage_runs) if args.coverage_runs else None
    answers = answer_coverage(
        store, args.dataset, judge_runs=chosen, judge=args.judge, eta=args.eta
    )
    res = crux_report(
        store,
        args.dataset,
        split_csv(args.retrievers),
        args.k,
        judge=args.judge,
        eta=args.eta,
        k_required=args.k_required,
        chunk_size=args.chunk_size,
        overlap=args.overlap,
        n_resamples=args.resamples,
    )
    if args.json:
        out = res.to_dict()
        if args.no_instances:
            out.pop("per_context")
        if answers is not None:
            out["answer_coverage"] = answers.to_dict(with_answers=not args.no_instances)
        print_json(out)
        return 0
    print(
        f"CRUX coverage of dataset '{args.dataset}' (answerability: {res.answerability_source}, "
        f"eta = {res.eta:g})"
    )
    print(res.note)
    print(f"{'retriever':12} {'k':>5} {'n':>5} {'Cov':>6} {'a-nDCG':>7} {'Den':>6} {'tokens':>7}")
    for r in res.aggregate.to_dict("records"):
        print(
            f"{r['retriever']:12} {r['k']!s:>5} {r['n']:>5} {_fmt(r['coverage'], 3):>6} "
            f"{_fmt(r['alpha_ndcg'], 3):>7} {_fmt(r['density'], 3):>6} {_fmt(r['tokens'], 0):>7}"
        )
    if res.k_required:
        sizes = res.aggregate[res.aggregate["k"] == "|Z*|"]["k_mean"]
        print(
            f"k = |Z*|: the required subset's size per instance (mean {_fmt(sizes.mean())} chunks)"
        )
    if answers is not None:
        _print_answer_coverage(answers)
    return 0


def register(groups: Groups) -> None:
    """Add ``report fanin`` and ``report crux``."""
    fan = groups.report.add_parser(
        "fanin", help="fan-in degradation: AC / ER / EP per fan-in (AuthTrace, SPEC §9)"
    )
    fan.add_argument("--runs", required=True, help="run ids (or dataset names), comma-separated")
    fan.add_argument(
        "--score-field",
        default="f1_relaxed",
        choices=("f1_relaxed", "f1_strict", "em_strict", "em_relaxed", "soft_correct"),
        help="answer score giving AC = 100 x score (default f1_relaxed)",
    )
    add_arguments(fan, (POINTS, R_INCLUDE_ORACLE, R_INCLUDE_FULL_CONTEXT, SCORE_SOURCE))
    fan.add_argument(
        "--judge-runs",
        help="AuthTrace judge runs whose judgments give the judged AC / ER / EP, comma-separated "
        "(default: per rubric the newest judge run of the runs; two judges are never mixed)",
    )
    fan.add_argument("--resamples", type=int, default=5000, help="bootstrap resamples (5000)")
    fan.add_argument("--no-instances", action="store_true", help="leave per-instance rows out")
    fan.add_argument("--json", action="store_true", help="print JSON")
    add_db(fan)
    fan.set_defaults(handler=_cmd_fanin)

    crux = groups.report.add_parser(
        "crux", help="retrieval-context coverage: Cov, alpha-nDCG, density (CRUX, SPEC §9)"
    )
    crux.add_argument("--dataset", required=True, help="dataset name")
    # The handler splits and checks the retrievers itself (an unknown one is a data error).
    families = retriever_param().many(("lexical",), "retrievers, comma-separated")
    add_argument(crux, families, flag="--retrievers", dest="retrievers", raw=True)
    add_argument(crux, _KS)
    crux.add_argument("--judge", default=None, help="use this judge's stored ratings")
    crux.add_argument(
        "--coverage-runs",
        default=None,
        help="crux-coverage judge runs giving Cov(y) / Den(y), comma-separated (default: all "
        "of the dataset's; required when two judge the same run)",
    )
    add_argument(crux, ETA)
    add_argument(crux, CRUX_K_REQUIRED, flag="--k-required", dest="k_required")
    add_arguments(crux, (CHUNK_SIZE, OVERLAP))
    crux.add_argument("--resamples", type=int, default=5000, help="bootstrap resamples (5000)")
    crux.add_argument("--no-instances", action="store_true", help="leave per-context rows out")
    crux.add_argument("--json", action="store_true", help="print JSON")
    add_db(crux)
    crux.set_defaults(handler=_cmd_crux)
