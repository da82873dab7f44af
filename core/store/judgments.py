"""Judge runs' judgments in the store (issue 20): write, read, count, finish, delete.

A judge run (``runs.kind = 'judge'``, :mod:`core.judges.runs`) stores one row per judge call in
``judgments`` (schema migration 4): the rubric's name, version and template hash, the judge
model, what was judged (``target_run`` / ``instance_id`` / ``condition`` / ``item``), the raw
reply, the parsed ``rating`` and the ``parse_error``; a failed call keeps its ``error`` and a
NULL rating (failures are data, never ratings). The run's counts and final status come from
its judgments, as a prediction run's come from its predictions.

CRUX answerability ratings are judgments of ``crux-answerability`` judge runs (schema 8): the
``answerability`` view shows them as ``(dataset_id, instance_id, sq_id, passage_id, rating,
judge)``; :meth:`JudgmentsMixin.write_crux_judgments` stores a dataset's sub-questions and
ratings given by name (``import crux``), each judge a judge run of that name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd

from core.store.connection import StoreBase, StoreError
from core.store.frames import insert_frame, with_columns
from core.store.schema import LEGACY_RETRIEVAL, bump_data_version

__all__ = ["CRUX_RUBRIC", "JUDGMENT_COLUMNS", "JudgmentsMixin", "delete_judgments"]

#: The rubric whose judgments are CRUX's answerability ratings.
CRUX_RUBRIC = "crux-answerability"

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

    def write_crux_judgments(
        self, dataset: str, sub_questions: pd.DataFrame, ratings: pd.DataFrame
    ) -> int:
        """Store sub-questions and ratings of a dataset in one transaction (upsert).

        Each judge's ratings are the judgments of a ``crux-answerability`` judge run named
        after it (created when missing; rubric version ``stored``, no raw reply), so they are
        read like the ratings of ``judge crux-answerability`` (the ``answerability`` view).

        Args:
            dataset: the dataset name (must exist).
            sub_questions: ``instance_id, sq_id, text``.
            ratings: ``instance_id, sq_id, passage_id, rating, judge``.

        Returns:
            The number of rating rows written.

        Raises:
            StoreError: the dataset is not stored, or a judge's name is taken by a run that is
                not a CRUX judge run of the dataset.
        """
        sq = with_columns(sub_questions, ("instance_id", "sq_id", "text"))
        rt = with_columns(ratings, ("instance_id", "sq_id", "passage_id", "rating", "judge"))
        sq.insert(0, "dataset_id", dataset)
        with self.transaction() as con:
            # fetchall: a pending result would refuse insert_frame's register()
            if not con.execute("SELECT 1 FROM datasets WHERE dataset_id = ?", [dataset]).fetchall():
                raise StoreError(f"no dataset named '{dataset}' in {self.path}")
            insert_frame(con, "sub_questions", sq, tuple(sq.columns), on_conflict="replace")
            for judge, part in rt.groupby(rt["judge"].astype(str), sort=True):
                _judge_run(con, dataset, str(judge))
                rows = [
                    {
                        "run_id": judge,
                        "rubric": CRUX_RUBRIC,
                        "rubric_version": "stored",
                        "judge_model": judge,
                        "target_run": "",
                        "instance_id": r.instance_id,
                        "condition": "",
                        "item": f"{r.sq_id}|{r.passage_id}",
                        "rating": r.rating,
                        "cache_hit": False,
                    }
                    for r in part.itertuples(index=False)
                ]
                self.write_judgments(con, str(judge), rows)
                con.execute(_RECOUNT, [judge, judge])
            bump_data_version(con, datasets=[dataset])
        return len(rt)

    @staticmethod
    def _delete_dataset(con: duckdb.DuckDBPyConnection, name: str) -> None:
        """Delete a dataset, its instances, passages, sub-questions and CRUX ratings."""
        con.execute(
            "DELETE FROM judgments WHERE rubric = ? AND target_run = '' AND run_id IN "
            "(SELECT run_id FROM runs WHERE dataset_id = ?)",
            [CRUX_RUBRIC, name],
        )
        for table in ("sub_questions", "passages", "instances"):
            con.execute(f"DELETE FROM {table} WHERE dataset_id = ?", [name])
        con.execute("DELETE FROM datasets WHERE dataset_id = ?", [name])
        bump_data_version(con, datasets=[name])

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


_RECOUNT = (
    "UPDATE runs SET n_planned = c.n, n_done = c.n, n_errors = c.n_errors "
    f"FROM ({_COUNTS}) c WHERE runs.run_id = ?"
)


def _judge_run(con: duckdb.DuckDBPyConnection, dataset: str, judge: str) -> None:
    """Create the judge run ``judge`` of stored CRUX ratings, or check the one stored."""
    con.execute(
        "INSERT INTO runs (run_id, dataset_id, backend, model, retrieval, status, kind, notes, "
        "finished_at, dataset_fingerprint) SELECT ?, ?, 'stored', ?, ?, 'done', 'judge', "
        "'CRUX ratings stored by name (import crux)', current_timestamp, fingerprint "
        "FROM datasets WHERE dataset_id = ? ON CONFLICT DO NOTHING",
        [judge, dataset, judge, LEGACY_RETRIEVAL, dataset],
    )
    rows = con.execute("SELECT kind, dataset_id FROM runs WHERE run_id = ?", [judge]).fetchall()
    if not rows or rows[0][0] != "judge" or rows[0][1] != dataset:
        raise StoreError(
            f"judge name '{judge}' is taken by a run that is not a CRUX judge run of dataset "
            f"'{dataset}'; store the ratings under another --judge; nothing written"
        )
