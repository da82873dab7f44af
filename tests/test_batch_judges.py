"""Judge runs through batch files (issue 21 item 1): ``batch export judge`` plans a judge run as
``judge RUBRIC`` does and writes the judgments not yet stored; ``batch import`` stores the replies
as judgments exactly as a live ``judge RUBRIC --backend openai`` against the same stub server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pandas as pd
import pytest
from model_stub import ModelStub
from test_crux import _instance

from core.backends import make_backend
from core.batch.files import judge_custom_id, parse_judge_custom_id
from core.cli import main
from core.execution.runs import run_conditions
from core.store import Store
from core.types import Dataset, Instance

_SQ = {"s1": "what alpha one?", "s2": "what beta three?", "s3": "what zeta?"}
_KEY = ["target_run", "instance_id", "condition", "item"]
_SAME = [
    "rating",
    "raw_reply",
    "parse_error",
    "error",
    "prompt_hash",
    "judge_model",
    "rubric",
    "rubric_version",
    "rubric_hash",
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """q1 (three sub-questions) and q2 (none), and an embedded run ``r`` of two conditions."""
    path = tmp_path / "j.duckdb"
    store = Store(path)
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_instance(), other)))
    sq = pd.DataFrame([{"instance_id": "q1", "sq_id": s, "text": t} for s, t in _SQ.items()])
    empty = pd.DataFrame(columns=["instance_id", "sq_id", "passage_id", "rating", "judge"])
    store.write_crux_judgments("tiny", sq, empty)
    run_conditions(store, "tiny", make_backend("embedded"), ("no_evidence", "oracle"), name="r")
    return path


def _script(messages) -> str | None:
    """The judge's scripted verdicts: CRUX 4 (2 for sub-question s3); AuthTrace AC 2 for q2's
    question, an unreadable reply otherwise (a parse flag, no rating)."""
    text = messages[-1]["content"]
    if text.startswith("Instruction: Determine whether"):
        return "2" if "what zeta?" in text else "4"
    if "Predicted Answer" in text:
        return '{"score": 2, "reason": "ok"}' if "Which?" in text else "no idea"
    return None


@pytest.fixture
def stub():
    with ModelStub() as server:
        server.answer_for = _script
        yield server


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def _answer(stub: ModelStub, requests: list[dict]) -> list[dict]:
    """run_batch's output lines for ``requests``: each body POSTed to the stub as it stands."""
    out = []
    with httpx.Client(base_url=stub.url, timeout=60) as client:
        for i, req in enumerate(requests):
            r = client.post(req["url"], json=req["body"])
            assert r.status_code == 200, r.text
            out.append(
                {
                    "id": f"b-{i}",
                    "custom_id": req["custom_id"],
                    "error": None,
                    "response": {"status_code": 200, "body": r.json()},
                }
            )
    return out


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    return path


def _export(db: Path, rubric: str, target: list[str], name: str, out: Path, capsys) -> dict:
    argv = [
        "batch",
        "export",
        "judge",
        "--rubric",
        rubric,
        *target,
        "--name",
        name,
        "--model",
        "stub-model",
        "--out",
        str(out),
        "--db",
        str(db),
        "--json",
    ]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _import(db: Path, name: str, *files: Path) -> int:
    return main(["batch", "import", *map(str, files), "--run", name, "--db", str(db), "--json"])


def _judgments(db: Path, name: str) -> pd.DataFrame:
    frame = Store(db).judgments_frame(runs=[name])
    return frame.sort_values(_KEY).reset_index(drop=True)


