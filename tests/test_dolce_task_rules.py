"""DOLCE issue 16 items 2, 4 and 5: the App. H scenario rule per task, COW fits not covered by
the model (k = 0), and the lambda-k map whose threshold lines are the categories' thresholds.
"""

from __future__ import annotations

import json

import diptest
import numpy as np
import pandas as pd
import pytest
from test_dolce_em import _outcomes_from, simulate

from core.commands.dolce import report_lines
from core.dolce import NOT_COVERED, assign_category, dip_scenario, fit_dolce, task_scenarios
from core.dolce.outcomes import _spread_in_bins
from core.dolce.probes import exponential_ladder
from core.export.render import style_figure
from core.figures.dolce import category_bars, fit_notes, lambda_k_map
from core.jsonable import json_plain

MOSTLY_ZERO = [0.0] * 18 + [1.0] * 2  # an exact-answer problem answered twice in 20 probes
HALF = [0.0] * 10 + [1.0] * 10  # answered half the time: bimodal
SPREAD = list(np.linspace(0.0, 1.0, 20))  # partial points all over [0, 1]


def _task(*groups: tuple[int, list[float]]) -> pd.DataFrame:
    rows, i = [], 0
    for n, scores in groups:
        for _ in range(n):
            rows += [(f"p{i:02d}", s) for s in scores]
            i += 1
    return pd.DataFrame(rows, columns=["problem", "score"])


# ------------------------------------------------------------------ item 2: App. H per task
def test_dip_test_spreads_ties_within_bins():
    # Bins of 0.1; the m scores of a bin sit at (b + (i + 0.5) / m) / 10.
    got = _spread_in_bins(np.array([0.0, 0.05, 1.0, 0.55]))
    assert list(got) == pytest.approx([0.025, 0.075, 0.95, 0.55])
    # Unimodal scores: at the bin centres the ties make the dip test reject unimodality as
    # soon as n reaches a few dozen; spread within the bins it does not.
    rng = np.random.default_rng(0)
    centre, spread = [], []
    for n in (20, 40, 100):
        x = rng.beta(4, 4, size=n)
        centre.append(dip_scenario(x, ties="centre")[1])
        spread.append(dip_scenario(x)[1])
    assert centre[0] == pytest.approx(0.0825, abs=1e-4) and centre[1] < 1e-4
    assert centre[2] == 0.0
    assert spread[0] == 1.0 and spread[1] == pytest.approx(0.919, abs=1e-3) and spread[2] == 1.0
    # The p-value is diptest's on the spread sample.
    x = np.array(MOSTLY_ZERO)
    assert dip_scenario(x)[1] == pytest.approx(float(diptest.diptest(_spread_in_bins(x))[1]))
    with pytest.raises(ValueError, match="unknown ties"):
        dip_scenario(x, ties="jitter")


def test_task_not_split_when_one_side_has_ten_or_fewer_problems():
    # The demo's shape: 12 exact-answer problems mostly unanswered look unimodal one by one
    # (PIG, p = 0.99), 8 answered half the time are bimodal (COW, p = 0). 12 > 10 but 8 <= 10:
    # no split, and the pooled scores (0s and 1s) are bimodal: the whole task is COW.
    per, rule, task_p = task_scenarios(_task((12, MOSTLY_ZERO), (8, HALF)))
    assert rule == "COW only" and task_p == 0.0
    assert list(per["scenario"]) == ["COW"] * 20
    # Each problem's own test stays visible.
    assert list(per["dip_scenario"]) == ["PIG"] * 12 + ["COW"] * 8
    assert per["dip_p"].iloc[0] == pytest.approx(0.990, abs=1e-3)
    assert list(per["dip_p"].iloc[12:]) == [0.0] * 8
    # 11 and 10: still no split (both must exceed 10).
    _, rule, _ = task_scenarios(_task((11, HALF), (10, SPREAD)))
    assert rule == "COW only"
    # A PIG task: every problem spread over [0, 1], pooled unimodal.
    per, rule, task_p = task_scenarios(_task((5, SPREAD)))
    assert rule == "PIG only" and task_p == 1.0 and set(per["scenario"]) == {"PIG"}


def test_task_split_when_both_subsets_exceed_ten_problems():
    per, rule, task_p = task_scenarios(_task((11, HALF), (11, SPREAD)))
    assert rule == "split" and np.isnan(task_p)
    assert list(per["scenario"]) == ["COW"] * 11 + ["PIG"] * 11
    assert list(per["scenario"]) == list(per["dip_scenario"])


