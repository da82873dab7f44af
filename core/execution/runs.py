"""Runs: every way of running a method against a model starts, goes and ends here.

A run is a row in the store (:class:`RunSpec`: dataset, backend, model, options, retrieval,
conditions) and the predictions stored under it. This module is the one caller of the run
lifecycle (:func:`open_run` creates or reopens the row with status ``running``;
:func:`core.execution.engine.execute` commits the final status, ``done`` / ``cancelled`` /
``failed``,
with the run's last batch) for every kind of run:

- :func:`run_conditions`: the four-condition protocol (SPEC §6.1);
- :func:`run_interventions`: CUE-R, base traces then interventions (SPEC §7);
- :func:`run_probes`: DOLCE span-sampling probes;
- :func:`judge_answerability`: CRUX 0..5 answerability ratings (stored as ratings, not as a
  run: they are keyed by the judge's name);
- :func:`build_demo`: the demo store (controlled-200 and the embedded baseline reader).

Planning stays with the planners (:mod:`core.oncu.conditions`, :mod:`core.cuer.interventions`,
:mod:`core.dolce.probes`) and execution with :mod:`core.execution.engine`. The CLI commands
(``core/commands``), the Runs page (through :mod:`core.execution.jobs`, which starts ``python -m
core
run``), the first start of the dashboard and the Case view's companion runs
(:mod:`core.execution.rerun`) all come here.

One process runs a run name at a time: every run holds its lock (:meth:`core.store.Store.
run_lock`, a lock file beside the store that dies with its process) from before its row is
created or reopened until it ends, done, cancelled or failed. Starting a run that is running
elsewhere raises :class:`core.store.RunBusyError` at once, naming the run and the pid holding
it, before any model call and with the store unchanged.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from core.attribution.metrics import SCORE_FIELD, ablation_tables, plan_drops
from core.attribution.plan import attribution_settings, pick_instances, plan_run, run_config
from core.backends import make_backend
from core.backends.base import Backend
from core.crux.metrics import JUDGE_TEMPLATE_VERSION, judge_messages, parse_rating
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
from core.execution.engine import (
    Progress,
    RunSummary,
    cache_key,
    execute,
    options_hash,
    plan_and_execute,
)
from core.execution.prompts import TEMPLATE_VERSION, prompt_hash, template_hash
from core.names import check_name
from core.oncu.conditions import (
    check_conditions,
    plan_conditions,
    planned_keys,
    retrieval_config,
)
from core.retrieval.retrievers import reranker
from core.scoring.parsing import DEFAULT_MAX_CITED, MAX_CITED
from core.store import RUN_KINDS, RunBusyError, Store
from core.types import Passage, stored_ids

__all__ = [
    "DEMO_DATASET",
    "DEMO_RUN",
    "base_citations",
    "build_demo",
    "judge_answerability",
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
]

#: The demo store's dataset (controlled generator preset, seed 42).
DEMO_DATASET = "controlled-200"
#: The demo store's run: the embedded baseline reader on the four conditions.
DEMO_RUN = "demo-embedded"

_ProgressFn = Callable[[Progress], None]


# --------------------------------------------------------------------------- the run row


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a run is: recorded on its row and checked when the run is resumed.

    Attributes:
        run_id: the run's name (unique in the store).
        dataset: the dataset the run reads.
        backend: backend kind (``embedded``, ``ollama``, ``openai``).
        model: model name as the user gave it.
        options: effective generation options (temperature, seed, num_ctx ...).
        retrieval: the retrieved condition's configuration (:func:`core.oncu.conditions.
            retrieval_config`); empty when no retrieved condition is planned.
        conditions: the conditions planned.
        notes: free text.
        kind: what the run is (:data:`core.store.RUN_KINDS`): ``conditions`` (the four
            matched conditions), ``interventions`` (CUE-R), ``probes`` (DOLCE), ``judge``,
            ``rerun`` (Case-view reruns of an imported run).
    """

    run_id: str
    dataset: str
    backend: str
    model: str
    options: Mapping[str, Any] = field(default_factory=dict)
    retrieval: Mapping[str, Any] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()
    notes: str = ""
    kind: str = "conditions"


