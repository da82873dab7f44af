"""The engine's write path: rows from replies, one short transaction per batch, one writer.

:func:`core.execution.engine.execute_work` hands every completed call's row to :class:`Writer`, the
one
thread that writes. It commits predictions, their cache entries and their scores
(:func:`core.scoring.rows.score_frame` over the same inputs as :meth:`core.store.Store.
scoring_frame`; :func:`write_rows`), or a judge run's judgments (:mod:`core.judges.runs`), in one
short-lived read-write transaction per batch: it takes whatever has completed, writes it,
detaches the file and leaves it unlocked for a gap of :data:`MIN_GAP_S` to :data:`MAX_GAP_S`
(the write's duration over :data:`WRITE_SHARE`; :data:`FIRST_GAP_S` before the first write),
so a read-only process (the dashboard) can open the store between batches and writing stays a
small share of the run (with worker processes :data:`POOL_WRITE_SHARE`; once every call is
sent, the writer waits for the end, so the last calls and what came before them share one
write). Whatever the gap, a batch's write starts early enough to end :data:`COMMIT_S` (1 s)
after its first row completed (the last write's duration, scaled to the rows queued, tells how
early), in every mode: one thread, a thread pool, worker processes, the last calls. Killing
the process loses only the calls in flight and at most about a second of answers, and a rerun
makes exactly those again (never a committed one).

Cache keys (:func:`cache_key`: backend kind, model digest or name, options hash, prompt hash)
and the run's shared write context (:class:`WriteContext`) live here too: every kind of run
keys its calls the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.backends.base import Reply
from core.execution.limits import REPLY_NUMBER_RANGES, cap_reply, checked_numbers
from core.execution.score_rows import ScoringInputs, batch_scores
from core.scoring.parsing import (
    DEFAULT_MAX_CITED,
    REASONING_UNCLOSED,
    ParsedAnswer,
    parse_reply,
    run_max_cited,
)
from core.store import PREDICTION_COLUMNS, Store, StoreError
from core.types import PlannedCall

__all__ = [
    "BATCH_SIZE",
    "COALESCE_S",
    "COMMIT_S",
    "FIRST_GAP_S",
    "MAX_GAP_S",
    "MIN_GAP_S",
    "POOL_WRITE_SHARE",
    "WRITE_SHARE",
    "cache_key",
    "from_cache",
    "options_hash",
    "prediction_row",
    "Progress",
    "write_rows",
    "WriteContext",
    "WriteFn",
    "Writer",
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
#: gathering the next batch. A write costs about 20 ms of CPU whatever its size (attaching the
#: file, one statement per table, the checkpoint on detach; a small batch scored row by row)
#: plus ~0.1 ms a row, so with the fast embedded reader the gap is what keeps writing a small
#: share of the run.
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
                f"no run '{run_id}' in {store.path}; open it with "
                "core.execution.runs.open_run first"
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


def from_cache(response: str) -> Reply:
    """The reply a response-cache entry holds (its text, token counts, digest, reasoning)."""
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
    out = {
        k: row.get(k)
        for k in (
            "run_id",
            "instance_id",
            "condition",
            "variant",
            "prompt_hash",
            "input_passage_ids",
            "latency_ms",
        )
    }
    out.update({k: None for k in PREDICTION_COLUMNS if k not in out})
    out.update(
        cited_ids=[],
        cache_hit=bool(row.get("cache_hit")),
        _cache=None,
        error=f"reply could not be stored: {why}",
        meta=json.dumps({"unstorable": why}, ensure_ascii=True),
    )
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
    It also carries the writer's progress from batch to batch: once one batch's progress is
    committed, later batches of new keys add their counts to the run's instead of recounting
    its predictions, and bump the data version by one ``UPDATE``
    (:meth:`core.store.Store.record_progress`).

    The store is attached (:meth:`core.store.Store.write_batch`), not opened, and every row
    goes in as one Arrow table per table: a batch costs a few statements, whatever its size.
    """
    state = inputs or ScoringInputs(ctx.dataset)  # a new one keeps nothing for later batches
    if not rows:
        if finish is None:
            return None
        with store.write_batch() as con:
            timing = (0.0, wall_s) if progress else (None, None)
            return store.finish_run(
                ctx.run_id, finish, n_planned, con, *timing, scopes=state.scopes
            )
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
        info = state.get(store, con, cited)
        for flag, part in zip((False, True), parts, strict=True):
            scores = batch_scores(part, info)
            if scores is not None:
                store.write_scores(con, scores, replace=flag, bump=False)
        if finish is not None:  # one update: the progress and the final status
            timing = (model_s, wall_s) if progress else (None, None)
            return store.finish_run(
                ctx.run_id, finish, n_planned, con, *timing, scopes=state.scopes
            )
        if progress:
            # the run's counts are exact after this writer's last committed progress: add
            # this batch's new rows (one that may replace a stored row: recount)
            added = _added(rows) if state.counted and not parts[1] else None
            scopes = store.record_progress(
                con, ctx.run_id, model_s, wall_s, n_planned, added=added, scopes=state.scopes
            )
    if progress:  # committed: the writer's next batches may rely on it
        state.scopes, state.counted = scopes, True
    return None


