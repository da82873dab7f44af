"""The fast re-score path (issue 17 item 9) equals the row-by-row reference, hand-checked.

``score_runs`` reads the predictions, instances, passages and stored scores apart and joins
them by integer codes (:mod:`core.store.rescore_rows`), keeps each answer string's
normalized forms across batches (:class:`core.scoring.vector.AnswerForms`) and writes only
the changed columns, matched by rowid; none of it may change a score.
"""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest

from core.datasets.results import score_runs
from core.scoring.rows import SCORE_COLUMNS, score_arrow, score_frame_rows
from core.scoring.vector import AnswerForms, inputs_from_arrow, score_table
from core.store import Store, rescore_rows
from core.store.rescore_rows import rescore_batches
from core.types import Dataset, Instance, Passage

CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _store(path) -> Store:
    """Two instances, non-ASCII and number answers, a cited id the instance lacks."""
    store = Store(path)
    inst = [
        Instance(
            "i0",
            "q0",
            "São Paulo 00123",
            (
                Passage("p1", 0, "Alpha", "t", "d1", "gold", True),
                Passage("p2", 1, "Alpha", "t", "d2", "distractor", False),  # a gold title
                Passage("p3", 2, "Beta", "t", "d3", "distractor", False),
            ),
            answer_type="entity",
            reasoning_type="single_hop",
        ),
        Instance(
            "i1",
            "q1",
            "1,000",
            (
                Passage("p1", 0, "Gamma", "t", "e1", "gold", True),
                Passage("p2", 1, "Delta", "t", "e2", "distractor", False),
            ),
            answer_type="number",
            reasoning_type="arithmetic",
        ),
    ]
    store.write_dataset(Dataset("d", "t", "t", {}, tuple(inst)))
    answers = {"i0": "sao paulo", "i1": "1000"}
    cited = {"i0": ["p2", "p3", "zz"], "i1": ["p1"]}
    preds = [
        {
            "run_id": "r",
            "instance_id": i,
            "condition": c,
            "variant": "",
            "answer": answers[i],
            "cited_ids": cited[i],
        }
        for c in CONDS
        for i in ("i0", "i1")
    ]
    with store.transaction() as con:
        store.insert_run(
            con,
            {
                "run_id": "r",
                "dataset_id": "d",
                "backend": "imported",
                "model": "m",
                "status": "done",
            },
        )
        store.write_predictions(con, pd.DataFrame(preds), replace=False)
    return store


def _stored(store: Store) -> pd.DataFrame:
    with store.connect(read_only=True) as con:
        return (
            con.execute("SELECT * FROM scores ORDER BY instance_id, condition")
            .df()
            .set_index(["instance_id", "condition"])
        )


def test_rescore_in_tiny_batches_equals_hand_checked_values(tmp_path):
    store = _store(tmp_path / "s.duckdb")
    assert score_runs(store, ["r"], batch_rows=3) == 8  # every string in several batches
    got = _stored(store)
    row = got.loc[("i0", "retrieved")]
    # strict keeps accents and the suffix: {são, paulo, 00123} vs {sao, paulo}: P 1/2, R 1/3
    assert row["em_strict"] == 0.0
    assert row["f1_strict"] == pytest.approx(0.4, abs=1e-15)
    # relaxed folds accents and drops the synthetic suffix of an entity answer
    assert row["em_relaxed"] == 1.0 and row["f1_relaxed"] == 1.0
    # cited p2 (title Alpha: a gold title), p3 (Beta), zz (no such passage: no title)
    assert row["title_grounding"] == pytest.approx(1 / 3, abs=1e-15)
    assert row["ev_precision"] == 0.0 and row["citation_grounding"] == 0.0
    # number answers keep their digits: "1000" and "1,000" are the same number
    num = got.loc[("i1", "retrieved")]
    assert num["soft_correct"] == 1.0 and num["title_grounding"] == 1.0
    # the same values as the published definitions applied row by row, on a frame built
    # here (not read through the scoring query): titles by hand
    frame = pd.DataFrame(
        [
            {
                "instance_id": i,
                "condition": c,
                "answer": a,
                "gold_answer": g,
                "answer_aliases": [],
                "answer_type": t,
                "reasoning_type": r,
                "cited_ids": ids,
                "gold_ids": ["p1"],
                "cited_titles": titles,
                "gold_titles": [gt],
                "parse_error": None,
                "error": None,
                "confidence": math.nan,
            }
            for c in CONDS
            for i, a, g, t, r, ids, titles, gt in (
                (
                    "i0",
                    "sao paulo",
                    "São Paulo 00123",
                    "entity",
                    "single_hop",
                    ["p2", "p3", "zz"],
                    ["Alpha", "Beta", None],
                    "Alpha",
                ),
                ("i1", "1000", "1,000", "number", "arithmetic", ["p1"], ["Gamma"], "Gamma"),
            )
        ]
    )
    ref = score_frame_rows(frame)
    for k, rec in enumerate(frame.to_dict("records")):
        stored = got.loc[(rec["instance_id"], rec["condition"])]
        for col in ref.columns:
            a, b = stored[col], ref[col].iloc[k]
            if isinstance(b, str) or b is None:  # the label; NULL reads back as NaN
                assert a == b or (b is None and pd.isna(a)), (rec["instance_id"], col)
            else:
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12), (
                    rec["instance_id"],
                    rec["condition"],
                    col,
                    a,
                    b,
                )


