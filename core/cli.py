"""Command line: ``python -m core COMMAND ...`` mirrors the dashboard (SPEC §11).

Every command takes ``--db PATH`` (default: env ``EVIDENCE_DB``, else ``data/evidence.duckdb``).
Bad input ends with a one-line reason on stderr: exit code 2 for usage, 1 for data errors.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import duckdb

from core.commands import MODULES, Groups, add_db, add_with_runs, open_store, print_json
from core.datasets.controlled import build_controlled
from core.datasets.importers import FORMATS, read_dataset
from core.datasets.ruler import build_ruler_lite
from core.execution.runs import DEMO_DATASET
from core.names import check_name, ellipsize
from core.store import StoreError, default_db_path
from core.store.connection import unreadable_store_error
from core.types import DataError

__all__ = ["add_db", "build_parser", "main", "open_store", "print_json"]

_Handler = Callable[[argparse.Namespace], int]
#: What DuckDB says when a write finds no room: ENOSPC, or EFBIG under a file-size limit.
_DISK_FULL = re.compile(r"No space left|File too large|disk is full", re.I)


# ---------------------------------------------------------------------------- generate
def _cmd_generate_controlled(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    dataset = build_controlled(preset=args.preset, seed=args.seed, name=args.name or args.preset)
    n = open_store(args).write_dataset(dataset, replace=args.replace, with_runs=args.with_runs)
    print(
        f"generated dataset '{dataset.name}': {n} instances "
        f"(preset {args.preset}, seed {args.seed}) in {time.perf_counter() - t0:.1f} s "
        f"-> {open_store(args).path}"
    )
    return 0


def _cmd_generate_ruler(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    dataset = build_ruler_lite(seed=args.seed, name=args.name or "ruler-lite")
    n = open_store(args).write_dataset(dataset, replace=args.replace, with_runs=args.with_runs)
    print(
        f"generated dataset '{dataset.name}': {n} instances (ruler-lite, seed {args.seed}) "
        f"in {time.perf_counter() - t0:.1f} s -> {open_store(args).path}"
    )
    return 0


# ---------------------------------------------------------------------------- import
def _cmd_import_dataset(args: argparse.Namespace) -> int:
    result = read_dataset(args.file, fmt=args.format, name=args.name)
    open_store(args).write_dataset(result.dataset, replace=args.replace, with_runs=args.with_runs)
    print(f"{args.file}: {result.summary()} -> dataset '{args.name}' in {open_store(args).path}")
    return 0


# ---------------------------------------------------------------------------- datasets
def _cmd_datasets(args: argparse.Namespace) -> int:
    store = open_store(args)
    summaries = [store.dataset_summary(name) for name in store.dataset_names()]
    if args.json:
        print_json(summaries)
        return 0
    if not summaries:
        print(f"no datasets in {store.path}; try: python -m core generate controlled")
        return 0
    print(f"{'name':24} {'instances':>9} {'cells':>6}  builder")
    for s in summaries:
        print(f"{s['name']:24} {s['n_instances']:>9} {s['n_cells']:>6}  {s['builder']}")
    return 0


# ---------------------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    store = open_store(args)
    if DEMO_DATASET not in store.dataset_names():
        print(f"building the demo dataset '{DEMO_DATASET}' in {store.path} ...", flush=True)
        store.write_dataset(build_controlled(preset=DEMO_DATASET, seed=42, name=DEMO_DATASET))
    s = store.dataset_summary(DEMO_DATASET)
    print(
        f"demo store {store.path}: dataset '{s['name']}' with {s['n_instances']} instances, "
        f"{s['n_passages']} passages, {s['n_cells']} (length, position, distractor, reasoning) "
        f"cells"
    )
    for col in ("context_length", "evidence_position", "distractor_similarity", "reasoning_type"):
        counts = ", ".join(f"{k}: {v}" for k, v in s["cells"][col].items())
        print(f"  {col:22} {counts}")
    return 0


# ---------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors echo at most 200 characters of a value."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and one line of error (a long echoed value cut), exit 2."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {ellipsize(message, 400)}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every command (also used by tests to check ``--help``)."""
    parser = _Parser(
        prog="python -m core",
        description="Evidence-utilization diagnostics: build benchmarks, run models, report.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser("generate", help="build a deterministic offline benchmark")
    gen_sub = gen.add_subparsers(dest="builder", metavar="BUILDER", required=True)
    ctl = gen_sub.add_parser("controlled", help="controlled benchmark (SPEC §3.2)")
    ctl.add_argument(
        "--preset",
        default="controlled-200",
        choices=("controlled-200", "scaling-3200", "fanin-grid"),
        help="which grid to build (default controlled-200)",
    )
    ctl.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    ctl.add_argument("--name", help="dataset name in the store (default: the preset)")
    ctl.add_argument("--replace", action="store_true", help="replace a dataset of that name")
    add_with_runs(ctl)
    add_db(ctl)
    ctl.set_defaults(handler=_cmd_generate_controlled)
    rul = gen_sub.add_parser("ruler-lite", help="RULER-lite: kv retrieval, multi-hop trace, sum")
    rul.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    rul.add_argument("--name", help="dataset name in the store (default ruler-lite)")
    rul.add_argument("--replace", action="store_true", help="replace a dataset of that name")
    add_with_runs(rul)
    add_db(rul)
    rul.set_defaults(handler=_cmd_generate_ruler)

    imp = sub.add_parser("import", help="import a dataset file or existing results")
    imp_sub = imp.add_subparsers(dest="what", metavar="WHAT", required=True)
    ids = imp_sub.add_parser("dataset", help="import a benchmark file (all-or-nothing)")
    ids.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="file format (docs/JSONL_SCHEMA.md: the generic jsonl, longbench and the others)",
    )
    ids.add_argument("file", type=Path, help="the file to import")
    ids.add_argument("--name", required=True, help="dataset name in the store")
    ids.add_argument("--replace", action="store_true", help="replace a dataset of that name")
    add_with_runs(ids)
    add_db(ids)
    ids.set_defaults(handler=_cmd_import_dataset)

    demo = sub.add_parser("demo", help="build the demo store (controlled-200) and summarize it")
    add_db(demo)
    demo.set_defaults(handler=_cmd_demo)

    dsl = sub.add_parser("datasets", help="list stored datasets with their metadata cells")
    dsl.add_argument("--json", action="store_true", help="print JSON (counts, cells, hash)")
    add_db(dsl)
    dsl.set_defaults(handler=_cmd_datasets)

    rep = sub.add_parser("report", help="print method reports (tables; --json for machines)")
    rep_sub = rep.add_subparsers(dest="report", metavar="REPORT", required=True)
    exp = sub.add_parser("export", help="export figures and tables for papers")
    exp_sub = exp.add_subparsers(dest="export", metavar="WHAT", required=True)
    groups = Groups(top=sub, import_=imp_sub, report=rep_sub, export=exp_sub)
    for name in MODULES:
        importlib.import_module(f"core.commands.{name}").register(groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args = build_parser().parse_args(argv)
    handler: _Handler = args.handler
    try:
        _check_names(args)
        return handler(args)
    except (DataError, StoreError, ValueError, FileNotFoundError) as exc:
        print(_one_line(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (duckdb.IOException, duckdb.TransactionException) as exc:
        # A full disk (or a read-only / vanished store) while writing: the transaction was
        # rolled back, so the store is as before; say which file and what to do.
        where = getattr(args, "db", None) or default_db_path()
        unreadable = unreadable_store_error(where, exc)
        if unreadable is not None:  # a damaged store found outside Store.connect
            print(f"error: {unreadable}", file=sys.stderr)
            return 1
        hint = " (disk full: free space and rerun)" if _DISK_FULL.search(str(exc)) else ""
        text = " ".join(str(exc).split())
        print(f"error: store {where}: {text}{hint}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        # A block failing its checksum (or another sign of a damaged store) in a read that
        # did not go through Store.connect: one line; any other DuckDB error is a bug to show.
        where = getattr(args, "db", None) or default_db_path()
        unreadable = unreadable_store_error(where, exc)
        if unreadable is None and isinstance(exc, duckdb.CatalogException):
            # a table or column this program's schema has is missing: a damaged store
            unreadable = f"store {where} is damaged (not as this program wrote it): {exc}"
        if unreadable is None:
            raise
        print(_one_line(unreadable), file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:
        # A file or folder the command cannot write or read (permission denied, a directory
        # where a file belongs, disk full): one line naming it, never a traceback.
        what = f"{exc.strerror or type(exc).__name__}: {exc.filename}" if exc.filename else exc
        hint = " (disk full: free space and rerun)" if _DISK_FULL.search(str(exc)) else ""
        print(_one_line(what) + hint, file=sys.stderr)
        return 1


#: Flags naming a judge or an annotator: checked by :func:`core.names.check_name` before the
#: command runs (no control characters, 1-128); ``--name`` is checked by each command, which
#: knows what it names (a dataset, a run).
_NAME_FLAGS = {"judge": "judge", "annotator": "annotator"}


def _check_names(args: argparse.Namespace) -> None:
    """Refuse a ``--judge`` / ``--annotator`` that :func:`check_name` refuses."""
    for dest, kind in _NAME_FLAGS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str):
            check_name(kind, value)


def _one_line(exc: object) -> str:
    """``error: <first line of exc>``, at most 1,000 characters (an echoed value is cut)."""
    first = (str(exc).splitlines() or [""])[0]
    return "error: " + (first if len(first) <= 1000 else first[:997] + "...")
