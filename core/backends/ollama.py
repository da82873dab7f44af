"""The Ollama backend, on the official ``ollama`` Python client (SPEC §5.2).

Every call is one non-streaming ``/api/chat`` request through the ``ollama`` client's
``chat`` (one connection per concurrent call, kept alive: :meth:`OllamaBackend.size_pool`;
a reply body that is valid JSON but not an object, such as ``[]`` or ``null``, fails with
"server URL returned a JSON list, not an object") with the answer contract's JSON schema as
``format`` (a schema, not ``"json"``, which can pad with whitespace and run much slower),
``think=False``, ``keep_alive`` and the options ``temperature`` (0), ``seed``, ``num_ctx``
(32768) and ``num_predict`` (1024). ``num_ctx`` is a load-time option -- changing it reloads the
model -- so it is fixed per backend instance and a call asking for another value is refused.
Token log-probabilities are requested (``logprobs=True, top_logprobs=N``) when the server is
Ollama >= 0.12.11 or its version is unknown; the reply's ``logprob_confidence`` is then
:func:`core.backends.support.answer_logprob_confidence` of them.

Several hosts may be given (``hosts=`` or ``OLLAMA_HOST="h1:11434,h2:11434"``): calls are spread
over them round-robin, one ``ollama.Client`` per host (the client is thread-safe), and a retry
moves to the next host. Before its first call each host is asked for its version, whether the
model is there (``/api/show``) and the model digest (``/api/tags``).

Failures come back as ``Reply.error`` one-liners that say what to do: server unreachable
(start it with ``ollama serve`` or set OLLAMA_HOST), model not pulled (``ollama pull NAME``),
prompt longer than ``num_ctx`` (detected after the call, when ``prompt_eval_count`` reaches
``num_ctx`` because the server truncated it; refused before sending only when a lower bound of
its tokens, characters / 6, already reaches ``num_ctx``, see
:func:`core.backends.support.min_prompt_tokens`), HTTP 500,
timeouts (``timeout_s``, the commands' ``--timeout``), non-JSON or incomplete replies. HTTP
503 (queue full), 429, timeouts and connections closed mid-response are retried with
exponential backoff (:class:`RetryPolicy`).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pydantic

# The ollama package builds a default client from OLLAMA_HOST when imported and reads one host
# there; ours may hold several ("h1:11434,h2:11434"), so it sees only the first while importing.
_HOSTS_ENV = os.environ.get("OLLAMA_HOST")
if _HOSTS_ENV and len(_HOSTS_ENV.replace(" ", ",").strip(",").split(",")) > 1:
    os.environ["OLLAMA_HOST"] = _HOSTS_ENV.replace(" ", ",").strip(",").split(",")[0]
try:
    import ollama
finally:
    if _HOSTS_ENV is not None:
        os.environ["OLLAMA_HOST"] = _HOSTS_ENV

from core.backends.base import BackendError, Message, Reply  # noqa: E402
from core.backends.deadline import call_deadline, http_transport, shared_tls  # noqa: E402
from core.backends.http_errors import closed_mid_response, last_resort_error  # noqa: E402
from core.backends.support import (  # noqa: E402
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_POOL_SIZE,
    Lanes,
    RetryPolicy,
    answer_logprob_confidence,
    check_client_settings,
    checked_options,
    error_text,
    min_prompt_tokens,
    not_an_object,
    one_line,
    pool_limits,
    status_error,
    too_long_error,
    with_retries,
)
from core.execution.prompts import ANSWER_SCHEMA  # noqa: E402

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_NUM_CTX",
    "DEFAULT_NUM_PREDICT",
    "LOGPROBS_MIN_VERSION",
    "OLLAMA_OPTIONS",
    "OllamaBackend",
    "resolve_hosts",
    "server_status",
]

#: Where Ollama listens when neither ``hosts`` nor ``OLLAMA_HOST`` says otherwise.
DEFAULT_HOST = "http://127.0.0.1:11434"
#: Context window requested from Ollama (fixed per backend instance).
DEFAULT_NUM_CTX = 32768
#: Most tokens a reply may have.
DEFAULT_NUM_PREDICT = 1024
#: First Ollama release that returns token log-probabilities.
LOGPROBS_MIN_VERSION = (0, 12, 11)

# Ollama runtime options a caller may set per backend or per call (ollama.Options fields).
OLLAMA_OPTIONS = frozenset(ollama.Options.model_fields)
# Settings of this backend (not Ollama options).
_SETTINGS = (
    "keep_alive",
    "logprobs",
    "top_logprobs",
    "timeout_s",
    "connect_timeout_s",
    "retries",
    "backoff_s",
    "max_backoff_s",
    "chars_per_token",
)


#: The reply's numbers the ``ollama`` client checks as integers (pydantic refuses one beyond
#: 64 bits or with a fraction): kept aside as given, for the engine's range check.
_COUNTS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


def _odd_count(value: Any) -> bool:
    """Whether a count is one the client's pydantic model would refuse (not a 64-bit int)."""
    if value is None:
        return False
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return not (is_int and -(2**63) <= value < 2**63)


