"""An OpenAI-compatible chat backend: vLLM, llama.cpp server, LM Studio, TGI (SPEC §5.2).

Every call is one non-streaming ``POST {base_url}/chat/completions`` (``httpx``) with
``temperature`` (0), ``seed``, ``max_tokens`` (1024), ``response_format`` = the answer contract's
JSON schema (``{"type": "json_schema", "json_schema": {"name": "answer", "schema": ...,
"strict": true}}``) and ``logprobs=true, top_logprobs=N``. A server that rejects log-probabilities
(HTTP 400 naming them) is asked again without them, and is not asked for them again. The reply's
``logprob_confidence`` is :func:`core.backends.support.answer_logprob_confidence` of
``choices[0].logprobs.content``. llama.cpp's ``timings`` (prompt/predicted milliseconds) become
the reply's prompt-eval and eval durations.

``base_url`` is the server root or its ``/v1`` prefix (``http://host:8000`` and
``http://host:8000/v1`` mean the same; any other path is used as given). An API key is sent as
a bearer token when given or set in ``OPENAI_API_KEY``. Before the first call ``/v1/models`` is
read: a model the server does not list fails with the list of what it serves, and a listed
``max_model_len`` (vLLM) or ``context_length`` is the context a prompt is checked against before
sending: it is refused unsent only when a lower bound of its tokens (characters / 6,
:func:`core.backends.support.min_prompt_tokens`) already reaches it.

Errors and retries follow the Ollama backend: unreachable server, unknown model, prompt longer
than the context (the server's HTTP 400; refused before sending only when the context is
known and the lower bound reaches it), HTTP 500, timeouts, non-JSON or incomplete replies come
back as ``Reply.error`` (a body that is JSON but not an object, such as ``[]`` or ``null``: "server
URL returned a JSON list, not an object"); the read timeout is ``timeout_s`` (the commands'
``--timeout``); the client keeps one connection per concurrent call (:meth:`OpenAIBackend.
size_pool`); HTTP 429/503, timeouts and connections closed mid-response are retried
with backoff.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.backends.base import BackendError, Message, Reply
from core.backends.http_errors import closed_mid_response, last_resort_error
from core.backends.support import (
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_POOL_SIZE,
    Lanes,
    RetryPolicy,
    answer_logprob_confidence,
    check_client_settings,
    checked_options,
    error_text,
    not_an_object,
    pool_limits,
    status_error,
    too_long_error,
    with_retries,
)
from core.prompts import ANSWER_SCHEMA

__all__ = ["CALL_OPTIONS", "OpenAIBackend", "normalize_base_url"]

#: Request fields a caller may set per backend or per call.
CALL_OPTIONS = (
    "temperature",
    "seed",
    "max_tokens",
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "stop",
)


def normalize_base_url(base_url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``/v1`` base the endpoints hang from.

    Raises:
        ValueError: an empty URL or a scheme other than http/https.
    """
    text = (base_url or "").strip().rstrip("/")
    if not text:
        raise ValueError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base URL {base_url!r}: expected http(s)://host[:port][/v1]")
    return text if parts.path not in ("", "/") else text + "/v1"


def _context_error(msg: str) -> bool:
    low = msg.lower()
    return "context" in low and any(w in low for w in ("maximum", "exceed", "length", "long"))


