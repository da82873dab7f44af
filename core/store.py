"""The DuckDB store: schema, migrations, connections and every SQL statement of the project.

One DuckDB file holds datasets, instances, passages, runs, predictions and scores (SPEC §2).
DuckDB allows one read-write *process* or many read-only processes, never both, so writers
use short-lived connections and every open retries while another process holds the lock.
All values reach SQL as parameters; identifiers never come from users.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from core.types import Dataset, Instance, Passage

__all__ = [
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
    "default_db_path",
]

DEFAULT_DB = Path("data") / "evidence.duckdb"

#: Forward migrations; migration ``i`` brings the schema from version ``i`` to ``i + 1``.
#: Never edit a released migration: append a new one and the version follows.
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE datasets (
        dataset_id VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL UNIQUE,
        source VARCHAR,
        builder VARCHAR,
        builder_params VARCHAR,           -- JSON
        created_at TIMESTAMP DEFAULT current_timestamp,
        n_instances INTEGER
    );
    CREATE TABLE instances (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        ord INTEGER NOT NULL,
        question VARCHAR NOT NULL,
        gold_answer VARCHAR NOT NULL,
        answer_aliases VARCHAR[],
        answer_type VARCHAR,
        reasoning_type VARCHAR,
        context_length INTEGER,
        evidence_position VARCHAR,
        distractor_similarity VARCHAR,
        evidence_density VARCHAR,
        fan_in INTEGER,
        oracle_applicable BOOLEAN,
        source VARCHAR,
        metadata VARCHAR,                 -- JSON
        PRIMARY KEY (dataset_id, instance_id)
    );
    CREATE TABLE passages (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        passage_id VARCHAR NOT NULL,
        ord INTEGER NOT NULL,
        title VARCHAR,
        text VARCHAR,
        doc_id VARCHAR,
        role VARCHAR,
        is_gold BOOLEAN,
        n_tokens INTEGER,
        PRIMARY KEY (dataset_id, instance_id, passage_id)
    );
    CREATE TABLE sub_questions (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        sq_id VARCHAR NOT NULL,
        text VARCHAR,
        PRIMARY KEY (dataset_id, instance_id, sq_id)
    );
    CREATE TABLE answerability (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        sq_id VARCHAR NOT NULL,
        passage_id VARCHAR NOT NULL,
        rating INTEGER,
        judge VARCHAR,
        PRIMARY KEY (dataset_id, instance_id, sq_id, passage_id, judge)
    );
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        dataset_id VARCHAR,
        backend VARCHAR,
        model VARCHAR,
        model_digest VARCHAR,
        options VARCHAR,                  -- JSON
        template_version VARCHAR,
        template_hash VARCHAR,
        retrieval VARCHAR,                -- JSON
        created_at TIMESTAMP DEFAULT current_timestamp,
        finished_at TIMESTAMP,
        status VARCHAR,
        n_planned INTEGER,
        n_done INTEGER,
        notes VARCHAR
    );
    CREATE TABLE predictions (
        run_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL,
        variant VARCHAR NOT NULL DEFAULT '',
        prompt_hash VARCHAR,
        input_passage_ids VARCHAR[],
        raw_response VARCHAR,
        answer VARCHAR,
        cited_ids VARCHAR[],
        confidence DOUBLE,
        logprob_confidence DOUBLE,
        explanation VARCHAR,
        parse_error VARCHAR,
        error VARCHAR,
        latency_ms DOUBLE,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_duration_ns BIGINT,
        load_duration_ns BIGINT,
        prompt_eval_duration_ns BIGINT,
        eval_duration_ns BIGINT,
        cache_hit BOOLEAN DEFAULT false,
        created_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (run_id, instance_id, condition, variant)
    );
    CREATE TABLE scores (
        run_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL,
        variant VARCHAR NOT NULL DEFAULT '',
        em_strict DOUBLE,
        f1_strict DOUBLE,
        em_relaxed DOUBLE,
        f1_relaxed DOUBLE,
        soft_correct DOUBLE,
        ev_precision DOUBLE,
        ev_recall DOUBLE,
        ev_f1 DOUBLE,
        citation_grounding DOUBLE,
        title_grounding DOUBLE,
        confidence_error DOUBLE,
        failure_label VARCHAR,
        PRIMARY KEY (run_id, instance_id, condition, variant)
    );
    CREATE TABLE response_cache (
        cache_key VARCHAR PRIMARY KEY,
        backend VARCHAR,
        model VARCHAR,
        options_hash VARCHAR,
        prompt_hash VARCHAR,
        response VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp
    );
    """,
)

SCHEMA_VERSION = len(_MIGRATIONS)