def test_fit_dolce_applies_the_rule_per_task_and_reports_it():
    frame = _task((12, MOSTLY_ZERO), (8, HALF))
    out = frame.assign(task="demo", L=20, C=np.tile(np.arange(20), 20), idk=False)
    other = _task((11, HALF), (11, SPREAD)).assign(L=20, idk=False)
    other = other.assign(task="mixed", problem="m" + other["problem"], C=np.tile(np.arange(20), 22))
    fit = fit_dolce(pd.concat([out, other], ignore_index=True))
    p = fit.problems.set_index("problem")
    assert set(p.loc[p["task"] == "demo", "scenario"]) == {"COW"}
    assert (p.loc[p["task"] == "demo", "dip_scenario"] == "PIG").sum() == 12
    assert (p.loc[p["task"] == "mixed", "scenario"] == "PIG").sum() == 11
    t = fit.tasks.set_index("task")
    assert t.loc["demo", "scenario_rule"] == "COW only" and t.loc["demo", "task_dip_p"] == 0.0
    assert (t.loc["demo", "n_dip_cow"], t.loc["demo", "n_dip_pig"]) == (8, 12)
    assert (t.loc["demo", "n_cow"], t.loc["demo", "n_pig"]) == (20, 0)
    assert t.loc["mixed", "scenario_rule"] == "split"
    assert (t.loc["mixed", "n_cow"], t.loc["mixed", "n_pig"]) == (11, 11)
    notes = fit_notes(fit.problems, fit.tasks)
    text = [n for lvl, n in notes if lvl == "task"]
    assert text[0].startswith("Task demo: not split") and "8 COW, 12 PIG" in text[0]
    assert text[1] == (
        "Task mixed: split into 11 COW and 11 PIG problems (App. H: more than 10 on both sides)."
    )
    # A scenario chosen by hand is no rule.
    fixed = fit_dolce(out, scenario="COW")
    assert fixed.tasks["scenario_rule"].tolist() == ["fixed"]
    assert fixed.problems["dip_p"].isna().all()


# ------------------------------------------------------------------ item 4: COW k = 0
def _with_never_answered() -> pd.DataFrame:
    frame, _ = simulate(6, scenario="COW", per_length=10, seed=11, lengths=(20,))
    out = _outcomes_from(frame)
    never = [
        ("sim", "never", 20, C, 0.0, True, "q") for C in exponential_ladder(20) for _ in range(10)
    ]
    cols = ["task", "problem", "L", "C", "score", "idk", "question"]
    return pd.concat([out, pd.DataFrame(never, columns=cols)], ignore_index=True)


def test_cow_k_zero_is_not_covered_by_the_model():
    # "never" says IDK to every span: k = 0 (pi = 0 at every C >= lambda, so the oracle says
    # IDK surely) explains it exactly, with the smallest lambda, 0. By Figure 1 alone that is
    # category I (closed book); it is not covered by the model instead.
    fit = fit_dolce(_with_never_answered(), scenario="COW")
    row = fit.problems.set_index("problem").loc["never"]
    assert (row["lam"], row["k"], row["category"]) == (0, 0, NOT_COVERED)
    assert list(assign_category([0], [0], 2, 2, 10)) == ["I"]
    # Simulated lambda = 50 and 200 > L = 20 (never answerable) are not covered either, not V.
    p = fit.problems
    assert list(p.loc[p["k"] == 0, "problem"]) == [1, 2, 3, 5, "never"]
    assert (p.loc[p["k"] == 0, "category"] == NOT_COVERED).all()
    t = fit.tasks.iloc[0]
    assert (t["n_not_covered"], t["share_not_covered"]) == (5, pytest.approx(5 / 7))
    assert sum(t[f"n_{c}"] for c in ("I", "II", "III", "IV", "V")) == 2
    fig, _ = category_bars(fit)
    bar = next(b for b in fig.data if b.name.startswith("not covered"))
    assert list(bar.customdata) == [5] and bar.marker.pattern.shape == "x"
    fig, _ = lambda_k_map(fit)
    crosses = [t for t in fig.data if t.marker.symbol == "x"]
    assert sum(len(t.x) for t in crosses) == 5
    assert any(
        lvl == "warning" and n.startswith("5 COW problem(s) NOT COVERED")
        for lvl, n in fit_notes(fit.problems, fit.tasks)
    )


