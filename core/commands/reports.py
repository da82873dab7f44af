"""Results import, re-scoring and the ONCU reports (SPEC §6, issue 3).

``import results`` brings existing per-sample outputs in as runs; ``score`` recomputes the
``scores`` table from predictions; ``report oncu | failures | paired`` print what the Conditions
& ONCU page shows, as JSON with ``--json`` (numbers are the page's: same functions).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.jsonable import json_plain
from core.oncu import (
    DEFAULT_GROUP_KEY,
    LENGTH_RULE,
    SCORE_FIELDS,
    SMALL_GROUP,
    condition_contrast,
    failure_breakdown,
    oncu_summary,
)
from core.results import RESULT_FORMATS, import_results, score_runs
from core.scoring import FAILURE_LABELS
from core.store import Store

__all__ = ["failures_report", "oncu_report", "paired_report", "register"]


def oncu_report(
    store: Store,
    run: str | None = None,
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] | None = None,
) -> list[dict]:
    """One object per (run, contextual condition): the ONCU headline and its audit.

    Args:
        store: the store.
        run: a run id or a dataset name (its runs); None for every run.
        score_field: ``f1_relaxed`` (default), ``f1_strict``, ``em_strict`` or ``em_relaxed``.
        group_key: metadata columns that define a group (default
            :data:`core.oncu.DEFAULT_GROUP_KEY`, its length cell auto: exact on a small grid,
            else the length bucket; run, model and dataset are always added;
            ``["instance_id"]`` gives per-instance ONCU).

    Each object also carries ``n`` / ``missing`` (predictions of the condition / those with a
    NaN score, skipped), the key that ran (``group_key``, ``length_cell``), the valid groups'
    size distribution (``group_sizes``, ``median_group_size``, ``small_groups``),
    ``small_group_warning`` (most valid groups hold fewer than 5 instances) and
    ``coarser_group_key`` (a key to try then).
    """
    if score_field not in SCORE_FIELDS:
        raise ValueError(
            f"unknown score field '{score_field}' (allowed: {', '.join(SCORE_FIELDS)})"
        )
    frame = store.analysis_frame(store.resolve_runs(run))
    summary = oncu_summary(
        frame, score_field=score_field, group_key=tuple(group_key or DEFAULT_GROUP_KEY)
    )
    keep = (
        "run", "model", "dataset", "condition", "score_field", "valid_groups", "total_groups",
        "n", "missing", "oncu_clipped", "oncu_raw_mean", "oncu_weighted", "oncu_ci_low",
        "oncu_ci_high", "n_above_oracle", "n_below_baseline", "invalid_reasons", "s_none",
        "s_oracle", "s_c", "sample_means", "group_key", "length_cell", "group_sizes",
        "median_group_size", "small_groups", "small_group_warning", "coarser_group_key",
    )  # fmt: skip
    return [json_plain({k: row[k] for k in keep}) for row in summary.to_dict("records")]


def failures_report(store: Store, run: str) -> list[dict]:
    """Failure-label percentages per (run, condition) (seed 000 App. A.5; strict EM = correct)."""
    frame = store.analysis_frame(store.resolve_runs(run))
    return [json_plain(r) for r in failure_breakdown(frame).to_dict("records")]


def paired_report(
    store: Store, run: str, a: str, b: str, score_field: str = "f1_relaxed"
) -> list[dict]:
    """Paired contrast ``a - b`` per run, aligned by instance (SPEC §6.6)."""
    frame = store.analysis_frame(store.resolve_runs(run))
    present = set(frame["condition"])
    for cond in (a, b):
        if cond not in present:
            raise ValueError(
                f"condition '{cond}' has no predictions in run(s) '{run}' "
                f"(present: {', '.join(sorted(present))})"
            )
    out = condition_contrast(frame, a, b, score_field=score_field)
    return [json_plain(r) for r in out.to_dict("records")]


# ---------------------------------------------------------------------------- handlers
def _cmd_import_results(args: argparse.Namespace) -> int:
    res = import_results(
        open_store(args), args.file, name=args.name, fmt=args.format, dataset=args.dataset,
        replace=args.replace,
    )  # fmt: skip
    print(f"{args.file}: {res.summary()}")
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    store = open_store(args)
    runs = store.resolve_runs(args.run)
    n = score_runs(store, runs)
    print(f"re-scored {n} predictions of {len(runs)} run(s): {', '.join(runs)}")
    return 0


def _print_table(rows: list[dict], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) or "-"
    return "-" if v is None else str(v)


def _cmd_report_oncu(args: argparse.Namespace) -> int:
    rows = oncu_report(open_store(args), args.run, args.score_field, split_csv(args.group_key))
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            r["groups"] = f"{r['valid_groups']}/{r['total_groups']}"
            r["ci"] = f"[{_fmt(r['oncu_ci_low'])}, {_fmt(r['oncu_ci_high'])}]"
            r["sizes"] = _sizes_text(r)
        _print_table(
            rows,
            ["run", "condition", "groups", "n", "missing", "oncu_clipped", "ci",
             "oncu_raw_mean", "oncu_weighted", "n_above_oracle", "n_below_baseline",
             "invalid_reasons", "sizes"],
        )  # fmt: skip
        if rows:
            print(f"group key: {', '.join(rows[0]['group_key']) or '(unit only)'}")
        for line in _small_group_warnings(rows):
            print(line)
    return 0


def _sizes_text(r: dict) -> str:
    """``n=1: 3, n=2-4: 3, n>=5: 2; median 2`` (valid groups' instance counts)."""
    sizes = ", ".join(f"{k}: {v}" for k, v in (r.get("group_sizes") or {}).items())
    median = r.get("median_group_size")
    median = f"{median:g}" if isinstance(median, float) else _fmt(median)
    return f"{sizes}; median {median}"


def _small_group_warnings(rows: list[dict]) -> list[str]:
    """One loud line per (run, condition) whose valid groups are mostly small, and a hint."""
    out = []
    for r in rows:
        if r.get("small_group_warning"):
            out.append(
                f"WARNING: {r['run']} {r['condition']}: {r['small_groups']} of "
                f"{r['valid_groups']} valid ONCU groups have fewer than {SMALL_GROUP} "
                f"instances ({_sizes_text(r)}); the headline averages tiny groups"
            )
    coarser = next((r.get("coarser_group_key") for r in rows if r.get("small_group_warning")),
                   None)  # fmt: skip
    if out and coarser is not None:
        key = ",".join(coarser)
        out.append(
            f"  try a coarser key: --group-key {key}" if key
            else "  no coarser key helps: the units themselves are small"
        )  # fmt: skip
    return out


def _cmd_report_failures(args: argparse.Namespace) -> int:
    rows = failures_report(open_store(args), args.run)
    if args.json:
        print_json(rows)
    else:
        _print_table(rows, ["run", "condition", "n", *FAILURE_LABELS])
    return 0


def _cmd_report_paired(args: argparse.Namespace) -> int:
    rows = paired_report(open_store(args), args.run, args.a, args.b, args.score_field)
    if args.json:
        print_json(rows[0] if len(rows) == 1 else rows)
    else:
        _print_table(rows, ["run", "contrast", "n", "mean", "ci_low", "ci_high", "effect", "p"])
    return 0


# ---------------------------------------------------------------------------- parser
def register(groups: Groups) -> None:
    """Add ``import results``, ``score`` and ``report oncu | failures | paired``."""
    imp = groups.import_.add_parser(
        "results", help="import per-sample outputs as runs, re-scored (no model needed)"
    )
    imp.add_argument("--format", required=True, choices=RESULT_FORMATS, help="file format")
    imp.add_argument("file", type=Path, help="e.g. *.per_sample_metrics.csv of the ONCU release")
    imp.add_argument("--name", required=True, help="run id (and dataset name when created)")
    imp.add_argument("--dataset", help="attach to this stored dataset instead of creating one")
    imp.add_argument("--replace", action="store_true", help="replace runs of the same name")
    add_db(imp)
    imp.set_defaults(handler=_cmd_import_results)

    sc = groups.top.add_parser("score", help="recompute the scores table from predictions")
    sc.add_argument("--run", help="run id or dataset name (default: every run)")
    add_db(sc)
    sc.set_defaults(handler=_cmd_score)

    def _common(p: argparse.ArgumentParser, run_required: bool) -> None:
        p.add_argument(
            "--run", required=run_required, help="run id or dataset name (default: every run)"
        )
        p.add_argument(
            "--score-field", default="f1_relaxed", choices=SCORE_FIELDS,
            help="answer score (default f1_relaxed)",
        )  # fmt: skip
        p.add_argument("--json", action="store_true", help="print JSON")
        add_db(p)

    on = groups.report.add_parser("oncu", help="ONCU per run and condition (SPEC §6.5)")
    _common(on, run_required=False)
    on.add_argument(
        "--group-key",
        help="comma-separated metadata columns that define an ONCU group (default: source, "
        "model, reasoning_type, context_length, evidence_position, evidence_density, "
        "distractor_similarity; instance_id alone: per-instance ONCU). " + LENGTH_RULE,
    )
    on.set_defaults(handler=_cmd_report_oncu)

    fa = groups.report.add_parser("failures", help="failure-label percentages per condition")
    fa.add_argument("--run", required=True, help="run id or dataset name")
    fa.add_argument("--json", action="store_true", help="print JSON")
    add_db(fa)
    fa.set_defaults(handler=_cmd_report_failures)

    pa = groups.report.add_parser("paired", help="paired contrast of two conditions (§6.6)")
    _common(pa, run_required=True)
    pa.add_argument("--a", default="retrieved", help="condition a (default retrieved)")
    pa.add_argument("--b", default="full_context", help="condition b (default full_context)")
    pa.set_defaults(handler=_cmd_report_paired)
