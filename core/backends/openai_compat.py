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

Several endpoints may be given (``base_url=[...]``, ``--base-url`` repeated, or
``OPENAI_BASE_URL`` comma-separated), as the Ollama backend takes several hosts: one client
per endpoint (with its lanes), calls spread over them by :class:`core.backends.endpoints.
EndpointBalancer` (the least loaded live endpoint; at most ``pool_size`` calls in flight at
each, :meth:`OpenAIBackend.size_pool` splitting the engine's concurrency evenly). A call
whose endpoint fails on the transport (refused, timed out, closed mid-response, HTTP 5xx)
after the retry policy moves to another endpoint, and that endpoint gets no new calls for
a while; a call fails only when every endpoint it tried failed it (the error then says how
many were tried). Each endpoint is checked (``/v1/models``) before its first call; the calls
each endpoint answered, failed and passed on are counted (:meth:`OpenAIBackend.
endpoint_counts`). With one endpoint everything is as before, ``describe()`` included; with
several, ``describe()`` also lists ``base_urls`` and each one's context length.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from core.backends.base import BackendError, Message, Reply
from core.backends.deadline import call_deadline, http_transport, shared_tls
from core.backends.endpoints import EndpointBalancer, normalize_base_url, resolve_base_urls
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
    reasoning_text,
    status_error,
    too_long_error,
    with_retries,
)
from core.execution.prompts import ANSWER_SCHEMA

__all__ = ["CALL_OPTIONS", "OpenAIBackend", "normalize_base_url", "resolve_base_urls"]

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


def _context_error(msg: str) -> bool:
    low = msg.lower()
    return "context" in low and any(w in low for w in ("maximum", "exceed", "length", "long"))


class _Down(BackendError):
    """A transport failure of one endpoint (refused, timeout, closed, HTTP 5xx): move on."""


def _down(exc: BaseException) -> bool:
    """Whether ``exc`` (or the error :func:`with_retries` wrapped) is an endpoint's failure."""
    return isinstance(exc, _Down) or isinstance(exc.__cause__, _Down)


def _as_down(err: BackendError) -> _Down:
    return _Down(str(err), retryable=err.retryable)


@dataclass
class _Endpoint:
    """One base URL: its client, its lanes and what its ``/v1/models`` said."""

    url: str
    client: httpx.Client
    pool: Lanes[httpx.Client]
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: bool = False
    served: list[str] = field(default_factory=list)
    context_length: int | None = None