_INSTANCE_COLUMNS = (
    "dataset_id", "instance_id", "ord", "question", "gold_answer", "answer_aliases",
    "answer_type", "reasoning_type", "context_length", "evidence_position",
    "distractor_similarity", "evidence_density", "fan_in", "oracle_applicable", "source",
    "metadata",
)  # fmt: skip
_PASSAGE_COLUMNS = (
    "dataset_id", "instance_id", "passage_id", "ord", "title", "text", "doc_id", "role",
    "is_gold", "n_tokens",
)  # fmt: skip

#: Metadata cells reported per dataset (``datasets --json``) and offered as filters.
CELL_COLUMNS = (
    "context_length", "evidence_position", "distractor_similarity", "reasoning_type",
    "answer_type", "evidence_density", "fan_in",
)  # fmt: skip


class StoreError(RuntimeError):
    """The store cannot be used as asked (newer schema, lock held too long, name taken)."""


def default_db_path() -> Path:
    """The store path: env ``EVIDENCE_DB`` if set, else ``data/evidence.duckdb``."""
    return Path(os.environ.get("EVIDENCE_DB") or DEFAULT_DB)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A stored dataset's summary row."""

    name: str
    source: str
    builder: str
    builder_params: dict[str, Any]
    created_at: str
    n_instances: int


