"""Fan-in on imported runs (issue 36 item 1): ER / EP are measured where the release says what
was shown, and missing (counted as ``no_pack``) where it does not -- never a 0 that was not
measured."""

from __future__ import annotations

import csv
import math

import pandas as pd
import pytest
from conftest import RELEASE_HOTPOTQA, shared_fixture
from test_hardening_import import METHODS, row, write_csv

from core.cli import main
from core.datasets.results import import_results
from core.fanin.metrics import correlation_note, evidence_pack, fanin_analysis
from core.figures.fanin import fanin_buckets_table
from core.selection import Selection
from core.store import Store
from core.views.fanin import fanin_result

_NO_PACK = "no pack (ER/EP missing)"


def test_a_pack_condition_without_stored_shown_ids_has_no_pack():
    assert evidence_pack("retrieved", None, ["p0001"]) is None
    assert evidence_pack("oracle", float("nan"), []) is None
    assert evidence_pack("retrieved", [], ["p0001"]) == []  # shown nothing: a measured pack
    assert evidence_pack("full_context", None, ["p0001"]) == ["p0001"]


@pytest.fixture
def toy(tmp_path):
    """Two instances (fan-in 1 and 2), four methods each, no side files."""
    rows = [
        row("s1", method=m, gold_evidence_ids="p0001", predicted_evidence_ids="p0001;p0009")
        for m in METHODS
    ]
    rows += [
        row(
            "s2",
            method=m,
            gold_evidence_ids="p0001;p0002",
            predicted_evidence_ids="p0002",
            gold_answer="Lyon",
            predicted_answer="Nice",
        )
        for m in METHODS
    ]
    store = Store(tmp_path / "s.duckdb")
    import_results(store, write_csv(tmp_path / "toy.per_sample_metrics.csv", rows), name="toy")
    return store


def _all(res) -> dict:
    b = res.by_bucket
    return {r["condition"]: r for r in b[b["bucket"] == "all"].to_dict("records")}


def test_imported_retrieved_is_missing_oracle_is_one_full_context_is_its_citations(toy):
    res = fanin_result(toy, Selection(dataset="toy"))
    rows = _all(res)
    # retrieved: the release does not say what was shown -> no pack, counted, no 0
    assert rows["retrieved"]["n"] == 2 and rows["retrieved"]["no_pack"] == 2
    assert math.isnan(rows["retrieved"]["er"]) and math.isnan(rows["retrieved"]["ep"])
    assert math.isnan(rows["retrieved"]["er_ci_low"])
    # oracle: shown = the gold evidence -> ER = EP = 1 by construction
    assert (rows["oracle"]["er"], rows["oracle"]["ep"], rows["oracle"]["no_pack"]) == (1, 1, 0)
    # full context: the pack is the citations. s1 cites p0001, p0009 of gold {p0001}: ER 1,
    # EP 1/2; s2 cites p0002 of gold {p0001, p0002}: ER 1/2, EP 1. Means: ER 0.75, EP 0.75.
    assert rows["full_context"]["er"] == pytest.approx(0.75)
    assert rows["full_context"]["ep"] == pytest.approx(0.75)
    assert rows["no_evidence"]["no_pack"] == 0  # no pack by design, not a missing input
    table = fanin_buckets_table(res)
    shown = table[(table["bucket"] == "all")].set_index("condition")
    assert shown.at["retrieved", _NO_PACK] == 2
    assert shown.at["retrieved", "ER id-overlap % CI"] == "-"


def test_the_frame_path_agrees_with_the_store_path(toy):
    frame = toy.fanin_frame(["toy"])
    res = fanin_analysis(frame, n_resamples=200)
    rows = _all(res)
    assert rows["retrieved"]["no_pack"] == 2 and math.isnan(rows["retrieved"]["er"])
    assert rows["full_context"]["er"] == pytest.approx(0.75)


def test_correlation_note_says_why_the_retrieved_points_are_missing(toy):
    res = fanin_result(toy, Selection(dataset="toy"))
    note = correlation_note(res.correlation)
    assert res.correlation["er_ac"]["n"] == 0
    assert (
        "without ER / EP skipped (the store does not say which passages those calls showed)" in note
    )
    assert "every call failed" not in note


def test_release_full_context_er_ep_equal_the_release_evidence_columns(tmp_path):
    """Independent reference: the release's own per-sample evidence_recall / precision."""
    path = shared_fixture(RELEASE_HOTPOTQA)
    store = Store(tmp_path / "s.duckdb")
    import_results(store, path, name="hp")
    with path.open(encoding="utf-8") as fh:
        direct = [r for r in csv.DictReader(fh) if r["method"] == "direct"]
    want = pd.DataFrame(direct)[["evidence_recall", "evidence_precision"]].astype(float).mean()
    rows = _all(fanin_result(store, Selection(dataset="hp")))
    assert rows["full_context"]["er"] == pytest.approx(want["evidence_recall"], abs=1e-12)
    assert rows["full_context"]["ep"] == pytest.approx(want["evidence_precision"], abs=1e-12)
    assert round(rows["full_context"]["er"], 3) == 0.615  # hand-checked: 123.0333 / 200
    assert rows["retrieved"]["no_pack"] == 200 and math.isnan(rows["retrieved"]["er"])
    assert (rows["oracle"]["er"], rows["oracle"]["ep"]) == (1.0, 1.0)


def test_report_fanin_names_the_predictions_without_a_pack(toy, capsys):
    capsys.readouterr()
    assert main(["report", "fanin", "--runs", "toy", "--no-instances", "--db", str(toy.path)]) == 0
    out = capsys.readouterr().out
    assert (
        "no evidence pack (ER / EP missing, not 0; the store does not say which passages "
        "those calls showed): toy:retrieved 2 of 2"
    ) in out.splitlines()
