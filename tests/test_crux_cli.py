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
    return [{"instance_id": "q1", "sq_id": s, "text": t, "ratings": ratings[s]}
            for s, t in texts.items()]  # fmt: skip


def test_imported_ratings_drive_the_crux_report(tiny, tmp_path):
    res = run_cli("import", "crux", _file(tmp_path, _records()), "--dataset", "tiny", "--db", tiny)
    assert res.returncode == 0, res.stderr
    assert "3 sub-questions of 1 instances, 9 ratings (judge 'imported')" in res.stdout
    out = run_cli("report", "crux", "--dataset", "tiny", "--retrievers", "oracle", "--k", "1,3",
                  "--chunk-size", "10", "--overlap", "0", "--judge", "imported", "--json",
                  "--db", tiny)  # fmt: skip
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
    assert run_cli("import", "crux", _file(tmp_path, records), "--dataset", "tiny",
                   "--db", tiny).returncode == 0  # fmt: skip
    with ModelStub() as stub:
        args = ("judge", "crux", "--dataset", "tiny", "--backend", "ollama", "--model",
                "stub-model", "--host", stub.url, "--passages", "all", "--json",
                "--db", tiny)  # fmt: skip
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
    report = run_cli("report", "crux", "--dataset", "tiny", "--retrievers", "oracle", "--k", "1",
                     "--chunk-size", "10", "--overlap", "0", "--judge",
                     "ollama:stub-model|crux-v1", "--json", "--db", tiny)  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "judge:ollama:stub-model|crux-v1" in report.stdout


def test_retrieval_page_lets_the_user_choose_whose_ratings_crux_uses(tmp_path, monkeypatch):
    """With two judges' ratings stored, the CRUX views ask which to use (the report refuses to
    guess) and the table follows the choice."""
    from conftest import open_page
    from test_crux import _store_with_ratings

    store = _store_with_ratings(tmp_path / "j.duckdb", judges=("j1", "j2"))
    at = open_page(monkeypatch, store.path, "pages/retrieval.py", "tiny")
    at.toggle(key="retrieval.crux").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    choice = at.selectbox(key="retrieval.crux_judge")
    assert choice.options == ["j1", "j2"] and choice.value == "j1"
    choice.set_value("j2").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe)
    assert "judge:j2" in shown and "judge:j1" not in shown
