"""Stores built on different machines, combined into one; every table exported as Parquet.

:func:`export_store` writes each table of a store to ``DIR/<table>.parquet`` (DuckDB
``COPY ... TO ... (FORMAT parquet)``) and ``DIR/manifest.json``: the schema version, each
table's rows, file and primary key, and each dataset's fingerprint.

:func:`merge_stores` adds the content of one or more stores to a target store (new or
existing) in one transaction of the target, so either everything is merged or nothing is.
Tables are found in the catalog (``duckdb_tables()``) and their primary keys in
``duckdb_constraints()``, so a table this module has never heard of merges too:

- **Datasets** (``datasets``, ``instances``, ``passages``): a dataset is the same in two stores
  when its fingerprint is (:meth:`core.store.Store.content_hash`: SHA-256 of every instance
  and passage field in a fixed order); the same name with another fingerprint is refused
  (one line naming the dataset and both files, whatever ``on_conflict`` says). The merge
  compares those fields row for row in DuckDB (equal rows, equal fingerprint) and hashes
  only a dataset it refuses, for the message.
- **Runs**: every table whose primary key holds ``run_id`` (runs, predictions, scores,
  judgments, ...) is merged per run. A run stored in both with the same content (every such
  table's rows for it equal, timestamps aside) is counted once; with other content it is a
  collision: refused (``on_conflict="refuse"``, one line naming the run) or left as the
  target has it (``"skip"``, counted).
- **Other tables with a primary key**: a row per key; equal rows (timestamps aside) are
  counted once; another row under a stored key is a collision as above (named by table and
  key). The caches (``response_cache``, ``embeddings``) keep the first row of a key, silently.
- **Tables without a primary key** get the rows they do not hold yet. ``schema_version`` and
  ``data_version`` are the target's own; the merge bumps the data version of the datasets
  and runs it adds (:func:`core.store.schema.bump_data_version`).

Every input must have this program's schema version (one line otherwise); a table the target
lacks is created from the input's columns and primary key. Identifiers read from a catalog
must be plain names (letters, digits, underscores) before they enter SQL; values are
parameters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from core.names import ellipsize
from core.store import Store
from core.store.connection import StoreError, in_transaction
from core.store.schema import (
    INSTANCE_COLUMNS,
    PASSAGE_COLUMNS,
    SCHEMA_VERSION,
    bump_data_version,
    stored_version,
)

__all__ = ["ON_CONFLICT", "MergeResult", "TableCount", "export_store", "merge_stores"]

#: What a collision does: ``refuse`` (nothing merged) or ``skip`` (keep the target's).
ON_CONFLICT = ("refuse", "skip")
#: The target's own bookkeeping, never merged.
_OWN = ("schema_version", "data_version")
#: The tables a dataset fingerprint covers (with the header row of the dataset).
_DATASET_TABLES = ("datasets", "instances", "passages")
#: Caches: a key's first row is kept, another row under it is no collision.
_CACHES = ("response_cache", "embeddings")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TYPE = re.compile(r"^[A-Za-z0-9_\[\]\(\), ]+$")
_DEFAULT = re.compile(r"^[A-Za-z0-9_()' .]*$")


@dataclass(slots=True)
class TableCount:
    """What a merge did with one table's rows.

    Attributes:
        rows: rows read from the inputs.
        added: rows inserted into the target.
        same: rows the target already held, equal (counted once).
        skipped: rows left out as collisions (``on_conflict="skip"``).
    """

    rows: int = 0
    added: int = 0
    same: int = 0
    skipped: int = 0


@dataclass(slots=True)
class MergeResult:
    """The outcome of :func:`merge_stores`.

    Attributes:
        target: the target store.
        inputs: the input stores, in merge order.
        tables: per table, its counts.
        datasets_added: datasets the target did not hold.
        runs_added: runs the target did not hold.
        runs_same: runs held already with the same content.
        runs_skipped: colliding runs left out (``on_conflict="skip"``).
        rows_skipped: colliding rows of other tables left out, as ``table: key``.
    """

    target: str
    inputs: list[str]
    tables: dict[str, TableCount] = field(default_factory=dict)
    datasets_added: list[str] = field(default_factory=list)
    runs_added: list[str] = field(default_factory=list)
    runs_same: list[str] = field(default_factory=list)
    runs_skipped: list[str] = field(default_factory=list)
    rows_skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tables as ``{name: {rows, added, same, skipped}}``)."""
        return {
            "target": self.target,
            "inputs": list(self.inputs),
            "tables": {
                k: {"rows": v.rows, "added": v.added, "same": v.same, "skipped": v.skipped}
                for k, v in sorted(self.tables.items())
            },
            "datasets_added": list(self.datasets_added),
            "runs_added": list(self.runs_added),
            "runs_same": list(self.runs_same),
            "runs_skipped": list(self.runs_skipped),
            "rows_skipped": list(self.rows_skipped),
        }


