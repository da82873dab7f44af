"""The embedded reader in worker processes (core/backends/workers.py) and the engine's use of it.

A run with at least ``POOL_MIN_CALLS`` calls to make sends the embedded reader's prompts to
worker processes; its predictions must be exactly those of the reader in the engine's own
process, a dead worker's calls must still be answered (by the reader in this process, not a
hang and not an error), and no worker may outlive its pool or its parent process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT

from core.backends import EmbeddedReader
from core.backends.workers import MAX_RESTARTS
from core.datasets.controlled import build_controlled
from core.execution.engine import POOL_MIN_CALLS, READ_AHEAD, ReadAhead
from core.execution.runs import run_conditions
from core.oncu.conditions import plan_conditions
from core.store import Store
from core.types import CONDITIONS


@pytest.fixture(scope="module")
def controlled():
    return build_controlled("controlled-200", seed=42)


def _gone(pid: int, timeout: float = 15.0) -> bool:
    """True once ``pid`` has exited (or is a zombie nobody reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in "ZX":
            return True
        time.sleep(0.05)
    return False


def test_the_pool_answers_as_the_reader_does(controlled):
    calls = plan_conditions(controlled.instances[:10], CONDITIONS)
    reader = EmbeddedReader(threshold=0.4)
    pool = reader.pool(2)
    try:
        futures = [pool.submit(list(c.messages)) for c in calls]
        for call, fut in zip(calls, futures, strict=True):
            got, want = fut.result(timeout=60), reader.generate(list(call.messages))
            assert (got.text, got.prompt_tokens, got.completion_tokens, got.model_digest) == (
                want.text,
                want.prompt_tokens,
                want.completion_tokens,
                want.model_digest,
            )
            assert got.error is None and got.total_duration_ns > 0
        assert reader.pool(2) is pool  # kept for the next run
    finally:
        reader.close()


def test_a_dead_workers_calls_are_answered_here_and_the_next_call_gets_a_new_one(controlled):
    calls = plan_conditions(controlled.instances[:3], ["full_context"])
    want = [EmbeddedReader(workers=False).generate(list(c.messages)).text for c in calls]
    reader = EmbeddedReader()
    pool = reader.pool(1)
    try:
        for round_ in range(MAX_RESTARTS + 1):
            assert pool.submit(list(calls[0].messages)).result(timeout=60).text == want[0]
            worker = pool._workers[0]  # a new one after the first round
            assert worker.alive and pool.restarts == round_
            worker.proc.send_signal(signal.SIGSTOP)  # hold it, so these stay unanswered
            waiting = [pool.submit(list(c.messages)) for c in calls]
            worker.proc.kill()
            assert [f.result(timeout=60).text for f in waiting] == want  # answered here
            assert _gone(worker.proc.pid)
        # MAX_RESTARTS workers were started in place of dead ones; now calls are made here.
        assert pool.submit(list(calls[1].messages)).result(timeout=60).text == want[1]
        assert pool.restarts == MAX_RESTARTS and not pool._workers[0].alive
    finally:
        reader.close()


def test_workers_exit_with_their_pool():
    reader = EmbeddedReader()
    pids = [w.proc.pid for w in reader.pool(2)._workers]
    reader.close()
    assert all(_gone(pid) for pid in pids)


_PARENT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from core.backends import EmbeddedReader

    reader = EmbeddedReader()
    print(" ".join(str(w.proc.pid) for w in reader.pool(2)._workers), flush=True)
    time.sleep(600)
    """
)


def test_workers_exit_when_their_parent_is_killed():
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(not _gone(pid, 0.2) for pid in pids)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert all(_gone(pid) for pid in pids)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_long_run_uses_worker_processes_and_stores_what_the_reader_says(tmp_path, controlled):
    """800 calls through the worker (read ahead while planning) and 800 in-process: the same
    rows; a second run of the same calls is served from the cache, with no call made."""
    stores = {}
    for label in ("pool", "here"):
        store = Store(tmp_path / f"{label}.duckdb")
        store.write_dataset(controlled)
        stores[label] = store
    reader = EmbeddedReader()
    try:
        s = run_conditions(stores["pool"], "controlled-200", reader, CONDITIONS, name="r")
        assert reader._pool is not None and s.executed + s.cached == 800 > POOL_MIN_CALLS
        in_process = EmbeddedReader(workers=False)
        here = run_conditions(stores["here"], "controlled-200", in_process, CONDITIONS, name="r")
        assert in_process.pool(1) is None
        assert (here.executed, here.cached) == (s.executed, s.cached)
        cols = [
            "instance_id",
            "condition",
            "raw_response",
            "answer",
            "cited_ids",
            "confidence",
            "prompt_hash",
            "cache_hit",
            "error",
            "f1_relaxed",
        ]
        got, want = (
            stores[k].prediction_rows("r")[cols].sort_values(cols[:2]).reset_index(drop=True)
            for k in ("pool", "here")
        )
        assert got.astype(str).equals(want.astype(str))
        run = stores["pool"].run_row("r")
        assert run["status"] == "done" and 0 < run["model_seconds"] < run["wall_seconds"]

        again = run_conditions(stores["pool"], "controlled-200", reader, CONDITIONS, name="r2")
        assert (again.executed, again.cached, again.errors) == (0, 800, 0)
        assert stores["pool"].prediction_rows("r2")["cache_hit"].all()
    finally:
        reader.close()


def test_read_ahead_is_bounded_however_slow_planning_is(controlled):
    """What the workers answer while a run is planned is stored only once execution starts,
    so a kill during planning loses it: at most READ_AHEAD calls per worker are sent ahead,
    even when planning is slower than the reader (long prompts)."""
    calls = plan_conditions(controlled.instances[:60], CONDITIONS)
    reader = EmbeddedReader()
    try:
        ahead = ReadAhead(reader.pool(1))
        for call in calls:  # a planner slower than the reader: the workers are always idle
            ahead.offer(call)
            deadline = time.monotonic() + 5
            while ahead.pool.outstanding and time.monotonic() < deadline:
                time.sleep(0.001)
        assert len(calls) > READ_AHEAD and len(ahead.futures) == READ_AHEAD
        assert all(f.result(timeout=60).error is None for f in ahead.futures.values())
    finally:
        reader.close()
