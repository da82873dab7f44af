"""Case-view reruns: one instance, one perturbation, run now, stored, compared with the original.

Operators ``remove`` / ``replace`` / ``duplicate`` / ``move`` are planned by the CUE-R module
(:func:`core.cuer.interventions.plan_rerun`); ``retriever`` (change the retriever family and/or
top-k) is planned by :func:`core.oncu.conditions.plan_conditions`. The call runs through
:func:`core.execution.engine.rerun_call` (cache allowed) and is stored as condition ``intervention``
with
a canonical variant, so it never mixes into the four-condition aggregates.

Where the reruns go: into the base run when its backend can be called again (embedded /
ollama / openai), so original and perturbed come from the same model; for imported runs into a
companion run ``<dataset>:rerun:<backend>:<model>``, where the unperturbed original is run with
the same backend first (a fair comparison), and shown beside the imported answer.

A rerun never changes the base run's row (status, counts, timings): it adds a prediction to
the run without running it. A companion run is marked finished after each rerun, with its
stored calls as its plan. A call that fails (server unreachable, say) is stored and returned
with its ``error``; the result then carries that error and no divergence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from core.backends import make_backend
from core.backends.base import Backend
from core.cuer.interventions import plan_rerun
from core.cuer.metrics import trace_divergence
from core.execution.engine import rerun_call
from core.execution.runs import open_run
from core.oncu.conditions import plan_conditions
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP, TOP_K
from core.retrieval.retrievers import retrieve
from core.store import Store
from core.types import Instance, PlannedCall
from core.views import answer_diff

__all__ = [
    "OPERATORS",
    "RERUN_CONDITIONS",
    "RerunRequest",
    "base_shown_ids",
    "missing_text",
    "plan_perturbation",
    "rerun",
    "shown_context",
]

#: Perturbation operators the Case view offers.
OPERATORS = ("remove", "replace", "duplicate", "move", "retriever")
#: Base conditions a perturbation applies to (the shown evidence).
RERUN_CONDITIONS = ("retrieved", "full_context", "oracle")
_CALLABLE = ("embedded", "ollama", "openai")


@dataclass(frozen=True, slots=True)
class RerunRequest:
    """A rerun the user asked for in the Case view.

    Attributes:
        dataset: the dataset.
        instance_id: the instance.
        base_run: the run whose prediction is the original.
        condition: base condition whose shown evidence is perturbed (``RERUN_CONDITIONS``).
        operator: one of :data:`OPERATORS`.
        target_id: passage id the operator acts on (remove / replace / duplicate / move).
        params: operator parameters: ``hardness`` (replace: easy / medium / hard),
            ``position`` (duplicate: front / after / end), ``move_to`` (move: 0-based index),
            ``retriever`` and ``top_k`` (retriever).
        backend: backend kind for imported base runs (the base run's own otherwise).
        model: model name for ``backend`` (None: its default).
        host: server of a server backend (an Ollama host, an OpenAI-compatible base URL);
            None: ``OLLAMA_HOST`` / ``OPENAI_BASE_URL`` as usual.
    """

    dataset: str
    instance_id: str
    base_run: str
    condition: str = "retrieved"
    operator: str = "remove"
    target_id: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "embedded"
    model: str | None = None
    host: str | None = None

    def checked(self) -> RerunRequest:
        """Return this request if it is valid.

        Raises:
            ValueError: naming the bad value and the allowed ones.
        """
        if self.operator not in OPERATORS:
            raise ValueError(f"unknown operator {self.operator!r}; choose one of {OPERATORS}")
        if self.condition not in RERUN_CONDITIONS:
            raise ValueError(
                f"unknown condition {self.condition!r}; choose one of {RERUN_CONDITIONS}"
            )
        if self.operator != "retriever" and not self.target_id:
            raise ValueError(f"operator {self.operator!r} needs a target passage")
        if self.backend not in _CALLABLE:
            raise ValueError(f"unknown backend {self.backend!r}; choose one of {_CALLABLE}")
        return self


def base_shown_ids(predictions: Any, run: str, condition: str) -> list[str]:
    """Passage ids the stored ``(run, condition)`` prediction showed, in prompt order.

    Empty when unknown (imported results, say).
    """
    if predictions is None or len(predictions) == 0:
        return []
    m = (predictions["run"] == run) & (predictions["condition"] == condition)
    m &= predictions["variant"].fillna("") == ""
    rows = predictions[m]
    if rows.empty:
        return []
    ids = rows["input_passage_ids"].iloc[0]
    if isinstance(ids, str) or not hasattr(ids, "__len__"):
        return []
    return [str(x) for x in list(ids)]


def shown_context(store: Store, run: Mapping[str, Any], instance: Instance, condition: str) -> list:
    """The evidence the base condition showed.

    Passages (full context, oracle) or the retrieved chunks (the run's retrieval
    configuration, its CE@N->k rerank included; default lexical top-3).
    """
    if condition == "full_context":
        return list(instance.passages)
    if condition == "oracle":
        return [p for p in instance.passages if p.is_gold]
    cfg = dict(run.get("retrieval") or {})
    rerank = (
        {"rerank": cfg["rerank_model"], "rerank_pool": int(cfg["rerank"])}
        if cfg.get("rerank")
        else {}
    )
    return retrieve(
        instance,
        cfg.get("retriever", "lexical"),
        int(cfg.get("top_k", TOP_K.default)),
        int(cfg.get("chunk_size", CHUNK_SIZE.default)),
        int(cfg.get("overlap", OVERLAP.default)),
        **rerank,
    )


def plan_perturbation(
    store: Store, run: Mapping[str, Any], instance: Instance, req: RerunRequest
) -> PlannedCall:
    """The planned call of a perturbation (condition ``intervention``).

    Raises:
        ValueError: bad request.
    """
    req.checked()
    if req.operator == "retriever":
        retriever = str(req.params.get("retriever", "lexical"))
        k = int(req.params.get("top_k", TOP_K.default))
        calls = plan_conditions([instance], ["retrieved"], retriever=retriever, top_k=k)
        meta = dict(calls[0].meta) | {
            "operator": "retriever",
            "retriever": retriever,
            "top_k": k,
            "base_condition": "retrieved",
        }
        return replace(
            calls[0], condition="intervention", variant=f"retriever:{retriever}@{k}", meta=meta
        )
    shown = shown_context(store, run, instance, req.condition)
    own = {"replace": "hardness", "duplicate": "position", "move": "move_to"}.get(req.operator)
    params = {own: req.params[own]} if own and own in req.params else {}
    if req.operator == "replace":
        cfg = dict(run.get("retrieval") or {})
        params |= {
            "chunk_size": int(cfg.get("chunk_size", CHUNK_SIZE.default)),
            "overlap": int(cfg.get("overlap", OVERLAP.default)),
        }
    return plan_rerun(instance, shown, req.operator, req.target_id, base=req.condition, **params)


def _target_run(
    store: Store, req: RerunRequest, base: Mapping[str, Any]
) -> tuple[str, Backend, bool]:
    """``(run_id, backend, companion)``: where the rerun is stored and which backend runs it.

    A companion run is opened by :func:`rerun` (:func:`core.execution.runs.open_run`, no generation
    options recorded: the backend's defaults run).
    """
    kind = str(base.get("backend") or "")
    if kind in _CALLABLE:
        return str(base["run_id"]), _backend(kind, base.get("model") or None, req.host), False
    backend = _backend(req.backend, req.model, req.host)
    model = getattr(backend, "model", req.model or "")
    return f"{req.dataset}:rerun:{req.backend}:{model}", backend, True


def _backend(kind: str, model: str | None, host: str | None) -> Backend:
    if not host:
        return make_backend(kind, model)
    if kind == "ollama":
        return make_backend(kind, model, hosts=[host])
    if kind == "openai":
        return make_backend(kind, model, base_url=host)
    return make_backend(kind, model)  # the embedded reader has no server


def missing_text(instance: Instance) -> str | None:
    """Why ``instance`` cannot be rerun (one line), or None when it can.

    A model can only be asked again what it was asked: with no question text, or no passage
    text at all (an instance built from a results file: ids, gold answer and metadata only),
    a rerun would send empty passages and report them as shown.
    """
    lacks = [
        what
        for what, empty in (
            ("question", not instance.question.strip()),
            ("passage", not any(p.text.strip() for p in instance.passages)),
        )
        if empty
    ]
    if not lacks:
        return None
    source = instance.metadata.get("imported_from") if instance.metadata else None
    where = f" (imported from {source}, which keeps ids and answers only)" if source else ""
    return (
        f"cannot rerun {instance.instance_id}: the store holds no {' or '.join(lacks)} text "
        f"for it{where}; import the dataset's instances (import dataset) and attach the "
        "results to them with import results --dataset NAME"
    )


def rerun(store: Store, req: RerunRequest) -> dict[str, Any]:
    """Run one perturbation now and return it beside the original.

    Returns:
        ``{"run", "original", "perturbed", "imported_original", "error", "divergence",
        "diff", "shown_before", "shown_after"}``: prediction rows (dicts with scores), the
        one-line error of a failed call (None when both sides have an answer), the trace
        divergence (SPEC §7; None when a call failed) and the word diff of the answers
        (empty when a call failed).

    The target run's lock (:meth:`core.store.Store.run_lock`) is held meanwhile. The base
    run's row is never changed.

    Raises:
        ValueError: unknown run or instance, bad request, or an instance without question
            or passage text (:func:`missing_text`).
        RunBusyError: the target run is running in another process (nothing is called).
    """
    req.checked()
    base = store.run_row(req.base_run)
    if base is None:
        raise ValueError(f"no run {req.base_run!r} in {store.path}")
    found = store.load_instances(req.dataset, [req.instance_id])
    if not found:
        raise ValueError(f"no instance {req.instance_id!r} in dataset {req.dataset!r}")
    instance = found[0]
    missing = missing_text(instance)
    if missing:
        raise ValueError(missing)
    run_id, backend, companion = _target_run(store, req, base)
    imported = None
    with store.run_lock(run_id):
        if companion:
            open_run(
                store,
                backend,
                run_id,
                req.dataset,
                reported_options=False,
                notes="Case-view reruns",
                kind="rerun",
            )
            imported = _stored(store, req.base_run, req.instance_id, req.condition)
            cfg = dict(base.get("retrieval") or {})
            plain = plan_conditions(
                [instance],
                [req.condition],
                retriever=cfg.get("retriever", "lexical"),
                top_k=int(cfg.get("top_k", TOP_K.default)),
            )
            original = rerun_call(store, run_id, plain[0], backend)
        else:
            original = _stored(store, run_id, req.instance_id, req.condition)
            if original is None:
                raise ValueError(
                    f"run {run_id!r} has no {req.condition} prediction for {req.instance_id!r}"
                )
        call = plan_perturbation(store, base, instance, req)
        perturbed = rerun_call(store, run_id, call, backend)
        if companion:
            # the companion is the reruns' own run: planned = its stored calls, then finished
            store.finish_run(run_id, "done", len(store.prediction_keys(run_id)))
    error = _error_of(perturbed) or _error_of(original)
    return {
        "run": run_id,
        "original": original,
        "perturbed": perturbed,
        "imported_original": imported,
        "error": error,
        "divergence": None
        if error
        else float(
            trace_divergence(
                original.get("cited_ids") or (),
                perturbed.get("cited_ids") or (),
                original.get("answer"),
                perturbed.get("answer"),
                original.get("confidence"),
                perturbed.get("confidence"),
                answer_type=instance.answer_type,
                reasoning_type=instance.reasoning_type,
            )
        ),
        "diff": [] if error else answer_diff(original.get("answer"), perturbed.get("answer")),
        "shown_before": list(original.get("input_passage_ids") or []),
        "shown_after": list(call.input_passage_ids),
    }


def _error_of(row: Mapping[str, Any]) -> str | None:
    """The first line of a prediction's ``error``, or None when the call did not fail."""
    err = row.get("error")
    if err is None or (isinstance(err, float) and math.isnan(err)) or not str(err).strip():
        return None
    return str(err).strip().splitlines()[0]


def _stored(store: Store, run_id: str, instance_id: str, condition: str) -> dict | None:
    df = store.prediction_rows(run_id, [(instance_id, condition, "")])
    if df.empty:
        return None
    out = {}
    for k, v in df.iloc[0].to_dict().items():
        if hasattr(v, "tolist") and not isinstance(v, str):
            v = v.tolist()
        elif isinstance(v, float) and math.isnan(v):
            v = None
        out[k] = v
    return out