_CHECKED = ("dataset_id", "kind", "backend", "model", "model_digest", "options", "template_hash")


def run_spec(
    backend: Backend,
    name: str,
    dataset: str,
    *,
    options: Mapping[str, Any] | None = None,
    reported_options: bool = True,
    retrieval: Mapping[str, Any] | None = None,
    conditions: Iterable[str] = (),
    notes: str = "",
    kind: str = "conditions",
    max_cited: int = DEFAULT_MAX_CITED,
) -> RunSpec:
    """The :class:`RunSpec` of a run of ``backend`` (kind and model read from the backend).

    Args:
        backend: the model backend.
        name: the run id.
        dataset: the dataset the run reads.
        options: generation options to record ...
        reported_options: ... when the backend's ``describe()`` reports no ``options`` of its
            own (True), or always (False: the options the caller passed, as given).
        retrieval: the run's retrieval (or probe) configuration.
        conditions: the conditions planned.
        notes: free text stored on the run.
        kind: the run's kind (:data:`core.store.RUN_KINDS`).
        max_cited: evidence ids scored per reply (:data:`core.scoring.parsing.MAX_CITED`); recorded
            in ``options`` as ``max_cited`` when not the default 3.

    Raises:
        ValueError: an unknown kind, or a ``name`` that :func:`core.names.check_name` refuses.
    """
    check_name("run", name)
    if kind not in RUN_KINDS:
        raise ValueError(f"unknown run kind {kind!r}; choose from {', '.join(RUN_KINDS)}")
    desc = backend.describe()
    reported = desc.get("options") if reported_options else None
    recorded = dict(reported or options or {})
    if max_cited != DEFAULT_MAX_CITED:
        recorded["max_cited"] = MAX_CITED.coerce(max_cited)
    return RunSpec(
        run_id=name,
        dataset=dataset,
        backend=getattr(backend, "name", desc.get("kind", "")),
        model=getattr(backend, "model", desc.get("model", "")),
        options=recorded,
        retrieval=dict(retrieval or {}),
        conditions=tuple(conditions),
        notes=notes,
        kind=kind,
    )


def start_run(store: Store, spec: RunSpec, backend: Backend) -> None:
    """Create the run row, or reopen a stored run with the same configuration.

    Records the template version and hash, the backend's description and model digest, the
    options, the retrieval configuration, the conditions and the kind; a new run is
    ``planned`` until the engine stores its first call (``running``), a reopened one keeps
    its status until then.

    The run's lock (:meth:`core.store.Store.run_lock`) is held while the row is written;
    a caller that goes on to execute calls holds it for the whole run.

    Raises:
        RunBusyError: the run is running in another process (nothing is written).
        ValueError: the dataset is not stored, or a run of that name exists with another
            dataset, backend, model, model digest, options, template or retrieval setting
            (resuming it would mix configurations in one run).
    """
    desc = dict(backend.describe())
    row: dict[str, Any] = {
        "run_id": spec.run_id,
        "dataset_id": spec.dataset,
        "backend": spec.backend,
        "model": spec.model,
        "model_digest": desc.get("model_digest") or desc.get("digest"),
        "options": dict(spec.options),
        "template_version": TEMPLATE_VERSION,
        "template_hash": template_hash(),
        "retrieval": dict(spec.retrieval),
        "notes": spec.notes,
        "kind": spec.kind,
        "backend_info": desc,
        "conditions": list(spec.conditions),
    }
    with store.run_lock(spec.run_id), store.write_batch() as con:
        if not store.has_dataset(spec.dataset, con=con):
            raise ValueError(f"no dataset named '{spec.dataset}' in {store.path}")
        old = store.run_row(spec.run_id, con=con)
        if old is not None:
            _reopen(spec, old, row)
            if any(r["run_id"] == spec.run_id for r in store.changed_runs(con)):
                raise ValueError(  # its stored answers were made on other instances or gold
                    f"run '{spec.run_id}' ran on dataset '{spec.dataset}' before it was "
                    "replaced (--with-runs keep-orphans); resuming it would mix the two: "
                    "choose another --name"
                )
        else:
            row["status"] = "planned"
        store.save_run(row, con=con)


