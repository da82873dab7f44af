"""Runs through batch files: export a run's calls for an offline batch runner, import its answers.

:func:`export_batch` plans a run exactly as the live commands do (the planners of
:mod:`core.oncu.conditions`, :mod:`core.cuer.interventions` and :mod:`core.dolce.probes`, the run
row through
:func:`core.execution.runs.open_run`), leaves out the calls already answered in the store, writes
the
rest as OpenAI Batch API request lines (:mod:`core.batch.files`), keeps what the import needs
of each call in the store (:mod:`core.store.batch_rows`) and marks the run ``waiting`` (for a
batch's answers).

:func:`import_batch` reads batch output files (vLLM ``run_batch``, the OpenAI Batch API, Ray
Data LLM pipelines writing the same lines), checks every line of every file before storing
anything, and stores each file's answers in one transaction through the live engine's own
row building, scoring and writing (:mod:`core.execution.engine`), so an imported answer is stored
and
scored exactly as the same reply from a live call. A call stored already is not stored again
(a second import adds nothing); a failed line is stored as a failed call (an error, never a
scored answer), and replaced by an answer imported later. After each file the run is
``done`` when every exported call has a stored reply (``partial`` / ``failed`` when some / all
failed, :meth:`core.store.Store.finish_run`), ``partial`` while some are still missing.

A CUE-R run is exported in two rounds, as it runs live in two phases: first the base
``retrieved`` traces; once their answers are imported, the same export writes the
interventions planned from their citations.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.attribution.metrics import SCORE_FIELD, ablation_tables, plan_drops
from core.attribution.plan import attribution_settings, pick_instances, plan_run, run_config
from core.backends.base import Reply
from core.backends.support import answer_logprob_confidence
from core.batch.files import (
    BatchFileError,
    ResultLine,
    custom_id,
    read_results,
    request_line,
    request_options,
    shard_paths,
)
from core.cuer.interventions import check_plan_options, plan_interventions, plan_settings
from core.execution.engine import WriteContext, prediction_row, write_rows
from core.execution.runs import base_citations, open_probe_run, open_run, undone_if_refused
from core.execution.score_rows import ScoringInputs
from core.export.outpaths import check_out_path, staged_file
from core.oncu.conditions import (
    check_conditions,
    plan_conditions,
    planned_keys,
    retrieval_config,
)
from core.retrieval.chunks import CHUNK_SIZE, OVERLAP, TOP_K
from core.retrieval.retrievers import reranker
from core.store import Store
from core.store.batch_rows import batch_calls, drop_batch_calls, save_batch_calls
from core.types import PlannedCall

__all__ = ["BATCH_KINDS", "WAITING", "BatchBackend", "export_batch", "import_batch"]

#: The run status of a run whose exported calls wait for a batch's answers.
WAITING = "waiting"
#: Run kinds a batch file can carry.
BATCH_KINDS = ("conditions", "interventions", "probes", "attribution")

_Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class BatchBackend:
    """The ``openai`` backend of a batch run, as its run row records it (never called).

    Attributes:
        model: the model name the batch runner serves.
        options: the generation options a live ``openai`` run records
            (:func:`core.batch.files.request_options`).
    """

    model: str
    options: Mapping[str, Any]
    name: str = "openai"

    def describe(self) -> dict[str, Any]:
        """What the run row records: a live ``openai`` backend's description, offline."""
        return {
            "kind": self.name,
            "backend": self.name,
            "model": self.model,
            "model_digest": None,
            "label": f"OpenAI-compatible {self.model} (batch file)",
            "baseline": False,
            "options": dict(self.options),
            "request": {
                "response_format": "json_schema:ANSWER_SCHEMA",
                "stream": False,
                "via": "batch file",
            },
        }

    def generate(self, messages: Any, options: Any = None) -> Reply:
        """Never called: a batch run's calls are made by the batch runner."""
        return Reply(text="", error="a batch run's calls are made by the batch runner")


# --------------------------------------------------------------------------- export


