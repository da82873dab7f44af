"""Datasets in the store: write, read, delete; instances, passages, summaries, content hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from core.names import ellipsize
from core.store.connection import StoreBase, StoreError
from core.store.frames import insert_frame
from core.store.schema import (
    CELL_COLUMNS,
    DATASET_FINGERPRINT,
    INSTANCE_COLUMNS,
    PASSAGE_COLUMNS,
    bump_data_version,
)
from core.types import Dataset, Instance, Passage

__all__ = ["WITH_RUNS", "DatasetInfo", "DatasetsMixin"]

#: What replacing a dataset that has runs does to them (``--with-runs``): delete them, or
#: keep them as runs of a dataset that changed since they ran.
WITH_RUNS = ("drop", "keep-orphans")


def _listed(ids: Sequence[str], most: int = 5) -> str:
    """Up to ``most`` names, each ellipsized, and how many more."""
    shown = ", ".join(ellipsize(i, 60) for i in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A stored dataset's summary row."""

    name: str
    source: str
    builder: str
    builder_params: dict[str, Any]
    created_at: str
    n_instances: int


class DatasetsMixin(StoreBase):
    """The dataset tables of :class:`core.store.Store`: datasets, instances, passages, CRUX."""

    def write_dataset(
        self, dataset: Dataset, replace: bool = False, with_runs: str | None = None
    ) -> int:
        """Write a dataset with its instances and passages in one transaction.

        Either everything is written or nothing is: any failure rolls back and the store is
        exactly as before.

        Args:
            dataset: the dataset to write.
            replace: delete a stored dataset of the same name (in the same transaction).
            with_runs: what a replace does to the stored dataset's runs (:data:`WITH_RUNS`):
                ``drop`` deletes them, ``keep-orphans`` keeps them (``score`` lists them as
                run on a dataset that changed since); None refuses a dataset that has runs.

        Returns:
            The number of instances written.

        Raises:
            StoreError: the name is taken and ``replace`` is False; the dataset has runs and
                ``with_runs`` does not say what becomes of them; one of them is running.
        """
        with self.transaction() as con:
            return self.insert_dataset(con, dataset, replace=replace, with_runs=with_runs)

    def insert_dataset(
        self,
        con: duckdb.DuckDBPyConnection,
        dataset: Dataset,
        replace: bool = False,
        with_runs: str | None = None,
        replacing: Sequence[str] = (),
    ) -> int:
        """Insert a dataset on an open connection (inside the caller's transaction).

        ``replace`` and ``with_runs`` as in :meth:`write_dataset`; ``replacing`` names runs
        of the dataset the caller itself writes again in this transaction (``import
        results --replace``), which ``with_runs`` need not settle.
        """
        if with_runs is not None and with_runs not in WITH_RUNS:
            allowed = ", ".join(WITH_RUNS)
            raise ValueError(f"--with-runs must be one of {allowed}, got {ellipsize(with_runs)}")
        instances_df, passages_df = _frames(dataset)
        taken = self.has_dataset(dataset.name, con)
        if taken and not replace:
            raise StoreError(
                f"dataset '{dataset.name}' already exists in {self.path}; "
                "choose another --name or pass --replace"
            )
        if taken:
            self._settle_runs(con, dataset.name, with_runs, replacing)
            self._delete_dataset(con, dataset.name)  # JudgmentsMixin: + its CRUX ratings
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
        insert_frame(con, "instances", instances_df, (*INSTANCE_COLUMNS, "n_gold"))
        insert_frame(con, "passages", passages_df, PASSAGE_COLUMNS)
        con.execute(
            f"UPDATE datasets SET fingerprint = ({DATASET_FINGERPRINT}) WHERE dataset_id = ?",
            [dataset.name] * 3,
        )
        bump_data_version(con, datasets=[dataset.name])
        return len(dataset.instances)

    def _settle_runs(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        with_runs: str | None,
        replacing: Sequence[str] = (),
    ) -> None:
        """Before dataset ``name`` is replaced: refuse, drop or keep its runs (``with_runs``)."""
        runs = con.execute(
            "SELECT run_id, status FROM runs WHERE dataset_id = ? AND NOT list_contains(?, run_id) "
            "ORDER BY run_id",
            [name, list(replacing)],
        ).fetchall()
        if not runs:
            return
        ids = [r for r, _ in runs]
        busy = [r for r, st in runs if self.live_status(r, st) == "running"]
        if busy:
            raise StoreError(
                f"dataset '{ellipsize(name)}' has a run in progress ({_listed(busy)}); "
                "let it end or cancel it before replacing the dataset; nothing written"
            )
        if with_runs is None:
            raise StoreError(
                f"dataset '{ellipsize(name)}' has {len(ids)} run(s) ({_listed(ids)}) whose "
                "predictions were made on it; pass --with-runs drop (delete them with it) or "
                "--with-runs keep-orphans (keep them; `score` lists them as run on a changed "
                "dataset); nothing written"
            )
        if with_runs == "drop":
            for run_id in ids:
                self.drop_run(con, run_id)

    def delete_dataset(self, name: str) -> None:
        """Delete a dataset with its instances and passages (runs are kept)."""
        with self.transaction() as con:
            self._delete_dataset(con, name)

    def has_dataset(self, name: str, con: duckdb.DuckDBPyConnection | None = None) -> bool:
        """True when a dataset of that name is stored."""
        with self._using(con) as c:
            sql = "SELECT count(*) FROM datasets WHERE dataset_id = ?"
            # fetchall, not fetchone: a pending result would refuse a following register()
            return bool(c.execute(sql, [name]).fetchall()[0][0])

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
        """Rebuild the frozen :class:`Instance` records of a dataset (in dataset order).

        With ``instance_ids`` only those instances are read (the engine's reruns read one).
        """
        wanted = None if instance_ids is None else list(instance_ids)
        with self.connect(read_only=True) as con:
            inst = _dataset_rows(con, "instances", dataset, wanted, "ord")
            pas = _dataset_rows(con, "passages", dataset, wanted, "instance_id, ord")
        return _instances(inst, pas)

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
                ("instances", INSTANCE_COLUMNS, "instance_id"),
                ("passages", PASSAGE_COLUMNS, "instance_id, ord"),
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

    @staticmethod
    def instance_ids(con: duckdb.DuckDBPyConnection, dataset: str) -> set[str]:
        """Instance ids of a dataset (empty when the dataset is absent)."""
        rows = con.execute(
            "SELECT instance_id FROM instances WHERE dataset_id = ?", [dataset]
        ).fetchall()
        return {r[0] for r in rows}

    def list_instance_ids(self, dataset: str, limit: int = 5000) -> list[str]:
        """The first ``limit`` instance ids of a dataset, in dataset order (Case view picker)."""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT instance_id FROM instances WHERE dataset_id = ? ORDER BY ord LIMIT ?",
                [dataset, int(limit)],
            ).fetchall()
        return [r[0] for r in rows]

    def passage_ids(self, dataset: str) -> dict[str, set[str]]:
        """``{instance_id: {passage_id, ...}}`` of a dataset (every instance, even empty)."""
        with self.connect(read_only=True) as con:
            out: dict[str, set[str]] = {iid: set() for iid in self.instance_ids(con, dataset)}
            for iid, pid in con.execute(
                "SELECT instance_id, passage_id FROM passages WHERE dataset_id = ?", [dataset]
            ).fetchall():
                out[iid].add(pid)
        return out

    def cell_values(self, dataset: str | None = None) -> dict[str, list[str]]:
        """Distinct values (as text, sorted) of each metadata cell, for the sidebar filters.

        Args:
            dataset: one dataset, or None for every dataset.
        """
        out: dict[str, list[str]] = {}
        with self.connect(read_only=True) as con:
            for col in CELL_COLUMNS:
                rows = con.execute(
                    f"SELECT DISTINCT CAST({col} AS VARCHAR) AS v FROM instances "
                    "WHERE ? IS NULL OR dataset_id = ? ORDER BY v",
                    [dataset, dataset],
                ).fetchall()
                out[col] = [r[0] for r in rows if r[0] is not None]
        return out