def test_a_second_rescore_with_warm_caches_changes_nothing(tmp_path):
    store = _store(tmp_path / "w.duckdb")
    score_runs(store, ["r"], batch_rows=2)
    first = _stored(store)
    score_runs(store, ["r"], batch_rows=5)  # normalization now from the caches
    pd.testing.assert_frame_equal(_stored(store), first)


# ---------------------------------------------------------------------------- the re-score read
KEY = ["run_id", "instance_id", "condition", "variant"]


def _edge_store(path) -> Store:
    """Two datasets sharing instance ids; the cases the re-score read must get right.

    ``a``: passages p1-p3 in every instance (a dense passage table); ``b``: ids unique
    per passage (keyed lookups). A gold passage with no title, an instance without gold,
    a cited id no passage has, a NULL cited list, a NULL id inside a cited list (the
    per-row reference path), a prediction of an instance the dataset lacks, and
    predictions with and without a stored score row.
    """
    store = Store(path)
    a = [
        Instance(
            "i0",
            "q",
            "Zürich 00123",
            (
                Passage("p1", 0, "Alpha", "t", "d1", "gold", True),
                Passage("p2", 1, "", "t", "d2", "gold", True),  # its title set NULL below
                Passage("p3", 2, "Alpha", "t", "d3", "distractor", False),
            ),
            answer_aliases=("Zurich",),
            answer_type="entity",
            reasoning_type="multi_hop",
        ),
        Instance(
            "i1",
            "q",
            "yes",
            (
                Passage("p1", 0, "Gamma", "t", "e1", "distractor", False),  # no gold at all
            ),
            answer_type="yes_no",
            reasoning_type="comparison",
        ),
    ]
    b = [
        Instance(
            "i0",
            "q",
            "42",
            (
                Passage("b-i0-1", 0, "Delta", "t", "f1", "gold", True),
                Passage("b-i0-2", 1, "Eps", "t", "f2", "distractor", False),
            ),
            answer_type="number",
            reasoning_type="arithmetic",
        ),
        Instance(
            "i9",
            "q",
            "Lake Geneva",
            (
                Passage("b-i9-1", 0, "Zeta", "t", "g1", "gold", True),
                Passage("b-i9-2", 1, "Eta", "t", "g2", "gold", True),
                Passage("b-i9-3", 2, "Theta", "t", "g3", "distractor", False),
            ),
            answer_type="entity",
            reasoning_type="single_hop",
        ),
    ]
    store.write_dataset(Dataset("a", "t", "t", {}, tuple(a)))
    store.write_dataset(Dataset("b", "t", "t", {}, tuple(b)))
    preds = [
        ("ra", "i0", "oracle", "zurich", ["p2", "p1", "p3", "p1"]),
        ("ra", "i0", "retrieved", "Zurich!", ["p3", "zz"]),  # zz: no such passage
        ("ra", "i0", "full_context", "the zurich", None),  # NULL cited list
        ("ra", "i1", "oracle", "Yes.", ["p1"]),
        ("ra", "i1", "retrieved", "no", []),
        ("ra", "i1", "full_context", "yes", ["p1", None]),  # a NULL id: the reference path
        ("ra", "gone", "oracle", "x", ["p1"]),  # the dataset has no such instance
        ("rb", "i0", "oracle", "42.0", ["b-i0-1", "b-i0-2"]),
        ("rb", "i0", "retrieved", "forty-two", ["b-i9-1"]),  # another instance's passage
        ("rb", "i9", "oracle", "lake geneva", ["b-i9-2", "b-i9-1"]),
        ("rb", "i9", "full_context", "Geneva", ["b-i9-3", "b-i9-1", "b-i9-3"]),
    ]
    frame = pd.DataFrame(
        [
            {
                "run_id": r,
                "instance_id": i,
                "condition": c,
                "variant": "",
                "answer": ans,
                "cited_ids": ids,
            }
            for r, i, c, ans, ids in preds
        ]
    )
    with store.transaction() as con:
        con.execute("UPDATE passages SET title = NULL WHERE dataset_id = 'a' AND title = ''")
        for run, ds in (("ra", "a"), ("rb", "b")):
            store.insert_run(
                con,
                {
                    "run_id": run,
                    "dataset_id": ds,
                    "backend": "imported",
                    "model": "m",
                    "status": "done",
                },
            )
        store.write_predictions(con, frame, replace=False)
    return store


