"""Issue 35, Why 5 and 12 (Build 5, 11): the server backends' HTTP edges.

``--timeout`` bounded each idle read, not the call: a server trickling one byte every 0.5 s
held each call ~15 s under ``--timeout 2``. It is now one deadline for the whole call
(connect, first byte, body). And the Ollama backend followed a redirect to another host,
sending the prompt there: no backend follows a redirect now. Real clients (ollama, httpx)
against local socket servers.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from model_stub import MESSAGES

from core.backends import OllamaBackend, OpenAIBackend, RetryPolicy

ONE_TRY = RetryPolicy(attempts=1, backoff_s=0.01, max_backoff_s=0.01)
_BODY = b'{"model": "m", "message": {"role": "assistant", "content": "x"}, "done": true}'


@contextmanager
def raw_server(answer: Callable[[socket.socket], None]) -> Iterator[tuple[str, list[float]]]:
    """A localhost TCP server calling ``answer(conn)`` for each connection (in a thread);
    yields its URL and the times connections came in."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    seen: list[float] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            seen.append(time.monotonic())
            threading.Thread(target=_guarded, args=(answer, conn), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", seen
    finally:
        stop.set()
        thread.join(2)
        srv.close()


def _guarded(answer: Callable[[socket.socket], None], conn: socket.socket) -> None:
    try:
        with conn:
            answer(conn)
    except OSError:
        pass  # the client gave up: what the deadline is for


def _read_request(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def trickle(conn: socket.socket) -> None:
    """Answer 200 one byte every 0.5 s (status line, headers and body alike)."""
    _read_request(conn)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(_BODY)}"
    for byte in (head.encode() + b"\r\n\r\n" + _BODY):
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_timeout_is_a_whole_call_deadline_against_a_trickling_server(kind):
    with raw_server(trickle) as (url, _):
        if kind == "ollama":
            backend = OllamaBackend("m", hosts=[url], timeout_s=2, retry=ONE_TRY)
        else:
            backend = OpenAIBackend("m", base_url=f"{url}/v1", timeout_s=2, retry=ONE_TRY,
                                          context_length=32768)  # fmt: skip
        t0 = time.monotonic()
        reply = backend.generate(MESSAGES)
        took = time.monotonic() - t0
    assert reply.error is not None
    assert 1.5 <= took <= 3.0, took  # the 2 s deadline, not one byte's 0.5 s idle time


def test_each_try_has_the_deadline_and_retries_stay_bounded():
    """A timed-out try is retried (a transient error), each try within the deadline."""
    with raw_server(trickle) as (url, seen):
        backend = OllamaBackend("m", hosts=[url], timeout_s=1,
                                retry=RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.01))
        t0 = time.monotonic()
        reply = backend.generate(MESSAGES)
        took = time.monotonic() - t0
    assert reply.error is not None and reply.error.endswith("(after 3 tries)")
    assert 2.5 <= took <= 4.5, took  # 3 tries of 1 s, not 3 x the trickle's length


def _redirect_to(target: str) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        request = _read_request(conn)
        path = request.split(b" ", 2)[1].decode()
        conn.sendall(
            f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}{path}\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )

    return answer


def _ok(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY)  # fmt: skip


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_redirect_to_another_host_is_not_followed(kind):
    with raw_server(_ok) as (other, reached), raw_server(_redirect_to(other)) as (url, _):
        if kind == "ollama":
            backend = OllamaBackend("m", hosts=[url], timeout_s=5, retry=ONE_TRY)
        else:
            backend = OpenAIBackend("m", base_url=f"{url}/v1", timeout_s=5, retry=ONE_TRY,
                                          context_length=32768)  # fmt: skip
        reply = backend.generate(MESSAGES)
    assert reply.error is not None
    assert reached == []  # the prompt never went to the other port
