"""What the server backends share: retries with backoff, prompt lower bound, logprob confidence.

Kept apart from :mod:`core.backends.base` (the interface) so the Ollama and OpenAI-compatible
backends apply exactly the same rules.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from core.backends.base import BackendError, Message
from core.backends.deadline import time_left

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "DEFAULT_POOL_SIZE",
    "Lanes",
    "RetryPolicy",
    "answer_logprob_confidence",
    "check_client_settings",
    "checked_options",
    "error_text",
    "json_kind",
    "not_an_object",
    "pool_limits",
    "min_prompt_tokens",
    "prompt_chars",
    "reasoning_text",
    "too_long_error",
    "one_line",
    "status_error",
    "with_retries",
]

T = TypeVar("T")
C = TypeVar("C")

#: Characters per token of :func:`min_prompt_tokens`: an upper bound on the average token's
#: length, so characters / 6 is a lower bound on the token count. English BPE vocabularies
#: average about 4 characters per token, and digits, names and punctuation give shorter
#: tokens; a prompt is refused before sending only when even this lower bound does not fit,
#: and a prompt the server truncated is caught afterwards from its reported token count.
DEFAULT_CHARS_PER_TOKEN = 6.0

# The "answer" value in the reply JSON: a string (with escapes) or a bare scalar.
_ANSWER_RE = re.compile(
    r'"answer"\s*:\s*(?:"((?:[^"\\]|\\.)*)"|(-?\d[\d.eE+-]*|true|false|null))', re.S
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded exponential backoff for transient failures (HTTP 503, timeouts, resets).

    Attributes:
        attempts: total tries per call, the first included (>= 1).
        backoff_s: delay before the second try; each later delay doubles.
        max_backoff_s: cap on one delay.
    """

    attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if int(self.attempts) < 1:
            raise ValueError(f"retries: attempts must be >= 1, got {self.attempts!r}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(
                f"retries: backoff must be >= 0, got {self.backoff_s!r}/{self.max_backoff_s!r}"
            )

    def delays(self) -> Iterator[float]:
        """The waits between tries: ``backoff_s * 2**i`` capped at ``max_backoff_s``."""
        for i in range(self.attempts - 1):
            yield min(self.backoff_s * 2.0**i, self.max_backoff_s)


