"""Issue 35, Why 5 and 12 (Build 5, 11): the server backends' HTTP edges.

``--timeout`` bounded each idle read, not the call: a server trickling one byte every 0.5 s
held each call ~15 s under ``--timeout 2``. It is now one deadline for the whole call
(connect, first byte, body). And the Ollama backend followed a redirect to another host,
sending the prompt there: no backend follows a redirect now. ``core serve`` killed with SIGKILL
left its Streamlit child serving: the child now dies with it. Real clients (ollama, httpx)
against local socket servers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT, free_port
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
    for byte in head.encode() + b"\r\n\r\n" + _BODY:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_timeout_is_a_whole_call_deadline_against_a_trickling_server(kind):
    with raw_server(trickle) as (url, _):
        if kind == "ollama":
            backend = OllamaBackend("m", hosts=[url], timeout_s=2, retry=ONE_TRY)
        else:
            backend = OpenAIBackend(
                "m", base_url=f"{url}/v1", timeout_s=2, retry=ONE_TRY, context_length=32768
            )
        t0 = time.monotonic()
        reply = backend.generate(MESSAGES)
        took = time.monotonic() - t0
    assert reply.error is not None
    assert 1.5 <= took <= 3.0, took  # the 2 s deadline, not one byte's 0.5 s idle time


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_retries_share_the_one_deadline(kind):
    """``--timeout`` bounds the whole call: the tries and the waits between them."""
    retry = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.01)
    with raw_server(trickle) as (url, _):
        if kind == "ollama":
            backend = OllamaBackend("m", hosts=[url], timeout_s=1, retry=retry)
        else:
            backend = OpenAIBackend(
                "m", base_url=f"{url}/v1", timeout_s=1, retry=retry, context_length=32768
            )
        t0 = time.monotonic()
        reply = backend.generate(MESSAGES)
        took = time.monotonic() - t0
    assert reply.error is not None
    assert 0.8 <= took <= 1.8, took  # one 1 s deadline, not 3 tries of 1 s


def test_a_retry_inside_the_deadline_still_answers():
    """A try that fails at once (HTTP 503) is retried while the deadline leaves time."""
    calls = []

    def flaky(conn: socket.socket) -> None:
        calls.append(_read_request(conn).split(b" ", 2)[1].decode())
        if calls.count("/v1/chat/completions") == 1 and calls[-1] == "/v1/chat/completions":
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            return
        body = (
            b'{"choices": [{"message": {"role": "assistant", "content": '
            b'"{\\"answer\\": \\"x\\"}"}}]}'
        )
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )

    with raw_server(flaky) as (url, _):
        backend = OpenAIBackend(
            "m",
            base_url=f"{url}/v1",
            timeout_s=5,
            context_length=32768,
            retry=RetryPolicy(attempts=3, backoff_s=0.05, max_backoff_s=0.05),
        )
        reply = backend.generate(MESSAGES)
    assert reply.error is None, reply.error
    assert calls.count("/v1/chat/completions") == 2, calls


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
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(_BODY)).encode()
        + b"\r\n\r\n"
        + _BODY
    )


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_redirect_to_another_host_is_not_followed(kind):
    with raw_server(_ok) as (other, reached), raw_server(_redirect_to(other)) as (url, _):
        if kind == "ollama":
            backend = OllamaBackend("m", hosts=[url], timeout_s=5, retry=ONE_TRY)
        else:
            backend = OpenAIBackend(
                "m", base_url=f"{url}/v1", timeout_s=5, retry=ONE_TRY, context_length=32768
            )
        reply = backend.generate(MESSAGES)
    assert reply.error is not None
    assert reached == []  # the prompt never went to the other port


# ------------------------------------------------------------------------ core serve
def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended (nobody reaps it here)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_serve_killed_with_sigkill_takes_the_dashboard_with_it(tmp_path):
    """``core serve`` SIGKILLed (no handler can run): its Streamlit child ends too."""
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core",
            "serve",
            "--no-demo",
            "--port",
            str(free_port()),
            "--db",
            str(tmp_path / "s.duckdb"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        child = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child is None:
            for pid in _children(serve.pid):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if any(b"streamlit" in part for part in cmd[:4]):  # exec'd into Streamlit
                    child = pid
            time.sleep(0.2)
        assert child is not None, "the dashboard did not start"
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the dashboard outlived serve"
    finally:
        if serve.poll() is None:
            serve.kill()