class Store:
    """A DuckDB store file. Cheap to create; connections are opened per operation.

    Args:
        path: the DuckDB file (created with its parent folder on the first write).
        lock_timeout: seconds to keep retrying while another process holds the file lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, lock_timeout: float = 30.0):
        self.path = Path(path) if path is not None else default_db_path()
        self.lock_timeout = lock_timeout

    # ------------------------------------------------------------------ connections
    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open a connection (migrating the schema on a read-write open), retrying on locks.

        A read-only open of a file that does not exist yet creates an empty store first.
        """
        if read_only and not self.path.exists():
            with self.connect(read_only=False):
                pass
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._open(read_only)
        try:
            if read_only:
                self._check_version(con)
            else:
                self._migrate(con)
            yield con
        finally:
            con.close()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.02
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if not _is_lock_error(exc) or time.monotonic() >= deadline:
                    if _is_lock_error(exc):
                        raise StoreError(
                            f"{self.path}: store is locked by another process "
                            f"(waited {self.lock_timeout:.0f} s)"
                        ) from exc
                    raise StoreError(f"{self.path}: cannot open store: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _version(self, con: duckdb.DuckDBPyConnection) -> int:
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
        ).fetchone()[0]
        if not exists:
            return 0
        row = con.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _check_version(self, con: duckdb.DuckDBPyConnection) -> int:
        version = self._version(con)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this program "
                f"supports ({SCHEMA_VERSION}); upgrade the program"
            )
        return version

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        version = self._check_version(con)
        if version == SCHEMA_VERSION:
            return
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT current_timestamp)"
            )
            for target in range(version, SCHEMA_VERSION):
                con.execute(_MIGRATIONS[target])
                con.execute("INSERT INTO schema_version (version) VALUES (?)", [target + 1])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        """The schema version of the file (migrating it first if it is older)."""
        with self.connect() as con:
            return self._version(con)

    # ------------------------------------------------------------------ datasets
    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside one transaction.

        Committed on success; on any exception rolled back, so the store is exactly as before.
        """
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def write_dataset(self, dataset: Dataset, replace: bool = False) -> int:
        """Write a dataset with its instances and passages in one transaction.

        Either everything is written or nothing is: any failure rolls back and the store is
        exactly as before.

        Args:
            dataset: the dataset to write.
            replace: delete a stored dataset of the same name (in the same transaction).

        Returns:
            The number of instances written.

        Raises:
            StoreError: the name is taken and ``replace`` is False.
        """
        with self.transaction() as con:
            return self.insert_dataset(con, dataset, replace=replace)

    def insert_dataset(
        self, con: duckdb.DuckDBPyConnection, dataset: Dataset, replace: bool = False
    ) -> int:
        """Insert a dataset on an open connection (inside the caller's transaction)."""
        instances_df, passages_df = _frames(dataset)
        taken = con.execute(
            "SELECT count(*) FROM datasets WHERE dataset_id = ?", [dataset.name]
        ).fetchone()[0]
        if taken and not replace:
            raise StoreError(
                f"dataset '{dataset.name}' already exists in {self.path}; "
                "choose another --name or pass --replace"
            )
        if taken:
            self._delete_dataset(con, dataset.name)
        con.execute(
            "INSERT INTO datasets (dataset_id, name, source, builder, builder_params, "
            "n_instances) VALUES (?, ?, ?, ?, ?, ?)",
            [
                dataset.name,
                dataset.name,
                dataset.source,
                dataset.builder,
                json.dumps(dict(dataset.builder_params), sort_keys=True, default=str),
                len(dataset.instances),
            ],
        )
        _insert_frame(con, "instances", instances_df, _INSTANCE_COLUMNS)
        _insert_frame(con, "passages", passages_df, _PASSAGE_COLUMNS)
        return len(dataset.instances)

    @staticmethod
    def _delete_dataset(con: duckdb.DuckDBPyConnection, name: str) -> None:
        for table in ("answerability", "sub_questions", "passages", "instances"):
            con.execute(f"DELETE FROM {table} WHERE dataset_id = ?", [name])
        con.execute("DELETE FROM datasets WHERE dataset_id = ?", [name])

    def delete_dataset(self, name: str) -> None:
        """Delete a dataset with its instances and passages (runs are kept)."""
        with self.transaction() as con:
            self._delete_dataset(con, name)

    def list_datasets(self) -> list[DatasetInfo]:
        """Stored datasets, oldest first."""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT name, source, builder, builder_params, CAST(created_at AS VARCHAR), "
                "n_instances FROM datasets ORDER BY created_at, name"
            ).fetchall()
        return [
            DatasetInfo(r[0], r[1], r[2], json.loads(r[3] or "{}"), r[4], int(r[5] or 0))
            for r in rows
        ]

    def dataset_names(self) -> list[str]:
        """Names of the stored datasets."""
        return [d.name for d in self.list_datasets()]

    def instances_frame(self, dataset: str) -> pd.DataFrame:
        """Instances of a dataset (one row each, in dataset order) with their gold passage ids."""
        with self.connect(read_only=True) as con:
            return con.execute(
                """
                SELECT i.*, coalesce(g.gold_ids, []) AS gold_ids
                FROM instances i
                LEFT JOIN (
                    SELECT dataset_id, instance_id, list(passage_id ORDER BY ord) AS gold_ids
                    FROM passages WHERE is_gold GROUP BY ALL
                ) g USING (dataset_id, instance_id)
                WHERE i.dataset_id = ?
                ORDER BY i.ord
                """,
                [dataset],
            ).df()

    def passages_frame(self, dataset: str, instance_id: str | None = None) -> pd.DataFrame:
        """Passages of a dataset (or of one instance), in context order."""
        sql = "SELECT * FROM passages WHERE dataset_id = ?"
        params: list[Any] = [dataset]
        if instance_id is not None:
            sql += " AND instance_id = ?"
            params.append(instance_id)
        with self.connect(read_only=True) as con:
            return con.execute(sql + " ORDER BY instance_id, ord", params).df()

    def load_instances(
        self, dataset: str, instance_ids: Sequence[str] | None = None
    ) -> list[Instance]:
        """Rebuild the frozen :class:`Instance` records of a dataset (in dataset order)."""
        inst = self.instances_frame(dataset)
        if instance_ids is not None:
            inst = inst[inst["instance_id"].isin(list(instance_ids))]
        pas = self.passages_frame(dataset)
        by_instance: dict[str, list[Passage]] = {}
        for row in pas.itertuples(index=False):
            by_instance.setdefault(row.instance_id, []).append(
                Passage(
                    passage_id=row.passage_id,
                    ord=int(row.ord),
                    title=row.title or "",
                    text=row.text or "",
                    doc_id=row.doc_id or "",
                    role=row.role or "filler",
                    is_gold=bool(row.is_gold),
                )
            )
        out = []
        for row in inst.itertuples(index=False):
            out.append(
                Instance(
                    instance_id=row.instance_id,
                    question=row.question,
                    gold_answer=row.gold_answer,
                    passages=tuple(by_instance.get(row.instance_id, ())),
                    answer_aliases=tuple(
                        row.answer_aliases if row.answer_aliases is not None else ()
                    ),
                    answer_type=row.answer_type,
                    reasoning_type=row.reasoning_type,
                    context_length=int(row.context_length),
                    evidence_position=row.evidence_position,
                    distractor_similarity=row.distractor_similarity,
                    evidence_density=row.evidence_density,
                    fan_in=int(row.fan_in),
                    oracle_applicable=bool(row.oracle_applicable),
                    source=row.source,
                    metadata=json.loads(row.metadata or "{}"),
                )
            )
        return out

    def dataset_summary(self, dataset: str) -> dict[str, Any]:
        """Counts per metadata cell, distinct evaluation cells and a content hash."""
        with self.connect(read_only=True) as con:
            info = con.execute(
                "SELECT name, source, builder, builder_params, CAST(created_at AS VARCHAR), "
                "n_instances FROM datasets WHERE dataset_id = ?",
                [dataset],
            ).fetchone()
            if info is None:
                raise StoreError(f"no dataset named '{dataset}' in {self.path}")
            cells: dict[str, dict[str, int]] = {}
            for col in CELL_COLUMNS:
                rows = con.execute(
                    f"SELECT CAST({col} AS VARCHAR), count(*) FROM instances "
                    f"WHERE dataset_id = ? GROUP BY 1 ORDER BY 1",
                    [dataset],
                ).fetchall()
                cells[col] = {str(k): int(v) for k, v in rows}
            cell_rows = con.execute(
                "SELECT context_length, evidence_position, distractor_similarity, reasoning_type, "
                "count(*) FROM instances WHERE dataset_id = ? GROUP BY ALL ORDER BY ALL",
                [dataset],
            ).fetchall()
            n_passages, n_gold = con.execute(
                "SELECT count(*), count(*) FILTER (WHERE is_gold) FROM passages "
                "WHERE dataset_id = ?",
                [dataset],
            ).fetchone()
        return {
            "name": info[0],
            "source": info[1],
            "builder": info[2],
            "builder_params": json.loads(info[3] or "{}"),
            "created_at": info[4],
            "n_instances": int(info[5] or 0),
            "n_passages": int(n_passages),
            "n_gold_passages": int(n_gold),
            "cells": cells,
            "n_cells": len(cell_rows),
            "cell_counts": [
                {
                    "context_length": r[0],
                    "evidence_position": r[1],
                    "distractor_similarity": r[2],
                    "reasoning_type": r[3],
                    "n": int(r[4]),
                }
                for r in cell_rows
            ],
            "content_hash": self.content_hash(dataset),
        }

    def content_hash(self, dataset: str) -> str:
        """SHA-256 over every stored instance and passage field of a dataset, in a fixed order.

        Equal hashes mean byte-identical stored content (creation times are not hashed).
        """
        digest = hashlib.sha256()
        with self.connect(read_only=True) as con:
            for table, cols, order in (
                ("instances", _INSTANCE_COLUMNS, "instance_id"),
                ("passages", _PASSAGE_COLUMNS, "instance_id, ord"),
            ):
                cur = con.execute(
                    f"SELECT {', '.join(cols)} FROM {table} WHERE dataset_id = ? ORDER BY {order}",
                    [dataset],
                )
                while batch := cur.fetchmany(10_000):
                    for row in batch:
                        digest.update(
                            json.dumps(row, default=str, ensure_ascii=False).encode("utf-8")
                        )
                        digest.update(b"\n")
        return digest.hexdigest()


