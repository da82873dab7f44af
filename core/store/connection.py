"""Opening the store: the lock-retry loop, the in-memory hub files attach to, transactions.

DuckDB allows one read-write *process* or many read-only processes, never both, so writers
use short-lived connections and every open retries while another process holds the lock.
:class:`StoreBase` is the part of :class:`core.store.Store` that opens connections; the other
parts (datasets, runs, records, analysis) build on it.
"""

from __future__ import annotations

import atexit
import itertools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import duckdb

from core.store import schema

__all__ = [
    "DEFAULT_DB",
    "StoreBase",
    "StoreError",
    "default_db_path",
    "in_transaction",
]

DEFAULT_DB = Path("data") / "evidence.duckdb"

_T = TypeVar("_T")


class StoreError(RuntimeError):
    """The store cannot be used as asked (newer schema, lock held too long, name taken)."""


def default_db_path() -> Path:
    """The store path: env ``EVIDENCE_DB`` if set, else ``data/evidence.duckdb``."""
    return Path(os.environ.get("EVIDENCE_DB") or DEFAULT_DB)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _retry_on_lock(
    attempt: Callable[[], _T],
    path: Path,
    lock_timeout: float,
    busy: tuple[type[duckdb.Error], ...] = (duckdb.IOException,),
) -> _T:
    """``attempt()``, made again while another process holds the file lock.

    Args:
        attempt: opens or attaches the file.
        path: the file (named in the errors).
        lock_timeout: seconds to keep trying.
        busy: the errors that may mean "locked"; an ``IOException`` does only when its text
            says so, any other type listed always does.

    Raises:
        StoreError: the file stayed locked past ``lock_timeout``, or cannot be opened.
    """
    deadline = time.monotonic() + lock_timeout
    delay = 0.02
    while True:
        try:
            return attempt()
        except busy as exc:
            locked = not isinstance(exc, duckdb.IOException) or _is_lock_error(exc)
            if not locked:
                raise StoreError(f"{path}: cannot open store: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{path}: store is locked by another process (waited {lock_timeout:.0f} s)"
                ) from exc
            # Short, jittered waits: a writing run leaves the file unlocked for ~0.1 s
            # between batches (core.engine.MIN_GAP_S); longer sleeps would miss those gaps.
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.05)


@contextmanager
def in_transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction on ``con``: committed on success, rolled back on any exception.

    Args:
        con: a read-write connection with no transaction open.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (e.g. the disk is full) has already ended the transaction:
        # the rollback then has nothing to do, and the first error is the one to report.
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


# The process's in-memory DuckDB that store files are attached to (Store.attached): creating
# a DuckDB database costs ~15-20 ms (its catalog of built-in functions), attaching a file to
# one that exists ~1-3 ms, and the engine opens the store once per write batch.
_HUB: duckdb.DuckDBPyConnection | None = None
_HUB_LOCK = threading.Lock()
_ALIASES = itertools.count()


def _hub_cursor() -> duckdb.DuckDBPyConnection:
    """A new connection to the process's in-memory DuckDB (created on first use)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None:
            _HUB = duckdb.connect(":memory:")
            atexit.register(_drop_hub)  # closed before the interpreter tears duckdb down
        return _HUB.cursor()


def _detach(con: duckdb.DuckDBPyConnection, alias: str, quiet: bool = False) -> None:
    """Detach (checkpoint and unlock) an attached store; if that fails, drop the hub."""
    try:
        con.execute("USE memory")
        con.execute(f"DETACH {alias}")
    except duckdb.Error:
        _drop_hub()  # never leave the file attached (locked) to this process
        if not quiet:
            raise


def _drop_hub() -> None:
    """Close the in-memory DuckDB, and with it every file still attached to it."""
    global _HUB
    with _HUB_LOCK:
        hub, _HUB = _HUB, None
    if hub is not None:
        with suppress(duckdb.Error):
            hub.close()


class StoreBase:
    """A DuckDB store file. Cheap to create; connections are opened per operation.

    Args:
        path: the DuckDB file (created with its parent folder on the first write).
        lock_timeout: seconds to keep retrying while another process holds the file lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, lock_timeout: float = 30.0):
        self.path = Path(path) if path is not None else default_db_path()
        self.lock_timeout = lock_timeout

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open a connection (migrating the schema on a read-write open), retrying on locks.

        A read-only open of a file that does not exist yet creates an empty store first.
        """
        self._prepare(read_only, self.connect)
        con = _retry_on_lock(
            lambda: duckdb.connect(str(self.path), read_only=read_only),
            self.path,
            self.lock_timeout,
        )
        try:
            self._upgrade(con, read_only)
            yield con
        finally:
            con.close()

    @contextmanager
    def attached(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Like :meth:`connect`, about ten times cheaper to open: the engine's connections.

        The file is attached to this process's in-memory DuckDB instead of opened as a
        database of its own (same file lock, same retries while another process holds it,
        same schema check or migration; the file is detached, checkpointed and unlocked on
        exit). While it is attached, opening the same file with :meth:`connect` in this
        process fails, so do not nest the two on one file.

        Raises:
            StoreError: the store stayed locked past ``lock_timeout``, or cannot be opened.
        """
        self._prepare(read_only, self.attached)
        con = _hub_cursor()
        alias = f"store_{next(_ALIASES)}"
        mode = " (READ_ONLY)" if read_only else ""
        try:
            _retry_on_lock(
                lambda: con.execute(f"ATTACH ? AS {alias}{mode}", [str(self.path)]),
                self.path,
                self.lock_timeout,
                # ResourceInUse: this process has the file open already (another thread).
                busy=(duckdb.IOException, duckdb.ResourceInUseException),
            )
            try:
                con.execute(f"USE {alias}")
                self._upgrade(con, read_only)
                yield con
            except BaseException:
                _detach(con, alias, quiet=True)  # the first error is the one to report
                raise
            _detach(con, alias)
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside one transaction.

        Committed on success; on any exception rolled back, so the store is exactly as before.
        """
        with self.connect() as con, in_transaction(con):
            yield con

    @contextmanager
    def write_batch(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """:meth:`transaction` on an :meth:`attached` connection (the engine's batches).

        Committed on success; on any exception rolled back, so the store is exactly as before.
        """
        with self.attached() as con, in_transaction(con):
            yield con

    @contextmanager
    def _using(self, con: duckdb.DuckDBPyConnection | None) -> Iterator[duckdb.DuckDBPyConnection]:
        """``con`` itself, or a read-only connection of its own when None."""
        if con is not None:
            yield con
        else:
            with self.connect(read_only=True) as own:
                yield own

    def schema_version(self) -> int:
        """The schema version of the file (migrating it first if it is older)."""
        with self.connect() as con:
            return schema.stored_version(con)

    def _prepare(
        self,
        read_only: bool,
        opener: Callable[..., AbstractContextManager[duckdb.DuckDBPyConnection]],
    ) -> None:
        """Before an open: a read-only open of a missing file creates an empty store first."""
        if read_only and not self.path.exists():
            with opener(read_only=False):
                pass
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def _upgrade(self, con: duckdb.DuckDBPyConnection, read_only: bool) -> None:
        """Check the schema version; on a read-write connection, migrate an older one."""
        version = schema.stored_version(con)
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this program "
                f"supports ({schema.SCHEMA_VERSION}); upgrade the program"
            )
        if not read_only and version < schema.SCHEMA_VERSION:
            with in_transaction(con):
                schema.apply_migrations(con, version)