# ------------------------------------------------------------------ report text
def _report(fit) -> dict:
    return json_plain(
        {
            "settings": dict(fit.settings),
            "problems": fit.problems.to_dict("records"),
            "tasks": fit.tasks.to_dict("records"),
        }
    )


def test_report_lines_flag_not_identified_and_not_covered():
    lines = report_lines(_report(fit_dolce(_with_never_answered(), scenario="COW")))
    never = next(line for line in lines if line.startswith("never"))
    assert "not covered" in never and " 0 " in never
    assert any("5 COW problem(s) not covered by the model" in line for line in lines)
    assert lines[-1] == "PIG estimator: likelihood (10 EM steps); COW: Algorithm 1"
    frame, _ = simulate(4, scenario="PIG", per_length=5, seed=2, lengths=(45,))
    out = pd.DataFrame(
        {
            "task": "t",
            "problem": frame["problem"],
            "L": frame["L"],
            "C": frame["C"],
            "score": frame["s"].fillna(0.0),
            "idk": frame["s"].isna(),
        }
    )
    pub = report_lines(_report(fit_dolce(out, scenario="PIG", pig_estimator="published")))
    assert sum("(not identified)" in line for line in pub) == 4
    assert any(
        line.startswith("  4 PIG problem(s): lambda and category not identified") for line in pub
    )
    assert pub[-1] == "PIG estimator: published (5 EM steps); COW: Algorithm 1"
    lik = report_lines(_report(fit_dolce(out, scenario="PIG")))
    assert not any("not identified" in line for line in lik)


# ------------------------------------------------------------------ item 5: the lambda-k map
def _two_lengths_fit():
    # L = 150: ladder 0 1 2 5 10 20 50 100 150 -> N = 7 lengths besides 0 and L, p = 2 (from
    # 0): lambda_p = k_p = 5, lambda_q = 100. L = 700: N = 9 (1 .. 500), p = 3: 10, 10, 500.
    frame, _ = simulate(16, scenario="COW", per_length=8, seed=4, lengths=(150, 700))
    return fit_dolce(_outcomes_from(frame), scenario="COW")


def test_map_draws_each_threshold_set_in_its_own_facet():
    fit = _two_lengths_fit()
    fig, data = lambda_k_map(fit)
    assert len(data) == 16 and sum(len(t.x) for t in fig.data) == 16
    facets = {(a.text) for a in fig.layout.annotations if a.text.endswith(" problems")}
    n150 = int((fit.problems["L"] == 150).sum())
    assert facets == {
        f"λ_p=5, k_p=5, λ_q=100: {n150} problems",
        f"λ_p=10, k_p=10, λ_q=500: {16 - n150} problems",
    }
    # Dashed lines (shapes take data values on log axes): lambda_p and lambda_q upright from
    # the bottom (0.4) to the top, k_p flat from the left edge to lambda_p.
    lines = {}
    for s in fig.layout.shapes:
        lines.setdefault(s.xref, []).append((s.x0, s.x1, s.y0, s.y1))
    top = lines["x"][0][3]
    assert lines["x"] == [(5, 5, 0.4, top), (100, 100, 0.4, top), (0.4, 5, 5, 5)]
    assert lines["x2"] == [(10, 10, 0.4, top), (500, 500, 0.4, top), (0.4, 10, 10, 10)]
    assert {s.line.dash for s in fig.layout.shapes} == {"dash"}
    # Every point's category is what its facet's lines say.
    th = {"x": (5, 5, 100), "x2": (10, 10, 500)}
    for tr in fig.data:
        ids = [int(s.split("<br>")[0]) for s in tr.text]  # simulated problems are 0, 1, ...
        p = data.set_index("problem").loc[ids]
        cats = assign_category(p["lam"], p["k"], *th[tr.xaxis])
        cats = np.where(p["category"] == NOT_COVERED, NOT_COVERED, cats)
        assert list(cats) == list(p["category"]), tr.name
        # ... and the (jittered) point sits on the matching side of each line.
        lam_p, k_p, lam_q = th[tr.xaxis]
        x, y = np.asarray(tr.x), np.asarray(tr.y)
        assert list(x <= lam_p) == list(p["lam"] <= lam_p)
        assert list(x <= lam_q) == list(p["lam"] <= lam_q)
        assert list(y <= k_p) == list(p["k"] <= k_p)
    # Symbols on the axes, legend below the plot.
    assert fig.layout.xaxis.title.text == "λ (complexity)"
    assert fig.layout.yaxis.title.text == "k (redundancy)"
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0


