"""Issue 35, Why 3: a server reply's numbers are data.

One out-of-range number (``prompt_tokens`` 3e9 or 1e20, a negative bigint) ended the run with
a traceback, lost every answer of its write batch and left the run ``failed`` with 0 errors.
Now each number read from a reply is range-checked: out of range it is stored missing, named
in the prediction's ``meta.out_of_range``; a reply that still cannot be stored (text that is
not valid Unicode) becomes that call's recorded error and the rest of the batch is written.
Real clients (ollama, httpx) against the stub server, a real store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from model_stub import ModelStub

from core.backends import EmbeddedReader, make_backend
from core.datasets.controlled import build_controlled
from core.execution import engine
from core.execution.limits import checked_numbers
from core.execution.runs import run_conditions
from core.store import Store

N = 3  # instances; two conditions each


class OddStub(ModelStub):
    """The stub, with chosen fields of every chat reply overwritten."""

    def __init__(
        self, ollama: dict[str, Any] | None = None, openai: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        self.ollama_extra = ollama or {}
        self.openai_extra = openai or {}

    def ollama_chat(self, body):
        status, out = super().ollama_chat(body)
        if status == 200:
            out.update(self.ollama_extra)
        return status, out

    def openai_chat(self, body):
        status, out = super().openai_chat(body)
        if status == 200:
            out["usage"].update(self.openai_extra)
        return status, out


def _store(tmp_path) -> Store:
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(build_controlled("controlled-200", limit=N, name="ds"))
    return store


def _run(store: Store, backend) -> tuple[str, list[tuple]]:
    run_conditions(store, "ds", backend, ("no_evidence", "oracle"), name="r")
    with store.connect(read_only=True) as con:
        status = con.execute("SELECT status FROM runs WHERE run_id = 'r'").fetchall()[0][0]
        rows = con.execute(
            "SELECT prompt_tokens, completion_tokens, total_duration_ns, error, meta "
            "FROM predictions WHERE run_id = 'r' ORDER BY instance_id, condition"
        ).fetchall()
    return status, rows


@pytest.mark.parametrize(
    ("field", "value", "column"),
    [
        ("prompt_eval_count", 3_000_000_000, 0),
        ("prompt_eval_count", 1e20, 0),
        ("eval_count", -5, 1),
        ("total_duration", -(2**63) + 1, 2),
        ("total_duration", 2**70, 2),
    ],
)
def test_ollama_out_of_range_number_is_missing_with_a_note(tmp_path, field, value, column):
    store = _store(tmp_path)
    with OddStub(ollama={field: value}) as stub:
        status, rows = _run(store, make_backend("ollama", "stub-model", hosts=[stub.url]))
    assert status == "done"
    assert len(rows) == 2 * N
    for row in rows:
        assert row[column] is None
        assert row[3] is None
        notes = json.loads(row[4])["out_of_range"]
        key = ["prompt_tokens", "completion_tokens", "total_duration_ns"][column]
        assert list(notes) == [key]
        assert "is not an integer in 0.." in notes[key]
    other = [r[1 - column if column < 2 else 0] for r in rows]
    assert all(isinstance(v, int) and v > 0 for v in other)  # the rest of the reply is kept


@pytest.mark.parametrize("value", [3e9, 1e20, -1, 1.5, float("inf")])
def test_openai_out_of_range_usage_is_missing_with_a_note(tmp_path, value):
    store = _store(tmp_path)
    with OddStub(openai={"prompt_tokens": value}) as stub:
        backend = make_backend("openai", "stub-model", base_url=f"{stub.url}/v1")
        status, rows = _run(store, backend)
    assert status == "done"
    assert [r[0] for r in rows] == [None] * (2 * N)
    assert all("prompt_tokens" in json.loads(r[4])["out_of_range"] for r in rows)
    assert all(isinstance(r[1], int) for r in rows)


def test_unstorable_row_is_that_calls_error_and_the_batch_is_written(tmp_path):
    """A row the store cannot hold (text that is not valid Unicode, a count past its column:
    what a reply could carry past the checks) fails the batch's write; the write is made
    again with that call's recorded error, and every other answer of the batch is written."""
    store = _store(tmp_path)
    run_conditions(store, "ds", EmbeddedReader(workers=False), ("no_evidence",), name="r")
    with store.connect(read_only=True) as con:
        stored = con.execute(
            "SELECT * FROM predictions WHERE run_id = 'r' ORDER BY instance_id"
        ).fetchall()
        names = [d[0] for d in con.description]
    rows = [
        {**dict(zip(names, r, strict=True)), "condition": "oracle", "_cache": None} for r in stored
    ]
    rows[0]["raw_response"] = "x\ud800"  # a lone surrogate: not UTF-8
    rows[1]["prompt_tokens"] = 2**40
    engine.write_rows(store, engine.WriteContext.of(store, "r"), rows, 0.1)
    with store.connect(read_only=True) as con:
        got = con.execute(
            "SELECT instance_id, error, prompt_tokens, answer FROM predictions "
            "WHERE run_id = 'r' AND condition = 'oracle' ORDER BY instance_id"
        ).fetchall()
    assert len(got) == N
    assert got[0][1].startswith("reply could not be stored: UnicodeEncodeError: ")
    assert got[1][1].startswith("reply could not be stored: ArrowInvalid: ")
    assert got[0][3] is None and got[1][2] is None
    assert got[2][1] is None and got[2][3] == rows[2]["answer"]  # the rest is written


def test_checked_numbers_table():
    values = {
        "prompt_tokens": 12.0,
        "completion_tokens": 2**31,
        "eval_duration_ns": 2**62,
        "logprob_confidence": float("nan"),
        "other": 2**99,
    }
    out, notes = checked_numbers(values)
    assert out == {
        "prompt_tokens": 12,
        "completion_tokens": None,
        "eval_duration_ns": 2**62,
        "logprob_confidence": None,
        "other": 2**99,
    }
    assert notes == {
        "completion_tokens": "2147483648 is not an integer in 0..2147483647",
        "logprob_confidence": "nan is not a number in 0.0..1.0",
    }
    assert checked_numbers({"total_duration_ns": 2**70})[1] == {
        "total_duration_ns": "an integer of 71 bits is not an integer in 0..9223372036854775807"
    }
