"""CUE-R runs end to end: real store, engine, embedded reader, CLI; Ollama through the stub."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from model_stub import ModelStub

from core.backends import EmbeddedReader, make_backend
from core.cli import main
from core.cuer.metrics import intervention_report, load_pairs
from core.datasets.controlled import build_controlled
from core.execution.runs import run_interventions
from core.store import Store
from core.types import Dataset


@pytest.fixture(scope="module")
def controlled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict]:
    """controlled-200 with a full CUE-R run of the embedded reader (all three positions)."""
    store = Store(tmp_path_factory.mktemp("cuer") / "store.duckdb")
    store.write_dataset(build_controlled(preset="controlled-200", seed=42, name="c200"))
    summary = run_interventions(
        store, "c200", EmbeddedReader(), name="cr", positions=("front", "after", "end")
    )
    return store, {"summary": summary}


def test_controlled_200_intervention_properties(controlled):
    store, info = controlled
    s = info["summary"]
    assert s.status == "done" and s.errors == 0 and s.parse_errors == 0
    rep = intervention_report(store, "cr")
    assert set(rep) == {
        "correctness_axis",
        "operators",
        "paired",
        "roles",
        "roles_by_operator",
        "role_combinations",
        "role_precedence",
        "roles_missing",
        "synergy",
    }
    ops = {(r["operator"], r["variant"]): r for r in rep["operators"]}
    assert list(ops) == [
        ("original", ""),
        ("remove", ""),
        ("replace", "easy"),
        ("replace", "medium"),
        ("replace", "hard"),
        ("duplicate", "front"),
        ("duplicate", "after"),
        ("duplicate", "end"),
        ("zero_retrieval", ""),
    ]
    assert {r["n"] for r in rep["operators"]} == {200}
    assert {r["missing"] for r in rep["operators"]} == {0} and rep["roles_missing"] == 0
    assert {r["not_applicable"] for r in rep["operators"]} == {0}
    assert set(rep["operators"][0]) == {
        "operator",
        "variant",
        "n",
        "missing",
        "not_applicable",
        "correctness",
        "answer_f1",
        "grounding",
        "confidence_error",
        "trace_divergence",
        "evidence_divergence",
        "answers_changed",
        "pct_answer_changed",
        "correctness_changed",
        "pct_correctness_changed",
    }
    assert rep["correctness_axis"] == "soft"
    orig = ops[("original", "")]["correctness"]
    assert orig > 0.5 and ops[("original", "")]["trace_divergence"] == 0.0
    # An extractive reader needs the fact shown: a duplicate keeps it, remove/replace lose it.
    for pos in ("front", "after", "end"):
        assert abs(ops[("duplicate", pos)]["correctness"] - orig) <= 0.02
    for key in [("remove", ""), ("replace", "easy"), ("replace", "medium"), ("replace", "hard")]:
        assert ops[key]["correctness"] < orig - 0.3
        assert ops[key]["trace_divergence"] > 0.5
    assert ops[("zero_retrieval", "")]["correctness"] == 0.0  # synthetic entities
    paired = {(r["operator"], r["variant"], r["metric"]): r for r in rep["paired"]}
    assert set(paired[("remove", "", "correctness")]) == {
        "operator",
        "variant",
        "metric",
        "n",
        "missing",
        "not_applicable",
        "delta",
        "ci_low",
        "ci_high",
        "p",
    }
    rm = paired[("remove", "", "correctness")]
    assert rm["delta"] == pytest.approx(orig - ops[("remove", "")]["correctness"])
    assert rm["ci_low"] > 0 and rm["p"] < 0.001
    dup = paired[("duplicate", "end", "correctness")]
    assert abs(dup["delta"]) <= 0.02 and dup["p"] > 0.05
    roles = rep["roles"]
    assert set(roles) == {
        "n",
        "missing",
        "constructive",
        "redundant",
        "distractive",
        "confidence_distorting",
        "unassigned",
        "several_flags",
    }
    # 200 instances x (remove + 3 replace + 3 duplicate) item interventions.
    assert roles["n"] == 1400 and roles["missing"] == 0
    # the flags overlap (every distractive item is constructive too): one count per flag, and
    # the items with several flags make up the difference to n
    assert roles["distractive"] > 0 and roles["distractive"] <= roles["constructive"]
    assert sum(n for combo, n in rep["role_combinations"].items()) == 1400
    assert roles["several_flags"] == sum(
        n for combo, n in rep["role_combinations"].items() if "+" in combo
    )
    assert roles["unassigned"] == rep["role_combinations"].get("unassigned", 0)
    assert sum(r["n"] for r in rep["roles_by_operator"]) == 1400
    # a duplicate keeps the extractive reader's answer and citations: nothing changes
    for pos in ("front", "after", "end"):
        assert ops[("duplicate", pos)]["pct_answer_changed"] == 0.0
        assert ops[("duplicate", pos)]["evidence_divergence"] == 0.0
    assert rep["synergy"]["n"] > 0 and rep["synergy"]["metric"] == "answer_f1"
    assert rep["synergy"]["mean_drop_both"] >= rep["synergy"]["mean_drop_1"]


def test_targets_and_variants_are_stored(controlled):
    store, _ = controlled
    preds = load_pairs(store, ["cr"])
    inter = preds[preds["condition"] == "intervention"]
    metas = [json.loads(m) for m in inter["meta"]]
    rules = {m.get("rule") for m in metas if m["operator"] in ("remove", "replace", "duplicate")}
    assert rules <= {"cited_support_title", "cited", "retrieved_support_title", "top_ranked"}
    base = preds[preds["condition"] == "retrieved"]
    assert len(base) == 200
    shown = dict(zip(base["instance_id"], (list(x) for x in base["input_passage_ids"])))
    n_remove = 0
    for iid, variant, meta, ids in zip(
        inter["instance_id"], inter["variant"], metas, inter["input_passage_ids"]
    ):
        if meta["operator"] == "remove":
            # The planner retrieved exactly the base trace's context and dropped the target.
            assert variant == f"remove|{meta['target']}"
            assert list(ids) == [p for p in shown[iid] if p != meta["target"]]
            n_remove += 1
    assert n_remove == 200


def test_rerun_resumes_without_calls(controlled):
    store, _ = controlled
    again = run_interventions(
        store, "c200", EmbeddedReader(), name="cr", positions=("front", "after", "end")
    )
    assert again.executed == 0 and again.cached == 0
    assert again.skipped_existing == again.planned > 2000


def test_cli_report_json_and_table(controlled, capsys):
    store, _ = controlled
    assert main(["report", "interventions", "--db", str(store.path), "--run", "cr", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads(json.dumps(intervention_report(store, "cr")))
    assert main(["report", "interventions", "--db", str(store.path), "--run", "cr"]) == 0
    text = capsys.readouterr().out
    assert "orig vs remove" in text and "synergy (answer_f1" in text
    assert "correctness axis: soft" in text and "role flags of 1400 items (overlapping" in text
    assert (
        main(
            [
                "report",
                "interventions",
                "--db",
                str(store.path),
                "--run",
                "cr",
                "--correctness-axis",
                "strict",
                "--json",
            ]
        )
        == 0
    )
    strict = json.loads(capsys.readouterr().out)
    assert strict["correctness_axis"] == "strict"
    assert strict == json.loads(json.dumps(intervention_report(store, "cr", correctness="strict")))
    assert main(["report", "interventions", "--db", str(store.path), "--run", "nope"]) == 1
    assert "no run 'nope'" in capsys.readouterr().err


def test_cli_rejects_bad_operator(tmp_path: Path, capsys):
    db = tmp_path / "s.duckdb"
    Store(db).write_dataset(_small(3))
    code = main(
        [
            "run-interventions",
            "--db",
            str(db),
            "--dataset",
            "small",
            "--backend",
            "embedded",
            "--operators",
            "remove,swap",
            "--name",
            "x",
        ]
    )
    assert code == 1
    assert "unknown operator 'swap'" in capsys.readouterr().err


def _small(n: int) -> Dataset:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    # one instance of each reasoning type first: 0, 50, 100, 150 are different types
    picks = [full.instances[i] for i in (0, 50, 100, 150, 1, 51)[:n]]
    return Dataset("small", full.source, full.builder, full.builder_params, tuple(picks))


def test_cli_run_interventions(tmp_path: Path, capsys):
    db = tmp_path / "s.duckdb"
    Store(db).write_dataset(_small(4))
    code = main(
        [
            "run-interventions",
            "--db",
            str(db),
            "--dataset",
            "small",
            "--backend",
            "embedded",
            "--operators",
            "remove,duplicate",
            "--duplicate-positions",
            "front",
            "--no-two-support",
            "--no-zero-retrieval",
            "--name",
            "x",
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["planned"] == 4 + 4 * 2 and summary["status"] == "done"
    variants = set(load_pairs(Store(db), ["x"])["variant"])
    assert {v.split("|")[0] for v in variants} == {"", "remove", "duplicate:front"}


def test_ollama_path_through_the_stub(tmp_path: Path):
    """The Ollama backend against the protocol stub gives the embedded reader's answers."""
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(_small(4))
    with ModelStub() as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url])
        s = run_interventions(store, "small", backend, name="ol", concurrency=2)
        chats = [p for p, _ in stub.requests if p == "/api/chat"]
    assert s.status == "done" and s.errors == 0
    assert len(chats) == s.executed > 4
    ref = run_interventions(store, "small", EmbeddedReader(), name="emb")
    assert ref.planned == s.planned
    cols = ["instance_id", "condition", "variant", "answer", "soft_correct"]
    a = load_pairs(store, ["ol"])[cols].sort_values(cols[:3]).reset_index(drop=True)
    b = load_pairs(store, ["emb"])[cols].sort_values(cols[:3]).reset_index(drop=True)
    assert a.equals(b)
    run = store.run_row("ol")
    assert run["backend"] == "ollama" and run["model_digest"] == "sha256:" + "ab" * 32
    assert run["retrieval"]["condition_id"] == "retrieved|lexical@5|chunk220/40"


