"""Several OpenAI-compatible endpoints behind one backend (issue 21 item 3).

Real HTTP against ``tests/model_stub.py`` servers: one of them runs as its own process and is
killed mid-run (the kernel closes its sockets, as when a vLLM node dies), the run goes on on
the others with every call answered and no error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import dead_url
from model_stub import PASSAGE, ModelStub

from core.backends import make_backend
from core.backends.endpoints import EndpointBalancer, resolve_base_urls, total_concurrency
from core.backends.preflight import Problem, preflight
from core.cli import main
from core.execution.runs import run_conditions
from core.store import Store
from core.types import Dataset, Instance

ROOT = Path(__file__).resolve().parents[1]
N = 40  # instances; two conditions: 80 calls
FAST = {"retries": 2, "backoff_s": 0.01, "max_backoff_s": 0.02, "connect_timeout_s": 1.0}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "store.duckdb"
    instances = tuple(
        Instance(
            f"q{i:03d}", f"What is the capital of Zarnovia (case {i})?", "Keltbridge", (PASSAGE,)
        )
        for i in range(N)
    )
    Store(path).write_dataset(Dataset("d", "test", "test", {}, instances))
    return path


class _StubProcess:
    """``python tests/model_stub.py`` in a child process, to be killed like a real server."""

    def __init__(self, latency_s: float):
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "model_stub.py"), "--latency", str(latency_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), self.url

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def _chats(stub: ModelStub) -> int:
    return len(stub.bodies("/v1/chat/completions"))


def test_a_killed_endpoint_s_calls_move_to_the_others(db):
    victim = _StubProcess(latency_s=0.02)
    try:
        with ModelStub(latency_s=0.02) as a, ModelStub(latency_s=0.02) as b:
            urls = [a.url, victim.url, b.url]
            backend = make_backend("openai", "stub-model", base_url=urls, options=FAST)
            killed = threading.Event()

            def progress(p):
                if p.done >= 20 and not killed.is_set():
                    victim.kill()
                    killed.set()

            s = run_conditions(
                Store(db),
                "d",
                backend,
                ["oracle", "no_evidence"],
                name="r",
                concurrency=total_concurrency(backend, 2),
                progress=progress,
            )
            assert killed.is_set()
            assert (s.executed, s.errors, s.parse_errors) == (2 * N, 0, 0)
            counts = backend.endpoint_counts()
            answered = {u: c["answered"] for u, c in counts.items()}
            assert sum(answered.values()) == 2 * N
            assert sum(c["failed"] for c in counts.values()) == 0
            # the survivors answered every chat they received, and more than the victim
            assert answered[f"{a.url}/v1"] == _chats(a) and answered[f"{b.url}/v1"] == _chats(b)
            assert 1 <= answered[f"{victim.url}/v1"] < 2 * N
            # whether a call was in flight to the victim at the kill (and so was moved) depends
            # on timing; that a failing endpoint's call moves is pinned by the HTTP 500 test
            assert counts[f"{victim.url}/v1"]["failed"] == 0
            assert counts[f"{a.url}/v1"]["moved"] == counts[f"{b.url}/v1"]["moved"] == 0
    finally:
        victim.kill()
    with Store(db).attached(read_only=True) as con:
        n, errors = con.execute(
            "SELECT count(*), count(error) FROM predictions WHERE run_id = 'r'"
        ).fetchone()
    assert (n, errors) == (2 * N, 0)


def test_a_dead_endpoint_at_start_is_reported_and_gets_no_calls(db):
    dead = dead_url()
    with ModelStub() as live:
        problems = preflight("openai", "stub-model", base_url=[live.url, dead], timeout_s=1.0)
        assert problems == [
            Problem(
                "server",
                (
                    f"cannot reach the OpenAI-compatible server at {dead}/v1: start it (e.g. `vllm "
                    "serve MODEL`) or fix the base URL"
                ),
            )
        ]
        backend = make_backend("openai", "stub-model", base_url=[live.url, dead], options=FAST)
        desc = backend.describe()
        assert desc["base_urls"] == [f"{live.url}/v1", f"{dead}/v1"]
        assert desc["endpoint_context_lengths"] == {f"{live.url}/v1": 131072, f"{dead}/v1": None}
        assert desc["error"].startswith(f"cannot reach the OpenAI-compatible server at {dead}/v1")
        s = run_conditions(Store(db), "d", backend, ["oracle"], name="r", concurrency=4)
        assert (s.executed, s.errors) == (N, 0)
        assert backend.endpoint_counts() == {
            f"{live.url}/v1": {"answered": N, "failed": 0, "moved": 0},
            f"{dead}/v1": {"answered": 0, "failed": 0, "moved": 0},
        }
        stored = Store(db).run_row("r")["backend_info"]
        assert stored["base_urls"] == [f"{live.url}/v1", f"{dead}/v1"]


def test_every_endpoint_dead_fails_the_call_naming_how_many_were_tried():
    one, two = dead_url(), dead_url()
    backend = make_backend("openai", "stub-model", base_url=[one, two], options=FAST)
    reply = backend.generate([{"role": "user", "content": "hi"}])
    assert not reply.ok and reply.error.endswith("(2 of 2 endpoints tried)")
    assert reply.error.startswith("cannot reach the OpenAI-compatible server at ")
    counts = backend.endpoint_counts()
    assert sorted((c["moved"], c["failed"]) for c in counts.values()) == [(0, 1), (1, 0)]


def test_http_500_moves_the_call_a_bad_request_does_not():
    with ModelStub(mode="500") as broken, ModelStub() as ok:
        backend = make_backend("openai", "stub-model", base_url=[broken.url, ok.url], options=FAST)
        for _ in range(4):
            assert backend.generate([{"role": "user", "content": "Capital of Zarnovia?"}]).ok
        counts = backend.endpoint_counts()
        assert counts[f"{ok.url}/v1"]["answered"] == 4
        # the first call found the broken one (HTTP 500: no retry), then it was left alone
        assert counts[f"{broken.url}/v1"] == {"answered": 0, "failed": 0, "moved": 1}
        assert _chats(broken) == 1
    with ModelStub(context_length=16) as small, ModelStub(context_length=16) as small2:
        backend = make_backend(
            "openai",
            "stub-model",
            base_url=[small.url, small2.url],
            options={**FAST, "chars_per_token": 1000},
        )
        reply = backend.generate([{"role": "user", "content": "x " * 200}])
        assert not reply.ok and "longer than the model's context" in reply.error
        assert _chats(small) + _chats(small2) == 1  # a 400 is the request's fault: not moved


def test_cli_repeated_base_url_spreads_the_calls_one_base_url_as_before(db, capsys):
    with ModelStub(latency_s=0.01) as a, ModelStub(latency_s=0.01) as b:
        rc = main(
            [
                "run",
                "--db",
                str(db),
                "--dataset",
                "d",
                "--backend",
                "openai",
                "--model",
                "stub-model",
                "--base-url",
                a.url,
                "--base-url",
                b.url,
                "--conditions",
                "oracle",
                "--concurrency",
                "3",
                "--name",
                "two",
                "--json",
            ]
        )
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and (out["executed"], out["errors"]) == (N, 0)
        assert _chats(a) + _chats(b) == N and _chats(a) > 0 and _chats(b) > 0
        info = Store(db).run_row("two")["backend_info"]
        assert info["base_urls"] == [f"{a.url}/v1", f"{b.url}/v1"]
        # one --base-url: recorded exactly as before (no endpoint list)
        rc = main(
            [
                "run",
                "--db",
                str(db),
                "--dataset",
                "d",
                "--backend",
                "openai",
                "--model",
                "stub-model",
                "--base-url",
                a.url,
                "--conditions",
                "oracle",
                "--name",
                "one",
                "--json",
            ]
        )
        assert rc == 0
        info = Store(db).run_row("one")["backend_info"]
        assert info["base_url"] == f"{a.url}/v1" and "base_urls" not in info


def test_balancer_keeps_the_per_endpoint_limit_and_waits_for_a_slot():
    bal = EndpointBalancer(2, limit=1)
    first, second = bal.acquire(set()), bal.acquire(set())
    assert {first, second} == {0, 1}
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(bal.acquire(set())))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # both endpoints hold one call: the third waits
    bal.release(second, "answered")
    waiter.join(timeout=5)
    assert got == [second]
    # a down endpoint gets no call while another is live, and is tried when none is
    bal.release(first, "moved")
    bal.release(second, "answered")
    assert bal.live() == [first != 0, first != 1]
    assert bal.acquire(set()) == second
    assert bal.acquire({second}) == first


def test_resolve_base_urls(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "h1:8000, http://h2:8000/v1")
    assert resolve_base_urls(None) == ["http://h1:8000/v1", "http://h2:8000/v1"]
    assert resolve_base_urls(["a:1,b:2", "a:1/"]) == ["http://a:1/v1", "http://b:2/v1"]
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ValueError, match="needs --base-url"):
        resolve_base_urls([])
    backend = make_backend("openai", "m", base_url=["a:1", "b:2", "c:3"])
    assert total_concurrency(backend, 4) == 12
    assert total_concurrency(make_backend("openai", "m", base_url="a:1"), 4) == 4
    backend.size_pool(12)
    assert backend.pool_size == 4
