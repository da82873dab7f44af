"""``run-attribution`` and ``report attribution`` (context attribution, issue 40).

``python -m core run-attribution --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--host URL ...] [--base-url URL] [--condition full_context|retrieved|oracle]
[--ablations 32] [--keep 0.5] [--seed 0] [--target retention|correct] [--score-field F]
[--retriever lexical --top-k 3 --chunk-size 220 --overlap 40] [--instances N|ID,ID]
[--concurrency N] --name RUN [--json]`` answers each instance's unablated context and its
random ablations, then the top-1 and top-2 drops (:func:`core.execution.runs.run_attribution`);
rerunning the same command continues the run. ``--target logprob`` is refused with one line
(no backend here scores a forced continuation).

``python -m core report attribution --db PATH --run RUN [--target T] [--n-boot 200]
[--boot-seed 0] [--lds-low 0.3] [--cuer-run RUN] [--json]`` prints
:func:`core.attribution.report.attribution_report`: LDS, the cited-vs-causal 2x2, gold
reliance by length / position / similarity, agreement with CUE-R remove, and (``--json``)
every instance and passage.
"""

from __future__ import annotations

import argparse

from core.attribution.metrics import LOGPROB_UNSUPPORTED, REPORT_PARAMS, SCORE_FIELD
from core.attribution.plan import INSTANCES, RETRIEVED_TOP_K, RUN_PARAMS, TARGET
from core.attribution.report import attribution_report
from core.commands import Groups, add_db, open_store, print_json
from core.commands.run import add_backend_args, drive_run
from core.execution.runs import run_attribution
from core.jsonable import json_plain
from core.params import CONCURRENCY, NUM_CTX, SEED, add_argument, add_arguments
from core.retrieval.retrievers import CHUNK_SIZE, OVERLAP, retriever_param

__all__ = ["register"]


def _cmd_run(args: argparse.Namespace) -> int:
    if args.target == "logprob":
        raise ValueError(LOGPROB_UNSUPPORTED)
    return drive_run(
        args,
        lambda store, backend, **kw: run_attribution(
            store,
            args.dataset,
            backend,
            name=args.name,
            condition=args.condition,
            ablations=args.ablations,
            keep=args.keep,
            seed=args.mask_seed,
            target=args.target,
            score_field=args.score_field,
            retriever=args.retriever,
            top_k=args.top_k,
            chunk_size=args.chunk_size,
            overlap=args.overlap,
            instances=args.instances,
            concurrency=args.concurrency,
            **kw,
        ),
    )


def _fmt(x: object, digits: int = 3) -> str:
    return "--" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _cmd_report(args: argparse.Namespace) -> int:
    if args.target == "logprob":
        raise ValueError(LOGPROB_UNSUPPORTED)
    rep = json_plain(
        attribution_report(
            open_store(args),
            args.run,
            target=args.target,
            score_field=args.score_field,
            n_boot=args.n_boot,
            seed=args.boot_seed,
            lds_low=args.lds_low,
            cuer_run=args.cuer_run,
        )
    )
    if args.json:
        print_json(rep)
        return 0
    s = rep["settings"]
    print(
        f"attribution run '{rep['run']}': condition {s.get('condition')}, target "
        f"{s['target']}, {s.get('ablations')} ablations, keep {s.get('keep')}, seed "
        f"{s.get('seed')}"
    )
    calls = rep["calls"]
    print(
        f"instances {rep['n_instances']}, fitted {rep['n_fitted']}; ablated calls "
        f"{calls['ablations']}, failed {calls['failed']} (left out, not 0); unablated "
        f"calls failed {calls['full_failed']}"
    )
    for reason, n in rep["not_fitted"].items():
        print(f"  not fitted ({n}): {reason}")
    m = rep["masks"]
    print(
        f"instances whose masks always kept a passage: "
        f"{m['instances_with_a_passage_always_kept']}; always dropped one: "
        f"{m['instances_with_a_passage_always_dropped']} (no weight for those passages)"
    )
    lds = rep["lds"]
    print(
        f"LDS median {_fmt(lds['median'])}; below {lds['threshold']}: {lds['below']}; "
        f"undefined: {lds['undefined']}"
    )
    tg = rep["top_gold"]
    print(
        f"top-weighted passage is gold for {tg['top_is_gold']} of {tg['n_correct']} "
        f"correctly answered instances ({_fmt(tg['rate'])})"
    )
    print(f"mean top-k drop: k=1 {_fmt(rep['top_drop']['1'])}, k=2 {_fmt(rep['top_drop']['2'])}")
    cc = rep["cited_vs_causal"]
    c = cc["cells"]
    print(f"\ncited vs causal ({cc['n']} passages; {cc['undetermined']} undetermined):")
    print(f"{'':12} {'causal':>8} {'not':>8}")
    print(f"{'cited':12} {c['cited_causal']:>8} {c['cited_not_causal']:>8}")
    print(f"{'not cited':12} {c['not_cited_causal']:>8} {c['not_cited_not_causal']:>8}")
    gr = rep["gold_reliance"]
    o = gr["overall"]
    print(
        f"\ngold reliance: {_fmt(o['mean'])} [{_fmt(o['ci_low'])}, {_fmt(o['ci_high'])}] "
        f"n={o['n']}, undefined (no positive weight) {gr['undefined']}"
    )
    for group, rows in gr["groups"].items():
        for r in rows:
            print(
                f"  {group}={r['value']}: {_fmt(r['mean'])} [{_fmt(r['ci_low'])}, "
                f"{_fmt(r['ci_high'])}] n={r['n']} undefined={r['undefined']}"
            )
    ag = rep["agreement"]
    if ag is not None:
        print(
            f"\nagreement with CUE-R remove ({ag['cuer_run']}): Spearman "
            f"{_fmt(ag['spearman'])} over {ag['n_pairs']} passages of {ag['n_instances']} "
            "instances"
        )
    return 0


def register(groups: Groups) -> None:
    """Add ``run-attribution`` and ``report attribution`` to the CLI."""
    run = groups.top.add_parser(
        "run-attribution",
        help="context attribution: random passage ablations, a Lasso surrogate (ContextCite)",
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    condition, ablations, keep, mask_seed, target = RUN_PARAMS
    add_arguments(run, (condition, ablations, keep))
    add_argument(run, mask_seed, dest="mask_seed")
    add_arguments(run, (target, SCORE_FIELD, INSTANCES))
    add_argument(run, retriever_param(), help="retriever of the retrieved condition")
    add_arguments(run, (RETRIEVED_TOP_K, CHUNK_SIZE, OVERLAP, CONCURRENCY, NUM_CTX))
    run.set_defaults(seed=SEED.default)  # the generation seed (--seed is the masks')
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run)

    rep = groups.report.add_parser(
        "attribution",
        help="attribution weights with CIs, LDS, cited vs causal, gold reliance (issue 40)",
    )
    rep.add_argument("--run", required=True, help="an attribution run")
    add_argument(rep, TARGET, default=None, help="target (default: the run's own)")
    add_argument(
        rep,
        SCORE_FIELD,
        default=None,
        help="score of the correct target and of "
        "'answered correctly' (default: the run's, else soft_correct)",
    )
    add_arguments(rep, REPORT_PARAMS)
    rep.add_argument("--cuer-run", help="a CUE-R run on the same dataset: agreement with remove")
    rep.add_argument("--json", action="store_true", help="print one JSON object")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report)
