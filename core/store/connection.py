"""Opening the store: the lock-retry loop, the in-memory hub files attach to, transactions.

DuckDB allows one read-write *process* or many read-only processes, never both, so writers
use short-lived connections and every open retries while another process holds the lock.
:class:`StoreBase` is the part of :class:`core.store.Store` that opens connections; the other
parts (datasets, runs, records, analysis) build on it.
"""

from __future__ import annotations

import atexit
import difflib
import itertools
import os
import random
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import duckdb

import core.store.schema as schema  # module attributes: read at call time (tests patch them)

__all__ = [
    "DEFAULT_DB",
    "StoreBase",
    "StoreError",
    "default_db_path",
    "in_transaction",
    "unreadable_store_error",
]

DEFAULT_DB = Path("data") / "evidence.duckdb"

_T = TypeVar("_T")


class StoreError(RuntimeError):
    """The store cannot be used as asked (newer schema, lock held too long, name taken)."""


#: Settings of every connection: DuckDB never loads or downloads an extension by itself (given
#: a SQLite file as the store it would otherwise fetch its SQLite reader from the network).
_CONFIG = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    # no replacement scans: a table missing from an older store is a CatalogException, never
    # a Python variable of the same name found in a caller's frame (`annotations` is one
    # in every module with `from __future__ import annotations`)
    "python_enable_replacements": False,
}

#: A DuckDB file: a 4096-byte main header with ``DUCK`` at byte 8, then two 4096-byte database
#: headers (the one with the valid checksum and the higher iteration is current), then
#: ``block_count`` blocks of ``block_alloc_size`` bytes.
_MAGIC = b"DUCK"
_HEADER_SIZE = 4096
_SQLITE_MAGIC = b"SQLite format 3\x00"

#: What DuckDB says of a file that is damaged or not a DuckDB database (checked in this order).
_UNREADABLE = (
    ("not a valid DuckDB database file", "not a DuckDB database file"),
    ("Corrupt database file", "corrupt: a block fails its checksum"),
    ("Could not read enough bytes", "truncated: a block lies past the end of the file"),
    ("Is a directory", "a directory"),
)

#: Path -> (inode, size, mtime) at which the file was last found whole (not checked again).
_CHECKED: dict[str, tuple[int, int, int]] = {}


def _unreadable(path: Path, reason: str) -> StoreError:
    """The one error for a store file that cannot be read as an evidence store."""
    return StoreError(f"store {path}: not a readable evidence store ({reason})")


def unreadable_store_error(path: str | os.PathLike[str], exc: BaseException) -> StoreError | None:
    """The :class:`StoreError` for ``exc`` when it says the store file is damaged, else None.

    Args:
        path: the store file (named in the message).
        exc: an error raised while opening or reading the store.
    """
    if not isinstance(exc, duckdb.Error):
        return None
    text = str(exc)
    for needle, reason in _UNREADABLE:
        if needle in text:
            if reason == "not a DuckDB database file" and _size(Path(path)) == 0:
                reason = "an empty file of 0 bytes; delete it to start a new store"
            return _unreadable(Path(path), reason)
    return None


def missing_store_message(path: str | os.PathLike[str]) -> str:
    """One line for a store path that does not exist.

    It names the path, and the closest existing ``.duckdb`` file of its folder when there is
    one (or says that the folder does not exist either).
    """
    target = Path(path).expanduser()
    folder = target.parent
    if not folder.is_dir():
        return f"no such store: {target} (its folder {folder} does not exist; nothing created)"
    try:
        near = sorted(p.name for p in folder.glob("*.duckdb") if p.is_file())
    except OSError:
        near = []
    best = difflib.get_close_matches(target.name, near, n=1, cutoff=0.0)
    hint = f"; the closest in that folder is {folder / best[0]}" if best else ""
    return f"no such store: {target}{hint} (nothing created)"


