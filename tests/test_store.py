from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import duckdb
import pandas as pd
import pytest

from core.store import SCHEMA_VERSION, Store, StoreError
from core.store import schema as store_mod
from core.types import Dataset, Instance, Passage


def _toy(name: str = "toy", n: int = 3, bad_last: bool = False) -> Dataset:
    instances = []
    for i in range(n):
        passages = (
            Passage("p0001", 0, "Alpha", "Alpha scored 84.0 on the test.", "doc_a", "gold", True),
            Passage("p0002", 1, "Beta", "Beta scored 80.3 on the test.", "doc_b", "distractor"),
        )
        if bad_last and i == n - 1:
            # Two passages with the same id violate the passages primary key mid-insert.
            passages = passages + (Passage("p0001", 2, "Dup", "dup", "doc_c"),)
        instances.append(
            Instance(
                instance_id=f"i{i}",
                question=f"What did Alpha score ({i})?",
                gold_answer="None" if i == 0 else "84.0",
                passages=passages,
                answer_aliases=("84",) if i else (),
                answer_type="number",
                reasoning_type="single_hop",
                context_length=12,
                evidence_position="front",
                fan_in=1,
                source="test",
                metadata={"k": i},
            )
        )
    return Dataset(name, "test", "manual", {"n": n}, tuple(instances))


def _snapshot(path) -> dict[str, list]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("datasets", "instances", "passages")
        }
    finally:
        con.close()


def test_new_store_is_migrated_to_current_version(db_path):
    assert Store(db_path).schema_version() == SCHEMA_VERSION == len(store_mod._MIGRATIONS) == 8
    con = duckdb.connect(str(db_path), read_only=True)
    rows = con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    tables = {r[0] for r in rows}
    con.close()
    assert {
        "schema_version",
        "datasets",
        "instances",
        "passages",
        "sub_questions",
        "answerability",
        "runs",
        "predictions",
        "scores",
        "response_cache",
        "judgments",
        "annotation_items",
        "annotations",
    } <= tables


def test_round_trip_keeps_every_field(db_path):
    store = Store(db_path)
    ds = _toy()
    assert store.write_dataset(ds) == 3
    back = store.load_instances("toy")
    assert back == list(ds.instances)
    assert back[0].gold_answer == "None"  # text answers stay text
    frame = store.instances_frame("toy")
    assert list(frame["gold_ids"].map(list)) == [["p0001"]] * 3
    assert store.passages_frame("toy", "i1")["n_tokens"].tolist() == [7, 7]


def test_name_taken_is_an_error_and_replace_swaps_atomically(db_path):
    store = Store(db_path)
    store.write_dataset(_toy(n=2))
    with pytest.raises(StoreError, match="dataset 'toy' already exists"):
        store.write_dataset(_toy(n=5))
    assert store.dataset_summary("toy")["n_instances"] == 2
    store.write_dataset(_toy(n=5), replace=True)
    assert store.dataset_summary("toy")["n_instances"] == 5
    assert len(store.passages_frame("toy")) == 10


def test_failure_on_last_record_leaves_store_exactly_as_before(db_path):
    store = Store(db_path)
    store.write_dataset(_toy("kept"))
    before = _snapshot(db_path)
    with pytest.raises(duckdb.ConstraintException):
        store.write_dataset(_toy("broken", n=4, bad_last=True))
    assert _snapshot(db_path) == before
    # a failing replace keeps the old dataset too
    with pytest.raises(duckdb.ConstraintException):
        store.write_dataset(_toy("kept", n=4, bad_last=True), replace=True)
    assert _snapshot(db_path) == before


def test_content_hash_is_stable_and_content_sensitive(db_path, tmp_path):
    a, b = Store(db_path), Store(tmp_path / "other.duckdb")
    a.write_dataset(_toy())
    b.write_dataset(_toy())
    assert a.content_hash("toy") == b.content_hash("toy")
    b.write_dataset(_toy(n=4), replace=True)
    assert a.content_hash("toy") != b.content_hash("toy")


def test_summary_counts_cells(db_path):
    store = Store(db_path)
    store.write_dataset(_toy())
    s = store.dataset_summary("toy")
    assert s["n_instances"] == 3 and s["n_passages"] == 6 and s["n_gold_passages"] == 3
    assert s["cells"]["reasoning_type"] == {"single_hop": 3}
    assert s["n_cells"] == 1 and s["cell_counts"][0]["n"] == 3
    with pytest.raises(StoreError, match="no dataset named 'nope'"):
        store.dataset_summary("nope")


def test_newer_store_is_refused_with_a_clear_message(db_path):
    Store(db_path).schema_version()
    con = duckdb.connect(str(db_path))
    con.execute("INSERT INTO schema_version (version) VALUES (99)")
    con.close()
    with pytest.raises(StoreError, match="schema version 99 is newer than this program"):
        Store(db_path).list_datasets()


