"""``export figure`` / ``export table``: the dashboard's figures and tables as files for papers.

``python -m core export figure NAME --db PATH [--dataset D] [--runs R1,R2] [--score-field F]
[--filter COL=V1,V2] [--option KEY=JSON] [--width W --height H --font-size S | --preset NAME]
[--template T --scale X] --out FILE.{png,svg,pdf,csv}``; ``--preset`` (a venue width in inches,
fonts in points: :data:`core.export.render.PRESETS`) excludes
``--width``/``--height``/``--font-size``;
``python -m core export table NAME --format csv|latex --out FILE``; ``python -m core export case
--dataset D --instance I [--runs R] --out FILE.{tex,pdf,svg,png}`` (the case card,
:mod:`core.export.case_card`); ``--list`` prints the
registered names, one per line. The same registered view and plot render the pages
(:mod:`core.views.catalog`), so a file matches what the page shows. ``--score-field`` is built from
the figures' declaration (:data:`core.figures.SCORE_FIELD`); ``--option`` values are checked by
the declared options of :data:`core.views.catalog.OPTIONS` when the figure or table reads them.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.commands import Groups, add_db, open_store, split_csv
from core.export.numbers import provenance_comment
from core.export.outpaths import check_out_path
from core.export.render import (
    PRESETS,
    TABLE_FORMATS,
    TEMPLATES,
    ExportSettings,
    export_figure,
    export_table,
    figure_bytes,
    start_renderer,
)
from core.export.tables import table_file_stem
from core.figures import SCORE_FIELD
from core.names import ellipsize
from core.params import add_argument
from core.selection import Selection, option
from core.store import Store
from core.views import resolve_selection

if TYPE_CHECKING:  # the catalog is imported when an export runs (see _cmd_figure)
    from core.views.catalog import Spec

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
        except RecursionError:
            raise ValueError(
                f"--option {ellipsize(key.strip())}: the value is nested too deeply"
            ) from None
    runs = run_names(args.runs)
    return Selection(
        dataset=args.dataset,
        runs=runs,
        score_field=args.score_field,
        filters=filters,
        options=options,
    )


def _settings(args: argparse.Namespace) -> ExportSettings:
    d = ExportSettings()
    preset = getattr(args, "preset", None)
    sized = [f for f in ("width", "height", "font_size") if getattr(args, f) is not None]
    if preset is not None and sized:
        flags = ", ".join("--" + f.replace("_", "-") for f in sized)
        raise ValueError(f"--preset {preset} sets the width, height and font size; drop {flags}")
    return ExportSettings(
        width=d.width if args.width is None else args.width,
        height=d.height if args.height is None else args.height,
        font_size=d.font_size if args.font_size is None else args.font_size,
        template=args.template,
        scale=args.scale,
        float_digits=args.digits,
        preset=preset,
    ).checked()


def run_names(values: str | list[str] | None) -> tuple[str, ...]:
    """The run ids of ``--runs`` (repeatable): comma-separated, a name holding a comma quoted.

    ``--runs a,b --runs c`` gives a, b, c; ``--runs '"x, y",b'`` gives ``x, y`` and b (CSV
    quoting, as a spreadsheet writes it).
    """
    given = [values] if isinstance(values, str) else list(values or [])
    names: list[str] = []
    for value in given:
        for row in csv.reader([value], skipinitialspace=True):
            names.extend(n.strip() for n in row if n.strip())
    return tuple(dict.fromkeys(names))


#: Older ``--option`` names still read (:func:`core.views.fanin`): name -> declared name.
_OPTION_ALIASES = {"retrievers": "crux_retrievers", "ks": "crux_ks"}


def _store_and_selection(args: argparse.Namespace, spec: Spec) -> tuple[Store, Selection]:
    store = open_store(args)
    sel = selection_from_args(args)
    declared = {param.name for param in spec.options}
    unknown = sorted(
        k for k in sel.options if k not in declared and _OPTION_ALIASES.get(k) not in declared
    )
    if unknown:
        valid = ", ".join(sorted(declared)) or "none"
        raise ValueError(
            f"unknown --option {ellipsize(', '.join(unknown))} for "
            f"{spec.name}; its options: {valid}"
        )
    for param in spec.options:  # a bad --option value fails before any work, naming it
        option(sel, param)
    if sel.dataset is not None and not store.has_dataset(sel.dataset):
        names = ", ".join(store.dataset_names()) or "none"
        raise ValueError(
            f"--dataset {ellipsize(sel.dataset)}: no such dataset in {store.path} "
            f"(stored: {ellipsize(names)})"
        )
    return store, resolve_selection(store, sel)


def _cmd_figure(args: argparse.Namespace) -> int:
    # the catalog imports every view and plot: only when an export runs, not for --help
    from core.views.catalog import figure_names, get_figure

    if args.list:
        print("\n".join(figure_names()))
        return 0
    if not args.name or not args.out:
        raise ValueError("export figure needs NAME and --out FILE.{png,svg,pdf,csv} (or --list)")
    settings = _settings(args)
    check_out_path(args.out)
    store, sel = _store_and_selection(args, get_figure(args.name))
    if Path(args.out).suffix.lower() != ".csv":
        start_renderer()
    info = export_figure(store, args.name, sel, args.out, settings)
    print(
        f"wrote {info['path']} ({info['format']}, {info['bytes']:,} bytes, "
        f"{info['rows']} data rows)"
    )
    if info.get("layout"):  # what the layout could not keep at this size, and what would
        print(info["layout"])
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from core.views.catalog import get_table, table_names  # on use: see _cmd_figure

    if args.list:
        print("\n".join(table_names()))
        return 0
    if not args.name:
        raise ValueError("export table needs NAME (or --list)")
    settings = _settings(args)
    out: Path | None = args.out
    named = out is None or out.is_dir() or not out.suffix  # a folder: the name is made here
    fmt = args.format or ("latex" if named else out.suffix)
    latex_only = args.columns or args.caption is not None or args.label is not None
    if fmt.lower().lstrip(".") == "csv" and latex_only:
        raise ValueError(
            "--columns, --caption and --label shape the LaTeX table; CSV keeps "
            "every column (use --format latex)"
        )
    store, sel = _store_and_selection(args, get_table(args.name))
    if named:  # a name that carries the dataset and runs: two exports do not overwrite
        stem = table_file_stem(args.name, sel.dataset, sel.runs)
        out = (out or Path(".")) / (stem + (".csv" if fmt == "csv" else ".tex"))
    check_out_path(out)
    info = export_table(
        store,
        args.name,
        sel,
        out,
        fmt=fmt,
        settings=settings,
        columns=split_csv(args.columns) or None,
        caption=args.caption,
        label=args.label,
        csv_beside=True,
    )
    beside = f"; wrote {info['csv']} (csv, every column)" if "csv" in info else ""
    print(f"wrote {info['path']} ({info['format']}, {info['rows']} rows){beside}")
    return 0


def _cmd_case(args: argparse.Namespace) -> int:
    from core.export.case_card import CARD_SETTINGS, case_card_figure, case_card_latex
    from core.views.case import case_data

    store = open_store(args)
    runs = split_csv(args.runs) if args.runs else []
    case = case_data(store, args.dataset, args.instance, runs, args.score_field)
    suffix = args.out.suffix.lower().lstrip(".")
    if suffix in ("tex", "latex"):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = (
            f"python -m core export case --dataset {args.dataset} --instance {args.instance}"
            + (f" --runs {','.join(runs)}" if runs else "")
            + f" --score-field {args.score_field} --out {args.out.name}"
        )
        what = f"case card of instance {args.instance} of {args.dataset}"
        shown = sorted({str(r) for r in case["predictions"].get("run", [])}) or runs
        head = provenance_comment(store, shown, what, "SPEC §11 (the Case view)", cmd)
        args.out.write_text(head + case_card_latex(case, args.score_field), encoding="utf-8")
        print(f"wrote {args.out} (latex case card)")
        return 0
    if suffix not in ("png", "svg", "pdf"):
        raise ValueError(f"{args.out}: --out must end in .tex, .png, .svg or .pdf")
    start_renderer()
    data = figure_bytes(case_card_figure(case, args.score_field), suffix, CARD_SETTINGS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({suffix} case card, {len(data):,} bytes)")
    return 0


def register(groups: Groups) -> None:
    """Add ``export figure``, ``export table`` and ``export case``."""
    d = ExportSettings()

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("name", nargs="?", help="registered name (see --list)")
        p.add_argument("--list", action="store_true", help="print the names, one per line")
        p.add_argument("--dataset", help="dataset name (default: every dataset of the runs)")
        p.add_argument(
            "--runs",
            action="append",
            help="comma-separated run ids, repeatable; quote a name holding a comma "
            "(--runs '\"a, b\",c'; default: all of the dataset)",
        )
        add_argument(p, SCORE_FIELD)
        p.add_argument(
            "--filter",
            action="append",
            metavar="COL=V1,V2",
            help="keep instances whose metadata cell is one of the values",
        )
        p.add_argument(
            "--option",
            action="append",
            metavar="KEY=JSON",
            help='view option, e.g. --option ks=[1,3,5] --option retrievers=["lexical"]',
        )
        p.add_argument("--out", type=Path, help="output file")
        p.add_argument("--digits", type=int, default=d.float_digits, help="float decimals")
        p.add_argument("--width", type=int, default=None, help=f"px (default {d.width})")
        p.add_argument("--height", type=int, default=None, help=f"px (default {d.height})")
        p.add_argument(
            "--font-size",
            type=int,
            default=None,
            help=f"base font size, px (default {d.font_size})",
        )
        p.add_argument("--template", default=d.template, choices=TEMPLATES, help="plotly template")
        p.add_argument("--scale", type=float, default=d.scale, help="PNG pixel multiplier")
        add_db(p)

    fig = groups.export.add_parser("figure", help="a figure as PNG / SVG / PDF (or its CSV data)")
    common(fig)
    fig.add_argument(
        "--preset",
        metavar="NAME",
        default=None,
        help="venue size instead of --width/--height/--font-size: "
        + ", ".join(f"{p.name} ({p.width_in:.2f} in, {p.font_pt:g} pt)" for p in PRESETS.values()),
    )
    fig.set_defaults(handler=_cmd_figure)
    tab = groups.export.add_parser("table", help="a table as CSV or LaTeX (booktabs)")
    common(tab)
    tab.add_argument(
        "--format",
        choices=TABLE_FORMATS,
        default=None,
        help="csv or latex (default: from the --out suffix; latex when --out is "
        "a folder or left out, named NAME-DATASET-RUNS.tex). LaTeX is written "
        "with a .csv of every column beside it",
    )
    tab.add_argument(
        "--columns",
        metavar="A,B",
        help="LaTeX columns in order (default: the table's choice; a value's CI "
        "columns join it in one cell)",
    )
    tab.add_argument("--caption", help="LaTeX caption (default: title, dataset and runs)")
    tab.add_argument("--label", help="LaTeX label (default: tab:NAME)")
    tab.set_defaults(handler=_cmd_table)
    case = groups.export.add_parser(
        "case",
        help="one instance's case card (question, gold, passages shown, answers) "
        "as LaTeX (.tex) or a figure (.pdf/.svg/.png)",
    )
    case.add_argument("--dataset", required=True, help="dataset name")
    case.add_argument("--instance", required=True, help="instance id")
    case.add_argument("--runs", help="comma-separated run ids (default: all of the dataset)")
    add_argument(case, SCORE_FIELD)
    case.add_argument("--out", type=Path, required=True, help="FILE.tex, .pdf, .svg or .png")
    add_db(case)
    case.set_defaults(handler=_cmd_case)