def with_retries(
    call: Callable[[int], T],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call(attempt)`` until it returns, retrying retryable :class:`BackendError`.

    Args:
        call: the operation; receives the 0-based attempt number (backends use it to move to
            the next host).
        policy: how many tries and how long to wait between them.
        sleep: the wait function (tests may pass a recorder).

    Returns:
        What ``call`` returned.

    Raises:
        BackendError: a permanent error at once, or the last retryable one when the tries are
            used up or the call's deadline (:func:`core.backends.deadline.call_deadline`)
            would pass before the next one (its message then says how many tries were made).
    """
    delays = list(policy.delays())
    attempt = 0
    while True:
        try:
            return call(attempt)
        except BackendError as exc:
            left = time_left()  # the call's --timeout deadline: no try starts after it
            out_of_time = left is not None and attempt < len(delays) and left <= delays[attempt]
            if not exc.retryable or attempt >= len(delays) or out_of_time:
                if exc.retryable and attempt:
                    raise BackendError(f"{exc} (after {attempt + 1} tries)") from exc
                raise
            sleep(delays[attempt])
            attempt += 1


def prompt_chars(messages: Sequence[Message]) -> int:
    """Characters of all message contents (what :func:`min_prompt_tokens` divides)."""
    return sum(len(str(m.get("content", ""))) for m in messages)


def min_prompt_tokens(
    messages: Sequence[Message], chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
) -> int:
    """Lower bound of a chat prompt's token count, before it is sent.

    ``floor(characters of all message contents / chars_per_token)``, and nothing added (no
    chat-template overhead, which depends on the model). A pre-send check compares only this
    bound with the context, so it never refuses a prompt the server could have taken: an
    estimate of the real count can be off by 2x either way, a lower bound cannot over-count.
    """
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token!r}")
    return math.floor(prompt_chars(messages) / chars_per_token)


def too_long_error(
    messages: Sequence[Message], chars_per_token: float, size: int, limit: str
) -> str | None:
    """The refusal text when the prompt's lower bound already reaches the context, else None.

    At ``bound >= size`` the prompt has at least as many tokens as the context holds, so the
    server would truncate it (the case the backends detect after a call from the reported
    prompt token count); below that the prompt is sent.

    Args:
        messages: the chat messages.
        chars_per_token: the divisor of :func:`min_prompt_tokens`.
        size: the context in tokens.
        limit: how the message names the context, e.g. ``num_ctx=32768``.
    """
    bound = min_prompt_tokens(messages, chars_per_token)
    if bound < size:
        return None
    return (
        f"prompt too long: at least {bound} tokens (a lower bound: {prompt_chars(messages)} "
        f"characters / {chars_per_token:g}) >= {limit}; not sent (prompts are never truncated)"
    )


def answer_logprob_confidence(tokens: Sequence[Mapping[str, Any]] | None) -> float | None:
    """Model-internal confidence in the answer: the geometric-mean probability of its tokens.

    Definition: concatenate the generated tokens' texts; find the value of the first
    ``"answer"`` key in that text (the characters between the quotes of a string value, or a
    bare number/true/false/null); take every token whose character range overlaps that
    value (a token that also carries a quote or a space counts); return
    ``exp(mean(logprob of those tokens))``. Example: tokens ``{"answer": "``, ``Par`` (logprob
    -0.1), ``is`` (-0.3), ``"}`` give ``exp(-0.2) = 0.8187``.

    Args:
        tokens: the server's per-token entries, each with ``token`` and ``logprob`` (Ollama's
            top-level ``logprobs`` list; OpenAI's ``choices[0].logprobs.content``).

    Returns:
        The confidence in (0, 1], or None when there are no tokens, no ``"answer"`` value or
        an empty one.
    """
    if not tokens:
        return None
    pieces = [str(t.get("token", "")) for t in tokens]
    text = "".join(pieces)
    m = _ANSWER_RE.search(text)
    if m is None:
        return None
    group = 1 if m.group(1) is not None else 2
    start, end = m.span(group)
    if end <= start:
        return None
    picked: list[float] = []
    pos = 0
    for piece, tok in zip(pieces, tokens, strict=False):
        a, b = pos, pos + len(piece)
        pos = b
        if a < end and b > start:
            picked.append(float(tok["logprob"]))
        if a >= end:
            break
    if not picked:
        return None
    return math.exp(math.fsum(picked) / len(picked))


def error_text(body: str, limit: int = 200) -> str:
    """The ``error`` message of a JSON error body (Ollama or OpenAI shape), on one line."""
    msg: Any = body
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, Mapping):
        msg = obj.get("error", obj.get("message", body))
        if isinstance(msg, Mapping):
            msg = msg.get("message", json.dumps(msg))
    return one_line(str(msg), limit)


def json_kind(value: Any) -> str:
    """The JSON name of a decoded value's type.

    One of ``object``, ``list``, ``string``, ``number``, ``boolean`` or ``null``.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def not_an_object(value: Any, url: str) -> BackendError:
    """The error for a reply body that is valid JSON but not an object (``[]``, ``null`` ...)."""
    return BackendError(f"server {url} returned a JSON {json_kind(value)}, not an object")


#: Connections a server backend keeps per host before the engine sizes its pool
#: (:func:`pool_limits`); the engine raises it to the run's concurrency.
DEFAULT_POOL_SIZE = 20


def pool_limits(size: int) -> Any:
    """``httpx.Limits`` for a pool of ``size`` connections, every one kept alive between calls.

    httpx keeps 20 idle connections by default; with more threads than that, each call beyond
    them opened a new TCP connection. Imported lazily: httpx is a slow import.
    """
    import httpx

    n = max(1, int(size))
    return httpx.Limits(max_connections=n, max_keepalive_connections=n)


def one_line(text: str, limit: int = 200) -> str:
    """``text`` collapsed onto one line and cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def check_client_settings(
    top_logprobs: Any, chars_per_token: float, timeout_s: float, connect_timeout_s: float
) -> None:
    """Validate the settings both server backends take.

    Raises:
        ValueError: ``top_logprobs`` outside 0..20, or a size or timeout that is not > 0.
    """
    if not 0 <= int(top_logprobs) <= 20:
        raise ValueError(f"top_logprobs must be in 0..20, got {top_logprobs!r}")
    if chars_per_token <= 0 or timeout_s <= 0 or connect_timeout_s <= 0:
        raise ValueError("chars_per_token, timeout_s and connect_timeout_s must be > 0")


def checked_options(
    extra_options: Mapping[str, Any] | None, allowed: Sequence[str], backend: str
) -> dict[str, Any]:
    """A copy of a backend's extra request options, every name checked against ``allowed``.

    Args:
        extra_options: the options (None: none).
        allowed: the names the backend accepts, in the order the message lists them.
        backend: how the message names the backend (``Ollama``, ``openai``).

    Raises:
        ValueError: an unknown option name; the message names it and the allowed ones.
    """
    extra = dict(extra_options or {})
    bad = sorted(set(extra) - set(allowed))
    if bad:
        raise ValueError(
            f"unknown {backend} option(s) {', '.join(map(repr, bad))}; allowed: "
            f"{', '.join(allowed)}"
        )
    return extra


def status_error(code: int, url: str, msg: str) -> BackendError:
    """The error for an HTTP status no more specific rule matched (429 and 503 are retried)."""
    if code in (429, 503):
        return BackendError(f"HTTP {code} from {url}: {msg} (server busy)", retryable=True)
    return BackendError(f"HTTP {code} from {url}: {msg}")


class Lanes(Generic[C]):
    """HTTP clients of one kept-alive connection each, one per concurrent call ("lanes").

    One httpx pool of many connections scans all of them (twice, with a readability check of
    each idle socket) on every request: at a fast server's speed a large share of the
    engine's CPU per call (issue 17). A call takes a lane no other call uses meanwhile;
    lanes are made as calls need them, up to ``size``; calls beyond them share the backend's
    pooled client. ``all`` holds every lane, ``free`` those no call is using (a new list
    after :meth:`drop`, so a lane taken before a resize is not given back to the new list).

    Args:
        make: a new client of one connection.
    """

    def __init__(self, make: Callable[[], C]):
        self._make = make
        self._lock = threading.Lock()
        self.all: list[C] = []
        self.free: list[C] = []

    def take(self, size: int, shared: C) -> tuple[C, list[C] | None]:
        """A client for one call and the free list to give it back to (None: ``shared``)."""
        free = self.free
        try:
            return free.pop(), free  # list.pop is atomic: no two calls get one lane
        except IndexError:
            pass
        with self._lock:
            if len(self.all) < size and free is self.free:
                lane = self._make()
                self.all.append(lane)
                return lane, free
        return shared, None

    def drop(self) -> None:
        """Close every lane (a resize); new ones are made as calls need them."""
        with self._lock:
            lanes, self.all, self.free = self.all, [], []
        for lane in lanes:
            lane.close()


def reasoning_text(message: Mapping[str, Any]) -> str | None:
    """A reasoning model's thoughts returned apart from an OpenAI-style message, or None.

    vLLM, DeepSeek and llama.cpp name them ``reasoning_content``; OpenRouter and newer vLLM
    ``reasoning``.
    """
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None
