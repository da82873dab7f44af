"""Predictions, scores and the response cache: one write path per table, and their reads.

Each writer takes a DataFrame or row dicts and an explicit ``replace``: True upserts (a stored
key is replaced), False is a plain insert, several times faster, for keys known to be new (a
stored key then fails the statement). Row dicts go to DuckDB as one typed Arrow table: DuckDB
reads its columns as they are, where a DataFrame's object columns (the id lists) are converted
value by value, about twice the cost; rows Arrow cannot take as typed take the DataFrame path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from core.store.connection import StoreBase
from core.store.frames import ARROW_ERRORS, arrow_table, insert_frame, with_columns
from core.store.schema import (
    CACHE_COLUMNS,
    PREDICTION_COLUMNS,
    PREDICTION_KEY,
    SCORE_COLUMNS,
    bump_data_version,
)

__all__ = ["Rows", "RecordsMixin"]

#: What the writers take: a DataFrame, or row dicts (missing columns and keys are NULL).
Rows = pd.DataFrame | Sequence[Mapping[str, Any]]

_ARROW_TYPES = {
    "input_passage_ids": pa.list_(pa.string()),
    "cited_ids": pa.list_(pa.string()),
    "confidence": pa.float64(),
    "logprob_confidence": pa.float64(),
    "latency_ms": pa.float64(),
    "prompt_tokens": pa.int32(),
    "completion_tokens": pa.int32(),
    "total_duration_ns": pa.int64(),
    "load_duration_ns": pa.int64(),
    "prompt_eval_duration_ns": pa.int64(),
    "eval_duration_ns": pa.int64(),
    "cache_hit": pa.bool_(),
}
_PREDICTION_ARROW = pa.schema([(c, _ARROW_TYPES.get(c, pa.string())) for c in PREDICTION_COLUMNS])
_CACHE_ARROW = pa.schema([(c, pa.string()) for c in CACHE_COLUMNS])


def _update_scores(columns: Sequence[str]) -> str:
    """The UPDATE of score rows in place from the registered view ``_changed_scores``.

    Sets the score columns it has (owned names only); matches rows by ``stored_rowid``
    (the stored row's ``rowid``, read in the same transaction) when it has one, which is
    cheaper than matching the four key strings, else by the key.
    """
    sets = ", ".join(f"{c} = u.{c}" for c in SCORE_COLUMNS if c in columns)
    if "stored_rowid" in columns:  # the row condition: owned column names only
        only = "scores.rowid = u.stored_rowid"
    else:
        only = " AND ".join(f"scores.{k} = u.{k}" for k in PREDICTION_KEY)
    return f"UPDATE scores SET {sets} FROM _changed_scores u WHERE {only}"


class RecordsMixin(StoreBase):
    """The ``predictions``, ``scores`` and ``response_cache`` tables of the store."""

    @staticmethod
    def write_predictions(
        con: duckdb.DuckDBPyConnection, rows: Rows, *, replace: bool, bump: bool = True
    ) -> int:
        """Write prediction rows on an open connection; returns the row count.

        Args:
            con: a read-write connection (inside the caller's transaction).
            rows: a DataFrame or row dicts; missing columns are NULL, a NULL variant is ''.
            replace: upsert (True) or plain insert of keys known to be new (False).
            bump: bump the runs' data version (:func:`core.store.schema.bump_data_version`);
                False only when the caller bumps it for these runs in the same transaction
                (the engine's batches: :meth:`record_progress` or :meth:`finish_run` does,
                one bump a batch instead of three, each ~4 ms).
        """
        if len(rows) == 0:
            return 0
        on_conflict = "replace" if replace else "fail"
        if not isinstance(rows, pd.DataFrame):
            if any(r.get("variant") is None for r in rows):
                rows = [{**r, "variant": r.get("variant") or ""} for r in rows]
            try:
                table = arrow_table(rows, _PREDICTION_ARROW)
            except ARROW_ERRORS:
                rows = pd.DataFrame(list(rows))
            else:
                insert_frame(con, "predictions", table, PREDICTION_COLUMNS, on_conflict)
                if bump:
                    bump_data_version(con, runs=_run_ids(table))
                return len(rows)
        frame = with_columns(rows, PREDICTION_COLUMNS)
        frame["variant"] = frame["variant"].fillna("")
        insert_frame(con, "predictions", frame, PREDICTION_COLUMNS, on_conflict)
        if bump:
            bump_data_version(con, runs=_run_ids(frame))
        return len(frame)

    @staticmethod
    def unstorable(row: Mapping[str, Any]) -> str | None:
        """Why a prediction row (and its ``_cache`` entry, if any) cannot be stored, or None.

        A value its column's type cannot hold (text that is not valid Unicode, a number out
        of range), as the writer's own typed conversion finds it.
        """
        try:
            arrow_table([row], _PREDICTION_ARROW)
            if row.get("_cache") is not None:
                arrow_table([row["_cache"]], _CACHE_ARROW)
        except ARROW_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    @staticmethod
    def write_scores(
        con: duckdb.DuckDBPyConnection,
        frame: pd.DataFrame | pa.Table,
        *,
        replace: bool,
        bump: bool = True,
    ) -> int:
        """Write score rows keyed by (run, instance, condition, variant); returns the count.

        Args:
            con: a read-write connection (inside the caller's transaction).
            frame: the key and score columns (missing ones are NULL, NaN is NULL); or an
                Arrow table with every key and score column (null variant: ''), inserted
                as it is (:func:`core.datasets.results.score_runs`).
            replace: upsert (True) or plain insert of keys known to be new (False).
            bump: as in :meth:`write_predictions`.
        """
        if isinstance(frame, pa.Table):
            insert_frame(
                con,
                "scores",
                frame,
                PREDICTION_KEY + SCORE_COLUMNS,
                "replace" if replace else "fail",
            )
            if bump:
                bump_data_version(con, runs=_run_ids(frame))
            return frame.num_rows
        if frame.empty:
            return 0
        cols = PREDICTION_KEY + SCORE_COLUMNS
        if set(cols) <= set(frame.columns) and not frame["variant"].isna().any():
            out = frame[list(cols)]
        else:
            out = with_columns(frame, cols)
            out["variant"] = out["variant"].fillna("")
        try:
            data: pd.DataFrame | pa.Table = pa.Table.from_pandas(out, preserve_index=False)
        except ARROW_ERRORS:
            data = out
        insert_frame(con, "scores", data, cols, "replace" if replace else "fail")
        if bump:
            bump_data_version(con, runs=_run_ids(out))
        return len(out)

    @staticmethod
    def rewrite_scores(
        con: duckdb.DuckDBPyConnection,
        run_ids: Sequence[str],
        changed: pa.Table,
        fresh: pa.Table,
        kept: int,
    ) -> int:
        """Bring the runs' stored score rows to a re-score, writing only what differs.

        Stored rows whose values changed are updated in place (their keys, and so the
        primary-key index, stay as they are), new keys inserted, and stored rows of keys the
        re-score no longer has (a prediction whose instance is gone) deleted: a re-score of
        unchanged data writes almost nothing, so the commit has little to checkpoint.

        Args:
            con: a read-write connection (inside the caller's transaction).
            run_ids: the re-scored runs.
            changed: key and score columns of stored keys whose scores differ; only the
                score columns it has are written (the others are unchanged), and with a
                ``stored_rowid`` column (the stored rows' ``rowid``, read in this
                transaction) rows are matched by it.
            fresh: key and score columns of keys with no stored row.
            kept: how many re-scored keys have a stored row (changed or not); when the runs
                hold more, the rest are stale and deleted.

        Returns:
            The rows written: updated, inserted and deleted. The runs' data version
            (:func:`core.store.schema.bump_data_version`) is bumped only when a row was.
        """
        runs = list(run_ids)
        held = con.execute(
            "SELECT count(*) FROM scores WHERE list_contains(?, run_id)", [runs]
        ).fetchall()[0][0]
        written = changed.num_rows + fresh.num_rows
        if held != kept:  # the keys the scoring query (core/store/analysis.py) no longer has
            written += held - kept
            con.execute(
                """
                DELETE FROM scores s WHERE list_contains(?, s.run_id) AND NOT EXISTS (
                    SELECT 1 FROM predictions p JOIN runs r USING (run_id)
                    JOIN instances i
                        ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
                    WHERE p.run_id = s.run_id AND p.instance_id = s.instance_id
                        AND p.condition = s.condition AND p.variant = s.variant)
                """,
                [runs],
            )
        if changed.num_rows and set(changed.column_names) & set(SCORE_COLUMNS):
            view = "_changed_scores"  # the name _update_scores reads
            con.register(view, changed)
            try:
                con.execute(_update_scores(changed.column_names))
            finally:
                try:
                    con.unregister(view)
                except duckdb.Error:
                    pass  # an aborted transaction refuses it; the view dies with the connection
        if fresh.num_rows:
            insert_frame(con, "scores", fresh, PREDICTION_KEY + SCORE_COLUMNS, "fail")
        if written:
            bump_data_version(con, runs=runs)
        return int(written)

    @staticmethod
    def write_cache(con: duckdb.DuckDBPyConnection, rows: Rows) -> int:
        """Add response-cache rows; keys already cached keep their first response.

        Args:
            con: a read-write connection (inside the caller's transaction).
            rows: a DataFrame or row dicts of :data:`core.store.schema.CACHE_COLUMNS`; of
                rows sharing a key, the first is kept.

        Returns:
            The number of distinct keys given.
        """
        if isinstance(rows, pd.DataFrame):
            data: pd.DataFrame | pa.Table = with_columns(rows, CACHE_COLUMNS).drop_duplicates(
                "cache_key"
            )
        else:
            first: dict[str, Mapping[str, Any]] = {}
            for row in rows:
                first.setdefault(row["cache_key"], row)
            unique = list(first.values())
            try:
                data = arrow_table(unique, _CACHE_ARROW)
            except ARROW_ERRORS:
                data = with_columns(pd.DataFrame(unique), CACHE_COLUMNS)
        if len(data) == 0:
            return 0
        if isinstance(data, pa.Table) and data.num_rows <= _SMALL_CACHE_BATCH:
            _insert_new_cache_rows(con, data)
        else:
            insert_frame(con, "response_cache", data, CACHE_COLUMNS, "ignore")
        return len(data)

    def cached_responses(
        self, cache_keys: Sequence[str], con: duckdb.DuckDBPyConnection | None = None
    ) -> dict[str, str]:
        """``{cache_key: response}`` for the keys present in the response cache."""
        keys = sorted(set(cache_keys))
        if not keys:
            return {}
        with self._using(con) as c:
            rows = c.execute(
                "SELECT cache_key, response FROM response_cache "
                "WHERE cache_key IN (SELECT unnest(?::VARCHAR[]))",  # a hash join, not a scan
                [keys],
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def prediction_keys(
        self,
        run_id: str,
        ok_only: bool = False,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> set[tuple[str, str, str]]:
        """``(instance_id, condition, variant)`` of the stored predictions of a run.

        Args:
            run_id: the run.
            ok_only: leave out failed calls (``error`` set), which a resumed run makes again.
            con: an open connection; None opens one.
        """
        sql = "SELECT instance_id, condition, variant FROM predictions WHERE run_id = ?"
        if ok_only:
            sql += " AND coalesce(error, '') = ''"
        with self._using(con) as c:
            rows = c.execute(sql, [run_id]).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    def prediction_rows(
        self, run_id: str, keys: Sequence[tuple[str, str, str]] | None = None
    ) -> pd.DataFrame:
        """Predictions of a run with their scores (score columns NULL when unscored).

        Args:
            run_id: the run.
            keys: only these ``(instance_id, condition, variant)``; None for all.
        """
        sql = (
            "SELECT p.*, s.* EXCLUDE (run_id, instance_id, condition, variant) "
            "FROM predictions p LEFT JOIN scores s USING (run_id, instance_id, condition, variant) "
            "WHERE p.run_id = ?"
        )
        params: list[Any] = [run_id]
        if keys is not None:
            sql += " AND list_contains(?, p.instance_id || chr(31) || p.condition || chr(31) || "
            sql += "p.variant)"
            params.append(["\x1f".join(k) for k in keys])
        with self.connect(read_only=True) as con:
            return con.execute(sql + " ORDER BY p.created_at, p.instance_id", params).df()

    def instance_outcomes(
        self, dataset: str, run_ids: Sequence[str], limit: int = 5000
    ) -> pd.DataFrame:
        """Instances of a dataset with their question and failure count (Case view picker).

        Args:
            dataset: the dataset.
            run_ids: runs whose plain predictions (variant ``''``) count.
            limit: the first ``limit`` instances, in dataset order.

        Returns:
            ``instance_id, question, n_predictions, n_failed``; a prediction failed when it
            has an ``error`` or a failure label other than ``success``.
        """
        with self.connect(read_only=True) as con:
            return con.execute(
                """
                WITH i AS (SELECT instance_id, question, ord FROM instances
                           WHERE dataset_id = ? ORDER BY ord LIMIT ?),
                p AS (SELECT p.instance_id, count(*) AS n_predictions,
                             count(*) FILTER (WHERE coalesce(p.error, '') <> ''
                                 OR coalesce(s.failure_label, 'success') <> 'success')
                                 AS n_failed
                      FROM predictions p LEFT JOIN scores s
                          USING (run_id, instance_id, condition, variant)
                      WHERE list_contains(?, p.run_id) AND p.variant = ''
                          AND p.instance_id IN (SELECT instance_id FROM i)
                      GROUP BY p.instance_id)
                SELECT i.instance_id, i.question, coalesce(p.n_predictions, 0) AS n_predictions,
                       coalesce(p.n_failed, 0) AS n_failed
                FROM i LEFT JOIN p USING (instance_id) ORDER BY i.ord
                """,
                [dataset, int(limit), list(run_ids)],
            ).df()


#: Up to this many cache entries, :meth:`RecordsMixin.write_cache` looks the keys up and
#: inserts the new ones as plain values: ~1 ms of CPU for one entry where DuckDB's
#: ``INSERT OR IGNORE`` of a registered table costs ~3 ms (the engine's small batches).
_SMALL_CACHE_BATCH = 64
_CACHE_VALUES = "(" + ", ".join("?" * len(CACHE_COLUMNS)) + ")"
_CACHE_COLUMN_LIST = ", ".join(CACHE_COLUMNS)


def _insert_new_cache_rows(con: duckdb.DuckDBPyConnection, data: pa.Table) -> None:
    """``INSERT OR IGNORE`` of a few distinct-key cache rows, as a lookup and a plain insert.

    Stores exactly what ``INSERT OR IGNORE`` would: the rows whose key is not cached yet
    (the lookup and the insert are in the caller's transaction, which holds the file).
    """
    keys = data.column("cache_key").to_pylist()
    placeholders = ", ".join("?" * len(keys))
    held = {
        r[0]
        for r in con.execute(
            f"SELECT cache_key FROM response_cache WHERE cache_key IN ({placeholders})", keys
        ).fetchall()
    }
    rows = [r for r in data.select(list(CACHE_COLUMNS)).to_pylist() if r["cache_key"] not in held]
    if not rows:
        return
    params = [r[c] for r in rows for c in CACHE_COLUMNS]
    con.execute(
        f"INSERT INTO response_cache ({_CACHE_COLUMN_LIST}) VALUES "
        + ", ".join([_CACHE_VALUES] * len(rows)),
        params,
    )


def _run_ids(rows: pd.DataFrame | pa.Table) -> list[str]:
    """The distinct run ids of written rows (their datasets' data versions are bumped)."""
    col = rows.column("run_id") if isinstance(rows, pa.Table) else rows["run_id"]
    values = col.unique().to_pylist() if isinstance(rows, pa.Table) else col.unique().tolist()
    return [str(v) for v in values if v is not None]
