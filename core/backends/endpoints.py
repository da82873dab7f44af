"""Several OpenAI-compatible endpoints behind one backend: which one takes the next call.

The OpenAI-compatible backend (:mod:`core.backends.openai_compat`) may be given several base
URLs (``--base-url`` repeated, or ``OPENAI_BASE_URL="http://a:8000/v1,http://b:8000/v1"``),
as the Ollama backend may be given several hosts. This module holds what does not need the
HTTP client, so the commands can import it cheaply:

- :func:`resolve_base_urls`: the endpoints from the arguments or the environment, normalized
  (:func:`normalize_base_url`) and deduplicated in order.
- :class:`EndpointBalancer`: a call takes the live endpoint with the fewest calls in flight
  (ties: round-robin) and waits while every live endpoint has ``limit`` calls in flight (the
  per-endpoint concurrency); an endpoint whose call failed on the transport (connection
  refused, timeout, connection closed, HTTP 5xx, after the retry policy) is *down* for
  :data:`DOWN_S` seconds and its calls move to the others. When no endpoint is live, a call
  still tries the ones it has not tried (a server that came back is found that way, and a
  call fails only after every endpoint failed it).
- :func:`total_concurrency`: the commands' ``--concurrency`` is per endpoint; the engine's
  thread count is that times the number of endpoints.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DOWN_S",
    "EndpointBalancer",
    "EndpointCounts",
    "normalize_base_url",
    "resolve_base_urls",
    "total_concurrency",
]

#: Seconds an endpoint that failed on the transport gets no new calls (while another is live).
DOWN_S = 30.0


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


def resolve_base_urls(
    base_urls: Sequence[str] | str | None = None, *, env: bool = True
) -> list[str]:
    """The ``/v1`` base URLs from ``base_urls``, else ``OPENAI_BASE_URL`` (comma-separated).

    Each item may itself hold several URLs separated by commas (as ``OLLAMA_HOST`` does for
    the Ollama hosts); duplicates are dropped, the order kept.

    Args:
        base_urls: one URL, several, or None.
        env: fall back to ``OPENAI_BASE_URL`` when ``base_urls`` holds none.

    Raises:
        ValueError: no URL at all (the message names ``--base-url``), or a bad one.
    """
    if isinstance(base_urls, str):
        base_urls = [base_urls]
    items = [str(u) for u in (base_urls or []) if str(u).strip()]
    if not items and env:
        items = [os.environ.get("OPENAI_BASE_URL", "")]
    urls = [normalize_base_url(u) for item in items for u in item.split(",") if u.strip()]
    if not urls:
        normalize_base_url("")  # raises: the message names --base-url
    return list(dict.fromkeys(urls))


def total_concurrency(backend: Any, per_endpoint: int) -> int:
    """The engine's thread count for ``per_endpoint`` calls in flight at each endpoint.

    ``per_endpoint`` times the backend's number of ``base_urls`` (1 for a backend without
    them: Ollama's hosts share the run's concurrency, the embedded reader has none).
    """
    urls = getattr(backend, "base_urls", None)
    return int(per_endpoint) * (len(urls) if isinstance(urls, (list, tuple)) and urls else 1)


@dataclass(slots=True)
class EndpointCounts:
    """What one endpoint did for this backend.

    Attributes:
        answered: calls it answered (a reply, whatever its content).
        failed: calls that ended with its error (no other endpoint left to try).
        moved: calls that failed on its transport and moved to another endpoint.
    """

    answered: int = 0
    failed: int = 0
    moved: int = 0


class EndpointBalancer:
    """Spreads calls over ``n`` endpoints (see the module docstring); thread-safe.

    Args:
        n: the number of endpoints (>= 1).
        limit: calls in flight per endpoint (:meth:`set_limit`); None: no limit.
        clock: the time source (tests may pass their own).
    """

    def __init__(
        self, n: int, limit: int | None = None, clock: Callable[[], float] = time.monotonic
    ):
        if n < 1:
            raise ValueError(f"need at least one endpoint, got {n}")
        self.n = n
        self.limit = limit
        self._clock = clock
        self._cond = threading.Condition()
        self._inflight = [0] * n
        self._down_until = [-math.inf] * n
        self._rr = itertools.count()
        self.counts = [EndpointCounts() for _ in range(n)]

    def set_limit(self, limit: int | None) -> None:
        """Calls in flight per endpoint from now on (None: no limit)."""
        with self._cond:
            self.limit = None if limit is None else max(1, int(limit))
            self._cond.notify_all()

    def _live(self, i: int, now: float) -> bool:
        return self._down_until[i] <= now

    def acquire(self, tried: set[int]) -> int | None:
        """The endpoint for a call's next try (counted in flight); None when all are tried.

        Live endpoints come first, least loaded, ties round-robin; the call waits while every
        live untried endpoint is at the limit. Without a live untried endpoint the call takes
        a down one it has not tried (the one down longest first), limit or not.
        """
        with self._cond:
            while True:
                now = self._clock()
                todo = [i for i in range(self.n) if i not in tried]
                if not todo:
                    return None
                live = [i for i in todo if self._live(i, now)]
                if not live:
                    pick = min(todo, key=lambda i: self._down_until[i])
                    self._inflight[pick] += 1
                    return pick
                free = [i for i in live if self.limit is None or self._inflight[i] < self.limit]
                if free:
                    start = next(self._rr) % self.n
                    pick = min(free, key=lambda i: (self._inflight[i], (i - start) % self.n))
                    self._inflight[pick] += 1
                    return pick
                # every live endpoint is busy; wake on a release, or to re-check a down one
                self._cond.wait(timeout=0.5)

    def release(self, i: int, outcome: str, *, down: bool = False) -> None:
        """End a try on endpoint ``i``: ``answered``, ``failed`` or ``moved``.

        ``down`` (always so for ``moved``): the try failed on the transport, so the endpoint
        gets no new calls for :data:`DOWN_S` seconds while another is live. An answer makes
        a down endpoint live again.

        Raises:
            ValueError: another outcome (a programmer error).
        """
        if outcome not in ("answered", "failed", "moved"):
            raise ValueError(f"unknown outcome {outcome!r}; allowed: answered, failed, moved")
        with self._cond:
            self._inflight[i] -= 1
            counts = self.counts[i]
            setattr(counts, outcome, getattr(counts, outcome) + 1)
            if down or outcome == "moved":
                self._down_until[i] = self._clock() + DOWN_S
            elif outcome == "answered":
                self._down_until[i] = -math.inf
            self._cond.notify_all()

    def mark_down(self, i: int) -> None:
        """Endpoint ``i`` failed a check (no call counted): down for :data:`DOWN_S` seconds."""
        with self._cond:
            self._down_until[i] = self._clock() + DOWN_S
            self._cond.notify_all()

    def live(self) -> list[bool]:
        """Per endpoint: whether it takes new calls now (not down)."""
        with self._cond:
            now = self._clock()
            return [self._live(i, now) for i in range(self.n)]
