"""``run-probes`` (DOLCE span-sampling probes against a backend) and ``report dolce`` (issue 7).

``python -m core run-probes --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--units sentence|passage] [--strategy paper|random|take-every-N] [--max-spans 100]
[--per-length 5] [--seed 0] [--limit N] [--concurrency N] --name RUN [--json]`` plans the
probes of every instance (:func:`core.dolce.probes.plan_probes`; default strategy ``paper``: all
spans, or every 5th start when the context has more than ``--max-spans`` units, at most
``--max-spans`` spans per length), prints the spans taken per observation length
(:func:`core.dolce.probes.plan_line`; with ``--json`` under ``"plan"``) and executes them through
the
engine: predictions under condition ``probe``, variant ``C=<C>|start=<s>``, so a rerun of the
same command resumes.

``python -m core report dolce --db PATH --run RUN [--scenario auto|COW|PIG] [--threshold 0.5]
[--lam-p X] [--k-p X] [--lam-q X] [--task-by dataset] [--pig-estimator likelihood|published]
[--json]`` fits lambda and k (:func:`core.dolce.fit_dolce`) and prints, per problem, lambda, k,
scenario (and the problem's own dip test p-value), the estimator, category, P(z = oracle) and
the log-likelihood, and per task the scenario rule (seed App. H) and the category
distribution. PIG fits of the published Algorithm 2 (``--pig-estimator published``) are marked
"not identified" and COW fits with k = 0 "not covered by the model", each with a count. A
probe whose call failed is missing (never a failed probe): ``n_obs`` counts the answered probes
the fit used and ``missing`` the failed ones, per problem and per task.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from core.commands import Groups, add_db, open_store, print_json
from core.commands.run import add_backend_args, drive_run
from core.dolce import probes
from core.dolce.params import PIG_ESTIMATOR
from core.execution.runs import run_probes
from core.jsonable import json_plain
from core.params import CONCURRENCY, LIMIT, NUM_CTX, add_argument, add_arguments
from core.store import Store

__all__ = ["dolce_fit", "dolce_report", "register", "report_lines"]

_PROBLEM_KEYS = (
    "task",
    "problem",
    "instance_id",
    "scenario",
    "dip_p",
    "dip_scenario",
    "estimator",
    "L",
    "n_obs",
    "missing",
    "max_C",
    "lam",
    "k",
    "category",
    "identified",
    "p_oracle",
    "log_likelihood",
    "lam_p",
    "k_p",
    "lam_q",
    "question",
    "reasoning_type",
    "distractor_similarity",
    "context_length",
)


def dolce_fit(
    store: Store,
    run: str,
    *,
    scenario: str = "auto",
    threshold: float = 0.5,
    lam_p: float | None = None,
    k_p: float | None = None,
    lam_q: float | None = None,
    task_by: str = "dataset",
    pig_estimator: str = PIG_ESTIMATOR.default,
) -> Any:
    """The :class:`core.dolce.DolceFit` of a run's (or a dataset's runs') probe predictions.

    Raises:
        ValueError: no probe predictions in the selected runs, or bad settings.
    """
    # imported here: scipy costs `python -m core --help` a tenth of a second
    from core.dolce import Thresholds, fit_dolce, outcomes_from_probes

    runs = store.resolve_runs(run)
    frame = store.probe_frame(runs)
    if frame.empty:
        raise ValueError(
            f"no probe predictions in run(s) {', '.join(runs)}; run: python -m core run-probes"
        )
    outcomes = outcomes_from_probes(frame, task_by=task_by, keep_missing=True)
    return fit_dolce(
        outcomes,
        scenario=scenario,
        threshold=threshold,
        thresholds=Thresholds(lam_p=lam_p, k_p=k_p, lam_q=lam_q),
        pig_estimator=pig_estimator,
    )


def dolce_report(store: Store, run: str, **settings: Any) -> dict[str, Any]:
    """``report dolce`` as a JSON-ready dict: settings, per-problem rows, per-task distribution.

    Args:
        store: the store.
        run: a run id or a dataset name (its runs).
        **settings: :func:`dolce_fit` keyword arguments.
    """
    fit = dolce_fit(store, run, **settings)
    problems = fit.problems
    keys = [k for k in _PROBLEM_KEYS if k in problems.columns]
    return json_plain(
        {
            "run": run,
            "settings": dict(fit.settings) | {"task_by": settings.get("task_by", "dataset")},
            "problems": problems[keys].to_dict("records"),
            "tasks": fit.tasks.to_dict("records"),
        }
    )


@dataclass(frozen=True)
class _PlannedSummary:
    """The engine's summary with the probe plan's spans per length added to its JSON."""

    summary: Any
    plan: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        if name == "summary":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.summary, name)

    def to_dict(self) -> dict[str, Any]:
        return self.summary.to_dict() | {"plan": self.plan}


def _cmd_run_probes(args: argparse.Namespace) -> int:
    plan: dict[str, Any] = {}
    settings = {"paper": {"max_spans": args.max_spans}, "random": {"per_length": args.per_length}}
    shown = settings.get(args.strategy, {})

    def show(summary: dict[str, Any]) -> None:
        plan.update(summary, strategy=args.strategy, **shown)
        if not args.json:  # stdout holds one JSON object with --json
            print(probes.plan_line(summary, args.strategy, **shown), flush=True)

    def start(store: Store, backend: Any, **kw: Any) -> _PlannedSummary:
        s = run_probes(
            store,
            args.dataset,
            backend,
            name=args.name,
            units=args.units,
            per_length=args.per_length,
            strategy=args.strategy,
            seed=args.seed,
            max_spans=args.max_spans,
            limit=args.limit,
            concurrency=args.concurrency,
            on_plan=show,
            **kw,
        )
        return _PlannedSummary(s, plan)

    return drive_run(args, start, label="probe run", calls="probes", model_time=False)


def report_lines(report: dict[str, Any]) -> list[str]:
    """The text of ``report dolce``: one line per problem, then one per task.

    A PIG fit of the published Algorithm 2 shows its category as ``IV (not identified)``; a
    COW fit with k = 0 as ``not covered``; each kind is counted in a closing line.
    """
    lines = [
        f"{'problem':28} {'scen':4} {'dip p':>6} {'estimator':10} {'L':>6} {'n':>5} "
        f"{'miss':>5} {'lambda':>7} {'k':>6} {'category':20} {'P(O)':>6}"
    ]
    for p in report["problems"]:
        cat = str(p["category"])
        if not p.get("identified", True):
            cat += " (not identified)"
        dip = p.get("dip_p")
        dip_text = "-" if dip is None else f"{dip:.2f}"
        est = p.get("estimator", "")
        lines.append(
            f"{str(p['problem'])[:28]:28} {p['scenario']:4} {dip_text:>6} {est:10} {p['L']:>6} "
            f"{p['n_obs']:>5} {p['missing']:>5} {p['lam']:>7} {p['k']:>6} {cat:20} "
            f"{p['p_oracle']:>6.2f}"
        )
    for t in report["tasks"]:
        dist = ", ".join(f"{c}: {t[f'n_{c}']}" for c in ("I", "II", "III", "IV", "V"))
        rule = t.get("scenario_rule", "")
        if rule in ("COW only", "PIG only"):
            rule = (
                f"{rule}: not split (App. H needs > 10 problems on both sides; "
                f"{t['n_dip_cow']} COW, {t['n_dip_pig']} PIG by their own dip tests), "
                f"pooled dip test p={t['task_dip_p']:.3g}"
            )
        elif rule == "split":
            rule = "split into COW and PIG subsets (App. H: > 10 problems on both sides)"
        lines.append(
            f"task {t['task']}: {t['n']} problems ({t['n_cow']} COW, {t['n_pig']} PIG; {rule}), "
            f"missing {t['missing']} (every probe failed); {t['n_obs']} probes, missing "
            f"{t['missing_probes']} (call failed); {dist}, not covered: {t['n_not_covered']}"
        )
        if t["n_not_identified"]:
            lines.append(
                f"  {t['n_not_identified']} PIG problem(s): lambda and category not identified "
                "(the published Algorithm 2 scores only the per-length mean score, whose "
                "expectation does not depend on lambda; use --pig-estimator likelihood)"
            )
        if t["n_not_covered"]:
            lines.append(
                f"  {t['n_not_covered']} COW problem(s) not covered by the model: k = 0, no "
                "span of any length answers (lambda > L); in no category"
            )
    settings = report.get("settings", {})
    lines.append(
        f"PIG estimator: {settings.get('pig_estimator', PIG_ESTIMATOR.default)} "
        f"({settings.get('pig_steps', '')} EM steps); COW: Algorithm 1"
    )
    return lines


def _cmd_report_dolce(args: argparse.Namespace) -> int:
    report = dolce_report(
        open_store(args),
        args.run,
        scenario=args.scenario,
        threshold=args.threshold,
        lam_p=args.lam_p,
        k_p=args.k_p,
        lam_q=args.lam_q,
        task_by=args.task_by,
        pig_estimator=args.pig_estimator,
    )
    if args.json:
        print_json(report)
        return 0
    for line in report_lines(report):
        print(line)
    return 0


def register(groups: Groups) -> None:
    """Add ``run-probes`` and ``report dolce`` to the CLI."""
    run = groups.top.add_parser(
        "run-probes", help="DOLCE: probe spans of C units of every instance against a backend"
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    add_arguments(run, (probes.UNITS_PARAM, probes.STRATEGY, probes.MAX_SPANS, probes.PER_LENGTH))
    # One --seed draws the spans and seeds generation.
    add_argument(run, probes.SEED, help="span and generation seed; default 0")
    add_arguments(run, (LIMIT, CONCURRENCY, NUM_CTX))
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run_probes)

    rep = groups.report.add_parser(
        "dolce", help="DOLCE lambda, k and focus category per problem, distribution per task"
    )
    rep.add_argument("--run", required=True, help="probe run id (or a dataset name: its runs)")
    add_arguments(rep, probes.FIT_PARAMS)
    add_argument(rep, PIG_ESTIMATOR)
    rep.add_argument("--json", action="store_true", help="print JSON")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report_dolce)
