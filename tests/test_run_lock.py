"""One run name at a time: a second process starting a running run is refused at once.

Two ``python -m core run --name S`` against one store used to both call the model for every
missing call, and the second died on a duplicate key. Now a run holds ``<store>.locks/<run>.lock``
(``fcntl.flock``) from start to end: the second process exits 1 at once with one line naming
the run and the pid holding it, with no model call and the store unchanged; ``kill -9`` of the
holder releases the lock, so the run resumes. The runs call the stub model server with a fixed
latency, so they last a few seconds whatever the machine's speed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT
from model_stub import ModelStub

from core.backends import make_backend
from core.datasets.controlled import build_controlled
from core.execution.engine import rerun_call
from core.execution.jobs import RunJob, RunRequest
from core.execution.runs import open_run, run_conditions, run_interventions, run_probes
from core.oncu.conditions import plan_conditions
from core.store import RunBusyError, Store
from core.store.locks import hold_run, lock_path
from core.types import CONDITIONS

N_INSTANCES = 40  # x 4 conditions: 160 calls


def _dataset(db: Path, n: int = N_INSTANCES):
    ds = build_controlled("controlled-200", seed=42, limit=n)
    Store(db).write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))
    return ds


def _run_argv(db: Path, stub: ModelStub, name: str = "S", concurrency: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "core",
        "run",
        "--db",
        str(db),
        "--dataset",
        "ctl",
        "--backend",
        "ollama",
        "--model",
        "stub-model",
        "--host",
        stub.url,
        "--concurrency",
        str(concurrency),
        "--name",
        name,
        "--json",
    ]


def _chats(stub: ModelStub) -> Counter:
    """How often the stub was asked each distinct prompt."""
    return Counter(json.dumps(b["messages"], sort_keys=True) for b in stub.bodies("/api/chat"))


def _wait(predicate, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"the first run ended before {what}: {proc.stderr.read()!r}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _busy_line(stderr: str, name: str, pid: int) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith(f"error: run '{name}' is already running in process {pid} "), line
    assert "Traceback" not in stderr
    return line


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


_HOLDER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from core.store import Store

    with Store({db!r}).run_lock({name!r}):
        print("held", flush=True)
        sys.stdin.read()  # until the test closes stdin
    """
)


@contextmanager
def _held_elsewhere(db: Path, name: str) -> Iterator[int]:
    """Another process holds run ``name``'s lock for the block; yields its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER.format(root=str(ROOT), db=str(db), name=name)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held", proc.stderr.read()
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def _free(db: Path, name: str) -> bool:
    """True when another process can take run ``name``'s lock now."""
    script = _HOLDER.format(root=str(ROOT), db=str(db), name=name)
    done = subprocess.run(
        [sys.executable, "-c", script], input="", capture_output=True, text=True, timeout=60
    )
    return done.returncode == 0 and done.stdout.strip() == "held"


# --------------------------------------------------------------------------- two processes


def test_second_process_is_refused_at_once_and_the_first_makes_every_call_once(tmp_path):
    db = tmp_path / "store.duckdb"
    ds = _dataset(db)
    planned = plan_conditions(ds.instances, CONDITIONS)
    prompts = {c.prompt_hash for c in planned}
    with ModelStub(latency_s=0.05) as stub:  # 160 calls x 50 ms / 2 workers: about 4 s
        first = subprocess.Popen(
            _run_argv(db, stub),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(lambda: stub.bodies("/api/chat"), first, "its first model call")
            assert lock_path(db, "S").read_text().strip() == str(first.pid)
            t = time.monotonic()
            second = subprocess.run(
                _run_argv(db, stub), cwd=ROOT, capture_output=True, text=True, timeout=60
            )
            took = time.monotonic() - t
            assert first.poll() is None, "the first run ended before the second was refused"
            out, err = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        chats = _chats(stub)
    assert second.returncode == 1, second.stderr
    assert second.stdout == ""
    line = _busy_line(second.stderr, "S", first.pid)
    assert str(lock_path(db, "S")) in line
    assert took < 5.0, f"the second process took {took:.1f} s to give up"
    # the first run finished with every call made exactly once
    assert first.returncode == 0, err
    summary = json.loads(out)
    assert summary["status"] == "done" and summary["planned"] == len(planned)
    assert len(chats) == len(prompts) and max(chats.values()) == 1
    assert sum(chats.values()) == summary["executed"]
    assert len(Store(db).prediction_rows("S")) == len(planned)
    run = Store(db).run_row("S")
    assert (run["status"], run["n_done"]) == ("done", len(planned))
    assert lock_path(db, "S").read_text() == ""  # released: no holder named


def test_kill_9_releases_the_lock_and_the_rerun_finishes(tmp_path):
    db = tmp_path / "store.duckdb"
    ds = _dataset(db)
    planned = plan_conditions(ds.instances, CONDITIONS)
    with ModelStub(latency_s=0.05) as stub:
        first = subprocess.Popen(
            _run_argv(db, stub),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait(lambda: len(Store(db).prediction_keys("S")) >= 10, first, "10 stored calls")
            os.kill(first.pid, signal.SIGKILL)
        finally:
            first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        stored = len(Store(db).prediction_keys("S"))
        assert 10 <= stored < len(planned), "the kill did not land mid-run"
        assert Store(db).run_row("S")["status"] == "interrupted"  # stored running, holder gone
        assert lock_path(db, "S").read_text().strip() == str(first.pid)  # stale, not held
        t = time.monotonic()
        again = subprocess.run(
            _run_argv(db, stub), cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert again.returncode == 0, again.stderr
        assert time.monotonic() - t < 120
    summary = json.loads(again.stdout)
    assert summary["status"] == "done"
    assert summary["skipped_existing"] == stored
    assert len(Store(db).prediction_rows("S")) == len(planned)
    assert Store(db).run_row("S")["status"] == "done"


# --------------------------------------------------------------------------- every kind of run


@pytest.mark.parametrize("kind", ["conditions", "interventions", "probes", "open_run"])
def test_every_run_kind_is_refused_without_a_call_or_a_write(tmp_path, kind):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=4)
    with ModelStub() as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url])
        start = {
            "conditions": lambda: run_conditions(Store(db), "ctl", backend, CONDITIONS, name="S"),
            "interventions": lambda: run_interventions(Store(db), "ctl", backend, name="S"),
            "probes": lambda: run_probes(Store(db), "ctl", backend, name="S", limit=2),
            "open_run": lambda: open_run(Store(db), backend, "S", "ctl"),
        }[kind]
        before = _digest(db)
        with _held_elsewhere(db, "S") as pid:
            with pytest.raises(RunBusyError) as err:
                start()
        assert stub.bodies("/api/chat") == []
    assert err.value.pid == pid and err.value.run_id == "S"
    assert str(err.value).startswith(f"run 'S' is already running in process {pid} ")
    assert "\n" not in str(err.value)
    assert _digest(db) == before
    assert Store(db).run_row("S") is None