def _plain_entry(entry: Any) -> dict[str, Any] | None:
    """One log-probability entry as :func:`_token_dict` gives it, or None.

    None when the entry is not plainly well-formed: a dict whose ``token`` is a string and
    ``logprob`` a number.
    """
    if type(entry) is not dict:
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if type(token) is not str or not (
        type(logprob) is float or (type(logprob) is int and -(2**53) <= logprob <= 2**53)
    ):
        return None
    return {"token": token, "logprob": float(logprob)}


def _plain_logprobs(entries: Any) -> list[dict[str, Any]] | None:
    """A reply's ``logprobs`` list as :func:`_token_dict` entries, without the client's model.

    The client's pydantic model checked every entry and its alternatives, a fifth of the
    client's CPU a call. None when any entry is not plainly well-formed: the model then checks
    (and reports) them as before.
    """
    if type(entries) is not list:
        return None
    out = []
    for entry in entries:
        tok = _plain_entry(entry)
        if tok is None:
            return None
        top = entry.get("top_logprobs")
        if top:
            if type(top) is not list:
                return None
            alts = [_plain_entry(t) for t in top]
            if None in alts:
                return None
            tok["top_logprobs"] = alts
        elif top is not None and type(top) is not list:
            return None
        out.append(tok)
    return out


class _Client(ollama.Client):
    """``ollama.Client`` whose non-streaming replies keep odd counts instead of failing.

    A count the client's model refuses (1e20, 2.5, "x") would fail the whole call; it is
    taken out before the model checks the rest and kept on the response as ``odd_counts``,
    so the engine stores it missing with a note (:func:`core.execution.limits.checked_numbers`).
    Well-formed log-probabilities skip the model too (:func:`_plain_logprobs`, kept as
    ``plain_logprobs``); any other goes through it and fails the call as before.
    """

    def _request(self, cls: Any, *args: Any, stream: bool = False, **kwargs: Any) -> Any:
        if stream:
            return super()._request(cls, *args, stream=stream, **kwargs)
        data = self._request_raw(*args, **kwargs).json()
        odd: dict[str, Any] = {}
        plain = None
        if isinstance(data, dict):
            odd = {k: data.pop(k) for k in _COUNTS if _odd_count(data.get(k))}
            plain = _plain_logprobs(data.get("logprobs"))
            if plain is not None:
                del data["logprobs"]
        resp = cls(**data)  # a list or null: the TypeError _chat reports
        if odd:
            object.__setattr__(resp, "odd_counts", odd)
        if plain is not None:
            object.__setattr__(resp, "plain_logprobs", plain)
        return resp


def _count(resp: Any, name: str) -> Any:
    """A reply count: the checked value, else the odd one kept aside (:class:`_Client`)."""
    odd = getattr(resp, "odd_counts", None) or {}
    return odd.get(name, getattr(resp, name, None))


def _thinking(message: Any) -> str | None:
    """A thinking model's reasoning, which Ollama returns apart (``message.thinking``)."""
    value = getattr(message, "thinking", None)
    return value if isinstance(value, str) and value else None