# --------------------------------------------------------------------------- catalog
@dataclass(frozen=True, slots=True)
class _Table:
    name: str
    columns: tuple[tuple[str, str, bool, str | None], ...]  # name, type, nullable, default
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self.columns)

    @property
    def content(self) -> tuple[str, ...]:
        """The columns compared for equality: all but timestamps (when a row was written)."""
        return tuple(c[0] for c in self.columns if not c[1].startswith("TIMESTAMP"))


def _checked(kind: str, value: str, pattern: re.Pattern[str], where: str) -> str:
    if not pattern.match(value):
        raise StoreError(f"{where}: {kind} {value!r} is not a plain name; not merged")
    return value


def _catalog(con: duckdb.DuckDBPyConnection, database: str, where: str) -> dict[str, _Table]:
    """The tables of an open or attached database: columns and primary key, in order."""
    cols = con.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
        "ORDER BY table_name, column_index",
        [database],
    ).fetchall()
    keys = con.execute(
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE database_name = ? AND schema_name = 'main' AND constraint_type = 'PRIMARY KEY'",
        [database],
    ).fetchall()
    views = {
        r[0]
        for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE database_name = ?", [database]
        ).fetchall()
    }
    out: dict[str, list[Any]] = {}
    for table, column, dtype, nullable, default in cols:
        if table in views:
            continue
        _checked("table", table, _IDENT, where)
        _checked("column", column, _IDENT, where)
        _checked("column type", dtype, _TYPE, where)
        out.setdefault(table, []).append((column, dtype, bool(nullable), default))
    pk = {t: tuple(c) for t, c in keys}
    return {t: _Table(t, tuple(c), pk.get(t, ())) for t, c in out.items()}


def _create(con: duckdb.DuckDBPyConnection, t: _Table, where: str) -> None:
    """Create table ``t`` in the target from an input's columns and primary key."""
    parts = []
    for col, dtype, nullable, default in t.columns:
        text = f"{col} {dtype}" + ("" if nullable else " NOT NULL")
        if default is not None:
            text += " DEFAULT " + _checked("column default", str(default), _DEFAULT, where)
        parts.append(text)
    if t.key:
        parts.append(f"PRIMARY KEY ({', '.join(t.key)})")
    columns = ", ".join(parts)
    table = t.name
    con.execute(f"CREATE TABLE {table} ({columns})")


