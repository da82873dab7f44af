"""``run-probes`` (DOLCE span-sampling probes against a backend) and ``report dolce`` (issue 7).

``python -m core run-probes --db PATH --dataset NAME --backend embedded|ollama|openai
[--model M] [--units sentence|passage] [--per-length 5] [--strategy random|take-every-N]
[--seed 0] [--limit N] [--concurrency N] --name RUN [--json]`` plans the probes of every
instance (:func:`core.probes.plan_probes`) and executes them through the engine: predictions
under condition ``probe``, variant ``C=<C>|start=<s>``, so a rerun of the same command resumes.

``python -m core report dolce --db PATH --run RUN [--scenario auto|COW|PIG] [--threshold 0.5]
[--lam-p X] [--k-p X] [--lam-q X] [--task-by dataset] [--json]`` fits lambda and k
(:func:`core.dolce.fit_dolce`) and prints, per problem, lambda, k, scenario, category,
P(z = oracle) and the log-likelihood, and per task the category distribution.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from core.commands import Groups

__all__ = ["dolce_fit", "dolce_report", "register", "run_probes"]

_PROBLEM_KEYS = (
    "task", "problem", "instance_id", "scenario", "dip_p", "L", "n_obs", "max_C", "lam", "k",
    "category", "p_oracle", "log_likelihood", "lam_p", "k_p", "lam_q", "question",
    "reasoning_type", "distractor_similarity", "context_length",
)  # fmt: skip


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def run_probes(
    store: Any,
    dataset: str,
    backend: Any,
    *,
    name: str,
    units: str = "sentence",
    per_length: int = 5,
    strategy: str = "random",
    seed: int = 0,
    limit: int | None = None,
    concurrency: int = 1,
    options: dict[str, Any] | None = None,
    progress: Any = None,
    cancel: Any = None,
) -> Any:
    """Plan and execute the DOLCE probes of a stored dataset (resumable by ``name``).

    Returns:
        The engine's :class:`core.engine.RunSummary`.

    Raises:
        ValueError: unknown dataset, units or strategy, or a run of that name with another
            configuration.
    """
    from core.engine import RunSpec, execute, start_run
    from core.probes import PROBE_CONDITION, plan_probes

    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    instances = store.load_instances(dataset)
    if limit is not None:
        instances = instances[:limit]
    calls = []
    for inst in instances:
        calls.extend(
            plan_probes(inst, units=units, per_length=per_length, strategy=strategy, seed=seed)
        )
    spec = RunSpec(
        run_id=name,
        dataset=dataset,
        backend=backend.name,
        model=backend.model,
        options=dict(options or {}),
        retrieval={
            "probe": {"units": units, "per_length": per_length, "strategy": strategy, "seed": seed}
        },
        conditions=(PROBE_CONDITION,),
    )
    start_run(store, spec, backend)
    return execute(
        store, name, calls, backend, concurrency=concurrency, progress=progress, cancel=cancel
    )


def dolce_fit(
    store: Any,
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
    from core.dolce import Thresholds, fit_dolce, outcomes_from_probes

    runs = store.resolve_runs(run)
    frame = store.probe_frame(runs)
    if frame.empty:
        raise ValueError(
            f"no probe predictions in run(s) {', '.join(runs)}; run: python -m core run-probes"
        )
    outcomes = outcomes_from_probes(frame, task_by=task_by)
    return fit_dolce(
        outcomes,
        scenario=scenario,
        threshold=threshold,
        thresholds=Thresholds(lam_p=lam_p, k_p=k_p, lam_q=lam_q),
    )


def dolce_report(store: Any, run: str, **settings: Any) -> dict[str, Any]:
    """``report dolce`` as a JSON-ready dict: settings, per-problem rows, per-task distribution.

    Args:
        store: a :class:`core.store.Store`.
        run: a run id or a dataset name (its runs).
        **settings: :func:`dolce_fit` keyword arguments.
    """
    fit = dolce_fit(store, run, **settings)
    problems = fit.problems
    keys = [k for k in _PROBLEM_KEYS if k in problems.columns]
    return _clean(
        {
            "run": run,
            "settings": dict(fit.settings) | {"task_by": settings.get("task_by", "dataset")},
            "problems": problems[keys].to_dict("records"),
            "tasks": fit.tasks.to_dict("records"),
        }
    )


def _cmd_run_probes(args: argparse.Namespace) -> int:
    from core.commands.engine import drive_run

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
    from core.cli import open_store, print_json

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
    print(f"{'problem':28} {'scen':4} {'L':>6} {'lambda':>7} {'k':>6} {'cat':>4} {'P(O)':>6}")
    for p in report["problems"]:
        print(
            f"{str(p['problem'])[:28]:28} {p['scenario']:4} {p['L']:>6} {p['lam']:>7} "
            f"{p['k']:>6} {p['category']:>4} {p['p_oracle']:>6.2f}"
        )
    for t in report["tasks"]:
        dist = ", ".join(f"{c}: {t[f'n_{c}']}" for c in ("I", "II", "III", "IV", "V"))
        print(f"task {t['task']}: {t['n']} problems ({t['n_cow']} COW, {t['n_pig']} PIG); {dist}")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _strategy(text: str) -> str:
    from core.probes import parse_strategy

    try:
        parse_strategy(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(groups: Groups) -> None:
    """Add ``run-probes`` and ``report dolce`` to the CLI."""
    from core.cli import add_db
    from core.commands.engine import add_backend_args

    run = groups.top.add_parser(
        "run-probes", help="DOLCE: probe spans of C units of every instance against a backend"
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    add_backend_args(run)
    run.add_argument(
        "--units", default="sentence", choices=("sentence", "passage"), help="unit (sentence)"
    )
    run.add_argument(
        "--per-length", type=_positive, default=5, help="random spans per length (default 5)"
    )
    run.add_argument(
        "--strategy",
        type=_strategy,
        default="random",
        help="random (default) or take-every-N (sliding windows shifted by N units)",
    )
    run.add_argument("--seed", type=int, default=0, help="span and generation seed (default 0)")
    run.add_argument("--limit", type=_positive, help="probe only the first N instances")
    run.add_argument("--concurrency", type=_positive, default=1, help="parallel model calls")
    run.add_argument("--num-ctx", type=_positive, help="Ollama context window (default 32768)")
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run_probes)

    rep = groups.report.add_parser(
        "dolce", help="DOLCE lambda, k and focus category per problem, distribution per task"
    )
    rep.add_argument("--run", required=True, help="probe run id (or a dataset name: its runs)")
    rep.add_argument(
        "--scenario", default="auto", choices=("auto", "COW", "PIG"), help="auto = dip test"
    )
    rep.add_argument(
        "--threshold", type=float, default=0.5, help="COW binarization of relaxed F1 (0.5)"
    )
    rep.add_argument("--lam-p", type=float, help="lambda_p (default: first tertile of the C)")
    rep.add_argument("--k-p", type=float, help="k_p (default: first tertile of the C)")
    rep.add_argument("--lam-q", type=float, help="lambda_q (default: longest span observed)")
    rep.add_argument(
        "--task-by", default="dataset", help="column defining tasks (default dataset)"
    )
    rep.add_argument("--json", action="store_true", help="print JSON")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report_dolce)
