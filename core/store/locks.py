"""One process per run name: an OS-level lock file beside the store.

Two processes running the same run at once would both call the model for every missing call,
and the second to write would hit the first one's rows. So a run holds the lock file
``<store>.locks/<run>.lock`` (``fcntl.flock``, exclusive, never waited for) from its start to
its end, with the holder's pid written in it. The kernel drops the lock with its process,
however it ends (``kill -9`` included), so a crashed run never blocks its resume; nothing else
has to clean up. The lock files themselves stay (a few bytes each, emptied on release).

Inside one process the lock belongs to the thread that took it: the same thread may take it
again (the CLI takes it before it opens the backend, :func:`core.execution.runs.open_run` and
:func:`core.execution.engine.execute` inside it), another thread is refused like another process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.store.connection import StoreError

__all__ = ["RunBusyError", "hold_run", "holder", "lock_path"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Longest run name used as is in a lock file's name (longer ones are cut and hashed).
_MAX_NAME = 80
#: Seconds a refused lock keeps being tried while its file names no live process: a holder
#: that has just taken it and not yet written its pid, or one releasing it.
_SETTLE_S = 0.5


class RunBusyError(StoreError):
    """The run is running in another process (or another thread of this one).

    Attributes:
        run_id: the run.
        pid: the process holding it (None when it could not be read).
        path: the lock file.
    """

    def __init__(self, run_id: str, pid: int | None, path: Path):
        self.run_id, self.pid, self.path = run_id, pid, path
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"run '{run_id}' is already running in {who} (lock {path}); wait for it to end or "
            "stop it, then rerun to continue"
        )


def lock_path(db: str | os.PathLike[str], run_id: str) -> Path:
    """The lock file of run ``run_id`` of the store ``db``: ``<db>.locks/<run>.lock``.

    A name with characters outside ``A-Za-z0-9._-`` (or a long one) is sanitized and gets a
    hash of the exact name, so two runs never share a lock file.
    """
    db = Path(os.path.abspath(db))
    base = _SAFE.sub("_", run_id).strip(".")
    if base != run_id or len(base) > _MAX_NAME or not base:
        digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:12]
        base = f"{base[:_MAX_NAME]}~{digest}"
    return db.with_name(db.name + ".locks") / f"{base}.lock"


@dataclass
class _Held:
    fd: int
    thread: int
    depth: int


_HELD: dict[Path, _Held] = {}
_HELD_LOCK = threading.Lock()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OSError:
        return False
    return True


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _try_lock(path: Path) -> tuple[int | None, int | None]:
    """``(fd, None)`` with the lock taken, or ``(None, holder pid)`` when it is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        pid = _read_pid(fd)
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None, pid
        raise
    return fd, None


def _acquire(path: Path, run_id: str) -> int:
    """Take the lock file, or raise :class:`RunBusyError` naming its holder."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        fd, pid = _try_lock(path)
        if fd is not None:
            break
        if (pid is not None and _alive(pid)) or time.monotonic() >= deadline:
            raise RunBusyError(run_id, pid, path)
        time.sleep(0.01)  # being taken (no pid yet) or released (emptied): look again
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # no pid left behind: the file names no holder
    os.close(fd)  # closing the only descriptor drops the lock


@contextlib.contextmanager
def hold_run(db: str | os.PathLike[str], run_id: str) -> Iterator[Path]:
    """Hold run ``run_id``'s lock for the ``with`` block (at once, or not at all).

    The thread holding it may take it again inside (it is released when the outermost
    block ends). Yields the lock file's path.

    Raises:
        RunBusyError: another process, or another thread of this one, holds it.
    """
    path = lock_path(db, run_id)
    me = threading.get_ident()
    with _HELD_LOCK:
        held = _HELD.get(path)
        if held is not None:
            if held.thread != me:
                raise RunBusyError(run_id, os.getpid(), path)
            held.depth += 1
        else:
            held = _HELD[path] = _Held(_acquire(path, run_id), me, 1)
    try:
        yield path
    finally:
        with _HELD_LOCK:
            held.depth -= 1
            if held.depth == 0:
                del _HELD[path]
                _release(held.fd)


def holder(db: str | os.PathLike[str], run_id: str) -> int | None:
    """The pid of the process running run ``run_id`` now, or None when none holds its lock.

    Looks without taking the lock for longer than the look itself (a shared, non-blocking
    ``flock`` released at once); 0 when it is held but its holder has not written its pid
    yet. A run stored as ``running`` whose lock nobody holds was interrupted (its process
    ended without finishing it: ``kill -9``, a crash, a power cut).
    """
    path = lock_path(db, run_id)
    with _HELD_LOCK:
        if path in _HELD:
            return os.getpid()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # never run here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return _read_pid(fd) or 0
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