# --------------------------------------------------------------------------- export
def _export(
    con: duckdb.DuckDBPyConnection, out: Path, fingerprints: dict[str, str]
) -> dict[str, Any]:
    """Write every table of the store open on ``con`` as ``out/<table>.parquet``, and a manifest.

    Args:
        con: a connection whose current database is the store.
        out: the folder (created; files of the same names are replaced).
        fingerprints: each dataset's content hash (:meth:`core.store.Store.content_hash`).

    Returns:
        The manifest, as written to ``out/manifest.json``: ``schema_version``, ``tables``
        (per table ``file``, ``rows``, ``primary_key``) and ``datasets`` (name -> fingerprint).
    """
    out.mkdir(parents=True, exist_ok=True)
    # all or nothing: the files are written to a folder beside ``out`` and moved in at the
    # end, the manifest last; a failure (disk full) leaves ``out`` as it was
    staging = out.parent / f".{out.name}.{os.getpid()}.export"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        database = con.execute("SELECT current_database()").fetchall()[0][0]
        tables = _catalog(con, database, str(out))
        listing: dict[str, Any] = {}
        for t in sorted(tables.values(), key=lambda x: x.name):
            table = t.name
            order = ", ".join(t.key or t.names)
            path = staging / f"{table}.parquet"
            con.execute(
                f"COPY (SELECT * FROM {table} ORDER BY {order}) TO ? (FORMAT parquet)", [str(path)]
            )
            rows = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            listing[table] = {"file": path.name, "rows": int(rows), "primary_key": list(t.key)}
        manifest = {
            "schema_version": stored_version(con),
            "tables": listing,
            "datasets": dict(sorted(fingerprints.items())),
        }
        text = json.dumps(manifest, indent=2) + "\n"
        (staging / "manifest.json").write_text(text, encoding="utf-8")
        for entry in listing.values():
            os.replace(staging / entry["file"], out / entry["file"])
        os.replace(staging / "manifest.json", out / "manifest.json")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


# --------------------------------------------------------------------------- merge
class _OtherContent(Exception):
    """A dataset of the same name with other content in ``path`` than in ``origin``."""

    def __init__(self, name: str, path: str, origin: str):
        super().__init__(name, path, origin)
        self.name, self.path, self.origin = name, path, origin


def _same_content(con: duckdb.DuckDBPyConnection, a: str, b: str, dataset: str) -> bool:
    """Whether a dataset's instances and passages are equal in two databases.

    ``a`` and ``b``: ``""`` for the current one, else an attached alias. Compared by DuckDB
    on every field :meth:`core.store.Store.content_hash` hashes (equal rows, equal hash):
    the same number of rows on each side, each matched by its primary key to an equal row
    (a join on the key: several times cheaper than ``EXCEPT ALL`` over every column).
    """
    for table, cols, key in (
        ("instances", INSTANCE_COLUMNS, ("dataset_id", "instance_id")),
        ("passages", PASSAGE_COLUMNS, ("dataset_id", "instance_id", "passage_id")),
    ):
        table_a, table_b = f"{a}.{table}" if a else table, f"{b}.{table}" if b else table
        key_match = " AND ".join(f"x.{k} = y.{k}" for k in key)
        cols_a = ", ".join(f"x.{c}" for c in cols)
        cols_b = ", ".join(f"y.{c}" for c in cols)
        n_one, n_two, n_same = con.execute(
            f"SELECT (SELECT count(*) FROM {table_a} WHERE dataset_id = ?), "
            f"(SELECT count(*) FROM {table_b} WHERE dataset_id = ?), "
            f"(SELECT count(*) FROM {table_a} x JOIN {table_b} y ON {key_match} "
            f"WHERE x.dataset_id = ? AND ({cols_a}) IS NOT DISTINCT FROM ({cols_b}))",
            [dataset] * 3,
        ).fetchall()[0]
        if not n_one == n_two == n_same:
            return False
    return True


