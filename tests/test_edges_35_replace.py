"""Issue 35, Why 1: results are never silently re-based on a replaced dataset.

``import dataset --replace`` on a dataset with runs succeeded silently and the next ``score``
graded the old predictions against the new gold (a run's relaxed F1 went 0.168 -> 0.124);
during a running run the run ended ``done`` with predictions of instances the dataset no
longer had. Now such a replace is refused unless ``--with-runs drop|keep-orphans`` says what
becomes of the runs (and always while one is running); every run records its dataset's
fingerprint, and ``score`` lists the runs whose dataset changed since they ran.
"""

from __future__ import annotations

import dataclasses
import json

import duckdb
import pytest

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions
from core.store import SCHEMA_VERSION, Store, StoreError

N = 4


def _dataset(gold_suffix: str = ""):
    ds = build_controlled("controlled-200", limit=N, name="ds")
    if not gold_suffix:
        return ds
    gold = ds.instances[0].gold_answer + gold_suffix
    first = dataclasses.replace(ds.instances[0], gold_answer=gold)
    return dataclasses.replace(ds, instances=(first, *ds.instances[1:]))


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(_dataset())
    run_conditions(store, "ds", EmbeddedReader(workers=False), ("oracle",), name="r")
    return store


def _digest(store: Store) -> list:
    with store.connect(read_only=True) as con:
        return [
            con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("datasets", "instances", "runs", "predictions", "scores")
        ]


def test_replace_of_a_dataset_with_runs_is_refused_and_writes_nothing(store):
    before = _digest(store)
    with pytest.raises(StoreError, match=r"has 1 run\(s\) \(r\).*--with-runs drop"):
        store.write_dataset(_dataset(" changed"), replace=True)
    assert _digest(store) == before
    assert store.changed_runs() == []


def test_cli_replace_refused_one_line_exit_1(store, tmp_path, capsys):
    path = tmp_path / "ds.jsonl"
    record = {
        "id": "q1",
        "question": "Who?",
        "answer": "A",
        "passages": [{"id": "p1", "text": "A is here."}],
    }
    path.write_text(json.dumps(record) + "\n")
    before = _digest(store)
    code = main(
        [
            "import",
            "dataset",
            "--format",
            "jsonl",
            str(path),
            "--name",
            "ds",
            "--replace",
            "--db",
            str(store.path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "--with-runs" in err and "nothing written" in err
    assert _digest(store) == before


def test_with_runs_drop_deletes_the_runs(store):
    store.write_dataset(_dataset(" changed"), replace=True, with_runs="drop")
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 0
        assert con.execute("SELECT count(*) FROM predictions").fetchall()[0][0] == 0
        assert con.execute("SELECT count(*) FROM scores").fetchall()[0][0] == 0
    assert store.changed_runs() == []


def test_keep_orphans_is_listed_by_score(store, capsys):
    store.write_dataset(_dataset(" changed"), replace=True, with_runs="keep-orphans")
    assert store.changed_runs() == [
        {"run_id": "r", "dataset_id": "ds", "why": "its dataset changed since it ran"}
    ]
    assert main(["score", "--run", "r", "--db", str(store.path)]) == 0
    err = capsys.readouterr().err
    assert "warning: run 'r': its dataset changed since it ran (dataset 'ds')" in err


def test_same_content_replaced_is_not_a_change(store):
    store.write_dataset(_dataset(), replace=True, with_runs="keep-orphans")
    assert store.changed_runs() == []


def test_replace_refused_while_a_run_is_running(store):
    before = _digest(store)
    with store.run_lock("r"):
        store.save_run({"run_id": "r", "status": "running"})
        running = _digest(store)
        for how in (None, "drop", "keep-orphans"):
            with pytest.raises(StoreError, match="has a run in progress"):
                store.write_dataset(_dataset(" changed"), replace=True, with_runs=how)
        assert _digest(store) == running
    assert before != running  # the status changed, nothing else


def test_dataset_gone_is_listed(store):
    store.delete_dataset("ds")
    assert store.changed_runs() == [
        {"run_id": "r", "dataset_id": "ds", "why": "its dataset is gone"}
    ]


def test_migration_7_fingerprints_stored_datasets_and_their_runs(store):
    """A schema-6 store: its datasets get their fingerprint, its runs the same one."""
    fingerprint = store.run_row("r")["dataset_fingerprint"]
    assert fingerprint and fingerprint.count("/") == 1
    with duckdb.connect(str(store.path)) as con:
        con.execute("ALTER TABLE datasets DROP COLUMN fingerprint")
        con.execute("ALTER TABLE runs DROP COLUMN dataset_fingerprint")
        con.execute("DELETE FROM schema_version WHERE version >= 7")
    assert Store(store.path).schema_version() == SCHEMA_VERSION == 8
    assert store.run_row("r")["dataset_fingerprint"] == fingerprint
    assert store.changed_runs() == []


def test_a_run_on_a_replaced_dataset_is_not_resumed(store):
    store.write_dataset(_dataset(" changed"), replace=True, with_runs="keep-orphans")
    before = _digest(store)
    with pytest.raises(ValueError, match="before it was replaced"):
        run_conditions(store, "ds", EmbeddedReader(workers=False), ("oracle",), name="r")
    assert _digest(store) == before
