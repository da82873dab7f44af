"""CLI command groups, one module per area, each owning its handlers and its argparse part.

Every module here exposes ``register(groups: Groups) -> None`` and adds its commands to the
groups it needs; :func:`core.cli.build_parser` calls them in :data:`MODULES` order. Method knobs
become flags through :func:`core.params.add_argument` from the declarations next to the method
(retrievers, operators, probe strategies), so a flag's type check, choices, default and help
are the dashboard widget's too. The store, ``--db`` and JSON output helpers live here, so a
command module never imports :mod:`core.cli` back (the CLI loads the modules by name).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.store import Store, StoreError, default_db_path
from core.store.connection import missing_store_message
from core.store.datasets import WITH_RUNS

__all__ = [
    "Groups",
    "MODULES",
    "add_db",
    "add_with_runs",
    "open_store",
    "print_json",
    "split_csv",
]

#: Command modules, registered in this order (``core.commands.<name>``).
MODULES = (
    "report",
    "run",
    "interventions",
    "dolce",
    "coverage",
    "judge",
    "export",
    "serve",
    "setup",
    "batch",
    "annotate",
    "store",
    "numbers",
    "attribution",
)


@dataclass(frozen=True, slots=True)
class Groups:
    """The subparser groups a command module may add to.

    Attributes:
        top: top-level commands (``python -m core NAME``).
        import_: ``python -m core import NAME`` (``dataset`` is built in).
        report: ``python -m core report NAME`` (each prints tables, ``--json`` for machines).
        export: ``python -m core export NAME`` (figures and tables for papers).
    """

    top: argparse._SubParsersAction
    import_: argparse._SubParsersAction
    report: argparse._SubParsersAction
    export: argparse._SubParsersAction


def add_db(p: argparse.ArgumentParser) -> None:
    """Add the shared ``--db PATH`` option."""
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help="DuckDB store file (default: $EVIDENCE_DB, else data/evidence.duckdb)",
    )


def add_with_runs(p: argparse.ArgumentParser) -> None:
    """Add ``--with-runs``: what ``--replace`` does to a replaced dataset's runs (issue 35)."""
    p.add_argument(
        "--with-runs",
        choices=WITH_RUNS,
        default=None,
        help="with --replace, when the dataset has runs: drop (delete them with it) or "
        "keep-orphans (keep them; `score` lists them as run on a changed dataset); "
        "without it such a replace is refused",
    )


#: Commands that only read the store: a missing ``--db`` is an error, never created (issue 36
#: item 8). ``(command, action)``; action None: every action of the command.
READ_ONLY_COMMANDS = {("datasets", None), ("report", None), ("export", None), ("store", "export")}


def open_store(args: argparse.Namespace) -> Store:
    """The store named by ``--db`` (default: ``$EVIDENCE_DB``, else data/evidence.duckdb).

    Raises:
        StoreError: a command that only reads (:data:`READ_ONLY_COMMANDS`) was given a path
            that does not exist: one line naming it and the closest store of its folder;
            nothing is created.
    """
    path = Path(args.db if args.db is not None else default_db_path()).expanduser()
    command = getattr(args, "command", None)
    reads = (command, None) in READ_ONLY_COMMANDS or (
        command,
        getattr(args, "store_command", None),
    ) in READ_ONLY_COMMANDS
    if reads and not path.exists():
        raise StoreError(missing_store_message(path))
    return Store(path)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write("\n")


def split_csv(text: str | Iterable[str] | None) -> list[str]:
    """The non-blank, stripped items of a comma-separated option (``None``: none).

    An item holding a comma is quoted as a spreadsheet writes it: ``'"x, y",b'`` gives
    ``x, y`` and ``b`` (a run or dataset name may hold a comma). An option a declaration
    already parsed into a list (``Param(multiple=True)``) passes through the same way.
    """
    if text is not None and not isinstance(text, str):
        return [str(t).strip() for t in text if str(t).strip()]
    rows = csv.reader([str(text or "")], skipinitialspace=True)
    return [t.strip() for row in rows for t in row if t.strip()]
