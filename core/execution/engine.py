"""Execution engine: plan -> skip stored -> cache -> execute -> parse -> store -> score (SPEC §5.3).

Runs are created, and their kinds (conditions, interventions, probes, attribution, the demo,
judge runs) driven, by :mod:`core.execution.runs` and :mod:`core.judges.runs`; this module executes
the
calls of a run they have started, holding the run's lock (:meth:`core.store.Store.run_lock`:
one process per run name).

:func:`execute_work` is the one loop that calls a model. It runs a plan's *items* against a
:class:`~core.backends.base.Backend`, through a :class:`Work` that says what an item is: a
planned call of :mod:`core.oncu.conditions`, :mod:`core.cuer.interventions`,
:mod:`core.dolce.probes` or
:mod:`core.attribution.plan` (:class:`PredictionWork`, what :func:`execute` runs: predictions
and their scores), or a planned judgment (:class:`core.judges.runs.JudgmentWork`: judgments).
Every kind is executed alike:

1. items whose key is already stored in the run are skipped, so rerunning a run continues
   where it stopped (a stored item that failed is made again and its row replaced: a server
   that was down when it ran may answer now);
2. an item whose response is in the ``response_cache`` table is served from it
   (:func:`core.execution.write.cache_key`: backend kind, model digest or name, options hash,
   prompt hash); calls of one execution that share a key are sent once, the others are
   served from that reply (:attr:`Work.shared`: not judgments, each asked as before);
3. the rest run on ``concurrency`` threads (:func:`core.execution.threads.run_threads`: each
   takes the next item, makes it and builds its row, so ``cancel`` takes effect at once;
   with one, in the calling thread, one call at a time), ``concurrency`` capped by
   :func:`core.execution.limits.cap_concurrency` and a server backend's HTTP pool sized to it
   (``size_pool``); a prediction's reply is parsed (whole; stored cut to
   :data:`core.execution.limits.MAX_REPLY_BYTES`, flagged) with
   :func:`core.scoring.parsing.parse_reply`
   against the ids shown. A backend with worker processes (the embedded reader,
   :mod:`core.backends.workers`) gets them instead for a run of :data:`POOL_MIN_CALLS` calls
   or more: ``concurrency`` processes with :data:`POOL_DEPTH` prompts queued each, so the
   reader never waits for the engine, whose own work then runs beside it;
   :func:`plan_and_execute` sends the first prompts while the rest are still being planned
   (:class:`ReadAhead`);
4. one writer thread (:class:`core.execution.write.Writer`) commits the rows, their cache entries
   (and a prediction's scores) in one short transaction per batch, each batch within
   :data:`COMMIT_S` (1 s) of its first row's completion: killing the process loses only the
   calls in flight and at most about a second of answers or judgments, and a rerun makes
   exactly those again (never a committed one; the read-ahead sends no stored call either).
   Replies read ahead while a run is planned are the exception: they are committed only once
   planning ends (at most :data:`READ_AHEAD` calls per worker, about 0.1 s of the reader's
   work), as soon as execution starts.

Errors are not answers: a call that fails permanently (the backend returns ``Reply.error``,
or raises) is stored with its ``error`` only (no ``parse_error``, no answer), its scores are
NULL and it has no failure label, so every aggregate counts it as missing; the run continues
and ends ``partial`` (some calls failed) or ``failed`` (every call failed), and a rerun makes
the failed calls again. An unparseable reply is a parse error: scored as incorrect and kept in
every denominator (seed 000 §8.1). The run records its server time (sum of
``total_duration``) against wall time (``runs.model_seconds`` / ``runs.wall_seconds``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from core.backends.base import Backend, Reply
from core.execution.limits import cap_concurrency
from core.execution.score_rows import ScoringInputs
from core.execution.threads import run_threads
from core.execution.write import (
    BATCH_SIZE,
    COALESCE_S,
    COMMIT_S,
    FIRST_GAP_S,
    MAX_GAP_S,
    MIN_GAP_S,
    POOL_WRITE_SHARE,
    WRITE_SHARE,
    Progress,
    WriteContext,
    WriteFn,
    Writer,
    cache_key,
    from_cache,
    options_hash,
    prediction_row,
    write_rows,
)
from core.oncu.conditions import plan_conditions, planned_keys
from core.store import Store, StoreError
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
    "execute_work",
    "options_hash",
    "plan_and_execute",
    "prediction_row",
    "PredictionWork",
    "Progress",
    "ReadAhead",
    "rerun_call",
    "RunSummary",
    "Work",
    "write_rows",
    "WriteContext",
]

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


# --------------------------------------------------------------------------- work items


@runtime_checkable
class Work(Protocol):
    """What :func:`execute_work` executes: how a kind of run keys, makes and stores its items.

    An item has ``prompt_hash`` (its cache key's part) and ``messages`` (what a worker
    process is sent): a :class:`core.types.PlannedCall` or a
    :class:`core.judges.runs.PlannedJudgment`.

    Attributes:
        pooled: items may go to a reader's worker processes (the embedded reader's).
        shared: items of one execution that share a cache key are sent once, the others
            served from that reply (else each is sent).
    """

    pooled: bool
    shared: bool

    def key(self, item: Any) -> tuple[str, ...]:
        """The item's key in its run (unique in a plan)."""
        ...

    def stored(self, store: Store, run_id: str, con: Any) -> tuple[set[Any], set[Any]]:
        """Keys stored in the run: all, and the answered ones (not made again)."""
        ...

    def n_planned(self, keys: Sequence[Any], stored_all: set[Any], stored_ok: set[Any]) -> int:
        """The run's planned count once this plan is executed."""
        ...

    def call(self, backend: Backend, item: Any) -> Reply:
        """Make the item's call; a backend that raises gives a failed reply."""
        ...

    def row(
        self, ctx: WriteContext, item: Any, reply: Reply, hit: bool, ms: float, ck: str
    ) -> dict[str, Any]:
        """The item's stored row from its reply, with its ``_cache`` entry (or None)."""
        ...

    def writer(
        self,
        store: Store,
        ctx: WriteContext,
        todo: Sequence[Any],
        n_planned: int,
        replace: Collection[Any],
    ) -> WriteFn:
        """How the writer commits a batch of this execution's rows (:data:`WriteFn`)."""
        ...

    def fail(self, store: Store, ctx: WriteContext, n_planned: int) -> None:
        """Mark the run ``failed`` (the writer failed); a locked store is let be."""
        ...


