"""Judged AC / ER / EP beside the fan-in proxies (issue 20 item 2): values from judgments,
the 0-3 -> 0-100 mapping, incomplete judgments left missing, and ``report fanin`` offline."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from model_stub import ModelStub
from test_cli import run_cli
from test_judges import tiny  # noqa: F401 - the fixture

from core.backends import make_backend
from core.execution.runs import run_conditions
from core.fanin.judged import fanin_judged, judged_values
from core.judges.runs import make_judge, run_judge
from core.selection import Selection
from core.store import Store
from core.views.fanin import fanin_result


def _j(cond, iid, item, rating, error=None):
    return {
        "target_run": "r",
        "condition": cond,
        "instance_id": iid,
        "item": item,
        "rating": rating,
        "error": error,
        "judge_model": "m",
    }


def test_judged_values_hand_checked():
    rows = pd.DataFrame(
        [
            _j("retrieved", "q1", "ac", 2.0),
            _j("retrieved", "q1", "er:p1", 1.0),
            _j("retrieved", "q1", "er:p2", 0.0),
            _j("retrieved", "q1", "ep:0000", 1.0),
            _j("retrieved", "q1", "ep:0001", 0.0),
            _j("retrieved", "q1", "ep:0002", 0.0),
            _j("oracle", "q1", "ac", None, "HTTP 500"),  # a failed call: missing, never a value
            _j("oracle", "q1", "er:p1", 1.0),
            _j("oracle", "q1", "er:p2", None, "timeout"),
            _j("full_context", "q1", "er:p1", 0.0),  # empty pack: no segments -> EP 0
        ]
    )
    got = judged_values(rows).set_index("condition")
    assert got.loc["retrieved", "ac_judged"] == pytest.approx(200 / 3)  # 2/3 x 100
    assert got.loc["retrieved", "er_judged"] == 0.5  # 1 of 2 gold units covered (eq. 4)
    assert got.loc["retrieved", "ep_judged"] == pytest.approx(1 / 3)  # 1 of 3 segments (eq. 5)
    assert math.isnan(got.loc["oracle", "ac_judged"]) and math.isnan(got.loc["oracle", "er_judged"])
    assert got.loc["full_context", "ep_judged"] == 0.0


def test_report_fanin_shows_judged_columns_offline_with_the_lexical_judge(tiny):  # noqa: F811
    store = Store(tiny)
    run_conditions(
        store,
        "tiny",
        make_backend("embedded"),
        ("no_evidence", "full_context", "retrieved", "oracle"),
        name="r1",
        top_k=2,
        chunk_size=10,
        overlap=0,
    )
    assert fanin_judged(store, ["r1"]) is None  # no judgments: the proxies only
    plain = run_cli("report", "fanin", "--runs", "r1", "--resamples", "50", "--db", tiny)
    assert plain.returncode == 0 and "judged AC" not in plain.stdout
    for rubric in ("authtrace-correctness", "authtrace-evidence"):
        run_judge(store, rubric, make_judge("embedded"), name=f"j-{rubric}", run="r1")
    res = fanin_judged(store, ["r1"])
    per = res.per_instance.set_index(["condition", "instance_id"])
    # oracle packs are the gold passages: every gold unit covered, every segment matched
    assert per.loc[("oracle", "q1"), "er_judged"] == 1.0
    assert per.loc[("oracle", "q1"), "ep_judged"] == 1.0
    assert per["ac_judged"].dropna().isin([0.0, 100 / 3, 200 / 3, 100.0]).all()
    assert res.correlation["er"]["n"] == 6  # 2 instances x 3 pack conditions
    out = run_cli("report", "fanin", "--runs", "r1", "--resamples", "50", "--db", tiny)
    assert out.returncode == 0, out.stderr
    assert "judged AC / ER / EP" in out.stdout and "Spearman rho" in out.stdout
    assert "not a language model" in out.stdout
    js = run_cli("report", "fanin", "--runs", "r1", "--resamples", "50", "--json", "--db", tiny)
    judged = json.loads(js.stdout)["judged"]
    assert set(judged["correlation"]) == {"ac", "er", "ep"}
    assert judged["correlation"]["ac"]["n"] == 8  # every answer of the 4 conditions


def test_judged_score_source_feeds_the_fan_in_curves_and_counts_a_failed_judgment(tiny):  # noqa: F811
    """score_source = judged: the curves' AC is the mean judged AC (score/3 x 100) of each
    (system, fan-in) cell, hand-computed here from the stored judgments; the one failed judge
    call is counted in `missing`, never scored; report fanin --score-source judged agrees."""
    store = Store(tiny)
    conds = ("no_evidence", "full_context", "retrieved", "oracle")
    run_conditions(
        store, "tiny", make_backend("embedded"), conds, name="r1", top_k=2, chunk_size=10, overlap=0
    )
    sel = Selection(runs=("r1",), options={"score_source": "judged", "n_resamples": 50})
    with pytest.raises(ValueError, match="no authtrace-correctness or authtrace-evidence"):
        fanin_result(store, sel)
    with ModelStub() as stub:
        stub.answer_for = lambda messages: "2"
        stub.queue_modes("not-json")  # the first judge call fails: an error, not a rating
        judge = make_backend(
            "ollama", "stub-model", hosts=[stub.url], options={"temperature": 0, "seed": 0}
        )
        done = run_judge(store, "authtrace-correctness", judge, name="jc", run="r1")
    assert done.errors == 1 and done.executed == 8
    j = store.judgments_frame(runs=["jc"])
    bad = j[j["error"].notna()]
    assert len(bad) == 1 and bad["rating"].isna().all()
    proxy = fanin_result(store, Selection(runs=("r1",), options={"n_resamples": 50}))
    # fan-in of each instance from the proxies' cells (independent of any judgment)
    fan_of = {}
    for rec in store.fanin_frame(["r1"]).to_dict("records"):
        fan_of[rec["instance_id"]] = int(rec["fan_in"])
    res = fanin_result(store, sel)
    assert res.source == "judged"
    got = res.by_fan_in.set_index(["condition", "fan_in"])
    failed = (bad["condition"].iloc[0], fan_of[bad["instance_id"].iloc[0]])
    ok = j[j["error"].isna()]
    for (cond, f), cell in got.iterrows():
        rows = ok[(ok["condition"] == cond) & ok["instance_id"].map(fan_of).eq(f)]
        assert cell["n"] == len(rows)  # answered with a judged AC
        assert cell["missing"] == int((cond, f) == failed)
        if len(rows):
            assert cell["ac"] == pytest.approx(float((rows["rating"] / 3 * 100).mean()))
            assert cell["ac"] == pytest.approx(200 / 3)  # every judged answer scored 2 of 3
    assert int(got["missing"].sum()) == 1 and int(got["n"].sum()) == 7
    # proxies: every call answered, nothing missing
    assert int(proxy.by_fan_in["missing"].sum()) == 0
    out = run_cli(
        "report",
        "fanin",
        "--runs",
        "r1",
        "--score-source",
        "judged",
        "--resamples",
        "50",
        "--json",
        "--db",
        tiny,
    )
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["source"] == "judged"
    assert sum(r["missing"] for r in rep["by_fan_in"]) == 1
    assert {round(r["ac"], 6) for r in rep["by_fan_in"] if r["n"]} == {round(200 / 3, 6)}
    text = run_cli(
        "report",
        "fanin",
        "--runs",
        "r1",
        "--score-source",
        "judged",
        "--resamples",
        "50",
        "--db",
        tiny,
    )
    assert text.returncode == 0 and "judged AC (0-3 claim rubric" in text.stdout


def test_judged_score_source_without_judgments_is_one_line(tiny):  # noqa: F811
    store = Store(tiny)
    run_conditions(
        store,
        "tiny",
        make_backend("embedded"),
        ("retrieved",),
        name="r1",
        top_k=2,
        chunk_size=10,
        overlap=0,
    )
    out = run_cli("report", "fanin", "--runs", "r1", "--score-source", "judged", "--db", tiny)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert "no authtrace-correctness or authtrace-evidence judge run judged run(s) r1" in out.stderr


def test_two_judges_of_one_rubric_are_never_mixed(tiny):  # noqa: F811
    """Two correctness judge runs over one run: the judged AC is one judge's, the newest by
    default (a note names the other), the other with --judge-runs; never a mean of both."""
    store = Store(tiny)
    run_conditions(
        store,
        "tiny",
        make_backend("embedded"),
        ("retrieved", "oracle"),
        name="r1",
        top_k=2,
        chunk_size=10,
        overlap=0,
    )
    run_judge(store, "authtrace-correctness", make_judge("embedded"), name="j-lex", run="r1")
    stub_judge_run(store, "authtrace-correctness", "j-model", "2", run="r1")
    newest = fanin_judged(store, ["r1"])
    assert newest.per_instance["ac_judged"].to_numpy() == pytest.approx(200 / 3)  # 2 of 3
    assert any("j-model (the newest judge run); j-lex also judged" in n for n in newest.notes)
    lex = store.judgments_frame(runs=["j-lex"]).set_index(["condition", "instance_id"])["rating"]
    chosen = fanin_judged(store, ["r1"], judges=["j-lex"]).per_instance
    for r in chosen.itertuples(index=False):
        assert r.ac_judged == pytest.approx(lex.loc[(r.condition, r.instance_id)] / 3 * 100)
    out = run_cli(
        "report",
        "fanin",
        "--runs",
        "r1",
        "--score-source",
        "judged",
        "--judge-runs",
        "j-lex",
        "--resamples",
        "50",
        "--json",
        "--db",
        tiny,
    )
    assert out.returncode == 0, out.stderr
    got = {(r["condition"], r["fan_in"]): r["ac"] for r in json.loads(out.stdout)["by_fan_in"]}
    for (cond, f), ac in got.items():
        rows = chosen[(chosen["condition"] == cond) & (chosen["fan_in"] == f)]
        assert ac == pytest.approx(rows["ac_judged"].mean())


def test_judge_runs_that_are_not_judge_runs_are_one_line(tiny):  # noqa: F811
    store = Store(tiny)
    run_conditions(
        store,
        "tiny",
        make_backend("embedded"),
        ("retrieved",),
        name="r1",
        top_k=2,
        chunk_size=10,
        overlap=0,
    )
    out = run_cli("report", "fanin", "--runs", "r1", "--judge-runs", "r1,nope", "--db", tiny)
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "--judge-runs: not a stored judge run: r1, nope" in out.stderr


def stub_judge_run(store: Store, rubric: str, name: str, reply: str, **where: object):
    """A judge run of ``rubric`` through the Ollama stub, every reply ``reply``."""
    with ModelStub() as stub:
        stub.answer_for = lambda messages: reply
        judge = make_backend(
            "ollama", "stub-model", hosts=[stub.url], options={"temperature": 0, "seed": 0}
        )
        return run_judge(store, rubric, judge, name=name, **where)