def _merge_into(
    con: duckdb.DuckDBPyConnection,
    inputs: Sequence[Path],
    target: str,
    datasets: Sequence[Sequence[str]],
    target_datasets: Sequence[str],
    on_conflict: str = "refuse",
) -> MergeResult:
    """Merge ``inputs`` into the store open read-write on ``con`` (see the module docstring).

    The caller checked the files (the store's own connections cannot be open while this one
    holds the target); everything here happens in one transaction on ``con``: any error
    rolls it back, so the target is as before. A dataset held by more than one of the target
    and the inputs is compared with its first holder's by DuckDB (:func:`_same_content`:
    equal content, equal fingerprint), not hashed in Python (that took 75 s for two stores of
    625,000 instances and 3.4M passages, the same dataset in each).

    Args:
        con: a read-write connection whose current database is the target, no transaction.
        inputs: the input store files, merged in this order.
        target: how messages name the target.
        datasets: per input, its dataset names.
        target_datasets: the target's dataset names.
        on_conflict: one of :data:`ON_CONFLICT`.

    Raises:
        _OtherContent: a dataset of the same name with other content (the caller names both
            fingerprints once this connection is closed).
        StoreError: an input of another schema version, a collision under ``refuse``, or a
            table whose columns differ.
        ValueError: an unknown ``on_conflict``.
    """
    result = MergeResult(target=target, inputs=[str(p) for p in inputs])
    aliases = []
    try:
        for i, path in enumerate(inputs):
            name = f"merge_in_{i}"
            con.execute(f"ATTACH ? AS {name} (READ_ONLY)", [str(path)])
            aliases.append(name)
        # dataset -> the database holding it first ("": the target), and its file
        held = dict.fromkeys(target_datasets, "")
        origin = dict.fromkeys(held, target)
        for path, alias, names in zip(inputs, aliases, datasets, strict=True):
            for name in sorted(names):
                if name not in held:
                    held[name], origin[name] = alias, str(path)
                    result.datasets_added.append(name)
                elif not _same_content(con, held[name], alias, name):
                    raise _OtherContent(name, str(path), origin[name])
        with in_transaction(con):
            database = con.execute("SELECT current_database()").fetchall()[0][0]
            for path, alias in zip(inputs, aliases, strict=True):
                _merge_one(con, database, alias, str(path), result, on_conflict)
            bump_data_version(con, datasets=result.datasets_added, runs=result.runs_added)
    finally:
        for name in aliases:
            con.execute(f"DETACH {name}")
    return result


def _merge_one(
    con: duckdb.DuckDBPyConnection,
    database: str,
    alias: str,
    where: str,
    result: MergeResult,
    on_conflict: str,
) -> None:
    """Merge one attached input into the target (inside the caller's transaction)."""
    view = f"{alias}.schema_version"
    version = con.execute(f"SELECT max(version) FROM {view}").fetchall()[0][0]
    if int(version or 0) != SCHEMA_VERSION:
        raise StoreError(
            f"store {where}: schema version {version}, this program's is {SCHEMA_VERSION}: "
            "open it once with this program (any write migrates it) and merge again"
        )
    mine = _catalog(con, database, result.target)
    theirs = {k: v for k, v in _catalog(con, alias, where).items() if k not in _OWN}
    for t in theirs.values():
        if t.name not in mine:
            _create(con, t, where)
            mine[t.name] = t
        elif set(mine[t.name].names) != set(t.names) or mine[t.name].key != t.key:
            raise StoreError(
                f"table {t.name}: columns or key differ between {where} and {result.target}; "
                "nothing merged"
            )
    run_tables = [t for t in theirs.values() if "run_id" in t.key]
    skip_runs = _run_collisions(con, alias, where, run_tables, result, on_conflict)
    for t in sorted(theirs.values(), key=lambda x: x.name):
        _merge_table(
            con, alias, where, t, skip_runs if t in run_tables else None, result, on_conflict
        )


