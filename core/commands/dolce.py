"""``run-probes`` (DOLCE span-sampling probes against a backend) and ``report dolce`` (issue 7).

``python -m core run-probes --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--units sentence|passage] [--per-length 5] [--strategy random|take-every-N]
[--seed 0] [--limit N] [--concurrency N] --name RUN [--json]`` plans the probes of every
instance (:func:`core.probes.plan_probes`) and executes them through the engine: predictions
under condition ``probe``, variant ``C=<C>|start=<s>``, so a rerun of the same command resumes.

``python -m core report dolce --db PATH --run RUN [--scenario auto|COW|PIG] [--threshold 0.5]
[--lam-p X] [--k-p X] [--lam-q X] [--task-by dataset] [--json]`` fits lambda and k
(:func:`core.dolce.fit_dolce`) and prints, per problem, lambda, k, scenario, category,
P(z = oracle) and the log-likelihood, and per task the category distribution. A probe whose
call failed is missing (never a failed probe): ``n_obs`` counts the answered probes the fit
used and ``missing`` the failed ones, per problem and per task.
"""

from __future__ import annotations

import argparse
from typing import Any

from core import probes
from core.commands import Groups, add_db, open_store, print_json
from core.commands.engine import add_backend_args, drive_run
from core.jsonable import json_plain
from core.params import CONCURRENCY, LIMIT, NUM_CTX, add_argument, add_arguments
from core.runs import run_probes
from core.store import Store

__all__ = ["dolce_fit", "dolce_report", "register"]

_PROBLEM_KEYS = (
    "task", "problem", "instance_id", "scenario", "dip_p", "L", "n_obs", "missing", "max_C",
    "lam", "k",
    "category", "p_oracle", "log_likelihood", "lam_p", "k_p", "lam_q", "question",
    "reasoning_type", "distractor_similarity", "context_length",
)  # fmt: skip


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


def _cmd_run_probes(args: argparse.Namespace) -> int:
    return drive_run(
        args,
        lambda store, backend, **kw: run_probes(
            store, args.dataset, backend, name=args.name, units=args.units,
            per_length=args.per_length, strategy=args.strategy, seed=args.seed,
            limit=args.limit, concurrency=args.concurrency, **kw,
        ),
        label="probe run",
        calls="probes",
        model_time=False,
    )  # fmt: skip


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
    )
    if args.json:
        print_json(report)
        return 0
    print(f"{'problem':28} {'scen':4} {'L':>6} {'n':>5} {'miss':>5} {'lambda':>7} {'k':>6} "
          f"{'cat':>4} {'P(O)':>6}")  # fmt: skip
    for p in report["problems"]:
        print(
            f"{str(p['problem'])[:28]:28} {p['scenario']:4} {p['L']:>6} {p['n_obs']:>5} "
            f"{p['missing']:>5} {p['lam']:>7} {p['k']:>6} {p['category']:>4} "
            f"{p['p_oracle']:>6.2f}"
        )
    for t in report["tasks"]:
        dist = ", ".join(f"{c}: {t[f'n_{c}']}" for c in ("I", "II", "III", "IV", "V"))
        print(
            f"task {t['task']}: {t['n']} problems ({t['n_cow']} COW, {t['n_pig']} PIG), "
            f"missing {t['missing']} (every probe failed); {t['n_obs']} probes, missing "
            f"{t['missing_probes']} (call failed); {dist}"
        )
    return 0


def register(groups: Groups) -> None:
    """Add ``run-probes`` and ``report dolce`` to the CLI."""
    run = groups.top.add_parser(
        "run-probes", help="DOLCE: probe spans of C units of every instance against a backend"
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    add_arguments(run, (probes.UNITS_PARAM, probes.PER_LENGTH, probes.STRATEGY))
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
    rep.add_argument("--json", action="store_true", help="print JSON")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report_dolce)