def _reopen(spec: RunSpec, old: Mapping[str, Any], row: dict[str, Any]) -> None:
    """Check a stored run's configuration against ``row``; merge conditions and notes."""
    for col in _CHECKED:
        if col in ("model_digest", "kind") and _norm(old.get(col)) is None:
            continue  # unknown when the run started (server unreachable, older store)
        if _norm(old.get(col)) != _norm(row[col]):
            raise ValueError(
                f"run '{spec.run_id}' exists with another {col} ({old.get(col)!r}, now "
                f"{row[col]!r}); choose another --name to start a new run"
            )
    if old.get("retrieval") and row["retrieval"] and old["retrieval"] != row["retrieval"]:
        raise ValueError(
            f"run '{spec.run_id}' exists with another retrieval setting "
            f"({old['retrieval']!r}, now {row['retrieval']!r}); choose another --name"
        )
    row["retrieval"] = row["retrieval"] or old.get("retrieval") or {}
    row["conditions"] = list(dict.fromkeys([*(old.get("conditions") or []), *spec.conditions]))
    row["notes"] = spec.notes or old.get("notes")


def _norm(value: Any) -> Any:
    return value if value not in (None, "", {}) else None


@contextmanager
def undone_if_refused(store: Store, name: str) -> Iterator[None]:
    """A run this block creates is deleted again when the block fails before storing a call.

    A command refused after :func:`open_run` wrote the ``planned`` row (a damaged store found
    while planning, a bad setting) leaves no run behind (issue 35 item 7); a run that existed
    before, or stored a call, is kept as it is.
    """
    new = store.run_row(name) is None
    try:
        yield
    except Exception:
        if new:
            with suppress(Exception):  # a store too damaged to delete it: the error says so
                store.discard_unstarted_run(name)
        raise


def open_run(store: Store, backend: Backend, name: str, dataset: str, **spec: Any) -> RunSpec:
    """Create or reopen run ``name`` of ``backend`` (:func:`run_spec`, then :func:`start_run`).

    Args:
        store: the store.
        backend: the model backend.
        name: the run id.
        dataset: a stored dataset.
        **spec: :func:`run_spec` keyword arguments.

    Returns:
        The run's spec, as recorded.

    Raises:
        RunBusyError: see :func:`start_run`.
        ValueError: see :func:`start_run`.
    """
    run = run_spec(backend, name, dataset, **spec)
    start_run(store, run, backend)
    return run


# --------------------------------------------------------------------------- conditions


