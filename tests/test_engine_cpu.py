"""The engine's writes cost what they must (issue 17 items 8 and 10): one data-version bump a batch.

Each engine batch is one transaction writing predictions, cache entries, scores and the run's
progress. The data version (what the dashboard's caches are keyed by) must change in that
transaction, but once is enough: each bump is a statement of ~4 ms, and a batch used to make
three. These tests count the bumps of real engine writes through the store's counters.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from core.backends import EmbeddedReader
from core.datasets.controlled import build_controlled
from core.execution.engine import execute, rerun_call
from core.execution.runs import RunSpec, start_run
from core.oncu.conditions import plan_conditions
from core.store import Store
from core.types import Dataset


def _store(tmp_path: Path) -> tuple[Store, Dataset]:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    ds = Dataset("small", full.source, full.builder, full.builder_params, full.instances[:2])
    store = Store(tmp_path / "cpu.duckdb")
    store.write_dataset(ds)
    return store, ds


def _prediction(run: str) -> dict:
    return {
        "run_id": run,
        "instance_id": "x",
        "condition": "oracle",
        "variant": "",
        "answer": "a",
        "cited_ids": [],
    }


def test_writes_without_bump_leave_the_data_version_and_with_it_bump_once(tmp_path):
    store, _ = _store(tmp_path)
    store.save_run(
        {"run_id": "r", "dataset_id": "small", "status": "running", "kind": "conditions"}
    )
    key = {"run_id": "r", "instance_id": "x", "condition": "oracle", "variant": ""}
    before = store.data_version("small")
    with store.transaction() as con:
        store.write_predictions(con, [_prediction("r")], replace=False, bump=False)
        store.write_scores(
            con, pd.DataFrame([{**key, "em_strict": 1.0}]), replace=False, bump=False
        )
    assert store.data_version("small") == before  # the caller bumps (or not): not these
    assert len(store.prediction_rows("r")) == 1
    with store.transaction() as con:
        store.write_predictions(con, [_prediction("r")], replace=True)
    after = store.data_version("small")
    assert after[1] == before[1] + 1  # the default still bumps, once


def test_a_case_view_rerun_is_one_transaction_with_one_bump(tmp_path):
    store, ds = _store(tmp_path)
    reader = EmbeddedReader(workers=False)
    spec = RunSpec("emb", "small", reader.name, reader.model, {}, {}, ("oracle",))
    start_run(store, spec, reader)
    call = plan_conditions(ds.instances[:1], ["oracle"])[0]
    before = store.data_version("small")[1], store.data_version()[1]
    row = rerun_call(store, "emb", call, reader)
    after = store.data_version("small")[1], store.data_version()[1]
    assert row["error"] is None and row["em_strict"] is not None  # stored and scored
    # predictions and scores in one transaction: the dataset's and the store's counters move
    # by exactly one (two bumps before: one with the predictions, one with the scores).
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def test_an_execution_bumps_once_per_committed_batch(tmp_path):
    store, ds = _store(tmp_path)
    reader = EmbeddedReader(workers=False)
    conds = ("no_evidence", "full_context", "oracle")
    start_run(store, RunSpec("run", "small", reader.name, reader.model, {}, {}, conds), reader)
    calls = plan_conditions(ds.instances, conds)
    before = store.data_version("small")[1]
    reports = []  # one at the start, then one after each committed batch
    summary = execute(store, "run", calls, reader, progress=reports.append)
    assert (summary.executed, summary.status) == (len(calls), "done")
    batches = len(reports) - 1
    assert batches >= 1 and reports[-1].done == len(calls)
    # One bump a batch (3 before); the run's final status may come in a write of its own
    # when every row was committed already (no progress report for that one).
    bumps = store.data_version("small")[1] - before
    assert batches <= bumps <= batches + 1, (bumps, batches)
    assert len(store.prediction_rows("run")) == len(calls)
