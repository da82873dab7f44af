"""The one interface every model backend implements (SPEC §5.2).

Conditions, interventions and the engine talk to a :class:`Backend` only, so they never know
whether the reply came from Ollama, an OpenAI-compatible server or the embedded baseline
reader. A call that fails returns a :class:`Reply` with ``error`` set (failures are data); only
programmer errors raise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Backend", "BackendError", "Message", "Reply"]

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]

# Half of a UTF-16 surrogate pair: what a JSON "\ud83d" escape cut from its partner decodes to.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: str | None) -> str | None:
    if value is None or value.isascii() or not _LONE_SURROGATE.search(value):
        return value
    return _LONE_SURROGATE.sub("\ufffd", value)


@dataclass(frozen=True, slots=True)
class Reply:
    """What one model call returned.

    Attributes:
        text: the raw reply text (the answer-contract JSON, or whatever the model wrote);
            ``""`` when the call failed. Half of a UTF-16 surrogate pair (a JSON escape of one
            surrogate without its partner, e.g. an emoji cut at the token limit) becomes
            U+FFFD here, in ``error`` too, so every reply can be stored as UTF-8.
        prompt_tokens: prompt tokens as counted by the server (Ollama ``prompt_eval_count``),
            or None when unknown.
        completion_tokens: generated tokens (Ollama ``eval_count``), or None when unknown.
        latency_ms: wall-clock time of the call as seen by the client, in milliseconds.
        total_duration_ns: server-side total time (Ollama ``total_duration``), or None.
        load_duration_ns: model load time (``load_duration``; large values flag a reload).
        prompt_eval_duration_ns: prompt processing time (``prompt_eval_duration``), or None.
        eval_duration_ns: generation time (``eval_duration``), or None.
        logprobs: per-token log-probabilities as the server returned them (Ollama: a list of
            ``{token, logprob, bytes, top_logprobs}``), or None when not requested/supported.
        model_digest: the model's content digest (Ollama ``/api/tags``), or None.
        error: None, or a one-line reason the call failed (the prediction stores it).
        logprob_confidence: model-internal confidence derived from the log-probabilities of
            the tokens that spell the ``"answer"`` value
            (:func:`core.backends.support.answer_logprob_confidence`), or None when the
            server gave no log-probabilities.
        reasoning: the model's reasoning as the server returned it apart from the reply text
            (Ollama ``message.thinking``; OpenAI-compatible ``message.reasoning_content`` or
            ``message.reasoning``), or None. Stored apart, never parsed as the answer.
    """

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = 0.0
    total_duration_ns: int | None = None
    load_duration_ns: int | None = None
    prompt_eval_duration_ns: int | None = None
    eval_duration_ns: int | None = None
    logprobs: Sequence[Mapping[str, Any]] | None = None
    model_digest: str | None = None
    error: str | None = None
    logprob_confidence: float | None = None
    reasoning: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", _text(self.text))
        object.__setattr__(self, "error", _text(self.error))
        object.__setattr__(self, "reasoning", _text(self.reasoning))

    @property
    def ok(self) -> bool:
        """True when the call succeeded (``error`` is None)."""
        return self.error is None


@runtime_checkable
class Backend(Protocol):
    """A model backend.

    A backend that runs in this process may also offer ``pool(size)``: the same backend in
    ``size`` worker processes, with ``submit(messages) -> Future[Reply]``. The engine then uses
    those for long runs (the embedded reader does; see :mod:`core.backends.workers`).

    Attributes:
        name: backend kind (``ollama``, ``openai``, ``embedded``).
        model: the model name as the user gave it.
    """

    name: str
    model: str

    def generate(
        self, messages: Sequence[Message], options: Mapping[str, Any] | None = None
    ) -> Reply:
        """Run one chat call and return its reply (errors are returned, not raised)."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description recorded on the run (kind, model, digest, label)."""
        ...


class BackendError(RuntimeError):
    """A backend failure with an actionable message.

    Attributes:
        retryable: True for transient failures (timeouts, HTTP 503) worth retrying.
    """

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable
