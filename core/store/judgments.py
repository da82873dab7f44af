"""Judge runs' judgments in the store (issue 20): write, read, count, finish, delete.

A judge run (``runs.kind = 'judge'``, :mod:`core.judges.runs`) stores one row per judge call in
``judgments`` (schema migration 4): the rubric's name, version and template hash, the judge
model, what was judged (``target_run`` / ``instance_id`` / ``condition`` / ``item``), the raw
reply, the parsed ``rating`` and the ``parse_error``; a failed call keeps its ``error`` and a
NULL rating (failures are data, never ratings). The run's counts and final status come from
its judgments, as a prediction run's come from its predictions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd

from core.store.connection import StoreBase
from core.store.frames import insert_frame
from core.store.schema import bump_data_version

__all__ = ["JUDGMENT_COLUMNS", "JudgmentsMixin", "delete_judgments"]

#: Columns of a judgment row as callers give it (``created_at`` is the store's).
JUDGMENT_COLUMNS = (
    "run_id",
    "rubric",
    "rubric_version",
    "rubric_hash",
    "judge_model",
    "target_run",
    "instance_id",
    "condition",
    "item",
    "prompt_hash",
    "raw_reply",
    "rating",
    "parse_error",
    "error",
    "cache_hit",
    "latency_ms",
)

_COUNTS = (
    "SELECT count(*) AS n, count(*) FILTER (WHERE coalesce(error, '') <> '') AS n_errors "
    "FROM judgments WHERE run_id = ?"
)


class JudgmentsMixin(StoreBase):
    """The ``judgments`` table of :class:`core.store.Store`."""

    @staticmethod
    def write_judgments(
        con: duckdb.DuckDBPyConnection, run_id: str, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """Insert or replace judgment rows of one run (a failed call made again replaces).

        Args:
            con: a read-write connection inside the caller's transaction.
            run_id: the judge run (its dataset's data version is bumped).
            rows: dicts with the :data:`JUDGMENT_COLUMNS`.

        Returns:
            The rows written.
        """
        if not rows:
            return 0
        frame = pd.DataFrame([{c: r.get(c) for c in JUDGMENT_COLUMNS} for r in rows])
        frame["rating"] = pd.to_numeric(frame["rating"], errors="coerce").astype("float64")
        frame["latency_ms"] = pd.to_numeric(frame["latency_ms"], errors="coerce")
        frame["cache_hit"] = frame["cache_hit"].fillna(False).astype(bool)
        bump_data_version(con, runs=[run_id])
        insert_frame(con, "judgments", frame, JUDGMENT_COLUMNS, "replace")  # typed columns
        return len(frame)

    def judgment_keys(
        self, run_id: str, ok_only: bool = True, con: duckdb.DuckDBPyConnection | None = None
    ) -> set[tuple[str, str, str, str]]:
        """``(target_run, instance_id, condition, item)`` of a run's stored judgments.

        ``ok_only``: leave out failed calls (they are made again on resume).
        """
        with self._using(con) as c:
            rows = c.execute(
                "SELECT target_run, instance_id, condition, item FROM judgments "
                "WHERE run_id = ? AND (NOT ? OR coalesce(error, '') = '')",
                [run_id, bool(ok_only)],
            ).fetchall()
        return {tuple(str(v) for v in r) for r in rows}  # type: ignore[misc]

    def judgments_frame(
        self,
        *,
        runs: Sequence[str] | None = None,
        rubric: str | None = None,
        target_runs: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """Stored judgments with their judge run's dataset, newest run first.

        Args:
            runs: only these judge runs.
            rubric: only this rubric.
            target_runs: only judgments of these judged runs.

        Returns:
            The :data:`JUDGMENT_COLUMNS` plus ``dataset_id`` (empty frame when none).
        """
        sql = (
            "SELECT j.*, r.dataset_id FROM judgments j JOIN runs r USING (run_id) "
            "WHERE (? IS NULL OR list_contains(?, j.run_id)) AND (? IS NULL OR j.rubric = ?) "
            "AND (? IS NULL OR list_contains(?, j.target_run)) "
            "ORDER BY r.created_at DESC, j.run_id, j.target_run, j.instance_id, j.condition, j.item"
        )
        rl = None if runs is None else [str(r) for r in runs]
        tl = None if target_runs is None else [str(r) for r in target_runs]
        with self.connect(read_only=True) as con:
            if not _has_table(con):
                return pd.DataFrame(columns=[*JUDGMENT_COLUMNS, "dataset_id"])
            return con.execute(sql, [rl, rl, rubric, rubric, tl, tl]).df()

    @staticmethod
    def finish_judge_run(
        con: duckdb.DuckDBPyConnection,
        run_id: str,
        status: str,
        n_planned: int,
        wall_seconds: float,
    ) -> str | None:
        """Set a judge run's status and counts from its judgments (in the caller's transaction).

        ``done`` becomes ``partial`` when some stored judgment failed and ``failed`` when
        every one did; ``running`` and ``cancelled`` are kept as given.

        Returns:
            The status stored (None when there is no such run).
        """
        bump_data_version(con, runs=[run_id])
        row = con.execute(
            "UPDATE runs SET status = CASE WHEN ? <> 'done' THEN ? "
            "WHEN c.n_errors = 0 THEN 'done' WHEN c.n_errors >= c.n THEN 'failed' "
            "ELSE 'partial' END, finished_at = CASE WHEN ? = 'running' THEN finished_at "
            "ELSE current_timestamp END, n_planned = ?, n_done = c.n, "
            "n_errors = c.n_errors, heartbeat_at = current_timestamp, wall_seconds = ? "
            f"FROM ({_COUNTS}) c WHERE runs.run_id = ? RETURNING status",
            [status, status, status, int(n_planned), float(wall_seconds), run_id, run_id],
        ).fetchone()
        return None if row is None else str(row[0])


def delete_judgments(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> int:
    """Delete the judgments of the runs and the judgments *of* them (their judged predictions).

    Called wherever a run's results are deleted (:meth:`core.store.Store.delete_run_results`).

    Returns:
        The rows deleted (0 on a store older than the table).
    """
    if not _has_table(con):
        return 0
    ids = [str(r) for r in run_ids]
    rows = con.execute(
        "DELETE FROM judgments WHERE list_contains(?, run_id) OR list_contains(?, target_run) "
        "RETURNING 1",
        [ids, ids],
    ).fetchall()
    return len(rows)


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE database_name = current_database() AND table_name = 'judgments'"
    ).fetchone()
    return bool(row and row[0])
