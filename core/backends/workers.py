"""The embedded reader in worker processes, so a run's own work overlaps the reader's.

The embedded reader is pure Python: in the engine's process it shares one interpreter lock
with planning, parsing, scoring and storing, and every millisecond of that work adds to the
run. A :class:`ReaderPool` runs ``size`` copies of the reader in their own processes, as a
model server runs apart from its client: the engine keeps the next prompts queued (so a
worker never waits for it) and does its own work while the workers read. With ``size``
workers the reader also uses ``size`` cores, which threads cannot (SPEC §5.2, §12).

A pool is built from a reader factory: a picklable callable without arguments that makes the
reader (``functools.partial(EmbeddedReader, ...)``), so this module knows no reader class. A
worker is ``python -m core.backends.worker_process READ_FD WRITE_FD`` with two pipes of its own; the
first thing it reads is the factory, which it calls once; then it answers ``(seq, messages)``
with ``(seq, Reply)`` in order, with a reader made by the same factory, so its replies are the
in-process reader's, byte for byte. It exits when its request pipe closes: when the pool is
closed or collected, or when the engine's process dies (even by ``kill -9``), so no worker
outlives its run. A worker that dies (killed, out of memory) does
not fail the run: its unanswered calls are answered by the reader in this process, and the next
submission starts a new worker; after :data:`MAX_RESTARTS` new workers, every later call is
answered in this process.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path

from core.backends.base import Backend, Message, Reply

try:  # Linux and the other Unixes; elsewhere pipes keep their default size
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["MAX_RESTARTS", "ReaderFactory", "ReaderPool", "serve"]

#: Makes the reader, in this process or in a worker (pickled to it): no arguments.
ReaderFactory = Callable[[], Backend]

#: Workers a pool starts in place of dead ones before it answers in this process instead.
MAX_RESTARTS = 3

_ROOT = Path(__file__).resolve().parents[2]


class _Local:
    """The reader in this process, made on first need: answers what a dead worker left."""

    def __init__(self, factory: ReaderFactory):
        self.factory = factory
        self._reader: Backend | None = None
        self._lock = threading.Lock()

    def generate(self, messages: Sequence[Message]) -> Reply:
        with self._lock:
            if self._reader is None:
                self._reader = self.factory()
        return self._reader.generate(messages)


class _Worker:
    """One worker process, a thread that sends it prompts and one that reads its replies.

    :meth:`submit` never waits: a long prompt can fill the pipe until the worker reads it,
    and it is the sending thread, not the caller (the engine planning a run or handling
    replies), that waits for that.
    """

    def __init__(self, local: _Local):
        self.local = local
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        _widen(req_w)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "core.backends.worker_process", str(req_r), str(rep_w)],
                pass_fds=(req_r, rep_w),
                stdin=subprocess.DEVNULL,
                cwd=_ROOT,
            )
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._out = Connection(req_w, readable=False)
        self._in = Connection(rep_r, writable=False)
        self._lock = threading.Lock()  # the pending calls
        self._pending: dict[int, tuple[Future, list[Message]]] = {}
        self._requests: queue.SimpleQueue = queue.SimpleQueue()  # None: close the pipe
        self._requests.put(local.factory)  # the worker's first read: how to make its reader
        self.alive = True
        threading.Thread(target=self._send_loop, name="reader-send", daemon=True).start()
        threading.Thread(target=self._receive_loop, name="reader-receive", daemon=True).start()

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def submit(self, seq: int, messages: Sequence[Message], fut: Future) -> None:
        messages = list(messages)
        with self._lock:
            alive = self.alive
            if alive:
                self._pending[seq] = (fut, messages)
        if not alive:
            fut.set_result(self.local.generate(messages))
            return
        self._requests.put((seq, messages))

    def _send_loop(self) -> None:
        while (item := self._requests.get()) is not None:
            try:
                self._out.send(item)
            except (OSError, ValueError):  # the worker is gone: the receiver answers the rest
                break
        self._out.close()

    def _receive_loop(self) -> None:
        while True:
            try:
                seq, reply = self._in.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                fut, _ = self._pending.pop(seq, (None, None))
            if fut is not None:
                fut.set_result(reply)
        with self._lock:
            self.alive = False
            orphans, self._pending = list(self._pending.values()), {}
        self.proc.wait()
        self._in.close()
        for fut, messages in orphans:  # same reader, same settings: the same replies
            fut.set_result(self.local.generate(messages))

    def close(self) -> None:
        """Close the request pipe once the queued prompts are sent (then the worker exits)."""
        self._requests.put(None)


def _widen(fd: int) -> None:
    """Let a pipe hold about a megabyte (Linux), so queued prompts do not block the sender."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[union-attr]
    except (AttributeError, OSError):  # no fcntl, or no F_SETPIPE_SZ (not Linux)
        pass


class ReaderPool:
    """``size`` reader worker processes (the embedded reader's) behind :meth:`submit`.

    Attributes:
        restarts: workers started in place of dead ones (at most :data:`MAX_RESTARTS`).

    Args:
        factory: makes the reader (:data:`ReaderFactory`); it must pickle, since each worker
            gets a copy (``functools.partial`` of a module-level class does), and it also
            makes the reader in this process that answers what a dead worker left.
        size: worker processes (>= 1), started at once.

    Raises:
        ValueError: ``size`` < 1.
        TypeError: a factory that does not pickle (a lambda, a local function).
    """

    def __init__(self, factory: ReaderFactory, size: int):
        if int(size) < 1:
            raise ValueError(f"a reader pool needs at least one worker, got {size!r}")
        try:  # fail here, not in a sending thread with the calls left waiting
            pickle.dumps(factory)
        except Exception as exc:
            raise TypeError(f"a reader pool's factory must pickle, got {factory!r}: {exc}") from exc
        self.factory = factory
        self.size = int(size)
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._local = _Local(factory)
        self.restarts = 0
        self._workers = [_Worker(self._local) for _ in range(self.size)]
        self._finalizer = weakref.finalize(self, _close_all, self._workers)

    @property
    def outstanding(self) -> int:
        """Calls sent and not answered yet."""
        return sum(w.outstanding for w in self._workers)

    def submit(self, messages: Sequence[Message]) -> Future:
        """Queue one call on the least busy worker; the future's result is its :class:`Reply`."""
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        with self._lock:
            for i, w in enumerate(self._workers):
                if not w.alive and self.restarts < MAX_RESTARTS:
                    self.restarts += 1
                    self._workers[i] = _Worker(self._local)
            live = [w for w in self._workers if w.alive]
            worker = min(live, key=lambda w: w.outstanding) if live else None
            if worker is not None:
                worker.submit(next(self._seq), messages, fut)
        if worker is None:  # no worker left to start: answer here
            fut.set_result(self._local.generate(list(messages)))
        return fut

    def close(self) -> None:
        """Let the workers exit (idempotent)."""
        self._finalizer()


def _close_all(workers: list[_Worker]) -> None:
    for w in workers:
        w.close()


def serve(read_fd: int, write_fd: int) -> None:
    """Answer a pool's calls in this process: read the factory, then ``(seq, messages)``."""
    # Ctrl-C reaches the whole process group: the engine handles it (cancel), and this worker
    # exits when the engine closes its pipe, without a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    try:
        factory = inbox.recv()  # unpickling it imports the reader's module
    except (EOFError, OSError):
        return
    reader = factory()
    while True:
        try:
            seq, messages = inbox.recv()
        except (EOFError, OSError):
            return
        outbox.send((seq, reader.generate(messages)))