def _run_collisions(
    con: duckdb.DuckDBPyConnection,
    alias: str,
    where: str,
    tables: Sequence[_Table],
    result: MergeResult,
    on_conflict: str,
) -> list[str]:
    """The input's runs to leave out; records added, equal and skipped runs."""
    if not tables:
        return []
    ids: set[str] = set()
    held: set[str] = set()
    for t in tables:
        table = f"{alias}.{t.name}"
        ids |= {r[0] for r in con.execute(f"SELECT DISTINCT run_id FROM {table}").fetchall()}
        table = t.name
        held |= {r[0] for r in con.execute(f"SELECT DISTINCT run_id FROM {table}").fetchall()}
    both = sorted(ids & held)
    differ: set[str] = set()
    for t in tables:
        if not both:
            break
        cols = ", ".join(t.content)
        table, view = t.name, f"{alias}.{t.name}"
        rows = con.execute(
            f"SELECT DISTINCT run_id FROM ("
            f"(SELECT {cols} FROM {table} WHERE list_contains(?, run_id) "
            f"EXCEPT ALL SELECT {cols} FROM {view} WHERE list_contains(?, run_id)) UNION ALL "
            f"(SELECT {cols} FROM {view} WHERE list_contains(?, run_id) "
            f"EXCEPT ALL SELECT {cols} FROM {table} WHERE list_contains(?, run_id)))",
            [both] * 4,
        ).fetchall()
        differ |= {r[0] for r in rows}
    if differ and on_conflict == "refuse":
        run = sorted(differ)[0]
        more = f" (and {len(differ) - 1} more)" if len(differ) > 1 else ""
        raise StoreError(
            f"run '{run}'{more} is stored in {where} and in {result.target} with other "
            "content; nothing merged (--on-conflict skip keeps the target's and goes on)"
        )
    result.runs_skipped += sorted(differ)
    result.runs_same += [r for r in both if r not in differ]
    result.runs_added += sorted(ids - held)
    return both


def _merge_table(
    con: duckdb.DuckDBPyConnection,
    alias: str,
    where: str,
    t: _Table,
    runs_held: list[str] | None,
    result: MergeResult,
    on_conflict: str,
) -> None:
    """Insert one table's new rows; count equal and colliding ones.

    ``runs_held``: for a table whose key holds ``run_id``, the input's runs the target holds
    too (:func:`_run_collisions`), whose rows are left out; the rows of every other run are
    inserted as they are (no key of theirs can be stored: the target holds none of their
    runs). None for the other tables.
    """
    count = result.tables.setdefault(t.name, TableCount())
    table, view = t.name, f"{alias}.{t.name}"
    cols = ", ".join(t.names)
    n_in = con.execute(f"SELECT count(*) FROM {view}").fetchall()[0][0]
    before = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    count.rows += n_in
    skipped = 0
    if runs_held is not None:
        # the runs both hold: equal ones are there already, colliding ones stay out
        skipped_runs = [r for r in runs_held if r in set(result.runs_skipped)]
        if skipped_runs:
            skipped = con.execute(
                f"SELECT count(*) FROM {view} WHERE list_contains(?, run_id)", [skipped_runs]
            ).fetchall()[0][0]
        if runs_held:
            con.execute(
                f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view} "
                "WHERE NOT list_contains(?, run_id)",
                [runs_held],
            )
        else:
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}")
    elif t.key and t.name not in _CACHES and t.name not in _DATASET_TABLES:
        columns = " AND ".join(f"d.{k} IS NOT DISTINCT FROM s.{k}" for k in t.key)
        sets = ", ".join(f"s.{c}" for c in t.content)
        only = ", ".join(f"d.{c}" for c in t.content)
        order = ", ".join(f"s.{k}" for k in t.key)
        rows = con.execute(
            f"SELECT {order} FROM {view} s JOIN {table} d ON {columns} "
            f"WHERE ({sets}) IS DISTINCT FROM ({only}) ORDER BY {order}"
        ).fetchall()
        if rows and on_conflict == "refuse":
            more = f" (and {len(rows) - 1} more)" if len(rows) > 1 else ""
            raise StoreError(
                f"table {t.name}: key {_key_text(t.key, rows[0])}{more} is stored in {where} "
                f"and in {result.target} with other content; nothing merged (--on-conflict "
                "skip keeps the target's and goes on)"
            )
        skipped = len(rows)
        result.rows_skipped += [f"{t.name}: {_key_text(t.key, r)}" for r in rows]
        con.execute(f"INSERT OR IGNORE INTO {table} ({cols}) SELECT {cols} FROM {view}")
    elif t.key:
        # dataset tables (fingerprints checked) and caches: a held key keeps its row
        con.execute(f"INSERT OR IGNORE INTO {table} ({cols}) SELECT {cols} FROM {view}")
    else:
        sets = ", ".join(f"s.{c}" for c in t.content)
        only = ", ".join(f"d.{c}" for c in t.content)
        con.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view} s WHERE NOT EXISTS "
            f"(SELECT 1 FROM {table} d WHERE ({sets}) IS NOT DISTINCT FROM ({only}))"
        )
    after = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    count.added += after - before
    count.skipped += skipped
    count.same += n_in - (after - before) - skipped