def run_conditions(
    store: Store,
    dataset: str,
    backend: Backend,
    conditions: Iterable[str],
    *,
    name: str,
    retriever: str = "lexical",
    top_k: int = 3,
    chunk_size: int = 220,
    overlap: int = 40,
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
            store, backend, name, dataset, options=options, conditions=conds, notes=notes,
            retrieval=retrieval if "retrieved" in conds else {}, max_cited=max_cited,
        )  # fmt: skip
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
            store, name, todo, conds, backend, concurrency=concurrency, progress=progress,
            cancel=cancel, stored=stored, retriever=retriever, top_k=top_k,
            chunk_size=chunk_size, overlap=overlap, rerank=retrieval.get("rerank"),
            rerank_model=retrieval.get("rerank_model"),
        )  # fmt: skip
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
    chunk_size: int = 220,
    overlap: int = 40,
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
            store, backend, name, dataset, options=options, retrieval=retrieval,
            conditions=("retrieved", "intervention"), notes=notes, kind="interventions",
        )  # fmt: skip
        instances = store.load_instances(dataset)
        base_calls = plan_conditions(
            instances, ["retrieved"], retriever=retriever, top_k=top_k, chunk_size=chunk_size,
            overlap=overlap,
        )  # fmt: skip
        first = execute(
            store, name, base_calls, backend, concurrency=concurrency, progress=progress,
            cancel=cancel,
        )  # fmt: skip
        if first.status != "done":
            return first
        cited = base_citations(store, name)
        calls = []
        for inst in instances:
            if inst.instance_id not in cited:
                continue
            calls.extend(
                plan_interventions(
                    inst, cited[inst.instance_id], top_k=top_k, retriever=retriever,
                    chunk_size=chunk_size, overlap=overlap, operators=ops, hardness=levels,
                    positions=places, two_support=two_support, zero_retrieval=zero_retrieval,
                    seed=seed,
                )  # fmt: skip
            )
        second = execute(
            store, name, calls, backend, concurrency=concurrency, progress=progress,
            cancel=cancel,
        )  # fmt: skip
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
    top_k: int = 3,
    chunk_size: int = 220,
    overlap: int = 40,
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
            store, backend, name, dataset, options=options, retrieval=run_config(settings, **look),
            conditions=(condition,), notes=notes, kind="attribution",
        )  # fmt: skip
        shown, calls = plan_run(chosen, settings, **look)
        first = execute(
            store, name, calls, backend, concurrency=concurrency, progress=progress,
            cancel=cancel,
        )  # fmt: skip
        if first.status in ("cancelled", "failed"):
            return first
        tables = ablation_tables(store.prediction_rows(name), target, settings["score_field"])
        drops = plan_drops(chosen, shown, tables, seed=seed, keep=keep)
        second = execute(
            store, name, drops, backend, concurrency=concurrency, progress=progress,
            cancel=cancel,
        )  # fmt: skip
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
        instances = store.load_instances(dataset)
        if limit is not None:
            instances = instances[:limit]
        calls = []
        for inst in instances:
            calls.extend(
                plan_probes(
                    inst, units=units, per_length=per_length, strategy=strategy, seed=seed,
                    max_spans=max_spans,
                )  # fmt: skip
            )
        probe: dict[str, Any] = {
            "units": units, "per_length": per_length, "strategy": strategy, "seed": seed,
        }  # fmt: skip
        if parse_strategy(strategy)[0] == "paper":
            probe["max_spans"] = max_spans
        open_run(
            store, backend, name, dataset, options=options, reported_options=False,
            retrieval={"probe": probe}, conditions=(PROBE_CONDITION,), kind="probes",
        )  # fmt: skip
        if on_plan is not None:  # after open_run: a refused run shows no plan
            on_plan(summarize_plan(calls))
        return execute(
            store, name, calls, backend, concurrency=concurrency, progress=progress,
            cancel=cancel,
        )  # fmt: skip


# --------------------------------------------------------------------------- CRUX judge


def answerability_pairs(
    store: Store, dataset: str, sq: pd.DataFrame, passages: str = "gold"
) -> Iterator[tuple[Any, Passage, str, list[dict[str, str]]]]:
    """Every (sub-question, passage) pair CRUX's answerability judge rates (seed 002 Fig. 8).

    Yields ``(sub-question row, passage, context, messages)`` in the sub-questions' order, each
    instance's passages in order (only gold ones when ``passages`` is ``gold``); instances not
    stored are skipped. Both the CRUX judge and the ``crux-answerability`` judge runs plan
    from here.
    """
    wanted = sorted(set(sq["instance_id"]))
    by_inst = {i.instance_id: i for i in store.load_instances(dataset, wanted)}
    for row in sq.itertuples(index=False):
        inst = by_inst.get(row.instance_id)
        if inst is None:
            continue
        for p in inst.passages:
            if passages == "gold" and not p.is_gold:
                continue
            context = f"{p.title}\n{p.text}" if p.title else p.text
            yield row, p, context, judge_messages(str(row.text or ""), context)


