"""The engine's limits (issue 17): concurrency cap, reply size cap, ``--timeout``, non-object
reply bodies. Against the stub model server (``tests/model_stub.py``) and the real CLI."""

from __future__ import annotations

import json
import os

import pytest
from model_stub import HUGE_PAD, PASSAGE

from core.backends import EmbeddedReader, make_backend
from core.cli import main
from core.execution.engine import POOL_MIN_CALLS
from core.execution.limits import (
    MAX_REPLY_BYTES,
    MAX_SERVER_CONCURRENCY,
    cap_concurrency,
    cap_reply,
    usable_cores,
)
from core.execution.runs import run_conditions
from core.store import Store
from core.types import Dataset, Instance

#: Instances of ``tiny``: 160 calls of 80 distinct prompts (with one passage, full context
#: and oracle show the same text), more than the 64 that start the reader's worker processes.
N_INSTANCES = 40


def _instances(n: int, distinct: bool) -> tuple[Instance, ...]:
    """``n`` questions about :data:`PASSAGE`; the same question each unless ``distinct``."""
    return tuple(
        Instance(
            f"q{i:03d}",
            f"What is the capital of Zarnovia{f' (case {i})' * distinct}?",
            "Keltbridge",
            (PASSAGE,),
        )
        for i in range(n)
    )


@pytest.fixture
def db(tmp_path):
    """A store with ``tiny`` (40 distinct questions) and ``two`` (one question twice)."""
    path = tmp_path / "store.duckdb"
    store = Store(path)
    store.write_dataset(Dataset("tiny", "test", "test", {}, _instances(N_INSTANCES, True)))
    store.write_dataset(Dataset("two", "test", "test", {}, _instances(2, False)))
    return path


def _rows(db, run):
    return Store(db).prediction_rows(run)


# ------------------------------------------------------------------------ concurrency


def test_usable_cores_follow_the_affinity():
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_cap_concurrency_per_backend():
    reader = EmbeddedReader()
    cores = usable_cores()
    assert cap_concurrency(reader, cores) == (cores, None)
    assert cap_concurrency(reader, 100000) == (
        cores,
        f"--concurrency 100000 capped at {cores}: the embedded reader runs one worker per "
        f"usable core ({cores} cores)",
    )
    server = make_backend("openai", "m", base_url="http://127.0.0.1:9")
    assert MAX_SERVER_CONCURRENCY == 256
    assert cap_concurrency(server, 256) == (256, None)
    assert cap_concurrency(server, 1000) == (
        256,
        "--concurrency 1000 capped at 256: at most 256 concurrent calls go to a model server",
    )
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        cap_concurrency(server, 0)


