"""The fan-in rows read as at study scale (issue 38): the same rows, the same page tables.

:func:`core.store.fanin_rows.fanin_rows` with ``scale`` reads the instances once into a
temporary table and joins the predictions and the score rows to it alone, pairing them in
numpy. Every column of every row must equal the one-query read's (run, condition, instance
code and order, fan-in, error, pack counts, every score: NaN where NULL or unscored), on the
stores of the row tests (failed and blank-error calls, NULL and missing scores, score rows in
another order, repeated runs, pairing, filters), on two datasets sharing instance ids, and
when an id holds the separator the scaled read joins ids with. The fan-in view takes that
read above :data:`core.views.fanin.STORE_ROWS` predictions; with the threshold lowered its
tables equal those of today's read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_fanin_fast import _random_store
from test_fanin_rows_sql import _sorted, _store

import core.fanin.metrics as fanin_metrics
import core.views.fanin as fanin_view
from core.selection import Selection
from core.store import Store
from core.store.fanin_rows import fanin_rows
from core.types import Dataset, Instance, Passage
from core.views.common import clear_cache

CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _rows(store: Store, run_ids, scale: bool, **kw) -> pd.DataFrame:
    raw = fanin_rows(store, run_ids, scale=scale, **kw)
    return _sorted(pd.DataFrame({**raw["rows"], **raw["scores"]}))


def _assert_same(store: Store, run_ids, **kw) -> pd.DataFrame:
    want, got = _rows(store, run_ids, False, **kw), _rows(store, run_ids, True, **kw)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for col in want.columns:
        a, b = got[col].to_numpy(), want[col].to_numpy()
        assert a.dtype == b.dtype, col
        np.testing.assert_array_equal(a, b, err_msg=col)  # scores: NaN where NaN
    return got


@pytest.mark.parametrize(("drop", "shuffle"), [(0.0, False), (0.1, True)])
def test_scaled_rows_equal_the_one_query_read(tmp_path, drop, shuffle):
    store = _store(tmp_path / "s.duckdb", drop=drop, shuffle=shuffle)
    got = _assert_same(store, ["run0", "run1"], pair=True)
    _assert_same(store, ["run1"])
    _assert_same(store, ["run1", "run0", "run1", "absent"])
    allowed = pd.DataFrame({"dataset": ["ds"] * 3, "instance_id": ["i001", "i004", "i007"]})
    _assert_same(store, ["run0", "run1"], allowed=allowed, pair=True)
    # what the comparison is meant to cover is there
    assert got["err"].any() and got["f1_relaxed"].isna().any() and (got["fan_in"] == 0).any()
    assert (got["n_hits"] > 0).any() and got["has_pack"].any() and (~got["has_pack"]).any()
    assert len(fanin_rows(store, ["absent"], scale=True)["rows"]["fan_in"]) == 0


def test_scaled_rows_pair_runs_as_the_one_query_read(tmp_path):
    # the second run lacks some instances: pairing drops them from both runs
    store = _random_store(tmp_path / "r.duckdb")
    paired = _assert_same(store, ["run0", "run1"], pair=True)
    unpaired = _assert_same(store, ["run0", "run1"])
    assert len(paired) < len(unpaired)


def _two_datasets(path) -> Store:
    """Two datasets whose instance ids overlap, one run each; odd gold and document ids."""
    store = Store(path)
    rng = np.random.default_rng(2)
    for d, name in enumerate(("da", "db")):
        instances = []
        for i in range(d * 3, 12 + d * 3):
            # i06: gold ids holding the separator; i07: no document ids; i11: an empty one
            ps = [
                Passage(
                    f"g{j}\x1f{i}" if i == 6 else f"g{j}",
                    j,
                    "",
                    "t",
                    {7: None, 11: ""}[i] if i in (7, 11) and j else f"d{j % 2}",
                    "gold",
                    True,
                )
                for j in range(i % 4)
            ]
            ps.append(Passage("x", 9, "", "t", "e", "distractor", False))
            instances.append(Instance(f"i{i:02d}", "q", "a", tuple(ps), fan_in=i % 4))
        store.write_dataset(Dataset(name, "t", "t", {}, tuple(instances)))
        preds, scores = [], []
        for inst in instances:
            ids = [p.passage_id for p in inst.passages]
            for cond in CONDS:
                pack = [str(v) for v in rng.choice(ids, size=int(rng.integers(0, 4)))]
                preds.append(
                    {
                        "run_id": f"run-{name}",
                        "instance_id": inst.instance_id,
                        "condition": cond,
                        "variant": "",
                        "input_passage_ids": pack,
                        "cited_ids": pack[:1],
                    }
                )
                scores.append(
                    {
                        "run_id": f"run-{name}",
                        "instance_id": inst.instance_id,
                        "condition": cond,
                        "variant": "",
                        "f1_relaxed": float(rng.random()),
                    }
                )
        with store.transaction() as con:
            store.insert_run(
                con,
                {
                    "run_id": f"run-{name}",
                    "dataset_id": name,
                    "backend": "imported",
                    "model": "m",
                    "status": "done",
                },
            )
            store.write_predictions(con, pd.DataFrame(preds), replace=False)
            store.write_scores(con, pd.DataFrame(scores), replace=False)
    return store


def test_scaled_rows_of_two_datasets_and_ids_with_the_separator(tmp_path):
    store = _two_datasets(tmp_path / "two.duckdb")
    got = _assert_same(store, ["run-da", "run-db"], pair=True)  # two datasets: not paired
    assert len(got) == 2 * 12 * 4
    # equal instance ids of the two datasets have equal codes
    assert got.groupby("code")["run_no"].nunique().max() == 2
    assert (got["n_hits"] > 0).any()
    with store.connect(read_only=True) as con:
        odd = con.execute("SELECT count(*) FROM passages WHERE contains(passage_id, chr(31))")
        assert odd.fetchall()[0][0] > 0


def test_view_takes_the_scaled_read_above_the_threshold(tmp_path, monkeypatch):
    store = _store(tmp_path / "v.duckdb", drop=0.05, shuffle=True)
    used = []
    real = fanin_view.fanin_rows

    def spy(*args, **kw):
        used.append(kw.get("scale"))
        return real(*args, **kw)

    monkeypatch.setattr(fanin_view, "fanin_rows", spy)
    sel = Selection(runs=("run0", "run1"), options={"n_resamples": 200})
    clear_cache()
    want = fanin_view.fanin_result(store, sel)
    monkeypatch.setattr(fanin_view, "STORE_ROWS", 0)
    clear_cache()
    got = fanin_view.fanin_result(store, sel)
    clear_cache()
    assert used == [False, True]
    for name in ("by_fan_in", "by_bucket", "degradation", "attribution", "overlap"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name), check_exact=True)
    assert str(got.correlation) == str(want.correlation)
    assert len(got.by_bucket) and got.by_bucket["n"].sum() > 0


def test_report_takes_the_scaled_read_above_the_threshold(tmp_path, monkeypatch):
    store = _store(tmp_path / "rep.duckdb", drop=0.05)
    want = fanin_metrics.fanin_report(store, ["run0", "run1"], n_resamples=100)
    used = []
    real = fanin_metrics.fanin_rows
    monkeypatch.setattr(
        fanin_metrics, "fanin_rows", lambda *a, **kw: used.append(kw["scale"]) or real(*a, **kw)
    )
    monkeypatch.setattr(fanin_metrics, "SCALE_ROWS", 0)
    got = fanin_metrics.fanin_report(store, ["run0", "run1"], n_resamples=100)
    assert used == [True]
    for name in ("by_fan_in", "by_bucket", "degradation", "attribution", "overlap"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name), check_exact=True)
