"""``export figure`` / ``export table``: the dashboard's figures and tables as files for papers.

``python -m core export figure NAME --db PATH [--dataset D] [--runs R1,R2] [--score-field F]
[--filter COL=V1,V2] [--width W --height H --font-size S --template T --scale X]
--out FILE.{png,svg,pdf,csv}``; ``python -m core export table NAME --format csv|latex --out
FILE``; ``--list`` prints the registered names, one per line. The same registered builders
render the pages (:mod:`core.figures`), so a file matches what the page shows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.commands import Groups, split_csv

__all__ = ["register", "selection_from_args"]


def selection_from_args(args: argparse.Namespace) -> Any:
    """The :class:`core.figures.Selection` of ``--dataset``, ``--runs``, ``--score-field``,
    ``--filter`` and ``--option``."""
    import json

    from core.figures import Selection

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


def _settings(args: argparse.Namespace) -> Any:
    from core.export import ExportSettings

    return ExportSettings(
        width=args.width, height=args.height, font_size=args.font_size, template=args.template,
        scale=args.scale, float_digits=args.digits,
    ).checked()  # fmt: skip


def _store_and_selection(args: argparse.Namespace) -> tuple[Any, Any]:
    from core.cli import open_store
    from core.views import resolve_selection

    store = open_store(args)
    return store, resolve_selection(store, selection_from_args(args))


def _cmd_figure(args: argparse.Namespace) -> int:
    from core.figures import figure_names

    if args.list:
        print("\n".join(figure_names()))
        return 0
    if not args.name or not args.out:
        raise ValueError("export figure needs NAME and --out FILE.{png,svg,pdf,csv} (or --list)")
    from core.export import export_figure, start_renderer

    settings = _settings(args)
    store, sel = _store_and_selection(args)
    if Path(args.out).suffix.lower() != ".csv":
        start_renderer()
    info = export_figure(store, args.name, sel, args.out, settings)
    print(f"wrote {info['path']} ({info['format']}, {info['bytes']:,} bytes, "
          f"{info['rows']} data rows)")  # fmt: skip
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from core.figures import table_names

    if args.list:
        print("\n".join(table_names()))
        return 0
    if not args.name or not args.out:
        raise ValueError("export table needs NAME and --out FILE (or --list)")
    from core.export import export_table

    settings = _settings(args)
    store, sel = _store_and_selection(args)
    info = export_table(store, args.name, sel, args.out, fmt=args.format, settings=settings)
    print(f"wrote {info['path']} ({info['format']}, {info['rows']} rows)")
    return 0


def register(groups: Groups) -> None:
    """Add ``export figure`` and ``export table``."""
    from core.cli import add_db
    from core.export import TABLE_FORMATS, TEMPLATES, ExportSettings
    from core.oncu import SCORE_FIELDS

    d = ExportSettings()

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("name", nargs="?", help="registered name (see --list)")
        p.add_argument("--list", action="store_true", help="print the names, one per line")
        p.add_argument("--dataset", help="dataset name (default: every dataset of the runs)")
        p.add_argument("--runs", help="comma-separated run ids (default: all of the dataset)")
        p.add_argument("--score-field", default="f1_relaxed", choices=SCORE_FIELDS,
                       help="answer score (default f1_relaxed)")  # fmt: skip
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
