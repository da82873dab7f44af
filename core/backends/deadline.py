"""One deadline for a whole model call: connect, first byte and body (``--timeout``).

httpx's timeouts bound each network operation: a server that sends one byte every 0.5 s never
lets a 2 s read timeout fire, and held a call ~15 s under ``--timeout 2`` (issue 35). Here a
call sets a deadline (:func:`call_deadline`) and every socket operation of the HTTP clients
the server backends make (:func:`http_transport`) waits at most until it: connecting, sending,
each read of the status line, headers and body. When it has passed, the operation fails with
httpx's own timeout error, which the backends report as a timeout ("no answer within N s").

The deadline covers the whole call, its retries and their waits included
(:func:`core.backends.support.with_retries` makes no try it could not start before it).

The deadline is per thread (a :class:`contextvars.ContextVar`): each of the engine's threads
makes its own call. Outside :func:`call_deadline` (the backends' model checks) only httpx's own
timeouts apply.
"""

from __future__ import annotations

import contextvars
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

__all__ = ["call_deadline", "http_transport", "shared_tls", "time_left"]

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "model_call_deadline", default=None
)


@contextmanager
def call_deadline(seconds: float | None) -> Iterator[None]:
    """Every HTTP operation inside the block ends by ``seconds`` from now (None: no deadline).

    Inside another call's block the earlier of the two deadlines holds (a model check made
    during a call does not extend it).
    """
    outer = _DEADLINE.get()
    mine = None if seconds is None else time.monotonic() + float(seconds)
    if outer is not None:
        mine = outer if mine is None else min(outer, mine)
    token = _DEADLINE.set(mine)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds left before the current call's deadline (None outside :func:`call_deadline`)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the deadline; ``error`` when none is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call's deadline (--timeout) passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A network stream whose reads and writes end by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's network backend whose connections keep the call's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, _left(timeout, httpcore.ConnectTimeout), socket_options
        )
        return _Stream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_TLS: list[ssl.SSLContext] = []
_TLS_LOCK = threading.Lock()


def shared_tls() -> ssl.SSLContext:
    """The default TLS context of httpx (CA bundle, verification on), made once per process.

    Making one loads the CA bundle (~30 ms of CPU); every backend of the process verifies
    with the same bundle, and an ``SSLContext`` may be shared by the clients of many threads.
    """
    with _TLS_LOCK:
        if not _TLS:
            _TLS.append(httpx.create_ssl_context())
        return _TLS[0]


def http_transport(limits: httpx.Limits, verify: Any) -> httpx.HTTPTransport:
    """An httpx transport with ``limits`` and ``verify``, whose sockets keep the call deadline.

    Raises:
        RuntimeError: this httpx / httpcore no longer has the pool the deadline hooks into
            (a dependency upgrade; the pinned versions have it).
    """
    transport = httpx.HTTPTransport(limits=limits, verify=verify)
    pool = getattr(transport, "_pool", None)
    if not isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend):
        raise RuntimeError("httpx's transport has no network backend to bound (--timeout)")
    pool._network_backend = _Backend(pool._network_backend)  # type: ignore[union-attr]
    return transport