def _insert_frame(
    con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame, columns: Sequence[str]
) -> None:
    """Bulk-insert the named columns of a DataFrame into a table (identifiers are ours)."""
    view = f"_insert_{table}"
    con.register(view, df)
    try:
        cols = ", ".join(columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}")
    finally:
        try:
            con.unregister(view)
        except duckdb.Error:
            pass  # an aborted transaction refuses it; the view dies with the connection


def _frames(dataset: Dataset) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Instances and passages of a dataset as DataFrames ready for a bulk insert."""
    inst_rows = []
    pas_rows = []
    for i, inst in enumerate(dataset.instances):
        inst_rows.append(
            (
                dataset.name, inst.instance_id, i, inst.question, inst.gold_answer,
                list(inst.answer_aliases), inst.answer_type, inst.reasoning_type,
                int(inst.context_length), inst.evidence_position, inst.distractor_similarity,
                inst.evidence_density, int(inst.fan_in), bool(inst.oracle_applicable),
                inst.source, json.dumps(dict(inst.metadata), sort_keys=True, default=str),
            )
        )  # fmt: skip
        for p in inst.passages:
            pas_rows.append(
                (
                    dataset.name, inst.instance_id, p.passage_id, int(p.ord), p.title, p.text,
                    p.doc_id, p.role, bool(p.is_gold), p.n_tokens,
                )
            )  # fmt: skip
    instances_df = pd.DataFrame(inst_rows, columns=list(_INSTANCE_COLUMNS))
    passages_df = pd.DataFrame(pas_rows, columns=list(_PASSAGE_COLUMNS))
    for df, int_cols in (
        (instances_df, ("ord", "context_length", "fan_in")),
        (passages_df, ("ord", "n_tokens")),
    ):
        for col in int_cols:
            df[col] = df[col].astype("int64")
    instances_df["oracle_applicable"] = instances_df["oracle_applicable"].astype(bool)
    passages_df["is_gold"] = passages_df["is_gold"].astype(bool)
    return instances_df, passages_df
