"""A small local model server for backend, engine and benchmark tests (no Ollama needed).

:class:`ModelStub` runs a threaded HTTP server on 127.0.0.1 (a free port) that speaks the parts
of the Ollama API (``/api/chat``, ``/api/show``, ``/api/tags``, ``/api/version``) and of the
OpenAI API (``/v1/chat/completions``, ``/v1/models``) that our backends call. A chat is
answered with the embedded baseline reader's reply to the same messages, so a run against the
stub gives real, scoreable predictions. Use it as a context manager::

    with ModelStub(latency_s=0.05) as stub:
        backend = make_backend("ollama", "stub-model", hosts=[stub.url])
        ...
        assert stub.requests[-1][0] == "/api/chat"

What the stub does, so tests can compute exact expectations:

- prompt tokens (:meth:`ModelStub.count_tokens`): the pieces ``\\w+`` and single non-space
  characters over all message contents, plus 4 per message. Like Ollama, ``/api/chat``
  silently truncates a prompt longer than ``options.num_ctx`` (``prompt_eval_count`` is then
  ``num_ctx``); ``/v1/chat/completions`` answers HTTP 400 (as vLLM does) when prompt tokens
  plus ``max_tokens`` exceed :attr:`ModelStub.context_length`.
- reply tokens (:func:`split_tokens`): pieces ``\\s*\\w+``, ``\\s*<one symbol>``, trailing
  spaces; they concatenate to the reply text exactly.
- Ollama timings (nanoseconds): ``load_duration`` 500 ms on the first chat and whenever
  ``num_ctx`` changes (a model reload), else 100 us; ``prompt_eval_duration`` 20 us per
  prompt token; ``eval_duration`` 1 ms per reply token; ``total_duration`` = their sum plus
  ``latency_s``.
- log-probabilities (when the request asks for them): every token inside the reply's
  ``"answer"`` string value has logprob ``ln(confidence)`` (the reader's self-reported
  confidence, floored at 0.01); every other token ``-0.001 * (len(token) % 7)``; each entry
  carries ``top_logprobs`` alternatives (the token itself first, then ``"<alt1>"``, ...).

Modes (:meth:`ModelStub.set_mode`) change how the chat endpoints answer; the model-info
endpoints always answer normally: ``ok``; ``500`` (HTTP 500 every time); ``503-once`` (the
next chat gets HTTP 503 "server busy", later ones are answered); ``stall`` (no answer until
:attr:`ModelStub.stall_s` passes or the stub stops); ``not-json`` (HTTP 200 with a plain-text
body); ``missing-fields`` (HTTP 200 JSON without ``message`` / ``choices``); ``close`` (the
connection is closed after half of the response body); ``garbage`` (a well-formed HTTP 200
answer whose reply text misses the answer contract, cycling through :data:`GARBAGE_REPLIES`;
no log-probabilities); ``json-list`` / ``json-null`` (HTTP 200 whose body is ``[]`` / ``null``);
``huge`` (the normal reply with :data:`HUGE_PAD` characters ``é`` appended to its
``explanation``, a reply of about 300 KB; no log-probabilities). :meth:`ModelStub.queue_modes`
scripts the modes of the next chats one by one (then the current mode resumes), to mix faults
within one run.

The server is bounded: at most ``max_workers`` requests are handled at once, request bodies
over 64 MiB are refused, and it stops by itself on exit from the ``with`` block (stalled
handlers are released at once).

It can also run as its own process, so a benchmark's client and server do not share one
interpreter lock: ``python tests/model_stub.py [--port 0] [--latency 0.05] [--model NAME]
[--workers 64]`` prints its URL on the first line of stdout and serves until stdin closes or
it is killed. ``--workers`` (``max_workers``) bounds the requests answered at once: a bench
at client concurrency c gives the stub at least 2c, so the figure measures the client, not
the stub (issue 38 item 4). Measured alone (2026-11-28, the shared 2-core machine at load
6-7): ``--workers 256 --latency 0.5`` against a trivial client (``http.client``, 128 threads,
one kept-alive connection each, 768 prompts of ``controlled-200``) served 89-96 % of the ideal
256 calls/s once its replies were remembered, at 0.55 ms of the stub's CPU a call; two
processes on one port (``SO_REUSEPORT``, tried) served no more, and each had to read every
prompt once itself.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Bench scripts import this file by path; make the project importable for them too.
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.backends.embedded import EmbeddedReader
from core.execution.prompts import build_messages
from core.types import Instance, Passage

__all__ = [
    "GARBAGE_REPLIES",
    "HUGE_PAD",
    "MESSAGES",
    "MODES",
    "PASSAGE",
    "ModelStub",
    "main",
    "split_tokens",
]

#: The one gold passage of the example chat the backend and stub tests send.
PASSAGE = Passage(
    "p0001",
    0,
    "Zarnovia",
    "The capital of Zarnovia is Keltbridge. It has 9 bridges.",
    "d1",
    "gold",
    True,
)
#: The example chat: the ``oracle`` prompt of a question about :data:`PASSAGE`.
MESSAGES = build_messages(
    Instance("x", "What is the capital of Zarnovia?", "", (PASSAGE,)), "oracle"
)

#: Modes :meth:`ModelStub.set_mode` accepts.
MODES = (
    "ok",
    "500",
    "503-once",
    "stall",
    "not-json",
    "missing-fields",
    "close",
    "garbage",
    "json-list",
    "json-null",
    "huge",
)
#: Characters ``é`` (2 bytes each in UTF-8) the ``huge`` mode appends to the reply's
#: ``explanation``: a reply of about 300 KB, but of fewer characters than the parser reads.
HUGE_PAD = 150_000
#: Reply texts of the ``garbage`` mode, in turn: prose; JSON cut off inside an emoji (the body
#: carries a ``\ud83d`` escape without its partner, as a server stopped at the token limit
#: sends); no ``answer``; nothing.
GARBAGE_REPLIES = (
    "I am sorry, I cannot answer that from the passages.",
    '{"answer": "K0 \ud83d',
    '{"evidence_ids": ["p0001"], "confidence": 0.9}',
    "",
)

_MAX_BODY = 64 * 1024 * 1024
#: Replies the stub remembers by prompt (it forgets them all when this many are stored).
_MAX_REMEMBERED = 100_000
_PROMPT_PIECE = re.compile(r"\w+|[^\w\s]")
_REPLY_PIECE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
_LOAD_NS = 500_000_000
_WARM_LOAD_NS = 100_000
_PROMPT_NS_PER_TOKEN = 20_000
_EVAL_NS_PER_TOKEN = 1_000_000


def _prompt_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """The key a chat's prompt is remembered by (computed once per chat)."""
    return json.dumps(messages, sort_keys=True)


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into the stub's reply tokens (they concatenate back to ``text``)."""
    return _REPLY_PIECE.findall(text)


