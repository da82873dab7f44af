"""``batch export`` and ``batch import``: a run's calls through an offline batch runner (issue 21).

``python -m core batch export conditions|interventions|probes --db PATH --dataset NAME
--run RUN --backend openai --model M --out F.jsonl [--shard-size N] [the live command's
planning options] [--json]`` plans the run as ``run`` / ``run-interventions`` /
``run-probes`` would (same options, same defaults) and writes the calls not yet answered in
the store as OpenAI Batch API input lines (:func:`core.batch.runs.export_batch`); the run is
then ``waiting``. ``--shard-size N`` writes ``F.000.jsonl``, ``F.001.jsonl`` ... of at most
N lines each.

``python -m core batch import FILE... --run RUN [--db PATH] [--json]`` stores the answers of
batch output files (vLLM ``run_batch``, the OpenAI Batch API, Ray Data LLM pipelines writing
the same lines) as the live engine stores a reply (:func:`core.batch.runs.import_batch`): every
line of every file is checked first, and one bad line stops the import with one line naming
the file, the line and the field, exit status 1, store unchanged. A second import of the same
file stores nothing.

``python -m core batch export judge --rubric NAME (--run R | --dataset D) --name JUDGE_RUN
--model M --out F.jsonl [--conditions ...] [--passages gold|all]`` plans a judge run as
``judge RUBRIC`` would and writes the judgments not yet stored
(:func:`core.batch.judges.export_judge_batch`); ``batch import FILE --run JUDGE_RUN`` then stores
the replies as judgments, parsed by the rubric (:func:`core.batch.judges.import_judge_batch`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.attribution.metrics import SCORE_FIELD as ATTRIBUTION_SCORE_FIELD
from core.attribution.plan import INSTANCES as ATTRIBUTION_INSTANCES
from core.attribution.plan import RETRIEVED_TOP_K
from core.attribution.plan import RUN_PARAMS as ATTRIBUTION_PARAMS
from core.batch.judges import export_judge_batch, import_judge_batch
from core.batch.runs import export_batch, import_batch
from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.commands.run import run_options
from core.cuer.interventions import (
    BASE_TOP_K,
    DUPLICATE_POSITIONS_PARAM,
    OPERATORS_PARAM,
    REPLACE_HARDNESS_PARAM,
    REPLACE_SEED,
    TWO_SUPPORT,
    ZERO_RETRIEVAL,
)
from core.dolce import probes
from core.judges.rubrics import RUBRICS
from core.names import check_name
from core.params import LIMIT, NUM_CTX, SEED, add_argument, add_arguments
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    RERANK,
    RERANK_MODEL,
    TOP_K,
    retriever_param,
)

__all__ = ["register"]


def _split(text: str | None) -> list[str] | None:
    return None if text is None else split_csv(text)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The planner's settings of ``args``, named as the live run functions take them."""
    if args.kind == "conditions":
        return {
            "conditions": split_csv(args.conditions),
            "retriever": args.retriever,
            "top_k": args.top_k,
            "chunk_size": args.chunk_size,
            "overlap": args.overlap,
            "rerank": args.rerank,
            "rerank_model": args.rerank_model,
        }
    if args.kind == "interventions":
        return {
            "retriever": args.retriever,
            "top_k": args.top_k,
            "chunk_size": args.chunk_size,
            "overlap": args.overlap,
            "operators": _split(args.operators),
            "hardness": _split(args.replace_hardness),
            "positions": _split(args.duplicate_positions),
            "two_support": args.two_support,
            "zero_retrieval": args.zero_retrieval,
            "replace_seed": args.replace_seed,
        }
    if args.kind == "attribution":
        return {
            "condition": args.condition,
            "ablations": args.ablations,
            "keep": args.keep,
            "mask_seed": args.mask_seed,
            "target": args.target,
            "score_field": args.score_field,
            "instances": args.instances,
            "retriever": args.retriever,
            "top_k": args.top_k,
            "chunk_size": args.chunk_size,
            "overlap": args.overlap,
        }
    return {
        "units": args.units,
        "per_length": args.per_length,
        "strategy": args.strategy,
        "max_spans": args.max_spans,
        "limit": args.limit,
    }


