"""``run-interventions`` and ``report interventions`` (CUE-R, SPEC §7, issue 6).

``python -m core run-interventions --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--host URL ...] [--base-url URL] [--top-k 5] [--retriever lexical]
[--operators remove,replace,duplicate] [--replace-hardness easy,medium,hard]
[--duplicate-positions front,after,end] [--two-support | --no-two-support]
[--zero-retrieval | --no-zero-retrieval] [--seed 0] [--concurrency N] --name RUN [--json]``
runs the base retrieved traces, then the interventions planned from their citations
(:func:`core.execution.runs.run_interventions`); rerunning the same command continues the run.

``python -m core report interventions --db PATH --run RUN [--eps 0.05] [--tau 0.5]
[--correctness-axis soft|strict] --json`` prints :func:`core.cuer.metrics.intervention_report`:
per-operator utility means with the evidence divergence and the % of answers changed, paired
bootstrap deltas (seed 004 Table 3), role flag counts (overlapping: one count per flag, plus
how many items carry several) and two-support synergy. ``n`` counts the answered pairs;
``missing`` the pairs left out because the base or the intervention call failed; ``n/a``
(``not_applicable``) the targeted instances an intervention could not apply to (a replace
needs a non-support passage besides the target).
"""

from __future__ import annotations

import argparse
import math

from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.commands.run import add_backend_args, drive_run
from core.cuer.interventions import (
    BASE_TOP_K,
    DUPLICATE_POSITIONS_PARAM,
    OPERATORS_PARAM,
    REPLACE_HARDNESS_PARAM,
    REPLACE_SEED,
    REPORT_PARAMS,
    TWO_SUPPORT,
    ZERO_RETRIEVAL,
)
from core.cuer.metrics import CORRECTNESS_AXIS, ROLE_FLAGS, intervention_report
from core.execution.runs import run_interventions
from core.params import CONCURRENCY, NUM_CTX, SEED, add_argument, add_arguments
from core.retrieval.retrievers import CHUNK_SIZE, OVERLAP, retriever_param

__all__ = ["register"]


def _split(text: str | None) -> list[str] | None:
    return None if text is None else split_csv(text)


def _cmd_run_interventions(args: argparse.Namespace) -> int:
    return drive_run(
        args,
        lambda store, backend, **kw: run_interventions(
            store,
            args.dataset,
            backend,
            name=args.name,
            top_k=args.top_k,
            retriever=args.retriever,
            chunk_size=args.chunk_size,
            overlap=args.overlap,
            operators=_split(args.operators),
            hardness=_split(args.replace_hardness),
            positions=_split(args.duplicate_positions),
            two_support=args.two_support,
            zero_retrieval=args.zero_retrieval,
            seed=args.replace_seed,
            concurrency=args.concurrency,
            **kw,
        ),
    )