def _added(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int, int, int]:
    """``(rows, plain rows, failed rows, failed plain rows)`` of new prediction rows.

    As the run's counts count them (:meth:`core.store.Store.record_progress`): plain rows
    have the variant ``''`` (or none), failed ones a non-empty ``error``.
    """
    plain = [not r.get("variant") for r in rows]
    failed = [bool(r.get("error")) for r in rows]
    both = sum(p and f for p, f in zip(plain, failed, strict=True))
    return len(rows), sum(plain), sum(failed), both


def _key_of(row: Mapping[str, Any]) -> _Key:
    return (row["instance_id"], row["condition"], row["variant"])


# --------------------------------------------------------------------------- writer


#: How a writer commits one batch: ``(rows, wall seconds, final status or None)`` -> the
#: status stored when the batch ends the run (None otherwise); see :class:`Writer`.
WriteFn = Callable[[Sequence[dict[str, Any]], float, "str | None"], "str | None"]


def _counts(row: Mapping[str, Any]) -> tuple[bool, bool, int]:
    """``(failed, parse error, server ns)`` of a stored row (prediction or judgment)."""
    err = _is_set(row.get("error"))
    return err, _is_set(row.get("parse_error")) and not err, row.get("total_duration_ns") or 0


class Writer(threading.Thread):
    """The one thread that writes: batches completed rows into short transactions.

    Args:
        name: the run id (names the thread).
        write: commits a batch (:data:`WriteFn`): predictions and scores
            (:func:`write_rows`) or judgments (:mod:`core.judges.runs`).
        total: rows this execution has to store (for :class:`Progress`).
        progress: called with a :class:`Progress` after each committed batch.
        wall_before: the run's wall seconds before this execution (its row's).
        t0: ``time.monotonic()`` when the execution (its planning) began.
        write_share: :data:`WRITE_SHARE` or :data:`POOL_WRITE_SHARE`.
    """

    _STOP = "stop"  # sent as (_STOP, final status); rows as (monotonic time completed, row)

    def __init__(
        self,
        name: str,
        write: WriteFn,
        total: int,
        progress: Callable[[Progress], None] | None,
        wall_before: float,
        t0: float,
        write_share: float,
    ):
        super().__init__(name=f"engine-writer-{name}", daemon=True)
        self.write, self.total, self.progress = write, total, progress
        self.wall_before, self.t0, self.write_share = wall_before, t0, write_share
        self.q: queue.Queue[Any] = queue.Queue()
        self.closing = threading.Event()
        # drain(): every call has been sent. The writer then waits for close() (or COMMIT_S)
        # instead of its gap: the last calls are a few milliseconds away, and one last write
        # costs less than a write now and a small one at the end (each ~20 ms of CPU
        # whatever its size).
        self.draining = threading.Event()
        self._wake = threading.Event()  # set by drain() and close()
        self.done = self.errors = self.parse_errors = 0
        self.model_ns = 0
        self.failure: BaseException | None = None
        self.final: str | None = None  # the status the last write stored

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
        """Report progress (when asked for): rows stored, rate, time left, errors."""
        if self.progress is None:
            return
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = left / rate if rate > 0 else (0.0 if left == 0 else math.nan)
        self.progress(Progress(self.done, self.total, rate, eta, self.errors))

    def run(self) -> None:
        """Write batches until close(); a failed write is kept in ``failure`` and ends it."""
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
                stored = self.write(batch, self.wall_before + started - self.t0, status)
                if status is not None:
                    self.final = stored
            except BaseException as exc:
                self.failure = exc
                return
            last_write = time.monotonic()
            took, took_rows = last_write - started, max(1, len(batch))
            gap = min(MAX_GAP_S, max(MIN_GAP_S, took / self.write_share))
            for r in batch:
                err, perr, ns = _counts(r)
                self.done += 1
                self.errors += err
                self.parse_errors += perr
                self.model_ns += ns
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