def export_batch(
    store: Store,
    kind: str,
    dataset: str,
    name: str,
    model: str,
    out: Path,
    *,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    shard_size: int | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Plan run ``name`` and write its calls not yet answered as OpenAI Batch request lines.

    Args:
        store: the store.
        kind: ``conditions``, ``interventions`` or ``probes`` (:data:`BATCH_KINDS`).
        dataset: a stored dataset.
        name: the run id (a new run, or a stored one of the same configuration).
        model: the model name the batch runner serves.
        out: the file to write (``F.000.jsonl`` ... with ``shard_size``).
        seed: the generation seed (and a probe run's span seed, as ``run-probes --seed``).
        options: a probe run's recorded options as the live command gives them (a probe run
            records the command's options, the others the backend's).
        shard_size: most lines per file (:func:`core.batch.files.shard_paths`).
        **settings: the planner's settings, named as the live run function takes them
            (:func:`core.execution.runs.run_conditions`,
            :func:`core.execution.runs.run_interventions` with
            ``replace_seed`` for its ``seed``, :func:`core.execution.runs.run_probes`).

    Returns:
        ``{"run", "kind", "phase", "n_calls", "files", "already_stored", "status"}``.

    Raises:
        RunBusyError: the run is running in another process.
        ValueError: an unknown kind, dataset or setting, or a stored run of that name with
            another configuration.
    """
    if kind not in BATCH_KINDS:
        raise ValueError(f"unknown batch kind {kind!r}; choose from {', '.join(BATCH_KINDS)}")
    if not str(model or "").strip():
        raise ValueError("a batch file needs the model name the runner serves (--model NAME)")
    backend = BatchBackend(str(model).strip(), request_options(seed))
    shard_paths(out, 0, shard_size)  # a bad --shard-size fails before the run row
    out = check_out_path(out)  # so does a path that cannot be a file
    # all or nothing (issue 35): a failure after the run row was made deletes a new run again
    with store.run_lock(name), undone_if_refused(store, name):
        new = store.run_row(name) is None
        plan = {
            "conditions": _plan_conditions,
            "interventions": _plan_interventions,
            "probes": _plan_probes,
            "attribution": _plan_attribution,
        }[kind]
        calls, phase = plan(store, dataset, name, backend, seed, options, settings)
        with store.attached(read_only=True) as con:
            stored_all = store.prediction_keys(name, con=con)
            stored = store.prediction_keys(name, ok_only=True, con=con)
        todo = [c for c in calls if (c.instance_id, c.condition, c.variant) not in stored]
        lines = [(custom_id(name, c.instance_id, c.condition, c.variant), c.messages) for c in todo]
        files = write_request_files(
            lines, backend.model, {**backend.options, **(options or {})}, out, shard_size
        )
        n_planned = len(stored_all | {(c.instance_id, c.condition, c.variant) for c in calls})
        try:
            with store.write_batch() as con:
                if new:
                    drop_batch_calls(con, name)  # a deleted run's calls are not this run's
                save_batch_calls(con, [_call_row(name, c) for c in todo])
                if todo:
                    store.save_run(
                        {"run_id": name, "status": WAITING, "n_planned": n_planned}, con=con
                    )
        except BaseException:
            for path in files:  # the calls are not recorded: their files would not import
                path.unlink(missing_ok=True)
            raise
        status = (store.run_row(name) or {}).get("status")
    return {
        "run": name,
        "kind": kind,
        "phase": phase,
        "n_calls": len(todo),
        "files": [str(p) for p in files],
        "already_stored": len(calls) - len(todo),
        "status": status,
    }


def write_request_files(
    lines: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    model: str,
    options: Mapping[str, Any],
    out: Path,
    shard_size: int | None,
) -> list[Path]:
    """Write ``(custom_id, messages)`` calls as request lines, split by ``shard_size``.

    Each file is written whole, then renamed into place; when one fails (disk full), the
    files written before it are removed. Returns the files written (none for no calls).
    """
    if not lines:
        return []
    paths = shard_paths(out, len(lines), shard_size)
    size = len(lines) if len(paths) == 1 else int(shard_size or len(lines))
    done: list[Path] = []
    try:
        for i, path in enumerate(paths):
            with staged_file(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
                for cid, messages in lines[i * size : (i + 1) * size]:
                    fh.write(request_line(cid, model, messages, options) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            done.append(path)
    except BaseException:
        for path in done:
            path.unlink(missing_ok=True)
        raise
    return paths


def _call_row(run_id: str, call: PlannedCall) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "instance_id": call.instance_id,
        "condition": call.condition,
        "variant": call.variant,
        "prompt_hash": call.prompt_hash,
        "input_passage_ids": list(call.input_passage_ids),
        "meta": json.dumps(dict(call.meta), sort_keys=True, default=str, ensure_ascii=False),
    }


def _plan_conditions(
    store: Store,
    dataset: str,
    name: str,
    backend: BatchBackend,
    seed: int,
    options: Mapping[str, Any] | None,
    s: Mapping[str, Any],
) -> tuple[list[PlannedCall], str]:
    """The four-condition calls, as :func:`core.execution.runs.run_conditions` plans them."""
    conds = check_conditions(s.get("conditions") or ())
    retrieval = retrieval_config(
        s.get("retriever", "lexical"),
        s.get("top_k", TOP_K.default),
        s.get("chunk_size", CHUNK_SIZE.default),
        s.get("overlap", OVERLAP.default),
        s.get("rerank"),
        s.get("rerank_model"),
    )
    if "rerank" in retrieval:
        if "retrieved" not in conds:
            raise ValueError(
                "rerank applies to the retrieved condition: add 'retrieved' to the conditions "
                "or drop the rerank"
            )
        reranker(retrieval["rerank_model"])  # fail before the run row
    open_run(
        store,
        backend,
        name,
        dataset,
        conditions=conds,
        retrieval=retrieval if "retrieved" in conds else {},
    )
    stored = store.prediction_keys(name, ok_only=True)
    todo = [
        i for i in store.load_instances(dataset) if not stored.issuperset(planned_keys(i, conds))
    ]
    calls = plan_conditions(
        todo,
        conds,
        retriever=retrieval["retriever"],
        top_k=retrieval["top_k"],
        chunk_size=retrieval["chunk_size"],
        overlap=retrieval["overlap"],
        rerank=retrieval.get("rerank"),
        rerank_model=retrieval.get("rerank_model"),
    )
    return calls, "conditions"


def _plan_interventions(
    store: Store,
    dataset: str,
    name: str,
    backend: BatchBackend,
    seed: int,
    options: Mapping[str, Any] | None,
    s: Mapping[str, Any],
) -> tuple[list[PlannedCall], str]:
    """CUE-R's calls as :func:`core.execution.runs.run_interventions` plans them, by phase.

    Phase ``base`` (the retrieved traces) while one of them is not answered; then phase
    ``interventions``, planned from the stored base traces' citations.
    """
    ops, levels, places = check_plan_options(
        s.get("operators"), s.get("hardness"), s.get("positions", ("end",))
    )
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    top_k, retriever = s.get("top_k", 5), s.get("retriever", "lexical")
    chunk_size, overlap = s.get("chunk_size", CHUNK_SIZE.default), s.get("overlap", OVERLAP.default)
    retrieval = plan_settings(retrieval_config(retriever, top_k, chunk_size, overlap))
    open_run(
        store,
        backend,
        name,
        dataset,
        retrieval=retrieval,
        conditions=("retrieved", "intervention"),
        kind="interventions",
    )
    instances = store.load_instances(dataset)
    base = plan_conditions(
        instances,
        ["retrieved"],
        retriever=retriever,
        top_k=top_k,
        chunk_size=chunk_size,
        overlap=overlap,
    )
    stored = store.prediction_keys(name, ok_only=True)
    if any((c.instance_id, c.condition, c.variant) not in stored for c in base):
        return base, "base"
    cited = base_citations(store, name)
    calls: list[PlannedCall] = []
    for inst in instances:
        if inst.instance_id in cited:
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
                    two_support=s.get("two_support", True),
                    zero_retrieval=s.get("zero_retrieval", True),
                    seed=s.get("replace_seed", 0),
                )
            )
    return calls, "interventions"


def _plan_attribution(
    store: Store,
    dataset: str,
    name: str,
    backend: BatchBackend,
    seed: int,
    options: Mapping[str, Any] | None,
    s: Mapping[str, Any],
) -> tuple[list[PlannedCall], str]:
    """Attribution calls as :func:`core.execution.runs.run_attribution` plans them, by phase.

    Phase ``ablations`` (each instance's unablated and ablated calls) while one of them is not
    answered; then phase ``drops``: the top-k drops of the surrogates fitted on the stored
    answers (:func:`core.attribution.metrics.plan_drops`).
    """
    settings = attribution_settings(
        s.get("condition", "full_context"),
        s.get("ablations", 32),
        s.get("keep", 0.5),
        s.get("mask_seed", 0),
        s.get("target", "retention"),
        s.get("instances"),
    )
    settings["score_field"] = SCORE_FIELD.coerce(s.get("score_field") or SCORE_FIELD.default)
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    look = {k: s[k] for k in ("retriever", "top_k", "chunk_size", "overlap") if k in s}
    chosen = pick_instances(store.load_instances(dataset), s.get("instances"))
    open_run(
        store,
        backend,
        name,
        dataset,
        retrieval=run_config(settings, **look),
        conditions=(settings["condition"],),
        kind="attribution",
    )
    shown, calls = plan_run(chosen, settings, **look)
    stored = store.prediction_keys(name, ok_only=True)
    if any((c.instance_id, c.condition, c.variant) not in stored for c in calls):
        return calls, "ablations"
    tables = ablation_tables(
        store.prediction_rows(name), settings["target"], settings["score_field"]
    )
    return plan_drops(chosen, shown, tables, seed=settings["seed"], keep=settings["keep"]), "drops"


def _plan_probes(
    store: Store,
    dataset: str,
    name: str,
    backend: BatchBackend,
    seed: int,
    options: Mapping[str, Any] | None,
    s: Mapping[str, Any],
) -> tuple[list[PlannedCall], str]:
    """DOLCE's probes as :func:`core.execution.runs.run_probes` plans them (options as given)."""
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    calls = open_probe_run(
        store,
        backend,
        name,
        dataset,
        options,
        units=s.get("units", "sentence"),
        per_length=s["per_length"],
        strategy=s["strategy"],
        seed=seed,
        max_spans=s["max_spans"],
        limit=s.get("limit"),
    )
    return calls, "probes"


# --------------------------------------------------------------------------- import


def import_batch(store: Store, run_id: str, paths: Iterable[Path]) -> dict[str, Any]:
    """Store the answers of batch output files in run ``run_id`` (see the module docstring).

    Every line of every file is checked first (:func:`core.batch.files.read_results`, and each
    ``custom_id`` against the calls the run exported); any bad line stops the import with the
    store unchanged. Then each file is stored in one transaction.

    Returns:
        ``{"run", "files", "lines", "stored", "answers", "errors", "parse_errors",
        "already_stored", "missing", "status"}``: ``stored`` rows written (``answers`` of them
        answered, ``errors`` failed calls, ``parse_errors`` answers off the answer contract),
        ``already_stored`` lines whose call was stored already, ``missing`` exported calls
        still without a reply.

    Raises:
        RunBusyError: the run is running in another process.
        BatchFileError: a bad line (file, line, field).
        ValueError: no such run, or a run that exported no batch.
    """
    paths = [Path(p) for p in paths]
    with store.run_lock(run_id):
        with store.attached(read_only=True) as con:
            if store.run_row(run_id, con=con) is None:
                raise ValueError(f"no run '{run_id}' in {store.path}")
            exported = batch_calls(con, run_id)
            ctx = WriteContext.of(store, run_id, con)
            stored_all = store.prediction_keys(run_id, con=con)
            stored_ok = store.prediction_keys(run_id, ok_only=True, con=con)
        if not exported:
            raise ValueError(
                f"run '{run_id}' has no exported batch calls in {store.path}; write them with "
                "`python -m core batch export` first"
            )
        files = [(p, _checked(p, run_id, exported)) for p in paths]
        totals = dict.fromkeys(
            ("lines", "stored", "answers", "errors", "parse_errors", "already_stored"), 0
        )
        status = None
        for _path, lines in files:
            rows, again = [], set()
            for r in lines:
                if r.key in stored_ok or (r.key in stored_all and r.error is not None):
                    totals["already_stored"] += 1
                    continue
                rows.append(_answer_row(ctx, r, exported[r.key]))
                if r.key in stored_all:
                    again.add(r.key)
            totals["lines"] += len(lines)
            if not rows:
                continue
            stored_all |= {r.key for r in lines}
            stored_ok |= {r.key for r in lines if r.error is None}
            missing = sum(k not in stored_all for k in exported)
            final = "done" if missing == 0 else "partial"
            status = write_rows(
                store,
                ctx,
                rows,
                ctx.wall_seconds,
                None,
                final,
                again,
                inputs=ScoringInputs(ctx.dataset, {r["instance_id"] for r in rows}),
            )
            totals["stored"] += len(rows)
            totals["errors"] += sum(r["error"] is not None for r in rows)
            totals["parse_errors"] += sum(
                r["error"] is None and r["parse_error"] is not None for r in rows
            )
        totals["answers"] = totals["stored"] - totals["errors"]
    return {
        "run": run_id,
        "files": len(paths),
        **totals,
        "missing": sum(k not in stored_all for k in exported),
        "status": status or (store.run_row(run_id) or {}).get("status"),
    }


def _checked(path: Path, run_id: str, exported: Mapping[_Key, Any]) -> list[ResultLine]:
    """Every line of ``path``, each one a call the run exported."""
    lines = read_results(path, run_id)
    for r in lines:
        if r.key not in exported:
            raise BatchFileError(
                str(path),
                r.line,
                "custom_id",
                f"run '{run_id}' exported no call {'/'.join(r.key)!r} (unknown custom_id)",
            )
    return lines


def _answer_row(ctx: Any, r: ResultLine, call: tuple[str, list[str], str | None]) -> dict[str, Any]:
    """The prediction row of one result line, built by the engine as for a live reply."""
    prompt_hash, ids, meta = call
    planned = PlannedCall(
        r.key[0],
        r.key[1],
        r.key[2],
        (),
        tuple(ids),
        prompt_hash,
        json.loads(meta) if meta else {},
    )
    reply = Reply(
        text=r.text,
        reasoning=r.reasoning,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        error=r.error,
        logprob_confidence=answer_logprob_confidence(r.logprobs),
    )
    return prediction_row(ctx, planned, reply, False, 0.0)
