"""``run --backend auto``: Ollama when a server answers, the embedded baseline otherwise."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from conftest import ROOT, dead_url
from model_stub import ModelStub

from core.commands.run import choose_backend


def test_explicit_backend_is_kept():
    assert choose_backend("openai", "m", [dead_url()]) == "openai"


def test_no_server_falls_back_to_the_labelled_baseline():
    out = io.StringIO()
    dead = dead_url()
    assert choose_backend("auto", None, [dead], out=out) == "embedded"
    assert f"no Ollama server answers at {dead}" in out.getvalue()
    assert "baseline" in out.getvalue()


def test_no_server_with_a_model_says_how_to_start_it():
    with pytest.raises(ValueError, match=r"ollama serve.*ollama pull qwen3:8b"):
        choose_backend("auto", "qwen3:8b", [dead_url()])


def test_a_server_that_answers_is_used_and_needs_a_model():
    with ModelStub() as stub:
        assert choose_backend("auto", "stub-model", [stub.url]) == "ollama"
        with pytest.raises(ValueError, match="choose a model with --model"):
            choose_backend("auto", None, [stub.url])


def test_run_without_backend_uses_the_embedded_reader_when_no_server(tmp_path):
    db = str(tmp_path / "s.duckdb")
    env_cmd = [sys.executable, "-m", "core"]
    gen = subprocess.run(
        [
            *env_cmd,
            "generate",
            "controlled",
            "--preset",
            "controlled-200",
            "--name",
            "c",
            "--db",
            db,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert gen.returncode == 0, gen.stderr
    run = subprocess.run(
        [
            *env_cmd,
            "run",
            "--dataset",
            "c",
            "--conditions",
            "oracle",
            "--host",
            dead_url(),
            "--name",
            "r",
            "--json",
            "--db",
            db,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "running the embedded baseline reader" in run.stderr
    summary = json.loads(run.stdout)
    assert summary["planned"] == 200 and summary["errors"] == 0


def test_several_hosts_in_ollama_host_do_not_break_the_client_import():
    env = dict(__import__("os").environ, OLLAMA_HOST="127.0.0.1:9,127.0.0.1:10")
    code = (
        "from core.backends.ollama import resolve_hosts; import os; "
        "print(resolve_hosts(), os.environ['OLLAMA_HOST'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("] ")[1].strip() == "127.0.0.1:9,127.0.0.1:10"
    assert "http://127.0.0.1:10" in out.stdout
