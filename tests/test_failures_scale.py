"""The failure browser read a window of pages at a time (issue 38 item 2, 10M predictions).

The view reads the filtered, counted and sorted list a window of pages at once
(:meth:`core.store.Store.failure_window`) and each page's text alone
(:meth:`core.store.Store.failure_rows`); every page must be the one the store's one-page query
gives, row for row and in the same order, whatever the offset, page size, sort or filter, and
the next page inside a window must not read the list again.
"""

from __future__ import annotations

import pandas as pd
import pytest

from core.store import Store
from core.store.failure_rows import FailureFilter
from core.types import Dataset, Instance, Passage
from core.views import failures as fv
from core.views.common import clear_cache

_CONDITIONS = ("full_context", "oracle", "no_evidence")
_LABELS = ("success", "conversion", "localization", None)


def _build(path, unscored: bool, dataset: str = "D", runs=("ra", "rb")) -> Store:
    """Two runs over 60 instances, three conditions: failed calls (scored with NULL scores, as
    the scorer writes them), NULL scores and, when ``unscored``, predictions without a score
    row."""
    store = Store(path)
    instances = tuple(
        Instance(
            instance_id=f"q{i:03d}",
            question=f"Question {i}",
            gold_answer=f"gold {i}",
            reasoning_type=("bridge", "comparison")[i % 2],
            fan_in=1 + i % 3,
            passages=(Passage("p1", 0, "T", "text", "d1", "gold", True),),
        )
        for i in range(60)
    )
    store.write_dataset(Dataset(dataset, "test", "test", {}, instances))
    preds, scores = [], []
    for r, run in enumerate(runs):
        for i in range(60):
            for c, cond in enumerate(_CONDITIONS):
                n = i * 3 + c + r
                failed = n % 17 == 0
                preds.append(
                    {
                        "run_id": run,
                        "instance_id": f"q{i:03d}",
                        "condition": cond,
                        "variant": "",
                        "answer": None if failed else f"answer {n}",
                        "error": "TimeoutError" if failed else None,
                        "explanation": f"because {n}",
                        "cited_ids": [],
                    }
                )
                if unscored and n % 11 == 5:  # no score row: unscored
                    continue
                scores.append(
                    {
                        "run_id": run,
                        "instance_id": f"q{i:03d}",
                        "condition": cond,
                        "variant": "",
                        "em_strict": None if failed else float(n % 2),
                        "f1_relaxed": None if failed else (n % 5) / 4,
                        "failure_label": None
                        if failed or cond == "no_evidence"
                        else _LABELS[n % 4],
                    }
                )
    with store.transaction() as con:
        for run in runs:
            store.insert_run(
                con,
                {
                    "run_id": run,
                    "dataset_id": dataset,
                    "backend": "imported",
                    "model": "m",
                    "status": "done",
                    "kind": "imported",
                },
            )
        store.write_predictions(con, preds, replace=False)
        store.write_scores(con, pd.DataFrame(scores), replace=False)
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """The store with unscored predictions: the list joins predictions and score rows."""
    return _build(tmp_path_factory.mktemp("fs") / "fs.duckdb", unscored=True)


@pytest.fixture(scope="module")
def alike(tmp_path_factory) -> Store:
    """Every prediction with its score row: the list can be read from the scores."""
    return _build(tmp_path_factory.mktemp("fa") / "fa.duckdb", unscored=False)


_FILTERS = [
    {},
    {"failures_only": False},
    {"failures_only": False, "sort": "score_asc"},
    {"failures_only": False, "sort": "score_desc", "outcomes": ("wrong", "unscored")},
    {"sort": "fan_in"},
    {"failures_only": False, "sort": "label", "cells": (("reasoning_type", ("bridge",)),)},
    {"failures_only": False, "sort": "condition", "text": "answer 1"},
]


@pytest.mark.parametrize("kw", _FILTERS)
def test_every_page_of_the_windows_is_the_stores_page(store, monkeypatch, kw):
    clear_cache()
    monkeypatch.setattr(fv, "WINDOW_PAGES", 3)
    filt = FailureFilter(runs=("ra", "rb"), **kw)
    _, counts = store.failure_page(filt, 0, 1)
    assert counts["total"] > 0
    # windows of 3 pages: offsets inside the first window, on and across its edges, the last
    for limit in (7, 10) if not kw else (7,):
        last = counts["total"] - 1
        for offset in (*range(0, min(counts["total"], 5 * limit), limit), 3, 19, 20, 29, last):
            want, want_counts = store.failure_page(filt, offset, limit)
            got = fv.failure_page(store, filt, offset, limit)
            assert got["offset"] == offset and got["counts"] == want_counts
            pd.testing.assert_frame_equal(got["rows"], want)


