"""DOLCE probe planning, running through the engine and ``report dolce`` (issue 7)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.dolce import is_idk, outcomes_from_probes
from core.parsing import parse_reply
from core.probes import (
    exponential_ladder,
    parse_strategy,
    parse_variant,
    plan_probes,
    render_span,
    span_starts,
    split_sentences,
    split_units,
)
from core.prompts import PROBE_INSTRUCTION, prompt_hash
from core.store import Store
from core.types import Instance, Passage

FACT = "Draco Labs 07064 developed Model Gamma 01805."


def _instance() -> Instance:
    passages = (
        Passage("p0001", 0, "Alpha", "One fish. Two fish! Red fish?", "d1"),
        Passage("p0002", 1, "Beta", f"Blue fish. {FACT}", "d2", "gold", True),
        Passage("p0003", 2, "Gamma", "Nothing here.", "d3"),
    )
    return Instance(
        "q1", "Which lab developed Model Gamma 01805?", "Draco Labs 07064", passages=passages
    )


def test_ladder_and_sentence_units():
    assert exponential_ladder(1) == [0, 1]
    assert exponential_ladder(6) == [0, 1, 2, 5, 6]
    assert exponential_ladder(250) == [0, 1, 2, 5, 10, 20, 50, 100, 200, 250]
    assert exponential_ladder(1000) == [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    with pytest.raises(ValueError, match="positive integer"):
        exponential_ladder(0)
    got = split_sentences('He said "Go." Then left. Done')
    assert got == ['He said "Go."', "Then left.", "Done"]
    units = split_units(_instance())
    assert [u.text for u in units] == [
        "One fish.", "Two fish!", "Red fish?", "Blue fish.", FACT,
        "Nothing here.",
    ]  # fmt: skip
    assert [u.passage_id for u in split_units(_instance(), "passage")] == [
        "p0001", "p0002", "p0003"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown units"):
        split_units(_instance(), "token")


def test_span_starts_random_is_seeded_and_take_every_slides():
    a = span_starts(100, 10, per_length=5, seed=1, key="x")
    assert a == span_starts(100, 10, per_length=5, seed=1, key="x")
    assert a != span_starts(100, 10, per_length=5, seed=2, key="x")
    assert len(a) == 5 and len(set(a)) == 5 and all(0 <= s <= 90 for s in a)
    assert span_starts(10, 8, per_length=5) == [0, 1, 2]  # only 3 starts exist
    assert span_starts(10, 0, per_length=5) == [0]
    assert span_starts(10, 3, strategy="take-every-3") == [0, 3, 6]
    assert parse_strategy("take-every-5") == 5 and parse_strategy("random") is None
    with pytest.raises(ValueError, match="take-every-N"):
        parse_strategy("every-5")
    with pytest.raises(ValueError, match=r"C must be in \[0, 10\]"):
        span_starts(10, 11)


def test_plan_probes_keys_prompts_and_meta():
    inst = _instance()
    calls = plan_probes(inst, per_length=2, seed=0)
    # L = 6: ladder 0, 1, 2, 5, 6 -> 1 + 2 + 2 + 2 + 1 calls.
    assert len(calls) == 8
    assert [c.variant for c in calls][:1] == ["C=0|start=0"]
    assert calls[-1].variant == "C=6|start=0"
    assert len({c.variant for c in calls}) == 8
    for c in calls:
        C, start = parse_variant(c.variant)
        assert c.condition == "probe"
        assert c.meta == {"units": "sentence", "C": C, "start": start, "L": 6}
        assert PROBE_INSTRUCTION in c.messages[0]["content"]
        assert c.prompt_hash == prompt_hash(c.messages)
        user = c.messages[1]["content"]
        assert "Draco" not in user or "Draco Labs 07064 developed" in user
        assert "gold" not in user and "q1" not in user
    empty = calls[0]
    assert empty.input_passage_ids == () and "No passages are given" in empty.messages[1]["content"]
    full = calls[-1]
    assert full.input_passage_ids == ("p0001", "p0002", "p0003")
    assert f"[passage_id: p0002] Title: Beta\nBlue fish. {FACT}" in (
        full.messages[1]["content"]
    )
    assert render_span(split_units(inst)[3:5]) == [
        f"[passage_id: p0002] Title: Beta\nBlue fish. {FACT}"
    ]
    with pytest.raises(ValueError, match="must be in"):
        plan_probes(inst, lengths=[0, 7])
    with pytest.raises(ValueError, match="not a probe variant"):
        parse_variant("C=1")


def test_embedded_reader_answers_only_when_the_span_holds_the_fact():
    inst = _instance()
    reader = EmbeddedReader()
    by_span = {}
    for c in plan_probes(inst, lengths=[1], per_length=6):
        parsed = parse_reply(reader.generate(c.messages).text, c.input_passage_ids)
        by_span[parse_variant(c.variant)[1]] = parsed.answer
    assert by_span[4] == "Draco Labs 07064"
    assert all(is_idk(a) for s, a in by_span.items() if s != 4)


def test_outcomes_from_probes_reads_variant_meta_and_drops_failures():
    frame = pd.DataFrame(
        {
            "run": "r",
            "dataset": "d",
            "instance_id": ["a", "a", "a", "b"],
            "variant": ["C=1|start=3", "C=5|start=0", "C=2|start=0", "C=4|start=0"],
            "meta": [json.dumps({"L": 9}), json.dumps({"L": 9}), None, None],
            "answer": ["unanswerable", "x", "y", "z"],
            "error": [None, None, "timeout", None],
            "f1_relaxed": [0.0, 1.0, 0.0, 0.5],
            "question": "q",
        }
    )
    out = outcomes_from_probes(frame)
    assert list(out["problem"]) == ["a", "a", "b"]
    assert list(out["C"]) == [1, 5, 4] and list(out["start"]) == [3, 0, 0]
    assert list(out["L"]) == [9, 9, 4]  # b has no meta: its largest C
    assert list(out["idk"]) == [True, False, False]
    assert list(out["task"]) == ["d", "d", "d"]
    with pytest.raises(ValueError, match="unknown task column"):
        outcomes_from_probes(frame, task_by="nope")


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """A 4K controlled subset (single-hop and multi-hop, no distractors) probed by the reader."""
    db = tmp_path_factory.mktemp("dolce") / "store.duckdb"
    ds = build_controlled(
        "controlled-200",
        seed=42,
        name="ctl",
        subset={
            "context_length": [4000],
            "distractor_similarity": ["none"],
            "reasoning_type": ["single_hop", "multi_hop"],
        },
    )
    Store(db).write_dataset(ds)
    args = ["run-probes", "--db", str(db), "--dataset", "ctl", "--backend", "embedded"]
    assert main(args + ["--per-length", "30", "--name", "probe", "--json"]) == 0
    return db, ds


def test_run_probes_stores_every_planned_call_and_resumes(probed, capsys):
    db, ds = probed
    planned = sum(len(plan_probes(i, per_length=30)) for i in ds.instances)
    frame = Store(db).probe_frame(["probe"])
    assert len(frame) == planned
    assert frame["f1_relaxed"].notna().all()
    meta = json.loads(frame["meta"].iloc[0])
    assert set(meta) == {"units", "C", "start", "L"}
    capsys.readouterr()
    args = ["run-probes", "--db", str(db), "--dataset", "ctl", "--backend", "embedded"]
    assert main(args + ["--per-length", "30", "--name", "probe", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_existing"] == planned and summary["executed"] == 0


def test_report_dolce_single_hop_retrieval_more_often_than_multi_hop(probed, capsys):
    db, ds = probed
    capsys.readouterr()
    assert main(["report", "dolce", "--db", str(db), "--run", "probe", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    problems = pd.DataFrame(report["problems"])
    assert len(problems) == len(ds.instances)
    for col in ("lam", "k", "scenario", "category", "p_oracle", "log_likelihood", "question"):
        assert problems[col].notna().all(), col
    share = problems.groupby("reasoning_type")["category"].apply(lambda c: (c == "III").mean())
    assert share["single_hop"] > share["multi_hop"]
    (task,) = report["tasks"]
    assert task["task"] == "ctl" and task["n"] == len(ds.instances)
    # User thresholds: everything with lambda <= 10**6 and k > -1 is "easy" (II) or I.
    capsys.readouterr()
    args = ["report", "dolce", "--db", str(db), "--run", "probe", "--json"]
    assert main(args + ["--lam-p", "1000000", "--k-p", "-1"]) == 0
    cats = {p["category"] for p in json.loads(capsys.readouterr().out)["problems"]}
    assert cats <= {"I", "II"}


def test_report_dolce_errors_are_one_line(probed, capsys, tmp_path):
    db, _ = probed
    assert main(["report", "dolce", "--db", str(db), "--run", "nope"]) == 1
    assert "no runs matching 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run-probes", "--db", str(db), "--dataset", "ctl", "--backend", "embedded",
              "--strategy", "every", "--name", "x"])  # fmt: skip
    assert exc.value.code == 2
    assert main(["run-probes", "--db", str(db), "--dataset", "nope", "--backend", "embedded",
                 "--name", "x"]) == 1  # fmt: skip
    assert "no dataset named 'nope'" in capsys.readouterr().err


def test_dolce_figures_and_tables(probed):
    from core.catalog import get_figure, get_table
    from core.figures import Selection

    db, ds = probed
    store = Store(db)
    sel = Selection(dataset="ctl")
    fig, data = get_figure("dolce_lambda_k_map").build(store, sel)
    assert len(data) == len(ds.instances)
    assert sum(len(t.x) for t in fig.data) == len(ds.instances)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert {t.name.split(":")[0] for t in fig.data} == set(data["category"])
    assert all("<br>" in s for t in fig.data for s in t.text)  # hover: id, question, task
    fig, tasks = get_figure("dolce_categories").build(store, sel)
    assert len(fig.data) == 5 and list(tasks["task"]) == ["ctl"]
    first = data["problem"].iloc[0]
    fig, curve = get_figure("dolce_outcome_curve").build(
        store, Selection(dataset="ctl", options={"problem": first})
    )
    assert list(curve["C"]) == sorted(curve["C"]) and curve["n"].sum() == (
        data.loc[data["problem"] == first, "n_obs"].iloc[0]
    )
    problems = get_table("dolce_problems").build(
        store, Selection(dataset="ctl", options={"lam_p": 1e6, "k_p": -1})
    )
    assert set(problems["category"]) <= {"I", "II"}
    only = get_table("dolce_tasks").build(
        store, Selection(dataset="ctl", filters={"reasoning_type": ("multi_hop",)})
    )
    assert only["n"].tolist() == [sum(i.reasoning_type == "multi_hop" for i in ds.instances)]


def test_dolce_page_renders_map_categories_and_curve(probed, monkeypatch):
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    db, ds = probed
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/dolce.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value.startswith("DOLCE")
    assert len(at.get("plotly_chart")) == 3  # lambda-k map, categories, outcome curve
    problems = next(df.value for df in at.dataframe if "category" in df.value.columns)
    assert len(problems) == len(ds.instances)
    assert at.selectbox(key="dolce.problem").value == problems["problem"].iloc[0]
    # Editing a threshold re-categorizes every problem.
    at.number_input(key="dolce.lam_p").set_value(1_000_000.0)
    at.number_input(key="dolce.k_p").set_value(-1.0).run()
    assert not at.exception, [e.value for e in at.exception]
    problems = next(df.value for df in at.dataframe if "category" in df.value.columns)
    assert set(problems["category"]) <= {"I", "II"}
