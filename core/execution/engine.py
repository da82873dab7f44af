"""Execution engine: plan -> skip stored -> cache -> execute -> parse -> store -> score (SPEC §5.3).

Runs are created, and their kinds (conditions, interventions, probes, the demo) driven, by
:mod:`core.execution.runs`; this module executes the calls of a run it has started, holding the
run's
lock (:meth:`core.store.Store.run_lock`: one process per run name).

:func:`execute` runs planned calls (from :mod:`core.oncu.conditions`,
:mod:`core.cuer.interventions`,
:mod:`core.dolce.probes`) against a :class:`~core.backends.base.Backend`:

1. calls whose ``(run_id, instance_id, condition, variant)`` is already stored are skipped, so
   rerunning a run continues where it stopped (a stored call that failed is made again and
   its row replaced: a server that was down when it ran may answer now);
2. a call whose response is in the ``response_cache`` table is served from it (key: backend
   kind, model digest or name, options hash, prompt hash); calls of one execution that share a
   key are sent once, the others are served from that reply;
3. the rest run on ``concurrency`` threads (:func:`core.execution.threads.run_threads`: each
   takes the next call, makes it and parses the reply, so ``cancel`` takes effect at once;
   with one, in the calling thread, one call at a time), ``concurrency`` capped by
   :func:`core.execution.limits.cap_concurrency` and a server backend's HTTP pool sized to it
   (``size_pool``); each reply is parsed (whole; stored cut to
   :data:`core.execution.limits.MAX_REPLY_BYTES`, flagged) with
   :func:`core.scoring.parsing.parse_reply` against the ids shown. A backend with worker processes
   (the embedded reader, :mod:`core.backends.workers`) gets them instead for a run of
   :data:`POOL_MIN_CALLS` calls or more: ``concurrency`` processes with
   :data:`POOL_DEPTH` prompts queued each, so the reader never waits for the engine, whose
   own work then runs beside it; :func:`plan_and_execute` sends the first prompts while the
   rest are still being planned (:class:`ReadAhead`);
4. one writer thread commits predictions, their cache entries and their scores
   (:func:`core.scoring.rows.score_frame` over the same inputs as :meth:`core.store.Store.
   scoring_frame`) in one short-lived read-write transaction per batch: it takes whatever
   has completed, writes it, detaches the file and leaves it unlocked for a gap of
   :data:`MIN_GAP_S` to :data:`MAX_GAP_S` (the write's duration over :data:`WRITE_SHARE`;
   :data:`FIRST_GAP_S` before the first write), so a read-only process (the dashboard) can
   open the store between batches and writing stays a small share of the run (with worker
   processes :data:`POOL_WRITE_SHARE`; once every call is sent, the writer waits for the
   end, so the last calls and what came before them share one write). Whatever the gap,
   a batch's write starts early enough to end :data:`COMMIT_S` (1 s) after its first row
   completed (the last write's duration, scaled to the rows queued, tells how early), in
   every mode: this thread, a thread pool, worker processes, the last calls. Killing the
   process loses only the calls in flight and at most about a second of answers, and a
   rerun makes exactly those again (never a committed one; the read-ahead sends no stored
   call either). Replies read ahead while a run is planned are the exception: they are
   committed only once planning ends (at most :data:`READ_AHEAD` calls per worker, about
   0.1 s of the reader's work), as soon as execution starts.

Errors are not answers: a call that fails permanently (the backend returns ``Reply.error``,
or raises) is stored with its ``error`` only (no ``parse_error``, no answer), its scores are
NULL and it has no failure label, so every aggregate counts it as missing; the run continues
and ends ``partial`` (some calls failed) or ``failed`` (every call failed), and a rerun makes
the failed calls again. An unparseable reply is a parse error: scored as incorrect and kept in
every denominator (seed 000 §8.1). The run records its server time (sum of
``total_duration``) against wall time (``runs.model_seconds`` / ``runs.wall_seconds``).
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from core.backends.base import Backend, Reply
from core.execution.limits import (
    REPLY_NUMBER_RANGES,
    cap_concurrency,
    cap_reply,
    checked_numbers,
)
from core.execution.score_rows import ScoringInputs, batch_scores
from core.execution.threads import run_threads
from core.oncu.conditions import plan_conditions, planned_keys
from core.scoring.parsing import (
    DEFAULT_MAX_CITED,
    REASONING_UNCLOSED,
    ParsedAnswer,
    parse_reply,
    run_max_cited,
)
from core.store import PREDICTION_COLUMNS, Store, StoreError
from core.types import Instance, PlannedCall

__all__ = [
    "BATCH_SIZE",
    "COALESCE_S",
    "COMMIT_S",
    "FIRST_GAP_S",
    "MAX_GAP_S",
    "MIN_GAP_S",
    "POOL_DEPTH",
    "POOL_MIN_CALLS",
    "POOL_WRITE_SHARE",
    "READ_AHEAD",
    "WRITE_SHARE",
    "cache_key",
    "execute",
    "options_hash",
    "plan_and_execute",
    "prediction_row",
    "Progress",
    "ReadAhead",
    "rerun_call",
    "RunSummary",
    "write_rows",
    "WriteContext",
]

#: Most predictions committed in one transaction.
BATCH_SIZE = 4096
#: Seconds within which a completed call is committed (SPEC §2: committed as soon as it
#: completes), whatever the backend's speed: the writer starts a batch's write early enough
#: that it ends this long after the batch's first row completed, so ``kill -9`` loses at most
#: about this much of the backend's answers (``bench/bench_engine.py`` measures it).
COMMIT_S = 1.0
#: Seconds the writer leaves the store unlocked after each batch (readers get in) ...
MIN_GAP_S = 0.1
#: ... and at most, however long the writes take (:data:`COMMIT_S` may end a gap sooner).
MAX_GAP_S = 1.0
#: Seconds from the start of an execution before its first write (unless it ends sooner).
FIRST_GAP_S = 0.25
#: Share of wall time the writer may spend writing: after a write of ``d`` seconds it waits
#: ``d / WRITE_SHARE`` (between the two gaps, and no longer than :data:`COMMIT_S` allows)
#: gathering the next batch. A write costs about 50 ms whatever its size (attaching the file,
#: one statement per table, the checkpoint on detach) plus ~0.1 ms a row, so with the fast
#: embedded reader the gap is what keeps writing a small share of the run.
WRITE_SHARE = 0.02
#: :data:`WRITE_SHARE` when the reader runs in worker processes (:data:`POOL_MIN_CALLS`):
#: the writer then works beside the reader, not in its way, and writing often keeps the last
#: write (the only one the run waits for) small.
POOL_WRITE_SHARE = 0.25
#: Seconds the writer waits after a first completed call for others to share its write.
COALESCE_S = 0.01
#: Seconds of :data:`COMMIT_S` kept in hand for a write slower than the writer expects.
_COMMIT_MARGIN_S = 0.1
#: Seconds between the waiting writer's looks at its queue: the batch grows while it waits,
#: and with it the time its write will take.
_POLL_S = 0.05
#: Seconds the writer expects its first write to take (later: from the last write).
_FIRST_WRITE_S = 0.05

_Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one execution did.

    Attributes:
        run: the run id.
        planned: calls given to :func:`execute`.
        executed: calls sent to the backend.
        cached: calls served from the response cache.
        skipped_existing: calls already stored in the run (not made again).
        errors: stored calls that failed (``error`` set).
        parse_errors: stored replies that did not meet the answer contract (failed calls not
            counted).
        seconds: wall-clock seconds of the execution.
        model_seconds: server seconds (sum of ``total_duration``) of the executed calls.
        status: ``done`` (every stored call of the run answered), ``partial`` (some failed),
            ``failed`` (every one failed), or ``cancelled`` when ``cancel`` stopped it early.
    """

    run: str
    planned: int
    executed: int
    cached: int
    skipped_existing: int
    errors: int
    parse_errors: int
    seconds: float
    model_seconds: float
    status: str = "done"

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Progress:
    """Progress of an execution, reported after each committed batch.

    Attributes:
        done: calls of this execution stored so far.
        total: calls this execution has to store (planned minus skipped).
        rate: stored calls per second since the execution started.
        eta_s: estimated seconds left (NaN before the first batch).
        errors: failed calls stored so far.
    """

    done: int
    total: int
    rate: float
    eta_s: float
    errors: int