def test_cli_run_probes_and_interventions_are_refused_with_one_line(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=4)
    with _held_elsewhere(db, "S") as pid:
        for cmd in ("run-probes", "run-interventions"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "core",
                    cmd,
                    "--db",
                    str(db),
                    "--dataset",
                    "ctl",
                    "--backend",
                    "embedded",
                    "--name",
                    "S",
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 1, done.stderr
            _busy_line(done.stderr, "S", pid)
    assert Store(db).run_row("S") is None


def test_a_single_rerun_call_is_refused_while_the_run_goes_elsewhere(tmp_path):
    db = tmp_path / "store.duckdb"
    ds = _dataset(db, n=2)
    backend = make_backend("embedded")
    open_run(Store(db), backend, "S", "ctl")
    call = plan_conditions(ds.instances[:1], ["oracle"])[0]
    with _held_elsewhere(db, "S") as pid, pytest.raises(RunBusyError) as err:
        rerun_call(Store(db), "S", call, backend)
    assert err.value.pid == pid
    assert Store(db).prediction_rows("S").empty
    assert rerun_call(Store(db), "S", call, backend)["condition"] == "oracle"  # free again


def test_the_runs_page_job_fails_with_the_same_one_line(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=4)
    with _held_elsewhere(db, "S") as pid:
        job = RunJob.start(RunRequest(db=str(db), dataset="ctl", name="S"))
        job.process.wait(timeout=60)
        assert job.status() == "failed" and job.returncode == 1
        line = job.last_line()
    assert line.startswith(f"error: run 'S' is already running in process {pid} "), job.lines
    assert not any("Traceback" in x for x in job.lines)
    assert Store(db).run_row("S") is None


# --------------------------------------------------------------------------- release


def test_the_lock_is_released_when_the_run_ends_done_cancelled_or_failed(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=4)
    reader = make_backend("embedded")
    stop = threading.Event()
    stop.set()  # before the response cache holds any reply (cached calls are not cancelled)
    summary = run_conditions(Store(db), "ctl", reader, CONDITIONS, name="cancel", cancel=stop)
    assert summary.status == "cancelled" and _free(db, "cancel")

    class Interrupted:  # Ctrl+C in the middle of a call (before any reply is cached)
        name, model = "embedded", reader.model

        def describe(self):
            return reader.describe()

        def generate(self, messages, options=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_conditions(Store(db), "ctl", Interrupted(), CONDITIONS, name="failed")
    assert _free(db, "failed")
    summary = run_conditions(Store(db), "ctl", reader, CONDITIONS, name="done")
    assert summary.status == "done" and _free(db, "done")

    with pytest.raises(ValueError, match="no dataset"):
        run_conditions(Store(db), "nope", reader, CONDITIONS, name="bad")
    assert _free(db, "bad")


def test_the_holding_thread_may_take_it_again_another_thread_may_not(tmp_path):
    db = tmp_path / "store.duckdb"
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with hold_run(db, "S"):
                pass
        except RunBusyError as exc:
            errors.append(exc)

    with hold_run(db, "S"):
        with hold_run(db, "S"):
            pass
        assert not _free(db, "S")  # still held after the inner block
        t = threading.Thread(target=other)
        t.start()
        t.join()
        with hold_run(db, "T"):  # another run name is another lock
            pass
    assert len(errors) == 1 and errors[0].pid == os.getpid()
    assert _free(db, "S")


def test_lock_files_stay_beside_the_store_one_per_name(tmp_path):
    db = tmp_path / "store.duckdb"
    names = ["plain", "a/b", "a_b", "../up", "ctl:rerun:embedded:x", "é", "x" * 300]
    paths = [lock_path(db, n) for n in names]
    assert len(set(paths)) == len(names)
    assert all(p.parent == tmp_path / "store.duckdb.locks" for p in paths)
    assert paths[0].name == "plain.lock"
    assert all(len(p.name) < 120 for p in paths)
