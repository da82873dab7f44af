"""Truthful run states and errors that are not answers (issue 15, items 2-4).

A dead server used to look like a finished run: every call stored as an error *and* a parse
error, scored 0 with failure label ``parse``, the run ``done`` and drawn in ONCU. Now a failed
call is an error only (no parse error, NULL scores, no failure label), a run ends ``done``,
``partial`` (some calls failed) or ``failed`` (every call failed), a run whose process is gone
shows ``interrupted``, and each run has a kind; the condition views list four-condition runs
only. The runs call the real ``ollama`` client against the stub server or a closed port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import ROOT
from model_stub import ModelStub

from core.backends import make_backend
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions, run_interventions, run_probes
from core.selection import Selection
from core.store import SCHEMA_VERSION, SCORE_COLUMNS, Store
from core.store import schema as store_mod
from core.store.connection import in_transaction
from core.views.catalog import get_figure
from core.views.common import condition_runs, error_digest, error_pattern
from core.views.oncu import plain_predictions

N = 4  # instances: 16 calls over the four conditions


def _dataset(db: Path, n: int = N) -> None:
    ds = build_controlled("controlled-200", seed=42, limit=n)
    Store(db).write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_argv(db: Path, host: str, name: str = "S") -> list[str]:
    return [
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
        host,
        "--concurrency",
        "1",
        "--name",
        name,
    ]


def _scored(db: Path, run: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT p.error, p.parse_error, p.answer, s.* FROM predictions p JOIN scores s "
            "USING (run_id, instance_id, condition, variant) WHERE run_id = ?",
            [run],
        ).df()


# --------------------------------------------------------------------------- dead server
def test_a_run_against_a_closed_port_fails_with_errors_that_are_not_answers(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db)
    done = _cli(*_run_argv(db, f"http://127.0.0.1:{_closed_port()}"), "--json")
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "failed"
    assert (summary["errors"], summary["parse_errors"]) == (16, 0)
    assert "Traceback" not in done.stderr
    run = Store(db).run_row("S")
    assert (run["status"], run["kind"], run["n_done"], run["n_errors"]) == (
        "failed",
        "conditions",
        16,
        16,
    )
    rows = _scored(db, "S")
    assert len(rows) == 16
    assert rows["error"].str.contains("cannot reach Ollama").all()
    assert rows["parse_error"].isna().all()  # an error, never also a parse error
    assert rows["answer"].isna().all()
    assert rows[[c for c in SCORE_COLUMNS]].isna().all().all()  # no scores, no labels
    # the report says so, with the error grouped without its varying numbers
    rep = _cli("report", "runs", "--db", str(db), "--json")
    assert rep.returncode == 0, rep.stderr
    [row] = json.loads(rep.stdout)
    assert (row["status"], row["n_errors"], row["top_error_count"]) == ("failed", 16, 16)
    assert "cannot reach Ollama" in row["top_error"]
    text = _cli("report", "runs", "--db", str(db)).stdout
    assert "failed" in text and "cannot reach Ollama" in text
    # and a failed run shows no ONCU: its predictions are missing, not wrong
    df = plain_predictions(Store(db), Selection(dataset="ctl"))
    assert len(df) == 16 and df["f1_relaxed"].isna().all()
    assert df["failure_label"].isna().all()


def test_a_server_failing_half_of_the_calls_gives_a_partial_run(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db)
    with ModelStub() as stub:
        stub.queue_modes(*(["500", "ok"] * 8))
        done = _cli(*_run_argv(db, stub.url), "--json")
    assert done.returncode == 0, done.stderr  # some answers: the command succeeded
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["errors"], summary["executed"]) == ("partial", 8, 16)
    assert "8 of 16 calls failed" in done.stderr
    run = Store(db).run_row("S")
    assert (run["status"], run["n_done"], run["n_errors"]) == ("partial", 16, 8)
    [row] = json.loads(_cli("report", "runs", "--db", str(db), "--json").stdout)
    assert (row["status"], row["n_errors"]) == ("partial", 8)
    digest = error_digest(Store(db), ["S"])
    assert (digest["errors"], digest["calls"], digest["top_n"]) == (8, 16, 8)
    rows = _scored(db, "S")
    failed = rows[rows["error"].notna()]
    assert len(failed) == 8 and failed["parse_error"].isna().all()
    assert failed["em_strict"].isna().all() and failed["failure_label"].isna().all()
    answered = rows[rows["error"].isna()]
    assert answered["em_strict"].notna().all()
    # resuming with a healthy server makes exactly the failed calls again: done
    with ModelStub() as stub:
        again = _cli(*_run_argv(db, stub.url), "--json")
        assert len(stub.bodies("/api/chat")) == 8
    assert json.loads(again.stdout)["status"] == "done"
    assert Store(db).run_row("S")["n_errors"] == 0


def test_error_patterns_group_messages_that_differ_in_numbers():
    a = "cannot reach Ollama at http://127.0.0.1:40123 (connection refused)"
    b = "cannot reach Ollama at http://127.0.0.1:40999 (connection refused)"
    assert (
        error_pattern(a)
        == error_pattern(b)
        == ("cannot reach Ollama at http://#.#:# (connection refused)")
    )
    assert error_pattern("prompt too long: at least 36000 tokens") == (
        "prompt too long: at least # tokens"
    )


# --------------------------------------------------------------------------- interrupted
def test_a_killed_run_shows_interrupted_and_resumes(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=20)
    with ModelStub(latency_s=0.05) as stub:
        first = subprocess.Popen(
            [sys.executable, "-m", "core", *_run_argv(db, stub.url)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while len(Store(db).prediction_keys("S")) < 5:
                assert first.poll() is None, first.stderr.read()
                assert time.monotonic() < deadline, "no call was stored"
                time.sleep(0.05)
            run = Store(db).run_row("S")
            assert run["status"] == "running" and run["pid"] == first.pid
            assert run["heartbeat_at"] is not None
            os.kill(first.pid, signal.SIGKILL)
        finally:
            first.wait(timeout=30)
        run = Store(db).run_row("S")
        assert run["status"] == "interrupted"  # stored running, its process gone
        frame = Store(db).runs_frame()
        assert frame.set_index("run_id").loc["S", "status"] == "interrupted"
        again = _cli(*_run_argv(db, stub.url), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "done"
    assert Store(db).run_row("S")["status"] == "done"


# --------------------------------------------------------------------------- kinds
def test_runs_have_kinds_and_condition_views_show_four_condition_runs_only(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db)
    store = Store(db)
    reader = make_backend("embedded")
    run_conditions(
        store, "ctl", reader, ("no_evidence", "full_context", "retrieved", "oracle"), name="four"
    )
    run_interventions(store, "ctl", reader, name="cuer")
    run_probes(store, "ctl", reader, name="probes", limit=2)
    kinds = store.runs_frame().set_index("run_id")["kind"].to_dict()
    assert kinds == {"four": "conditions", "cuer": "interventions", "probes": "probes"}
    sel = Selection(dataset="ctl")
    assert condition_runs(store, sel) == ("four",)
    assert set(plain_predictions(store, sel)["run"]) == {"four"}
    _, data = get_figure("condition_matrix").build(store, sel)
    assert set(data["run"]) == {"four"}
    # chosen explicitly, an intervention run is still not drawn as a model
    assert condition_runs(store, Selection(dataset="ctl", runs=("cuer", "four"))) == ("four",)
    # a name of one kind cannot be reused for another
    with pytest.raises(ValueError, match="another kind"):
        run_probes(store, "ctl", reader, name="four", limit=1)


# --------------------------------------------------------------------------- migration
def test_a_version_2_store_is_migrated_to_errors_that_are_not_answers(tmp_path):
    db = tmp_path / "store.duckdb"
    _dataset(db, n=1)
    with ModelStub() as stub:
        stub.queue_modes("500")
        run_conditions(
            Store(db),
            "ctl",
            make_backend("ollama", "stub-model", hosts=[stub.url]),
            ("no_evidence", "oracle"),
            name="old",
        )
    # rewrite the run as version 2 stored it: error + parse error, scored 0, label parse, done
    with duckdb.connect(str(db)) as con, in_transaction(con):
        con.execute("UPDATE predictions SET parse_error = 'empty reply' WHERE error IS NOT NULL")
        con.execute(
            "UPDATE scores SET em_strict = 0, f1_relaxed = 0, failure_label = 'parse' "
            "FROM predictions p WHERE p.error IS NOT NULL AND p.run_id = scores.run_id "
            "AND p.instance_id = scores.instance_id AND p.condition = scores.condition"
        )
        con.execute("UPDATE runs SET status = 'done'")
        for col in ("kind", "pid", "host", "heartbeat_at", "n_errors"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {col}")
        con.execute("DELETE FROM schema_version WHERE version >= 3")
        for table in ("judgments", "annotations", "annotation_items"):  # migrations 4 and 5
            con.execute(f"DROP TABLE {table}")
        con.execute("ALTER TABLE instances DROP COLUMN n_gold")  # migration 6
    store = Store(db)
    assert store.schema_version() == SCHEMA_VERSION == len(store_mod._MIGRATIONS)
    run = store.run_row("old")
    assert (run["status"], run["kind"], run["n_errors"]) == ("partial", "conditions", 1)
    rows = _scored(db, "old")
    failed, answered = rows[rows["error"].notna()], rows[rows["error"].isna()]
    assert len(failed) == len(answered) == 1
    assert failed[["parse_error", "em_strict", "f1_relaxed", "failure_label"]].isna().all().all()
    assert answered["em_strict"].notna().all()  # the answered call keeps its scores


def test_condition_means_and_failure_labels_count_failed_calls_as_missing():
    from core.oncu.metrics import failure_breakdown, sample_level_means

    # one run, one condition: an answer (1.0), a parse error (0.0, stays), a failed call (NaN)
    df = pd.DataFrame(
        {
            "run": ["r"] * 3,
            "model": ["m"] * 3,
            "dataset": ["d"] * 3,
            "condition": ["oracle"] * 3,
            "f1_relaxed": [1.0, 0.0, float("nan")],
            "parse_error": [None, "no JSON object found", None],
            "error": [None, None, "cannot reach Ollama at http://127.0.0.1:1"],
            "failure_label": ["success", "parse", None],
        }
    )
    row = sample_level_means(df).iloc[0]
    assert (row["n"], row["missing"], row["n_parse_error"]) == (3, 1, 1)
    assert row["f1_relaxed"] == 0.5  # (1 + 0) / 2: the failed call is not a 0
    fail = failure_breakdown(df).iloc[0]
    assert (fail["n"], fail["missing"]) == (2, 1)
    assert (fail["success"], fail["parse"]) == (50.0, 50.0)
