"""CRUX from the command line: ``import crux`` (sub-questions and given ratings) and ``judge crux``
(0-5 ratings from a model backend), then ``report crux --judge`` on the real DuckDB file."""

from __future__ import annotations

import json
import math

import pytest
from model_stub import ModelStub
from test_cli import run_cli
from test_crux import _instance, _ratings

from core.store import Store
from core.types import Dataset, Instance


@pytest.fixture
def tiny(tmp_path):
    """The two-instance dataset of tests/test_crux.py (q1 gets sub-questions, q2 does not)."""
    db = tmp_path / "t.duckdb"
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    Store(db).write_dataset(Dataset("tiny", "test", "test", {}, (_instance(), other)))
    return db


def _file(tmp_path, records) -> str:
    path = tmp_path / "sq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _records() -> list[dict]:
    texts = {"s1": "what a?", "s2": "what b?", "s3": "what c?"}
    ratings: dict[str, dict[str, int]] = {s: {} for s in texts}
    for pid, sq, rating in _ratings():
        ratings[sq][pid] = rating
    return [
        {"instance_id": "q1", "sq_id": s, "text": t, "ratings": ratings[s]}
        for s, t in texts.items()
    ]


def test_imported_ratings_drive_the_crux_report(tiny, tmp_path):
    res = run_cli("import", "crux", _file(tmp_path, _records()), "--dataset", "tiny", "--db", tiny)
    assert res.returncode == 0, res.stderr
    assert "3 sub-questions of 1 instances, 9 ratings (judge 'imported')" in res.stdout
    out = run_cli(
        "report",
        "crux",
        "--dataset",
        "tiny",
        "--retrievers",
        "oracle",
        "--k",
        "1,3",
        "--chunk-size",
        "10",
        "--overlap",
        "0",
        "--judge",
        "imported",
        "--json",
        "--db",
        tiny,
    )
    assert out.returncode == 0, out.stderr
    per = {(r["instance_id"], r["k"]): r for r in json.loads(out.stdout)["per_context"]}
    # Hand-checked in tests/test_crux.py: k=1 Cov 1/2, density 1; k=3 Cov 1, density
    # ((1/30) / (1/20))^0.5 = sqrt(2/3); q2 has no sub-questions and falls back to gold.
    assert per["q1", 1]["answerability_source"] == "judge:imported"
    assert per["q1", 1]["coverage"] == 0.5 and per["q1", 1]["density"] == pytest.approx(1.0)
    assert per["q1", 3]["coverage"] == 1.0
    assert per["q1", 3]["density"] == pytest.approx(math.sqrt(2 / 3))
    assert per["q2", 1]["answerability_source"] == "gold"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"instance_id": "q9"}, "record 2: field 'instance_id': no instance 'q9' in the dataset"),
        ({"text": "  "}, "record 2: field 'text': required: a non-empty string"),
        ({"sq_id": "s1"}, "record 2: field 'sq_id': sub-question 's1' of 'q1' repeated"),
        ({"ratings": {"p0001": 7}}, "record 2: field 'ratings.p0001': expected 0..5, got 7"),
        ({"ratings": {"p0009": 1}}, "record 2: field 'ratings.p0009': no passage 'p0009' in 'q1'"),
        ({"ratings": [1, 2]}, "record 2: field 'ratings': expected an object"),
    ],
)
def test_a_bad_sub_question_file_leaves_the_store_unchanged(tiny, tmp_path, change, where):
    records = _records()
    records[1] = {**records[1], **change}
    path = _file(tmp_path, records)
    res = run_cli("import", "crux", path, "--dataset", "tiny", "--db", tiny)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and f"{path}: {where}" in res.stderr, res.stderr
    sq, ratings = Store(tiny).crux_judgments("tiny")
    assert sq.empty and ratings.empty


def test_judge_rates_every_pair_through_the_ollama_client_and_caches(tiny, tmp_path):
    records = [{k: v for k, v in r.items() if k != "ratings"} for r in _records()]
    assert (
        run_cli(
            "import", "crux", _file(tmp_path, records), "--dataset", "tiny", "--db", tiny
        ).returncode
        == 0
    )
    with ModelStub() as stub:
        args = (
            "judge",
            "crux",
            "--dataset",
            "tiny",
            "--backend",
            "ollama",
            "--model",
            "stub-model",
            "--host",
            stub.url,
            "--passages",
            "all",
            "--json",
            "--db",
            tiny,
        )
        first = run_cli(*args)
        assert first.returncode == 0, first.stderr
        again = run_cli(*args)
        n_chats = sum(path.endswith("/api/chat") for path in stub.paths())
    done = json.loads(first.stdout)
    assert done["judge"] == "ollama:stub-model|crux-v1"
    assert (done["n_pairs"], done["n_called"], done["n_cached"], done["n_errors"]) == (9, 9, 0, 0)
    assert json.loads(again.stdout)["n_cached"] == 9 and n_chats == 9  # rerun: all cached
    _, ratings = Store(tiny).crux_judgments("tiny")
    assert len(ratings) == 9 and set(ratings["judge"]) == {"ollama:stub-model|crux-v1"}
    assert ratings["rating"].between(0, 5).all()
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
        "ollama:stub-model|crux-v1",
        "--json",
        "--db",
        tiny,
    )
    assert report.returncode == 0, report.stderr
    assert "judge:ollama:stub-model|crux-v1" in report.stdout


