"""The server backends' HTTP connection pools follow the run's concurrency (issue 17, item 8).

httpx keeps 20 idle connections by default; with more threads than that, every call beyond
them opened a new TCP connection. The engine now sizes the real clients' pools
(``httpx.Limits``) to its concurrency, and the stub counts the connections it accepts.
"""

from __future__ import annotations

import pytest
from model_stub import PASSAGE, ModelStub

from core.backends import make_backend
from core.execution.runs import run_conditions
from core.store import Store
from core.types import Dataset, Instance

N = 60  # instances: 240 calls, 120 distinct prompts


def _limits(backend) -> tuple[int, int]:
    """``(max_connections, max_keepalive_connections)`` of the backend's httpx pool(s)."""
    clients = (
        [h.client._client for h in backend._hosts]
        if backend.name == "ollama"
        else [backend._client]
    )
    pools = {
        (c._transport._pool._max_connections, c._transport._pool._max_keepalive_connections)
        for c in clients
    }
    assert len(pools) == 1
    return pools.pop()


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


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_pool_starts_at_the_default_and_follows_the_concurrency(db, kind):
    with ModelStub(latency_s=0.05) as stub:
        kw = {"hosts": [stub.url]} if kind == "ollama" else {"base_url": stub.url}
        backend = make_backend(kind, "stub-model", **kw)
        assert _limits(backend) == (20, 20)
        s = run_conditions(
            Store(db), "d", backend, ["oracle", "no_evidence"], name="r", concurrency=48
        )
        assert (s.executed, s.errors) == (2 * N, 0)
        assert _limits(backend) == (48, 48)
        # Kept alive: one connection per thread, not one per call beyond 20 (setup requests
        # such as /api/version open a few of their own).
        assert stub.connections <= 48 + 4, stub.connections
        # A later run at another concurrency resizes the pool again.
        s = run_conditions(Store(db), "d", backend, ["oracle"], name="r2", concurrency=3)
        assert _limits(backend) == (3, 3)


def test_server_concurrency_above_the_cap_gets_a_pool_of_the_cap(db):
    with ModelStub() as stub:
        backend = make_backend("openai", "stub-model", base_url=stub.url)
        s = run_conditions(Store(db), "d", backend, ["oracle"], name="r", concurrency=5000)
        assert (s.executed, s.errors) == (N, 0)
        assert _limits(backend) == (256, 256)


def test_ollama_calls_take_lanes_of_one_connection_up_to_the_pool_size(db):
    """Each concurrent call has a client of its own (no scan of a shared pool per request)."""
    with ModelStub(latency_s=0.02) as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url])
        s = run_conditions(Store(db), "d", backend, ["oracle"], name="r", concurrency=8)
        assert (s.executed, s.errors) == (N, 0)
        host = backend._hosts[0]
        assert 1 <= len(host.lanes) <= 8
        assert sorted(host.free, key=id) == sorted(host.lanes, key=id)  # all given back
        assert {
            (
                c._client._transport._pool._max_connections,
                c._client._transport._pool._max_keepalive_connections,
            )
            for c in host.lanes
        } == {(1, 1)}
        # Every lane busy: a further call shares the host's client (a pool of 8).
        taken = [backend._lane(host) for _ in range(8)]
        assert all(free is host.free for _, free in taken)
        assert backend._lane(host) == (host.client, None)
        for client, free in taken:
            free.append(client)
        # A resize drops the lanes (closed); new ones are made as calls need them.
        backend.size_pool(3)
        assert host.lanes == [] and host.free == []
        assert backend.generate([{"role": "user", "content": "Capital of Zarnovia?"}]).ok
        assert len(host.lanes) == 1 and host.free == host.lanes


def test_openai_calls_take_lanes_of_one_connection_up_to_the_pool_size(db):
    with ModelStub(latency_s=0.02) as stub:
        backend = make_backend("openai", "stub-model", base_url=stub.url)
        s = run_conditions(Store(db), "d", backend, ["oracle"], name="r", concurrency=8)
        assert (s.executed, s.errors) == (N, 0)
        assert 1 <= len(backend._lanes) <= 8
        assert sorted(backend._free, key=id) == sorted(backend._lanes, key=id)
        assert {c._transport._pool._max_connections for c in backend._lanes} == {1}
        assert stub.connections <= 8 + 4, stub.connections


def test_the_heap_is_frozen_while_the_calling_threads_run(db, monkeypatch):
    """Full garbage collections skip the objects that existed before the run while its calls
    are in flight (a walk of the whole heap stalled every call; issue 17 item 8), nested runs
    keep it frozen until the last ends, and afterwards nothing stays frozen."""
    import gc

    from core.execution import threads as engine_threads

    gc.unfreeze()  # a clean slate: a dashboard page run in this process froze its heap
    seen: list[int] = []
    with ModelStub() as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url])
        real = backend.generate

        def generate(messages, *args, **kwargs):
            seen.append(gc.get_freeze_count())
            return real(messages, *args, **kwargs)

        monkeypatch.setattr(backend, "generate", generate)
        assert gc.get_freeze_count() == 0
        with engine_threads.frozen_heap():  # another run of this process, still going
            s = run_conditions(Store(db), "d", backend, ["oracle"], name="r", concurrency=4)
            assert gc.get_freeze_count() > 0  # the inner run's end did not unfreeze
        assert gc.get_freeze_count() == 0
        s2 = run_conditions(Store(db), "d", backend, ["no_evidence"], name="r2", concurrency=4)
    assert (s.executed, s.errors, s2.executed, s2.errors) == (N, 0, N, 0)
    assert len(seen) == 2 * N and min(seen) > 0
    assert gc.get_freeze_count() == 0
    # a heap frozen by someone else (a server's startup heap) stays frozen after a run
    gc.freeze()
    try:
        with engine_threads.frozen_heap():
            pass
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
