"""``store export`` (every table as Parquet) and ``store merge`` (stores from several machines).

``python -m core store export --db PATH --out DIR [--json]`` writes ``DIR/<table>.parquet`` for
every table and ``DIR/manifest.json`` (schema version, rows per table, dataset fingerprints).

``python -m core store merge A.duckdb B.duckdb [...] --into C.duckdb [--on-conflict
refuse|skip] [--json]`` adds the inputs' datasets, runs and every other table to ``C`` (new or
existing) in one transaction: a dataset of the same name must have the same content
(fingerprint), a run stored twice with other content is refused (or, with ``--on-conflict
skip``, left as the target has it and counted), equal rows are counted once
(:mod:`core.store.merge`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.commands import Groups, add_db, open_store, print_json
from core.store.merge import ON_CONFLICT, export_store, merge_stores

__all__ = ["register"]


def _cmd_export(args: argparse.Namespace) -> int:
    store = open_store(args)
    manifest = export_store(store.path, args.out)
    if args.json:
        print_json(manifest)
        return 0
    tables = manifest["tables"]
    rows = sum(t["rows"] for t in tables.values())
    print(f"{store.path}: {len(tables)} tables, {rows} rows -> {args.out} (Parquet, manifest.json)")
    for name, t in tables.items():
        print(f"  {name:20} {t['rows']:>10}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    result = merge_stores(args.stores, args.into, on_conflict=args.on_conflict)
    if args.json:
        print_json(result.to_dict())
        return 0
    print(
        f"merged {len(result.inputs)} store(s) into {result.target}: "
        f"{len(result.datasets_added)} datasets added, {len(result.runs_added)} runs added, "
        f"{len(result.runs_same)} already there with the same content, "
        f"{len(result.runs_skipped)} runs and {len(result.rows_skipped)} other rows skipped "
        "as collisions"
    )
    for name, c in sorted(result.tables.items()):
        print(
            f"  {name:20} {c.rows:>9} read {c.added:>9} added {c.same:>9} same "
            f"{c.skipped:>7} skipped"
        )
    for run in result.runs_skipped:
        print(f"  skipped run '{run}': other content in the target (kept the target's)")
    return 0


def register(groups: Groups) -> None:
    """Add ``store export`` and ``store merge``."""
    store = groups.top.add_parser("store", help="export a store as Parquet, merge stores")
    sub = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)

    exp = sub.add_parser("export", help="every table as Parquet, with a manifest")
    exp.add_argument("--out", type=Path, required=True, help="folder to write (created)")
    exp.add_argument("--json", action="store_true", help="print the manifest as JSON")
    add_db(exp)
    exp.set_defaults(handler=_cmd_export)

    merge = sub.add_parser(
        "merge", help="combine stores built on different machines into one (all or nothing)"
    )
    merge.add_argument("stores", type=Path, nargs="+", help="the stores to merge, in order")
    merge.add_argument("--into", type=Path, required=True, help="the target store (new or not)")
    merge.add_argument(
        "--on-conflict",
        choices=ON_CONFLICT,
        default="refuse",
        help="a run (or row) stored in both with other content: refuse the merge (default) "
        "or skip it, keeping the target's, and count it",
    )
    merge.add_argument("--json", action="store_true", help="print the counts as JSON")
    merge.set_defaults(handler=_cmd_merge)