def _size(path: Path) -> int:
    """The file's size in bytes (-1 when it cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _check_file(path: Path) -> None:
    """Refuse a store file that is plainly not a readable DuckDB store, before DuckDB opens it.

    Refused: a directory or device; a SQLite database; a file whose bytes 8-11 are neither
    ``DUCK`` nor zeros (all zeros: the first bytes of a file DuckDB is creating); a file cut
    short in the middle of a block. DuckDB itself writes, extends and truncates the file by
    whole blocks, and writes the header after the blocks it names, so a file shorter than
    ``3 * 4096 + block_count * block_alloc_size`` bytes (the current header's numbers) whose
    length is not a whole number of blocks was cut by something else. (One shorter by whole
    blocks can be DuckDB's own state: it drops free blocks at the end before it writes the
    new header; a cut on a block boundary is reported when a missing block is read.) The
    header is read before the size, so a checkpoint of another process between the two
    cannot look like a cut; and a file that looks cut is looked at again (up to
    :data:`_CUT_LOOKS` times, :data:`_CUT_PAUSE_S` apart) and refused only when nothing of it
    moved between two looks: a process writing it (a block half written after DuckDB dropped
    the free blocks at its end) changes its size or headers, and one still moving after the
    last look is left to DuckDB. A missing file passes. The size check is made once per
    (path, inode, size, mtime) in this process; one read of 12 KiB.

    Raises:
        StoreError: ``not a readable evidence store (...)``.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _unreadable(path, exc.strerror or type(exc).__name__) from exc
    if stat.S_ISDIR(st.st_mode):
        raise _unreadable(path, "a directory")
    if not stat.S_ISREG(st.st_mode):
        raise _unreadable(path, "not a regular file")
    seen: tuple[bytes, tuple[int, int, int]] | None = None
    for _ in range(_CUT_LOOKS):
        head, st = _read_head(path)
        if head.startswith(_SQLITE_MAGIC):
            raise _unreadable(path, "a SQLite database")
        if len(head) >= 12 and head[8:12] not in (_MAGIC, bytes(4)):
            raise _unreadable(path, "not a DuckDB database file")
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if _CHECKED.get(str(path)) == key:
            return
        cut = _cut(head, st.st_size)
        if cut is None:
            _CHECKED[str(path)] = key
            return
        if (head, key) == seen:  # nothing moved since the last look: cut for good
            raise _unreadable(path, cut)
        # another process may be writing the file (a block half written after the free
        # blocks at its end were dropped): a cut file stays as it is, a written one moves
        seen = (head, key)
        time.sleep(_CUT_PAUSE_S)


#: Looks at a file that seems cut before it is called so (see :func:`_check_file`) ...
_CUT_LOOKS = 4
#: ... this long apart.
_CUT_PAUSE_S = 0.05


def _read_head(path: Path) -> tuple[bytes, os.stat_result]:
    """The file's first three headers, then its size (read in that order)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(3 * _HEADER_SIZE)
            return head, os.fstat(fh.fileno())
    except OSError as exc:
        raise _unreadable(path, exc.strerror or type(exc).__name__) from exc


def _cut(head: bytes, size: int) -> str | None:
    """Why a file of ``size`` bytes starting with ``head`` looks cut short, or None."""
    # A file at least as long as either header asks is whole; only a shorter one has its
    # headers' checksums computed (~0.2 ms), to know which header is current.
    headers = [_db_header(head, off) for off in (_HEADER_SIZE, 2 * _HEADER_SIZE)]
    if not any(h is not None and size < h[1] for h in headers):
        return None
    valid = [
        h
        for h, off in zip(headers, (1, 2), strict=True)
        if h is not None and _header_ok(head, off * _HEADER_SIZE)
    ]
    if not valid:
        return None
    _, needed, alloc = max(valid)
    body = size - 3 * _HEADER_SIZE
    if size < needed and (body < 0 or body % alloc):
        return f"truncated: {size} bytes, its header needs {needed}"
    return None


def _db_header(head: bytes, off: int) -> tuple[int, int, int] | None:
    """(iteration, bytes the file needs, block size) of the database header at ``off``.

    None when it is missing or of a layout this check does not know.
    """
    if len(head) < off + _HEADER_SIZE:
        return None
    iteration, _meta, _free, count, alloc = struct.unpack_from("<5Q", head, off + 8)
    if not 4096 <= alloc <= 1 << 30 or count > 1 << 40:
        return None
    return iteration, 3 * _HEADER_SIZE + count * alloc, alloc


def _header_ok(head: bytes, off: int) -> bool:
    """Whether the database header at ``off`` matches its checksum."""
    block = head[off : off + _HEADER_SIZE]
    return struct.unpack_from("<Q", block)[0] == _checksum(block[8:])


def _checksum(data: bytes) -> int:
    """DuckDB's checksum of a header (XOR of each 8-byte word times a constant, 5381 seed)."""
    result = 5381
    for (word,) in struct.iter_unpack("<Q", data[: len(data) // 8 * 8]):
        result ^= (word * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return result


#: Connections of this process open on each store file (by real path); see :func:`_held`.
_OPEN: dict[str, int] = {}
_OPEN_LOCK = threading.Lock()


@contextmanager
def _held(path: Path) -> Iterator[None]:
    """Count a connection of this process on ``path``; check the file first if none is open.

    DuckDB's file lock is a POSIX record lock: it belongs to the process, and closing *any*
    descriptor of the file releases it. Reading the file while a connection of this process
    holds it would let another process open it beside a writer. So :func:`_check_file` reads
    the bytes only while no connection of this process is open on the file, under the lock
    every open takes first. (With one open, the file is a store DuckDB has already read.)
    """
    key = os.path.realpath(path)
    with _OPEN_LOCK:
        if not _OPEN.get(key):
            _check_file(path)
        _OPEN[key] = _OPEN.get(key, 0) + 1
    try:
        yield
    finally:
        with _OPEN_LOCK:
            left = _OPEN[key] - 1
            if left:
                _OPEN[key] = left
            else:
                del _OPEN[key]


def default_db_path() -> Path:
    """The store path: env ``EVIDENCE_DB`` if set, else ``data/evidence.duckdb``."""
    return Path(os.environ.get("EVIDENCE_DB") or DEFAULT_DB)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's current database holds any table (asked of version-0 files)."""
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()  # not fetchone: nothing stays pending on ``con``
    return bool(rows and rows[0][0])


def _retry_on_lock(
    attempt: Callable[[], _T],
    path: Path,
    lock_timeout: float,
    busy: tuple[type[duckdb.Error], ...] = (duckdb.IOException,),
) -> _T:
    """``attempt()``, made again while another process holds the file lock.

    Also while another thread of this process holds the file open in the other mode
    (read-only against read-write), which DuckDB refuses until that connection closes.

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
        except (*busy, duckdb.ConnectionException) as exc:
            if isinstance(exc, duckdb.ConnectionException) and not isinstance(exc, busy):
                # another thread of this process has the file open in the other mode (a
                # page reading while this one writes): DuckDB refuses a second configuration
                # of an open file until that connection closes, which it does in moments
                if "different configuration" not in str(exc):
                    raise
                locked = True
            else:
                locked = not isinstance(exc, duckdb.IOException) or _is_lock_error(exc)
            if not locked:
                unreadable = unreadable_store_error(path, exc)
                if unreadable is not None:
                    raise unreadable from exc
                raise StoreError(f"{path}: cannot open store: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{path}: store is locked by another process (waited {lock_timeout:.0f} s)"
                ) from exc
            # Short, jittered waits: a writing run leaves the file unlocked for ~0.1 s
            # between batches (core.execution.engine.MIN_GAP_S); longer sleeps would miss those
            # gaps.
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
            _HUB = duckdb.connect(":memory:", config=_CONFIG)
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

        Raises:
            StoreError: the store stayed locked past ``lock_timeout``, or the file is not a
                readable evidence store (damaged, truncated, another format); an error of
                DuckDB inside the block that says the file is damaged becomes this one too.
        """
        self._prepare(read_only, self.connect)
        with _held(self.path):
            con = _retry_on_lock(
                lambda: duckdb.connect(str(self.path), read_only=read_only, config=_CONFIG),
                self.path,
                self.lock_timeout,
            )
            try:
                self._upgrade(con, read_only)
                yield con
            except duckdb.Error as exc:
                unreadable = unreadable_store_error(self.path, exc)
                if unreadable is not None:
                    raise unreadable from exc
                raise
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
            with _held(self.path):  # detached before the count drops
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
                except BaseException as exc:
                    _detach(con, alias, quiet=True)  # the first error is the one to report
                    unreadable = unreadable_store_error(self.path, exc)
                    if unreadable is not None:
                        raise unreadable from exc
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
        """Before an open: a read-only open of a missing file creates an empty store first.

        (A command that only reads refuses a missing path before it opens anything:
        :func:`core.commands.open_store` with :func:`missing_store_message`.)
        """
        if read_only and not self.path.exists():
            with opener(read_only=False):
                pass
        if not read_only:
            try:  # a folder under a file, or one this user may not write: one line, named
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                why = exc.strerror or str(exc)
                raise StoreError(
                    f"store {self.path}: cannot make its folder {self.path.parent} ({why})"
                ) from None
            if not self.path.exists() and not os.access(self.path.parent, os.W_OK | os.X_OK):
                raise StoreError(
                    f"store {self.path}: its folder {self.path.parent} is not "
                    "writable; nothing created"
                )

    def _upgrade(self, con: duckdb.DuckDBPyConnection, read_only: bool) -> None:
        """Check the schema version; on a read-write connection, migrate an older one."""
        version = schema.stored_version(con)
        if version == 0 and _has_tables(con):
            raise _unreadable(self.path, "a DuckDB database without the evidence-store tables")
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this program "
                f"supports ({schema.SCHEMA_VERSION}); upgrade the program"
            )
        if not read_only and version < schema.SCHEMA_VERSION:
            with in_transaction(con):
                schema.apply_migrations(con, version)