def test_the_run_command_caps_the_embedded_readers_workers(db, capsys):
    cores = usable_cores()
    code = main(
        [
            "run",
            "--db",
            str(db),
            "--dataset",
            "tiny",
            "--backend",
            "embedded",
            "--concurrency",
            "100000",
            "--name",
            "r",
            "--json",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert (
        f"notice: --concurrency 100000 capped at {cores}: the embedded reader runs one worker "
        f"per usable core ({cores} cores)"
    ) in out.err.splitlines()
    summary = json.loads(out.out)
    assert (summary["executed"], summary["cached"], summary["errors"]) == (
        2 * N_INSTANCES,
        2 * N_INSTANCES,
        0,
    )


def test_the_engine_starts_no_more_workers_than_cores(db):
    reader = EmbeddedReader()
    try:
        s = run_conditions(
            Store(db),
            "tiny",
            reader,
            ["oracle", "no_evidence", "full_context", "retrieved"],
            name="many",
            concurrency=100000,
        )
        assert (s.executed, s.errors) == (2 * N_INSTANCES, 0)
        assert s.executed >= POOL_MIN_CALLS  # the run went to the worker processes
        assert reader._pool is not None and reader._pool.size == usable_cores()
    finally:
        reader.close()


# ------------------------------------------------------------------------ reply size


def test_cap_reply_keeps_whole_characters():
    assert cap_reply("short") == ("short", None)
    text = "é" * (MAX_REPLY_BYTES // 2) + "z"  # 2 bytes each: one byte over the limit
    kept, flag = cap_reply(text)
    assert flag == {"bytes": MAX_REPLY_BYTES + 1, "kept_bytes": MAX_REPLY_BYTES}
    assert kept == "é" * (MAX_REPLY_BYTES // 2)
    odd = "a" + "é" * (MAX_REPLY_BYTES // 2)  # the cut falls inside the last character
    kept, flag = cap_reply(odd)
    assert flag == {"bytes": MAX_REPLY_BYTES + 1, "kept_bytes": MAX_REPLY_BYTES - 1}
    assert kept == odd[:-1]


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_huge_reply_is_parsed_whole_then_stored_cut_and_flagged(db, stub, kind):
    stub.set_mode("huge")
    kw = {"hosts": [stub.url]} if kind == "ollama" else {"base_url": stub.url}
    backend = make_backend(kind, "stub-model", options={"retries": 1}, **kw)
    s = run_conditions(Store(db), "two", backend, ["oracle"], name="big")
    assert (s.executed, s.cached, s.errors, s.parse_errors) == (1, 1, 0, 0)  # one prompt
    row = _rows(db, "big").iloc[0]
    # Parsed from the full reply (its cut text is not even JSON): the reader's answer.
    assert row["answer"] == "Keltbridge" and row["parse_error"] is None
    assert row["cited_ids"].tolist() == ["p0001"]
    raw = row["raw_response"]
    assert len(raw.encode()) == MAX_REPLY_BYTES and raw.endswith("é" * 1000)
    flag = json.loads(row["meta"])["raw_response_truncated"]
    assert flag["kept_bytes"] == MAX_REPLY_BYTES and flag["bytes"] > 2 * HUGE_PAD
    # Not cached (a hit would parse the cut text): the same call is made again.
    stub.set_mode("ok")
    again = run_conditions(Store(db), "two", backend, ["oracle"], name="big2")
    assert (again.executed, again.cached) == (1, 1)


# ------------------------------------------------------------------------ odd bodies


@pytest.mark.parametrize("kind", ["ollama", "openai"])
@pytest.mark.parametrize(("mode", "what"), [("json-list", "list"), ("json-null", "null")])
def test_a_list_or_null_body_is_a_clear_stored_error(db, stub, kind, mode, what):
    stub.set_mode(mode)
    kw = {"hosts": [stub.url]} if kind == "ollama" else {"base_url": stub.url}
    backend = make_backend(kind, "stub-model", **kw)
    s = run_conditions(Store(db), "two", backend, ["oracle"], name="odd")
    # The two calls share one prompt: sent once, then again for the second (the first failed).
    assert (s.executed, s.errors, s.status) == (2, 2, "failed")
    url = stub.url if kind == "ollama" else stub.url + "/v1"
    errors = _rows(db, "odd")["error"].tolist()
    assert errors == [f"server {url} returned a JSON {what}, not an object"] * 2
    assert len(stub.bodies("/api/chat" if kind == "ollama" else "/v1/chat/completions")) == 2


# ------------------------------------------------------------------------ timeout


def test_timeout_flag_reaches_the_client_and_its_error_names_the_flag(db, stub, capsys):
    stub.stall_s = 10.0
    stub.set_mode("stall")
    code = main(
        [
            "run",
            "--db",
            str(db),
            "--dataset",
            "two",
            "--backend",
            "ollama",
            "--model",
            "stub-model",
            "--host",
            stub.url,
            "--conditions",
            "oracle",
            "--concurrency",
            "2",
            "--timeout",
            "0.3",
            "--name",
            "slow",
            "--json",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1, err  # every call failed
    errors = set(_rows(db, "slow")["error"])
    assert errors == {
        f"timed out after 0.3s waiting for {stub.url} (a long prompt on a slow machine: raise "
        "--timeout SECONDS)"
    }  # one deadline for the whole call: no retry after it
    assert "raise --timeout SECONDS" in err


def test_timeout_is_a_client_setting_not_a_run_option(db, stub):
    stub.set_mode("ok")
    for kind, kw in (("ollama", {"hosts": [stub.url]}), ("openai", {"base_url": stub.url})):
        backend = make_backend(kind, "stub-model", options={"timeout_s": 7.5}, **kw)
        assert backend.timeout_s == 7.5
        client = backend._hosts[0].client._client if kind == "ollama" else backend._client
        assert client.timeout.read == 7.5
        assert "timeout_s" not in backend.describe()["options"]


@pytest.mark.parametrize("bad", ["0", "-1", "soon"])
def test_a_bad_timeout_is_refused(db, capsys, bad):
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run",
                "--db",
                str(db),
                "--dataset",
                "tiny",
                "--backend",
                "ollama",
                "--timeout",
                bad,
                "--name",
                "x",
            ]
        )
    assert exc.value.code == 2
    assert "parameter 'timeout'" in capsys.readouterr().err


def test_timeout_with_the_embedded_reader_is_ignored_with_a_notice(db, capsys):
    code = main(
        [
            "run",
            "--db",
            str(db),
            "--dataset",
            "two",
            "--backend",
            "embedded",
            "--conditions",
            "oracle",
            "--timeout",
            "5",
            "--name",
            "e",
            "--json",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert (
        "notice: --timeout 5 ignored: the embedded backend calls no model server"
        in err.splitlines()
    )


def test_a_dashboard_launch_passes_its_timeout_to_the_run_command():
    from core.execution.jobs import RunRequest, run_command

    req = RunRequest("s.duckdb", "d", "r", ("oracle",), "ollama", "m", timeout_s=42.5)
    argv = run_command(req)
    assert argv[argv.index("--timeout") + 1] == "42.5"
    # the embedded reader has no timeout; none is passed, and none when the field is empty
    assert "--timeout" not in run_command(
        RunRequest("s.duckdb", "d", "r", backend="embedded", timeout_s=42.5)
    )
    assert "--timeout" not in run_command(RunRequest("s.duckdb", "d", "r", backend="ollama"))
    with pytest.raises(ValueError, match="timeout"):
        run_command(RunRequest("s.duckdb", "d", "r", backend="ollama", timeout_s=0))
