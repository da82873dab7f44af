"""Every answered call is committed within about a second, in every execution mode (issue 15.8).

SPEC §2: a call's prediction is committed as soon as it completes. The engine's writer batches
rows, but starts each write early enough that it ends :data:`core.execution.engine.COMMIT_S` after
the
batch's first row completed. Each test lets a run answer some calls, then holds every further
answer back (a gate in front of the reader, or the stub server stalling), waits 1.5 s, and
checks from a separate read-only connection that every answered call is committed. The margin
is generous on purpose (slow CI machines); before the fix the writer could wait 3 s.

A ``kill -9`` after that quiet second loses no answered call, and the rerun asks the server for
no prompt whose prediction is committed.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import ROOT
from model_stub import ModelStub
from test_run_lock import _dataset, _run_argv, _wait

from core.backends import EmbeddedReader
from core.execution.prompts import prompt_hash
from core.execution.runs import run_conditions
from core.oncu.conditions import plan_conditions
from core.store import Store
from core.types import CONDITIONS

QUIET_S = 1.5  # COMMIT_S plus a generous margin


class _Gate:
    """Lets ``stop_after`` answers through, then holds the rest until :meth:`open`."""

    def __init__(self, stop_after: int):
        self.stop_after = stop_after
        self.answered: list[str] = []  # prompt hashes of the answers let through
        self.closed = threading.Event()  # an answer is being held
        self._opened = threading.Event()
        self._held: list[tuple[str, Future, Future]] = []
        self._lock = threading.Lock()

    def wait(self, prompt: str) -> None:
        """Block the calling thread while the gate is closed (a backend's ``generate``)."""
        with self._lock:
            if len(self.answered) < self.stop_after:
                self.answered.append(prompt)
                return
            self.closed.set()
        self._opened.wait()
        with self._lock:
            self.answered.append(prompt)

    def forward(self, prompt: str, inner: Future, out: Future) -> None:
        """Pass ``inner``'s reply on to ``out`` now, or when the gate opens."""
        with self._lock:
            if len(self.answered) >= self.stop_after:
                self._held.append((prompt, inner, out))
                self.closed.set()
                return
            self.answered.append(prompt)
        out.set_result(inner.result())

    def open(self) -> None:
        """Let everything through from now on."""
        with self._lock:
            self.stop_after = math.inf
            held, self._held = self._held, []
            self.answered.extend(p for p, _, _ in held)
        self._opened.set()
        for _, inner, out in held:
            out.set_result(inner.result())


class _GatedPool:
    """A reader's worker processes whose replies pass through a :class:`_Gate`."""

    def __init__(self, inner, gate: _Gate):
        self.inner, self.gate, self.size = inner, gate, inner.size

    @property
    def outstanding(self) -> int:
        return self.inner.outstanding

    def submit(self, messages) -> Future:
        out: Future = Future()
        prompt = prompt_hash(messages)
        self.inner.submit(messages).add_done_callback(
            lambda fut: self.gate.forward(prompt, fut, out)
        )
        return out


class _GatedReader(EmbeddedReader):
    """The embedded reader (in this process or in its workers) behind a :class:`_Gate`."""

    def __init__(self, gate: _Gate, workers: bool):
        super().__init__(workers=workers)
        self.gate = gate
        self._gated: _GatedPool | None = None

    def generate(self, messages, options=None):
        reply = super().generate(messages, options)
        self.gate.wait(prompt_hash(messages))
        return reply

    def pool(self, size: int):
        inner = super().pool(size)
        if inner is None:
            return None
        if self._gated is None or self._gated.inner is not inner:
            self._gated = _GatedPool(inner, self.gate)
        return self._gated


def _committed(db: Path, run: str) -> set[str]:
    """Prompt hashes of the run's committed predictions, read from a connection of our own."""
    return set(Store(db).prediction_rows(run)["prompt_hash"])


@pytest.mark.parametrize(
    ("mode", "concurrency", "workers", "stop_after"),
    [
        ("in-thread", 1, False, 30),
        ("thread-pool", 4, False, 30),
        ("worker-process", 1, True, 100),  # past the read-ahead (64 calls) sent while planning
        ("drain", 1, True, -4),  # the last 4 replies, after every call has been sent
    ],
)
def test_answered_calls_are_committed_within_a_second(
    tmp_path, mode, concurrency, workers, stop_after
):
    db = tmp_path / "store.duckdb"
    ds = _dataset(db)  # 40 instances x 4 conditions: 160 calls, 159 distinct prompts
    n_prompts = len({c.prompt_hash for c in plan_conditions(ds.instances, CONDITIONS)})
    stop = stop_after if stop_after > 0 else n_prompts + stop_after
    gate = _Gate(stop)
    reader = _GatedReader(gate, workers)
    out: dict = {}

    def run() -> None:
        try:
            out["summary"] = run_conditions(
                Store(db), "ctl", reader, CONDITIONS, name="R", concurrency=concurrency
            )
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not gate.closed.wait(0.05):
            assert thread.is_alive(), f"the run ended before the gate closed: {out}"
            assert time.monotonic() < deadline, "timed out waiting for the gate to close"
        time.sleep(QUIET_S)
        with gate._lock:
            answered = set(gate.answered)
        committed = _committed(db, "R")
    finally:
        gate.open()
        thread.join(timeout=120)
        reader.close()
    assert "error" not in out, out
    assert len(answered) == stop
    missing = answered - committed
    assert not missing, f"{mode}: {len(missing)} of {len(answered)} answered calls not committed"
    assert out["summary"].status == "done"
    assert len(Store(db).prediction_rows("R")) == 4 * len(ds.instances)


class _AnswerLog(ModelStub):
    """The stub server, logging the prompt of every chat it answers (not just receives)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answered: list[str] = []
        self._log_lock = threading.Lock()

    def ollama_chat(self, body):
        out = super().ollama_chat(body)
        with self._log_lock:
            self.answered.append(prompt_hash(body.get("messages") or []))
        return out


@pytest.mark.parametrize("concurrency", [1, 3])
def test_kill_9_after_a_quiet_second_loses_no_answer_and_the_rerun_repeats_none(
    tmp_path, concurrency
):
    db = tmp_path / "store.duckdb"
    ds = _dataset(db)
    planned = plan_conditions(ds.instances, CONDITIONS)
    with _AnswerLog(latency_s=0.02, stall_s=300) as stub:
        first = subprocess.Popen(
            _run_argv(db, stub, concurrency=concurrency),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(lambda: len(stub.answered) >= 40, first, "40 answered calls")
            stub.set_mode("stall")  # answers stop: the calls in flight hang
            time.sleep(QUIET_S)
            with stub._log_lock:
                answered = set(stub.answered)
            committed = _committed(db, "S")
            os.kill(first.pid, signal.SIGKILL)
        finally:
            first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL, first.stderr.read()
        assert _committed(db, "S") == committed  # nothing landed between the look and the kill
        missing = answered - committed
        assert not missing, f"{len(missing)} of {len(answered)} answered calls were lost"
        assert len(committed) < len({c.prompt_hash for c in planned}), "the run had ended"

        stub.set_mode("ok")
        seen = len(stub.bodies("/api/chat"))
        again = subprocess.run(
            _run_argv(db, stub, concurrency=concurrency),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stderr
        asked = {prompt_hash(b["messages"]) for b in stub.bodies("/api/chat")[seen:]}
    assert not asked & committed, "the rerun called the model for a committed prediction"
    summary = json.loads(again.stdout)
    assert summary["status"] == "done"
    assert len(Store(db).prediction_rows("S")) == len(planned)
