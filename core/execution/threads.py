"""The engine's calling threads, for a server backend at ``concurrency`` > 1 (issue 17).

:func:`run_threads` replaces a thread pool with futures: each of ``n`` threads takes the next
call, makes it, builds its row (parsing the reply) and hands it to the writer itself, so a
call costs no future, no waiter on every pending future and no switch to a collecting thread;
a thread waits only for the server. At a GPU server's speed (hundreds of calls a second) that
bookkeeping was a large share of the engine's CPU time per call.

While the threads run, the heap that existed before the run is frozen (:func:`frozen_heap`):
Python's full garbage collections stop every thread while they walk every tracked object, and
in a process that has loaded the dataset, pandas, DuckDB and (in the dashboard) Streamlit and
plotly, one walk took tens of milliseconds: the calls in flight then, answered by the server,
waited for it (slowest call 2.7x the server's 50 ms before, 1.7x frozen; 800 calls at
concurrency 32, docs/BENCHMARKS.md). What the run itself allocates is collected as usual.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["frozen_heap", "run_threads"]

C = TypeVar("C")
#: Runs inside :func:`frozen_heap` now (several runs may share a process): the first freezes,
#: the last one out unfreezes; ``ours`` is False when the heap was frozen by someone else
#: already (a server that froze its startup heap), which is then left as it was.
_FROZEN = {"depth": 0, "ours": False}
_FROZEN_LOCK = threading.Lock()


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects that exist now out of full garbage collections until the block ends.

    ``gc.freeze()`` moves every tracked object to the permanent generation, which collections
    skip; ``gc.unfreeze()`` moves them back to the oldest generation when the last block
    inside one process ends. Nothing is collected less in the end: garbage among the frozen
    objects is collected by the first full collection after the block. A heap that something
    else froze before the first block is neither frozen again nor unfrozen.
    """
    with _FROZEN_LOCK:
        if _FROZEN["depth"] == 0:
            _FROZEN["ours"] = gc.get_freeze_count() == 0
            if _FROZEN["ours"]:
                gc.freeze()
        _FROZEN["depth"] += 1
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN["depth"] -= 1
            if _FROZEN["depth"] == 0 and _FROZEN["ours"]:
                gc.unfreeze()


def run_threads(
    n: int,
    queue_: list[tuple[C, str]],
    going: Callable[[int], bool],
    make: Callable[[C, str], tuple[Any, float, Any]],
    finish: Callable[[C, str, Any, float, Any], None],
    cancel: threading.Event,
) -> None:
    """Make the calls of ``queue_`` from ``n`` threads; return when every one is finished.

    Args:
        n: threads (the run's concurrency).
        queue_: ``(call, cache key)`` pairs, taken in order; ``finish`` may append to it.
        going: whether position ``pos`` of ``queue_`` may be taken now (False once it is
            past the end, or the run is cancelled or its writer failed).
        make: makes one call: ``(reply, milliseconds, row)``; runs in parallel.
        finish: records one made call; runs under one lock, one call at a time.
        cancel: set here when this thread is interrupted (KeyboardInterrupt): no new call is
            taken, the calls in flight finish and are recorded, then the exception goes on.

    A thread with nothing to take waits while calls are in flight (a failed shared call may
    add calls) and stops when none is. An exception in a thread stops the others from taking
    calls and is raised here once they have stopped.
    """
    cond = threading.Condition()
    state = {"pos": 0, "inflight": 0}
    failures: list[BaseException] = []

    def take() -> tuple[C, str] | None:
        with cond:
            while True:
                pos = state["pos"]
                if not failures and going(pos):
                    state["pos"] = pos + 1
                    state["inflight"] += 1
                    return queue_[pos]
                if state["inflight"] == 0 or cancel.is_set() or failures:
                    return None
                # Every call in flight notifies when it is recorded: no timed wake-ups while
                # the last calls are out (issue 38 item 4).
                cond.wait()

    def loop() -> None:
        while (item := take()) is not None:
            call, key = item
            try:
                made = make(call, key)
            except BaseException as exc:
                made = exc
            with cond:  # one lock a call: record it, and say it is no longer in flight
                try:
                    if isinstance(made, BaseException):
                        raise made
                    finish(call, key, *made)
                except BaseException as exc:
                    failures.append(exc)
                state["inflight"] -= 1
                cond.notify_all()

    threads = [
        threading.Thread(target=loop, name=f"engine-call-{i}", daemon=True) for i in range(n)
    ]
    with frozen_heap():
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.5)
        except BaseException:
            cancel.set()
            for t in threads:
                t.join()
            raise
    if failures:
        raise failures[0]