def judge_answerability(
    store: Store,
    dataset: str,
    backend: Backend,
    *,
    passages: str = "gold",
    options: Mapping[str, Any] | None = None,
    judge: str | None = None,
) -> dict[str, Any]:
    """Rate (passage, sub-question) pairs 0..5 with the CRUX rubric and store the ratings.

    Every call goes through the response cache (key: backend kind, model digest or name,
    options hash, prompt hash), so rerunning the judge costs no model calls. The ratings are
    stored under the judge's name (:meth:`core.store.Store.write_crux_judgments`), not as a
    run.

    Args:
        store: the store.
        dataset: a dataset with stored sub-questions.
        backend: the judge's backend (temperature 0 is the CRUX setting).
        passages: ``gold`` (the relevant passages P*, as CRUX pre-judges) or ``all``.
        options: generation options passed to the backend (part of the cache key).
        judge: the name the ratings are stored under; default
            ``<backend>:<model>|crux-v<version>``.

    Returns:
        ``{"judge", "n_pairs", "n_called", "n_cached", "n_errors"}``; a failed call is not
        stored (rerun to fill it).

    Raises:
        ValueError: bad ``passages`` value, unknown dataset or no sub-questions stored.
    """
    if passages not in ("gold", "all"):
        raise ValueError(f"passages must be 'gold' or 'all', got {passages!r}")
    if dataset not in store.dataset_names():
        raise ValueError(f"unknown dataset {dataset!r}")
    sq, _ = store.crux_judgments(dataset)
    if sq.empty:
        raise ValueError(
            f"dataset {dataset!r} has no sub-questions; store them first "
            "(Store.write_crux_judgments)"
        )
    desc = backend.describe() if hasattr(backend, "describe") else {}
    model_id = desc.get("model_digest") or getattr(backend, "model", "")
    name = judge or f"{backend.name}:{backend.model}|crux-v{JUDGE_TEMPLATE_VERSION}"
    opts = dict(options or {})
    ohash = options_hash(opts)
    pairs = []
    for row, p, _, msgs in answerability_pairs(store, dataset, sq, passages):
        key = cache_key(backend.name, model_id, ohash, prompt_hash(msgs))
        pairs.append((row.instance_id, row.sq_id, p.passage_id, msgs, key))
    cached = store.cached_responses([k for *_, k in pairs])
    ratings, new_cache = [], []
    n_called = n_errors = 0
    for iid, sq_id, pid, msgs, key in pairs:
        if key in cached:
            text = json.loads(cached[key]).get("text", "")
        else:
            reply = backend.generate(msgs, opts)
            n_called += 1
            if reply.error is not None:
                n_errors += 1
                continue
            text = reply.text
            cached[key] = json.dumps({"text": text})
            new_cache.append({"cache_key": key, "backend": backend.name, "model": model_id,
                              "options_hash": ohash, "prompt_hash": prompt_hash(msgs),
                              "response": cached[key]})  # fmt: skip
        ratings.append({"instance_id": iid, "sq_id": sq_id, "passage_id": pid,
                        "rating": parse_rating(text), "judge": name})  # fmt: skip
    if new_cache:
        with store.transaction() as con:
            store.write_cache(con, pd.DataFrame(new_cache))
    if ratings:
        store.write_crux_judgments(dataset, sq, pd.DataFrame(ratings))
    return {"judge": name, "n_pairs": len(pairs), "n_called": n_called,
            "n_cached": len(pairs) - n_called, "n_errors": n_errors}  # fmt: skip


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