def _key_text(key: Sequence[str], values: Sequence[Any]) -> str:
    """``k1='v1', k2='v2'``, each value cut to 200 characters (a key may be megabytes)."""
    return ", ".join(
        f"{k}={ellipsize(v if not isinstance(v, str) else repr(v))}"
        for k, v in zip(key, values, strict=True)
    )


def _read_input(path: Path) -> tuple[int, list[str]]:
    """An input store's schema version and dataset names; errors name the file."""
    try:
        with Store(path).connect(read_only=True) as con:
            version = stored_version(con)
        return version, Store(path).dataset_names()
    except (duckdb.Error, OSError) as exc:
        raise StoreError(
            f"store {path}: not a store this program can read ({ellipsize(str(exc))})"
        ) from None


def _fingerprints(path: Path) -> dict[str, str]:
    """Dataset name -> content hash of a store file (read-only)."""
    store = Store(path)
    return {name: store.content_hash(name) for name in store.dataset_names()}


def export_store(path: Path, out: Path) -> dict[str, Any]:
    """Write every table of the store ``path`` to ``out`` as Parquet, with a manifest.

    See the module docstring; the store is opened read-only.

    Returns:
        The manifest written to ``out/manifest.json``.

    Raises:
        StoreError: no store at ``path``, or not a readable one.
    """
    if not Path(path).is_file():
        raise StoreError(f"store {path}: no such file")
    prints = _fingerprints(path)
    with Store(path).connect(read_only=True) as con:
        return _export(con, Path(out), prints)


def merge_stores(inputs: Sequence[Path], target: Path, on_conflict: str = "refuse") -> MergeResult:
    """Merge the stores ``inputs`` into ``target`` (new or existing), all or nothing.

    See the module docstring. A new target that the merge refuses is removed again.

    Raises:
        StoreError: a missing input, an input given twice or equal to the target, another
            schema version, a dataset of the same name with other content, a collision under
            ``refuse``; the target is then as before.
        ValueError: an unknown ``on_conflict``.
    """
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"unknown on_conflict {on_conflict!r}; allowed: {', '.join(ON_CONFLICT)}")
    paths = [Path(p) for p in inputs]
    target = Path(target)
    if not paths:
        raise StoreError("store merge: give at least one store to merge")
    seen: list[str] = []
    for p in paths:
        if not p.is_file():
            raise StoreError(f"store {p}: no such file")
        real = os.path.realpath(p)
        if real == os.path.realpath(target):
            raise StoreError(f"store {p}: it is the target (--into); give another file")
        if real in seen:
            raise StoreError(f"store {p}: given twice")
        seen.append(real)
    names = []
    for p in paths:
        version, datasets = _read_input(p)
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"store {p}: schema version {version}, this program's is {SCHEMA_VERSION}: "
                "open it once with this program (any write migrates it) and merge again"
            )
        names.append(datasets)
    created = not target.exists()
    held = [] if created else _read_input(target)[1]
    try:
        try:
            with Store(target).connect() as con:
                return _merge_into(con, paths, str(target), names, held, on_conflict)
        except _OtherContent as other:  # both fingerprints, read with the target closed
            digest = Store(other.path).content_hash(other.name)
            theirs = Store(other.origin).content_hash(other.name)
            raise StoreError(
                f"dataset '{other.name}' has other content in {other.path} than in "
                f"{other.origin} (fingerprint {digest[:12]} vs {theirs[:12]}); nothing merged"
            ) from None
    except BaseException:
        if created:
            for leftover in (target, Path(f"{target}.wal")):
                leftover.unlink(missing_ok=True)
        raise