def _read(store: Store, runs, batch_rows: int, new: bool) -> tuple[pa.Table, pa.Table]:
    """(prediction and stored columns, scores), sorted by key, by the new or the SQL read."""
    cols = KEY + [
        "answer",
        "parse_error",
        "error",
        "confidence",
        "gold_answer",
        "answer_aliases",
        "answer_type",
        "reasoning_type",
        "stored_",
        *[f"stored_{c}" for c in SCORE_COLUMNS],
    ]
    forms = AnswerForms()
    rows, scores = [], []
    with store.transaction() as con:
        batches = (
            rescore_batches(con, runs, batch_rows)
            if new
            else store.scoring_batches(con, runs, batch_rows, stored=True)
        )
        for batch in batches:
            inputs = inputs_from_arrow(batch) if new else None
            got = score_arrow(batch) if inputs is None else score_table(inputs, forms)
            table = pa.Table.from_batches([batch.select(cols)])
            gold = table.column("gold_answer")  # dictionary-encoded by instance, or text
            if pa.types.is_dictionary(gold.type):
                at = cols.index("gold_answer")
                table = table.set_column(at, "gold_answer", gold.cast(pa.string()))
            rows.append(table)
            scores.append(
                pa.Table.from_arrays(
                    [batch.column(k) for k in KEY] + got.columns, names=KEY + got.column_names
                )
            )
    order = [(k, "ascending") for k in KEY]
    return pa.concat_tables(rows).sort_by(order), pa.concat_tables(scores).sort_by(order)


@pytest.mark.parametrize(("batch_rows", "dense"), [(1, True), (3, False), (100, True)])
def test_rescore_read_equals_the_scoring_query(tmp_path, monkeypatch, batch_rows, dense):
    if not dense:  # the passage lookup by sorted keys, as for many distinct ids
        monkeypatch.setattr(rescore_rows, "_DENSE_FACTOR", 0)
        monkeypatch.setattr(rescore_rows, "_DENSE_SLACK", 0)
    store = _edge_store(tmp_path / "e.duckdb")
    score_runs(store, ["ra"])  # ra has stored scores, rb none
    with store.transaction() as con:  # one stale value, one stored NULL where a value is due
        con.execute(
            "UPDATE scores SET f1_relaxed = -1 WHERE instance_id = 'i0' AND condition = 'oracle'"
        )
        con.execute("UPDATE scores SET ev_recall = NULL WHERE condition = 'retrieved'")
        # a stored row gone: its prediction is new again, and the rowids have a gap
        con.execute("DELETE FROM scores WHERE instance_id = 'i0' AND condition = 'retrieved'")
    new_rows, new_scores = _read(store, ["ra", "rb"], batch_rows, new=True)
    old_rows, old_scores = _read(store, ["ra", "rb"], batch_rows, new=False)
    assert new_rows.num_rows == 10  # "gone" is left out, as the SQL's inner join does
    for col in new_rows.column_names:
        want = old_rows.column(col).cast(new_rows.column(col).type)
        assert new_rows.column(col).equals(want), col
    for col in SCORE_COLUMNS:
        assert new_scores.column(col).equals(old_scores.column(col)), col
    # hand-checked: dataset b's i0 cites b-i9-1, a passage of another instance: no title
    rb = new_scores.to_pandas().set_index(["run_id", "instance_id", "condition"])
    assert rb.loc[("rb", "i0", "retrieved"), "title_grounding"] == 0.0
    assert rb.loc[("rb", "i9", "full_context"), "ev_precision"] == 0.5  # {b-i9-3, b-i9-1}
    ra = rb.loc["ra"]
    # i0 oracle cites p2 (gold, no title), p1 (Alpha, gold), p3 (Alpha: a gold title)
    assert ra.loc[("i0", "oracle"), "title_grounding"] == pytest.approx(2 / 3, abs=1e-15)
    assert math.isnan(ra.loc[("i1", "oracle"), "ev_recall"])  # no gold evidence


