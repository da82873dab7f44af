"""``export numbers`` and ``report check-paper``: the paper's numbers as macros, and their check.

``python -m core export numbers --out numbers.tex [--runs R1,R2] [--score-field F]`` writes
one LaTeX macro per headline number with its provenance, and ``numbers.json`` beside it;
``python -m core report check-paper numbers.tex [paper.tex ...]`` recomputes them from the
store (:mod:`core.export.numbers`) and exits 1 when any changed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.export.numbers import check_paper, collect_numbers, numbers_json, numbers_tex
from core.oncu.metrics import SCORE_FIELDS
from core.store import Store

__all__ = ["register", "write_numbers"]


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder (never half a file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_numbers(
    store: Store, out: Path, runs: list[str] | None = None, score_field: str = "f1_relaxed"
) -> tuple[Path, Path, int]:
    """Write ``out`` (the macros) and its ``.json`` sidecar; returns both paths and the count.

    Raises:
        ValueError: the output path cannot be written, or no number could be computed.
    """
    out = Path(out)
    if out.suffix != ".tex":
        raise ValueError(f"--out {out}: the numbers file must end in .tex")
    if out.is_dir() or not out.parent.is_dir():
        why = "is a folder" if out.is_dir() else f"lies in {out.parent}, which is not a folder"
        raise ValueError(f"--out {out}: {why}")
    numbers, notes = collect_numbers(store, runs, score_field)
    if not numbers:
        raise ValueError(
            f"no number to export from {store.path}: no conditions, intervention or probe run "
            "with predictions" + (f" among {', '.join(runs)}" if runs else "")
        )
    side = numbers_json(store, numbers, notes, score_field)
    sidecar = out.with_suffix(".json")
    _atomic_write(sidecar, json.dumps(side, indent=2, ensure_ascii=False) + "\n")
    _atomic_write(out, numbers_tex(side))
    return out, sidecar, len(numbers)


def _cmd_numbers(args: argparse.Namespace) -> int:
    store = open_store(args)
    runs = split_csv(args.runs) or None
    out, sidecar, n = write_numbers(store, args.out, runs, args.score_field)
    print(f"wrote {n} macros to {out} (full precision and provenance in {sidecar})")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    store = open_store(args)
    res = check_paper(store, args.numbers, args.papers, args.score_field)
    if args.json:
        print_json(
            {
                "checked": res.n_checked,
                "changed": [
                    dict(zip(("macro", "old", "new", "why"), c, strict=True)) for c in res.changed
                ],
                "gone": [dict(zip(("macro", "old", "why"), g, strict=True)) for g in res.gone],
                "literals": [
                    dict(zip(("file", "line", "literal", "macros"), x, strict=True))
                    for x in res.literals
                ],
                "stale_uses": [
                    dict(zip(("file", "line", "macro"), x, strict=True)) for x in res.stale_uses
                ],
            }
        )
        return 1 if res.stale else 0
    for macro, old, new, why in res.changed:
        print(f"changed \\{macro}: {old} -> {new} ({why})")
    for macro, old, why in res.gone:
        print(f"gone    \\{macro}: {old} ({why})")
    for path, line, macro in res.stale_uses:
        print(f"{path}:{line}: uses \\{macro}, which the store no longer gives")
    for path, line, literal, macros in res.literals:
        shown = ", ".join(f"\\{m}" for m in macros[:3]) + (" ..." if len(macros) > 3 else "")
        print(f"{path}:{line}: {literal} typed literally equals {shown} (use the macro)")
    stale = len(res.changed) + len(res.gone)
    print(
        f"{res.n_checked} macros checked: {stale} out of date"
        + (f", {len(res.stale_uses)} stale uses in the paper" if res.stale_uses else "")
        + (f", {len(res.literals)} numbers typed literally" if res.literals else ""),
        file=sys.stderr if res.stale else sys.stdout,
    )
    return 1 if res.stale else 0


def register(groups: Groups) -> None:
    """Add ``export numbers`` and ``report check-paper``."""
    p = groups.export.add_parser(
        "numbers", help="every headline number as a LaTeX macro with its provenance"
    )
    p.add_argument("--out", type=Path, required=True, help="the .tex file to write (and .json)")
    p.add_argument("--runs", default=None, help="runs to export (comma-separated; default all)")
    p.add_argument(
        "--score-field",
        choices=SCORE_FIELDS,
        default="f1_relaxed",
        help="answer score of the ONCU numbers (default f1_relaxed)",
    )
    add_db(p)
    p.set_defaults(handler=_cmd_numbers)
    c = groups.report.add_parser(
        "check-paper", help="recompute the macros of 'export numbers' and list what changed"
    )
    c.add_argument("numbers", type=Path, help="the numbers .tex file written by export numbers")
    c.add_argument("papers", type=Path, nargs="*", help="the paper's .tex files to scan")
    c.add_argument(
        "--score-field",
        choices=SCORE_FIELDS,
        default=None,
        help="answer score (default: the numbers' own)",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    add_db(c)
    c.set_defaults(handler=_cmd_check)