def _cmd_export(args: argparse.Namespace) -> int:
    check_name("run", args.name)
    store = open_store(args)
    summary = export_batch(
        store,
        args.kind,
        args.dataset,
        args.name,
        args.model,
        args.out,
        seed=args.seed,
        options=run_options("openai", args.seed, args.num_ctx),
        shard_size=args.shard_size,
        **_settings(args),
    )
    if args.json:
        print_json(summary)
        return 0
    files = summary["files"]
    phase = "" if summary["phase"] == args.kind else f" (phase {summary['phase']})"
    if not files:
        print(
            f"batch export '{summary['run']}'{phase}: nothing to export, "
            f"{summary['already_stored']} calls already stored (run {summary['status']})"
        )
        return 0
    shown = files[0] if len(files) == 1 else f"{len(files)} files {files[0]} .. {files[-1]}"
    print(
        f"batch export '{summary['run']}'{phase}: {summary['n_calls']} calls to {shown}, "
        f"{summary['already_stored']} already stored; run {summary['status']}"
    )
    if summary["phase"] == "ablations":
        print(
            "attribution: these are the unablated and ablated calls; import their answers, "
            "then run the same export again for the top-k drops"
        )
    if summary["phase"] == "base":
        print(
            "CUE-R: these are the base traces; import their answers, then run the same export "
            "again for the interventions"
        )
    return 0


