"""Judge rubrics and judge runs (issue 20 item 1): templates, parsers, segments, the lexical
baseline, and judge runs through the Ollama stub that cache, resume and store errors as errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from model_stub import ModelStub
from test_cli import run_cli
from test_crux import _instance

from core.backends import make_backend
from core.crux.metrics import JUDGE_TEMPLATE
from core.execution.runs import run_conditions
from core.judges.lexical import LexicalJudge
from core.judges.rubrics import (
    RUBRICS,
    ac_from_score,
    canonical_segments,
    count_tokens,
    get_rubric,
    parse_binary,
    parse_crux,
    parse_score03,
)
from core.judges.runs import make_judge, plan_judgments, run_judge
from core.store import Store
from core.types import Dataset, Instance

_SQ = {"s1": "what alpha one?", "s2": "what beta three?", "s3": "what zeta?"}


def _contract(answer: str) -> str:
    return json.dumps({"answer": answer, "evidence_ids": [], "confidence": 1, "explanation": ""})


def test_rubrics_are_versioned_and_hashed_and_crux_keeps_figure_8():
    assert set(RUBRICS) == {
        "crux-answerability",
        "crux-coverage",
        "authtrace-correctness",
        "authtrace-evidence",
    }
    ans = get_rubric("crux-answerability")
    assert ans.version == "1" and ans.templates["user"] == JUDGE_TEMPLATE and ans.scale == (0, 5)
    assert len({r.hash for r in RUBRICS.values()}) == 4
    assert len(ans.hash) == 64 and ans.hash == get_rubric("crux-answerability").hash
    assert get_rubric("authtrace-correctness").scale == (0, 3)
    with pytest.raises(ValueError, match="unknown rubric 'nope'; choose from crux-answerability"):
        get_rubric("nope")


def test_parsers_read_bare_json_and_answer_contract_replies():
    assert parse_crux("4") == (4.0, None)
    assert parse_crux("Rating: 3") == (3.0, None)
    assert parse_crux(_contract("5")) == (5.0, None)
    rating, err = parse_crux("the context is great")
    assert rating == 0.0 and "regarded as 0" in err  # seed 002 Fig. 8: wrong format -> 0
    assert parse_score03('{"score": 2, "reason": "x"}') == (2.0, None)
    assert parse_score03(_contract('{"score": 3, "reason": "ok"}')) == (3.0, None)
    assert parse_score03(_contract("1")) == (1.0, None)
    assert parse_score03('{"score": 7}') == (None, "score 7 is not an integer 0-3")
    assert parse_score03("no idea")[0] is None  # AuthTrace: unreadable -> no rating, flagged
    assert parse_binary("covered")('{"covered": 1, "reason": "r"}') == (1.0, None)
    assert parse_binary("matched")(_contract('{"matched": 0, "matched_gold_indices": []}')) == (
        0.0,
        None,
    )


def test_ac_maps_0_3_to_0_100_as_authtrace_does():
    assert [ac_from_score(s) for s in (0, 1, 2, 3)] == pytest.approx([0, 100 / 3, 200 / 3, 100])


def test_canonical_segments_follow_authtrace_k2():
    assert count_tokens("中文 abc d3, e") == 5  # 2 CJK characters + abc + d3 + e
    sents = [f"s{i} " + " ".join(["w"] * 28) + " end." for i in range(10)]  # 30 tokens each
    ten = canonical_segments([" ".join(sents)])
    assert [count_tokens(s) for s in ten] == [120, 120, 60]  # target 120; 60 >= min 40 stays
    nine = canonical_segments([" ".join(sents[:9])])
    assert [count_tokens(s) for s in nine] == [120, 150]  # trailing 30 < 40 joins (150 <= 180)
    long = canonical_segments([" ".join(f"x{i}" for i in range(400))])
    assert [count_tokens(s) for s in long] == [180, 180, 40]  # hard split at 180 tokens
    assert canonical_segments(["Same text.", "Same text."]) == ["Same text."]  # deduplicated


def test_lexical_judge_maps_overlap_to_each_scale():
    j = LexicalJudge()
    assert j.describe()["baseline"] is True and "not a language model" in j.describe()["label"]
    # overlap of {alpha, beta, gamma} in the context: 2/3 -> rating 4 (>= 0.6, < 0.8)
    assert (
        j.rate("crux", {"question": "What is alpha beta gamma?", "context": "alpha and beta"}).text
        == "4"
    )
    assert j.rate("crux", {"question": "alpha", "context": "nothing"}).text == "0"
    ac = json.loads(
        j.rate("ac", {"claims": ["Paris"], "reference_answer": "Paris", "answer": "Paris"}).text
    )
    assert ac["score"] == 3
    assert (
        json.loads(
            j.rate("ac", {"claims": ["Paris"], "reference_answer": "Paris", "answer": ""}).text
        )["score"]
        == 0
    )
    er = json.loads(j.rate("er", {"gold_unit": "a b c d", "pack": ["a b", "c x"]}).text)
    assert er["covered"] == 1  # 3/4 of the unit's tokens are in the pack
    ep = json.loads(j.rate("ep", {"segment": "a b x y z", "gold_units": ["a b c"]}).text)
    assert ep["matched"] == 0  # 2/5 of the segment's tokens are in a gold unit
    assert j.generate([{"role": "user", "content": "x"}]).error is not None


@pytest.fixture
def tiny(tmp_path):
    """tests/test_crux.py's instance q1 with three sub-questions, q2 without any."""
    db = tmp_path / "j.duckdb"
    store = Store(db)
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_instance(), other)))
    sq = pd.DataFrame([{"instance_id": "q1", "sq_id": s, "text": t} for s, t in _SQ.items()])
    empty = pd.DataFrame(columns=["instance_id", "sq_id", "passage_id", "rating", "judge"])
    store.write_crux_judgments("tiny", sq, empty)
    return db