def test_older_store_is_migrated_forward_keeping_data(db_path, monkeypatch):
    store = Store(db_path)
    store.write_dataset(_toy())
    extra = "ALTER TABLE datasets ADD COLUMN notes VARCHAR DEFAULT 'migrated';"
    monkeypatch.setattr(store_mod, "_MIGRATIONS", store_mod._MIGRATIONS + (extra,))
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    assert Store(db_path).schema_version() == SCHEMA_VERSION + 1
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT name, notes FROM datasets").fetchall() == [("toy", "migrated")]
    con.close()


def test_reader_waits_for_a_writer_in_another_process(db_path):
    Store(db_path).write_dataset(_toy())
    holder = textwrap.dedent(
        f"""
        import duckdb, sys, time
        con = duckdb.connect({str(db_path)!r})
        print("locked", flush=True)
        time.sleep(1.5)
        con.close()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        names = Store(db_path, lock_timeout=20).dataset_names()
        waited = time.monotonic() - t0
    finally:
        proc.wait(timeout=20)
    assert names == ["toy"]
    assert waited > 0.5  # it really was locked out, then got in


def test_lock_timeout_names_the_file(db_path):
    Store(db_path).schema_version()
    holder = (
        f"import duckdb, time; c = duckdb.connect({str(db_path)!r}); "
        "print('x', flush=True); time.sleep(3)"
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()
        with pytest.raises(StoreError, match="store is locked by another process"):
            Store(db_path, lock_timeout=0.3).dataset_names()
    finally:
        proc.kill()
        proc.wait()


def test_fetch_frame_gives_the_frame_df_gives():
    """The Arrow fetch behind the analysis frame returns exactly ``.df()``'s frame: text,
    all-NULL text, nullable numbers, booleans, lists (a test that pins the "same frame")."""
    import duckdb
    from pandas.testing import assert_frame_equal

    from core.store.frames import fetch_frame as _fetch_frame

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i, 'r' || (i % 3) AS txt, NULL::VARCHAR AS empty, "
        "CASE WHEN i % 2 = 0 THEN NULL ELSE i END AS n, i % 2 = 0 AS flag, i::INTEGER AS m, "
        "CASE WHEN i % 3 = 0 THEN NULL ELSE i % 2 = 0 END AS maybe, "
        "CASE WHEN i % 4 = 0 THEN NULL ELSE i / 3.0 END AS x, ['p' || i, 'q'] AS ids "
        "FROM range(50) r(i)"
    )
    sql = "SELECT * FROM t WHERE i >= ? ORDER BY i"
    assert_frame_equal(_fetch_frame(con, sql, [5]), con.execute(sql, [5]).df())


def _gold_counts(db) -> dict[str, int]:
    """Gold passages per instance, counted from the passages (the reference)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT instance_id, count(*) FILTER (WHERE is_gold) FROM passages GROUP BY ALL"
        ).fetchall()
    return {iid: int(n) for iid, n in rows}


def test_n_gold_is_kept_with_each_instance_and_counted_for_older_stores(db_path):
    """Schema 6 keeps each instance's gold-passage count (the analysis frame's ``n_gold``,
    which decides oracle applicability) instead of counting the passages on every read: a new
    dataset writes it, the migration counts it, and an older store opened read-only (never
    migrated) gives the same frame by counting."""
    from core.backends import make_backend
    from core.datasets.controlled import build_controlled
    from core.execution.runs import run_conditions

    store = Store(db_path)
    ds = build_controlled("controlled-200", seed=42, limit=6)
    store.write_dataset(Dataset("ctl", ds.source, ds.builder, {}, ds.instances))
    run_conditions(store, "ctl", make_backend("embedded"), ("no_evidence", "oracle"), name="r")
    want = _gold_counts(db_path)
    assert len(want) == 6 and min(want.values()) >= 1
    with duckdb.connect(str(db_path), read_only=True) as con:
        kept = dict(con.execute("SELECT instance_id, n_gold FROM instances").fetchall())
    assert kept == want
    frame = store.analysis_frame(["r"])
    assert len(frame) == 12
    assert dict(zip(frame["instance_id"], frame["n_gold"], strict=True)) == want

    # the store as schema 5 left it, with the first instance's gold passages taken away
    first = sorted(want)[0]
    with duckdb.connect(str(db_path)) as con:
        con.execute("ALTER TABLE instances DROP COLUMN n_gold")
        con.execute("DELETE FROM schema_version WHERE version >= 6")
        con.execute("UPDATE passages SET is_gold = false WHERE instance_id = ?", [first])
    want[first] = 0
    old = store.analysis_frame(["r"])  # read-only: not migrated, counted from the passages
    assert store.schema_version() == SCHEMA_VERSION  # a read-write open migrates
    with duckdb.connect(str(db_path), read_only=True) as con:
        kept = dict(con.execute("SELECT instance_id, n_gold FROM instances").fetchall())
    assert kept == want and dict(zip(old["instance_id"], old["n_gold"], strict=True)) == want
    pd.testing.assert_frame_equal(store.analysis_frame(["r"]), old)
