"""The store's data version (issue 17 item 6): what the dashboard's caches are keyed by.

Every write that changes what a page reads bumps counters in its own transaction (the whole
store's and the datasets it touches); writes nothing reads (the response cache, run lock
files) and reads do not; a run in progress invalidates the views of its dataset batch by batch
and leaves the other datasets' alone.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from core import views
from core.backends import make_backend
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions
from core.selection import Selection
from core.store import Store
from core.types import Dataset, Instance, Passage
from core.views.common import clear_cache


def _dataset(name: str, n: int = 2) -> Dataset:
    instances = tuple(
        Instance(
            instance_id=f"i{i}",
            question=f"What did Alpha score ({i})?",
            gold_answer="84.0",
            passages=(Passage("p0001", 0, "Alpha", "Alpha scored 84.0.", "doc_a", "gold", True),),
        )
        for i in range(n)
    )
    return Dataset(name, "test", "test", {}, instances)


def _prediction(run: str, iid: str = "i0") -> dict:
    return {
        "run_id": run,
        "instance_id": iid,
        "condition": "oracle",
        "variant": "",
        "answer": "84.0",
        "cited_ids": ["p0001"],
    }


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "dv.duckdb")
    store.write_dataset(_dataset("A"))
    store.write_dataset(_dataset("B"))
    store.save_run({"run_id": "ra", "dataset_id": "A", "status": "running", "kind": "conditions"})
    store.save_run({"run_id": "rb", "dataset_id": "B", "status": "running", "kind": "conditions"})
    return store


def _versions(store: Store) -> tuple[tuple[int, ...], ...]:
    return store.data_version(), store.data_version("A"), store.data_version("B")


def test_every_write_path_bumps_the_whole_store_and_its_dataset(tmp_path):
    store = _store(tmp_path)

    def check(write, touched: set[str]) -> None:
        before = _versions(store)
        write()
        after = _versions(store)
        assert after[0][1] > before[0][1], write  # the whole store's counter: every change
        assert after[0][0] == before[0][0] != 0  # the store id never changes
        for i, name in ((1, "A"), (2, "B")):
            assert (after[i][1] > before[i][1]) == (name in touched), (write, name)

    def in_tx(fn):
        def run() -> None:
            with store.transaction() as con:
                fn(con)

        return run

    check(
        lambda: store.write_dataset(_dataset("A", 3), replace=True, with_runs="keep-orphans"), {"A"}
    )
    check(in_tx(lambda con: store.write_predictions(con, [_prediction("ra")], replace=True)), {"A"})
    check(
        in_tx(
            lambda con: store.write_predictions(
                con, pd.DataFrame([_prediction("rb")]), replace=True
            )
        ),
        {"B"},
    )
    check(in_tx(lambda con: store.delete_scores(con, ["ra"])), {"A"})  # the re-score path
    check(
        in_tx(
            lambda con: store.write_scores(
                con,
                pd.DataFrame(
                    [
                        {
                            "run_id": "rb",
                            "instance_id": "i0",
                            "condition": "oracle",
                            "variant": "",
                            "em_strict": 1.0,
                        }
                    ]
                ),
                replace=True,
            )
        ),
        {"B"},
    )
    check(in_tx(lambda con: store.record_progress(con, "ra", 0.1, 0.2)), {"A"})
    check(lambda: store.finish_run("ra", "done"), {"A"})
    check(lambda: store.save_run({"run_id": "rb", "notes": "x"}), {"B"})
    check(lambda: store.save_run({"run_id": "rc", "dataset_id": "B"}), {"B"})  # a new run
    check(in_tx(lambda con: store.delete_run_results(con, ["rb"])), {"B"})
    check(lambda: store.delete_run("rc"), {"B"})
    check(
        lambda: store.write_crux_judgments(
            "A",
            pd.DataFrame([{"instance_id": "i0", "sq_id": "q1", "text": "?"}]),
            pd.DataFrame(
                [
                    {
                        "instance_id": "i0",
                        "sq_id": "q1",
                        "passage_id": "p0001",
                        "rating": 4,
                        "judge": "j",
                    }
                ]
            ),
        ),
        {"A"},
    )
    check(lambda: store.write_dataset(_dataset("C")), set())
    check(lambda: store.delete_dataset("B"), {"B"})


def test_a_run_moved_to_another_dataset_bumps_both(tmp_path):
    store = _store(tmp_path)
    before = _versions(store)
    with store.transaction() as con:
        store.insert_run(con, {"run_id": "ra", "dataset_id": "B"})
    after = _versions(store)
    assert after[1][1] == before[1][1] + 1 and after[2][1] == before[2][1] + 1


def test_writes_nothing_reads_and_reads_leave_the_version(tmp_path):
    store = _store(tmp_path)
    before = _versions(store)
    with store.transaction() as con:
        row = {
            "cache_key": "k",
            "backend": "b",
            "model": "m",
            "options_hash": "o",
            "prompt_hash": "p",
            "response": "r",
        }
        store.write_cache(con, [row])
    with store.run_lock("ra"):  # the lock file beside the store
        pass
    store.runs_frame()
    store.analysis_frame(["ra", "rb"])
    store.list_datasets()
    assert _versions(store) == before


def test_a_selection_with_runs_of_another_dataset_follows_their_dataset(tmp_path):
    store = _store(tmp_path)
    sel = Selection(dataset="A", runs=("ra", "rb"))
    before = views.store_version(store, sel)
    assert len(before) == 4  # store id, A, and one counter per run: A's and B's
    with store.transaction() as con:
        store.write_predictions(con, [_prediction("rb", "i1")], replace=True)
    after = views.store_version(store, sel)
    assert after[1] == before[1] and after[3] == before[3] + 1
    assert views.store_version(store, Selection(dataset="A")) == before[:2]


def test_an_old_store_without_the_table_reads_zero_and_gets_it_on_its_first_write(tmp_path):
    store = _store(tmp_path)
    with duckdb.connect(str(store.path)) as con:
        con.execute("DROP TABLE data_version")
    assert store.data_version() == (0, 0)
    assert not store.runs_frame().empty  # still readable
    store.save_run({"run_id": "ra", "notes": "written"})
    version = store.data_version("A")
    assert version[0] != 0 and version[1] == 1


def test_a_store_made_again_at_the_same_path_gets_another_id(tmp_path):
    store = _store(tmp_path)
    first = store.data_version()
    store.path.unlink()
    again = _store(tmp_path)
    second = again.data_version()
    assert second[1] == first[1]  # the same writes: the same count ...
    assert second[0] != first[0]  # ... but another store, so cached pages are not reused


def test_the_view_cache_is_used_until_a_write_changes_what_it_reads(tmp_path):
    store = _store(tmp_path)
    clear_cache()
    builds: list[int] = []
    sel = Selection(dataset="A")

    def view() -> int:
        return views.cached(
            store, "test-view", "k", lambda: builds.append(1) or len(builds), selection=sel
        )

    assert (view(), view()) == (1, 1) and len(builds) == 1  # the second call is cached
    with store.transaction() as con:  # another dataset's run writes: A's views are kept
        store.write_predictions(con, [_prediction("rb")], replace=True)
    assert view() == 1 and len(builds) == 1
    with store.transaction() as con:  # A's run writes: rebuilt
        store.write_predictions(con, [_prediction("ra")], replace=True)
    assert view() == 2 and len(builds) == 2
    # keyed by the whole store (no selection): any write rebuilds
    whole = views.cached(store, "test-whole", "k", lambda: "x")
    assert whole == "x"
    store.save_run({"run_id": "rb", "notes": "n"})
    assert views.cached(store, "test-whole", "k", lambda: "y") == "y"


def test_a_running_job_invalidates_its_datasets_views_batch_by_batch(tmp_path):
    store = Store(tmp_path / "job.duckdb")
    ds = build_controlled("controlled-200", seed=42, limit=6)
    store.write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))
    store.write_dataset(_dataset("other"))
    clear_cache()
    builds: list[int] = []
    seen: list[tuple[int, ...]] = []
    other: list[tuple[int, ...]] = []

    def progress(_p) -> None:  # the engine calls it after each committed write batch
        seen.append(store.data_version("ctl"))
        other.append(store.data_version("other"))
        views.cached(
            store, "job-view", "k", lambda: builds.append(1), selection=Selection(dataset="ctl")
        )

    run_conditions(
        store,
        "ctl",
        make_backend("embedded"),
        ("no_evidence", "oracle"),
        name="job",
        progress=progress,
    )
    assert len(seen) >= 2, "the run wrote in one batch: nothing to check"
    assert len(set(seen)) == len(seen)  # every batch changed the version ...
    assert len(builds) == len(seen)  # ... and rebuilt the view
    assert len(set(other)) == 1  # the other dataset's views were kept


def test_the_next_page_run_shows_a_write_made_between_two_runs(tmp_path, monkeypatch):
    """The dashboard reads the data version once per page run (screens.parts.common._version), and
    every new run reads it again: a write by another process shows on the next rerun."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    store = _store(tmp_path)
    monkeypatch.setenv("EVIDENCE_DB", str(store.path))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label: m.value for m in at.metric}["Predictions"] == "0"
    other = Store(store.path)
    with other.transaction() as con:
        other.write_predictions(con, [_prediction("ra"), _prediction("ra", "i1")], replace=True)
    at.run()
    assert {m.label: m.value for m in at.metric}["Predictions"] == "2"


def test_two_threads_missing_one_entry_build_it_once(tmp_path):
    """The second thread waits for the first one's build and reads its value; a failed build
    stores nothing, and the next caller builds again."""
    import threading
    import time

    from core.views.common import cached

    store = Store(tmp_path / "s.duckdb")
    clear_cache()
    builds: list[int] = []

    def build():
        builds.append(1)
        time.sleep(0.3)
        return object()

    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(cached(store, "t", "k", build)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and got[0] is got[1]

    def fail():
        raise ValueError("no")

    for _ in range(2):
        try:
            cached(store, "t", "bad", fail)
        except ValueError:
            pass
    assert cached(store, "t", "bad", lambda: 5) == 5