def _answer_span(text: str, answer: str) -> tuple[int, int]:
    """Character span of the ``"answer"`` string value inside the reply JSON ``text``."""
    key = '"answer": "'
    start = text.index(key) + len(key)
    return start, start + len(json.dumps(answer, ensure_ascii=False)) - 2


class ModelStub:
    """Threaded local HTTP server imitating Ollama and an OpenAI-compatible server.

    Attributes:
        url: base URL, e.g. ``http://127.0.0.1:43211``.
        requests: every request received, in arrival order, as ``(path, json_body)``
            (``json_body`` is None for GET requests and bodies that are not JSON).
        headers: the HTTP headers of each request, parallel to ``requests``.
        openai_logprobs: when False, ``/v1/chat/completions`` answers HTTP 400 to a request
            asking for log-probabilities (as servers without them do).
        model: the one model name the stub serves (``NAME`` and ``NAME:latest`` both match).
        digest: the model digest reported by ``/api/tags``.
        latency_s: seconds each chat answer is delayed.
        mode: current mode (see the module docstring).
        stall_s: how long ``stall`` holds a request before answering normally.
        context_length: the model's context window in tokens (``/v1/models`` reports it as
            ``max_model_len``, as vLLM does; ``/api/show`` as ``stub.context_length``).
        version: the Ollama version ``/api/version`` reports.
        connections: TCP connections accepted so far (a client that keeps its connections
            alive opens one per concurrent call, and no more).
        thinking: when set, a thinking model's reasoning returned apart from the reply text
            (Ollama ``message.thinking``; OpenAI-compatible ``message.reasoning_content``).
        thinking_only: with ``thinking``, the model was cut off inside its reasoning: no
            content (OpenAI-compatible ``null``, Ollama ``""``).
    """

    def __init__(
        self,
        latency_s: float = 0.0,
        model: str = "stub-model",
        digest: str = "sha256:" + "ab" * 32,
        mode: str = "ok",
        *,
        max_workers: int = 64,
        stall_s: float = 30.0,
        context_length: int = 131072,
        version: str = "0.12.11",
    ):
        if int(max_workers) < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.latency_s = float(latency_s)
        self.max_workers = int(max_workers)
        self.model = model
        self.digest = digest
        self.stall_s = float(stall_s)
        self.context_length = int(context_length)
        self.version = version
        self.requests: list[tuple[str, Any]] = []
        self.connections = 0
        self.headers: list[dict[str, str]] = []
        self.openai_logprobs = True
        self.thinking: str | None = None
        self.thinking_only = False
        #: ``callable(messages) -> str | None``: when it returns text, the chat is answered
        #: with that text as the answer contract's ``answer`` (tests script a judge's rating);
        #: None (default) or a None return: the embedded reader answers.
        self.answer_for: Any = None
        self.mode = "ok"
        self.set_mode(mode)
        self._queued: deque[str] = deque()
        self._garbage = 0
        self._reader = EmbeddedReader()
        self._replies: dict[str, tuple[str, float, str]] = {}
        self._tokens: dict[str, int] = {}  # prompt token counts, as remembered as replies
        self._entries: dict[tuple, list[dict[str, Any]]] = {}  # log-probabilities per reply
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_workers)
        self._stop = threading.Event()
        self._num_ctx: int | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle --------------------------------------------------------------------

    def start(self, port: int = 0) -> ModelStub:
        """Start serving on ``port`` (0: a free one); ``with ModelStub() as stub`` calls this."""
        handler = type("_BoundHandler", (_Handler,), {"stub": self})
        self._server = _Server(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release stalled handlers and close the socket."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelStub:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- controls ---------------------------------------------------------------------

    def set_mode(self, mode: str) -> None:
        """Switch how the chat endpoints answer (one of :data:`MODES`)."""
        if mode not in MODES:
            raise ValueError(f"unknown stub mode {mode!r}; allowed: {', '.join(MODES)}")
        self.mode = mode

    def queue_modes(self, *modes: str) -> None:
        """Answer the next ``len(modes)`` chats in these modes, in arrival order; then the
        current mode resumes (``503-once`` in the queue applies to that one chat)."""
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown stub mode {bad[0]!r}; allowed: {', '.join(MODES)}")
        with self._lock:
            self._queued.extend(modes)

    def paths(self) -> list[str]:
        """Paths of the requests received so far, in order."""
        with self._lock:
            return [p for p, _ in self.requests]

    def bodies(self, path: str) -> list[Any]:
        """JSON bodies of the requests received so far on ``path``, in order."""
        with self._lock:
            return [body for p, body in self.requests if p == path]

    @staticmethod
    def count_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
        """The stub's prompt token count for ``messages`` (see the module docstring)."""
        return sum(len(_PROMPT_PIECE.findall(str(m.get("content", "")))) + 4 for m in messages)

    # -- answers ----------------------------------------------------------------------

    def _known(self, name: Any) -> bool:
        return isinstance(name, str) and name in (self.model, f"{self.model}:latest")

    def _take_mode(self) -> str:
        with self._lock:
            if self._queued:
                return self._queued.popleft()
            mode = self.mode
            if mode == "503-once":
                self.mode = "ok"
        return mode

    def _reply(self, messages: Sequence[Mapping[str, Any]], key: str) -> tuple[str, float, str]:
        """The chat's answer: ``(reply text, confidence, answer)``; ``key``: :func:`_prompt_key`."""
        if self.answer_for is not None:  # a test's scripted answer (e.g. a judge's rating)
            forced = self.answer_for(messages)
            if forced is not None:
                obj = {"answer": forced, "evidence_ids": [], "confidence": 1.0, "explanation": ""}
                return json.dumps(obj), 1.0, forced
        # The reader is deterministic: a prompt seen before gets its remembered reply (a
        # benchmark sends the same prompts run after run; the stub should not be its limit).
        return self._remembered(self._replies, key, lambda: self._read(messages))

    def _read(self, messages: Sequence[Mapping[str, Any]]) -> tuple[str, float, str]:
        """The embedded reader's answer to the chat: ``(reply text, confidence, answer)``."""
        reply = self._reader.generate(messages)
        obj = json.loads(reply.text)
        return reply.text, float(obj["confidence"]), str(obj["answer"])

    def _remembered(self, memo: dict, key: Any, make: Callable[[], Any]) -> Any:
        """``memo[key]``, made by ``make()`` and remembered when missing (at most
        :data:`_MAX_REMEMBERED` entries: a full memo is emptied first)."""
        value = memo.get(key)
        if value is None:
            value = make()
            with self._lock:
                if len(memo) >= _MAX_REMEMBERED:
                    memo.clear()
                memo[key] = value
        return value

    def _prompt_tokens(self, messages: Sequence[Mapping[str, Any]], key: str) -> int:
        """:meth:`count_tokens`, remembered per prompt as replies are (the regex over a 32K-token
        prompt cost 0.4 ms a chat: most of a remembered chat's answer)."""
        return self._remembered(self._tokens, key, lambda: self.count_tokens(messages))

    def _logprobs(self, text: str, conf: float, answer: str, top: int) -> list[dict[str, Any]]:
        """The reply's log-probability entries (remembered per reply; never modified)."""
        return self._remembered(
            self._entries,
            (text, conf, answer, top),
            lambda: self._logprob_entries(text, conf, answer, top),
        )

    @staticmethod
    def _logprob_entries(text: str, conf: float, answer: str, top: int) -> list[dict[str, Any]]:
        start, end = _answer_span(text, answer)
        inside = math.log(max(conf, 0.01))
        out, pos = [], 0
        for tok in split_tokens(text):
            a, b = pos, pos + len(tok)
            pos = b
            lp = inside if (a < end and b > start) else -0.001 * (len(tok) % 7)
            alts = [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]
            for k in range(1, top):
                alt = f"<alt{k}>"
                alts.append({"token": alt, "logprob": lp - 2.0 * k, "bytes": list(alt.encode())})
            out.append(
                {
                    "token": tok,
                    "logprob": lp,
                    "bytes": list(tok.encode()),
                    "top_logprobs": alts[:top],
                }
            )
        return out

    def _content(self, text: str, cut: str | None) -> str | None:
        """The reply's content: ``cut`` when :attr:`thinking_only` (cut off in its reasoning)."""
        return cut if self.thinking is not None and self.thinking_only else text

    def _thought(self, key: str) -> dict[str, str]:
        """The reasoning field of a reply message (empty unless :attr:`thinking` is set)."""
        return {} if self.thinking is None else {key: self.thinking}

    def ollama_chat(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer an ``/api/chat`` body: ``(status, json)``."""
        model = body.get("model")
        if not self._known(model):
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        messages = body.get("messages") or []
        options = body.get("options") or {}
        num_ctx = int(options.get("num_ctx", 2048))
        with self._lock:
            reload = self._num_ctx != num_ctx
            self._num_ctx = num_ctx
        key = _prompt_key(messages)
        text, conf, answer = self._reply(messages, key)
        n_prompt = min(self._prompt_tokens(messages, key), num_ctx)
        n_eval = len(split_tokens(text))
        load = _LOAD_NS if reload else _WARM_LOAD_NS
        prompt_ns = _PROMPT_NS_PER_TOKEN * n_prompt
        eval_ns = _EVAL_NS_PER_TOKEN * n_eval
        out: dict[str, Any] = {
            "model": model,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "message": {
                "role": "assistant",
                "content": self._content(text, ""),
                **self._thought("thinking"),
            },
            "done": True,
            "done_reason": "stop",
            "total_duration": load + prompt_ns + eval_ns + int(self.latency_s * 1e9),
            "load_duration": load,
            "prompt_eval_count": n_prompt,
            "prompt_eval_duration": prompt_ns,
            "eval_count": n_eval,
            "eval_duration": eval_ns,
        }
        if body.get("logprobs"):
            out["logprobs"] = self._logprobs(text, conf, answer, int(body.get("top_logprobs", 0)))
        return 200, out

    def openai_chat(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer a ``/v1/chat/completions`` body: ``(status, json)``."""
        model = body.get("model")
        if not self._known(model):
            return 404, {
                "error": {
                    "message": f"The model `{model}` does not exist.",
                    "type": "NotFoundError",
                    "code": 404,
                }
            }
        if body.get("logprobs") and not self.openai_logprobs:
            return 400, {
                "error": {
                    "message": "logprobs is not supported by this server",
                    "type": "BadRequestError",
                    "code": 400,
                }
            }
        messages = body.get("messages") or []
        key = _prompt_key(messages)
        n_prompt = self._prompt_tokens(messages, key)
        max_tokens = int(body.get("max_tokens") or 0)
        if n_prompt + max_tokens > self.context_length:
            return 400, {
                "error": {
                    "message": (
                        f"This model's maximum context length is {self.context_length} tokens. "
                        f"However, you requested {n_prompt + max_tokens} tokens "
                        f"({n_prompt} in the messages, {max_tokens} in the completion)."
                    ),
                    "type": "BadRequestError",
                    "code": 400,
                }
            }
        text, conf, answer = self._reply(messages, key)
        n_eval = len(split_tokens(text))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": self._content(text, None),
                **self._thought("reasoning_content"),
            },
            "finish_reason": "stop",
            "logprobs": None,
        }
        if body.get("logprobs"):
            top = int(body.get("top_logprobs") or 0)
            choice["logprobs"] = {"content": self._logprobs(text, conf, answer, top)}
        return 200, {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_eval,
                "total_tokens": n_prompt + n_eval,
            },
        }

    def show(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer an ``/api/show`` body."""
        model = body.get("model")
        if not self._known(model):
            return 404, {"error": f"model '{model}' not found"}
        return 200, {
            "modelfile": f"FROM {self.model}",
            "parameters": "temperature 0",
            "template": "{{ .Prompt }}",
            "details": {
                "format": "gguf",
                "family": "stub",
                "families": ["stub"],
                "parameter_size": "0B",
                "quantization_level": "F16",
            },
            "model_info": {
                "general.architecture": "stub",
                "stub.context_length": self.context_length,
            },
            "capabilities": ["completion"],
            "modified_at": "2025-01-01T00:00:00Z",
        }

    def tags(self) -> dict[str, Any]:
        """Answer ``/api/tags``."""
        return {
            "models": [
                {
                    "name": f"{self.model}:latest" if ":" not in self.model else self.model,
                    "model": f"{self.model}:latest" if ":" not in self.model else self.model,
                    "modified_at": "2025-01-01T00:00:00Z",
                    "size": 1234,
                    "digest": self.digest.removeprefix("sha256:"),
                    "details": {"format": "gguf", "family": "stub"},
                }
            ]
        }

    def models(self) -> dict[str, Any]:
        """Answer ``/v1/models``."""
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "stub",
                    "max_model_len": self.context_length,
                }
            ],
        }


class _Server(ThreadingHTTPServer):
    """The stub's server: a large accept backlog, so a burst of new connections (a client
    opening one per worker thread) is queued, not dropped and retried by TCP a second later."""

    request_queue_size = 1024
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        stub = self.RequestHandlerClass.stub  # type: ignore[attr-defined]
        with stub._lock:
            stub.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    stub: ModelStub
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a kept-alive connection waits
    # for the client's delayed ACK (~40 ms) before the body.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, *, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if raw is None else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        if n > _MAX_BODY:
            raise ValueError("request body too large")
        data = self.rfile.read(n) if n else b""
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None

    def do_GET(self) -> None:
        self._handle(None)

    def do_POST(self) -> None:
        try:
            body = self._body()
        except ValueError:
            self.close_connection = True
            self._send(413, {"error": "request body too large"})
            return
        self._handle(body)

    def _handle(self, body: Any) -> None:
        stub = self.stub
        path = self.path.split("?", 1)[0]
        with stub._lock:
            stub.requests.append((path, body))
            stub.headers.append({k.lower(): v for k, v in self.headers.items()})
        with stub._slots, contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if path in ("/api/chat", "/v1/chat/completions"):
                self._chat(path, body if isinstance(body, dict) else {})
            elif path == "/api/show" and self.command == "POST":
                self._send(*stub.show(body if isinstance(body, dict) else {}))
            elif path == "/api/tags":
                self._send(200, stub.tags())
            elif path == "/api/version":
                self._send(200, {"version": stub.version})
            elif path == "/v1/models":
                self._send(200, stub.models())
            else:
                self._send(404, {"error": f"no route {self.command} {path}"})

    def _chat(self, path: str, body: dict[str, Any]) -> None:
        stub = self.stub
        mode = stub._take_mode()
        if mode == "stall":
            if stub._stop.wait(stub.stall_s):
                self.close_connection = True
                return
        if stub.latency_s > 0 and stub._stop.wait(stub.latency_s):
            self.close_connection = True
            return
        if mode == "500":
            self._send(500, {"error": "stub: internal server error"})
            return
        if mode == "503-once":
            self._send(503, {"error": "server busy, please try again.  maximum pending requests"})
            return
        if mode == "not-json":
            self._send(200, None, raw=b"<html>this is not json</html>")
            return
        if mode in ("json-list", "json-null"):
            self._send(200, [] if mode == "json-list" else None)
            return
        if mode == "missing-fields":
            payload = {"model": body.get("model"), "done": True}
            if path != "/api/chat":
                payload = {"id": "chatcmpl-stub", "object": "chat.completion"}
            self._send(200, payload)
            return
        status, payload = stub.ollama_chat(body) if path == "/api/chat" else stub.openai_chat(body)
        if mode == "garbage" and status == 200:
            with stub._lock:
                text = GARBAGE_REPLIES[stub._garbage % len(GARBAGE_REPLIES)]
                stub._garbage += 1
            if path == "/api/chat":
                payload["message"]["content"] = text
                payload.pop("logprobs", None)
            else:
                payload["choices"][0]["message"]["content"] = text
                payload["choices"][0]["logprobs"] = None
        if mode == "huge" and status == 200:
            msg = payload["message"] if path == "/api/chat" else payload["choices"][0]["message"]
            obj = json.loads(msg["content"])
            obj["explanation"] = str(obj.get("explanation") or "") + "é" * HUGE_PAD
            msg["content"] = json.dumps(obj, ensure_ascii=False)
            payload.pop("logprobs", None)
            if path != "/api/chat":
                payload["choices"][0]["logprobs"] = None
        if mode == "close":
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self._send(status, payload)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a stub in this process until stdin closes (see the module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(description="stub Ollama/OpenAI model server")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat answer")
    parser.add_argument("--model", default="stub-model", help="the model name served")
    parser.add_argument(
        "--workers",
        type=int,
        default=64,
        help="requests answered at once (max_workers; default 64)",
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    stub = ModelStub(latency_s=args.latency, model=args.model, max_workers=args.workers)
    stub.start(args.port)
    with stub:
        print(stub.url, flush=True)
        try:
            sys.stdin.read()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