class OpenAIBackend:
    """One model on one or more OpenAI-compatible servers (see the module docstring).

    Attributes:
        name: ``openai``.
        model: the model name the server knows.
        base_urls: the ``/v1`` base URLs calls are spread over.
        base_url: the first of them.
        options: request fields sent with every call (temperature, seed, max_tokens ...).
        logprobs: request token log-probabilities.
        top_logprobs: alternatives per token (default 0: only the generated tokens' own).
        timeout_s: read timeout of one call in seconds (the ``--timeout`` flag).
        retry: backoff policy for transient failures.
        context_length: the model's context in tokens (from the argument, else the first
            endpoint's ``/v1/models``), used to refuse over-long prompts before sending
            (each endpoint with its own when it reports one); None when unknown.
        chars_per_token: the divisor of the pre-send lower bound of the prompt's tokens
            (default 6; a prompt is refused unsent only when characters / this reaches
            ``context_length``).
        pool_size: HTTP connections kept per endpoint, every one alive between calls, and
            with several endpoints the most calls in flight at each (:meth:`size_pool`).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None,
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
        self.base_urls = resolve_base_urls(base_url, env=False)
        self.base_url = self.base_urls[0]
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
        self._given_context = int(context_length) if context_length else None
        self.context_length = self._given_context
        self.chars_per_token = float(chars_per_token)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._timeout = httpx.Timeout(self.timeout_s, connect=float(connect_timeout_s))
        self._tls = shared_tls()  # shared by every client of the process
        self.pool_size = DEFAULT_POOL_SIZE
        # a client per endpoint, and a client of one connection per concurrent call up to
        # pool_size (support.Lanes)
        self._endpoints = [
            _Endpoint(url, self._make_client(url), Lanes(self._lane_maker(url)))
            for url in self.base_urls
        ]
        several = len(self._endpoints) > 1
        self._balancer = EndpointBalancer(len(self._endpoints), self.pool_size if several else None)

    def _lane_maker(self, url: str) -> Any:
        return lambda: self._make_client(url, 1)

    def _make_client(self, url: str, size: int | None = None) -> httpx.Client:
        # the call's deadline bounds every socket operation (--timeout: the whole call); a
        # redirect is not followed (httpx's default): the prompt goes to base_url only
        limits = pool_limits(self.pool_size if size is None else size)
        return httpx.Client(
            base_url=url,
            headers=self._headers,
            timeout=self._timeout,
            transport=http_transport(limits, self._tls),
            follow_redirects=False,
        )

    @property
    def _client(self) -> httpx.Client:
        """The first endpoint's shared client."""
        return self._endpoints[0].client

    @property
    def _lanes(self) -> list[httpx.Client]:
        return self._endpoints[0].pool.all

    @property
    def _free(self) -> list[httpx.Client]:
        return self._endpoints[0].pool.free

    def size_pool(self, size: int) -> None:
        """Size the connections for ``size`` concurrent calls (the engine's concurrency).

        Each endpoint keeps ``ceil(size / endpoints)`` connections (``pool_size``) and, with
        several endpoints, gets at most that many calls at once. The clients and the lanes
        are rebuilt only when the size changes; call it before the calls start.
        """
        size = math.ceil(max(1, int(size)) / len(self._endpoints))
        if size == self.pool_size:
            return
        self.pool_size = size
        for ep in self._endpoints:
            old, ep.client = ep.client, self._make_client(ep.url)
            old.close()
            ep.pool.drop()
        if len(self._endpoints) > 1:
            self._balancer.set_limit(size)

    def endpoint_counts(self) -> dict[str, dict[str, int]]:
        """Per base URL: the calls it ``answered``, ``failed`` and ``moved`` to another."""
        return {
            ep.url: {"answered": c.answered, "failed": c.failed, "moved": c.moved}
            for ep, c in zip(self._endpoints, self._balancer.counts, strict=True)
        }

    # -- setup ------------------------------------------------------------------------

    def _get(self, ep: _Endpoint, path: str) -> Any:
        try:
            with call_deadline(self.timeout_s):  # the whole request, as a chat's
                r = ep.client.get(path)
        except Exception as exc:
            raise self._map_error(exc, ep.url) from exc
        if r.status_code != 200:
            raise self._status_error(r.status_code, error_text(r.text), ep.url)
        try:
            return json.loads(r.content)
        except ValueError as exc:
            raise self._map_error(exc, ep.url) from exc

    def _prepare(self, ep: _Endpoint) -> None:
        """Check once that the endpoint answers and serves the model; read its context."""
        if ep.ready:
            return
        with ep.lock:
            if ep.ready:
                return
            listing = self._get(ep, "/models")
            data = listing.get("data") if isinstance(listing, Mapping) else None
            ep.context_length = self._given_context
            if isinstance(data, list):
                ep.served = [str(m.get("id")) for m in data if isinstance(m, Mapping)]
                entry = next(
                    (m for m in data if isinstance(m, Mapping) and m.get("id") == self.model),
                    None,
                )
                if ep.served and entry is None:
                    raise BackendError(
                        f"model {self.model!r} is not served by {ep.url}; it serves: "
                        f"{', '.join(ep.served[:10])}"
                    )
                if entry is not None and ep.context_length is None:
                    ctx = entry.get("max_model_len") or entry.get("context_length")
                    if isinstance(ctx, int) and ctx > 0:
                        ep.context_length = ctx
            if self.context_length is None:
                self.context_length = ep.context_length
            ep.ready = True

    # -- errors -----------------------------------------------------------------------

    def _status_error(self, code: int, msg: str, url: str) -> BackendError:
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
        err = status_error(code, url, msg)
        return _as_down(err) if code >= 500 else err

    def _map_error(self, exc: BaseException, url: str) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            return _Down(
                f"timed out after {self.timeout_s:g}s waiting for {url} (raise --timeout SECONDS)",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            return _Down(
                f"cannot reach the OpenAI-compatible server at {url}: start it (e.g. `vllm "
                "serve MODEL`, `llama-server -m FILE`) or fix --base-url"
            )
        if (closed := closed_mid_response(exc, url)) is not None:
            return _as_down(closed)
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

    def _post(self, ep: _Endpoint, body: dict[str, Any]) -> Mapping[str, Any]:
        client, free = ep.pool.take(self.pool_size, ep.client)
        try:
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
            r = client.post("/chat/completions", content=content)  # in the call's deadline
        except Exception as exc:
            raise self._map_error(exc, ep.url) from exc
        finally:
            if free is not None:
                free.append(client)
        if r.status_code != 200:
            msg = error_text(r.text)
            if r.status_code == 400 and body.get("logprobs") and "logprob" in msg.lower():
                self.logprobs = False  # the server cannot give them: stop asking
                body = {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}
                return self._post(ep, body)
            raise self._status_error(r.status_code, msg, ep.url)
        try:
            data = json.loads(r.content)
        except ValueError as exc:
            raise self._map_error(exc, ep.url) from exc
        if not isinstance(data, dict):
            raise not_an_object(data, ep.url)
        return data

    def _call(
        self, ep: _Endpoint, messages: Sequence[Message], opts: Mapping[str, Any], t0: float
    ) -> Reply:
        """One call on one endpoint; BackendError for a failure (the caller may move on)."""
        with_retries(lambda _k: self._prepare(ep), self.retry)
        if ep.context_length is not None:
            too_long = too_long_error(
                messages,
                self.chars_per_token,
                ep.context_length,
                f"the model's context of {ep.context_length}",
            )
            if too_long is not None:
                raise BackendError(too_long)
        body = self._payload(messages, opts)
        data = with_retries(lambda _k: self._post(ep, body), self.retry)
        latency_ms = (time.perf_counter() - t0) * 1e3
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise BackendError(f"reply from {ep.url} lacks or mistypes field(s): choices")
        message = choices[0].get("message")
        thoughts = reasoning_text(message) if isinstance(message, Mapping) else None
        if thoughts and message.get("content") is None:
            # cut off inside its reasoning (content null): the reply's parse error, not a failure
            message = {**message, "content": ""}
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise BackendError(f"reply from {ep.url} lacks or mistypes field(s): message.content")
        lp = choices[0].get("logprobs")
        tokens = lp.get("content") if isinstance(lp, Mapping) else None
        tokens = [t for t in tokens if isinstance(t, Mapping)] if isinstance(tokens, list) else None
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        timings = data.get("timings") if isinstance(data.get("timings"), Mapping) else {}
        return Reply(
            text=message["content"],
            reasoning=thoughts,
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
        n = len(self._endpoints)
        tried: set[int] = set()
        error = "no endpoint"
        while (i := self._balancer.acquire(tried)) is not None:
            tried.add(i)
            try:
                with call_deadline(self.timeout_s):  # the whole call, retries included
                    reply = self._call(self._endpoints[i], messages, opts, t0)
            except BackendError as exc:
                down = _down(exc)
                if down and len(tried) < n:
                    self._balancer.release(i, "moved")
                    continue
                self._balancer.release(i, "failed", down=down)
                error = (
                    str(exc) if len(tried) == 1 else f"{exc} ({len(tried)} of {n} endpoints tried)"
                )
                break
            self._balancer.release(i, "answered")
            return reply
        return Reply(text="", latency_ms=(time.perf_counter() - t0) * 1e3, error=error)

    def describe(self) -> dict[str, Any]:
        """Description recorded on the run (never raises; ``error`` says why a check failed).

        With several endpoints it also lists them (``base_urls``) and what each reported as
        its context (``endpoint_context_lengths``); an endpoint that fails its check is
        named in ``error`` and gets no calls for a while.
        """
        errors = []
        for i, ep in enumerate(self._endpoints):
            try:
                self._prepare(ep)
            except BackendError as exc:
                errors.append(str(exc))
                if _down(exc):
                    self._balancer.mark_down(i)
        out = {
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
            "error": "; ".join(errors) or None,
        }
        if len(self._endpoints) > 1:
            out["base_urls"] = list(self.base_urls)
            out["endpoint_context_lengths"] = {ep.url: ep.context_length for ep in self._endpoints}
        return out


def _int(value: Any) -> int | float | None:
    """A reply's count as given (not a number: None).

    An integral float is the integer; any other float (1.5, NaN, infinity) is kept as it is,
    for the engine's range check to note (:func:`core.execution.limits.checked_numbers`).
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return value
    return int(value)


def _ms_to_ns(value: Any) -> int | float | None:
    """Milliseconds as nanoseconds (a non-finite value as it is, for the range check)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ns = value * 1e6
        return int(round(ns)) if math.isfinite(ns) else ns
    return None