def _crux_rating(messages):
    text = messages[-1]["content"]
    return "4" if text.startswith("Instruction: Determine whether") else None


def test_judge_run_through_the_ollama_stub_caches_resumes_and_feeds_report_crux(tiny):
    args = (
        "judge",
        "crux-answerability",
        "--dataset",
        "tiny",
        "--backend",
        "ollama",
        "--model",
        "stub-model",
        "--name",
        "ja",
        "--json",
        "--db",
        tiny,
    )
    with ModelStub() as stub:
        stub.answer_for = _crux_rating
        first = run_cli(*args, "--host", stub.url)
        assert first.returncode == 0, first.stderr
        again = run_cli(*args, "--host", stub.url)
        assert again.returncode == 0, again.stderr
        n_chats = sum(p.endswith("/api/chat") for p in stub.paths())
    done, redo = json.loads(first.stdout), json.loads(again.stdout)
    # 3 sub-questions x 2 gold passages of q1 (q2 has no sub-questions)
    assert (done["planned"], done["executed"], done["errors"], done["status"]) == (6, 6, 0, "done")
    assert (redo["executed"], redo["cached"], redo["skipped_existing"]) == (0, 0, 6)
    assert n_chats == 6  # the rerun made no call
    store = Store(tiny)
    j = store.judgments_frame(runs=["ja"])
    assert len(j) == 6 and set(j["rating"]) == {4.0} and j["error"].isna().all()
    assert set(j["judge_model"]) == {"ollama:stub-model"} and set(j["rubric_version"]) == {"1"}
    assert set(j["rubric_hash"]) == {get_rubric("crux-answerability").hash}
    assert json.loads(j["raw_reply"].iloc[0])["answer"] == "4"
    row = store.run_row("ja")
    assert (row["kind"], row["status"], row["n_done"], row["n_errors"]) == ("judge", "done", 6, 0)
    _, ratings = store.crux_judgments("tiny")
    assert set(ratings["judge"]) == {"ja"} and len(ratings) == 6
    report = run_cli(
        "report",
        "crux",
        "--dataset",
        "tiny",
        "--retrievers",
        "oracle",
        "--k",
        "1",
        "--chunk-size",
        "10",
        "--overlap",
        "0",
        "--judge",
        "ja",
        "--resamples",
        "50",
        "--json",
        "--db",
        tiny,
    )
    assert report.returncode == 0, report.stderr
    assert "judge:ja" in json.loads(report.stdout)["answerability_counts"]


def test_a_failed_judge_call_is_stored_as_an_error_never_a_rating(tiny):
    store = Store(tiny)
    with ModelStub() as stub:
        stub.answer_for = _crux_rating
        stub.queue_modes("not-json")  # the first chat gets a non-JSON body
        judge = make_backend(
            "ollama", "stub-model", hosts=[stub.url], options={"temperature": 0, "seed": 0}
        )
        first = run_judge(store, "crux-answerability", judge, name="je", dataset="tiny")
        j = store.judgments_frame(runs=["je"])
        failed = j[j["error"].notna()]
        assert first.errors == 1 and len(failed) == 1 and failed["rating"].isna().all()
        assert first.status == "partial" and store.run_row("je")["n_errors"] == 1
        before = sum(p.endswith("/api/chat") for p in stub.paths())
        again = run_judge(store, "crux-answerability", judge, name="je", dataset="tiny")
        after = sum(p.endswith("/api/chat") for p in stub.paths())
    assert after - before == 1 and again.executed == 1 and again.skipped_existing == 5
    assert again.status == "done" and store.judgments_frame(runs=["je"])["error"].isna().all()
    _, ratings = store.crux_judgments("tiny")
    assert len(ratings) == 6 and set(ratings["rating"]) == {4}  # no error became a rating


def test_every_rubric_runs_offline_with_the_lexical_judge_and_deleting_runs_cleans_up(tiny):
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
    lex = make_judge("embedded")
    _, plan, _ = plan_judgments(store, "authtrace-evidence", run="r1")
    ers = [p for p in plan if p.item.startswith("er:")]
    # ER: one call per gold passage (2) per packed prediction (retrieved, oracle, full_context)
    # of the 2 instances
    assert len(ers) == 12 and {p.condition for p in ers} == {"retrieved", "oracle", "full_context"}
    for rubric, target in (
        ("crux-coverage", {"run": "r1"}),
        ("authtrace-correctness", {"run": "r1"}),
        ("authtrace-evidence", {"run": "r1"}),
    ):
        out = run_judge(store, rubric, lex, name=f"j-{rubric}", **target)
        assert out.status == "done" and out.errors == 0 and out.executed == out.planned > 0
        assert any("not a language model" in n for n in out.notes)
        assert run_judge(store, rubric, lex, name=f"j-{rubric}", **target).executed == 0
    assert len(store.judgments_frame(target_runs=["r1"])) > 0
    store.delete_run("j-authtrace-correctness")
    assert store.judgments_frame(runs=["j-authtrace-correctness"]).empty
    store.delete_run("r1")  # the judged run: judgments of its predictions go with it
    assert store.judgments_frame(target_runs=["r1"]).empty


def test_judge_cli_names_the_missing_target_in_one_line(tiny):
    res = run_cli(
        "judge", "crux-coverage", "--dataset", "tiny", "--backend", "embedded", "--db", tiny
    )
    assert res.returncode == 1
    assert res.stderr.strip() == "error: crux-coverage judges a run's predictions: give --run"
