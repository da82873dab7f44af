"""Batch files (issue 21 items 1, 2): ``batch export`` writes OpenAI Batch input lines,
``batch import`` stores run_batch output lines exactly as a live run stores the same replies.

The replies come from the stub server (:class:`model_stub.ModelStub`, the embedded reader
behind the real OpenAI chat-completions protocol): each exported body is POSTed to it as it
stands and its response wrapped in vLLM ``run_batch``'s output line (``BatchRequestOutput``:
``id``, ``custom_id``, ``response.{status_code, request_id, body}``, ``error``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import jsonschema
import pandas as pd
import pytest
from conftest import shared_fixture
from model_stub import ModelStub

from core.backends.openai_compat import OpenAIBackend
from core.batch.files import custom_id, parse_custom_id, request_options, shard_paths
from core.cli import main
from core.datasets.importers import read_dataset
from core.execution.prompts import ANSWER_SCHEMA
from core.store import SCORE_COLUMNS, Store

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
N_CALLS = 53 * 4  # every HotpotQA record has gold evidence: the oracle applies to all 53

#: The subset of the OpenAI chat-completions request (and of the Batch API's input line) a
#: line must meet: what vLLM's ``ChatCompletionRequest`` and the OpenAI Batch API read.
REQUEST_LINE = {
    "type": "object",
    "required": ["custom_id", "method", "url", "body"],
    "additionalProperties": False,
    "properties": {
        "custom_id": {"type": "string", "minLength": 1},
        "method": {"const": "POST"},
        "url": {"const": "/v1/chat/completions"},
        "body": {
            "type": "object",
            "required": [
                "model",
                "messages",
                "temperature",
                "seed",
                "max_tokens",
                "response_format",
            ],
            "additionalProperties": False,
            "properties": {
                "model": {"type": "string", "minLength": 1},
                "messages": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["role", "content"],
                        "additionalProperties": False,
                        "properties": {
                            "role": {"enum": ["system", "user", "assistant"]},
                            "content": {"type": "string", "minLength": 1},
                        },
                    },
                },
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "seed": {"type": "integer"},
                "max_tokens": {"type": "integer", "minimum": 1},
                "response_format": {
                    "type": "object",
                    "required": ["type", "json_schema"],
                    "additionalProperties": False,
                    "properties": {
                        "type": {"const": "json_schema"},
                        "json_schema": {
                            "type": "object",
                            "required": ["name", "schema"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                                "schema": {"type": "object"},
                                "strict": {"type": "boolean"},
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the HotpotQA fixture as dataset ``hp`` (copied per test)."""
    path = tmp_path_factory.mktemp("batch") / "base.duckdb"
    Store(path).write_dataset(read_dataset(shared_fixture(HOTPOT), "hotpotqa", "hp").dataset)
    return path


