"""Results import, re-scoring and the ONCU reports (SPEC §6, issue 3).

``import results`` brings existing per-sample outputs in as runs; ``score`` recomputes the
``scores`` table from predictions; ``report oncu | failures | paired`` print what the Conditions
& ONCU page shows, as JSON with ``--json`` (numbers are the page's: same functions).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.commands import Groups, add_db, add_with_runs, open_store, print_json, split_csv
from core.datasets.results import (
    RESULT_FORMATS,
    group_release_files,
    import_results,
    score_runs,
)
from core.jsonable import json_plain
from core.oncu.metrics import (
    DEFAULT_GROUP_KEY,
    LENGTH_RULE,
    SCALING_DISTANCES,
    SCORE_FIELDS,
    SMALL_GROUP,
    condition_contrast,
    failure_breakdown,
    length_label,
    oncu_summary,
    scaling_report,
)
from core.scoring.reparse import reparse_runs
from core.scoring.rows import FAILURE_LABELS
from core.stats.inference import OLS_P_TESTS, P_TESTS, format_p, p_label
from core.store import Store, StoreError
from core.types import DataError

__all__ = [
    "STORE_PATH_PREDICTIONS",
    "failures_report",
    "oncu_report",
    "paired_report",
    "register",
    "scaling_report_json",
]

#: Above this many predictions, ``report oncu`` computes in the store
#: (:func:`core.oncu.cells.store_oncu_summary`: the same table, means to their last bits)
#: instead of reading every prediction into a frame (a study's 10M: 25 s and 12 GB).
STORE_PATH_PREDICTIONS = 1_000_000

#: What ``default_name`` strips from a results file's name.
_RESULTS_SUFFIX = ".per_sample_metrics.csv"


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
            :data:`core.oncu.metrics.DEFAULT_GROUP_KEY`, its length cell auto: exact on a small
            grid,
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
    runs = store.resolve_runs(run)
    key = tuple(group_key or DEFAULT_GROUP_KEY)
    counts = store.runs_frame(live=False).set_index("run_id")["n_predictions"]
    if "instance_id" not in key and int(counts.reindex(runs).fillna(0).sum()) > (
        STORE_PATH_PREDICTIONS
    ):
        from core.oncu.cells import store_oncu_summary

        summary = store_oncu_summary(store, runs, score_field, key)
    else:
        summary = oncu_summary(store.analysis_frame(runs), score_field=score_field, group_key=key)
    keep = (
        "run",
        "model",
        "dataset",
        "condition",
        "score_field",
        "valid_groups",
        "total_groups",
        "n",
        "missing",
        "oncu_clipped",
        "oncu_raw_mean",
        "oncu_weighted",
        "oncu_ci_low",
        "oncu_ci_high",
        "n_above_oracle",
        "n_below_baseline",
        "invalid_reasons",
        "s_none",
        "s_oracle",
        "s_c",
        "sample_means",
        "group_key",
        "length_cell",
        "group_sizes",
        "median_group_size",
        "small_groups",
        "small_group_warning",
        "coarser_group_key",
    )
    return [json_plain({k: row[k] for k in keep}) for row in summary.to_dict("records")]


def failures_report(store: Store, run: str) -> list[dict]:
    """Failure-label percentages per (run, condition) (seed 000 App. A.5; strict EM = correct)."""
    frame = store.analysis_frame(store.resolve_runs(run))
    return [json_plain(r) for r in failure_breakdown(frame).to_dict("records")]


def paired_report(
    store: Store,
    run: str,
    a: str,
    b: str,
    score_field: str = "f1_relaxed",
    p_test: str = "normal",
) -> list[dict]:
    """Paired contrast ``a - b`` per run, aligned by instance (SPEC §6.6; seed 000 §7.6).

    ``p`` is the two-sided p of ``p_test`` (``normal``, the published default, or
    ``bootstrap``); ``p_holm`` is Holm across the runs reported (Table 29's family).
    """
    frame = store.analysis_frame(store.resolve_runs(run))
    present = set(frame["condition"])
    for cond in (a, b):
        if cond not in present:
            raise ValueError(
                f"condition '{cond}' has no predictions in run(s) '{run}' "
                f"(present: {', '.join(sorted(present))})"
            )
    out = condition_contrast(frame, a, b, score_field=score_field, p_test=p_test)
    return [json_plain(r) for r in out.to_dict("records")]


def scaling_report_json(
    store: Store,
    run: str | None = None,
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] | None = None,
    distance: str = "middle",
    n_resamples: int = 5000,
    p_test: str = "normal",
    ols_p_test: str = "normal",
) -> dict[str, Any]:
    """Length-position scaling statistics (SPEC §6.7; seed 000 §8.11, Tables 10, 29, 30).

    ``p_test`` / ``ols_p_test``: the contrasts' p (``normal``, published, or ``bootstrap``)
    and the OLS p (``normal``, published, or ``t``).

    Returns:
        ``{"score_field", "distance", "p_test", "ols_p_test", "by_length", "contrasts",
        "regression", "notes"}``: per (run, condition, length) mean clipped ONCU; per run the
        three paired contrasts with ``p_holm`` (Holm across every run's contrasts); per
        (run, condition) the OLS terms with ``p_bh`` (Benjamini-Hochberg across every
        regression row); ``notes`` one line per
        statistic the data cannot support or that left cells out (``level`` ``warning``
        where the number is missing, ``note`` where it was computed on part of the cells).
        Non-finite numbers (an effect with sd 0) are null.
    """
    if score_field not in SCORE_FIELDS:
        raise ValueError(
            f"unknown score field '{score_field}' (allowed: {', '.join(SCORE_FIELDS)})"
        )
    frame = store.analysis_frame(store.resolve_runs(run))
    if "variant" in frame.columns:
        frame = frame[frame["variant"].fillna("") == ""]
    rep = scaling_report(
        frame,
        score_field,
        tuple(group_key or DEFAULT_GROUP_KEY),
        n_resamples=n_resamples,
        distance=distance,
        p_test=p_test,
        ols_p_test=ols_p_test,
    )
    out: dict[str, Any] = {
        "score_field": score_field,
        "distance": distance,
        "p_test": p_test,
        "ols_p_test": ols_p_test,
    }
    for part in ("by_length", "contrasts", "regression"):
        out[part] = [_finite(json_plain(r)) for r in rep[part].to_dict("records")]
    notes = []
    for r in out["by_length"]:
        if r["note"]:
            notes.append(
                {
                    "level": "warning",
                    "run": r["run"],
                    "statistic": (f"ONCU {r['condition']} {length_label(r['context_length'])}"),
                    "note": r["note"],
                }
            )
    for r in out["contrasts"]:
        if r["note"]:
            level = "warning" if r["mean"] is None else "note"
            notes.append(
                {"level": level, "run": r["run"], "statistic": r["label"], "note": r["note"]}
            )
    seen = set()
    for r in out["regression"]:
        if r["note"] and (r["run"], r["condition"]) not in seen:
            seen.add((r["run"], r["condition"]))
            level = "warning" if r["coefficient"] is None else "note"
            notes.append(
                {
                    "level": level,
                    "run": r["run"],
                    "statistic": f"scaling OLS {r['condition']}",
                    "note": r["note"],
                }
            )
    out["notes"] = notes
    return out


def _finite(row: dict) -> dict:
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


# ---------------------------------------------------------------------------- handlers
def _cmd_import_results(args: argparse.Namespace) -> int:
    """Import each run in turn (files grouped by run), each all-or-nothing; stop at a bad one."""
    files: list[Path] = args.file
    groups = group_release_files(files)
    # one CSV per run, each given by name: the messages speak of files, as they always did
    unit = "file" if len(groups) == len(files) else "run"
    if args.name is not None and len(groups) > 1:
        given = (
            f"{len(files)} files were given"
            if unit == "file"
            else f"the files hold {len(groups)} runs ({', '.join(g.name for g in groups)})"
        )
        raise ValueError(
            f"--name names one import, but {given}: drop --name and each "
            f"file's runs (and dataset) are named after the file (less {_RESULTS_SUFFIX!r})"
        )
    names = [args.name if args.name is not None else g.name for g in groups]
    for i, name in enumerate(names):
        if name in names[:i]:
            j = names.index(name)
            raise ValueError(
                f"{groups[j].metrics} and {groups[i].metrics} would both be imported as "
                f"'{name}'; import them one at a time with --name"
            )
    store = open_store(args)
    done: list[str] = []
    for group, name in zip(groups, names, strict=True):
        try:
            res = import_results(
                store,
                group,
                name=name,
                fmt=args.format,
                dataset=args.dataset,
                replace=args.replace,
                with_runs=args.with_runs,
            )
        except (DataError, StoreError, ValueError) as exc:
            if not done:
                raise
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(
                f"error: {why} (nothing of this {unit} was stored; stopped at {unit} "
                f"{len(done) + 1} of {len(groups)}; the {len(done)} {unit}(s) before it stay "
                f"imported: {', '.join(done)})",
                file=sys.stderr,
            )
            return 1
        print(f"{group.metrics}: {res.summary()}", flush=True)
        done.append(str(group.metrics))
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    store = open_store(args)
    runs = store.resolve_runs(args.run)
    with store.transaction() as con:  # re-parse and re-score together, or neither
        parsed = reparse_runs(con, runs)
        n = score_runs(store, runs, con=con)
    print(f"re-scored {n} predictions of {len(runs)} run(s): {', '.join(runs)}")
    print(parsed.summary())
    for run in store.changed_runs():  # issue 35 item 1: never re-based silently
        if run["run_id"] in runs:
            print(
                f"warning: run '{run['run_id']}': {run['why']} (dataset "
                f"'{run['dataset_id']}'); its predictions were made on other instances or "
                "gold than the ones it is now scored against",
                file=sys.stderr,
            )
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
            [
                "run",
                "condition",
                "groups",
                "n",
                "missing",
                "oncu_clipped",
                "ci",
                "oncu_raw_mean",
                "oncu_weighted",
                "n_above_oracle",
                "n_below_baseline",
                "invalid_reasons",
                "sizes",
            ],
        )
        if rows:
            print(f"group key: {', '.join(rows[0]['group_key']) or '(unit only)'}")
        for line in _small_group_warnings(rows):
            print(line)
        conds = {r["condition"] for r in rows}
        if {"retrieved", "full_context"} <= conds:
            # seed 000 Table 29's paired contrast, with its published p (issue 34)
            pairs = paired_report(
                open_store(args),
                args.run,
                "retrieved",
                "full_context",
                args.score_field,
                args.p_test,
            )
            print(
                f"\nPaired retrieved - full_context, {args.score_field} (seed 000 §7.6, Table 29)"
            )
            _print_paired(pairs, args.p_test)
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
    coarser = next((r.get("coarser_group_key") for r in rows if r.get("small_group_warning")), None)
    if out and coarser is not None:
        key = ",".join(coarser)
        out.append(
            f"  try a coarser key: --group-key {key}"
            if key
            else "  no coarser key helps: the units themselves are small"
        )
    return out


def _cmd_report_failures(args: argparse.Namespace) -> int:
    rows = failures_report(open_store(args), args.run)
    if args.json:
        print_json(rows)
    else:
        _print_table(rows, ["run", "condition", "n", *FAILURE_LABELS])
    return 0


def _cmd_report_paired(args: argparse.Namespace) -> int:
    rows = paired_report(open_store(args), args.run, args.a, args.b, args.score_field, args.p_test)
    if args.json:
        print_json(rows[0] if len(rows) == 1 else rows)
    else:
        _print_paired(rows, args.p_test)
    return 0


def _print_paired(rows: list[dict], p_test: str) -> None:
    """Paired contrasts, p named by its test and adjustment, ``< 0.001`` below 0.001."""
    raw, holm = p_label(p_test), p_label(p_test, "Holm across runs")
    for r in rows:
        r[raw], r[holm] = _p_text(r["p"]), _p_text(r["p_holm"])
    _print_table(rows, ["run", "contrast", "n", "mean", "ci_low", "ci_high", "effect", raw, holm])


def _p_text(p: Any) -> str:
    """``< 0.001`` below 0.001 (never 0), else three decimals; ``-`` when missing."""
    return format_p(p)


def _num(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}"


def _unit_label(rows: list[dict]) -> dict[str, str]:
    """Label per run: ``model / dataset`` (the paper's Model/Dataset), plus the run if ambiguous."""
    first = {}
    for r in rows:
        first.setdefault(r["run"], f"{r.get('model') or r['run']} / {r.get('dataset') or '-'}")
    counts: dict[str, int] = {}
    for label in first.values():
        counts[label] = counts.get(label, 0) + 1
    return {run: (f"{lab} [{run}]" if counts[lab] > 1 else lab) for run, lab in first.items()}


def _print_grid(header: list[str], rows: list[list[str]], top: list[str] | None = None) -> None:
    """Columns padded to their widest cell; ``top`` labels start above their column."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    if top is not None:
        starts = [i for i, t in enumerate(top) if t] + [len(top)]
        for i, j in zip(starts[:-1], starts[1:], strict=True):
            span = sum(widths[i:j]) + 2 * (j - i - 1)
            widths[j - 1] += max(0, len(top[i]) - span)
        line, start = "", 0
        for label, w in zip(top, widths, strict=True):
            if label:
                line = (line.ljust(start) if len(line) < start else line + " ") + label
            start += w + 2
        print(line)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _print_scaling(rep: dict[str, Any]) -> None:
    """Tables 30, 29 and 10 of seed 000 in the paper's layouts, then the notes."""
    labels = _unit_label(rep["by_length"] + rep["contrasts"] + rep["regression"])
    cond_name = {"full_context": "full context", "retrieved": "retrieved"}
    print(
        f"Scaling OLS over length x position cells (seed 000 Table 30; "
        f"{rep['score_field']}, distance from the {rep['distance']})"
    )
    reg = [r for r in rep["regression"] if r["term"] != "intercept"]
    ols_test = rep.get("ols_p_test", "normal")
    _print_grid(
        [
            "Analysis",
            "Model/Dataset",
            "Term",
            "Est.",
            "SE",
            p_label(ols_test),
            p_label(ols_test, "BH across rows"),
        ],
        [
            [
                f"Scaling OLS ({cond_name.get(r['condition'], r['condition'])})",
                labels[r["run"]],
                r["term"],
                _num(r["coefficient"]),
                _num(r["se"]),
                _p_text(r["p"]),
                _p_text(r["p_bh"]),
            ]
            for r in reg
        ],
    )
    for r in rep["regression"]:
        if r["term"] == "intercept":
            print(
                f"  fit {labels[r['run']]} {r['condition']}: {r['n']} cells, "
                f"{r['left_out']} left out, R² {_num(r['r_squared'])}, intercept "
                f"{_num(r['coefficient'])} (SE {_num(r['se'])})"
            )
    print()
    print(
        "Paired scaling contrasts over matched cells (seed 000 Table 29; Holm across the "
        "contrasts of every run shown)"
    )
    test = rep.get("p_test", "normal")
    _print_grid(
        [
            "Analysis",
            "Model",
            "Contrast",
            "Est.",
            "95% CI",
            "Effect",
            p_label(test),
            p_label(test, "Holm across runs"),
            "n",
        ],
        [
            [
                r["analysis"],
                labels[r["run"]],
                r["label"],
                _num(r["mean"]),
                "-" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
                _num(r["effect"]),
                _p_text(r["p"]),
                _p_text(r["p_holm"]),
                str(r["n"]),
            ]
            for r in rep["contrasts"]
        ],
    )
    print()
    print("Mean clipped ONCU by context length (seed 000 Table 10)")
    conds = [
        c
        for c in ("full_context", "retrieved")
        if any(r["condition"] == c for r in rep["by_length"])
    ]
    lengths = sorted(
        {r["context_length"] for r in rep["by_length"] if r["context_length"] is not None}
    )
    value = {(r["run"], r["condition"], r["context_length"]): r["oncu"] for r in rep["by_length"]}
    names = {"full_context": "Full-context ONCU", "retrieved": "Retrieved-evidence ONCU"}
    top = ["", *[names[c] if i == 0 else "" for c in conds for i in range(len(lengths))]]
    _print_grid(
        ["Model", *[length_label(n) for _ in conds for n in lengths]],
        [
            [labels[run], *[_num(value.get((run, c, n))) for c in conds for n in lengths]]
            for run in dict.fromkeys(r["run"] for r in rep["by_length"])
        ],
        top=top,
    )
    for n in rep["notes"]:
        tag = "WARNING" if n["level"] == "warning" else "note"
        print(f"{tag}: {labels.get(n['run'], n['run'])}: {n['statistic']}: {n['note']}")


def _cmd_report_scaling(args: argparse.Namespace) -> int:
    rep = scaling_report_json(
        open_store(args),
        args.run,
        args.score_field,
        split_csv(args.group_key),
        args.distance,
        args.n_resamples,
        args.p_test,
        args.ols_p_test,
    )
    if args.json:
        print_json(rep)
    else:
        _print_scaling(rep)
    return 0


# ---------------------------------------------------------------------------- parser
def register(groups: Groups) -> None:
    """Add ``import results``, ``score`` and ``report oncu | failures | paired``."""
    imp = groups.import_.add_parser(
        "results", help="import per-sample outputs as runs, re-scored (no model needed)"
    )
    imp.add_argument("--format", required=True, choices=RESULT_FORMATS, help="file format")
    imp.add_argument(
        "file",
        type=Path,
        nargs="+",
        help="the ONCU release's outputs: *.per_sample_metrics.csv files, a run's results/ "
        "folder, or several files at once (<run>.per_sample_metrics.csv, "
        "<run>.parsed_predictions.jsonl, <run>.raw_model_responses.jsonl: grouped by run; a "
        "CSV's side files beside it are read too). Each run is imported all-or-nothing, in "
        "order; the first bad one stops the command",
    )
    imp.add_argument(
        "--name",
        help="run id (and dataset name when created); one file only (default: the file name "
        f"less {_RESULTS_SUFFIX!r})",
    )
    imp.add_argument("--dataset", help="attach to this stored dataset instead of creating one")
    imp.add_argument("--replace", action="store_true", help="replace runs of the same name")
    add_with_runs(imp)
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
            "--score-field",
            default="f1_relaxed",
            choices=SCORE_FIELDS,
            help="answer score (default f1_relaxed)",
        )
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
    _p_test_option(on)
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
    _p_test_option(pa)
    pa.set_defaults(handler=_cmd_report_paired)

    sc = groups.report.add_parser(
        "scaling", help="length-position scaling: Tables 10, 29, 30 of seed 000 (SPEC §6.7)"
    )
    _common(sc, run_required=False)
    sc.add_argument(
        "--group-key",
        help="ONCU group key as in `report oncu` (must keep context_length and evidence_position)",
    )
    sc.add_argument(
        "--distance",
        default="middle",
        choices=SCALING_DISTANCES,
        help="distance term of the OLS: middle = |position fraction - 0.5| (default); end = "
        "1 - position fraction, the published Table 30 specification (collinear with the "
        "position term: statsmodels' pseudo-inverse splits the slope evenly)",
    )
    sc.add_argument(
        "--n-resamples",
        type=int,
        default=5000,
        help="bootstrap resamples of the contrasts (default 5000)",
    )
    _p_test_option(sc)
    sc.add_argument(
        "--ols-p-test",
        default="normal",
        choices=OLS_P_TESTS,
        help="p of the OLS terms: normal = erfc(|coef / SE| / sqrt 2), as published (seed 000 "
        "Table 30, default); t = Student's t over n - rank degrees of freedom (statsmodels). "
        "Either is Benjamini-Hochberg adjusted across every row of the table",
    )
    sc.set_defaults(handler=_cmd_report_scaling)


def _p_test_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--p-test",
        default="normal",
        choices=P_TESTS,
        help="p of a paired contrast: normal = erfc(|z| / sqrt 2), z = mean(d) / (sd(d) / "
        "sqrt n), as published (seed 000 §7.6, default); bootstrap = 2 min(P(d* >= 0), "
        "P(d* <= 0)) over the resampled means. Either is Holm adjusted across the runs shown",
    )