def _key(call: PlannedCall) -> _Key:
    return (call.instance_id, call.condition, call.variant)


def _call_backend(backend: Backend, call: Any) -> Reply:
    try:
        return backend.generate(list(call.messages))
    except Exception as exc:
        return Reply(text="", error=f"backend raised {type(exc).__name__}: {exc}")


class PredictionWork:
    """Planned calls -> predictions and their scores (conditions, CUE-R, probes, attribution)."""

    pooled = True
    shared = True

    def key(self, item: PlannedCall) -> _Key:
        """The call's ``(instance_id, condition, variant)``."""
        return _key(item)

    def stored(self, store: Store, run_id: str, con: Any) -> tuple[set[Any], set[Any]]:
        """The run's stored prediction keys: all, answered."""
        stored_all = store.prediction_keys(run_id, con=con)
        ok = store.prediction_keys(run_id, ok_only=True, con=con) if stored_all else set()
        return stored_all, ok

    def n_planned(self, keys: Sequence[Any], stored_all: set[Any], stored_ok: set[Any]) -> int:
        """The run's planned calls."""
        # A plan of plain calls counts the run's plain rows only: variant rows stored beside
        # them are Case-view reruns, not part of it (and not counted in the run's n_done).
        plain = all(k[2] == "" for k in keys)
        return len({k for k in stored_ok if not plain or k[2] == ""} | set(keys))

    def call(self, backend: Backend, item: PlannedCall) -> Reply:
        """Send the call's messages."""
        return _call_backend(backend, item)

    def row(
        self, ctx: WriteContext, item: PlannedCall, reply: Reply, hit: bool, ms: float, ck: str
    ) -> dict[str, Any]:
        """The prediction row (:func:`core.execution.write.prediction_row`)."""
        return prediction_row(ctx, item, reply, hit, ms, ck)

    def writer(
        self,
        store: Store,
        ctx: WriteContext,
        todo: Sequence[PlannedCall],
        n_planned: int,
        replace: Collection[Any],
    ) -> WriteFn:
        """Writes predictions, cache entries and scores (:func:`write_rows`)."""
        inputs = ScoringInputs(ctx.dataset, {c.instance_id for c in todo})  # read once

        def write(rows: Sequence[dict[str, Any]], wall: float, finish: str | None) -> Any:
            return write_rows(store, ctx, rows, wall, n_planned, finish, replace, inputs=inputs)

        return write

    def fail(self, store: Store, ctx: WriteContext, n_planned: int) -> None:
        """Mark the run ``failed``."""
        _finish(store, ctx.run_id, "failed", n_planned)


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
        return execute_work(
            store,
            run_id,
            calls,
            backend,
            PredictionWork(),
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
            ahead=ahead,
            started=started,
        )


