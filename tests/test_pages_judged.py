"""Judged numbers on the dashboard pages (issue 20 item 6), through Streamlit's AppTest.

The demo store (embedded reader, four conditions on controlled-200) judged offline by the
embedded lexical judge with the two AuthTrace rubrics and CRUX answer coverage, plus one
annotator's labels on a blind sample: the Fan-in page, the Retrieval page's CRUX section and
the Failure browser show what ``report fanin``, ``report crux`` and ``report agreement`` print
in JSON for the same store; the same store without judgments or labels shows none of it.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import demo_into, open_page

from core.annotate.roundtrip import DEFAULT_RUBRIC, export_sample, import_labels
from core.cli import main
from core.execution.runs import DEMO_RUN
from core.judges.runs import make_judge, run_judge
from core.store import Store
from core.store.annotations import rule_labels
from core.views.common import clear_cache
from core.views.judged import has_judge_runs

DATASET = "controlled-200"
#: The annotator's one label for every item: κ against any rater is then 0 exactly (p_o = p_e).
LABEL = "selection"


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """``plain``: the demo store; ``judged``: the same with judge runs and labels."""
    root = tmp_path_factory.mktemp("judged_pages")
    plain, judged = root / "plain.duckdb", root / "judged.duckdb"
    demo_into(Store(plain))
    shutil.copy(plain, judged)
    store = Store(judged)
    for rubric in ("authtrace-correctness", "authtrace-evidence", "crux-coverage"):
        run_judge(store, rubric, make_judge("embedded"), name=f"j-{rubric}", run=DEMO_RUN)
    # alice labels 20 failures (one label for all), 12 items of the correctness judge (every
    # answer 3 of 3) and 8 of the CRUX coverage judge (every sub-question fully covered, 5)
    for rubric, n, label in (
        (DEFAULT_RUBRIC, 20, LABEL),
        ("authtrace-correctness", 12, "3"),
        ("crux-coverage", 8, "5"),
    ):
        rated = root / f"{rubric}.csv"
        export_sample(store, DEMO_RUN, n, 7, rated, rubric=rubric)
        with rated.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        for row in rows:
            row["label"] = label
        with rated.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        import_labels(store, rated, DEMO_RUN, "alice", rubric=rubric)
    return {"plain": plain, "judged": judged}


def _json(capsys, *args: object) -> dict:
    capsys.readouterr()
    assert main([str(a) for a in args]) == 0
    return json.loads(capsys.readouterr().out)


def _page(monkeypatch, db: Path, page: str):
    clear_cache()  # the view cache is per process: each store starts cold
    return open_page(monkeypatch, db, page, DATASET)


#: Columns that tell the judged tables apart (AppTest does not expose a dataframe's key).
_TABLES = {
    "fanin": {"ac_judged", "er_judged"},
    "fanin_corr": {"pearson", "spearman"},
    "crux_answers": {"judge_run", "cov_y", "den_y"},
    "crux_kendall": {"cov_z_n", "den_z_n"},
    "agreement": {"rater_a", "rater_b", "kappa"},
    "confusion": {LABEL, "integration"},
}


def _frame(at, name: str) -> pd.DataFrame:
    """The dataframe on the page with the columns of ``_TABLES[name]``."""
    for df in at.dataframe:
        if _TABLES[name] <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no {name} table")


def _tables(at) -> set[str]:
    shown = [set(df.value.columns) for df in at.dataframe]
    return {n for n, cols in _TABLES.items() for c in shown if cols <= c}


def _close(a: object, b: object) -> bool:
    if b is None:
        return a is None or (isinstance(a, float) and math.isnan(a))
    return a == pytest.approx(b, abs=1e-9)


def _texts(at) -> str:
    parts = [*at.markdown, *at.caption, *at.subheader, *at.warning, *at.expander]
    return " ".join(str(getattr(x, "value", None) or getattr(x, "label", "")) for x in parts)


def test_the_cheap_check_reads_only_the_runs_frame(stores):
    frame = Store(stores["judged"]).runs_frame(live=False)
    assert has_judge_runs(frame, ("authtrace-evidence",), dataset=DATASET)
    assert has_judge_runs(frame, ("crux-coverage",), targets=[DEMO_RUN])
    assert not has_judge_runs(frame, ("crux-coverage",), targets=["other-run"])
    assert not has_judge_runs(frame, ("crux-coverage",), dataset="hotpotqa")
    assert not has_judge_runs(Store(stores["plain"]).runs_frame(live=False), ("crux-coverage",))


def test_fanin_page_shows_judged_scores_as_report_fanin(stores, monkeypatch, capsys):
    rep = _json(
        capsys,
        "report",
        "fanin",
        "--runs",
        DEMO_RUN,
        "--resamples",
        "50",
        "--no-instances",
        "--json",
        "--db",
        stores["judged"],
    )["judged"]
    at = _page(monkeypatch, stores["judged"], "screens/fanin.py")
    assert any(s.value == "Judged scores (AuthTrace judges)" for s in at.subheader)
    assert "lexical baseline" in _texts(at)
    shown = _frame(at, "fanin").set_index(["system", "bucket"])
    assert len(shown) == len(rep["by_bucket"]) == 8  # 4 conditions x buckets single, low
    for r in rep["by_bucket"]:
        row = shown.loc[(r["system"], r["bucket"])]
        assert row["n"] == r["n"]
        for m in ("ac", "ac_judged"):
            assert _close(row[m], r[m]), (m, r)
        for m in ("er", "er_judged", "ep", "ep_judged"):  # shown in %, as the report prints
            assert _close(row[m], None if r[m] is None else 100 * r[m]), (m, r)
        assert row["judged_missing"] == max(r["ac_judged_missing"], r["er_judged_missing"])
    # the no-evidence condition has no pack: its ER / EP judgments are all missing
    assert shown.loc[(f"{DEMO_RUN}:no_evidence", "single"), "judged_missing"] == 38
    corr = _frame(at, "fanin_corr").set_index("metric")
    for m, c in rep["correlation"].items():
        assert corr.loc[m.upper(), "n"] == c["n"]
        assert _close(corr.loc[m.upper(), "pearson"], c["pearson"])
        assert _close(corr.loc[m.upper(), "spearman"], c["spearman"])
    assert corr.loc["AC", "n"] == 800  # every answer of the 4 conditions x 200 instances


def test_fanin_page_switched_to_judged_scores_draws_report_fanin_judged(
    stores, monkeypatch, capsys
):
    """The researcher switches the Fan-in page's AC / ER / EP source to the judges: the
    bucket table shows what ``report fanin --score-source judged`` prints."""
    rep = _json(
        capsys,
        "report",
        "fanin",
        "--runs",
        DEMO_RUN,
        "--score-source",
        "judged",
        "--resamples",
        "200",
        "--no-instances",
        "--json",
        "--db",
        stores["judged"],
    )
    assert rep["source"] == "judged"
    at = _page(monkeypatch, stores["judged"], "screens/fanin.py")
    assert not any("AC judged" in df.value.columns for df in at.dataframe)  # proxies first
    at.selectbox(key="fanin.score_source").select("judged").run()
    assert not at.exception, at.exception
    assert "judges' AC (0-3 claim rubric" in _texts(at)
    table = next(df.value for df in at.dataframe if "AC judged" in df.value.columns)
    shown = table.assign(system=table["run"] + ":" + table["condition"]).set_index(
        ["system", "bucket"]
    )
    for r in rep["by_bucket"]:
        row = shown.loc[(r["system"], r["bucket"])]
        assert (row["n"], row["missing"]) == (r["n"], r["missing"])
        assert _close(row["AC judged"], None if r["ac"] is None else round(r["ac"], 1))
        er = None if r["er"] is None else round(100 * r["er"], 1)
        assert _close(row["ER judged %"], er), r
    # no-evidence answers are judged for AC (every answer), so nothing there is missing
    assert shown.loc[(f"{DEMO_RUN}:no_evidence", "all"), "missing"] == 0


def test_retrieval_page_shows_answer_coverage_as_report_crux(stores, monkeypatch, capsys):
    out = _json(
        capsys,
        "report",
        "crux",
        "--dataset",
        DATASET,
        "--resamples",
        "50",
        "--no-instances",
        "--json",
        "--db",
        stores["judged"],
    )
    rep = out["answer_coverage"]
    at = _page(monkeypatch, stores["judged"], "screens/retrieval.py")
    at.toggle(key="retrieval.crux").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "lexical baseline" in _texts(at) and "Kendall τ-b" in _texts(at)
    pipes = _frame(at, "crux_answers")
    assert len(pipes) == len(rep["pipelines"]) == 1  # the demo run's retrieved condition
    got, want = pipes.iloc[0], rep["pipelines"][0]
    assert (got["run"], got["condition"], got["k"]) == (DEMO_RUN, "retrieved", str(want["k"]))
    for col in ("n", "n_unscored", "cov_y", "den_y", "cov_z", "alpha_ndcg", "den_z"):
        assert _close(got[col], want[col]), col
    assert got["n"] == 200
    kendall = _frame(at, "crux_kendall").set_index("k")
    assert list(kendall.index) == [str(r["k"]) for r in rep["kendall"]] == ["3", "all", "contexts"]
    for r in rep["kendall"]:
        for m in ("cov_z", "alpha_ndcg", "recall", "map", "ndcg", "den_z"):
            assert kendall.loc[str(r["k"]), f"{m}_n"] == r[f"{m}_n"]
            assert _close(kendall.loc[str(r["k"]), m], r[m])
    assert kendall.loc["contexts", "cov_z_n"] == 200  # one point per judged context


def test_failure_browser_shows_agreement_as_report_agreement(stores, monkeypatch, capsys):
    rep = _json(
        capsys, "report", "agreement", "--run", DEMO_RUN, "--json", "--db", stores["judged"]
    )
    rule = rule_labels(Store(stores["judged"]), DEMO_RUN, DEFAULT_RUBRIC)
    at = _page(monkeypatch, stores["judged"], "screens/failures.py")
    labelled = [e.label for e in at.expander if e.label.startswith("Human labels")]
    assert labelled == [f"Human labels and agreement: run {DEMO_RUN} (failure_taxonomy)"]
    pairs = _frame(at, "agreement")
    assert list(zip(pairs["rater_a"], pairs["rater_b"], strict=True)) == [("rule", "alice")]
    got, want = pairs.iloc[0], rep["pairs"][0]
    # hand-checked: alice gave one label to all 20 items, so p_o = p_e and kappa = 0
    n = len(rule)
    assert got["n"] == want["n"] == n == 20
    assert got["agreed"] == want["agreed"] == sum(v == LABEL for v in rule.values())
    assert got["raw_agreement"] == pytest.approx(want["raw_agreement"])
    assert got["kappa"] == pytest.approx(want["kappa"]) and want["kappa"] == pytest.approx(0.0)
    confusion = _frame(at, "confusion")
    assert confusion.to_numpy().tolist() == want["confusion"]
    assert list(confusion.columns) == want["labels"]
    assert confusion[LABEL].sum() == n  # every item is in alice's one column


def test_fanin_page_shows_people_against_the_correctness_judge(stores, monkeypatch, capsys):
    rep = _json(
        capsys,
        "report",
        "agreement",
        "--run",
        DEMO_RUN,
        "--rubric",
        "authtrace-correctness",
        "--json",
        "--db",
        stores["judged"],
    )
    (want,) = rep["pairs"]
    assert (want["rater_a"], want["rater_b"], want["n"]) == (
        "alice",
        "judge:j-authtrace-correctness",
        12,
    )
    at = _page(monkeypatch, stores["judged"], "screens/fanin.py")
    labelled = [e.label for e in at.expander if e.label.startswith("Human labels")]
    assert labelled == [f"Human labels and agreement: run {DEMO_RUN} (authtrace-correctness)"]
    pairs = _frame(at, "agreement")
    got = pairs.iloc[0]
    assert (got["rater_a"], got["rater_b"], got["n"]) == (want["rater_a"], want["rater_b"], 12)
    # hand-checked: alice's 3 agrees exactly where the judge gave 3; one label from alice
    # makes p_o = p_e, so kappa is 0 (the judge used more than one label)
    con = duckdb.connect(str(stores["judged"]), read_only=True)
    ratings = [
        r
        for (r,) in con.execute(
            "SELECT j.rating FROM annotation_items i JOIN judgments j ON j.target_run = i.run_id "
            "AND j.instance_id = i.instance_id AND j.condition = i.condition AND j.item = "
            "i.variant "
            "WHERE i.rubric = 'authtrace-correctness' AND j.run_id = 'j-authtrace-correctness'"
        ).fetchall()
    ]
    con.close()
    assert len(ratings) == 12 and len(set(ratings)) > 1
    assert got["agreed"] == want["agreed"] == sum(r == 3 for r in ratings)
    assert _close(got["kappa"], want["kappa"]) and want["kappa"] == pytest.approx(0.0)


def test_retrieval_page_shows_people_against_the_coverage_judge(stores, monkeypatch, capsys):
    rep = _json(
        capsys,
        "report",
        "agreement",
        "--run",
        DEMO_RUN,
        "--rubric",
        "crux-coverage",
        "--json",
        "--db",
        stores["judged"],
    )
    (want,) = rep["pairs"]
    assert (want["rater_a"], want["rater_b"], want["n"]) == ("alice", "judge:j-crux-coverage", 8)
    at = _page(monkeypatch, stores["judged"], "screens/retrieval.py")
    at.toggle(key="retrieval.crux").set_value(True).run()  # the CRUX section
    labelled = [e.label for e in at.expander if e.label.startswith("Human labels")]
    assert labelled == [f"Human labels and agreement: run {DEMO_RUN} (crux-coverage)"]
    got = _frame(at, "agreement").iloc[0]
    assert (got["rater_a"], got["rater_b"], got["n"]) == ("alice", "judge:j-crux-coverage", 8)
    assert got["agreed"] == want["agreed"] and _close(got["raw_agreement"], want["raw_agreement"])


@pytest.mark.parametrize(
    "page", ["screens/fanin.py", "screens/retrieval.py", "screens/failures.py"]
)
def test_without_judgments_or_labels_the_sections_are_absent(stores, monkeypatch, page):
    at = _page(monkeypatch, stores["plain"], page)
    if page == "screens/retrieval.py":
        at.toggle(key="retrieval.crux").set_value(True).run()
        assert not at.exception, [e.value for e in at.exception]
    assert not _tables(at)
    assert not any("Human labels" in e.label for e in at.expander)
    assert not any("Judged scores" in s.value or "Answer coverage" in s.value for s in at.subheader)


def test_two_judges_of_one_rubric_show_their_agreement_on_the_fanin_page(
    stores, monkeypatch, capsys, tmp_path
):
    """A second AuthTrace correctness judge of the same run: the page shows the pair's κ."""
    at = _page(monkeypatch, stores["judged"], "screens/fanin.py")
    assert not any({"judge_a", "judge_b"} <= set(df.value.columns) for df in at.dataframe)
    db = tmp_path / "two_judges.duckdb"
    shutil.copy(stores["judged"], db)
    run_judge(
        Store(db), "authtrace-correctness", make_judge("embedded"), name="j-second", run=DEMO_RUN
    )
    rep = _json(
        capsys,
        "report",
        "agreement",
        "--judges",
        "j-authtrace-correctness,j-second",
        "--json",
        "--db",
        db,
    )
    (pair,) = rep["pairs"]
    assert pair["n"] == 800 and pair["raw_agreement"] == 1.0  # the same lexical judge twice
    at = _page(monkeypatch, db, "screens/fanin.py")
    (table,) = [df.value for df in at.dataframe if {"judge_a", "judge_b"} <= set(df.value.columns)]
    assert table.to_dict("records")[0] | {"kappa": None, "weighted_kappa": None, "note": ""} == {
        "rubric": "authtrace-correctness",
        "judge_a": "j-authtrace-correctness",
        "judge_b": "j-second",
        "n": 800,
        "raw_agreement": 1.0,
        "kappa": None,
        "weighted_kappa": None,
        "note": "",
    }
    assert _close(table["kappa"].iloc[0], pair["kappa"])
    assert _close(table["weighted_kappa"].iloc[0], pair["weighted_kappa"])
