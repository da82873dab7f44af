"""Blind annotation from the command line (seed 000 App. A.6, issue 20).

``annotate export --run R --sample N --seed S --out F.csv`` writes a seeded sample of the run's
failed predictions, stratified by condition × rule label, without the rule labels;
``annotate import F.csv --run R --annotator NAME`` reads the labels back (all or nothing);
``report agreement --run R [--json]`` compares every pair of raters (the rule labels are the
rater ``rule``) with Cohen's κ, the label counts and the confusion matrix, and all raters
together with Fleiss' κ and Krippendorff's α when there are three or more
(:mod:`core.annotate`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.annotate.roundtrip import (
    DEFAULT_RUBRIC,
    RUBRICS,
    RULE_RATER,
    agreement_report,
    export_sample,
    import_labels,
)
from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.jsonable import json_plain
from core.judges.agreement import judge_agreement

__all__ = ["register"]

_RUBRIC_HELP = (
    f"the rubric whose labels are sampled and read (default {DEFAULT_RUBRIC}: the failure "
    "taxonomy, rule rater scores.failure_label); a judge rubric (crux-coverage, "
    "authtrace-correctness, authtrace-evidence) samples the items its judge runs judged, its "
    "judge runs being the raters judge:RUN; with crux-answerability --run names the judge run "
    "whose (sub-question, passage) pairs are sampled"
)


def _cmd_export(args: argparse.Namespace) -> int:
    s = export_sample(
        open_store(args),
        args.run,
        args.sample,
        args.seed,
        args.out,
        rubric=args.rubric,
        include_success=args.include_success,
        passage_chars=args.passage_chars,
    )
    judged = s.strata_by != "rule label"
    print(
        f"wrote {s.n_items} items ({s.n_new} new to the store's sample) of run '{args.run}' "
        f"to {s.path} (seed {args.seed}); drawn from {s.n_pool} "
        f"{f'{args.rubric} judgment items' if judged else 'predictions'} in "
        f"{len(s.strata)} strata (condition x {s.strata_by}{' rating' if judged else ''})"
    )
    if not judged:
        left = [f"{s.n_failed_calls} failed calls (no answer, no rule label)"]
        if not args.include_success:
            left.append(f"{s.n_success} correct predictions (--include-success to sample them)")
        print("left out: " + "; ".join(left))
    for (condition, label), (pool, drawn) in s.strata.items():
        print(f"  {condition:14} {label:13} {drawn:>5} of {pool}")
    empty = sum(1 for _, drawn in s.strata.values() if drawn == 0)
    if empty:
        print(f"note: {empty} strata got no item (the sample is smaller than the strata count)")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    s = import_labels(
        open_store(args),
        args.file,
        args.run,
        args.annotator,
        rubric=args.rubric,
        replace=args.replace,
        allow_blank=args.allow_blank,
    )
    blank = f", {s.n_blank} blank skipped" if args.allow_blank else ""
    print(
        f"{args.file}: {s.n_new} new, {s.n_unchanged} unchanged, {s.n_replaced} replaced"
        f"{blank} (annotator {args.annotator}, run '{args.run}', rubric {args.rubric})"
    )
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _print_pair(p: dict[str, Any]) -> None:
    a, b = p["rater_a"], p["rater_b"]
    if "labels" not in p:
        print(f"{a} vs {b}: n {p['n']}; kappa n/a ({p['kappa_note']})")
        return
    print(
        f"{a} vs {b}: n {p['n']}, agreed {p['agreed']}, disagreed {p['disagreed']}, "
        f"raw agreement {_fmt(p['raw_agreement'])}, Cohen's kappa {_fmt(p['kappa'])}"
    )
    if p["kappa_note"]:
        print(f"  {p['kappa_note']}")
    wa, wb = max(len(a), 5), max(len(b), 5)
    print(f"  {'label':14} {a:>{wa}} {b:>{wb}} {'both':>5} {'either':>6}  both/either")
    for row in p["per_label"]:
        print(
            f"  {row['label']:14} {row['count_a']:>{wa}} {row['count_b']:>{wb}} "
            f"{row['both']:>5} {row['either']:>6}  {_fmt(row['agreement'])}"
        )
    labels = p["labels"]
    width = max(5, *(len(x) for x in labels))
    print(f"  confusion (rows {a}, columns {b}):")
    print("  " + " " * 14 + "".join(f" {x[:width]:>{width}}" for x in labels))
    for label, row in zip(labels, p["confusion"], strict=True):
        print(f"  {label:14}" + "".join(f" {v:>{width}}" for v in row))


def _cmd_judges(args: argparse.Namespace) -> int:
    rep = judge_agreement(open_store(args), split_csv(args.judges))
    if args.json:
        print_json(json_plain(rep))
        return 0
    judges = ", ".join(
        f"{r} ({v['rated']} rated, {v['failed']} failed calls left out)"
        for r, v in rep["judges"].items()
    )
    print(
        f"agreement of judge runs (rubric {rep['rubric']}, scale {rep['scale'][0]}-"
        f"{rep['scale'][-1]}): {judges}"
    )
    for p in rep["pairs"]:
        if "labels" not in p:
            print(f"{p['rater_a']} vs {p['rater_b']}: n {p['n']}; kappa n/a ({p['kappa_note']})")
            continue
        print(
            f"{p['rater_a']} vs {p['rater_b']}: n {p['n']}, agreed {p['agreed']}, raw agreement "
            f"{_fmt(p['raw_agreement'])}, Cohen's kappa {_fmt(p['kappa'])}, quadratic-weighted "
            f"kappa {_fmt(p['weighted_kappa'])}"
        )
        for note in (p["kappa_note"], p["weighted_kappa_note"]):
            if note:
                print(f"  {note}")
        labels = [str(x) for x in p["labels"]]
        print(f"  confusion (rows {p['rater_a']}, columns {p['rater_b']}):")
        print("  " + " " * 6 + "".join(f" {x:>5}" for x in labels))
        for label, row in zip(labels, p["confusion"], strict=True):
            print(f"  {label:>6}" + "".join(f" {v:>5}" for v in row))
    multi = rep["all_raters"]
    if multi is not None:
        print(
            f"all {len(multi['raters'])} judges, n {multi['n']}: Fleiss' kappa "
            f"{_fmt(multi['fleiss_kappa'])}, Krippendorff's alpha (ordinal) "
            f"{_fmt(multi['krippendorff_alpha'])}"
        )
        for note in (multi["fleiss_note"], multi["alpha_note"]):
            if note:
                print(f"  {note}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.judges is None):
        raise ValueError("report agreement: give --run R (annotation sample) or --judges J1,J2")
    if args.judges is not None:
        return _cmd_judges(args)
    rep = agreement_report(open_store(args), args.run, args.rubric)
    if args.json:
        print_json(json_plain(rep))
        return 0
    raters = ", ".join(f"{r} ({n})" for r, n in rep["raters"].items()) or "none"
    print(
        f"agreement on run '{rep['run']}' (rubric {rep['rubric']}): {rep['n_items']} sampled "
        f"items; raters (items rated): {raters}"
    )
    if not rep["n_items"]:
        print(f"no sample yet: python -m core annotate export --run {rep['run']} ...")
    elif len(rep["raters"]) < 2:
        print("fewer than two raters: import labels with python -m core annotate import")
    for pair in rep["pairs"]:
        _print_pair(pair)
    multi = rep["all_raters"]
    if multi is not None:
        print(
            f"all {len(multi['raters'])} raters, n {multi['n']}: Fleiss' kappa "
            f"{_fmt(multi['fleiss_kappa'])}, Krippendorff's alpha ({multi['alpha_level']}) "
            f"{_fmt(multi['krippendorff_alpha'])}"
        )
        for note in (multi["fleiss_note"], multi["alpha_note"]):
            if note:
                print(f"  {note}")
    return 0


def register(groups: Groups) -> None:
    """Add ``annotate export | import`` and ``report agreement``."""
    ann = groups.top.add_parser(
        "annotate", help="blind annotation: export a sample, import labels (seed 000 A.6)"
    )
    sub = ann.add_subparsers(dest="annotate", metavar="ACTION", required=True)

    ex = sub.add_parser(
        "export",
        help="write a seeded sample of a run's failed predictions, stratified by condition x "
        "rule label, as CSV without the rule labels",
    )
    ex.add_argument("--run", required=True, help="run id")
    ex.add_argument("--sample", type=int, required=True, help="number of items (N)")
    ex.add_argument("--seed", type=int, required=True, help="random seed of the draw")
    ex.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    ex.add_argument("--rubric", default=DEFAULT_RUBRIC, choices=sorted(RUBRICS), help=_RUBRIC_HELP)
    ex.add_argument(
        "--include-success",
        action="store_true",
        help="also sample correct predictions (rule label success) as their own strata; the "
        "paper's sample is failures only",
    )
    ex.add_argument(
        "--passage-chars",
        type=int,
        default=None,
        help="cut each shown passage to this many characters (default: whole; a full-context "
        "cell can pass a spreadsheet's 32,767-character limit)",
    )
    add_db(ex)
    ex.set_defaults(handler=_cmd_export)

    im = sub.add_parser(
        "import",
        help="read one annotator's labels (columns item_id, label) back; all rows or none",
    )
    im.add_argument("file", type=Path, help="the exported CSV with the label column filled")
    im.add_argument("--run", required=True, help="the run the sample was drawn from")
    im.add_argument(
        "--annotator",
        required=True,
        help=f"the annotator's name (letters, digits, _.@-; not '{RULE_RATER}')",
    )
    im.add_argument("--rubric", default=DEFAULT_RUBRIC, choices=sorted(RUBRICS), help=_RUBRIC_HELP)
    im.add_argument(
        "--replace",
        action="store_true",
        help="change labels this annotator gave before (else a different label is an error)",
    )
    im.add_argument(
        "--allow-blank",
        action="store_true",
        help="skip rows with an empty label (counted) instead of failing",
    )
    add_db(im)
    im.set_defaults(handler=_cmd_import)

    rep = groups.report.add_parser(
        "agreement",
        help="agreement of raters on a run's annotation sample: Cohen's kappa per pair (the rule "
        "labels are rater 'rule'), label counts, confusion; Fleiss' kappa and Krippendorff's "
        "alpha for 3+ raters",
    )
    rep.add_argument("--run", default=None, help="run id (agreement on its annotation sample)")
    rep.add_argument(
        "--judges",
        default=None,
        metavar="J1,J2",
        help="instead of --run: agreement of two or more judge runs of one rubric on the items "
        "both rated (Cohen's and quadratic-weighted kappa per pair; Fleiss' kappa and ordinal "
        "Krippendorff's alpha for 3+; failed calls left out and counted)",
    )
    rep.add_argument("--rubric", default=DEFAULT_RUBRIC, choices=sorted(RUBRICS), help=_RUBRIC_HELP)
    rep.add_argument("--json", action="store_true", help="print JSON")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report)
