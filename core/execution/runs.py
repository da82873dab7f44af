"""Runs: every way of running a method against a model starts, goes and ends here.

A run is a row in the store (:class:`RunSpec`: dataset, backend, model, options, retrieval,
conditions) and the predictions stored under it. This module drives the run lifecycle
(:func:`core.execution.run_spec.open_run` creates or reopens the row with status ``running``;
:func:`core.execution.engine.execute` commits the final status, ``done`` / ``cancelled`` /
``failed``,
with the run's last batch) for every kind of run:

- :func:`run_conditions`: the four-condition protocol (SPEC §6.1);
- :func:`run_interventions`: CUE-R, base traces then interventions (SPEC §7);
- :func:`run_probes`: DOLCE span-sampling probes;
- :func:`run_attribution`: leave-one-out passage attribution;
- :func:`build_demo`: the demo store (controlled-200 and the embedded baseline reader).

Planning stays with the planners (:mod:`core.oncu.conditions`, :mod:`core.cuer.interventions`,
:mod:`core.dolce.probes`) and execution with :mod:`core.execution.engine`. The CLI commands
(``core/commands``), the Runs page (through :mod:`core.execution.jobs`, which starts ``python -m
core
run``), the first start of the dashboard and the Case view's companion runs
(:mod:`core.execution.rerun`) all come here. Judge runs (CRUX ratings among them) are driven by
:func:`core.judges.runs.run_judge` through the same lifecycle and the same engine loop
(:func:`core.execution.engine.execute_work`).

One process runs a run name at a time: every run holds its lock (:meth:`core.store.Store.
run_lock`, a lock file beside the store that dies with its process) from before its row is
created or reopened until it ends, done, cancelled or failed. Starting a run that is running
elsewhere raises :class:`core.store.RunBusyError` at once, naming the run and the pid holding
it, before any model call and with the store unchanged.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import pandas as pd

from core.attribution.metrics import SCORE_FIELD, ablation_tables, plan_drops
from core.attribution.plan import attribution_settings, pick_instances, plan_run, run_config
from core.backends import make_backend
from core.backends.base import Backend
from core.cuer.interventions import check_plan_options, plan_interventions, plan_settings
from core.datasets.controlled import build_controlled
from core.dolce.probes import (
    MAX_SPANS,
    PER_LENGTH,
    PROBE_CONDITION,
    STRATEGY,
    parse_strategy,
    plan_probes,
    summarize_plan,
)
from core.execution.engine import Progress, RunSummary, execute, plan_and_execute
from core.execution.run_spec import RunSpec, open_run, run_spec, start_run, undone_if_refused
from core.oncu.conditions import (
    check_conditions,
    plan_conditions,
    planned_keys,
    retrieval_config,
)
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP, TOP_K
from core.retrieval.retrievers import reranker
from core.scoring.parsing import DEFAULT_MAX_CITED
from core.store import RunBusyError, Store
from core.types import PlannedCall, stored_ids

__all__ = [
    "DEMO_DATASET",
    "DEMO_RUN",
    "base_citations",
    "build_demo",
    "open_probe_run",
    "open_run",
    "present",
    "run_attribution",
    "run_conditions",
    "run_interventions",
    "run_probes",
    "run_spec",
    "RunBusyError",
    "RunSpec",
    "start_run",
    "undone_if_refused",
]

#: The demo store's dataset (controlled generator preset, seed 42).
DEMO_DATASET = "controlled-200"
#: The demo store's run: the embedded baseline reader on the four conditions.
DEMO_RUN = "demo-embedded"

_ProgressFn = Callable[[Progress], None]


# --------------------------------------------------------------------------- conditions


def run_conditions(
    store: Store,
    dataset: str,
    backend: Backend,
    conditions: Iterable[str],
    *,
    name: str,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    rerank: int | None = None,
    rerank_model: str | None = None,
    concurrency: int = 1,
    progress: _ProgressFn | None = None,
    cancel: threading.Event | None = None,
    options: Mapping[str, Any] | None = None,
    notes: str = "",
    max_cited: int = DEFAULT_MAX_CITED,
) -> RunSummary:
    """Plan and run the four-condition protocol on a stored dataset (resumable by ``name``).

    Args:
        store: the store.
        dataset: a stored dataset.
        backend: the model backend.
        conditions: any of ``no_evidence``, ``full_context``, ``retrieved``, ``oracle``.
        name: the run id; rerunning with the same name continues that run.
        retriever: retriever family of the retrieved condition.
        top_k: chunks shown in the retrieved condition.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        rerank: CE@N->k (seed 000 App. A.13): rescore the retriever's top N chunks with a
            cross-encoder and show the best ``top_k``; recorded in the run's retrieval
            configuration (another N is another run configuration). None: no rerank.
        rerank_model: the reranker (:func:`core.retrieval.retrievers.reranker`; default
            :func:`core.retrieval.retrievers.default_rerank_model`). It is loaded before the run row
            is written, so a missing model fails the run before any call.
        concurrency: worker threads calling the backend.
        progress: progress callback (see :func:`core.execution.engine.execute`).
        cancel: cancel event (see :func:`core.execution.engine.execute`).
        options: generation options to record when the backend's ``describe()`` does not
            report its effective ``options``.
        notes: free text stored on the run.
        max_cited: evidence ids scored per reply (``--max-cited``; the protocol's 3),
            recorded with the run; another value is another run configuration.

    Returns:
        The execution's summary.

    Raises:
        RunBusyError: run ``name`` is running in another process.
        ValueError: unknown dataset, condition or retriever, a rerank without the retrieved
            condition, a rerank model that is not available offline, or a stored run of that
            name with another configuration.
    """
    conds = check_conditions(conditions)
    retrieval = retrieval_config(retriever, top_k, chunk_size, overlap, rerank, rerank_model)
    if "rerank" in retrieval:
        if "retrieved" not in conds:
            raise ValueError(
                "rerank applies to the retrieved condition: add 'retrieved' to the conditions "
                "or drop the rerank"
            )
        reranker(retrieval["rerank_model"])  # fail before the run row and any call
    with store.run_lock(name), undone_if_refused(store, name):
        open_run(
            store,
            backend,
            name,
            dataset,
            options=options,
            conditions=conds,
            notes=notes,
            retrieval=retrieval if "retrieved" in conds else {},
            max_cited=max_cited,
        )
        with store.attached(read_only=True) as con:  # ~10x cheaper to open than connect()
            stored = store.prediction_keys(name, ok_only=True, con=con)
        todo, n_stored = [], 0
        for instance in store.load_instances(dataset):
            keys = planned_keys(instance, conds)
            if stored.issuperset(keys):
                n_stored += len(keys)  # nothing left to do: skip planning (retrieval) too
            else:
                todo.append(instance)
        summary = plan_and_execute(
            store,
            name,
            todo,
            conds,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
            stored=stored,
            retriever=retriever,
            top_k=top_k,
            chunk_size=chunk_size,
            overlap=overlap,
            rerank=retrieval.get("rerank"),
            rerank_model=retrieval.get("rerank_model"),
        )
    return replace(
        summary,
        planned=summary.planned + n_stored,
        skipped_existing=summary.skipped_existing + n_stored,
    )


# --------------------------------------------------------------------------- CUE-R


def run_interventions(
    store: Store,
    dataset: str,
    backend: Backend,
    *,
    name: str,
    top_k: int = 5,
    retriever: str = "lexical",
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    operators: Iterable[str] | None = None,
    hardness: Iterable[str] | None = None,
    positions: Iterable[str] | None = ("end",),
    two_support: bool = True,
    zero_retrieval: bool = True,
    seed: int = 0,
    concurrency: int = 1,
    progress: _ProgressFn | None = None,
    cancel: threading.Event | None = None,
    options: Mapping[str, Any] | None = None,
    notes: str = "",
) -> RunSummary:
    """Run CUE-R on a stored dataset: base traces first, then the interventions (resumable).

    Phase 1 executes the ``retrieved`` condition (the base trace) through
    :func:`core.execution.engine.execute`; phase 2 plans each instance's interventions from its
    stored
    base prediction's cited ids (:func:`core.cuer.interventions.plan_interventions`) and executes
    them. Instances whose base call failed get no interventions. Rerunning with the same
    ``name`` continues the run; stored calls are skipped, cached responses reused.

    Args:
        store: the store.
        dataset: a stored dataset.
        backend: the model backend.
        name: the run id.
        top_k: chunks of the base retrieval (default 5, seed 004).
        retriever: retriever family of the base retrieval (default BM25 ``lexical``).
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        operators: any of remove / replace / duplicate (default all three).
        hardness: replacement hardness levels (default easy, medium, hard).
        positions: duplicate positions (default ``end``).
        two_support: plan the two-support ablation.
        zero_retrieval: plan the zero-retrieval control.
        seed: seed of the easy replacement.
        concurrency: worker threads calling the backend.
        progress: progress callback (see :func:`core.execution.engine.execute`), called in both
        phases.
        cancel: set it to stop (the run is resumable).
        options: generation options recorded when the backend does not report its own.
        notes: free text stored on the run.

    Returns:
        A :class:`core.execution.engine.RunSummary` over both phases.

    Raises:
        RunBusyError: run ``name`` is running in another process.
        ValueError: unknown dataset, operator, hardness, position or retriever, or a stored run
            of that name with another configuration.
    """
    ops, levels, places = check_plan_options(operators, hardness, positions)
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    # the plan's version travels with the retrieval settings: resuming a run planned by
    # another version is refused (no mix of old and new replacements under one variant id)
    retrieval = plan_settings(retrieval_config(retriever, top_k, chunk_size, overlap))
    # both phases under the lock: no other process may start the run between
    with store.run_lock(name), undone_if_refused(store, name):
        open_run(
            store,
            backend,
            name,
            dataset,
            options=options,
            retrieval=retrieval,
            conditions=("retrieved", "intervention"),
            notes=notes,
            kind="interventions",
        )
        instances = store.load_instances(dataset)
        base_calls = plan_conditions(
            instances,
            ["retrieved"],
            retriever=retriever,
            top_k=top_k,
            chunk_size=chunk_size,
            overlap=overlap,
        )
        first = execute(
            store,
            name,
            base_calls,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
        )
        if first.status != "done":
            return first
        cited = base_citations(store, name)
        calls = []
        for inst in instances:
            if inst.instance_id not in cited:
                continue
            calls.extend(
                plan_interventions(
                    inst,
                    cited[inst.instance_id],
                    top_k=top_k,
                    retriever=retriever,
                    chunk_size=chunk_size,
                    overlap=overlap,
                    operators=ops,
                    hardness=levels,
                    positions=places,
                    two_support=two_support,
                    zero_retrieval=zero_retrieval,
                    seed=seed,
                )
            )
        second = execute(
            store,
            name,
            calls,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
        )
    return _merged(first, second)


def base_citations(store: Store, run_id: str) -> dict[str, list[str]]:
    """Cited ids of each instance's stored base trace (``retrieved``) that did not fail."""
    base = store.prediction_rows(run_id)
    base = base[(base["condition"] == "retrieved") & (base["variant"] == "")]
    return {
        r["instance_id"]: stored_ids(r["cited_ids"])
        for r in base.to_dict("records")
        if not (present(r.get("error")) and str(r.get("error")).strip())
    }


def present(x: Any) -> bool:
    """Whether a stored cell holds a value (not None, NA or NaN)."""
    return x is not None and x is not pd.NA and not (isinstance(x, float) and math.isnan(x))


# --------------------------------------------------------------------------- attribution


def run_attribution(
    store: Store,
    dataset: str,
    backend: Backend,
    *,
    name: str,
    condition: str = "full_context",
    ablations: int = 32,
    keep: float = 0.5,
    seed: int = 0,
    target: str = "retention",
    score_field: str = SCORE_FIELD.default,
    retriever: str = "lexical",
    top_k: int = TOP_K.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    instances: str | None = None,
    concurrency: int = 1,
    progress: _ProgressFn | None = None,
    cancel: threading.Event | None = None,
    options: Mapping[str, Any] | None = None,
    notes: str = "",
) -> RunSummary:
    """Run context attribution (issue 40): unablated call, random ablations, top-k drops.

    Phase 1 executes each instance's unablated call and ``ablations`` masked calls
    (:func:`core.attribution.plan.plan_attribution`); phase 2 fits each instance's surrogate
    on its stored ablations and executes the top-1 and top-2 drops
    (:func:`core.attribution.metrics.plan_drops`). Both go through
    :func:`core.execution.engine.execute`
    (response cache, resume, kill -9 durability, progress, cancel). The settings are recorded
    on the run (``retrieval["attribution"]``); resuming with other settings is refused.

    Args:
        store: the store.
        dataset: a stored dataset.
        backend: the model backend.
        name: the run id.
        condition: ``full_context``, ``retrieved`` or ``oracle``.
        ablations: masked calls per instance.
        keep: probability that a mask keeps each shown passage.
        seed: mask seed.
        target: ``retention`` (default) or ``correct``; ``logprob`` is refused.
        score_field: the score of the ``correct`` target.
        retriever: retriever family of the ``retrieved`` condition.
        top_k: chunks of the ``retrieved`` condition.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        instances: the first N instances or instance ids (comma-separated); None: all.
        concurrency: worker threads calling the backend.
        progress: progress callback (see :func:`core.execution.engine.execute`), called in both
        phases.
        cancel: set it to stop (the run is resumable).
        options: generation options recorded when the backend does not report its own.
        notes: free text stored on the run.

    Returns:
        A :class:`core.execution.engine.RunSummary` over both phases.

    Raises:
        RunBusyError: run ``name`` is running in another process.
        ValueError: unknown dataset, condition, target or retriever, a bad setting, or a
            stored run of that name with other settings.
    """
    settings = attribution_settings(condition, ablations, keep, seed, target, instances)
    settings["score_field"] = SCORE_FIELD.coerce(score_field)
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    look = {"retriever": retriever, "top_k": top_k, "chunk_size": chunk_size, "overlap": overlap}
    chosen = pick_instances(store.load_instances(dataset), instances)
    with store.run_lock(name):
        open_run(
            store,
            backend,
            name,
            dataset,
            options=options,
            retrieval=run_config(settings, **look),
            conditions=(condition,),
            notes=notes,
            kind="attribution",
        )
        shown, calls = plan_run(chosen, settings, **look)
        first = execute(
            store,
            name,
            calls,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
        )
        if first.status in ("cancelled", "failed"):
            return first
        tables = ablation_tables(store.prediction_rows(name), target, settings["score_field"])
        drops = plan_drops(chosen, shown, tables, seed=seed, keep=keep)
        second = execute(
            store,
            name,
            drops,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
        )
    return _merged(first, second)


def _merged(first: RunSummary, second: RunSummary) -> RunSummary:
    """One summary of two executions of a run (the second's status)."""
    return replace(
        second,
        planned=first.planned + second.planned,
        executed=first.executed + second.executed,
        cached=first.cached + second.cached,
        skipped_existing=first.skipped_existing + second.skipped_existing,
        errors=first.errors + second.errors,
        parse_errors=first.parse_errors + second.parse_errors,
        seconds=first.seconds + second.seconds,
        model_seconds=first.model_seconds + second.model_seconds,
    )


# --------------------------------------------------------------------------- DOLCE


def open_probe_run(
    store: Store,
    backend: Any,
    name: str,
    dataset: str,
    options: Mapping[str, Any] | None,
    *,
    units: str,
    per_length: int,
    strategy: str,
    seed: int,
    max_spans: int,
    limit: int | None = None,
) -> list[PlannedCall]:
    """Plan DOLCE's probes of ``dataset`` and open run ``name`` with their settings.

    The first ``limit`` instances; ``max_spans`` is recorded only for the ``paper`` strategy,
    the options as given. Shared by :func:`run_probes` and the batch export.
    """
    instances = store.load_instances(dataset)
    if limit is not None:
        instances = instances[:limit]
    calls: list[PlannedCall] = []
    for inst in instances:
        calls.extend(
            plan_probes(
                inst,
                units=units,
                per_length=per_length,
                strategy=strategy,
                seed=seed,
                max_spans=max_spans,
            )
        )
    probe: dict[str, Any] = {
        "units": units,
        "per_length": per_length,
        "strategy": strategy,
        "seed": seed,
    }
    if parse_strategy(strategy)[0] == "paper":
        probe["max_spans"] = max_spans
    open_run(
        store,
        backend,
        name,
        dataset,
        options=options,
        reported_options=False,
        retrieval={"probe": probe},
        conditions=(PROBE_CONDITION,),
        kind="probes",
    )
    return calls


def run_probes(
    store: Store,
    dataset: str,
    backend: Backend,
    *,
    name: str,
    units: str = "sentence",
    per_length: int = PER_LENGTH.default,
    strategy: str = STRATEGY.default,
    seed: int = 0,
    limit: int | None = None,
    concurrency: int = 1,
    options: Mapping[str, Any] | None = None,
    progress: _ProgressFn | None = None,
    cancel: threading.Event | None = None,
    max_spans: int = MAX_SPANS.default,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> RunSummary:
    """Plan and execute the DOLCE probes of a stored dataset (resumable by ``name``).

    The run records ``options`` as given (not the backend's own), and its probe settings in
    place of a retrieval configuration (``max_spans`` only for the ``paper`` strategy, the
    one it changes).

    Args:
        store: the store.
        dataset: a stored dataset.
        backend: the model backend.
        name: the run id.
        units: ``sentence`` or ``passage``.
        per_length: random spans per length (strategy ``random``).
        strategy: ``paper`` (default: all spans, or every 5th start, up to ``max_spans`` per
            length; :mod:`core.dolce.probes`), ``random`` or ``take-every-N``.
        seed: span seed.
        limit: probe only the first ``limit`` instances.
        concurrency: worker threads calling the backend.
        options: generation options recorded on the run.
        progress: progress callback (see :func:`core.execution.engine.execute`).
        cancel: set it to stop (the run is resumable).
        max_spans: the ``paper`` strategy's cap on spans per observation length.
        on_plan: called once, when the run is open and before any call, with the spans
            taken per length (:func:`core.dolce.probes.summarize_plan`).

    Returns:
        The engine's :class:`core.execution.engine.RunSummary`.

    Raises:
        RunBusyError: run ``name`` is running in another process.
        ValueError: unknown dataset, units or strategy, or a run of that name with another
            configuration.
    """
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    # the lock before planning: a run going elsewhere is refused at once
    with store.run_lock(name), undone_if_refused(store, name):
        calls = open_probe_run(
            store,
            backend,
            name,
            dataset,
            options,
            units=units,
            per_length=per_length,
            strategy=strategy,
            seed=seed,
            max_spans=max_spans,
            limit=limit,
        )
        if on_plan is not None:  # after open_run: a refused run shows no plan
            on_plan(summarize_plan(calls))
        return execute(
            store,
            name,
            calls,
            backend,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
        )


# --------------------------------------------------------------------------- demo


def build_demo(
    store: Store, progress: Callable[[float, str], None] | None = None
) -> dict[str, Any]:
    """Build the demo store: controlled-200 and the embedded reader on the four conditions.

    The dataset is the controlled generator's preset (seed 42); the run is the embedded
    baseline reader on the four conditions (lexical top-3), through :func:`run_conditions`.

    Idempotent: an existing dataset is reused and a stored run continues where it stopped.

    Args:
        store: the store.
        progress: ``callable(fraction: float, text: str)`` for a progress bar, or None.

    Returns:
        ``{"dataset", "run", "summary"}`` (the run summary as a dict).
    """

    def say(frac: float, text: str) -> None:
        if progress is not None:
            progress(min(max(frac, 0.0), 1.0), text)

    if DEMO_DATASET not in store.dataset_names():
        say(0.0, f"generating the demo dataset {DEMO_DATASET} ...")
        store.write_dataset(build_controlled(preset=DEMO_DATASET, seed=42, name=DEMO_DATASET))
    say(0.1, "running the embedded baseline reader on the four conditions ...")

    def on_progress(p: Progress) -> None:
        frac = p.done / p.total if p.total else 1.0
        say(0.1 + 0.9 * frac, f"embedded baseline: {p.done}/{p.total} calls ({p.rate:.0f}/s)")

    summary = run_conditions(
        store,
        DEMO_DATASET,
        make_backend("embedded"),
        ("no_evidence", "full_context", "retrieved", "oracle"),
        name=DEMO_RUN,
        progress=on_progress,
        notes="demo: embedded extractive baseline reader (not a language model)",
    )
    say(1.0, "demo ready")
    return {"dataset": DEMO_DATASET, "run": DEMO_RUN, "summary": summary.to_dict()}
