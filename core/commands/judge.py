"""CRUX sub-questions and answerability ratings from the command line (SPEC §9, seed 002).

``import crux FILE --dataset NAME`` stores a dataset's sub-questions, and the ratings a judge
already gave (CRUX's released judgments, say), from a JSON Lines file::

    {"instance_id": "q1", "sq_id": "s1", "text": "Who founded X?",
     "ratings": {"p0001": 5, "p0003": 0}}          # optional; 0..5 per passage id

``judge RUBRIC (--dataset NAME | --run R) --backend ollama|openai|embedded [--name J]`` runs a
rubric of :data:`core.judges.rubrics.RUBRICS` as a judge run (:func:`core.judges.runs.run_judge`:
kind ``judge``, cached, resumable by ``--name``, ``--concurrency`` threads, failed calls stored
as errors); ``--backend embedded`` is the lexical baseline judge, not a model.

``judge crux --dataset NAME --backend ollama --model M [--judge J]`` is an alias of ``judge
crux-answerability --dataset NAME`` (the same judge run, the same table): it rates every
(passage, stored sub-question) pair 0..5 with the CRUX rubric as the judge run ``J`` (default
``<backend>:<model>|crux-v<version>``), so that ``report crux --judge J`` uses real ratings
instead of the binary ones derived from gold evidence; it prints its summary in the pairs'
words. The raw 0..5 ratings are stored; the threshold eta is applied when reporting
(``report crux --eta 5``; default 3), so one judging serves every threshold.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.commands.run import ProgressBar, add_backend_args, backend_from_args, run_options
from core.crux.metrics import JUDGE_TEMPLATE_VERSION
from core.datasets.records import check_record, jsonl_records
from core.judges.rubrics import RUBRICS
from core.judges.runs import make_judge, run_judge
from core.params import CONCURRENCY, NUM_CTX, SEED, add_arguments
from core.types import DataError

__all__ = ["read_crux_file", "register"]

#: Judge name of ratings imported without one.
IMPORTED_JUDGE = "imported"


def read_crux_file(
    path: Path, passages: dict[str, set[str]], judge: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Validate a sub-question file; ``(sub_questions, ratings)`` as lists of dicts.

    Args:
        path: the JSON Lines file.
        passages: passage ids of each instance of the dataset.
        judge: the name the file's ratings are stored under.

    Raises:
        DataError: naming the file, the record and the field: invalid UTF-8 or JSON, a string
            over ``MAX_FIELD_BYTES`` or holding half a surrogate pair, not an object, a missing
            or empty id or text, an instance not in the dataset, a repeated (instance, sq_id),
            ratings that are not an object of the instance's passage ids -> integer 0..5.
    """
    file = str(path)
    sub_questions: list[dict[str, Any]] = []
    ratings: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for line, rec in jsonl_records(path):
        check_record(file, line, rec)  # MAX_FIELD_BYTES per string, no half surrogate pairs
        if not isinstance(rec, dict):
            raise DataError(file, line, None, f"expected a JSON object, got {type(rec).__name__}")
        for key in ("instance_id", "sq_id", "text"):
            value = rec.get(key)
            if not isinstance(value, str) or not value.strip():
                raise DataError(file, line, key, "required: a non-empty string")
        iid, sq_id = rec["instance_id"], rec["sq_id"]
        if iid not in passages:
            raise DataError(file, line, "instance_id", f"no instance {iid!r} in the dataset")
        if (iid, sq_id) in seen:
            raise DataError(file, line, "sq_id", f"sub-question {sq_id!r} of {iid!r} repeated")
        seen.add((iid, sq_id))
        sub_questions.append({"instance_id": iid, "sq_id": sq_id, "text": rec["text"].strip()})
        given = rec.get("ratings")
        if given is None:
            continue
        if not isinstance(given, dict):
            raise DataError(file, line, "ratings", "expected an object {passage_id: 0..5}")
        for pid, rating in given.items():
            if pid not in passages[iid]:
                raise DataError(file, line, f"ratings.{pid}", f"no passage {pid!r} in {iid!r}")
            ok = isinstance(rating, int) and not isinstance(rating, bool) and 0 <= rating <= 5
            if not ok:
                raise DataError(file, line, f"ratings.{pid}", f"expected 0..5, got {rating!r}")
            ratings.append(
                {
                    "instance_id": iid,
                    "sq_id": sq_id,
                    "passage_id": str(pid),
                    "rating": rating,
                    "judge": judge,
                }
            )
    return sub_questions, ratings


def _cmd_import_crux(args: argparse.Namespace) -> int:
    store = open_store(args)
    if args.dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{args.dataset}' in {store.path}")
    sq, ratings = read_crux_file(args.file, store.passage_ids(args.dataset), args.judge)
    cols = ["instance_id", "sq_id", "passage_id", "rating", "judge"]
    store.write_crux_judgments(args.dataset, pd.DataFrame(sq), pd.DataFrame(ratings, columns=cols))
    n_inst = len({r["instance_id"] for r in sq})
    print(
        f"{args.file}: {len(sq)} sub-questions of {n_inst} instances, {len(ratings)} ratings"
        + (f" (judge '{args.judge}')" if ratings else "")
        + f" -> dataset '{args.dataset}' in {store.path}"
    )
    return 0


