"""DOLCE probe planning, running through the engine and ``report dolce`` (issue 7)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from conftest import shared_fixture

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.datasets.importers import read_dataset
from core.dolce import is_idk, outcomes_from_probes
from core.dolce.probes import (
    MAX_SPANS,
    STRATEGY,
    exponential_ladder,
    paper_stride,
    parse_strategy,
    parse_variant,
    plan_line,
    plan_probes,
    render_span,
    span_starts,
    split_sentences,
    split_units,
    summarize_plan,
)
from core.execution.prompts import PROBE_INSTRUCTION, prompt_hash
from core.scoring.parsing import parse_reply
from core.store import Store
from core.types import Dataset, Instance, Passage

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
        "One fish.",
        "Two fish!",
        "Red fish?",
        "Blue fish.",
        FACT,
        "Nothing here.",
    ]
    assert [u.passage_id for u in split_units(_instance(), "passage")] == [
        "p0001",
        "p0002",
        "p0003",
    ]
    with pytest.raises(ValueError, match="unknown units"):
        split_units(_instance(), "token")


def test_span_starts_random_is_seeded_and_take_every_slides():
    rnd = {"strategy": "random", "per_length": 5}
    a = span_starts(100, 10, seed=1, key="x", **rnd)
    assert a == span_starts(100, 10, seed=1, key="x", **rnd)
    assert a != span_starts(100, 10, seed=2, key="x", **rnd)
    assert len(a) == 5 and len(set(a)) == 5 and all(0 <= s <= 90 for s in a)
    assert span_starts(10, 8, **rnd) == [0, 1, 2]  # only 3 starts exist
    assert span_starts(10, 0, **rnd) == [0]
    assert span_starts(10, 3, strategy="take-every-3") == [0, 3, 6]
    assert span_starts(1000, 1, strategy="take-every-1", max_spans=2) == list(range(1000))
    assert parse_strategy("take-every-5") == ("take-every", 5)
    assert parse_strategy("random") == ("random", None)
    assert parse_strategy("paper") == ("paper", None)
    with pytest.raises(ValueError, match="'paper', 'random' or 'take-every-N'"):
        parse_strategy("every-5")
    with pytest.raises(ValueError, match=r"C must be in \[0, 10\]"):
        span_starts(10, 11)
    with pytest.raises(ValueError, match="max_spans must be >= 1"):
        span_starts(10, 1, max_spans=0)


def test_paper_sampling_is_the_default_all_spans_then_every_fifth_then_capped():
    assert STRATEGY.default == "paper" and MAX_SPANS.default == 100
    # L <= max_spans: every start, "shifting one unit at a time" (seed §3.1).
    assert span_starts(6, 2) == [0, 1, 2, 3, 4]
    assert span_starts(100, 1) == list(range(100))  # L = 100 = the cap: still all 100
    assert span_starts(6, 0) == [0] and span_starts(6, 6) == [0]
    # L > max_spans: every 5th start (App. K.1). L = 101, C = 1: starts 0, 5, ..., 100 -> 21.
    assert span_starts(101, 1) == list(range(0, 101, 5)) and len(span_starts(101, 1)) == 21
    # L = 284 (a 4K controlled context), C = 50: 235 starts, every 5th: 0..230 -> 47.
    assert len(span_starts(284, 50)) == 47 and span_starts(284, 50)[-1] == 230
    # Past the cap: L = 1124, C = 1: every 5th would be 225 > 100 spans, so the stride is
    # ceil(1124 / 100) = 12: starts 0, 12, ..., 1116 -> 94 spans.
    assert paper_stride(1124, 1) == 12
    assert span_starts(1124, 1) == list(range(0, 1124, 12)) and len(span_starts(1124, 1)) == 94
    # Small caps, by hand: max_spans 3, L = 20.
    assert span_starts(20, 1, max_spans=3) == [0, 7, 14]  # 20 starts: ceil(20/5)=4 > 3
    assert span_starts(20, 10, max_spans=3) == [0, 5, 10]  # 11 starts: every 5th gives 3
    assert span_starts(3, 1, max_spans=3) == [0, 1, 2]  # L = 3 <= 3: all
    assert paper_stride(6, 2) == 1 and paper_stride(101, 1) == 5 and paper_stride(20, 1, 3) == 7
    # The seed does not move paper spans.
    assert span_starts(284, 10, seed=1, key="a") == span_starts(284, 10, seed=2, key="b")
    for L in (1, 7, 99, 100, 101, 499, 500, 501, 2500, 10_000):
        for C in exponential_ladder(L):
            got = span_starts(L, C)
            assert 1 <= len(got) <= 100 and got == sorted(set(got)) and got[-1] <= L - C


def test_paper_sampling_cost_per_instance():
    def total(L, strategy="paper"):
        return sum(len(span_starts(L, C, strategy=strategy)) for C in exponential_ladder(L))

    # L = 284: 1 + 57 + 57 + 56 + 55 + 53 + 47 + 37 + 17 + 1; all spans:
    # 1 + 284 + 283 + 280 + 275 + 265 + 235 + 185 + 85 + 1.
    assert (total(284), total(284, "take-every-1")) == (381, 1894)
    # L = 1124 (16K tokens): 1 + 94 + 94 + 94 + 93 + 93 + 98 + 94 + 93 + 90 + 25 + 1.
    assert [len(span_starts(1124, C)) for C in exponential_ladder(1124)] == [
        1,
        94,
        94,
        94,
        93,
        93,
        98,
        94,
        93,
        90,
        25,
        1,
    ]
    assert (total(1124), total(1124, "take-every-1")) == (870, 9364)
    assert (total(2250), total(2250, "take-every-1")) == (1029, 20875)


def test_hotpotqa_sample_contexts_get_all_spans():
    path = shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json")
    instances = read_dataset(path, "hotpotqa", "h").dataset.instances
    lengths = [len(split_units(i)) for i in instances]
    assert (min(lengths), max(lengths)) == (11, 99)  # every one <= the cap of 100
    for inst in instances[:5]:
        assert [c.variant for c in plan_probes(inst)] == [
            c.variant for c in plan_probes(inst, strategy="take-every-1")
        ]


def _short_instance() -> Instance:
    return Instance("q2", "Which?", "B", passages=(Passage("p0001", 0, "T", "A. B. C.", "d"),))


def test_plan_summary_counts_spans_per_length():
    calls = plan_probes(_instance())  # L = 6 <= 100: all spans, 1 + 6 + 5 + 2 + 1
    assert len(calls) == 15
    short = plan_probes(_short_instance())  # L = 3: ladder 0, 1, 2, 3 -> 1 + 3 + 2 + 1
    assert len(short) == 7
    summary = summarize_plan(calls + short)
    assert summary["instances"] == 2 and summary["probes"] == 22
    assert summary["spans_per_length"] == [
        {"C": 0, "spans": 2, "instances": 2, "min": 1, "max": 1},
        {"C": 1, "spans": 9, "instances": 2, "min": 3, "max": 6},
        {"C": 2, "spans": 7, "instances": 2, "min": 2, "max": 5},
        {"C": 5, "spans": 2, "instances": 1, "min": 2, "max": 2},
        {"C": "L", "spans": 2, "instances": 2, "min": 1, "max": 1},
    ]
    assert plan_line(summary, "paper", max_spans=100) == (
        "probe plan: 2 instances, 22 probes (strategy paper, max_spans 100); spans per length: "
        "C=0: 2 (1 per instance), C=1: 9 (3-6 per instance), C=2: 7 (2-5 per instance), "
        "C=5: 2 (2 per instance), C=L: 2 (1 per instance)"
    )
    assert summarize_plan([]) == {"instances": 0, "probes": 0, "spans_per_length": []}


def _write(db, *instances: Instance) -> None:
    Store(db).write_dataset(Dataset("tiny", "test", "test", {}, instances))


def test_cli_run_probes_prints_spans_per_length_and_records_the_strategy(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    _write(db, _instance())
    base = ["run-probes", "--db", str(db), "--dataset", "tiny", "--backend", "embedded"]
    assert main(base + ["--name", "paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "probe plan: 1 instances, 15 probes (strategy paper, max_spans 100); spans per length: "
        "C=0: 1 (1 per instance), C=1: 6 (6 per instance), C=2: 5 (5 per instance), "
        "C=5: 2 (2 per instance), C=L: 1 (1 per instance)"
    )
    assert out[1].startswith("probe run 'paper' done: 15 planned, 15 executed")
    probe = Store(db).run_row("paper")["retrieval"]["probe"]
    assert probe == {
        "units": "sentence",
        "per_length": 5,
        "strategy": "paper",
        "seed": 0,
        "max_spans": 100,
    }
    # Another cap under the same name is another plan: refused in one line, no plan shown.
    assert main(base + ["--max-spans", "2", "--name", "paper"]) == 1
    got = capsys.readouterr()
    assert got.out == "" and "exists with another retrieval setting" in got.err
    assert len(got.err.strip().splitlines()) == 1
    # The cap, from the command line: max_spans 2 < L = 6, so every 5th start; C = 1 has
    # 6 starts -> 0, 5; C = 2 has 5 -> 0; C = 5 has 2 -> 0; with C = 0 and C = L: 6 probes.
    assert main(base + ["--max-spans", "2", "--name", "capped", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["planned"] == 6 and got["plan"]["max_spans"] == 2
    assert [(r["C"], r["spans"]) for r in got["plan"]["spans_per_length"]] == [
        (0, 1),
        (1, 2),
        (2, 1),
        (5, 1),
        ("L", 1),
    ]
    # The old default stays selectable by name: 2 random spans per length -> 1 + 2*3 + 1.
    assert main(base + ["--strategy", "random", "--per-length", "2", "--name", "rnd"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "probe plan: 1 instances, 8 probes (strategy random, per_length 2); spans per length: "
        "C=0: 1 (1 per instance), C=1: 2 (2 per instance)"
    )
    probe = Store(db).run_row("rnd")["retrieval"]["probe"]
    assert probe == {"units": "sentence", "per_length": 2, "strategy": "random", "seed": 0}


def test_plan_probes_keys_prompts_and_meta():
    inst = _instance()
    calls = plan_probes(inst, strategy="random", per_length=2, seed=0)
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
    assert f"[passage_id: p0002] Title: Beta\nBlue fish. {FACT}" in (full.messages[1]["content"])
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
    for c in plan_probes(inst, lengths=[1]):  # L = 6: all six 1-sentence spans
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
    assert main(args + ["--name", "probe", "--json"]) == 0  # the default: paper sampling
    return db, ds


def test_run_probes_stores_every_planned_call_and_resumes(probed, capsys):
    db, ds = probed
    # 9 contexts of 276..292 sentences, all > 100 units: every 5th start at every length.
    lengths = sorted(len(split_units(i)) for i in ds.instances)
    assert lengths == [276, 280, 280, 282, 284, 286, 289, 289, 292]
    planned = sum(len(plan_probes(i)) for i in ds.instances)
    frame = Store(db).probe_frame(["probe"])
    assert len(frame) == planned
    assert frame["f1_relaxed"].notna().all()
    meta = json.loads(frame["meta"].iloc[0])
    assert set(meta) == {"units", "C", "start", "L"}
    capsys.readouterr()
    args = ["run-probes", "--db", str(db), "--dataset", "ctl", "--backend", "embedded"]
    assert main(args + ["--name", "probe", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_existing"] == planned and summary["executed"] == 0
    rows = {r["C"]: r for r in summary["plan"]["spans_per_length"]}
    assert summary["plan"]["strategy"] == "paper" and summary["plan"]["probes"] == planned
    # C = 1: ceil(L / 5) starts per instance: 56 + 56 + 56 + 57 + 57 + 58 + 58 + 58 + 59.
    assert rows[1] == {"C": 1, "spans": 515, "instances": 9, "min": 56, "max": 59}
    assert rows[1]["spans"] == sum(math.ceil(n / 5) for n in lengths)
    # C = 200: L - 199 starts (77 .. 93), every 5th: 16 + 17 * 4 + 18 * 3 + 19.
    assert rows[200] == {"C": 200, "spans": 157, "instances": 9, "min": 16, "max": 19}
    assert rows[0]["spans"] == rows["L"]["spans"] == 9


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
    assert cats <= {"I", "II", "not covered"}


def test_report_dolce_errors_are_one_line(probed, capsys, tmp_path):
    db, _ = probed
    assert main(["report", "dolce", "--db", str(db), "--run", "nope"]) == 1
    assert "no runs matching 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run-probes",
                "--db",
                str(db),
                "--dataset",
                "ctl",
                "--backend",
                "embedded",
                "--strategy",
                "every",
                "--name",
                "x",
            ]
        )
    assert exc.value.code == 2
    assert (
        main(
            [
                "run-probes",
                "--db",
                str(db),
                "--dataset",
                "nope",
                "--backend",
                "embedded",
                "--name",
                "x",
            ]
        )
        == 1
    )
    assert "no dataset named 'nope'" in capsys.readouterr().err


def test_dolce_figures_and_tables(probed):
    from core.figures import Selection
    from core.views.catalog import get_figure, get_table

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
    assert len(fig.data) == 6 and list(tasks["task"]) == ["ctl"]  # I-V and not covered
    first = data["problem"].iloc[0]
    fig, curve = get_figure("dolce_outcome_curve").build(
        store, Selection(dataset="ctl", options={"problem": first})
    )
    assert (
        list(curve["C"]) == sorted(curve["C"])
        and curve["n"].sum() == (data.loc[data["problem"] == first, "n_obs"].iloc[0])
    )
    problems = get_table("dolce_problems").build(
        store, Selection(dataset="ctl", options={"lam_p": 1e6, "k_p": -1})
    )
    assert set(problems["category"]) <= {"I", "II", "not covered"}
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
    at.switch_page("screens/dolce.py")
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
    assert set(problems["category"]) <= {"I", "II", "not covered"}
