"""Limits the execution engine keeps (issue 17): concurrency and the stored size of a reply.

- **Concurrency.** The embedded reader runs one worker process (or thread) per concurrent
  call, all on this machine: more than the usable cores (``os.sched_getaffinity``) only adds
  processes that wait for a core (``--concurrency 100000`` once started 171 worker processes
  on 2 cores). A model server is asked for at most :data:`MAX_SERVER_CONCURRENCY` calls at
  once per run. A larger ``--concurrency`` is capped, not refused: the commands print one line
  on stderr saying so (:func:`cap_concurrency`), and :func:`core.execution.engine.execute` applies
  the
  same cap to every caller.
- **Timeout.** :data:`TIMEOUT` is the ``--timeout SECONDS`` flag of every command that calls a
  model, and of the dashboard's launch form: a server backend's ``timeout_s`` (default 600 s),
  one deadline for the whole call from connecting to the reply's last byte, retries and their
  waits included (:mod:`core.backends.deadline`: a server trickling bytes cannot hold it
  longer); a call that times out says to raise it.
- **Reply size.** A reply's raw text is stored up to :data:`MAX_REPLY_BYTES` (UTF-8); a longer
  one is parsed whole first (answer, evidence, confidence and parse error come from the full
  reply), then stored cut at that size (never inside a character), with
  ``meta.raw_response_truncated = {"bytes": <full size>, "kept_bytes": <stored size>}`` on the
  prediction. Such a reply is not put in the response cache (a cache hit would parse the cut
  text), so a rerun of that call asks the model again.
- **Reply numbers.** Token counts and durations a server reports are range-checked
  (:func:`checked_numbers`, :data:`REPLY_NUMBER_RANGES`): one outside its column (3e9 or 1e20
  prompt tokens, a negative duration, NaN) is stored missing and named in the prediction's
  ``meta.out_of_range``, never a crash; a row the store still refuses becomes that call's
  recorded error and the rest of its write batch is written
  (:func:`core.execution.engine.write_rows`).
"""

from __future__ import annotations

import math
import os
from typing import Any

from core.params import Param

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_SERVER_CONCURRENCY",
    "REPLY_NUMBER_RANGES",
    "TIMEOUT",
    "cap_concurrency",
    "cap_reply",
    "checked_numbers",
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


#: ``--timeout SECONDS``: how long one call, its retries included, may wait for a model
#: server's answer before it fails; the backends' ``timeout_s``. None: their
#: default of 600 s. The embedded reader has no timeout.
TIMEOUT = Param(
    "timeout",
    float,
    None,
    "seconds one model call, its retries included, may wait for the server's answer before "
    "it fails (ollama and openai backends; default 600)",
    maximum=86_400,
    validate=_positive,
)


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


#: The range stored of each number a server reports on a reply (the ``predictions`` columns'
#: types: token counts INTEGER, durations BIGINT nanoseconds; the confidence a probability).
REPLY_NUMBER_RANGES: dict[str, tuple[float, float]] = {
    "prompt_tokens": (0, 2**31 - 1),
    "completion_tokens": (0, 2**31 - 1),
    "total_duration_ns": (0, 2**63 - 1),
    "load_duration_ns": (0, 2**63 - 1),
    "prompt_eval_duration_ns": (0, 2**63 - 1),
    "eval_duration_ns": (0, 2**63 - 1),
    "logprob_confidence": (0.0, 1.0),
}


def _shown(value: Any) -> str:
    """A short text of a rejected number (a huge integer by its size, not its digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checked_numbers(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The reply numbers of :data:`REPLY_NUMBER_RANGES` that can be stored, and the rest noted.

    A server's reply is data: a token count of 3e9 or 1e20, a negative or non-integer count,
    NaN or infinity do not fit their columns. Each such value becomes None (missing) and is
    named in the notes (``{"prompt_tokens": "3000000000 outside 0..2147483647"}``), which the
    engine keeps in the prediction's ``meta.out_of_range``; an integral float (``12.0``) is
    the integer. Keys not in the table pass through unchanged.

    Returns:
        ``(values, notes)``: a copy of ``values`` with the rejected numbers set to None.
    """
    out = dict(values)
    notes: dict[str, str] = {}
    for key, (low, high) in REPLY_NUMBER_RANGES.items():
        value = out.get(key)
        if value is None:
            continue
        integer = isinstance(high, int)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and isinstance(value, float):
            ok = math.isfinite(value) and (not integer or value.is_integer())
        if ok and low <= value <= high:
            out[key] = int(value) if integer else float(value)
            continue
        kind = "an integer" if integer else "a number"
        notes[key] = f"{_shown(value)} is not {kind} in {low}..{high}"
        out[key] = None
    return out, notes