def execute_work(
    store: Store,
    run_id: str,
    items: Sequence[Any],
    backend: Backend,
    work: Work,
    *,
    concurrency: int = 1,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    ahead: ReadAhead | None = None,
    started: float | None = None,
) -> RunSummary:
    """Execute a started run's planned items: the one loop that calls a model.

    Predictions (:func:`execute`, :class:`PredictionWork`) and judgments
    (:func:`core.judges.runs.run_judge`) alike; see the module docstring and :func:`execute`
    for the arguments. The caller holds the run's lock (:meth:`core.store.Store.run_lock`).

    Raises:
        ValueError: no such run, duplicate item keys, or ``concurrency`` below 1.
        StoreError: the store stayed locked by another process past its lock timeout.
    """
    concurrency, _ = cap_concurrency(backend, concurrency)  # the commands print the notice
    t0 = time.monotonic() if started is None else started
    keys = [work.key(c) for c in items]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate planned call {dup!r} in run '{run_id}'")
    with store.attached(read_only=True) as con:  # the run's state, in one connection
        ctx = WriteContext.of(store, run_id, con)
        stored_all, stored = work.stored(store, run_id, con)
        todo = [c for c, k in zip(items, keys, strict=True) if k not in stored]
        ckeys = [ctx.key(c) for c in todo]  # SHA-256 of short strings: once per call
        hits = store.cached_responses(ckeys, con=con)
    skipped = len(items) - len(todo)
    n_planned = work.n_planned(keys, stored_all, stored)
    n_new = sum(ck not in hits for ck in ckeys)
    pool = _reader_pool(backend, n_new, int(concurrency)) if work.pooled else None
    size_pool = getattr(backend, "size_pool", None)
    if pool is None and callable(size_pool):  # a server backend: one connection per thread
        size_pool(int(concurrency))
    # With worker processes the writer works beside the reader: it may write more often.
    share = POOL_WRITE_SHARE if pool is not None else WRITE_SHARE
    write = work.writer(store, ctx, todo, n_planned, stored_all - stored)
    writer = Writer(run_id, write, len(todo), progress, ctx.wall_seconds, t0, share)
    writer.start()
    writer.report()
    executed = cached = 0
    cancel = cancel or threading.Event()
    queue_: list[tuple[Any, str]] = []  # the calls to make, with their cache keys
    followers: dict[str, list[Any]] = {}  # calls that take the reply of the first of their key
    for call, ck in zip(todo, ckeys, strict=True):
        if ck in hits:
            writer.put(work.row(ctx, call, from_cache(hits[ck]), True, 0.0, ck))
            cached += 1
        elif work.shared and ck in followers:
            followers[ck].append(call)
        else:
            followers.setdefault(ck, [])
            queue_.append((call, ck))

    def make(call: Any, ck: str) -> tuple[Reply, float]:
        t = time.perf_counter()
        reply = work.call(backend, call)
        return reply, (time.perf_counter() - t) * 1000.0

    def finish(
        call: Any, ck: str, reply: Reply, ms: float, row: dict[str, Any] | None = None
    ) -> None:
        nonlocal executed, cached
        executed += 1
        writer.put(row if row is not None else work.row(ctx, call, reply, False, ms, ck))
        for other in followers.pop(ck, []):
            if reply.error is None:
                writer.put(work.row(ctx, other, reply, True, 0.0, ck))
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
                finish(call, ck, *make(call, ck))
                pos += 1
        elif pool is None:

            def made(call: Any, ck: str) -> tuple[Reply, float, dict[str, Any]]:
                reply, ms = make(call, ck)
                return reply, ms, work.row(ctx, call, reply, False, ms, ck)

            run_threads(int(concurrency), queue_, going, made, finish, cancel)
        else:
            # Worker processes: the reply carries the reader's time.
            def submit(call: Any, ck: str) -> Future:
                fut = early.pop(call.prompt_hash, None)
                return fut if fut is not None else pool.submit(list(call.messages))

            limit = POOL_DEPTH * int(concurrency)
            pending: dict[Future, tuple[Any, str]] = {}
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
        work.fail(store, ctx, n_planned)
        raise writer.failure
    return RunSummary(
        run=run_id,
        planned=len(items),
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
        store,
        run_id,
        calls,
        backend,
        concurrency=concurrency,
        progress=progress,
        cancel=cancel,
        ahead=ahead,
        started=started,
    )


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
            row = prediction_row(ctx, call, from_cache(hit[ctx.key(call)]), True, 0.0)
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