class OpenAIBackend:
    """One model on an OpenAI-compatible server (see the module docstring).

    Attributes:
        name: ``openai``.
        model: the model name the server knows.
        base_url: the ``/v1`` base URL.
        options: request fields sent with every call (temperature, seed, max_tokens ...).
        logprobs: request token log-probabilities.
        top_logprobs: alternatives per token (default 0: only the generated tokens' own).
        timeout_s: read timeout of one call in seconds (the ``--timeout`` flag).
        retry: backoff policy for transient failures.
        context_length: the model's context in tokens (from the argument or ``/v1/models``),
            used to refuse over-long prompts before sending; None when unknown.
        chars_per_token: the divisor of the pre-send lower bound of the prompt's tokens
            (default 6; a prompt is refused unsent only when characters / this reaches
            ``context_length``).
        pool_size: HTTP connections kept, every one alive between calls (:meth:`size_pool`).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        max_tokens: int = 1024,
        logprobs: bool = True,
        top_logprobs: int = 0,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        retry: RetryPolicy | None = None,
        context_length: int | None = None,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
        extra_options: Mapping[str, Any] | None = None,
    ):
        if not model or not str(model).strip():
            raise ValueError("the openai backend needs a model name (--model NAME)")
        if int(max_tokens) < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        check_client_settings(top_logprobs, chars_per_token, timeout_s, connect_timeout_s)
        extra = checked_options(extra_options, CALL_OPTIONS, "openai")
        self.model = str(model).strip()
        self.base_url = normalize_base_url(base_url)
        self.options: dict[str, Any] = {
            **extra,
            "temperature": float(temperature),
            "seed": int(seed),
            "max_tokens": int(max_tokens),
        }
        self.logprobs = bool(logprobs)
        self.top_logprobs = int(top_logprobs)
        self.timeout_s = float(timeout_s)
        self.retry = retry or RetryPolicy()
        self.context_length = int(context_length) if context_length else None
        self.chars_per_token = float(chars_per_token)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._timeout = httpx.Timeout(self.timeout_s, connect=float(connect_timeout_s))
        self._tls = httpx.create_ssl_context()  # shared by every client of this backend
        self.pool_size = DEFAULT_POOL_SIZE
        self._client = self._make_client()
        self._lock = threading.Lock()
        # a client of one connection per concurrent call, up to pool_size (support.Lanes)
        self._pool: Lanes[httpx.Client] = Lanes(lambda: self._make_client(1))
        self._ready = False
        self._served: list[str] = []

    def _make_client(self, size: int | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self._timeout,
            limits=pool_limits(self.pool_size if size is None else size),
            verify=self._tls,
        )

    @property
    def _lanes(self) -> list[httpx.Client]:
        return self._pool.all

    @property
    def _free(self) -> list[httpx.Client]:
        return self._pool.free

    def _lane(self) -> tuple[httpx.Client, list[httpx.Client] | None]:
        """A client for one call and the free list to give it back to (None: the shared one)."""
        return self._pool.take(self.pool_size, self._client)

    def size_pool(self, size: int) -> None:
        """Keep ``size`` HTTP connections (the engine passes its concurrency).

        The client and the lanes (:meth:`_lane`) are rebuilt only when the size changes; call
        it before the calls start.
        """
        size = max(1, int(size))
        if size == self.pool_size:
            return
        self.pool_size = size
        old, self._client = self._client, self._make_client()
        old.close()
        self._pool.drop()

    # -- setup ------------------------------------------------------------------------

    def _get(self, path: str) -> Any:
        try:
            r = self._client.get(path)
        except Exception as exc:  # noqa: BLE001 - mapped below
            raise self._map_error(exc) from exc
        if r.status_code != 200:
            raise self._status_error(r.status_code, error_text(r.text))
        try:
            return json.loads(r.content)
        except ValueError as exc:
            raise self._map_error(exc) from exc

    def _prepare(self) -> None:
        """Check once that the server answers and serves the model; read its context."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            listing = self._get("/models")
            data = listing.get("data") if isinstance(listing, Mapping) else None
            if isinstance(data, list):
                self._served = [str(m.get("id")) for m in data if isinstance(m, Mapping)]
                entry = next(
                    (m for m in data if isinstance(m, Mapping) and m.get("id") == self.model),
                    None,
                )
                if self._served and entry is None:
                    raise BackendError(
                        f"model {self.model!r} is not served by {self.base_url}; it serves: "
                        f"{', '.join(self._served[:10])}"
                    )
                if entry is not None and self.context_length is None:
                    ctx = entry.get("max_model_len") or entry.get("context_length")
                    if isinstance(ctx, int) and ctx > 0:
                        self.context_length = ctx
            self._ready = True

    # -- errors -----------------------------------------------------------------------

    def _status_error(self, code: int, msg: str) -> BackendError:
        url = self.base_url
        if code == 401 or code == 403:
            return BackendError(f"HTTP {code} from {url}: {msg} (set OPENAI_API_KEY)")
        if code == 404:
            return BackendError(
                f"HTTP 404 from {url}: {msg} (is the model {self.model!r} loaded and the "
                "base URL right?)"
            )
        if _context_error(msg):
            return BackendError(
                f"prompt longer than the model's context (server {url} said: {msg}); "
                "shorten the context or serve the model with a longer one"
            )
        return status_error(code, url, msg)

    def _map_error(self, exc: BaseException) -> BackendError:
        url = self.base_url
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            return BackendError(
                f"timed out after {self.timeout_s:g}s waiting for {url} (raise --timeout SECONDS)",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            return BackendError(
                f"cannot reach the OpenAI-compatible server at {url}: start it (e.g. `vllm "
                "serve MODEL`, `llama-server -m FILE`) or fix --base-url"
            )
        if (closed := closed_mid_response(exc, url)) is not None:
            return closed
        if isinstance(exc, ValueError):
            return BackendError(f"reply from {url} is not JSON (is --base-url an OpenAI API?)")
        return last_resort_error(exc, url)

    # -- calls ------------------------------------------------------------------------

    def _payload(self, messages: Sequence[Message], opts: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            **opts,
            "stream": False,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
            },
        }
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        return body

    def _post(self, body: dict[str, Any]) -> Mapping[str, Any]:
        client, free = self._lane()
        try:
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
            r = client.post("/chat/completions", content=content)
        except Exception as exc:  # noqa: BLE001 - mapped below
            raise self._map_error(exc) from exc
        finally:
            if free is not None:
                free.append(client)
        if r.status_code != 200:
            msg = error_text(r.text)
            if r.status_code == 400 and body.get("logprobs") and "logprob" in msg.lower():
                self.logprobs = False  # the server cannot give them: stop asking
                body = {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}
                return self._post(body)
            raise self._status_error(r.status_code, msg)
        try:
            data = json.loads(r.content)
        except ValueError as exc:
            raise self._map_error(exc) from exc
        if not isinstance(data, dict):
            raise not_an_object(data, self.base_url)
        return data

    def generate(
        self, messages: Sequence[Message], options: Mapping[str, Any] | None = None
    ) -> Reply:
        """Run one chat call (errors come back on the reply, see the module docstring).

        Args:
            messages: the chat messages (system, user).
            options: request fields overriding this backend's for this call.

        Raises:
            ValueError: unknown option names (a programmer error).
        """
        opts = dict(self.options)
        if options:
            bad = sorted(set(options) - set(CALL_OPTIONS))
            if bad:
                raise ValueError(
                    f"unknown openai option(s) {', '.join(map(repr, bad))}; allowed: "
                    f"{', '.join(CALL_OPTIONS)}"
                )
            opts.update(options)
        t0 = time.perf_counter()

        def fail(error: str) -> Reply:
            return Reply(text="", latency_ms=(time.perf_counter() - t0) * 1e3, error=error)

        try:
            with_retries(lambda _k: self._prepare(), self.retry)
        except BackendError as exc:
            return fail(str(exc))
        if self.context_length is not None:
            too_long = too_long_error(
                messages,
                self.chars_per_token,
                self.context_length,
                f"the model's context of {self.context_length}",
            )
            if too_long is not None:
                return fail(too_long)
        body = self._payload(messages, opts)
        try:
            data = with_retries(lambda _k: self._post(body), self.retry)
        except BackendError as exc:
            return fail(str(exc))
        latency_ms = (time.perf_counter() - t0) * 1e3
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            return fail(f"reply from {self.base_url} lacks or mistypes field(s): choices")
        message = choices[0].get("message")
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            return fail(f"reply from {self.base_url} lacks or mistypes field(s): message.content")
        lp = choices[0].get("logprobs")
        tokens = lp.get("content") if isinstance(lp, Mapping) else None
        tokens = [t for t in tokens if isinstance(t, Mapping)] if isinstance(tokens, list) else None
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        timings = data.get("timings") if isinstance(data.get("timings"), Mapping) else {}
        return Reply(
            text=message["content"],
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            latency_ms=latency_ms,
            prompt_eval_duration_ns=_ms_to_ns(timings.get("prompt_ms")),
            eval_duration_ns=_ms_to_ns(timings.get("predicted_ms")),
            logprobs=tokens or None,
            model_digest=None,
            error=None,
            logprob_confidence=answer_logprob_confidence(tokens),
        )

    def describe(self) -> dict[str, Any]:
        """Description recorded on the run (never raises; ``error`` says why the check failed)."""
        error = None
        try:
            self._prepare()
        except BackendError as exc:
            error = str(exc)
        return {
            "kind": self.name,
            "backend": self.name,
            "model": self.model,
            "model_digest": None,
            "label": f"OpenAI-compatible {self.model}",
            "baseline": False,
            "options": dict(self.options),
            "request": {
                "response_format": "json_schema:ANSWER_SCHEMA",
                "stream": False,
                "logprobs": self.logprobs,
                "top_logprobs": self.top_logprobs,
            },
            "base_url": self.base_url,
            "context_length": self.context_length,
            "error": error,
        }


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ms_to_ns(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(round(value * 1e6))
    return None