@pytest.fixture
def db(base_store: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s.duckdb"
    shutil.copy(base_store, path)
    return path


@pytest.fixture(scope="module")
def stub() -> ModelStub:
    with ModelStub() as server:
        yield server


def _export(db: Path, out: Path, run: str = "b", *extra: str) -> int:
    return main(
        [
            "batch",
            "export",
            "conditions",
            "--db",
            str(db),
            "--dataset",
            "hp",
            "--run",
            run,
            "--model",
            "stub-model",
            "--out",
            str(out),
            *extra,
        ]
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def _answer(stub: ModelStub, requests: list[dict], out: Path) -> list[dict]:
    """run_batch's output file for ``requests``: each body POSTed to the stub as it stands."""
    lines = []
    with httpx.Client(base_url=stub.url, timeout=60) as client:
        for i, req in enumerate(requests):
            r = client.post(req["url"], json=req["body"])
            assert r.status_code == 200, r.text
            lines.append(
                {
                    "id": f"vllm-{i:04d}",
                    "custom_id": req["custom_id"],
                    "response": {
                        "status_code": 200,
                        "request_id": f"vllm-batch-{i:04d}",
                        "body": r.json(),
                    },
                    "error": None,
                }
            )
    _write(out, lines)
    return lines


def _write(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")


def _import(db: Path, *files: Path, run: str = "b") -> int:
    return main(["batch", "import", *map(str, files), "--run", run, "--db", str(db), "--json"])


def _state(db: Path, run: str) -> tuple:
    """Everything an import may change about a run: its predictions, scores and row."""
    store = Store(db)
    rows = store.prediction_rows(run)
    row = store.run_row(run) or {}
    cols = ["instance_id", "condition", "variant", "answer", "error", *SCORE_COLUMNS]
    frame = rows[cols].sort_values(["instance_id", "condition"]).astype(str) if len(rows) else None
    return (
        len(rows),
        None if frame is None else frame.to_csv(),
        row.get("status"),
        row.get("n_done"),
        row.get("n_errors"),
    )


# --------------------------------------------------------------------------- export


def test_export_writes_212_valid_lines_with_unique_keys_and_the_run_waits(db, tmp_path, capsys):
    out = tmp_path / "in.jsonl"
    assert _export(db, out) == 0
    assert "212 calls" in capsys.readouterr().out
    lines = _lines(out)
    assert len(lines) == N_CALLS
    jsonschema.Draft202012Validator.check_schema(ANSWER_SCHEMA)
    validator = jsonschema.Draft202012Validator(REQUEST_LINE)
    for line in lines:
        validator.validate(line)
        assert line["body"]["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA
        assert (line["body"]["temperature"], line["body"]["seed"]) == (0, 0)
    ids = [x["custom_id"] for x in lines]
    assert len(set(ids)) == N_CALLS
    keys = {parse_custom_id(i) for i in ids}
    assert {k[0] for k in keys} == {"b"} and {k[3] for k in keys} == {""}
    assert {k[2] for k in keys} == {"no_evidence", "full_context", "retrieved", "oracle"}
    assert len({k[1] for k in keys}) == 53
    store = Store(db)
    row = store.run_row("b")
    assert (row["status"], row["n_planned"], row["kind"], row["backend"]) == (
        "waiting",
        N_CALLS,
        "conditions",
        "openai",
    )
    assert row["options"] == OpenAIBackend("m", base_url="http://h:1").options
    runs = store.runs_frame()
    assert list(runs.loc[runs["run_id"] == "b", "status"]) == ["waiting"]
    assert main(["report", "runs", "--db", str(db)]) == 0
    assert "waiting" in capsys.readouterr().out


def test_shard_size_splits_the_same_lines_over_numbered_files(db, tmp_path):
    whole = tmp_path / "whole.jsonl"
    assert _export(db, whole, "w") == 0
    out = tmp_path / "in.jsonl"
    assert _export(db, out, "w", "--shard-size", "100") == 0
    shards = [tmp_path / f"in.{i:03d}.jsonl" for i in range(3)]
    assert [len(_lines(p)) for p in shards] == [100, 100, 12]
    assert not out.exists()
    assert [x for p in shards for x in _lines(p)] == _lines(whole)
    assert shard_paths(out, 5, 5) == [out]
    with pytest.raises(ValueError, match="--shard-size must be at least 1"):
        shard_paths(out, 5, 0)


def test_custom_id_round_trips_any_key():
    for key in [
        ("r", "5a8b", "retrieved", ""),
        ("run/1", "a%2Fb/c", "intervention", "replace:hard|p0004"),
        ("r", "é ü", "probe", "C=5|start=12"),
    ]:
        cid = custom_id(*key)
        assert parse_custom_id(cid) == key and cid.count("/") == 3
    assert custom_id("r", "i", "oracle", "") == "r/i/oracle/"
    assert custom_id("r", "i", "intervention", "remove|p0001") == "r/i/intervention/remove|p0001"
    with pytest.raises(ValueError, match="not a prediction key"):
        parse_custom_id("r/i/oracle")


def test_batch_options_are_what_a_live_openai_run_records():
    assert request_options(7) == OpenAIBackend("m", base_url="http://h:1", seed=7).options


# --------------------------------------------------------------------------- import


def test_import_scores_exactly_as_a_live_run_and_a_second_import_adds_nothing(
    db, tmp_path, stub, capsys
):
    out = tmp_path / "in.jsonl"
    assert _export(db, out) == 0
    results = tmp_path / "out.jsonl"
    _answer(stub, _lines(out), results)
    capsys.readouterr()
    assert _import(db, results) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["stored"], got["answers"], got["errors"], got["missing"], got["status"]) == (
        N_CALLS,
        N_CALLS,
        0,
        0,
        "done",
    )
    # the live run: the openai backend against the same stub
    assert (
        main(
            [
                "run",
                "--db",
                str(db),
                "--dataset",
                "hp",
                "--backend",
                "openai",
                "--model",
                "stub-model",
                "--base-url",
                stub.url,
                "--name",
                "live",
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    store = Store(db)
    cols = [
        "instance_id",
        "condition",
        "variant",
        "prompt_hash",
        "input_passage_ids",
        "raw_response",
        "answer",
        "cited_ids",
        "confidence",
        "parse_error",
        "error",
        "prompt_tokens",
        "completion_tokens",
        *SCORE_COLUMNS,
    ]
    batch = store.prediction_rows("b")[cols].sort_values(["instance_id", "condition"])
    live = store.prediction_rows("live")[cols].sort_values(["instance_id", "condition"])
    assert len(batch) == len(live) == N_CALLS
    assert batch.reset_index(drop=True).astype(str).equals(live.reset_index(drop=True).astype(str))
    assert batch["em_relaxed"].notna().all() and batch["f1_relaxed"].sum() > 0
    assert store.run_row("b")["status"] == "done" and store.run_row("b")["n_done"] == N_CALLS
    before = _state(db, "b")
    assert _import(db, results) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["stored"], again["already_stored"], again["lines"]) == (0, N_CALLS, N_CALLS)
    assert _state(db, "b") == before
    # everything answered: a new export writes nothing
    assert _export(db, tmp_path / "none.jsonl") == 0
    assert not (tmp_path / "none.jsonl").exists()
    assert "nothing to export" in capsys.readouterr().out


def _bad_cases(lines: list[dict]) -> list[tuple[str, list[dict], str]]:
    """(what, lines with line 7 broken, the expected error's tail)."""
    out = []

    def broken(fn) -> list[dict]:
        copy = json.loads(json.dumps(lines))
        copy[6] = fn(copy[6])
        return copy

    other = lines[6]["custom_id"].replace("b/", "other/", 1)
    unknown = "b/no-such-instance/oracle/"
    out.append(("not json", None, "line 7: not JSON"))
    out.append(
        (
            "no custom_id",
            broken(lambda x: {k: v for k, v in x.items() if k != "custom_id"}),
            "line 7: field custom_id: missing or not a string",
        )
    )
    out.append(
        (
            "another run",
            broken(lambda x: {**x, "custom_id": other}),
            "line 7: field custom_id: a call of run 'other', not of run 'b'",
        )
    )
    out.append(
        (
            "unknown",
            broken(lambda x: {**x, "custom_id": unknown}),
            "line 7: field custom_id: run 'b' exported no call",
        )
    )
    out.append(
        (
            "status",
            broken(lambda x: {**x, "response": {**x["response"], "status_code": "200"}}),
            "line 7: field response.status_code: not an integer",
        )
    )
    out.append(
        (
            "choices",
            broken(
                lambda x: {
                    **x,
                    "response": {**x["response"], "body": {**x["response"]["body"], "choices": []}},
                }
            ),
            "line 7: field response.body.choices: missing, empty or not a list of objects",
        )
    )
    out.append(
        (
            "repeat",
            broken(lambda x: {**x, "custom_id": lines[2]["custom_id"]}),
            "line 7: field custom_id: repeats line 3's call",
        )
    )
    return out


def test_a_file_with_one_bad_line_changes_nothing_and_names_the_line(db, tmp_path, stub, capsys):
    out = tmp_path / "in.jsonl"
    assert _export(db, out, "b", "--conditions", "oracle") == 0
    results = tmp_path / "out.jsonl"
    lines = _answer(stub, _lines(out), results)
    good = tmp_path / "good.jsonl"
    _write(good, lines[:3])
    before = _state(db, "b")
    assert before[0] == 0 and before[2] == "waiting"
    for what, bad_lines, tail in _bad_cases(lines):
        bad = tmp_path / f"bad-{what.replace(' ', '-')}.jsonl"
        if bad_lines is None:
            text = results.read_text("utf-8").splitlines()
            text[6] = text[6][:40]
            bad.write_text("\n".join(text) + "\n", "utf-8")
        else:
            _write(bad, bad_lines)
        capsys.readouterr()
        assert _import(db, good, bad) == 1, what  # the good file first: it is not stored either
        err = capsys.readouterr().err
        assert err.startswith(f"error: {bad}: {tail}"), (what, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert _state(db, "b") == before, what


def test_error_lines_are_stored_errors_not_wrong_answers(db, tmp_path, stub, capsys):
    out = tmp_path / "in.jsonl"
    assert _export(db, out, "b", "--conditions", "oracle") == 0
    results = tmp_path / "out.jsonl"
    lines = _answer(stub, _lines(out), results)
    failed = [
        # vLLM run_batch: an ErrorResponse from the server
        {
            **lines[0],
            "response": {"status_code": 400, "request_id": "x", "body": None},
            "error": {"error": {"message": "maximum context length is 8192 tokens", "code": 400}},
        },
        # the OpenAI Batch API: the error body under response.body
        {
            **lines[1],
            "response": {
                "status_code": 500,
                "request_id": "y",
                "body": {"error": {"message": "server error"}},
            },
            "error": None,
        },
        # a non-HTTP failure
        {
            **lines[2],
            "response": None,
            "error": {"code": "batch_expired", "message": "not run before it expired"},
        },
    ]
    errors = tmp_path / "errors.jsonl"
    _write(errors, failed + lines[3:])
    capsys.readouterr()
    assert _import(db, errors) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["stored"], got["errors"], got["answers"], got["status"]) == (53, 3, 50, "partial")
    store = Store(db)
    rows = store.prediction_rows("b").set_index("instance_id")
    ids = [parse_custom_id(x["custom_id"])[1] for x in failed]
    assert list(rows.loc[ids, "error"]) == [
        "batch: HTTP 400: maximum context length is 8192 tokens (400)",
        "batch: HTTP 500: server error",
        "batch: failed: not run before it expired (batch_expired)",
    ]
    for col in ("answer", "parse_error", "em_strict", "f1_relaxed", "failure_label"):
        assert rows.loc[ids, col].isna().all(), col
    assert rows.drop(index=ids)["em_strict"].notna().all()
    row = store.run_row("b")
    assert (row["n_done"], row["n_errors"], row["status"]) == (53, 3, "partial")
    # the same failures again: nothing new; then the answers: they replace the errors
    assert _import(db, errors) == 0
    assert json.loads(capsys.readouterr().out)["stored"] == 0
    assert _export(db, tmp_path / "again.jsonl", "b", "--conditions", "oracle") == 0
    assert len(_lines(tmp_path / "again.jsonl")) == 3
    capsys.readouterr()
    assert _import(db, results) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["stored"], got["already_stored"], got["status"]) == (3, 50, "done")
    row = Store(db).run_row("b")
    assert (row["n_done"], row["n_errors"]) == (53, 0)


def test_shards_imported_one_by_one_leave_the_run_partial_until_the_last(
    db, tmp_path, stub, capsys
):
    out = tmp_path / "in.jsonl"
    assert _export(db, out, "b", "--conditions", "oracle,no_evidence", "--shard-size", "40") == 0
    shards = sorted(tmp_path.glob("in.*.jsonl"))
    assert [len(_lines(p)) for p in shards] == [40, 40, 26]
    statuses = []
    for i, shard in enumerate(shards):
        res = tmp_path / f"out.{i}.jsonl"
        _answer(stub, _lines(shard), res)
        capsys.readouterr()
        assert _import(db, res) == 0
        got = json.loads(capsys.readouterr().out)
        statuses.append((got["stored"], got["missing"], got["status"]))
    assert statuses == [(40, 66, "partial"), (40, 26, "partial"), (26, 0, "done")]


def test_import_of_a_run_that_exported_nothing_is_refused(db, tmp_path, capsys):
    res = tmp_path / "x.jsonl"
    res.write_text("", "utf-8")
    assert _import(db, res, run="nope") == 1
    assert "no run 'nope'" in capsys.readouterr().err


def test_interventions_export_in_two_rounds_base_then_interventions(db, tmp_path, stub, capsys):
    def export(out: Path) -> dict:
        capsys.readouterr()
        assert (
            main(
                [
                    "batch",
                    "export",
                    "interventions",
                    "--db",
                    str(db),
                    "--dataset",
                    "hp",
                    "--run",
                    "c",
                    "--model",
                    "stub-model",
                    "--out",
                    str(out),
                    "--operators",
                    "remove",
                    "--json",
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)

    first = export(tmp_path / "base.jsonl")
    assert (first["phase"], first["n_calls"], first["status"]) == ("base", 53, "waiting")
    assert {parse_custom_id(x["custom_id"])[2] for x in _lines(tmp_path / "base.jsonl")} == {
        "retrieved"
    }
    _answer(stub, _lines(tmp_path / "base.jsonl"), tmp_path / "base.out.jsonl")
    assert _import(db, tmp_path / "base.out.jsonl", run="c") == 0
    second = export(tmp_path / "cuer.jsonl")
    assert second["phase"] == "interventions" and second["n_calls"] > 0
    keys = [parse_custom_id(x["custom_id"]) for x in _lines(tmp_path / "cuer.jsonl")]
    assert {k[2] for k in keys} == {"intervention"}
    assert all(k[3].startswith(("remove|", "two_support", "zero_retrieval")) for k in keys)


def test_probes_export_records_the_live_probe_run_and_its_spans(db, tmp_path, capsys):
    out = tmp_path / "probes.jsonl"
    assert (
        main(
            [
                "batch",
                "export",
                "probes",
                "--db",
                str(db),
                "--dataset",
                "hp",
                "--run",
                "p",
                "--model",
                "stub-model",
                "--out",
                str(out),
                "--units",
                "passage",
                "--limit",
                "2",
                "--json",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    keys = [parse_custom_id(x["custom_id"]) for x in _lines(out)]
    assert got["n_calls"] == len(keys) > 0 and {k[2] for k in keys} == {"probe"}
    assert len({k[1] for k in keys}) == 2 and all(k[3].startswith("C=") for k in keys)
    row = Store(db).run_row("p")
    assert (row["kind"], row["status"], row["options"]) == (
        "probes",
        "waiting",
        {"temperature": 0, "seed": 0},
    )
    assert row["retrieval"]["probe"]["units"] == "passage"


def test_reasoning_returned_apart_is_stored_apart_never_the_answer(db, tmp_path, stub, capsys):
    """A reasoning model's batch replies (vLLM ``reasoning_content``, ``reasoning``) are read as
    a live reply is: thoughts stored in ``meta.reasoning``, the answer parsed from the content;
    a reply cut inside its reasoning (content null) is a parse error, not a failed call."""
    out = tmp_path / "in.jsonl"
    assert _export(db, out, "b", "--conditions", "oracle") == 0
    lines = _answer(stub, _lines(out), tmp_path / "plain.jsonl")
    draft = '{"answer": "Bridgetown", "evidence_ids": []}'
    msg0 = lines[0]["response"]["body"]["choices"][0]["message"]
    lines[0]["response"]["body"]["choices"][0]["message"] = {
        **msg0,
        "reasoning_content": f"draft {draft}",
    }
    lines[1]["response"]["body"]["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "reasoning": f"still thinking {draft}",
    }
    results = tmp_path / "out.jsonl"
    _write(results, lines)
    capsys.readouterr()
    assert _import(db, results) == 0
    rows = Store(db).prediction_rows("b").set_index("instance_id")
    first, second = (parse_custom_id(x["custom_id"])[1] for x in lines[:2])
    meta = json.loads(rows.loc[first, "meta"])
    assert meta["reasoning"] == f"draft {draft}"
    assert rows.loc[first, "answer"] != "Bridgetown" and pd.isna(rows.loc[first, "parse_error"])
    assert rows.loc[second, "answer"] in ("", None) and rows.loc[second, "parse_error"]
    assert "reasoning" in rows.loc[second, "parse_error"]
    assert pd.isna(rows.loc[second, "error"]) or not rows.loc[second, "error"]
    assert json.loads(rows.loc[second, "meta"])["reasoning"] == f"still thinking {draft}"