# --------------------------------------------------------------------------- cache keys


def _sha(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def options_hash(options: Mapping[str, Any] | None) -> str:
    """Hex SHA-256 of the options (canonical JSON, key order ignored)."""
    return _sha(dict(options or {}))


def cache_key(backend: str, model: str, opts_hash: str, prompt: str) -> str:
    """Response-cache key of one call.

    SHA-256 of (backend kind, model id, options hash, prompt hash); ``model`` is the model
    digest when known, else its name.
    """
    return _sha([backend, model, opts_hash, prompt])


@dataclass(frozen=True, slots=True)
class WriteContext:
    """What every call of a run shares: where results go and how they are cached."""

    run_id: str
    dataset: str
    wall_seconds: float
    backend: str
    model_id: str
    options: Mapping[str, Any]
    options_hash: str
    max_cited: int = DEFAULT_MAX_CITED

    @classmethod
    def of(cls, store: Store, run_id: str, con: Any = None) -> WriteContext:
        """The context of stored run ``run_id`` (its backend, options and cache identity)."""
        run = store.run_row(run_id, con=con)
        if run is None:
            raise ValueError(
                f"no run '{run_id}' in {store.path}; "
                "open it with core.execution.runs.open_run first"
            )
        options = run.get("options") or {}
        return cls(
            run_id=run_id,
            dataset=run.get("dataset_id") or "",
            wall_seconds=float(run.get("wall_seconds") or 0.0),
            backend=run.get("backend") or "",
            model_id=run.get("model_digest") or run.get("model") or "",
            options=options,
            options_hash=options_hash(options),
            max_cited=run_max_cited(options),
        )

    def key(self, call: PlannedCall) -> str:
        """The response-cache key of ``call`` in this run."""
        return cache_key(self.backend, self.model_id, self.options_hash, call.prompt_hash)


# --------------------------------------------------------------------------- calls -> rows


def _key(call: PlannedCall) -> _Key:
    return (call.instance_id, call.condition, call.variant)


def _call_backend(backend: Backend, call: PlannedCall) -> Reply:
    try:
        return backend.generate(list(call.messages))
    except Exception as exc:
        return Reply(text="", error=f"backend raised {type(exc).__name__}: {exc}")


def prediction_row(
    ctx: WriteContext,
    call: PlannedCall,
    reply: Reply,
    cache_hit: bool,
    latency_ms: float,
    key: str | None = None,
) -> dict[str, Any]:
    """One prediction row (plus its ``_cache`` entry) from a reply.

    ``key`` is the call's cache key when the caller has it (computed otherwise).
    """
    ok = reply.error is None
    # A failed call is an error, not an answer: nothing is parsed (no parse error, no answer),
    # whatever text came with the error.
    parsed = (
        parse_reply(reply.text, call.input_passage_ids, max_cited=ctx.max_cited)
        if ok
        else _NOT_PARSED
    )
    if ok and reply.reasoning and not reply.text.strip():  # reasoning apart, no answer after
        parsed = ParsedAnswer(answer="", parse_error=REASONING_UNCLOSED)
    meta = dict(call.meta)
    if ok and parsed.record():  # cited ids set aside (not shown, over the cap), salvaged text
        meta["parse"] = parsed.record()
    if ok and reply.reasoning:  # returned apart by the server: stored apart, capped alike
        meta["reasoning"], cut = cap_reply(reply.reasoning)
        if cut is not None:
            meta["reasoning_truncated"] = cut
    # Parsed whole above; stored cut to MAX_REPLY_BYTES (core.execution.limits), and flagged.
    raw, truncated = cap_reply(reply.text)
    if truncated is not None:
        meta["raw_response_truncated"] = truncated
    # A server's numbers are data: one out of its column's range is stored missing, noted.
    nums, dropped = checked_numbers({k: getattr(reply, k, None) for k in REPLY_NUMBER_RANGES})
    if dropped:
        meta["out_of_range"] = dropped
    row: dict[str, Any] = {
        "run_id": ctx.run_id,
        "instance_id": call.instance_id,
        "condition": call.condition,
        "variant": call.variant,
        "prompt_hash": call.prompt_hash,
        "input_passage_ids": list(call.input_passage_ids),
        "raw_response": raw,
        "answer": parsed.answer,
        "cited_ids": list(parsed.evidence_ids),
        "confidence": parsed.confidence,
        "logprob_confidence": nums["logprob_confidence"],
        "explanation": parsed.explanation,
        "parse_error": parsed.parse_error,
        "error": reply.error,
        "latency_ms": float(latency_ms),
        "prompt_tokens": nums["prompt_tokens"],
        "completion_tokens": nums["completion_tokens"],
        "total_duration_ns": None if cache_hit else nums["total_duration_ns"],
        "load_duration_ns": None if cache_hit else nums["load_duration_ns"],
        "prompt_eval_duration_ns": None if cache_hit else nums["prompt_eval_duration_ns"],
        "eval_duration_ns": None if cache_hit else nums["eval_duration_ns"],
        "cache_hit": bool(cache_hit),
        "meta": json.dumps(meta, sort_keys=True, default=str, ensure_ascii=False),
    }
    row["_cache"] = (
        {
            "cache_key": key or ctx.key(call),
            "backend": ctx.backend,
            "model": ctx.model_id,
            "options_hash": ctx.options_hash,
            "prompt_hash": call.prompt_hash,
            "response": _cached_text(reply),
        }
        if ok and not cache_hit and truncated is None
        else None
    )
    return row


#: What a failed call stores in the parsed fields: nothing (:func:`prediction_row`).
_NOT_PARSED = ParsedAnswer(answer=None, explanation=None)  # type: ignore[arg-type]


def _cached_text(reply: Reply) -> str:
    return json.dumps(
        {
            "text": reply.text,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "logprob_confidence": getattr(reply, "logprob_confidence", None),
            "model_digest": reply.model_digest,
            "reasoning": reply.reasoning,
        },
        ensure_ascii=False,
    )


def _from_cache(response: str) -> Reply:
    obj = json.loads(response)
    kwargs = {k: obj.get(k) for k in ("prompt_tokens", "completion_tokens", "model_digest")}
    if "logprob_confidence" in Reply.__dataclass_fields__:  # the field lands with the backends
        kwargs["logprob_confidence"] = obj.get("logprob_confidence")
    return Reply(text=obj.get("text") or "", reasoning=obj.get("reasoning"), **kwargs)


def _is_set(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(str(value).strip())


def write_rows(store: Store, ctx: WriteContext, rows: Sequence[dict[str, Any]], *args, **kw) -> Any:
    """:func:`_write_batch`, sure to keep a batch's answers that can be stored.

    A batch the store refuses is written again with every row that cannot be stored
    (:meth:`core.store.Store.unstorable`) made that call's recorded error, so one odd reply
    never loses the batch's other answers; a refusal no row explains, or a store error, is
    raised.
    """
    try:
        return _write_batch(store, ctx, rows, *args, **kw)
    except StoreError:
        raise
    except Exception:
        reasons = [store.unstorable(r) for r in rows]
        if not any(reasons):
            raise
    kept = [r if w is None else _unstorable_row(r, w) for r, w in zip(rows, reasons, strict=True)]
    return _write_batch(store, ctx, kept, *args, **kw)


def _unstorable_row(row: dict[str, Any], why: str) -> dict[str, Any]:
    """A row that cannot be stored as the call's error: its key, prompt and timing kept."""
    why = " ".join(why.split())[:200]
    out = {k: row.get(k) for k in ("run_id", "instance_id", "condition", "variant",
                                    "prompt_hash", "input_passage_ids", "latency_ms")}  # fmt: skip
    out.update({k: None for k in PREDICTION_COLUMNS if k not in out})
    out.update(cited_ids=[], cache_hit=bool(row.get("cache_hit")), _cache=None,
               error=f"reply could not be stored: {why}",
               meta=json.dumps({"unstorable": why}, ensure_ascii=True))  # fmt: skip
    return out


def _write_batch(
    store: Store,
    ctx: WriteContext,
    rows: Sequence[dict[str, Any]],
    wall_s: float,
    n_planned: int | None = None,
    finish: str | None = None,
    replace: Collection[_Key] | None = None,
    progress: bool = True,
    inputs: ScoringInputs | None = None,
) -> str | None:
    """Commit predictions, cache entries, scores and run progress in one transaction.

    With ``finish``, the run is also marked with that final status (in the same transaction)
    and the status stored is returned (``done`` may become ``partial`` or ``failed``,
    :meth:`core.store.Store.finish_run`); None otherwise.
    ``progress=False`` leaves the run row alone (status, counts, timings): a Case-view rerun
    adds a row to a run without running it.
    ``replace`` names the keys that may be stored already (a failed call made again); the
    others are new and take the plain insert. None: any key may be stored.
    ``inputs``: the run's scoring inputs read so far (the writer's); None reads this batch's.

    The store is attached (:meth:`core.store.Store.write_batch`), not opened, and every row
    goes in as one Arrow table per table: a batch costs a few statements, whatever its size.
    """
    if not rows:
        if finish is None:
            return None
        with store.write_batch() as con:
            timing = (0.0, wall_s) if progress else (None, None)
            return store.finish_run(ctx.run_id, finish, n_planned, con, *timing)
    model_s = sum((r["total_duration_ns"] or 0) for r in rows) / 1e9
    again = [replace is None or _key_of(r) in replace for r in rows]
    parts = [[r for r, a in zip(rows, again, strict=True) if a == flag] for flag in (False, True)]
    cache = [r["_cache"] for r in rows if r["_cache"] is not None]
    # One data-version bump a batch (each costs ~4 ms): record_progress and finish_run bump
    # the run's; a batch that records no progress bumps it with its first predictions.
    bump = not progress
    with store.write_batch() as con:
        for flag, part in zip((False, True), parts, strict=True):
            if part:
                store.write_predictions(con, part, replace=flag, bump=bump)
                bump = False
        store.write_cache(con, cache)
        cited = [(r["instance_id"], r["cited_ids"]) for r in rows]
        info = (inputs or ScoringInputs(ctx.dataset)).get(store, con, cited)
        for flag, part in zip((False, True), parts, strict=True):
            scores = batch_scores(part, info)
            if scores is not None:
                store.write_scores(con, scores, replace=flag, bump=False)
        if finish is not None:  # one update: the progress and the final status
            timing = (model_s, wall_s) if progress else (None, None)
            return store.finish_run(ctx.run_id, finish, n_planned, con, *timing)
        if progress:
            store.record_progress(con, ctx.run_id, model_s, wall_s, n_planned)
    return None


def _key_of(row: Mapping[str, Any]) -> _Key:
    return (row["instance_id"], row["condition"], row["variant"])


# --------------------------------------------------------------------------- writer


class _Writer(threading.Thread):
    """The one thread that writes: batches completed rows into short transactions."""

    _STOP = "stop"  # sent as (_STOP, final status); rows as (monotonic time completed, row)

    def __init__(
        self,
        store: Store,
        ctx: WriteContext,
        total: int,
        progress: Callable[[Progress], None] | None,
        n_planned: int,
        replace: Collection[_Key],
        t0: float,
        write_share: float,
        planned: Collection[str] = (),
    ):
        super().__init__(name=f"engine-writer-{ctx.run_id}", daemon=True)
        self.store, self.ctx, self.total, self.progress = store, ctx, total, progress
        self.n_planned, self.replace = n_planned, replace
        self.t0, self.write_share = t0, write_share
        self.inputs = ScoringInputs(ctx.dataset, planned)  # read in the first write
        self.q: queue.Queue[Any] = queue.Queue()
        self.closing = threading.Event()
        # drain(): every call has been sent. The writer then waits for close() (or COMMIT_S)
        # instead of its gap: the last calls are a few milliseconds away, and one last write
        # costs less than a write now and a small one at the end (each ~50 ms of CPU
        # whatever its size).
        self.draining = threading.Event()
        self._wake = threading.Event()  # set by drain() and close()
        self.done = self.errors = self.parse_errors = 0
        self.model_ns = 0
        self.failure: BaseException | None = None
        self.final: str | None = None  # the status the last write stored (finish_run)

    def put(self, row: dict[str, Any]) -> None:
        """Queue a completed call's row; it is committed within :data:`COMMIT_S`."""
        self.q.put((time.monotonic(), row))

    def close(self, status: str) -> None:
        """Write what is left, mark the run ``status`` in that transaction, and stop."""
        self.q.put((self._STOP, status))
        self.closing.set()
        self._wake.set()
        self.join()

    def drain(self) -> None:
        """Every call has been sent (see ``draining``); idempotent."""
        if not self.draining.is_set():
            self.draining.set()
            self._wake.set()

    def report(self) -> None:
        if self.progress is None:
            return
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = left / rate if rate > 0 else (0.0 if left == 0 else math.nan)
        self.progress(Progress(self.done, self.total, rate, eta, self.errors))

    def run(self) -> None:
        last_write, gap = self.t0, FIRST_GAP_S
        took, took_rows = _FIRST_WRITE_S, 1  # the last write: seconds, rows
        status: str | None = None
        while status is None:
            item = self.q.get()
            batch: list[dict[str, Any]] = []
            if item[0] is self._STOP:
                status = item[1]
            else:
                batch.append(item[1])
                self._gather(item[0], last_write, gap, took, took_rows)
                while len(batch) < BATCH_SIZE:
                    try:
                        nxt = self.q.get_nowait()
                    except queue.Empty:
                        break
                    if nxt[0] is self._STOP:
                        status = nxt[1]
                        break
                    batch.append(nxt[1])
            started = time.monotonic()
            try:
                wall = self.ctx.wall_seconds + started - self.t0
                stored = write_rows(self.store, self.ctx, batch, wall, self.n_planned, status,
                                self.replace, inputs=self.inputs)  # fmt: skip
                if status is not None:
                    self.final = stored
            except BaseException as exc:
                self.failure = exc
                return
            last_write = time.monotonic()
            took, took_rows = last_write - started, max(1, len(batch))
            gap = min(MAX_GAP_S, max(MIN_GAP_S, took / self.write_share))
            for r in batch:
                self.done += 1
                self.errors += _is_set(r["error"])
                self.parse_errors += _is_set(r["parse_error"]) and not _is_set(r["error"])
                self.model_ns += r["total_duration_ns"] or 0
            if batch:
                self.report()

    def _gather(
        self, first: float, last_write: float, gap: float, took: float, took_rows: int
    ) -> None:
        """Wait while the next batch gathers; its first row completed at ``first``.

        The store stays unlocked for ``gap`` after the previous write (at least
        :data:`MIN_GAP_S`), and rows completing within :data:`COALESCE_S` of the first share
        its write; but the write starts early enough to end :data:`COMMIT_S` after ``first``:
        the last write's duration, scaled to the rows queued now (the batch grows while the
        writer waits, and so does its write), plus :data:`_COMMIT_MARGIN_S`. Only close()
        wakes the writer early; once every call is sent (drain()) it waits for close() or
        that deadline, whatever the gap.
        """
        floor = last_write + MIN_GAP_S
        while not self.closing.is_set():
            now = time.monotonic()
            rows = self.q.qsize() + 1
            est = min(COMMIT_S / 2, max(2 * took, took * rows / took_rows))
            due = first + COMMIT_S - _COMMIT_MARGIN_S - est
            draining = self.draining.is_set()
            if draining:
                until = max(floor, due)
            else:
                until = max(floor, min(last_write + gap, due), first + COALESCE_S)
            if until <= now:
                break
            (self.closing if draining else self._wake).wait(min(until - now, _POLL_S))


# --------------------------------------------------------------------------- execute


def execute(
    store: Store,
    run_id: str,
    calls: Sequence[PlannedCall],
    backend: Backend,
    *,
    concurrency: int = 1,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    ahead: ReadAhead | None = None,
    started: float | None = None,
) -> RunSummary:
    """Execute planned calls of a started run; see the module docstring.

    Args:
        store: the store.
        run_id: a run created by :func:`core.execution.runs.start_run`.
        calls: the planned calls (keys must be unique).
        backend: the backend to call (thread-safe when ``concurrency`` > 1).
        concurrency: worker threads calling the backend (>= 1); capped at
            :func:`core.execution.limits.concurrency_limit` (the commands say so on stderr).
        progress: called with a :class:`Progress` after each committed batch (and once at
            the start), from the writer thread.
        cancel: set it to stop submitting calls; calls in flight finish and are stored, and
            the run is marked ``cancelled``.
        ahead: prompts already sent to the backend's worker processes while the calls were
            planned (:func:`plan_and_execute`); a call to make takes its reply from there,
            and the replies of calls that are stored or cached already are dropped.
        started: ``time.monotonic()`` when the run's planning began (its wall time starts
            there); default: now.

    Returns:
        The execution's summary.

    The run's lock (:meth:`core.store.Store.run_lock`) is held throughout: a run going in
    another process is refused before any call is made.

    Raises:
        ValueError: no such run, duplicate call keys, or ``concurrency`` below 1.
        RunBusyError: the run is running in another process.
        StoreError: the store stayed locked by another process past its lock timeout.
    """
    with store.run_lock(run_id):
        return _execute(
            store, run_id, calls, backend, concurrency=concurrency, progress=progress,
            cancel=cancel, ahead=ahead, started=started,
        )  # fmt: skip


def _execute(
    store: Store,
    run_id: str,
    calls: Sequence[PlannedCall],
    backend: Backend,
    *,
    concurrency: int,
    progress: Callable[[Progress], None] | None,
    cancel: threading.Event | None,
    ahead: ReadAhead | None,
    started: float | None,
) -> RunSummary:
    """:func:`execute` with the run's lock held."""
    concurrency, _ = cap_concurrency(backend, concurrency)  # the commands print the notice
    t0 = time.monotonic() if started is None else started
    keys = [_key(c) for c in calls]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate planned call {dup!r} in run '{run_id}'")
    with store.attached(read_only=True) as con:  # the run's state, in one connection
        ctx = WriteContext.of(store, run_id, con)
        stored_all = store.prediction_keys(run_id, con=con)
        stored = store.prediction_keys(run_id, ok_only=True, con=con) if stored_all else set()
        todo = [c for c in calls if _key(c) not in stored]
        ckeys = [ctx.key(c) for c in todo]  # SHA-256 of short strings: once per call
        hits = store.cached_responses(ckeys, con=con)
    skipped = len(calls) - len(todo)
    # A plan of plain calls counts the run's plain rows only: variant rows stored beside them
    # are Case-view reruns, not part of it (and not counted in the run's n_done either).
    plain = all(k[2] == "" for k in keys)
    n_planned = len({k for k in stored if not plain or k[2] == ""} | set(keys))
    pool = _reader_pool(backend, sum(ck not in hits for ck in ckeys), int(concurrency))
    size_pool = getattr(backend, "size_pool", None)
    if pool is None and callable(size_pool):  # a server backend: one connection per thread
        size_pool(int(concurrency))
    # With worker processes the writer works beside the reader: it may write more often.
    share = POOL_WRITE_SHARE if pool is not None else WRITE_SHARE
    writer = _Writer(store, ctx, len(todo), progress, n_planned, stored_all - stored, t0, share,
                     {c.instance_id for c in todo})  # fmt: skip
    writer.start()
    writer.report()
    executed = cached = 0
    cancel = cancel or threading.Event()
    leaders: dict[str, PlannedCall] = {}
    followers: dict[str, list[PlannedCall]] = {}
    for call, ck in zip(todo, ckeys, strict=True):
        if ck in hits:
            writer.put(prediction_row(ctx, call, _from_cache(hits[ck]), True, 0.0, ck))
            cached += 1
        elif ck in leaders:
            followers.setdefault(ck, []).append(call)
        else:
            leaders[ck] = call
    queue_ = [(call, ck) for ck, call in leaders.items()]

    def work(call: PlannedCall, ck: str) -> tuple[Reply, float]:
        t = time.perf_counter()
        reply = _call_backend(backend, call)
        return reply, (time.perf_counter() - t) * 1000.0

    def finish(
        call: PlannedCall, ck: str, reply: Reply, ms: float, row: dict[str, Any] | None = None
    ) -> None:
        nonlocal executed, cached
        executed += 1
        writer.put(row if row is not None else prediction_row(ctx, call, reply, False, ms, ck))
        for other in followers.pop(ck, []):
            if reply.error is None:
                writer.put(prediction_row(ctx, other, reply, True, 0.0, ck))
                cached += 1
            else:
                queue_.append((other, ck))  # the shared call failed: make it too

    def going(pos: int) -> bool:
        return pos < len(queue_) and not cancel.is_set() and writer.failure is None

    early = ahead.futures if ahead is not None and ahead.pool is pool else {}
    if early:
        # The read-ahead sent prompts whenever the workers ran short, so they lie scattered
        # over the plan, and most are answered by now: take them first, or their answers wait
        # uncommitted until the run reaches them (COMMIT_S).
        sent = [q for q in queue_ if q[0].prompt_hash in early]
        queue_[:] = sent + [q for q in queue_ if q[0].prompt_hash not in early]
    try:
        if pool is None and int(concurrency) == 1:
            # One call at a time: make it in this thread (a pool adds two thread switches and
            # a future per call, a few percent of the embedded reader's time).
            pos = 0
            while going(pos):
                call, ck = queue_[pos]
                finish(call, ck, *work(call, ck))
                pos += 1
        elif pool is None:

            def made(call: PlannedCall, ck: str) -> tuple[Reply, float, dict[str, Any]]:
                reply, ms = work(call, ck)
                return reply, ms, prediction_row(ctx, call, reply, False, ms, ck)

            run_threads(int(concurrency), queue_, going, made, finish, cancel)
        else:
            # Worker processes: the reply carries the reader's time.
            def submit(call: PlannedCall, ck: str) -> Future:
                fut = early.pop(call.prompt_hash, None)
                return fut if fut is not None else pool.submit(list(call.messages))

            limit = POOL_DEPTH * int(concurrency)
            pending: dict[Future, tuple[PlannedCall, str]] = {}
            pos = 0
            while pos < len(queue_) or pending:
                while len(pending) < limit and going(pos):
                    pending[submit(*queue_[pos])] = queue_[pos]
                    pos += 1
                if pos == len(queue_):
                    writer.drain()  # the last replies are a few ms away
                if not pending:
                    break
                finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in finished:
                    reply = fut.result()
                    finish(*pending.pop(fut), reply, reply.latency_ms or 0.0)
                if writer.failure is not None:
                    break
    except BaseException:
        cancel.set()
        writer.close("cancelled")
        raise
    status = "done" if executed + cached == len(todo) else "cancelled"
    writer.close(status)
    if writer.failure is not None:
        _finish(store, run_id, "failed", n_planned)
        raise writer.failure
    return RunSummary(
        run=run_id,
        planned=len(calls),
        executed=executed,
        cached=cached,
        skipped_existing=skipped,
        errors=writer.errors,
        parse_errors=writer.parse_errors,
        seconds=time.monotonic() - t0,
        model_seconds=writer.model_ns / 1e9,
        status=(writer.final or status) if status == "done" else status,
    )


class ReadAhead:
    """Prompts sent to a reader's worker processes while the rest of a run is planned.

    Planning (building prompts and hashing them) is about 4 % of the embedded reader's time,
    and the reader would wait for all of it. :meth:`offer` sends a planned call's prompt while
    the workers have fewer than :data:`POOL_DEPTH` calls each queued, up to
    :data:`READ_AHEAD` calls each, so they read while planning goes on, and otherwise would
    have waited. Calls already stored in the run are never sent (a rerun makes no call for a
    committed prediction): the caller gives them (``stored``), or :meth:`know_stored` reads
    them beside the planning and the calls offered until it has are held back, then sent.
    Which calls are cached is known only after planning; :func:`execute` drops their replies.

    Attributes:
        pool: the worker processes.
        futures: replies asked for, by prompt hash.
        stored: keys of calls not to send (the run's stored answered calls); None while
            :meth:`know_stored` reads them, empty when it is not called.
    """

    def __init__(self, pool: Any, stored: Collection[_Key] = frozenset()):
        self.pool = pool
        self.futures: dict[str, Future] = {}
        self.stored: Collection[_Key] | None = stored
        self._held: list[PlannedCall] = []  # offered while ``stored`` is unknown

    def know_stored(self, store: Store, run_id: str) -> None:
        """Read the run's stored calls in a thread of their own; until then nothing is sent."""
        self.stored = None

        def read() -> None:
            try:
                self.stored = store.prediction_keys(run_id, ok_only=True)
            except StoreError:
                pass  # unknown: send nothing

        threading.Thread(target=read, name=f"read-ahead-{run_id}", daemon=True).start()

    def offer(self, call: PlannedCall) -> None:
        """Send ``call``'s prompt now if the workers are short of work (and it is not stored)."""
        stored = self.stored
        if stored is None:
            if len(self._held) < READ_AHEAD * self.pool.size:
                self._held.append(call)
            return
        if self._held:
            held, self._held = self._held, []
            for early in held:
                self._send(early, stored)
        self._send(call, stored)

    def _send(self, call: PlannedCall, stored: Collection[_Key]) -> None:
        if (
            len(self.futures) < READ_AHEAD * self.pool.size
            and self.pool.outstanding < POOL_DEPTH * self.pool.size
            and call.prompt_hash not in self.futures
            and _key(call) not in stored
        ):
            self.futures[call.prompt_hash] = self.pool.submit(list(call.messages))


def plan_and_execute(
    store: Store,
    run_id: str,
    instances: Sequence[Instance],
    conditions: Sequence[str],
    backend: Backend,
    *,
    concurrency: int = 1,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    stored: Collection[_Key] | None = None,
    **retrieval: Any,
) -> RunSummary:
    """Plan the four-condition calls of ``instances`` and :func:`execute` them in a started run.

    The run's wall time includes the planning. When the backend runs in worker processes,
    the first prompts go to them while the rest are planned (:class:`ReadAhead`), except the
    calls stored in the run: ``stored`` (``(instance_id, condition, variant)`` keys of its
    answered calls) when the caller has read them, else read beside the planning.
    ``retrieval`` takes :func:`core.oncu.conditions.plan_conditions`'s retrieval settings.
    """
    started = time.monotonic()
    concurrency, _ = cap_concurrency(backend, concurrency)  # before any worker is started
    n = sum(len(planned_keys(i, conditions)) for i in instances)
    pool = _reader_pool(backend, n, int(concurrency))
    ahead = ReadAhead(pool, stored or frozenset()) if pool is not None else None
    if ahead is not None and stored is None:
        ahead.know_stored(store, run_id)
    calls = plan_conditions(
        instances, conditions, each=ahead.offer if ahead is not None else None, **retrieval
    )
    return execute(
        store, run_id, calls, backend, concurrency=concurrency, progress=progress,
        cancel=cancel, ahead=ahead, started=started,
    )  # fmt: skip


#: Calls a run must have left to make before the embedded reader runs in worker processes
#: (:meth:`core.backends.EmbeddedReader.pool`); fewer are made in this process, where a
#: worker's start (about 60 ms) would cost more than it saves.
POOL_MIN_CALLS = 64
#: Calls queued per worker process: enough that the workers keep reading while this
#: process's threads take turns with the interpreter lock (a turn lasts up to 5 ms).
POOL_DEPTH = 16
#: Calls per worker process :class:`ReadAhead` sends at most while a run is planned. Their
#: replies are stored only once :func:`execute` starts, so this bounds what a kill during
#: planning loses (as for calls in flight); it covers the planning of about 1,000 8K-token
#: calls.
READ_AHEAD = 64


def _reader_pool(backend: Backend, n_calls: int, concurrency: int) -> Any:
    """The backend's worker processes for a run of ``n_calls``, or None to call it here."""
    pool = getattr(backend, "pool", None)
    if not callable(pool) or n_calls < POOL_MIN_CALLS:
        return None
    return pool(concurrency)


def _finish(store: Store, run_id: str, status: str, n_planned: int) -> None:
    try:
        store.finish_run(run_id, status, n_planned)
    except StoreError:
        pass  # the store is locked past its timeout; the rows themselves are committed


def rerun_call(store: Store, run_id: str, call: PlannedCall, backend: Backend) -> dict[str, Any]:
    """Execute one planned call now, store it in the run, score it, and return it.

    The call is served from the response cache when possible; its row replaces a stored
    prediction of the same key. The run row (status, counts, timings) is left as it is: a
    rerun adds a prediction to a run without running it. A failed call comes back with its
    ``error`` set (failures are data), never raised.

    Returns:
        The prediction row with its score columns, as plain Python values (lists for id
        lists, None for missing values).

    Raises:
        ValueError: no such run.
        RunBusyError: the run is running in another process (nothing is called or stored).
    """
    with store.run_lock(run_id):
        with store.attached(read_only=True) as con:
            ctx = WriteContext.of(store, run_id, con)
            hit = store.cached_responses([ctx.key(call)], con=con)
        if hit:
            row = prediction_row(ctx, call, _from_cache(hit[ctx.key(call)]), True, 0.0)
        else:
            t = time.perf_counter()
            reply = _call_backend(backend, call)
            row = prediction_row(ctx, call, reply, False, (time.perf_counter() - t) * 1000.0)
        write_rows(store, ctx, [row], ctx.wall_seconds, progress=False)
    frame = store.prediction_rows(run_id, [_key(call)])
    return {k: _plain(v) for k, v in frame.iloc[0].to_dict().items()}


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value