def test_rescore_rewrites_only_what_changed(tmp_path):
    store = _edge_store(tmp_path / "r.duckdb")
    assert score_runs(store, ["ra", "rb"]) == 10
    first = _stored(store)
    with store.transaction() as con:
        con.execute("UPDATE scores SET f1_relaxed = -1, failure_label = 'x' WHERE run_id = 'rb'")
    version = store.data_version()
    assert score_runs(store, ["ra", "rb"], batch_rows=2) == 10
    pd.testing.assert_frame_equal(_stored(store), first)
    assert store.data_version() != version  # rows were written
    version = store.data_version()
    score_runs(store, ["ra", "rb"])
    assert store.data_version() == version  # nothing differs: nothing written


def test_answer_forms_kept_or_started_afresh_give_the_same_scores(tmp_path, monkeypatch):
    store = _edge_store(tmp_path / "f.duckdb")
    _, kept = _read(store, ["ra", "rb"], 2, new=True)
    monkeypatch.setattr(AnswerForms, "MAX_STRINGS", 1)  # afresh at nearly every batch
    _, fresh = _read(store, ["ra", "rb"], 2, new=True)
    assert fresh.equals(kept)
    row = fresh.to_pandas().set_index(["run_id", "instance_id", "condition"])
    assert row.loc[("ra", "i0", "retrieved"), "em_relaxed"] == 1.0  # "Zurich!" ~ Zürich 00123
    assert row.loc[("rb", "i0", "oracle"), "soft_correct"] == 1.0  # 42.0 == 42


def _all_stored(store: Store) -> pd.DataFrame:
    with store.connect(read_only=True) as con:
        return con.execute("SELECT * FROM scores ORDER BY run_id, instance_id, condition").df()


def _make_stale(store: Store) -> None:
    """A stale value, a stored NULL where a value is due, a stored row gone (a new key)."""
    with store.transaction() as con:
        con.execute("UPDATE scores SET f1_relaxed = -1, failure_label = 'x' WHERE run_id = 'rb'")
        con.execute("UPDATE scores SET ev_recall = NULL WHERE condition = 'retrieved'")
        con.execute("DELETE FROM scores WHERE instance_id = 'i0' AND condition = 'oracle'")


@pytest.mark.parametrize("part_rows", [1, 4, 7, 100])
def test_rescore_read_in_parts_equals_one_read(tmp_path, monkeypatch, part_rows):
    """Runs read a part at a time (issue 38: the memory of 10M predictions) give the rows
    and the stored rows of one read: runs grouped, a big run in slices of its instances."""
    store = _edge_store(tmp_path / "p.duckdb")
    score_runs(store, ["ra", "rb"])
    _make_stale(store)
    runs = ["ra", "rb", "ra", "none"]  # a run twice, a run without predictions
    whole = _read(store, runs, 3, new=True)
    with store.connect(read_only=True) as con:
        assert rescore_rows._parts(con, ["ra", "rb"]) == [(["ra", "rb"], 1, 0)]
    monkeypatch.setattr(rescore_rows, "PART_ROWS", part_rows)
    with store.connect(read_only=True) as con:
        parts = rescore_rows._parts(con, runs)
    expected = {
        1: [(["ra"], 7, j) for j in range(7)] + [(["rb"], 4, j) for j in range(4)],
        4: [(["ra"], 2, 0), (["ra"], 2, 1), (["rb"], 1, 0)],
        7: [(["ra"], 1, 0), (["rb"], 1, 0)],
        100: [(["ra", "rb"], 1, 0)],
    }
    assert parts == expected[part_rows]
    rows, scores = _read(store, runs, 3, new=True)
    assert rows.num_rows == 10
    assert rows.equals(whole[0])
    assert scores.equals(whole[1])
    # and what a re-score in parts stores is what one read stores
    other = _edge_store(tmp_path / "q.duckdb")
    score_runs(other, ["ra", "rb"])
    _make_stale(other)
    monkeypatch.setattr(rescore_rows, "PART_ROWS", 10**9)
    assert score_runs(other, runs, batch_rows=2) == 10
    monkeypatch.setattr(rescore_rows, "PART_ROWS", part_rows)
    assert score_runs(store, runs, batch_rows=2) == 10
    pd.testing.assert_frame_equal(_all_stored(store), _all_stored(other))
