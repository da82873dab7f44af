"""How the server backends word transport failures (both talk HTTP through ``httpx``).

Kept apart from :mod:`core.backends.support` because it imports ``httpx``, which the package
loads only with a server backend.
"""

from __future__ import annotations

import httpx

from core.backends.base import BackendError
from core.backends.support import one_line

__all__ = ["closed_mid_response", "last_resort_error"]


def closed_mid_response(exc: BaseException, url: str) -> BackendError | None:
    """A retryable error when the server closed the connection mid-response, else None.

    Args:
        exc: what the client raised.
        url: the server, named in the message.
    """
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return BackendError(
            f"connection to {url} closed mid-response ({type(exc).__name__}: "
            f"{one_line(str(exc), 120)})",
            retryable=True,
        )
    return None


def last_resort_error(exc: BaseException, url: str) -> BackendError:
    """The error for a failure no more specific rule matched (any other HTTP error, or not).

    Args:
        exc: what the client raised.
        url: the server, named in the message.
    """
    if isinstance(exc, httpx.HTTPError):
        return BackendError(f"HTTP error talking to {url}: {one_line(str(exc), 160)}")
    return BackendError(f"unexpected {type(exc).__name__} from {url}: {one_line(str(exc))}")