def _fmt(x: float | None, signed: bool = False, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    if pct:
        return f"{x:.1f}%"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _cmd_report(args: argparse.Namespace) -> int:
    rep = intervention_report(
        open_store(args),
        args.run,
        eps=args.eps,
        tau=args.tau,
        synergy_metric=args.synergy_metric,
        correctness=args.correctness_axis,
    )
    if args.json:
        print_json(rep)
        return 0
    print(f"correctness axis: {rep['correctness_axis']}")
    print(
        f"{'operator':16} {'variant':8} {'n':>5} {'miss':>5} {'n/a':>5} {'corr':>7} {'F1':>7} "
        f"{'ground':>7} {'CE':>7} {'D':>7} {'evid':>7} {'ans chg':>8}"
    )
    for r in rep["operators"]:
        cells = " ".join(
            f"{_fmt(r[m]):>7}"
            for m in (
                "correctness",
                "answer_f1",
                "grounding",
                "confidence_error",
                "trace_divergence",
                "evidence_divergence",
            )
        )
        print(
            f"{r['operator']:16} {r['variant']:8} {r['n']:>5} {r['missing']:>5} "
            f"{r['not_applicable']:>5} {cells} "
            f"{_fmt(r['pct_answer_changed'], pct=True):>8}"
        )
    na = max(
        (r["not_applicable"] for r in rep["operators"] if r["operator"] == "replace"), default=0
    )
    if na:
        print(
            f"n/a: replace could not apply to {na} targeted instance(s): no non-support "
            "passage besides the target (CUE-R §5.6)"
        )
    print(
        f"\n{'comparison':26} {'metric':18} {'n':>5} {'miss':>5} {'delta':>7} {'95% CI':>17} "
        f"{'p':>7}"
    )
    for r in rep["paired"]:
        comp = f"orig vs {r['operator']}" + (f":{r['variant']}" if r["variant"] else "")
        ci = f"[{_fmt(r['ci_low'], True)}, {_fmt(r['ci_high'], True)}]"
        p = "<0.001" if r["p"] is not None and r["p"] < 0.001 else _fmt(r["p"])
        print(
            f"{comp:26} {r['metric']:18} {r['n']:>5} {r['missing']:>5} "
            f"{_fmt(r['delta'], True):>7} {ci:>17} {p:>7}"
        )
    roles = rep["roles"]
    print(
        f"\nrole flags of {roles['n']} items (overlapping: an item can carry several): "
        + ", ".join(f"{k} {roles[k]}" for k in (*ROLE_FLAGS, "unassigned"))
        + f"; several flags {roles['several_flags']}; missing (failed call) "
        f"{roles['missing']}"
    )
    for r in rep["roles_by_operator"]:
        comp = r["operator"] + (f":{r['variant']}" if r["variant"] else "")
        print(
            f"  {comp:18} n={r['n']} "
            + " ".join(f"{k}={r[k]}" for k in ROLE_FLAGS)
            + f" several={r['several_flags']} missing={r['missing']}"
        )
    print("  combinations: " + ", ".join(f"{k} {v}" for k, v in rep["role_combinations"].items()))
    s = rep["synergy"]
    if s.get("n") or s.get("missing"):
        print(
            f"synergy ({s['metric']}, n={s['n']}, missing={s['missing']}): drops "
            f"{_fmt(s['mean_drop_1'])} / {_fmt(s['mean_drop_2'])} / both "
            f"{_fmt(s['mean_drop_both'])}; mean synergy {_fmt(s['mean_synergy'])}; positive "
            f"{_fmt(s['pct_positive_synergy'], pct=True)}; strong complementary "
            f"{_fmt(s['pct_strong_complementary'], pct=True)}"
        )
    else:
        print("synergy: no instance with two shown gold passages")
    return 0


def register(groups: Groups) -> None:
    """Add ``run-interventions`` and ``report interventions`` to the CLI."""
    run = groups.top.add_parser(
        "run-interventions",
        help="CUE-R: base retrieved traces, then remove/replace/duplicate interventions",
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    add_argument(run, retriever_param(), help="base retriever; default lexical")
    add_arguments(run, (BASE_TOP_K, CHUNK_SIZE, OVERLAP))
    # The planner checks operators, levels and positions (an unknown one is a data error).
    for param in (OPERATORS_PARAM, REPLACE_HARDNESS_PARAM, DUPLICATE_POSITIONS_PARAM):
        add_argument(run, param, raw=True)
    add_arguments(run, (TWO_SUPPORT, ZERO_RETRIEVAL, REPLACE_SEED, CONCURRENCY, NUM_CTX, SEED))
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run_interventions)

    rep = groups.report.add_parser(
        "interventions", help="CUE-R utility profile, paired deltas, roles, synergy (SPEC §7)"
    )
    rep.add_argument("--run", required=True, help="an intervention run")
    add_arguments(rep, (*REPORT_PARAMS, CORRECTNESS_AXIS))
    rep.add_argument(
        "--synergy-metric",
        default="answer_f1",
        choices=("correctness", "answer_f1", "grounding", "confidence_error"),
        help="axis of the two-support drops (default answer_f1, seed 004 Table 9)",
    )
    rep.add_argument("--json", action="store_true", help="print one JSON object")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report)
