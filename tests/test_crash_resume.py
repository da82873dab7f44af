"""kill -9 during a run, then rerun: one prediction per planned call, no completed call repeated.

A real subprocess runs the engine on a real store with a backend double that answers with
the embedded reader after a short sleep and logs every call it makes; the test SIGKILLs it
twice at different points, then lets a third process finish the run (SPEC §2, §12).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT

from core.datasets.controlled import build_controlled
from core.oncu.conditions import plan_conditions
from core.store import Store
from core.types import CONDITIONS

_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {root!r})
    from core.backends import EmbeddedReader
    from core.execution.runs import run_conditions
    from core.execution.prompts import prompt_hash
    from core.store import Store

    class SlowReader:
        name = "embedded"

        def __init__(self, log):
            self.reader = EmbeddedReader()
            self.model = self.reader.model
            self.log = open(log, "a", encoding="utf-8")

        def describe(self):
            return self.reader.describe()

        def generate(self, messages, options=None):
            time.sleep(0.1)  # ~13 s a run: batches (up to MAX_GAP_S apart) to kill between
            reply = self.reader.generate(messages)
            self.log.write(prompt_hash(messages) + "\\n")
            self.log.flush()
            return reply

    summary = run_conditions(
        Store({db!r}), "ctl", SlowReader(sys.argv[1]), {conditions!r}, name="crash",
        concurrency=2,
    )
    print(json.dumps(summary.to_dict()))
    """
)


def _snapshot(db: Path) -> dict[tuple[str, str], tuple]:
    rows = Store(db).prediction_rows("crash")
    return {
        (r.instance_id, r.condition): (r.created_at, bool(r.cache_hit), r.prompt_hash)
        for r in rows.itertuples()
    }


def _run_until(script: Path, log: Path, db: Path, at_least: int) -> dict:
    """Start the run; SIGKILL it once ``at_least`` predictions are stored; the snapshot."""
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be killed: {proc.stderr.read()!r}")
            if len(Store(db).prediction_keys("crash")) >= at_least:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return _snapshot(db)


def _calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_sigkill_twice_then_rerun_finishes_exactly_once(tmp_path):
    db = tmp_path / "store.duckdb"
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [4000]})
    Store(db).write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))
    planned = plan_conditions(ds.instances, CONDITIONS)
    n = len(planned)
    assert n == 4 * len(ds.instances) and n >= 200
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT.format(root=str(ROOT), db=str(db), conditions=list(CONDITIONS)))

    logs = [tmp_path / f"calls{i}.log" for i in range(3)]
    snap1 = _run_until(script, logs[0], db, at_least=20)
    assert 20 <= len(snap1) < n, "the first kill did not land mid-run"
    assert Store(db).run_row("crash")["status"] == "interrupted"  # stored running, process gone
    snap2 = _run_until(script, logs[1], db, at_least=len(snap1) + 40)
    assert len(snap1) + 40 <= len(snap2) < n, "the second kill did not land mid-run"

    done = subprocess.run(
        [sys.executable, str(script), str(logs[2])], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    final = _snapshot(db)

    # exactly one prediction per planned call, and the run says so
    assert set(final) == {(c.instance_id, c.condition) for c in planned}
    assert len(Store(db).prediction_rows("crash")) == n
    run = Store(db).run_row("crash")
    assert (run["status"], run["n_planned"], run["n_done"]) == ("done", n, n)
    assert summary["planned"] == n
    assert summary["skipped_existing"] == len(snap2)
    assert summary["executed"] + summary["cached"] == n - len(snap2)

    # committed rows are never redone: same created_at after every later process
    for snap in (snap1, snap2):
        for key, (created, _, _) in snap.items():
            assert final[key][0] == created, key
    # ... and no later process called the model for a prompt that was already committed
    for before, log in ((snap1, logs[1]), (snap1, logs[2]), (snap2, logs[2])):
        committed = {h for _, _, h in before.values()}
        assert not committed & set(_calls(log))
    # the last process made exactly the calls that were missing (shared prompts made once)
    missing = {h for key, (_, _, h) in final.items() if key not in snap2}
    made = Counter(_calls(logs[2]))
    assert set(made) == missing and max(made.values()) == 1
    # cache hits only where two planned calls share one prompt
    shared = {h for h, k in Counter(c.prompt_hash for c in planned).items() if k > 1}
    assert {h for _, hit, h in final.values() if hit} <= shared
