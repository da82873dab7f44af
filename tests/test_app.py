"""Every dashboard page through Streamlit's AppTest against a real fixture store.

The store (built once per session) holds the released Qwen2.5-14B outputs of the ONCU paper
(controlled and HotpotQA, ``../shared/fixtures/oncu_release``) imported with
:func:`core.datasets.results.import_results`, plus the demo: controlled-200 run with the embedded
baseline reader on the four conditions (:func:`core.execution.runs.build_demo`).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import RELEASE_CONTROLLED, ROOT, build_release_store, open_tab, shared_fixture
from streamlit.testing.v1 import AppTest

from core.cuer.metrics import trace_divergence
from core.figures import Selection
from core.store import Store
from core.views import answer_diff, instances_behind

APP = str(ROOT / "app.py")


@pytest.fixture(scope="session")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("app") / "fixture.duckdb"
    build_release_store(path, hotpotqa=True, demo=True)
    return path


@pytest.fixture
def app(store_path, monkeypatch):
    monkeypatch.setenv("EVIDENCE_DB", str(store_path))

    def make(page: str | None = None, dataset: str | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        if page:
            at.switch_page(page)
        at.run()
        if dataset is not None:
            at.selectbox(key="global.dataset").set_value(dataset).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return make


def _table(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with column {column!r}")


# --------------------------------------------------------------------------------- pages
def test_overview_lists_store_contents_and_baseline(app):
    at = app()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Datasets"] == "3"
    assert metrics["Runs"] == "3"
    assert metrics["Predictions"] == "2,400"  # 800 + 800 imported + 800 embedded
    runs = _table(at, "progress").set_index("run_id")
    assert runs.loc["demo-embedded", "backend"] == "embedded (baseline)"
    assert runs.loc["demo-embedded", "progress"] == 1.0
    assert any("Embedded baseline reader" in m.value for m in at.markdown)


def test_conditions_page_controlled_release_reproduces_published_oncu(app):
    at = app("screens/conditions.py", dataset="controlled")
    summary = _table(at, "oncu_clipped").set_index("condition")
    assert summary["valid_groups"].tolist() == [134, 134]
    assert summary["total_groups"].tolist() == [134, 134]
    # seed 000 Tables 7 and 23: ONCU 0.583 / 0.981, aggregate raw 0.601 / 1.079
    assert round(summary.loc["full_context", "oncu_clipped"], 3) == 0.583
    assert round(summary.loc["retrieved", "oncu_clipped"], 3) == 0.981
    assert round(summary.loc["full_context", "oncu_weighted"], 3) == 0.601
    assert round(summary.loc["retrieved", "oncu_weighted"], 3) == 1.080  # 1.0798 (pub. 1.079)
    metric = {m.label: m.value for m in at.metric}
    assert metric["controlled · full_context ONCU"] == "0.583"
    groups = _table(open_tab(at, "ONCU audit"), "invalid_reason")
    assert len(groups) == 268 and groups["valid"].all()
    assert (groups["status"] == "above_oracle").sum() == 12 + 37
    captions = " ".join(c.value for c in at.caption)
    assert "49 group(s) above oracle (raw > 1), 0 below baseline (raw < 0), 0 invalid" in captions
    failures = _table(open_tab(at, "Failure labels"), "localization").set_index("condition")
    assert failures.loc[
        "full_context", ["localization", "selection", "integration", "conversion", "success"]
    ].tolist() == [36.0, 0.5, 10.0, 38.5, 15.0]
    contrasts = _table(open_tab(at, "Paired contrasts"), "contrast").set_index("contrast")
    row = contrasts.loc["retrieved - full_context"]
    assert round(row["mean"], 3) == 0.438 and round(row["effect"], 3) == 0.920
    # Table 29: p_Holm <.001; the normal p (9.98e-39) shows as "< 0.001", never 0
    assert (row["p"], row["p_holm"]) == ("< 0.001", "< 0.001")


def test_conditions_page_hotpotqa_has_29_of_38_valid_groups(app):
    at = app("screens/conditions.py", dataset="hotpotqa")
    summary = _table(at, "oncu_clipped").set_index("condition")
    assert summary["valid_groups"].tolist() == [29, 29]
    assert summary["total_groups"].tolist() == [38, 38]
    assert round(summary.loc["full_context", "oncu_clipped"], 3) == 0.906
    assert round(summary.loc["retrieved", "oncu_clipped"], 3) == 0.639
    assert summary.loc["full_context", "invalid_reasons"] == "oracle_not_above_no_evidence: 9"
    groups = _table(open_tab(at, "ONCU audit"), "invalid_reason")
    invalid = groups[~groups["valid"]]
    assert len(invalid) == 18 and set(invalid["reasoning_type"]) == {"comparison"}


def test_conditions_page_group_key_setting_regroups_oncu(app):
    """Dropping cells from the ONCU group key pools their groups: by reasoning type alone the
    HotpotQA release has two groups (comparison, multi_hop) per condition."""
    from core.oncu.metrics import DEFAULT_GROUP_KEY

    at = app("screens/conditions.py", dataset="hotpotqa")
    control = at.multiselect(key="global.group_key")
    assert tuple(control.value) == DEFAULT_GROUP_KEY
    control.set_value(["source", "model", "reasoning_type"]).run()
    assert not at.exception, [e.value for e in at.exception]
    summary = _table(at, "oncu_clipped").set_index("condition")
    assert summary["total_groups"].tolist() == [2, 2]
    groups = _table(open_tab(at, "ONCU audit"), "invalid_reason")
    assert sorted(set(groups["reasoning_type"])) == ["comparison", "multi_hop"]
    assert "context_length" not in groups.columns


def test_conditions_page_calibration_for_runs_with_confidences(app):
    at = app("screens/conditions.py", dataset="controlled-200")
    cal = _table(open_tab(at, "Calibration"), "ece")
    assert set(cal["condition"]) == {"no_evidence", "full_context", "retrieved", "oracle"}
    assert ((cal["ece"] >= 0) & (cal["ece"] <= 1)).all()
    summary = _table(at, "oncu_clipped")
    assert summary["total_groups"].tolist() == [192, 192]


def test_conditions_page_computes_only_theopen_tab(app):
    """Issue 17 item 6: the page computes the open tab only (each tab is up to a second at
    1,000,000 predictions); another tab is computed when opened, and the summary stays."""
    at = app("screens/conditions.py", dataset="controlled-200")
    assert [t.label for t in at.tabs] == [
        "Four-condition matrix",
        "ONCU audit",
        "Paired contrasts",
        "Failure labels",
        "Calibration",
    ]
    columns = [set(d.value.columns) for d in at.dataframe]
    assert any("oncu_clipped" in c for c in columns)  # the summary, above the tabs
    assert any({"condition", "n", "missing"} <= c and "ci_method" in c for c in columns)
    for other in ("invalid_reason", "ece", "localization", "contrast"):
        assert not any(other in c for c in columns), other
    open_tab(at, "Calibration")
    columns = [set(d.value.columns) for d in at.dataframe]
    assert any("ece" in c for c in columns) and any("oncu_clipped" in c for c in columns)
    assert not any("ci_method" in c for c in columns)  # the matrix is not computed now


def test_length_position_page(app):
    at = app("screens/length_position.py", dataset="controlled-200")
    t = _table(at, "evidence_position")
    # controlled-200: lengths 4K/8K/16K x positions front/middle/end/scattered, 2 conditions
    assert set(t["context_length"]) == {4000, 8000, 16000}
    assert set(t["evidence_position"]) == {"front", "middle", "end", "scattered"}
    assert len(t) == 3 * 4 * 2


def test_retrieval_page_grid(app):
    at = app("screens/retrieval.py", dataset="controlled-200")
    grid = _table(at, "full_chain_coverage")
    assert len(grid) == 2 * 5  # lexical, oracle x k in 1, 2, 3, 5, 10
    oracle = grid[grid["retriever"] == "oracle"].set_index("k")
    assert oracle.loc[3, "recall"] == 1.0 and oracle.loc[10, "full_chain_coverage"] == 1.0
    assert (grid["n_instances"] == 200).all()


def test_case_view_shows_instance_and_reruns_a_perturbation(app, store_path):
    at = app("screens/case_view.py", dataset="controlled-200")
    assert at.selectbox(key="case.instance").value == "controlled_000001"
    assert any(
        m.value.startswith("### Which lab developed Model Gamma 01805?") for m in at.markdown
    )
    preds = _table(at, "failure_label")
    assert set(preds["condition"]) == {"no_evidence", "full_context", "retrieved", "oracle"}
    gold = [m.value for m in at.markdown if ":green-badge[gold]" in m.value]
    assert gold and "p0003" in gold[0]
    at.selectbox(key="case.base_condition").set_value("oracle").run()
    op = next(s for s in at.selectbox if s.label == "Operator")
    op.set_value("remove")
    target = next(s for s in at.selectbox if s.label.startswith("Target passage"))
    assert target.options == ["p0003"]  # the oracle showed the one gold passage
    next(b for b in at.button if b.label == "Run now").click()
    at.run()
    assert not at.exception and not at.error
    divergence = next(m for m in at.metric if m.label == "Trace divergence D")
    stored = Store(store_path).instance_predictions(["demo-embedded"], "controlled_000001")
    row = stored[
        (stored["condition"] == "intervention") & stored["variant"].str.startswith("remove")
    ].iloc[0]
    orig = stored[(stored["condition"] == "oracle") & (stored["variant"] == "")].iloc[0]
    expect = trace_divergence(
        list(orig["cited_ids"]),
        list(row["cited_ids"]),
        orig["answer"],
        row["answer"],
        orig["confidence"],
        row["confidence"],
    )
    assert divergence.value == f"{expect:.3f}"
    assert list(row["input_passage_ids"]) == []  # removing the only passage leaves nothing


def test_runs_page_launches_a_background_run_and_imports_with_errors(app, store_path):
    at = app("screens/runs.py", dataset="hotpotqa")
    # a bad upload: the importer's one-line error is shown, the store is unchanged
    name = f"bad_{time.time_ns()}.csv"
    what = next(s for s in at.selectbox if s.label == "What")
    what.set_value("results: oncu-release")
    at.text_input(key="runs.import_name").set_value("broken")
    at.file_uploader(key="runs.upload").upload(name, b"sample_id,model_name\nx,y\n")
    at.run()
    next(b for b in at.button if b.label == "Import").click()
    at.run()
    uploaded = ROOT / "data" / "uploads" / name
    try:
        errors = [e.value for e in at.error]
        assert errors == [f"{uploaded}: field 'method': required column missing"]
        assert "broken" not in Store(store_path).dataset_names()
    finally:
        uploaded.unlink(missing_ok=True)
    # launch: a real child process runs the embedded reader while the page stays usable
    form_inputs = {t.label: t for t in at.text_input}
    form_inputs["Run name"].set_value("bg-run")
    next(s for s in at.selectbox if s.label == "Dataset" and s.key != "global.dataset").set_value(
        "controlled-200"
    )
    next(m for m in at.multiselect if m.label == "Conditions").set_value(["no_evidence"])
    next(b for b in at.button if b.label == "Launch").click()
    at.run()
    deadline = time.time() + 90
    while time.time() < deadline:
        at.run()
        codes = [c.value for c in at.code]
        if any("run 'bg-run' done" in c for c in codes):
            break
        time.sleep(0.5)
    # no_evidence prompts of controlled-200 are identical to the demo run's: served from cache
    done = "run 'bg-run' done: 200 planned, 0 executed, 200 cached"
    assert any(done in c.value for c in at.code), [c.value for c in at.code]
    assert not at.exception
    runs = Store(store_path).runs_frame().set_index("run_id")
    assert runs.loc["bg-run", "n_predictions"] == 200 and runs.loc["bg-run", "status"] == "done"
    Store(store_path).delete_run("bg-run")


def test_first_start_on_an_empty_store_builds_the_demo(tmp_path, monkeypatch):
    monkeypatch.setenv("EVIDENCE_DB", str(tmp_path / "empty.duckdb"))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Datasets"] == "1" and metrics["Predictions"] == "800"


# ------------------------------------------------------------------------ data functions
def test_instances_behind_an_aggregate(store_path):
    rows = list(csv.DictReader(shared_fixture(RELEASE_CONTROLLED).open()))
    expected = sorted(
        r["sample_id"]
        for r in rows
        if r["method"] == "direct" and r["reasoning_type"] == "multi_hop"
    )
    df = instances_behind(
        Store(store_path),
        Selection(dataset="controlled"),
        {
            "run": "controlled",
            "condition": "full_context",
            "reasoning_type": "multi_hop",
            "not_a_column": 1,
        },
    )
    assert len(df) == 47 and sorted(df["instance_id"]) == expected
    assert set(df["condition"]) == {"full_context"}


def test_trace_divergence_and_answer_diff_hand_values():
    # Jaccard({p1,p2},{p2,p3}) = 1/3 -> 0.5*(2/3); answer changed -> 0.3; |0.9-0.4| -> 0.2*0.5
    assert trace_divergence(["p1", "p2"], ["p2", "p3"], "Paris", "Lyon", 0.9, 0.4) == pytest.approx(
        0.5 * 2 / 3 + 0.3 + 0.1
    )
    # both evidence sets empty -> 0; "The Paris!" == "paris" relaxed; missing conf counts 0
    assert trace_divergence([], [], "The Paris!", "paris", None, 0.25) == pytest.approx(0.05)
    assert answer_diff("Draco Labs 07064", "Orion Labs 07064") == [
        ("-", "Draco"),
        ("+", "Orion"),
        ("=", "Labs 07064"),
    ]