def test_figures_and_tables(controlled):
    from core.figures import Selection
    from core.views.catalog import get_figure, get_table

    store, _ = controlled
    sel = Selection(dataset="c200", options={"n_resamples": 500})
    rep = intervention_report(store, "cr", n_resamples=500)
    fig, data = get_figure("cuer_paired_heatmap").build(store, sel)
    heat = fig.data[0]
    assert list(heat.y)[:2] == ["remove", "replace:easy"]
    assert list(heat.x) == [
        "Correctness ↑",
        "Answer F1 ↑",
        "Grounding ↑",
        "Conf. error ↓",
        "Trace div. ↓",
    ]
    want = {(r["operator"], r["variant"], r["metric"]): r["delta"] for r in rep["paired"]}
    got = {
        (o, v, m): d
        for o, v, m, d in zip(data["operator"], data["variant"], data["metric"], data["delta"])
    }
    assert got == pytest.approx(want)
    assert heat.z[0][0] == pytest.approx(want[("remove", "", "correctness")])
    assert heat.text[0][0].endswith("***")
    fig, data = get_figure("cuer_profile").build(store, sel)
    assert [t.name for t in fig.data] == [
        "original",
        "remove",
        "replace:easy",
        "replace:medium",
        "replace:hard",
        "duplicate:front",
        "duplicate:after",
        "duplicate:end",
        "zero_retrieval",
    ]
    assert list(fig.data[0].y)[0] == pytest.approx(rep["operators"][0]["correctness"])
    fig, data = get_figure("cuer_roles").build(store, sel)
    assert int(data["n"].sum()) == 1400 and fig.layout.barmode == "group"
    roles = get_table("cuer_roles").build(store, sel)
    assert int(roles["distractive"].sum()) == rep["roles"]["distractive"] > 0
    assert int(roles["several_flags"].sum()) == rep["roles"]["several_flags"]
    combos = get_table("cuer_role_combinations").build(store, sel)
    assert int(combos["n"].sum()) == 1400
    fig, data = get_figure("cuer_divergence").build(store, sel)
    assert len(data) == 200 * 8
    for name in ("cuer_hardness", "cuer_duplicate_positions"):
        fig, data = get_figure(name).build(store, sel)
        # one trace per metric: the five of Table 2 and the evidence divergence
        assert len(fig.data) == 6 and set(data["operator"]) >= {"original"}
    sweep = get_table("cuer_duplicate_positions").build(store, sel)
    assert list(sweep["variant"]) == ["", "front", "after", "end"]
    assert {"evidence_divergence", "pct_answer_changed", "pct_correctness_changed"} <= set(
        sweep.columns
    )
    ops = {(r["operator"], r["variant"]): r for r in rep["operators"]}
    for row in sweep.to_dict("records"):
        want = ops[(row["operator"], row["variant"])]
        assert row["pct_answer_changed"] == want["pct_answer_changed"]
        assert row["evidence_divergence"] == pytest.approx(want["evidence_divergence"])
    hard = get_table("cuer_hardness").build(store, sel)
    assert list(hard["variant"]) == ["", "easy", "medium", "hard"]
    syn = get_table("cuer_synergy").build(store, sel)
    assert syn.iloc[0]["n"] == rep["synergy"]["n"]
    examples = get_table("cuer_role_examples").build(store, sel)
    assert len(examples) == 1400 and set(examples["dataset"]) == {"c200"}
    # Metadata filters restrict the instances (50 of each reasoning type).
    only = Selection(
        dataset="c200",
        filters={"reasoning_type": ("comparison",)},
        options={"n_resamples": 200, "eps": 0.0},
    )
    prof = get_table("cuer_profile").build(store, only)
    assert set(prof["n"]) == {50}
    with pytest.raises(ValueError, match="no intervention run selected"):
        get_table("cuer_profile").build(store, Selection(dataset="nope"))


