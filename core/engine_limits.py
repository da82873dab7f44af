"""Limits the execution engine keeps (issue 17): concurrency and the stored size of a reply.

- **Concurrency.** The embedded reader runs one worker process (or thread) per concurrent
  call, all on this machine: more than the usable cores (``os.sched_getaffinity``) only adds
  processes that wait for a core (``--concurrency 100000`` once started 171 worker processes
  on 2 cores). A model server is asked for at most :data:`MAX_SERVER_CONCURRENCY` calls at
  once per run. A larger ``--concurrency`` is capped, not refused: the commands print one line
  on stderr saying so (:func:`cap_concurrency`), and :func:`core.engine.execute` applies the
  same cap to every caller.
- **Timeout.** :data:`TIMEOUT` is the ``--timeout SECONDS`` flag of every command that calls a
  model, and of the dashboard's launch form: a server backend's ``timeout_s`` (default 600 s);
  a call that times out says to raise it.
- **Reply size.** A reply's raw text is stored up to :data:`MAX_REPLY_BYTES` (UTF-8); a longer
  one is parsed whole first (answer, evidence, confidence and parse error come from the full
  reply), then stored cut at that size (never inside a character), with
  ``meta.raw_response_truncated = {"bytes": <full size>, "kept_bytes": <stored size>}`` on the
  prediction. Such a reply is not put in the response cache (a cache hit would parse the cut
  text), so a rerun of that call asks the model again.
"""

from __future__ import annotations

import os
from typing import Any

from core.params import Param

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_SERVER_CONCURRENCY",
    "TIMEOUT",
    "cap_concurrency",
    "cap_reply",
    "concurrency_limit",
    "usable_cores",
]

#: Most concurrent calls a run makes to a model server (ollama, openai), per run.
MAX_SERVER_CONCURRENCY = 256
#: Most bytes (UTF-8) of a reply's raw text stored on its prediction: 256 KiB.
MAX_REPLY_BYTES = 256 * 1024


def _positive(value: float) -> None:
    if not value > 0:
        raise ValueError(f"must be > 0 seconds, got {value!r}")


#: ``--timeout SECONDS``: how long one call may wait for a model server's answer before it
#: fails (and is retried, as a transient error); the backends' ``timeout_s``. None: their
#: default of 600 s. The embedded reader has no timeout.
TIMEOUT = Param(
    "timeout", float, None,
    "seconds one model call may wait for the server's answer before it fails and is retried "
    "(ollama and openai backends; default 600)",
    validate=_positive,
)  # fmt: skip


def usable_cores() -> int:
    """Cores this process may run on (``os.sched_getaffinity``; else ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _in_process(backend: Any) -> bool:
    """Whether the backend computes on this machine (the embedded reader), not on a server."""
    return getattr(backend, "name", "") == "embedded" or callable(getattr(backend, "pool", None))


def concurrency_limit(backend: Any) -> int:
    """The most concurrent calls a run makes with ``backend``.

    The embedded reader: :func:`usable_cores`; a model server: :data:`MAX_SERVER_CONCURRENCY`.
    """
    return usable_cores() if _in_process(backend) else MAX_SERVER_CONCURRENCY


def cap_concurrency(backend: Any, requested: int) -> tuple[int, str | None]:
    """``requested`` capped at :func:`concurrency_limit`, and the notice when it was capped.

    Returns:
        ``(concurrency, notice)``; ``notice`` is None when ``requested`` is within the limit,
        else one line such as ``--concurrency 100000 capped at 2: the embedded reader runs
        one worker per usable core (2 cores)``.

    Raises:
        ValueError: ``requested`` below 1.
    """
    n = int(requested)
    if n < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {requested!r}")
    limit = concurrency_limit(backend)
    if n <= limit:
        return n, None
    if _in_process(backend):
        why = f"the embedded reader runs one worker per usable core ({limit} cores)"
    else:
        why = f"at most {MAX_SERVER_CONCURRENCY} concurrent calls go to a model server"
    return limit, f"--concurrency {n} capped at {limit}: {why}"


def cap_reply(text: str) -> tuple[str, dict[str, int] | None]:
    """The reply text to store, cut to :data:`MAX_REPLY_BYTES`, and the truncation record.

    Returns:
        ``(text, None)`` when it fits; else the longest prefix of whole characters within
        the limit and ``{"bytes": full size, "kept_bytes": stored size}`` (UTF-8 bytes).
    """
    if len(text) * 4 <= MAX_REPLY_BYTES:  # fits whatever its characters (4 bytes at most)
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_REPLY_BYTES:
        return text, None
    kept = data[:MAX_REPLY_BYTES].decode("utf-8", "ignore")  # a cut character is dropped
    return kept, {"bytes": len(data), "kept_bytes": len(kept.encode("utf-8", "surrogatepass"))}