def _cmd_export_judge(args: argparse.Namespace) -> int:
    check_name("run", args.name)
    summary = export_judge_batch(
        open_store(args),
        args.rubric,
        args.name,
        args.model,
        args.out,
        dataset=args.dataset,
        run=args.run,
        conditions=split_csv(args.conditions) if args.conditions else None,
        passages=args.passages,
        seed=args.seed,
        options=run_options("openai", args.seed, args.num_ctx),
        shard_size=args.shard_size,
    )
    if args.json:
        print_json(summary)
        return 0
    files = summary["files"]
    head = f"batch export judge '{summary['run']}' ({summary['rubric']})"
    if not files:
        print(
            f"{head}: nothing to export, {summary['already_stored']} judgments already "
            f"stored (run {summary['status']})"
        )
    else:
        shown = files[0] if len(files) == 1 else f"{len(files)} files {files[0]} .. {files[-1]}"
        print(
            f"{head}: {summary['n_calls']} judge calls to {shown}, "
            f"{summary['already_stored']} already stored; run {summary['status']}"
        )
    for line in summary["notes"]:
        print(f"note: {line}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    store = open_store(args)
    row = store.run_row(args.name) or {}
    judge = row.get("kind") == "judge"
    summary = (import_judge_batch if judge else import_batch)(store, args.name, args.files)
    if args.json:
        print_json(summary)
        return 0
    s = summary
    print(
        f"batch import '{s['run']}': {s['lines']} lines in {s['files']} file(s): {s['stored']} "
        f"stored ({s['answers']} answers, {s['errors']} errors, {s['parse_errors']} parse "
        f"errors), {s['already_stored']} already stored; {s['missing']} exported calls "
        f"without a reply; run {s['status']}"
    )
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="stored dataset name")
    p.add_argument(
        "--run",
        "--name",
        dest="name",
        required=True,
        help="run name; export it again to write the calls still unanswered",
    )
    p.add_argument(
        "--backend",
        default="openai",
        choices=("openai",),
        help="openai: an OpenAI Batch API input file (vLLM run_batch, Ray Data LLM read it)",
    )
    p.add_argument("--model", required=True, help="model name the batch runner serves")
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    p.add_argument(
        "--shard-size",
        type=int,
        default=None,
        help="at most N lines per file: F.000.jsonl, F.001.jsonl ... (default: one file)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(p)
    p.set_defaults(handler=_cmd_export)


def register(groups: Groups) -> None:
    """Add ``batch export conditions|interventions|probes|judge`` and ``batch import``."""
    batch = groups.top.add_parser(
        "batch", help="a run's calls as OpenAI Batch files (vLLM run_batch, Ray Data LLM)"
    )
    sub = batch.add_subparsers(dest="batch_command", metavar="{export,import}", required=True)
    export = sub.add_parser("export", help="write a run's unanswered calls as a batch file")
    kinds = export.add_subparsers(
        dest="kind",
        metavar="{conditions,interventions,probes,judge,attribution}",
        required=True,
    )

    cond = kinds.add_parser("conditions", help="the four conditions (as `run`)")
    _common(cond)
    cond.add_argument(
        "--conditions",
        default="no_evidence,full_context,retrieved,oracle",
        help="comma-separated conditions (default: all four)",
    )
    add_argument(cond, retriever_param())
    add_argument(cond, TOP_K, flag="--top-k", dest="top_k")
    add_arguments(cond, (RERANK, RERANK_MODEL, CHUNK_SIZE, OVERLAP, NUM_CTX, SEED))

    cuer = kinds.add_parser("interventions", help="CUE-R (as `run-interventions`)")
    _common(cuer)
    add_argument(cuer, retriever_param(), help="base retriever; default lexical")
    add_arguments(cuer, (BASE_TOP_K, CHUNK_SIZE, OVERLAP))
    for param in (OPERATORS_PARAM, REPLACE_HARDNESS_PARAM, DUPLICATE_POSITIONS_PARAM):
        add_argument(cuer, param, raw=True)
    add_arguments(cuer, (TWO_SUPPORT, ZERO_RETRIEVAL, REPLACE_SEED, NUM_CTX, SEED))

    judge = kinds.add_parser("judge", help="a judge run's calls (as `judge RUBRIC`)")
    judge.add_argument("--rubric", required=True, choices=list(RUBRICS), help="the rubric")
    where = judge.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", help="the run whose predictions are judged")
    where.add_argument(
        "--dataset", help="the dataset whose passages are judged (crux-answerability)"
    )
    judge.add_argument(
        "--name",
        required=True,
        help="judge run id; export it again to write the judgments still unanswered",
    )
    judge.add_argument(
        "--conditions", help="judged conditions, comma-separated (default as `judge RUBRIC`)"
    )
    judge.add_argument(
        "--passages",
        default="gold",
        choices=("gold", "all"),
        help="crux-answerability: the gold passages (default) or all",
    )
    judge.add_argument(
        "--backend",
        default="openai",
        choices=("openai",),
        help="openai: an OpenAI Batch API input file",
    )
    judge.add_argument("--model", required=True, help="model name the batch runner serves")
    judge.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    judge.add_argument(
        "--shard-size",
        type=int,
        default=None,
        help="at most N lines per file: F.000.jsonl ... (default: one file)",
    )
    add_arguments(judge, (NUM_CTX, SEED))
    judge.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(judge)
    judge.set_defaults(handler=_cmd_export_judge)

    probe = kinds.add_parser("probes", help="DOLCE probes (as `run-probes`)")
    _common(probe)
    add_arguments(probe, (probes.UNITS_PARAM, probes.STRATEGY, probes.MAX_SPANS, probes.PER_LENGTH))
    add_argument(probe, probes.SEED, help="span and generation seed; default 0")
    add_arguments(probe, (LIMIT, NUM_CTX))

    attr = kinds.add_parser("attribution", help="context attribution (as `run-attribution`)")
    _common(attr)
    condition, ablations, keep, mask_seed, target = ATTRIBUTION_PARAMS
    add_arguments(attr, (condition, ablations, keep))
    add_argument(attr, mask_seed, dest="mask_seed")
    add_arguments(attr, (target, ATTRIBUTION_SCORE_FIELD, ATTRIBUTION_INSTANCES))
    add_argument(attr, retriever_param(), help="retriever of the retrieved condition")
    add_arguments(attr, (RETRIEVED_TOP_K, CHUNK_SIZE, OVERLAP, NUM_CTX))
    attr.set_defaults(seed=SEED.default)  # the generation seed (--seed is the masks')

    imp = sub.add_parser("import", help="store a batch output file's answers in its run")
    imp.add_argument("files", nargs="+", type=Path, help="batch output JSONL file(s)")
    imp.add_argument("--run", "--name", dest="name", required=True, help="the exported run")
    imp.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(imp)
    imp.set_defaults(handler=_cmd_import)
