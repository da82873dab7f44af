"""Fault drills (issue 9): the product under kill -9, a full disk and a misbehaving model server.

Real parts only: CLI subprocesses killed with SIGKILL, a file-size limit on the process that
writes the store (what a full disk looks like to DuckDB), and the ``ollama`` / ``openai``
backends (the real client libraries) against ``tests/model_stub.py`` in each fault mode.
Crash-resume of a *run* is drilled in ``tests/test_crash_resume.py``; a run beside a reader in
``tests/test_concurrent_access.py``; importer and parser fuzzing in ``test_fuzz_importers.py``
and ``test_parsing.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from model_stub import ModelStub

from core.backends import make_backend
from core.datasets.controlled import build_controlled
from core.engine import run_conditions
from core.store import Store

pytestmark = pytest.mark.slow

N_JSONL = 3000  # records of the import drill: a few seconds of parsing and writing


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, **kw
    )


def _datasets(db) -> dict[str, int]:
    out = _cli("datasets", "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    return {d["name"]: d["n_instances"] for d in json.loads(out.stdout)}


def _write_jsonl(path, n: int, noise: int = 0) -> None:
    """``n`` records of 9 passages; ``noise`` hex characters per filler defeat compression."""
    with open(path, "w") as f:
        for i in range(n):
            passages = [
                {"text": f"Record {i} fact: the code of item {i} is K{i:05d}.", "is_gold": True},
                *({"text": f"Filler {j} of item {i}: {os.urandom(noise // 2).hex()}."}
                  for j in range(8)),
            ]  # fmt: skip
            rec = {"id": f"q{i}", "question": f"What is the code of item {i}?",
                   "answer": f"K{i:05d}", "passages": passages}  # fmt: skip
            f.write(json.dumps(rec) + "\n")


# ----------------------------------------------------------------- kill -9 during an import


def test_kill_9_during_an_import_leaves_all_or_nothing_then_import_completes(tmp_path):
    db, src = tmp_path / "s.duckdb", tmp_path / "big.jsonl"
    _write_jsonl(src, N_JSONL)
    assert _cli("generate", "controlled", "--preset", "controlled-200", "--name", "before",
                "--db", str(db)).returncode == 0  # fmt: skip
    cmd = [sys.executable, "-m", "core", "import", "dataset", "--format", "jsonl", str(src),
           "--name", "big", "--db", str(db)]  # fmt: skip
    killed = 0
    for delay in (0.8, 1.6, 2.4, 3.2):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        seen = _datasets(db)  # the store opens after every kill
        assert seen["before"] == 200
        assert seen.get("big") in (None, N_JSONL), seen  # never a partial dataset
        if "big" in seen:
            break
    assert killed >= 1, "the import finished before any kill: raise N_JSONL"
    if "big" not in _datasets(db):
        done = _cli("import", "dataset", "--format", "jsonl", str(src), "--name", "big",
                    "--db", str(db))  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert _datasets(db) == {"before": 200, "big": N_JSONL}


# ------------------------------------------------------------------------------ disk full


def test_a_full_disk_gives_a_one_line_error_and_the_store_still_opens(tmp_path):
    db, src = tmp_path / "s.duckdb", tmp_path / "big.jsonl"
    _write_jsonl(src, N_JSONL, noise=1000)  # about 24 MB of incompressible text
    assert _cli("generate", "controlled", "--preset", "controlled-200", "--name", "before",
                "--db", str(db)).returncode == 0  # fmt: skip
    limit = os.path.getsize(db) + 1_000_000  # room for a little, not for the new dataset

    def full_disk() -> None:  # in the child: writes past `limit` fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = subprocess.run(
        [sys.executable, "-m", "core", "import", "dataset", "--format", "jsonl", str(src),
         "--name", "big", "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, preexec_fn=full_disk,
    )  # fmt: skip
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("error: ") and str(db) in lines[0]
    assert "disk full" in lines[0]
    assert _datasets(db) == {"before": 200}


# ------------------------------------------------------------- a misbehaving model server


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """A store with three controlled instances (4K tokens) to run against the stub."""
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [4000]})
    ds = dataclasses.replace(ds, name="three", instances=ds.instances[:3])
    path = tmp_path_factory.mktemp("faults") / "s.duckdb"
    Store(path).write_dataset(ds)
    return path


_FAST = {"retries": 2, "backoff_s": 0.01, "max_backoff_s": 0.02, "timeout_s": 1.0,
         "connect_timeout_s": 1.0}  # fmt: skip


@pytest.mark.parametrize("kind", ["ollama", "openai"])
@pytest.mark.parametrize(
    "mode, recorded",
    [("stall", "error"), ("500", "error"), ("not-json", "error"),
     ("missing-fields", "error"), ("close", "error")],
)  # fmt: skip
def test_each_server_fault_is_recorded_and_the_run_finishes(three, kind, mode, recorded):
    store = Store(three)
    with ModelStub(stall_s=5.0) as stub:
        stub.set_mode(mode)
        url = stub.url if kind == "ollama" else f"{stub.url}/v1"
        backend = make_backend(
            kind, "stub-model", hosts=[stub.url] if kind == "ollama" else None,
            base_url=url if kind == "openai" else None, options=_FAST,
        )  # fmt: skip
        t0 = time.monotonic()
        summary = run_conditions(
            store, "three", backend, ["oracle", "no_evidence"], name=f"{kind}-{mode}",
            concurrency=2,
        )  # fmt: skip
        assert time.monotonic() - t0 < 30
    assert summary.planned == 6 and summary.executed == 6
    assert summary.errors == 6  # every call failed, each one recorded, none lost
    rows = store.prediction_rows(f"{kind}-{mode}")
    assert len(rows) == 6
    assert rows["error"].map(lambda e: isinstance(e, str) and len(e) > 0).all()
    assert rows["error"].map(lambda e: "\n" not in e).all()  # one-line reasons
    # the failed calls are scored incorrect and stay in the denominators
    assert (rows["f1_relaxed"] == 0).all() and (rows["failure_label"] == "parse").sum() == 3


def test_a_server_that_recovers_serves_the_rerun(three):
    store = Store(three)
    with ModelStub() as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url], options=_FAST)
        stub.set_mode("503-once")
        summary = run_conditions(store, "three", backend, ["oracle"], name="recovers")
    assert summary.errors == 0 and summary.executed == 3  # the 503 was retried


# --------------------------------------------------- the dashboard beside a CLI run, one store


def test_the_dashboard_renders_while_a_cli_run_writes_the_same_store(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    db = tmp_path / "s.duckdb"
    assert _cli("generate", "controlled", "--preset", "controlled-200", "--name", "c",
                "--db", str(db)).returncode == 0  # fmt: skip
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    with ModelStub(latency_s=0.01) as stub:  # ~10 s of calls: the run outlives the renders
        run = subprocess.Popen(
            [sys.executable, "-m", "core", "run", "--dataset", "c", "--backend", "ollama",
             "--model", "stub-model", "--host", stub.url, "--conditions",
             "no_evidence,oracle,retrieved", "--name", "live", "--json", "--db", str(db)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        renders = 0
        try:
            while run.poll() is None or renders < 2:
                for page in ("pages/overview.py", "pages/conditions.py", "pages/runs.py"):
                    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
                    at.switch_page(page)
                    at.run()
                    assert not at.exception, [e.value for e in at.exception]
                    shown = " ".join(str(m.value) for m in (*at.error, *at.warning))
                    assert "lock" not in shown.lower(), shown
                renders += 1
            out, err = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 0, err
    assert "lock" not in err.lower()
    summary = json.loads(out)
    assert summary["planned"] == 600 and summary["errors"] == 0
    assert renders >= 2
