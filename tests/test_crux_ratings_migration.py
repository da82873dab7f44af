"""CRUX ratings in one table (issue 37 item 2): a store of schema 7 keeps every rating.

Before schema 8 the ratings were rows of the ``answerability`` table: ``judge crux``'s and
``import crux``'s, and a copy of each ``crux-answerability`` judge run's judgments. Migration 8
keeps the judgments, drops the copies, turns every other rating into a judgment of a judge run
named after its judge, and makes ``answerability`` a view of the judgments; the CRUX readers
(:meth:`core.store.Store.crux_judgments`, the report) see every rating they saw before.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from core.crux.metrics import crux_report
from core.judges.runs import make_judge, run_judge
from core.store import SCHEMA_VERSION, Store
from core.store.schema import _MIGRATIONS
from core.types import Dataset, Instance, Passage

_OLD_TABLE = """
    CREATE TABLE answerability (
        dataset_id VARCHAR NOT NULL, instance_id VARCHAR NOT NULL, sq_id VARCHAR NOT NULL,
        passage_id VARCHAR NOT NULL, rating INTEGER, judge VARCHAR,
        PRIMARY KEY (dataset_id, instance_id, sq_id, passage_id, judge)
    )
"""


def _dataset(name: str) -> Dataset:
    texts = (
        "alpha beta gamma delta one two",
        "alpha beta gamma delta three four",
        "epsilon zeta eta theta five six",
    )
    passages = tuple(
        Passage(f"p{i + 1:04d}", i, "T", t, f"d{i}", "gold" if i < 2 else "filler", i < 2)
        for i, t in enumerate(texts)
    )
    inst = Instance("q1", "What is alpha beta?", "x", passages=passages, fan_in=2)
    return Dataset(name, "test", "test", {}, (inst,))


def _schema_7_store(path) -> tuple[Store, set[tuple]]:
    """A store as schema 7 left it; every rating its ``answerability`` table held."""
    store = Store(path)
    for ds in ("tiny", "other"):
        store.write_dataset(_dataset(ds))
        sq = pd.DataFrame(
            {
                "instance_id": ["q1", "q1"],
                "sq_id": ["s1", "s2"],
                "text": ["what alpha?", "what epsilon?"],
            }
        )
        store.write_crux_judgments(ds, sq, pd.DataFrame())
    run_judge(
        store,
        "crux-answerability",
        make_judge("embedded"),
        name="jr",
        dataset="tiny",
        passages="all",
    )
    mirrored = store.crux_judgments("tiny")[1]  # the judge run's ratings, as mirrored
    assert len(mirrored) == 6
    legacy = [  # judge crux, import crux; a judge rating two datasets; a name a run has
        ("tiny", "q1", "s1", "p0001", 4, "ollama:m|crux-v1"),
        ("tiny", "q1", "s2", "p0003", 2, "ollama:m|crux-v1"),
        ("tiny", "q1", "s1", "p0002", 5, "imported"),
        ("other", "q1", "s1", "p0001", 3, "imported"),
        ("tiny", "q1", "s9", "p0001", 1, "jr"),  # not one of jr's judgments: kept apart
    ]
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW answerability")
    con.execute(_OLD_TABLE)
    con.executemany(
        "INSERT INTO answerability VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("tiny", r.instance_id, r.sq_id, r.passage_id, int(r.rating), r.judge)
            for r in mirrored.itertuples(index=False)
        ]
        + legacy,
    )
    con.execute("DELETE FROM schema_version WHERE version > 7")
    rows = con.execute("SELECT * FROM answerability").fetchall()
    con.close()
    return store, {tuple(r) for r in rows}


def test_a_schema_7_store_migrates_and_keeps_every_crux_rating(db_path):
    assert SCHEMA_VERSION == len(_MIGRATIONS) == 8
    store, before = _schema_7_store(db_path)
    store = Store(db_path)  # its first open migrates
    assert store.schema_version() == 8
    after = set()
    for ds in ("tiny", "other"):
        ratings = store.crux_judgments(ds)[1]
        after |= {(ds, *r) for r in ratings.itertuples(index=False)}
    expected = set()
    for ds, iid, sq, pid, rating, judge in before:
        if judge == "imported":  # one judge name, two datasets: one judge run each
            judge = f"imported@{ds}"
        elif judge == "jr" and sq == "s9":
            judge = "jr@tiny"  # the name is the judge run's
        expected.add((ds, iid, sq, pid, rating, judge))
    assert after == expected and len(after) == len(before) == 11
    assert store.crux_judges("tiny") == sorted(
        ["imported@tiny", "jr", "jr@tiny", "ollama:m|crux-v1"]
    )
    judged = store.judgments_frame(rubric="crux-answerability")
    assert len(judged) == 11 and set(judged["run_id"]) == {
        "jr",
        "jr@tiny",
        "imported@tiny",
        "imported@other",
        "ollama:m|crux-v1",
    }
    for run in ("ollama:m|crux-v1", "imported@other"):
        row = store.run_row(run)
        assert row["kind"] == "judge" and row["status"] == "done"
    # The report uses a migrated judge's ratings as it used them before.
    res = crux_report(
        store,
        "tiny",
        ["oracle"],
        [1, 3],
        chunk_size=10,
        overlap=0,
        n_resamples=50,
        judge="ollama:m|crux-v1",
    )
    assert res.answerability_source == "judge:ollama:m|crux-v1"
    # A second open changes nothing; deleting a dataset deletes its ratings.
    assert len(Store(db_path).crux_judgments("tiny")[1]) == 10
    store.delete_dataset("other")
    assert store.crux_judgments("other")[1].empty
    assert len(store.crux_judgments("tiny")[1]) == 10


def test_import_crux_ratings_are_judgments_of_a_judge_run_named_after_the_judge(db_path):
    store = Store(db_path)
    store.write_dataset(_dataset("tiny"))
    sq = pd.DataFrame({"instance_id": ["q1"], "sq_id": ["s1"], "text": ["what alpha?"]})
    ratings = pd.DataFrame(
        {
            "instance_id": ["q1"] * 2,
            "sq_id": ["s1"] * 2,
            "passage_id": ["p0001", "p0002"],
            "rating": [5, 0],
            "judge": ["crux-released"] * 2,
        }
    )
    assert store.write_crux_judgments("tiny", sq, ratings) == 2
    got = store.crux_judgments("tiny")[1]
    assert got[["passage_id", "rating", "judge"]].values.tolist() == [
        ["p0001", 5, "crux-released"],
        ["p0002", 0, "crux-released"],
    ]
    frame = store.judgments_frame(runs=["crux-released"])
    assert frame["item"].tolist() == ["s1|p0001", "s1|p0002"]
    assert store.run_row("crux-released")["n_done"] == 2
