"""The command line as a user runs it: real subprocesses, a real store file."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys

import pytest
from conftest import ROOT, shared_fixture

from core.cli import build_parser


def run_cli(*args: str, env_db=None) -> subprocess.CompletedProcess:
    env = None
    if env_db is not None:
        import os

        env = {**os.environ, "EVIDENCE_DB": str(env_db)}
    return subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _all_command_paths(parser: argparse.ArgumentParser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _all_command_paths(sub, (*prefix, name))


def _generate(db, preset: str, seed: int, name: str) -> int:
    """``generate controlled`` in this process: a test's data, not the command under test."""
    from core.cli import main

    argv = ["generate", "controlled", "--preset", preset, "--seed", str(seed), "--name", name]
    return main([*argv, "--db", str(db)])


def test_every_command_has_help():
    paths = list(_all_command_paths(build_parser()))
    assert ("generate", "controlled") in paths and ("import", "dataset") in paths
    for path in paths:
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args([*path, "--help"])
        assert exc.value.code == 0, path


def test_usage_error_exits_2_with_one_line():
    res = run_cli("generate", "controlled", "--preset", "nope")
    assert res.returncode == 2
    assert "invalid choice: 'nope'" in res.stderr


def test_missing_file_is_a_data_error(tmp_path):
    db = tmp_path / "s.duckdb"
    res = run_cli(
        "import",
        "dataset",
        "--format",
        "hotpotqa",
        tmp_path / "absent.json",
        "--name",
        "x",
        "--db",
        db,
    )
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "absent.json" in lines[0]


def test_generate_twice_gives_identical_hashes_and_all_cells(tmp_path):
    hashes = []
    for i in range(2):
        db = tmp_path / f"x{i}.duckdb"
        res = run_cli(
            "generate",
            "controlled",
            "--preset",
            "controlled-200",
            "--seed",
            "42",
            "--name",
            "c200",
            "--db",
            db,
        )
        assert res.returncode == 0, res.stderr
        res = run_cli("datasets", "--db", db, "--json")
        assert res.returncode == 0, res.stderr
        (summary,) = json.loads(res.stdout)
        assert summary["name"] == "c200" and summary["n_instances"] == 200
        cells = {
            (
                c["context_length"],
                c["evidence_position"],
                c["distractor_similarity"],
                c["reasoning_type"],
            )
            for c in summary["cell_counts"]
        }
        expected = {
            (length, pos, dis, rea)
            for length in (4000, 8000, 16000)
            for pos in ("front", "middle", "end", "scattered")
            for dis in ("none", "low", "high", "conflicting")
            for rea in ("single_hop", "multi_hop", "comparison", "arithmetic")
        }
        assert cells == expected
        assert summary["cells"]["context_length"] == {
            k: v for k, v in summary["cells"]["context_length"].items() if int(k) <= 16000
        }
        hashes.append(summary["content_hash"])
    assert hashes[0] == hashes[1]
    # a different seed gives different content
    db = tmp_path / "other.duckdb"
    assert (
        run_cli("generate", "controlled", "--seed", "7", "--name", "c200", "--db", db).returncode
        == 0
    )
    (other,) = json.loads(run_cli("datasets", "--db", db, "--json").stdout)
    assert other["content_hash"] != hashes[0]


def test_env_db_is_the_default_store(tmp_path):
    db = tmp_path / "env.duckdb"
    res = run_cli("generate", "ruler-lite", "--name", "r", env_db=db)
    assert res.returncode == 0, res.stderr
    assert db.exists()
    (summary,) = json.loads(run_cli("datasets", "--json", env_db=db).stdout)
    assert summary["name"] == "r" and summary["n_instances"] > 0


def test_import_hotpotqa_fixture_and_refuse_second_import_unchanged(tmp_path):
    path = shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json")
    db = tmp_path / "h.duckdb"
    res = run_cli("import", "dataset", "--format", "hotpotqa", path, "--name", "hp", "--db", db)
    assert res.returncode == 0, res.stderr
    assert "53" in res.stdout
    (summary,) = json.loads(run_cli("datasets", "--db", db, "--json").stdout)
    # 52 records carry 10 paragraphs, one carries 2 (see test_importers).
    assert summary["n_instances"] == 53 and summary["n_passages"] == 52 * 10 + 2
    res = run_cli("import", "dataset", "--format", "hotpotqa", path, "--name", "hp", "--db", db)
    assert res.returncode == 1 and "already exists" in res.stderr
    (again,) = json.loads(run_cli("datasets", "--db", db, "--json").stdout)
    assert again["content_hash"] == summary["content_hash"]


def test_bad_file_leaves_store_unchanged(tmp_path):
    db = tmp_path / "b.duckdb"
    assert run_cli("generate", "ruler-lite", "--name", "r", "--db", db).returncode == 0
    before = json.loads(run_cli("datasets", "--db", db, "--json").stdout)
    good = {"id": "a", "question": "q?", "answer": "x", "passages": [{"text": "x is here"}]}
    bad = {"id": "b", "answer": "y", "passages": [{"text": "y"}]}  # no question
    f = tmp_path / "data.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [good, good | {"id": "c"}, bad]) + "\n")
    res = run_cli("import", "dataset", "--format", "jsonl", f, "--name", "mine", "--db", db)
    assert res.returncode == 1
    (line,) = res.stderr.strip().splitlines()
    assert "data.jsonl" in line and "record 3" in line and "question" in line
    assert json.loads(run_cli("datasets", "--db", db, "--json").stdout) == before


def test_output_piped_into_a_closed_reader_stops_quietly(tmp_path):
    db = tmp_path / "s.duckdb"
    for seed in (1, 2, 3):  # about 110 KB of JSON, more than a pipe holds (made in-process:
        # the command under test is the child below)
        assert _generate(db, "controlled-200", seed, f"c{seed}") == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "core", "datasets", "--db", str(db), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.read(1)
    proc.stdout.close()  # like `| head -c 1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_run_whose_calls_fail_says_why_and_fails_only_when_all_did(tmp_path):
    """Failed calls are stored with their error; the command names the most frequent errors
    on stderr, and exits 1 only when no call got an answer (server down, wrong host)."""
    from model_stub import ModelStub

    db = tmp_path / "s.duckdb"
    assert _generate(db, "controlled-200", 42, "c") == 0  # in-process: the runs are tested
    with ModelStub() as stub:
        stub.queue_modes("500", "500", "500")
        some = run_cli(
            "run",
            "--dataset",
            "c",
            "--backend",
            "ollama",
            "--model",
            "stub-model",
            "--host",
            stub.url,
            "--conditions",
            "no_evidence",
            "--name",
            "some",
            "--db",
            db,
        )
    assert some.returncode == 0, some.stderr
    line = some.stderr.strip().splitlines()[-1]
    assert line.startswith("run 'some': 3 of 200 calls failed, most frequent: "), line
    assert "500" in line and line.endswith(
        "(3); rerun the same command to make the failed calls again"
    )

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    none = run_cli(
        "run",
        "--dataset",
        "c",
        "--backend",
        "ollama",
        "--model",
        "stub-model",
        "--host",
        dead,
        "--conditions",
        "no_evidence",
        "--name",
        "none",
        "--db",
        db,
    )
    assert none.returncode == 1, none.stderr
    line = none.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f"run 'none': all 200 calls failed, most frequent: cannot reach Ollama at {dead}"
    ), line
    assert "(200)" in line