@pytest.mark.parametrize(
    ("rubric", "target", "n"),
    [
        ("crux-answerability", ["--dataset", "tiny"], 6),  # 3 sub-questions x 2 gold passages
        ("authtrace-correctness", ["--run", "r"], 4),  # 2 instances x 2 conditions
    ],
)
def test_imported_judgments_equal_a_live_openai_judge(
    db, tmp_path, stub, capsys, rubric, target, n
):
    out = tmp_path / "in.jsonl"
    summary = _export(db, rubric, target, "bj", out, capsys)
    assert (summary["n_calls"], summary["status"]) == (n, "waiting")
    requests = _lines(out)
    assert len({r["custom_id"] for r in requests}) == n
    store = Store(db)
    assert store.run_row("bj")["kind"] == "judge"
    results = _answer(stub, requests)

    # a bad line (a call the run did not export) refuses the whole file, store unchanged
    bad = json.loads(json.dumps(results))
    bad[1]["custom_id"] = judge_custom_id("bj", "", "q9", "", "x")
    bad_file = _write(tmp_path / "bad.jsonl", bad)
    capsys.readouterr()
    assert _import(db, "bj", bad_file) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad_file}: line 2: field custom_id: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert len(_judgments(db, "bj")) == 0 and store.run_row("bj")["status"] == "waiting"

    live_db = tmp_path / "live.duckdb"  # the store as it stood before any import
    shutil.copy(db, live_db)
    good = _write(tmp_path / "out.jsonl", results)
    assert _import(db, "bj", good) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["stored"], first["missing"], first["already_stored"]) == (n, 0, 0)
    assert _import(db, "bj", good) == 0  # idempotent
    again = json.loads(capsys.readouterr().out)
    assert (again["stored"], again["already_stored"]) == (0, n)

    chats = "/v1/chat/completions"
    n_before = len(stub.bodies(chats))
    live = [
        "judge",
        rubric,
        *target,
        "--backend",
        "openai",
        "--model",
        "stub-model",
        "--base-url",
        stub.url,
        "--name",
        "lj",
        "--json",
    ]
    assert main([*live, "--db", str(live_db)]) == 0
    capsys.readouterr()
    live_bodies = stub.bodies(chats)[n_before:]
    assert len(live_bodies) == n
    # the imported replies are in the response cache under the live judge's keys
    assert main([*live, "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] == n
    assert len(stub.bodies(chats)) == n_before + n
    # the batch bodies are what the live openai judge sends (messages, decoding, schema)
    fields = ("model", "messages", "temperature", "seed", "max_tokens", "response_format")
    sent = sorted(json.dumps({k: b.get(k) for k in fields}, sort_keys=True) for b in live_bodies)
    batch = sorted(
        json.dumps({k: r["body"].get(k) for k in fields}, sort_keys=True) for r in requests
    )
    assert sent == batch

    imported, made = _judgments(db, "bj"), _judgments(live_db, "lj")
    assert len(imported) == n
    pd.testing.assert_frame_equal(imported[_KEY + _SAME], made[_KEY + _SAME])
    assert imported["cache_hit"].eq(False).all()
    row = store.run_row("bj")
    assert (row["status"], row["n_done"], row["n_errors"]) == ("done", n, 0)
    if rubric == "crux-answerability":
        assert sorted(imported["rating"]) == [2.0, 2.0, 4.0, 4.0, 4.0, 4.0]
        _, ratings = store.crux_judgments("tiny")
        assert len(ratings[ratings["judge"] == "bj"]) == 6  # mirrored as a live run's
    else:
        by_inst = imported.groupby("instance_id")
        assert list(by_inst.get_group("q2")["rating"]) == [2.0, 2.0]
        q1 = by_inst.get_group("q1")
        assert q1["rating"].isna().all() and q1["parse_error"].notna().all()


def test_error_lines_are_stored_as_errors_and_the_run_waits_for_the_rest(
    db, tmp_path, stub, capsys
):
    out = tmp_path / "in.jsonl"
    _export(db, "crux-answerability", ["--dataset", "tiny"], "bj", out, capsys)
    results = _answer(stub, _lines(out))
    failed = dict(results[0], response={"status_code": 500, "body": {"error": "boom"}})
    assert _import(db, "bj", _write(tmp_path / "a.jsonl", [failed, *results[1:3]])) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["stored"], s["errors"], s["missing"], s["status"]) == (3, 1, 3, "partial")
    j = _judgments(db, "bj")
    err = j[j["error"].notna()]
    assert (
        len(err) == 1
        and err["rating"].isna().all()
        and err["error"].iloc[0].startswith("batch: HTTP 500")
    )
    # a new export writes the failed call and the unanswered ones, nothing stored already
    again = _export(db, "crux-answerability", ["--dataset", "tiny"], "bj", out, capsys)
    assert (again["n_calls"], again["already_stored"]) == (4, 2)
    assert _import(db, "bj", _write(tmp_path / "b.jsonl", [results[0], *results[3:]])) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["stored"], s["errors"], s["missing"], s["status"]) == (4, 0, 0, "done")
    assert _judgments(db, "bj")["error"].isna().all()


def test_judge_custom_id_round_trips_and_is_not_a_prediction_key():
    key = ("bj", "", "q/1%", "", "s1|p/2")
    cid = judge_custom_id(*key)
    assert cid == "bj//q%2F1%25//s1|p%2F2" and parse_judge_custom_id(cid) == key
    with pytest.raises(ValueError, match="not a judgment key"):
        parse_judge_custom_id("b/q1/oracle/")  # a prediction's four parts