def test_the_pages_cover_the_list_once_in_its_order(store):
    filt = FailureFilter(runs=("ra", "rb"), failures_only=False, sort="score_desc")
    keys, counts = store.failure_window(filt, 0, 10_000)
    assert len(keys) == counts["total"] == 2 * 60 * 3
    pages = [store.failure_page(filt, off, 50)[0] for off in range(0, len(keys), 50)]
    whole = pd.concat(pages, ignore_index=True)
    assert list(whole["row"]) == list(range(1, len(keys) + 1))
    for col in ("run", "instance_id", "condition", "outcome"):
        assert list(whole[col]) == list(keys[col]), col
    assert whole["score"].equals(keys["score"])
    # the sort: score, highest first, unscored and failed calls last
    scores = list(keys["score"].dropna())
    assert scores == sorted(scores, reverse=True)
    assert keys["score"].iloc[-1] != keys["score"].iloc[-1]  # NaN


def test_the_next_page_in_a_window_does_not_read_the_list_again(store, monkeypatch):
    clear_cache()
    calls = []
    real = Store.failure_window

    def counted(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "failure_window", counted)
    filt = FailureFilter(runs=("ra", "rb"), failures_only=False)
    size = fv.PAGE_ROWS * fv.WINDOW_PAGES
    for offset in range(0, min(size, 360), fv.PAGE_ROWS):
        fv.failure_page(store, filt, offset)
    assert len(calls) == 1  # one window: every page of it read its own rows only
    fv.failure_page(store, filt, 10_000)  # past the end: the last page, from the window
    assert len(calls) <= 2


def test_a_page_with_no_rows_has_the_pages_columns(store):
    rows, counts = store.failure_page(FailureFilter(runs=("ra",), text="no such text"), 0, 50)
    assert counts["total"] == 0 and rows.empty
    assert list(rows.columns)[:4] == ["row", "run", "dataset", "condition"]
    assert {"question", "answer", "gold", "explanation", "error"} <= set(rows.columns)
    page = fv.failure_page(store, FailureFilter(runs=("ra",), text="no such text"), 150)
    assert page["offset"] == 0 and page["rows"].empty


def test_the_key_sets_tell_a_store_whose_predictions_are_all_scored(store, alike):
    assert alike.failure_keysets(("ra", "rb"))["scored_alike"] is True
    assert store.failure_keysets(("ra", "rb"))["scored_alike"] is False  # unscored rows
    assert alike.failure_keysets(("ra",)) == {
        "conditions": sorted(_CONDITIONS),
        "labels": ["conversion", "localization", "success"],
        "scored_alike": True,
    }
    assert alike.failure_facets(("ra",)) == {
        "conditions": sorted(_CONDITIONS),
        "labels": ["conversion", "localization", "success"],
    }
    # a stray score row (no prediction) and a missing one: same count, other keys
    with alike.transaction() as con:
        con.execute(
            "UPDATE scores SET instance_id = 'q999' WHERE run_id = 'ra' AND instance_id = 'q001' "
            "AND condition = 'oracle'"
        )
    try:
        assert alike.failure_keysets(("ra",))["scored_alike"] is False
        assert alike.failure_keysets(("rb",))["scored_alike"] is True
    finally:
        with alike.transaction() as con:
            con.execute("UPDATE scores SET instance_id = 'q001' WHERE instance_id = 'q999'")
    assert alike.failure_keysets(("ra",))["scored_alike"] is True


@pytest.mark.parametrize("kw", [*_FILTERS, {"failures_only": False, "outcomes": ("call failed",)}])
def test_the_list_read_from_the_scores_is_the_joined_list(alike, kw):
    filt = FailureFilter(runs=("ra", "rb"), **kw)
    joined, joined_counts = alike.failure_window(filt, 0, 10_000, scored_alike=False)
    scored, scored_counts = alike.failure_window(filt, 0, 10_000, scored_alike=True)
    assert scored_counts == joined_counts and joined_counts["total"] > 0
    pd.testing.assert_frame_equal(scored, joined)
    rows, counts = alike.failure_page(filt, 5, 20)  # asks the key sets itself
    want_rows, want_counts = alike.failure_page(filt, 5, 20, scored_alike=False)
    assert counts == want_counts
    pd.testing.assert_frame_equal(rows, want_rows)


def test_runs_of_two_datasets_join_each_runs_own_instances(tmp_path):
    """The same instance ids in two datasets: each run's rows carry its own dataset's cells."""
    path = tmp_path / "two.duckdb"
    _build(path, unscored=False)
    store = _build(path, unscored=True, dataset="E", runs=("rc",))
    with store.transaction() as con:  # E's instances differ from D's: other questions
        con.execute("UPDATE instances SET question = 'E ' || question WHERE dataset_id = 'E'")
    for kw in ({}, {"failures_only": False, "sort": "fan_in"}):
        filt = FailureFilter(runs=("ra", "rc"), **kw)
        for scored in (False, True):
            keys, counts = store.failure_window(filt, 0, 10_000, scored_alike=scored)
            assert set(keys["dataset"]) == {"D", "E"}
            assert len(keys) == counts["total"]
        rows, _ = store.failure_page(filt, 0, 10_000)
        assert (rows["dataset"] == "E").equals(rows["question"].str.startswith("E "))
        one, _ = store.failure_page(FailureFilter(runs=("rc",), **kw), 0, 10_000)
        assert list(one["instance_id"]) == list(rows.loc[rows["run"] == "rc", "instance_id"])
