"""``run-interventions`` and ``report interventions`` (CUE-R, SPEC §7, issue 6).

``python -m core run-interventions --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--host URL ...] [--base-url URL] [--top-k 5] [--retriever lexical]
[--operators remove,replace,duplicate] [--replace-hardness easy,medium,hard]
[--duplicate-positions front,after,end] [--two-support | --no-two-support]
[--zero-retrieval | --no-zero-retrieval] [--seed 0] [--concurrency N] --name RUN [--json]``
runs the base retrieved traces, then the interventions planned from their citations
(:func:`core.cuer.run_interventions`); rerunning the same command continues the run.

``python -m core report interventions --db PATH --run RUN [--eps 0.05] [--tau 0.5] --json``
prints :func:`core.cuer.intervention_report`: per-operator utility means, paired bootstrap
deltas (seed 004 Table 3), role counts and two-support synergy.
"""

from __future__ import annotations

import argparse
import math

from core.commands import Groups, split_csv

__all__ = ["register"]


def _split(text: str | None) -> list[str] | None:
    return None if text is None else split_csv(text)


def _cmd_run_interventions(args: argparse.Namespace) -> int:
    from core.commands.engine import drive_run
    from core.cuer import run_interventions

    return drive_run(
        args,
        lambda store, backend, **kw: run_interventions(
            store, args.dataset, backend, name=args.name, top_k=args.top_k,
            retriever=args.retriever, chunk_size=args.chunk_size, overlap=args.overlap,
            operators=_split(args.operators), hardness=_split(args.replace_hardness),
            positions=_split(args.duplicate_positions), two_support=args.two_support,
            zero_retrieval=args.zero_retrieval, seed=args.replace_seed,
            concurrency=args.concurrency, **kw,
        ),
    )  # fmt: skip


def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _cmd_report(args: argparse.Namespace) -> int:
    from core.cli import open_store, print_json
    from core.cuer import intervention_report

    rep = intervention_report(
        open_store(args), args.run, eps=args.eps, tau=args.tau, synergy_metric=args.synergy_metric
    )
    if args.json:
        print_json(rep)
        return 0
    print(f"{'operator':16} {'variant':8} {'n':>5} {'corr':>7} {'F1':>7} {'ground':>7} "
          f"{'CE':>7} {'D':>7}")  # fmt: skip
    for r in rep["operators"]:
        cells = " ".join(
            f"{_fmt(r[m]):>7}"
            for m in ("correctness", "answer_f1", "grounding", "confidence_error",
                      "trace_divergence")
        )  # fmt: skip
        print(f"{r['operator']:16} {r['variant']:8} {r['n']:>5} {cells}")
    print(f"\n{'comparison':26} {'metric':18} {'delta':>7} {'95% CI':>17} {'p':>7}")
    for r in rep["paired"]:
        comp = f"orig vs {r['operator']}" + (f":{r['variant']}" if r["variant"] else "")
        ci = f"[{_fmt(r['ci_low'], True)}, {_fmt(r['ci_high'], True)}]"
        p = "<0.001" if r["p"] is not None and r["p"] < 0.001 else _fmt(r["p"])
        print(f"{comp:26} {r['metric']:18} {_fmt(r['delta'], True):>7} {ci:>17} {p:>7}")
    print("\nroles: " + ", ".join(f"{k} {v}" for k, v in rep["roles"].items()))
    s = rep["synergy"]
    if s.get("n"):
        print(
            f"synergy ({s['metric']}, n={s['n']}): drops {_fmt(s['mean_drop_1'])} / "
            f"{_fmt(s['mean_drop_2'])} / both {_fmt(s['mean_drop_both'])}; mean synergy "
            f"{_fmt(s['mean_synergy'])}; positive {s['pct_positive_synergy']:.1f}%; strong "
            f"complementary {s['pct_strong_complementary']:.1f}%"
        )
    else:
        print("synergy: no instance with two shown gold passages")
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {value}")
    return value


def register(groups: Groups) -> None:
    """Add ``run-interventions`` and ``report interventions`` to the CLI."""
    from core.cli import add_db
    from core.commands.engine import add_backend_args

    run = groups.top.add_parser(
        "run-interventions",
        help="CUE-R: base retrieved traces, then remove/replace/duplicate interventions",
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    run.add_argument("--retriever", default="lexical", help="base retriever (default lexical)")
    run.add_argument("--top-k", type=_positive, default=5, help="base chunks (default 5)")
    run.add_argument("--chunk-size", type=_positive, default=220, help="chunk tokens (220)")
    run.add_argument("--overlap", type=int, default=40, help="chunk overlap tokens (40)")
    run.add_argument(
        "--operators",
        default="remove,replace,duplicate",
        help="comma-separated operators (default remove,replace,duplicate)",
    )
    run.add_argument(
        "--replace-hardness",
        default="easy,medium,hard",
        help="comma-separated replacement hardness levels (default easy,medium,hard)",
    )
    run.add_argument(
        "--duplicate-positions",
        default="end",
        help="comma-separated duplicate positions: front, after, end (default end)",
    )
    run.add_argument(
        "--two-support",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="two-support ablation where >= 2 gold passages are shown (default on)",
    )
    run.add_argument(
        "--zero-retrieval",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="zero-retrieval control: the no-evidence prompt (default on)",
    )
    run.add_argument(
        "--replace-seed", type=int, default=0, help="seed of the easy replacement (default 0)"
    )
    run.add_argument(
        "--concurrency", type=_positive, default=1, help="parallel model calls (default 1)"
    )
    run.add_argument(
        "--num-ctx", type=_positive, default=None, help="context window (Ollama default 32768)"
    )
    run.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run_interventions)

    rep = groups.report.add_parser(
        "interventions", help="CUE-R utility profile, paired deltas, roles, synergy (SPEC §7)"
    )
    rep.add_argument("--run", required=True, help="an intervention run")
    rep.add_argument("--eps", type=_unit, default=0.05, help="negligible-change threshold")
    rep.add_argument("--tau", type=_unit, default=0.5, help="large trace-divergence threshold")
    rep.add_argument(
        "--synergy-metric",
        default="answer_f1",
        choices=("correctness", "answer_f1", "grounding", "confidence_error"),
        help="axis of the two-support drops (default answer_f1, seed 004 Table 9)",
    )
    rep.add_argument("--json", action="store_true", help="print one JSON object")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report)
