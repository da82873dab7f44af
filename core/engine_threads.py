"""The engine's calling threads, for a server backend at ``concurrency`` > 1 (issue 17).

:func:`run_threads` replaces a thread pool with futures: each of ``n`` threads takes the next
call, makes it, builds its row (parsing the reply) and hands it to the writer itself, so a
call costs no future, no waiter on every pending future and no switch to a collecting thread;
a thread waits only for the server. At a GPU server's speed (hundreds of calls a second) that
bookkeeping was a large share of the engine's CPU time per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_threads"]

C = TypeVar("C")


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
                cond.wait(0.5)

    def loop() -> None:
        while (item := take()) is not None:
            call, key = item
            try:
                made = make(call, key)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                made = exc
            with cond:  # one lock a call: record it, and say it is no longer in flight
                try:
                    if isinstance(made, BaseException):
                        raise made
                    finish(call, key, *made)
                except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                    failures.append(exc)
                state["inflight"] -= 1
                cond.notify_all()

    threads = [
        threading.Thread(target=loop, name=f"engine-call-{i}", daemon=True) for i in range(n)
    ]
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
