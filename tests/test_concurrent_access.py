"""A run writing while another process reads the store read-only, both real processes (SPEC §2).

DuckDB allows one read-write process or many read-only ones, never both at once: the engine
writes in short transactions and leaves the file unlocked between them, and every open retries
while the other side holds the lock. Both processes must succeed, and the reader must see the
run progress (counts between 0 and the total) rather than only its start or end. The writer
calls the stub model server with a fixed latency, so the run lasts a few seconds whatever the
machine's speed: with the embedded reader a fast machine finished 800 calls in two writes
moments apart, and the reader, waiting on the lock, saw only the start and the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT
from model_stub import ModelStub

from core.datasets.controlled import build_controlled
from core.store import Store

_READER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {root!r})
    from core.store import Store

    store = Store({db!r})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with store.connect(read_only=True) as con:
            n = con.execute(
                "SELECT count(*) FROM predictions WHERE run_id = 'live'"
            ).fetchone()[0]
            status = con.execute("SELECT status FROM runs WHERE run_id = 'live'").fetchone()
        print(json.dumps([n, status[0] if status else None]), flush=True)
        if status and status[0] == "done":
            break
        time.sleep(0.02)
    """
)


def test_a_run_and_a_read_only_reader_share_the_store(tmp_path):
    db = tmp_path / "store.duckdb"
    Store(db).write_dataset(build_controlled("controlled-200", seed=42))
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER.format(root=str(ROOT), db=str(db))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with ModelStub(latency_s=0.02) as stub:  # 800 calls x 20 ms / 4 workers: about 4 s
        writer = subprocess.run(
            [
                sys.executable,
                "-m",
                "core",
                "run",
                "--db",
                str(db),
                "--dataset",
                "controlled-200",
                "--backend",
                "ollama",
                "--model",
                "stub-model",
                "--host",
                stub.url,
                "--concurrency",
                "4",
                "--name",
                "live",
                "--json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    out, err = reader.communicate(timeout=120)
    assert writer.returncode == 0, writer.stderr
    assert reader.returncode == 0, err
    summary = json.loads(writer.stdout)
    assert (summary["planned"], summary["executed"] + summary["cached"]) == (800, 800)
    seen = [json.loads(line) for line in out.splitlines()]
    counts = [n for n, _ in seen]
    assert counts == sorted(counts)  # committed batches only ever add rows
    assert seen[-1] == [800, "done"]
    assert any(0 < n < 800 for n in counts), f"the reader never saw the run in progress: {seen}"
    assert len(Store(db).prediction_rows("live")) == 800