def test_retrieval_page_lets_the_user_choose_whose_ratings_crux_uses(tmp_path, monkeypatch):
    """With two judges' ratings stored, the CRUX views ask which to use (the report refuses to
    guess) and the table follows the choice."""
    from conftest import open_page
    from test_crux import _store_with_ratings

    store = _store_with_ratings(tmp_path / "j.duckdb", judges=("j1", "j2"))
    at = open_page(monkeypatch, store.path, "screens/retrieval.py", "tiny")
    at.toggle(key="retrieval.crux").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    choice = at.selectbox(key="retrieval.crux_judge")
    assert choice.options == ["j1", "j2"] and choice.value == "j1"
    choice.set_value("j2").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe)
    assert "judge:j2" in shown and "judge:j1" not in shown


def _report(tiny, *extra):
    return run_cli(
        "report",
        "crux",
        "--dataset",
        "tiny",
        "--retrievers",
        "oracle",
        "--k",
        "1,3",
        "--chunk-size",
        "10",
        "--overlap",
        "0",
        "--resamples",
        "200",
        "--judge",
        "imported",
        *extra,
        "--db",
        tiny,
    )


def test_report_crux_eta_and_k_required_flags(tiny, tmp_path):
    assert (
        run_cli(
            "import", "crux", _file(tmp_path, _records()), "--dataset", "tiny", "--db", tiny
        ).returncode
        == 0
    )
    default = _report(tiny, "--json")
    strict = _report(tiny, "--eta", "5", "--k-required", "--json")
    assert default.returncode == 0 and strict.returncode == 0, strict.stderr
    d, s = json.loads(default.stdout), json.loads(strict.stdout)
    assert (d["eta"], s["eta"], d["k_required"], s["k_required"]) == (3, 5, False, True)
    per3 = {(r["instance_id"], r["k"]): r for r in d["per_context"]}
    per5 = {(r["instance_id"], r["k"]): r for r in s["per_context"]}
    # Hand-checked in tests/test_crux.py: q1 k=1 Cov 1/2 at eta 3; at eta 5 only s1 is
    # answerable and the oracle's first chunk (p1) answers it: Cov 1.
    assert per3["q1", 1]["coverage"] == 0.5 and per5["q1", 1]["coverage"] == 1.0
    assert per5["q1", 3]["density"] == pytest.approx(math.sqrt(1 / 3))
    # k = |Z*|: q1 at eta 5 has Z* = (p1): one chunk; q2 (gold-derived) Z* = (p1, p2): two.
    assert (per5["q1", "|Z*|"]["k_size"], per5["q1", "|Z*|"]["coverage"]) == (1, 1.0)
    assert (per5["q2", "|Z*|"]["k_size"], per5["q2", "|Z*|"]["coverage"]) == (2, 1.0)
    assert ("q1", "|Z*|") not in per3
    agg = {r["k"]: r for r in s["aggregate"]}
    assert agg["|Z*|"]["k_mean"] == 1.5 and agg["|Z*|"]["n"] == 2
    # The gold-derived instance is counted and said.
    assert s["answerability_counts"] == {"judge:imported": 1, "gold": 1}
    assert "derived from gold evidence, not judged, for 1 of 2 instances" in s["answerability_note"]
    assert (agg[1]["judged"], agg[1]["gold_derived"]) == (1, 1)
    text = _report(tiny, "--eta", "5", "--k-required")
    assert text.returncode == 0, text.stderr
    assert "eta = 5" in text.stdout
    assert "Answerability derived from gold evidence, not judged, for 1 of 2 instances" in (
        text.stdout
    )
    assert "judged by imported (rating >= eta = 5) for the other 1" in text.stdout
    assert "|Z*|" in text.stdout and "k = |Z*|: the required subset's size" in text.stdout


def test_report_crux_refuses_a_bad_eta(tiny):
    bad = run_cli("report", "crux", "--dataset", "tiny", "--eta", "7", "--db", tiny)
    assert bad.returncode == 2 and "parameter 'eta': 7 is not one of 1, 2, 3, 4, 5" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_report_crux_all_gold_derived_says_so(tiny):
    out = run_cli(
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
        "--resamples",
        "100",
        "--db",
        tiny,
    )
    assert out.returncode == 0, out.stderr
    assert (
        "Answerability derived from gold evidence, not judged, for all 2 instances: each "
        "gold passage answers a sub-question of its own (binary, so eta = 3 does not apply "
        "to them)."
    ) in out.stdout


def test_retrieval_page_crux_eta_and_k_required(tmp_path, monkeypatch):
    """The CRUX views take eta and k = |Z*| from widgets; the table says eta and where
    answerability came from (q1 judged, q2 derived from gold)."""
    from conftest import open_page
    from test_crux import _store_with_ratings

    store = _store_with_ratings(tmp_path / "e.duckdb")
    at = open_page(monkeypatch, store.path, "screens/retrieval.py", "tiny")
    at.toggle(key="retrieval.crux").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    eta = at.selectbox(key="retrieval.crux_eta")
    assert eta.value == 3 and "seed 002" in eta.help
    eta.set_value(5).run()
    at.checkbox(key="retrieval.crux_k_required").check().run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    table = next(df.value for df in at.dataframe if "answerability" in df.value.columns)
    assert set(table["eta"]) == {5} and "|Z*|" in set(table["k"])
    assert set(table["answerability"]) == {"judged 1/2, gold-derived 1/2"}
