"""kill -9 during an attribution run, then rerun: no stored call is made again (issue 40).

The pattern (and the script) of ``tests/test_crash_resume.py``: a real subprocess runs
:func:`core.execution.runs.run_attribution` on a real store with a reader that answers with the
embedded reader after a short sleep and logs every prompt it is sent; the test SIGKILLs it
mid-run, then lets a second process finish. Every planned call ends up stored once, and no
prompt committed before the kill is sent to the model again.
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
from test_crash_resume import _SCRIPT as _CONDITIONS_SCRIPT

from core.datasets.controlled import build_controlled
from core.store import Store

# the durability test's script (a reader that sleeps and logs every prompt), running an
# attribution run instead of the four conditions
_SCRIPT = _CONDITIONS_SCRIPT.split("summary = ")[0].replace(
    "from core.execution.runs import run_conditions",
    "from core.execution.runs import run_attribution",
) + textwrap.dedent(
    """
    summary = run_attribution(
        Store({db!r}), "ctl", SlowReader(sys.argv[1]), name="att", ablations=16,
        instances="6", concurrency=2,
    )
    print(json.dumps(summary.to_dict()))
    """
)


def _snapshot(db: Path) -> dict[tuple[str, str], tuple]:
    rows = Store(db).prediction_rows("att")
    return {(r.instance_id, r.variant): (r.created_at, r.prompt_hash) for r in rows.itertuples()}


def test_sigkill_then_rerun_repeats_no_stored_call(tmp_path):
    db = tmp_path / "store.duckdb"
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [4000]})
    Store(db).write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT.format(root=str(ROOT), db=str(db)))
    logs = [tmp_path / "calls0.log", tmp_path / "calls1.log"]

    proc = subprocess.Popen(
        [sys.executable, str(script), str(logs[0])], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be killed: {proc.stderr.read()!r}")
            if len(Store(db).prediction_keys("att")) >= 30:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = _snapshot(db)
    assert 30 <= len(before) < 6 * 17, "the kill did not land mid-run"

    done = subprocess.run(
        [sys.executable, str(script), str(logs[1])], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    final = _snapshot(db)
    variants = Counter(v.split(":")[0] for _, v in final)
    assert variants["full"] == 6 and variants["abl"] == 6 * 16
    assert summary["skipped_existing"] == len(before)
    # committed rows are never redone, and their prompts are not sent again
    for key, (created, _) in before.items():
        assert final[key][0] == created, key
    committed = {h for _, h in before.values()}
    made = logs[1].read_text().split() if logs[1].exists() else []
    assert not committed & set(made)
    assert Store(db).run_row("att")["status"] == "done"
