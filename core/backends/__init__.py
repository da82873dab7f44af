"""Model backends behind one interface (SPEC §5.2).

``Backend`` is the protocol the engine talks to; ``EmbeddedReader`` is the deterministic
extractive baseline that needs no server and no weights; ``OllamaBackend`` (the official
``ollama`` client) and ``OpenAIBackend`` (any OpenAI-compatible server) talk to model servers.
:func:`make_backend` builds one by kind; :func:`server_status` tells what Ollama servers answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.backends.base import Backend, BackendError, Message, Reply
from core.backends.embedded import LABEL as EMBEDDED_LABEL
from core.backends.embedded import EmbeddedReader
from core.backends.endpoints import resolve_base_urls
from core.backends.support import RetryPolicy, answer_logprob_confidence

__all__ = [
    "BACKENDS",
    "EMBEDDED_LABEL",
    "Backend",
    "BackendError",
    "EmbeddedReader",
    "Message",
    "OllamaBackend",
    "OpenAIBackend",
    "Reply",
    "RetryPolicy",
    "answer_logprob_confidence",
    "backend_option_names",
    "make_backend",
    "server_status",
]

#: Backend kinds :func:`make_backend` builds.
BACKENDS = ("embedded", "ollama", "openai")

_RETRY_KEYS = ("retries", "backoff_s", "max_backoff_s")
_EMBEDDED_KEYS = ("threshold", "k1", "b")
_OLLAMA_NAMED = ("num_ctx", "num_predict", "seed", "temperature")
_OLLAMA_SETTINGS = (
    "keep_alive",
    "logprobs",
    "top_logprobs",
    "timeout_s",
    "connect_timeout_s",
    "chars_per_token",
)
_OPENAI_SETTINGS = (
    "logprobs",
    "top_logprobs",
    "timeout_s",
    "connect_timeout_s",
    "chars_per_token",
    "context_length",
    "api_key",
)


def backend_option_names(kind: str) -> tuple[str, ...]:
    """The option names :func:`make_backend` accepts for ``kind`` (sorted).

    Raises:
        ValueError: an unknown kind.
    """
    if kind == "embedded":
        return tuple(sorted(_EMBEDDED_KEYS))
    if kind == "ollama":
        from core.backends.ollama import OLLAMA_OPTIONS  # lazy: ollama/httpx are slow imports

        return tuple(sorted({*OLLAMA_OPTIONS, *_OLLAMA_SETTINGS, *_RETRY_KEYS}))
    if kind == "openai":
        from core.backends.openai_compat import CALL_OPTIONS  # lazy: httpx is a slow import

        return tuple(sorted({*CALL_OPTIONS, *_OPENAI_SETTINGS, *_RETRY_KEYS}))
    raise ValueError(f"unknown backend {kind!r}; allowed: {', '.join(BACKENDS)}")


def server_status(
    hosts: Sequence[str] | str | None = None, timeout_s: float = 1.0
) -> list[dict[str, Any]]:
    """Reachability, version and pulled models of each Ollama host; never raises.

    See :func:`core.backends.ollama.server_status` (imported on first use: the ``ollama``
    client is a heavy import).
    """
    from core.backends.ollama import server_status as status  # lazy: ollama is slow to import

    return status(hosts, timeout_s)


def __getattr__(name: str) -> Any:
    # The server backends import ollama/httpx; load them only when asked for.
    if name == "OllamaBackend":
        from core.backends.ollama import OllamaBackend

        return OllamaBackend
    if name == "OpenAIBackend":
        from core.backends.openai_compat import OpenAIBackend

        return OpenAIBackend
    raise AttributeError(f"module 'core.backends' has no attribute {name!r}")


def _retry(opts: dict[str, Any]) -> RetryPolicy:
    default = RetryPolicy()
    return RetryPolicy(
        attempts=int(opts.pop("retries", default.attempts)),
        backoff_s=float(opts.pop("backoff_s", default.backoff_s)),
        max_backoff_s=float(opts.pop("max_backoff_s", default.max_backoff_s)),
    )


def make_backend(
    kind: str,
    model: str | None = None,
    *,
    hosts: Sequence[str] | None = None,
    base_url: str | Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Backend:
    """Build a backend by kind.

    Args:
        kind: one of :data:`BACKENDS`.
        model: the model name (``embedded``: default ``extractive-bm25``; required otherwise).
        hosts: Ollama hosts (default: ``OLLAMA_HOST``, else http://127.0.0.1:11434).
        base_url: the OpenAI-compatible server, or several (calls spread over them, see
            :mod:`core.backends.endpoints`); default: ``OPENAI_BASE_URL`` (comma-separated).
        options: backend options, names from :func:`backend_option_names` (``retries`` is
            the total tries per call, ``backoff_s`` the first wait).

    Raises:
        ValueError: an unknown kind or option name, a missing model or base URL, bad values.
    """
    allowed = backend_option_names(kind)
    opts = dict(options or {})
    bad = sorted(set(opts) - set(allowed))
    if bad:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, bad))} for the {kind} backend; allowed: "
            f"{', '.join(allowed)}"
        )
    if kind == "embedded":
        return EmbeddedReader(model, **opts) if model else EmbeddedReader(**opts)
    if kind == "ollama":
        from core.backends.ollama import OllamaBackend  # lazy: ollama/httpx are slow imports

        retry = _retry(opts)
        named = {k: opts.pop(k) for k in (*_OLLAMA_NAMED, *_OLLAMA_SETTINGS) if k in opts}
        return OllamaBackend(
            model or "", hosts=hosts, retry=retry, extra_options=opts or None, **named
        )
    from core.backends.openai_compat import OpenAIBackend  # lazy: httpx is a slow import

    url = resolve_base_urls(base_url)
    retry = _retry(opts)
    named = {k: opts.pop(k) for k in _OPENAI_SETTINGS if k in opts}
    for key in ("temperature", "seed", "max_tokens"):
        if key in opts:
            named[key] = opts.pop(key)
    return OpenAIBackend(
        model or "", base_url=url, retry=retry, extra_options=opts or None, **named
    )