def test_map_single_threshold_set_has_no_facet_titles_and_export_keeps_everything():
    frame, _ = simulate(8, scenario="COW", per_length=8, seed=4, lengths=(700,))
    fit = fit_dolce(_outcomes_from(frame), scenario="COW")
    fig, _ = lambda_k_map(fit)
    texts = sorted(a.text for a in fig.layout.annotations)
    assert texts == ["k_p=10", "λ_p=10", "λ_q=500"]
    out = style_figure(fig)  # the export path (PNG / SVG / PDF) lays this copy out
    assert out.layout.legend.orientation == "h" and out.layout.legend.y < 0
    assert len(out.layout.shapes) == 3 and len(out.layout.annotations) == 3
    assert out.layout.xaxis.title.text == "λ (complexity)"
    assert json.loads(out.to_json())["layout"]["margin"]["b"] == 40


def test_map_marks_published_pig_fits_not_identified():
    frame, _ = simulate(4, scenario="PIG", per_length=5, seed=2, lengths=(45,))
    out = pd.DataFrame(
        {
            "task": "t",
            "problem": frame["problem"],
            "L": frame["L"],
            "C": frame["C"],
            "score": frame["s"].fillna(0.0),
            "idk": frame["s"].isna(),
        }
    )
    fit = fit_dolce(out, scenario="PIG", pig_estimator="published")
    fig, _ = lambda_k_map(fit)
    assert {t.marker.symbol for t in fig.data} == {"circle-open"}
    assert all(t.name.endswith(" · not identified") for t in fig.data)
    fig, _ = category_bars(fit)
    hatched = [b for b in fig.data if b.name.endswith("not identified")]
    assert sum(int(b.customdata[0]) for b in hatched) == 4
    assert {b.marker.pattern.shape for b in hatched} == {"/"}
    notes = fit_notes(fit.problems, fit.tasks)
    assert notes[0] == ("info", "Fitted by PIG: Algorithm 2 as published.")
    assert notes[1][0] == "warning"
    assert notes[1][1].startswith("4 PIG problem(s): λ and category NOT IDENTIFIED")


# ------------------------------------------------------------------ the page
@pytest.fixture(scope="module")
def probed_store(tmp_path_factory):
    from core.backends import make_backend
    from core.datasets.controlled import build_controlled
    from core.execution.runs import run_probes
    from core.store import Store

    db = tmp_path_factory.mktemp("dolce16") / "store.duckdb"
    store = Store(db)
    store.write_dataset(build_controlled("controlled-200", seed=42, name="ctl", limit=4))
    run_probes(store, "ctl", make_backend("embedded"), name="probes", limit=4)
    return db


def test_page_names_the_estimator_and_flags_what_is_not_identified(probed_store, monkeypatch):
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("EVIDENCE_DB", str(probed_store))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("screens/dolce.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="dolce.pig_estimator").value == "likelihood"
    assert [i.value for i in at.info] == ["Fitted by COW: Algorithm 1."]
    # The task rule is stated per task (its name is data: shown as text).
    assert any(t.value.startswith("Task ctl: ") for t in at.text)
    problems = next(df.value for df in at.dataframe if "category" in df.value.columns)
    assert {"dip_p", "dip_scenario", "estimator", "identified"} <= set(problems.columns)
    # Everything PIG, fitted by the published Algorithm 2: 4 problems not identified.
    at.selectbox(key="dolce.scenario").set_value("PIG")
    at.selectbox(key="dolce.pig_estimator").set_value("published").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [i.value for i in at.info] == ["Fitted by PIG: Algorithm 2 as published."]
    # the page shows the note as text (Markdown-escaped source: "problem\\(s\\)")
    assert any(
        w.value.replace("\\", "").startswith("4 PIG problem(s): λ and category NOT IDENTIFIED")
        for w in at.warning
    )
    problems = next(df.value for df in at.dataframe if "category" in df.value.columns)
    assert list(problems["identified"]) == [False] * 4
    assert set(problems["estimator"]) == {"published"}


def test_map_hover_shows_dataset_text_as_text():
    frame, _ = simulate(2, scenario="COW", per_length=4, seed=4, lengths=(20,))
    out = _outcomes_from(frame).assign(question="<b>bold</b> & <a href='x'>link</a>")
    fig, _ = lambda_k_map(fit_dolce(out, scenario="COW"))
    text = [s for t in fig.data for s in t.text]
    assert all(
        "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href=&#x27;x&#x27;&gt;link&lt;/a&gt;" in s
        for s in text
    )
    assert not any("<b>" in s or "<a " in s for s in text)