def _dataset_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    dataset: str,
    wanted: list[str] | None,
    order: str,
) -> pd.DataFrame:
    """Rows of a dataset's ``instances`` or ``passages`` (of the ``wanted`` instances only)."""
    only = "" if wanted is None else " AND list_contains(?, instance_id)"
    params: list[Any] = [dataset] if wanted is None else [dataset, wanted]
    return con.execute(
        f"SELECT * FROM {table} WHERE dataset_id = ?{only} ORDER BY {order}", params
    ).df()


def _instances(inst: pd.DataFrame, pas: pd.DataFrame) -> list[Instance]:
    """Frozen :class:`Instance` records from stored instance and passage rows."""
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
                answer_aliases=tuple(row.answer_aliases if row.answer_aliases is not None else ()),
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


def _frames(dataset: Dataset) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Instances and passages of a dataset as DataFrames ready for a bulk insert."""
    inst_rows = []
    pas_rows = []
    n_gold = []  # gold passages per instance, kept with it (the analysis frame's n_gold)
    for i, inst in enumerate(dataset.instances):
        inst_rows.append(
            (
                dataset.name,
                inst.instance_id,
                i,
                inst.question,
                inst.gold_answer,
                list(inst.answer_aliases),
                inst.answer_type,
                inst.reasoning_type,
                int(inst.context_length),
                inst.evidence_position,
                inst.distractor_similarity,
                inst.evidence_density,
                int(inst.fan_in),
                bool(inst.oracle_applicable),
                inst.source,
                json.dumps(dict(inst.metadata), sort_keys=True, default=str),
            )
        )
        n_gold.append(0)
        for p in inst.passages:
            n_gold[-1] += bool(p.is_gold)
            pas_rows.append(
                (
                    dataset.name,
                    inst.instance_id,
                    p.passage_id,
                    int(p.ord),
                    p.title,
                    p.text,
                    p.doc_id,
                    p.role,
                    bool(p.is_gold),
                    p.n_tokens,
                )
            )
    instances_df = pd.DataFrame(inst_rows, columns=list(INSTANCE_COLUMNS))
    passages_df = pd.DataFrame(pas_rows, columns=list(PASSAGE_COLUMNS))
    for df, int_cols in (
        (instances_df, ("ord", "context_length", "fan_in")),
        (passages_df, ("ord", "n_tokens")),
    ):
        for col in int_cols:
            df[col] = df[col].astype("int64")
    instances_df["oracle_applicable"] = instances_df["oracle_applicable"].astype(bool)
    instances_df["n_gold"] = np.array(n_gold, dtype="int64")
    passages_df["is_gold"] = passages_df["is_gold"].astype(bool)
    return instances_df, passages_df