def _judge(args: argparse.Namespace, rubric: str, name: str | None) -> Any:
    """Run ``rubric`` as a judge run from the parsed arguments; None when interrupted."""
    store = open_store(args)
    options = run_options(args.backend, args.seed, args.num_ctx)
    if args.backend == "embedded":
        backend = make_judge("embedded")
        options = {}
    else:
        backend = backend_from_args(args, options)  # --timeout included
    if name is None and rubric == "crux-answerability" and args.judge_kind == "crux":
        name = f"{backend.name}:{backend.model}|crux-v{JUDGE_TEMPLATE_VERSION}"
    target = getattr(args, "run", None) or args.dataset
    name = name or f"judge-{rubric}-{target}-{backend.name}-{backend.model}"
    conds = split_csv(args.conditions) if getattr(args, "conditions", None) else None
    try:  # progress on stderr: judgments done / planned (a dashboard job parses these lines)
        return run_judge(
            store,
            rubric,
            backend,
            name=name,
            dataset=args.dataset,
            run=getattr(args, "run", None),
            conditions=conds,
            passages=args.passages,
            concurrency=args.concurrency,
            options=options,
            progress=ProgressBar(sys.stderr),
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: completed judgments are stored; rerun the same command to "
            f"continue judge run '{name}'",
            file=sys.stderr,
        )
        return None


def _cmd_judge_crux(args: argparse.Namespace) -> int:
    """``judge crux``: ``judge crux-answerability`` under the judge's name, in pairs' words."""
    out = _judge(args, "crux-answerability", args.judge)
    if out is None:
        return 130
    summary = {
        "judge": out.run,
        "n_pairs": out.planned,
        "n_called": out.executed,
        "n_cached": out.cached + out.skipped_existing,  # no model call: stored or cached
        "n_errors": out.errors,
        "status": out.status,
    }
    if args.json:
        print_json(summary)
    else:
        stored = out.planned - out.errors
        print(
            f"judge '{out.run}': {out.planned} (passage, sub-question) pairs, "
            f"{out.executed} model calls, {summary['n_cached']} cached, {out.errors} errors"
            + (
                f"; report crux --dataset {args.dataset} --judge '{out.run}' uses the "
                f"{stored} ratings"
                if stored
                else ""
            )
        )
    if out.errors:
        print(
            f"{out.errors} calls failed (stored as errors, no rating); rerun to fill them",
            file=sys.stderr,
        )
    return 1 if out.status == "failed" else 0


def _cmd_judge_rubric(args: argparse.Namespace) -> int:
    out = _judge(args, args.rubric, args.name)
    if out is None:
        return 130
    if args.json:
        print_json(out.to_dict())
    else:
        print(
            f"judge run '{out.run}' ({out.rubric}): {out.planned} judgments, {out.executed} "
            f"model calls, {out.cached} cached, {out.skipped_existing} stored already, "
            f"{out.errors} errors, {out.parse_errors} unreadable replies; status {out.status}"
        )
        for line in out.notes:
            print(f"note: {line}")
    if out.errors:
        print(
            f"{out.errors} judge calls failed (stored as errors, no rating); rerun to retry",
            file=sys.stderr,
        )
    return 1 if out.status == "failed" else 0


def register(groups: Groups) -> None:
    """Add ``import crux`` and ``judge crux``."""
    imp = groups.import_.add_parser(
        "crux", help="CRUX sub-questions (and given 0-5 ratings) of a stored dataset, JSONL"
    )
    imp.add_argument("file", type=Path, help="JSON Lines: instance_id, sq_id, text, ratings?")
    imp.add_argument("--dataset", required=True, help="the stored dataset they belong to")
    imp.add_argument(
        "--judge",
        default=IMPORTED_JUDGE,
        help=f"name the file's ratings are stored under (default '{IMPORTED_JUDGE}')",
    )
    add_db(imp)
    imp.set_defaults(handler=_cmd_import_crux)

    judge = groups.top.add_parser(
        "judge", help="judge runs: the papers' rubrics (CRUX, AuthTrace), by a model or a baseline"
    )
    sub = judge.add_subparsers(dest="judge_kind", metavar="KIND", required=True)
    crux = sub.add_parser(
        "crux",
        help="rate (passage, sub-question) pairs 0-5 with the CRUX rubric (SPEC §9): "
        "judge crux-answerability, named by --judge",
    )
    crux.add_argument("--dataset", required=True, help="dataset with stored sub-questions")
    add_backend_args(crux)
    crux.add_argument(
        "--passages",
        default="gold",
        choices=("gold", "all"),
        help="rate the gold passages only (CRUX's pre-judged P*, default) or every passage",
    )
    crux.add_argument(
        "--judge",
        help="the judge run's name, the ratings' (default "
        "BACKEND:MODEL|crux-vN); the same name resumes it",
    )
    add_arguments(crux, (CONCURRENCY, NUM_CTX, SEED))
    crux.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_db(crux)
    crux.set_defaults(handler=_cmd_judge_crux)
    for rubric in RUBRICS.values():
        p = sub.add_parser(rubric.name, help=f"{rubric.description} ({rubric.source})")
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--run", help="the run whose predictions are judged")
        where.add_argument(
            "--dataset", help="the dataset whose passages are judged (crux-answerability)"
        )
        add_backend_args(p)
        p.add_argument(
            "--name",
            help="judge run id (default judge-RUBRIC-TARGET-BACKEND-MODEL);"
            " the same name resumes it",
        )
        p.add_argument(
            "--conditions",
            help="judged conditions, comma-separated (default: "
            "retrieved for crux-coverage; the pack conditions for authtrace-evidence;"
            " all four otherwise)",
        )
        p.add_argument(
            "--passages",
            default="gold",
            choices=("gold", "all"),
            help="crux-answerability: the gold passages (default) or all",
        )
        add_arguments(p, (CONCURRENCY, NUM_CTX, SEED))
        p.add_argument("--json", action="store_true", help="print the summary as JSON")
        add_db(p)
        p.set_defaults(handler=_cmd_judge_rubric, rubric=rubric.name)