def _normalize_host(raw: str) -> str:
    text = raw.strip().rstrip("/")
    if not text:
        return DEFAULT_HOST
    given_scheme = "://" in text
    parts = urlsplit(text if given_scheme else f"http://{text}")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"Ollama host {raw!r}: scheme must be http or https")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"Ollama host {raw!r}: bad port") from None
    name = parts.hostname or "127.0.0.1"
    if name in ("0.0.0.0", "::"):  # a bind-all address: connect locally
        name = "127.0.0.1"
    if ":" in name:
        name = f"[{name}]"
    if port is None:
        port = 11434 if not given_scheme else (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{name}:{port}{parts.path}"


def resolve_hosts(hosts: Sequence[str] | str | None = None) -> list[str]:
    """Ollama base URLs from ``hosts``, else ``OLLAMA_HOST`` (comma-separated), else the default.

    Bare ``host``/``host:port`` values get ``http://`` and port 11434, as the Ollama CLI does.

    Raises:
        ValueError: a host with another scheme or a bad port.
    """
    if isinstance(hosts, str):
        hosts = [hosts]
    items = [h for h in (hosts or []) if str(h).strip()]
    if not items:
        items = [h for h in os.environ.get("OLLAMA_HOST", "").replace(" ", ",").split(",") if h]
    urls = [_normalize_host(h) for item in items for h in str(item).split(",") if h.strip()]
    return list(dict.fromkeys(urls)) or [DEFAULT_HOST]


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    nums = []
    for part in version.split("-")[0].split("+")[0].split("."):
        if not part.isdigit():
            return None
        nums.append(int(part))
    return tuple(nums)


def _get_version(url: str, timeout: httpx.Timeout, verify: Any = True) -> str | None:
    """``/api/version`` of one host; None when the server does not say.

    ``verify``: the backend's TLS context (making one loads the CA bundle, ~30 ms).
    """
    # through a deadline-keeping transport: inside a call it shares the call's --timeout
    transport = http_transport(pool_limits(1), verify)
    with httpx.Client(timeout=timeout, transport=transport) as client:
        r = client.get(f"{url}/api/version")
    if r.status_code != 200:
        return None
    try:
        version = r.json().get("version")
    except (ValueError, AttributeError):
        return None
    return str(version) if version else None


def _unreachable(url: str) -> str:
    return (
        f"cannot reach Ollama at {url}: start it with `ollama serve` or set OLLAMA_HOST "
        "(or use --backend embedded)"
    )


def _not_pulled(model: str, url: str) -> str:
    return f"model {model!r} is not pulled on {url}: run `ollama pull {model}`"


def _find_digest(listing: Any, model: str) -> str | None:
    names = {model, f"{model}:latest"}
    for m in getattr(listing, "models", None) or []:
        if m.model in names or getattr(m, "name", None) in names:
            digest = m.digest or None
            if digest and not digest.startswith("sha256:"):
                digest = "sha256:" + digest
            return digest
    return None


def _token_dict(lp: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"token": lp.token, "logprob": lp.logprob}
    if lp.top_logprobs:
        out["top_logprobs"] = [{"token": t.token, "logprob": t.logprob} for t in lp.top_logprobs]
    return out


#: The client's TypeError for a reply body that is not an object ("... must be a mapping, not
#: list") and the JSON kind of each Python type it names.
_NOT_A_MAPPING = re.compile(r"must be a mapping, not (\w+)")
_JSON_OF: dict[str, Any] = {
    "list": [],
    "NoneType": None,
    "str": "",
    "int": 0,
    "float": 0.0,
    "bool": False,
}


@dataclass
class _Host:
    url: str
    client: ollama.Client
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: bool = False
    version: str | None = None
    digest: str | None = None
    logprobs: bool = True
    pool: Lanes[ollama.Client] | None = None  # clients of one connection each (support.Lanes)

    @property
    def lanes(self) -> list[ollama.Client]:
        """Every lane of this host."""
        return self.pool.all if self.pool is not None else []

    @property
    def free(self) -> list[ollama.Client]:
        """The lanes no call is using."""
        return self.pool.free if self.pool is not None else []


class OllamaBackend:
    """One model on one or more Ollama servers (see the module docstring).

    Attributes:
        name: ``ollama``.
        model: the model name (e.g. ``qwen2.5:14b``).
        hosts: the Ollama base URLs calls are spread over.
        num_ctx: context window in tokens, fixed for this instance.
        options: the Ollama ``options`` sent with every call.
        keep_alive: how long Ollama keeps the model loaded after a call.
        logprobs: ``"auto"`` (request log-probabilities from Ollama >= 0.12.11 or unknown
            versions), True or False.
        top_logprobs: alternatives per token when log-probabilities are requested (default
            0: only the generated tokens' own log-probabilities, all the confidence needs).
        timeout_s: read timeout of one call in seconds (the ``--timeout`` flag).
        retry: backoff policy for transient failures.
        chars_per_token: the divisor of the pre-send lower bound of the prompt's tokens
            (default 6; a prompt is refused unsent only when characters / this >= num_ctx).
        pool_size: HTTP connections per host, every one kept alive (:meth:`size_pool`).

    A call takes a *lane* of its host: an ``ollama.Client`` of its own with one connection,
    kept alive, which no other call uses meanwhile (up to ``pool_size`` lanes per host, made
    as calls need them; a call beyond them shares the host's client, whose pool also has
    ``pool_size`` connections). One httpx pool of 32 connections costs every request a scan
    of all of them (twice, with a readability check of each idle socket): at a GPU server's
    speed that was about a third of the engine's CPU time per call. The lanes share one TLS
    context (loading the CA certificates costs about 30 ms a client).
    """

    name = "ollama"

    def __init__(
        self,
        model: str,
        *,
        hosts: Sequence[str] | str | None = None,
        num_ctx: int = DEFAULT_NUM_CTX,
        num_predict: int = DEFAULT_NUM_PREDICT,
        seed: int = 0,
        temperature: float = 0.0,
        keep_alive: str | float | None = "30m",
        logprobs: bool | str = "auto",
        top_logprobs: int = 0,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        retry: RetryPolicy | None = None,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
        extra_options: Mapping[str, Any] | None = None,
    ):
        if not model or not str(model).strip():
            raise ValueError("the ollama backend needs a model name (e.g. --model qwen2.5:7b)")
        if int(num_ctx) < 1 or int(num_predict) < 1:
            raise ValueError(f"num_ctx and num_predict must be >= 1, got {num_ctx}, {num_predict}")
        if logprobs not in (True, False, "auto"):
            raise ValueError(f"logprobs must be True, False or 'auto', got {logprobs!r}")
        check_client_settings(top_logprobs, chars_per_token, timeout_s, connect_timeout_s)
        extra = checked_options(extra_options, sorted(OLLAMA_OPTIONS), "Ollama")
        self.model = str(model).strip()
        self.hosts = resolve_hosts(hosts)
        self.num_ctx = int(num_ctx)
        self.options: dict[str, Any] = {
            **extra,
            "temperature": float(temperature),
            "seed": int(seed),
            "num_ctx": self.num_ctx,
            "num_predict": int(num_predict),
        }
        self.keep_alive = keep_alive
        self.logprobs = logprobs
        self.top_logprobs = int(top_logprobs)
        self.timeout_s = float(timeout_s)
        self.retry = retry or RetryPolicy()
        self.chars_per_token = float(chars_per_token)
        self._timeout = httpx.Timeout(self.timeout_s, connect=float(connect_timeout_s))
        self._tls = shared_tls()  # shared by every client of the process
        self.pool_size = DEFAULT_POOL_SIZE
        self._hosts = [
            _Host(url, self._client(url), pool=Lanes(functools.partial(self._client, url, 1)))
            for url in self.hosts
        ]
        self._rr = itertools.count()
        self._rr_lock = threading.Lock()

    def _client(self, url: str, size: int | None = None) -> ollama.Client:
        limits = pool_limits(self.pool_size if size is None else size)
        # the call's deadline bounds every socket operation (--timeout: the whole call), and
        # a redirect is never followed (the prompt goes to the host the user named, only)
        transport = http_transport(limits, self._tls)
        return _Client(host=url, timeout=self._timeout, transport=transport, follow_redirects=False)

    def size_pool(self, size: int) -> None:
        """Keep ``size`` HTTP connections per host (the engine passes its concurrency).

        Every call may go to one host (a retry moves on to the next), so each host gets the
        whole size: up to ``size`` lanes and a shared client of ``size`` connections. They
        are rebuilt only when the size changes; call it before the calls start, not while
        they run.
        """
        size = max(1, int(size))
        if size == self.pool_size:
            return
        self.pool_size = size
        for host in self._hosts:
            old, host.client = host.client, self._client(host.url)
            old.close()
            host.pool.drop()

    def _lane(self, host: _Host) -> tuple[ollama.Client, list[ollama.Client] | None]:
        """A client for one call to ``host`` and the free list to give it back to (or None)."""
        return host.pool.take(self.pool_size, host.client)

    # -- setup ------------------------------------------------------------------------

    def _prepare(self, host: _Host) -> None:
        """Version, model presence and digest of one host, fetched once."""
        if host.ready:
            return
        with host.lock:
            if host.ready:
                return
            try:
                host.version = _get_version(host.url, self._timeout, self._tls)
                host.client.show(self.model)
                host.digest = _find_digest(host.client.list(), self.model)
            except Exception as exc:
                raise self._map_error(exc, host) from exc
            if self.logprobs == "auto":
                v = _version_tuple(host.version)
                host.logprobs = v is None or v >= LOGPROBS_MIN_VERSION
            else:
                host.logprobs = bool(self.logprobs)
            host.ready = True

    def _map_error(self, exc: BaseException, host: _Host) -> BackendError:
        url = host.url
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, ollama.ResponseError):
            code, msg = exc.status_code, one_line(str(exc.error))
            low = msg.lower()
            if code == 404 and "not found" in low:
                return BackendError(_not_pulled(self.model, url))
            if "context" in low and ("exceed" in low or "length" in low or "long" in low):
                return BackendError(
                    f"prompt longer than num_ctx={self.num_ctx} (server {url} said: {msg}); "
                    "raise num_ctx or shorten the context"
                )
            return status_error(code, url, msg)
        if isinstance(exc, httpx.TimeoutException):
            return BackendError(
                f"timed out after {self.timeout_s:g}s waiting for {url} "
                "(a long prompt on a slow machine: raise --timeout SECONDS)",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            return BackendError(_unreachable(url))
        if (closed := closed_mid_response(exc, url)) is not None:
            return closed
        if isinstance(exc, ConnectionResetError):
            return BackendError(f"connection to {url} was reset", retryable=True)
        if isinstance(exc, ConnectionError):  # what ollama.Client raises for ConnectError
            return BackendError(_unreachable(url))
        if isinstance(exc, pydantic.ValidationError):
            fields = ", ".join(
                sorted({".".join(map(str, e["loc"])) for e in exc.errors()}) or ["?"]
            )
            return BackendError(f"reply from {url} lacks or mistypes field(s): {fields}")
        if isinstance(exc, ValueError):
            return BackendError(
                f"reply from {url} is not JSON (is OLLAMA_HOST pointing at an Ollama server?)"
            )
        return last_resort_error(exc, url)

    def _chat(
        self, host: _Host, messages: Sequence[Message], opts: Mapping[str, Any], logprobs: bool
    ) -> Any:
        """One ``/api/chat`` call through the ``ollama`` client; its checked ``ChatResponse``.

        Raises :class:`BackendError` (mapped; the client's pydantic model checks the fields).
        A body that is valid JSON but not an object (``[]``, ``null``) makes the client raise
        a TypeError; it is reported as such.
        """
        url = host.url
        client, free = self._lane(host)
        try:
            resp = client.chat(
                model=self.model,
                messages=[dict(m) for m in messages],
                stream=False,
                format=ANSWER_SCHEMA,
                options=opts,
                think=False,
                keep_alive=self.keep_alive,
                logprobs=True if logprobs else None,
                top_logprobs=self.top_logprobs if logprobs else None,
            )
        except TypeError as exc:
            kind = _NOT_A_MAPPING.search(str(exc))
            if kind is None:
                raise self._map_error(exc, host) from exc
            raise not_an_object(_JSON_OF.get(kind.group(1)), url) from exc
        except Exception as exc:
            raise self._map_error(exc, host) from exc
        finally:
            if free is not None:
                free.append(client)
        return resp

    def _call_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        if not options:
            return self.options
        bad = sorted(set(options) - OLLAMA_OPTIONS)
        if bad:
            raise ValueError(
                f"unknown Ollama option(s) {', '.join(map(repr, bad))}; allowed: "
                f"{', '.join(sorted(OLLAMA_OPTIONS))}"
            )
        if "num_ctx" in options and int(options["num_ctx"]) != self.num_ctx:
            raise ValueError(
                f"num_ctx is fixed at {self.num_ctx} for this backend (changing it reloads the "
                f"model); got {options['num_ctx']!r}"
            )
        return {**self.options, **options}

    def _next_host(self) -> int:
        with self._rr_lock:
            return next(self._rr) % len(self._hosts)

    def generate(
        self, messages: Sequence[Message], options: Mapping[str, Any] | None = None
    ) -> Reply:
        """Run one chat call (errors come back on the reply, see the module docstring).

        Args:
            messages: the chat messages (system, user).
            options: Ollama options overriding this backend's for this call (``num_ctx`` may
                not change).

        Raises:
            ValueError: unknown option names or a different ``num_ctx`` (programmer errors).
        """
        opts = self._call_options(options)
        t0 = time.perf_counter()
        too_long = too_long_error(
            messages, self.chars_per_token, self.num_ctx, f"num_ctx={self.num_ctx}"
        )
        if too_long is not None:
            return Reply(
                text="",
                latency_ms=(time.perf_counter() - t0) * 1e3,
                error=f"{too_long}: raise num_ctx or shorten the context",
            )
        bound = min_prompt_tokens(messages, self.chars_per_token)
        start = self._next_host()
        used: list[_Host] = []

        def attempt(k: int) -> Any:
            host = self._hosts[(start + k) % len(self._hosts)]
            used.append(host)
            self._prepare(host)
            return self._chat(host, messages, opts, bool(host.logprobs))

        try:
            with call_deadline(self.timeout_s):  # the whole call: connect, body, retries
                resp = with_retries(attempt, self.retry)
        except BackendError as exc:
            host = used[-1] if used else None
            return Reply(
                text="",
                latency_ms=(time.perf_counter() - t0) * 1e3,
                model_digest=host.digest if host else None,
                error=str(exc),
            )
        latency_ms = (time.perf_counter() - t0) * 1e3
        host = used[-1]
        plain = getattr(resp, "plain_logprobs", None)
        tokens = (
            plain if plain is not None else [_token_dict(lp) for lp in (resp.logprobs or [])]
        ) or None
        error = None
        n_prompt = _count(resp, "prompt_eval_count")
        if isinstance(n_prompt, int) and self.num_ctx <= n_prompt < 2**31:  # else: range check
            error = (
                f"prompt filled the context: prompt_eval_count={n_prompt} >= "
                f"num_ctx={self.num_ctx}, so {host.url} truncated it (lower bound was {bound}); "
                "raise num_ctx or shorten the context"
            )
        return Reply(
            text="" if error else (resp.message.content or ""),
            reasoning=None if error else _thinking(resp.message),
            prompt_tokens=n_prompt,
            completion_tokens=_count(resp, "eval_count"),
            latency_ms=latency_ms,
            total_duration_ns=_count(resp, "total_duration"),
            load_duration_ns=_count(resp, "load_duration"),
            prompt_eval_duration_ns=_count(resp, "prompt_eval_duration"),
            eval_duration_ns=_count(resp, "eval_duration"),
            logprobs=tokens,
            model_digest=host.digest,
            error=error,
            logprob_confidence=None if error else answer_logprob_confidence(tokens),
        )

    def describe(self) -> dict[str, Any]:
        """Description recorded on the run (never raises; ``error`` says why a host failed)."""
        errors = {}
        for host in self._hosts:
            try:
                self._prepare(host)
            except BackendError as exc:
                errors[host.url] = str(exc)
        digests = {h.url: h.digest for h in self._hosts}
        first = next((d for d in digests.values() if d), None)
        return {
            "kind": self.name,
            "backend": self.name,
            "model": self.model,
            "model_digest": first,
            "label": f"Ollama {self.model}",
            "baseline": False,
            "options": dict(self.options),
            "request": {
                "format": "ANSWER_SCHEMA",
                "think": False,
                "stream": False,
                "keep_alive": self.keep_alive,
                "logprobs": self.logprobs,
                "top_logprobs": self.top_logprobs,
            },
            "hosts": list(self.hosts),
            "host_digests": digests,
            "host_versions": {h.url: h.version for h in self._hosts},
            "digests_agree": len({d for d in digests.values() if d}) <= 1,
            "error": "; ".join(errors.values()) or None,
        }


def _status_row(host: str, error: str | None = None) -> dict[str, Any]:
    return {"host": host, "reachable": False, "version": None, "models": [], "error": error}


def server_status(
    hosts: Sequence[str] | str | None = None, timeout_s: float = 1.0
) -> list[dict[str, Any]]:
    """Reachability, version and pulled models of each Ollama host; never raises.

    Args:
        hosts: hosts to ask (default: ``OLLAMA_HOST`` or the local default).
        timeout_s: per-request timeout.

    Returns:
        One ``{"host", "reachable", "version", "models", "error"}`` dict per host.
    """
    try:
        urls = resolve_hosts(hosts)
    except ValueError as exc:
        return [_status_row(str(hosts), error=str(exc))]
    out = []
    timeout = httpx.Timeout(timeout_s)
    for url in urls:
        row = _status_row(url)
        try:
            row["version"] = _get_version(url, timeout)
            row["reachable"] = True
            with ollama.Client(host=url, timeout=timeout) as client:
                row["models"] = sorted(m.model for m in client.list().models if m.model)
        except httpx.ConnectError:
            row["error"] = _unreachable(url)
        except httpx.TimeoutException:
            row["error"] = f"no answer from {url} within {timeout_s:g}s"
        except Exception as exc:
            text = error_text(str(exc)) if isinstance(exc, ollama.ResponseError) else str(exc)
            row["error"] = f"{type(exc).__name__}: {one_line(text, 160)}"
        out.append(row)
    return out
