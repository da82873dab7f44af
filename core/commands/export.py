"""``export figure`` / ``export table``: the dashboard's figures and tables as files for papers.

``python -m core export figure NAME --db PATH [--dataset D] [--runs R1,R2] [--score-field F]
[--filter COL=V1,V2] [--option KEY=JSON] [--width W --height H --font-size S --template T
--scale X] --out FILE.{png,svg,pdf,csv}``; ``python -m core export table NAME --format
csv|latex --out FILE``; ``--list`` prints the registered names, one per line. The same
registered view and plot render the pages (:mod:`core.catalog`), so a file matches what the
page shows. ``--score-field`` is built from the figures' declaration
(:data:`core.figures.SCORE_FIELD`); ``--option`` values are checked by the declared options of
:data:`core.catalog.OPTIONS` when the figure or table reads them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.commands import Groups, add_db, open_store, split_csv
from core.export import (
    TABLE_FORMATS,
    TEMPLATES,
    ExportSettings,
    export_figure,
    export_table,
    start_renderer,
)
from core.figures import SCORE_FIELD
from core.params import add_argument
from core.selection import Selection, option
from core.store import Store
from core.views import resolve_selection

if TYPE_CHECKING:  # the catalog is imported when an export runs (see _cmd_figure)
    from core.catalog import Spec

__all__ = ["register", "selection_from_args"]


def selection_from_args(args: argparse.Namespace) -> Selection:
    """The selection of ``--dataset``, ``--runs``, ``--score-field``, ``--filter``, ``--option``.

    Returns:
        A :class:`core.selection.Selection`.

    Raises:
        ValueError: a malformed ``--filter`` or ``--option``.
    """
    filters: dict[str, tuple[str, ...]] = {}
    for item in args.filter or []:
        col, sep, values = item.partition("=")
        if not sep or not col.strip():
            raise ValueError(f"bad --filter {item!r}; expected COLUMN=V1,V2")
        filters[col.strip()] = tuple(split_csv(values))
    options: dict[str, Any] = {}
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad --option {item!r}; expected KEY=JSON")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    runs = tuple(split_csv(args.runs))
    return Selection(
        dataset=args.dataset, runs=runs, score_field=args.score_field, filters=filters,
        options=options,
    )  # fmt: skip


def _settings(args: argparse.Namespace) -> ExportSettings:
    return ExportSettings(
        width=args.width, height=args.height, font_size=args.font_size, template=args.template,
        scale=args.scale, float_digits=args.digits,
    ).checked()  # fmt: skip


def _store_and_selection(args: argparse.Namespace, spec: Spec) -> tuple[Store, Selection]:
    store = open_store(args)
    sel = selection_from_args(args)
    for param in spec.options:  # a bad --option value fails before any work, naming it
        option(sel, param)
    return store, resolve_selection(store, sel)


def _cmd_figure(args: argparse.Namespace) -> int:
    # the catalog imports every view and plot: only when an export runs, not for --help
    from core.catalog import figure_names, get_figure

    if args.list:
        print("\n".join(figure_names()))
        return 0
    if not args.name or not args.out:
        raise ValueError("export figure needs NAME and --out FILE.{png,svg,pdf,csv} (or --list)")
    settings = _settings(args)
    store, sel = _store_and_selection(args, get_figure(args.name))
    if Path(args.out).suffix.lower() != ".csv":
        start_renderer()
    info = export_figure(store, args.name, sel, args.out, settings)
    print(f"wrote {info['path']} ({info['format']}, {info['bytes']:,} bytes, "
          f"{info['rows']} data rows)")  # fmt: skip
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from core.catalog import get_table, table_names  # on use: see _cmd_figure

    if args.list:
        print("\n".join(table_names()))
        return 0
    if not args.name or not args.out:
        raise ValueError("export table needs NAME and --out FILE (or --list)")
    settings = _settings(args)
    store, sel = _store_and_selection(args, get_table(args.name))
    info = export_table(store, args.name, sel, args.out, fmt=args.format, settings=settings)
    print(f"wrote {info['path']} ({info['format']}, {info['rows']} rows)")
    return 0


def register(groups: Groups) -> None:
    """Add ``export figure`` and ``export table``."""
    d = ExportSettings()

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("name", nargs="?", help="registered name (see --list)")
        p.add_argument("--list", action="store_true", help="print the names, one per line")
        p.add_argument("--dataset", help="dataset name (default: every dataset of the runs)")
        p.add_argument("--runs", help="comma-separated run ids (default: all of the dataset)")
        add_argument(p, SCORE_FIELD)
        p.add_argument("--filter", action="append", metavar="COL=V1,V2",
                       help="keep instances whose metadata cell is one of the values")
        p.add_argument("--option", action="append", metavar="KEY=JSON",
                       help='view option, e.g. --option ks=[1,3,5] --option retrievers=["lexical"]')
        p.add_argument("--out", type=Path, help="output file")
        p.add_argument("--digits", type=int, default=d.float_digits, help="float decimals")
        p.add_argument("--width", type=int, default=d.width, help=f"px (default {d.width})")
        p.add_argument("--height", type=int, default=d.height, help=f"px (default {d.height})")
        p.add_argument("--font-size", type=int, default=d.font_size, help="base font size")
        p.add_argument("--template", default=d.template, choices=TEMPLATES, help="plotly template")
        p.add_argument("--scale", type=float, default=d.scale, help="PNG pixel multiplier")
        add_db(p)

    fig = groups.export.add_parser("figure", help="a figure as PNG / SVG / PDF (or its CSV data)")
    common(fig)
    fig.set_defaults(handler=_cmd_figure)
    tab = groups.export.add_parser("table", help="a table as CSV or LaTeX (booktabs)")
    common(tab)
    tab.add_argument("--format", choices=TABLE_FORMATS, default=None,
                     help="csv or latex (default: from the --out suffix)")  # fmt: skip
    tab.set_defaults(handler=_cmd_table)