def test_interventions_page(controlled, monkeypatch):
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    store, _ = controlled
    monkeypatch.setenv("EVIDENCE_DB", str(store.path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("screens/interventions.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Interventions (CUE-R)"
    assert not at.warning, [w.value for w in at.warning]
    frames = [df.value for df in at.dataframe]
    profile = next(v for v in frames if "correctness_ci_low" in v.columns)
    assert len(profile) == 9
    paired = next(v for v in frames if "stars" in v.columns)
    assert len(paired) == 8 * 5
    examples = next(v for v in frames if "primary_role" in v.columns and "target" in v.columns)
    # the first flag in the list (constructive): every listed item carries it, some others too
    assert set(examples["is_constructive"]) == {True} and set(examples["operator"]) == {"remove"}
    assert len(examples) > 0 and (examples["n_flags"] >= 2).any()
    flags = next(v for v in frames if "several_flags" in v.columns)
    assert int(flags["n"].sum()) == 1400
    sweep = next(
        v
        for v in frames
        if "pct_answer_changed" in v.columns and len(v) == 4 and "front" in set(v["variant"])
    )
    assert "evidence_divergence" in sweep.columns
    assert at.selectbox(key="interventions.correctness_axis").value == "soft"
    at.selectbox(key="interventions.role").set_value("distractive").run()
    assert not at.exception
    examples = next(
        v.value
        for v in at.dataframe
        if "primary_role" in v.value.columns and "target" in v.value.columns
    )
    assert set(examples["is_distractive"]) == {True} and len(examples) > 0
    at.selectbox(key="interventions.correctness_axis").set_value("strict").run()
    assert not at.exception and not at.warning
    profile = next(df.value for df in at.dataframe if "correctness_ci_low" in df.value.columns)
    assert set(profile["correctness_axis"]) == {"strict"}
    at.number_input(key="interventions.tau").set_value(0.9).run()
    assert not at.exception


def test_real_hotpotqa_sample(tmp_path: Path, capsys):
    """The 53 real HotpotQA dev examples: every operator planned where it applies."""
    from conftest import shared_fixture

    from core.datasets.importers import read_dataset

    path = shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json")
    store = Store(tmp_path / "h.duckdb")
    store.write_dataset(read_dataset(path, fmt="hotpotqa", name="hp").dataset)
    s = run_interventions(store, "hp", EmbeddedReader(), name="h")
    assert s.status == "done" and s.errors == 0
    rep = intervention_report(store, "h", n_resamples=500)
    n = {(r["operator"], r["variant"]): (r["n"], r["not_applicable"]) for r in rep["operators"]}
    # Replacements are whole non-support passages (seed 004 §5.6): every example with one
    # besides the target gets all three levels; one example holds only its two supporting
    # paragraphs, so replace cannot apply there and is counted beside the Replace rows.
    assert n == {
        ("original", ""): (53, 0),
        ("remove", ""): (53, 0),
        ("replace", "easy"): (52, 1),
        ("replace", "medium"): (52, 1),
        ("replace", "hard"): (52, 1),
        ("duplicate", "end"): (53, 0),
        ("zero_retrieval", ""): (53, 0),
    }
    paired = {(r["operator"], r["variant"], r["metric"]): r for r in rep["paired"]}
    assert paired[("replace", "hard", "correctness")]["not_applicable"] == 1
    assert paired[("remove", "", "correctness")]["not_applicable"] == 0
    assert main(["report", "interventions", "--db", str(store.path), "--run", "h"]) == 0
    assert "n/a: replace could not apply to 1 targeted instance(s)" in capsys.readouterr().out
    out = tmp_path / "profile.csv"
    assert (
        main(
            [
                "export",
                "table",
                "cuer_profile",
                "--db",
                str(store.path),
                "--runs",
                "h",
                "--format",
                "csv",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out).fillna({"variant": ""})
    got = dict(zip(zip(table["operator"], table["variant"]), table["not_applicable"], strict=True))
    assert got[("replace", "medium")] == 1 and got[("remove", "")] == 0
    gold = {i.instance_id: set(i.gold_ids) for i in store.load_instances("hp")}
    preds = load_pairs(store, ["h"])
    for iid, meta in zip(preds["instance_id"], preds["meta"]):
        m = json.loads(meta)
        if m.get("operator") == "replace":
            assert not set(m["replacement_passages"]) & (gold[iid] | {m["target"]})
            assert m["pool"] == "passages" and m["planner"] == 2
    # The plan's version is recorded with the run: a run planned by the earlier planner (no
    # version) is refused on resume instead of mixing old and new replacements.
    row = store.run_row("h")
    assert row["retrieval"]["cuer_planner"] == 2
    old = {k: v for k, v in row["retrieval"].items() if k != "cuer_planner"}
    store.save_run({"run_id": "h", "retrieval": old})
    with pytest.raises(ValueError, match="exists with another retrieval setting"):
        run_interventions(store, "hp", EmbeddedReader(), name="h")
