"""Run rows in the store: save and finish a run, progress, error counts, delete, list."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from core.store.batch_rows import drop_batch_calls, drop_judge_calls
from core.store.connection import StoreBase, StoreError
from core.store.judgments import delete_judgments
from core.store.locks import hold_run, holder
from core.store.schema import RUN_COLUMNS, RUN_JSON_COLUMNS, bump_data_version

__all__ = ["CONDITION_KINDS", "RUN_KINDS", "RUN_STATUSES", "RunsMixin"]


class RunsMixin(StoreBase):
    """The ``runs`` table of :class:`core.store.Store`, and deleting a run's results."""

    def run_lock(self, run_id: str) -> AbstractContextManager[Path]:
        """Hold run ``run_id`` for a ``with`` block: one process runs a run name at a time.

        The lock file ``<store>.locks/<run>.lock`` (:func:`core.store.locks.hold_run`) is
        taken at once or not at all, dies with its process (a killed run can be resumed)
        and may be taken again by the thread holding it.

        Raises:
            core.store.locks.RunBusyError: the run is running in another process (the
                message names the run and the pid).
        """
        return hold_run(self.path, run_id)

    def insert_run(self, con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> None:
        """Insert (or replace) a run row; JSON-valued fields are serialised here."""
        row = _encoded(run)
        values = [row.get(col) for col in RUN_COLUMNS]
        # before the write: a replaced row's old dataset is bumped too (and the new one)
        bump_data_version(con, datasets=[row.get("dataset_id")], runs=[row["run_id"]])
        con.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(RUN_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
            values,
        )
        # the dataset as this run finds it (changed_runs compares)
        con.execute(
            "UPDATE runs SET dataset_fingerprint = (SELECT fingerprint FROM datasets "
            "WHERE dataset_id = runs.dataset_id) WHERE run_id = ?",
            [row["run_id"]],
        )

    def run_row(
        self, run_id: str, con: duckdb.DuckDBPyConnection | None = None
    ) -> dict[str, Any] | None:
        """A run's row with its JSON fields decoded, or None when there is no such run."""
        with self._using(con) as c:
            cur = c.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            if row is None:
                return None
            out = dict(zip([d[0] for d in cur.description], row, strict=True))
        for key in RUN_JSON_COLUMNS:
            if isinstance(out.get(key), str):
                out[key] = json.loads(out[key])
        out["status"] = self.live_status(run_id, out.get("status"))
        return out

    def live_status(self, run_id: str, status: Any) -> Any:
        """``interrupted`` for a run stored as ``running`` whose process is gone.

        A running run holds its lock (:func:`core.store.locks.holder`) until it ends, and the
        kernel drops the lock with its process: stored ``running`` with nobody holding the
        lock means the process was killed or crashed before it could finish the run.
        Resuming it (the same command again) continues where it stopped.
        """
        if status == "running" and holder(self.path, run_id) is None:
            return "interrupted"
        return status

    def save_run(self, run: dict[str, Any], con: duckdb.DuckDBPyConnection | None = None) -> None:
        """Insert a run, or update the given fields of a stored one (``created_at`` is kept).

        Args:
            run: ``run_id`` plus any of the run columns; JSON-valued fields may be objects.
            con: a read-write connection inside the caller's transaction; None opens one.
        """
        if con is None:
            with self.transaction() as own:
                return self.save_run(run, own)
        row = _encoded(run)
        cols = [c for c in RUN_COLUMNS if c in row and c != "run_id"]
        if not self.run_exists(con, row["run_id"]):
            self.insert_run(con, row)
        elif cols:
            bump_data_version(con, datasets=[row.get("dataset_id")], runs=[row["run_id"]])
            sets = ", ".join(f"{c} = ?" for c in cols)
            con.execute(
                f"UPDATE runs SET {sets} WHERE run_id = ?",
                [row[c] for c in cols] + [row["run_id"]],
            )
        return None

    def finish_run(
        self,
        run_id: str,
        status: str,
        n_planned: int | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
        model_seconds: float | None = None,
        wall_seconds: float | None = None,
        *,
        scopes: Sequence[str] | None = None,
    ) -> str | None:
        """Set a run's status, finish time, ``n_done`` and (when given) ``n_planned``.

        ``status`` ``done`` becomes ``partial`` when some stored call of the run failed and
        ``failed`` when every one did; any other status is kept as given. With ``con`` it runs
        inside the caller's transaction; otherwise in its own. With ``wall_seconds`` it is
        also the run's last :meth:`record_progress` (in the same update, the engine's final
        write): ``model_seconds`` added, ``wall_seconds`` replaced, this process recorded.
        ``scopes``: the data-version scopes of this run an earlier committed bump returned
        (:meth:`record_progress`, :func:`core.store.schema.bump_data_version`).

        Returns:
            The status stored (None when there is no such run).
        """
        if con is None:
            with self.transaction() as own:
                return self.finish_run(run_id, status, n_planned, own, model_seconds, wall_seconds)
        timed = wall_seconds is not None
        bump_data_version(con, runs=[run_id], scopes=scopes)
        row = con.execute(
            f"UPDATE runs SET status = CASE WHEN ? <> 'done' THEN ? {_FINAL_STATUS} END, "
            "finished_at = current_timestamp, n_planned = coalesce(?, n_planned), "
            "n_done = c.n, n_errors = c.n_errors, heartbeat_at = current_timestamp, "
            "model_seconds = CASE WHEN ? THEN coalesce(model_seconds, 0) + ? "
            "ELSE model_seconds END, wall_seconds = coalesce(?, wall_seconds), "
            "pid = CASE WHEN ? THEN ? ELSE pid END, host = CASE WHEN ? THEN ? ELSE host END "
            f"FROM ({_COUNTS}) c WHERE runs.run_id = ? RETURNING status",
            [
                status,
                status,
                n_planned,
                timed,
                float(model_seconds or 0.0),
                None if wall_seconds is None else float(wall_seconds),
                timed,
                os.getpid(),
                timed,
                socket.gethostname(),
                run_id,
                run_id,
                run_id,
            ],
        ).fetchone()
        return None if row is None else str(row[0])

    def record_progress(
        self,
        con: duckdb.DuckDBPyConnection,
        run_id: str,
        model_seconds: float,
        wall_seconds: float,
        n_planned: int | None = None,
        *,
        added: tuple[int, int, int, int] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> list[str]:
        """Mark a run ``running`` by this process, update its counts, add model time.

        ``n_done`` and ``n_errors`` are recounted, ``n_planned`` set when given,
        ``model_seconds`` added to and ``wall_seconds`` replaced; ``pid``, ``host`` and
        ``heartbeat_at`` say which process is running it and when it last wrote.

        Args:
            con: a read-write connection inside the caller's transaction.
            run_id: the run.
            model_seconds: server seconds to add.
            wall_seconds: the run's wall seconds so far.
            n_planned: the run's planned calls (kept when None).
            added: ``(rows, plain rows, failed rows, failed plain rows)`` this transaction
                stored under keys the run did not have, where the run row's counts are known
                to be exact (the caller's previous ``record_progress`` committed and nothing
                else wrote the run since): they are added to the counts instead of a recount
                of the run's predictions, whose cost grows with the run (the engine's writer,
                once a second). Plain rows have the variant ``''``; which of the two counts
                applies is the run's kind's (as :data:`_COUNTS`). None: recount.
            scopes: the data-version scopes an earlier committed call for this run returned
                (:func:`core.store.schema.bump_data_version`).

        Returns:
            The data-version scopes bumped, for ``scopes`` next time.
        """
        bumped = bump_data_version(con, runs=[run_id], scopes=scopes)
        common = [n_planned, float(model_seconds), float(wall_seconds), os.getpid()]
        common.append(socket.gethostname())
        if added is None:
            counts, params = "n_done = c.n, n_errors = c.n_errors", []
            source, tail = f" FROM ({_COUNTS}) c", [run_id, run_id, run_id]
        else:
            counts = (
                f"n_done = coalesce(n_done, 0) + CASE WHEN {_PLAIN_KIND} THEN ? ELSE ? END, "
                f"n_errors = coalesce(n_errors, 0) + CASE WHEN {_PLAIN_KIND} THEN ? ELSE ? END"
            )
            rows, plain, failed, failed_plain = (int(x) for x in added)
            params, source, tail = [plain, rows, failed_plain, failed], "", [run_id]
        con.execute(
            f"UPDATE runs SET status = 'running', {counts}, "
            "n_planned = coalesce(?, n_planned), "
            "model_seconds = coalesce(model_seconds, 0) + ?, wall_seconds = ?, "
            "pid = ?, host = ?, heartbeat_at = current_timestamp"
            f"{source} WHERE runs.run_id = ?",
            params + common + tail,
        )
        return bumped

    def error_summary(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Failed calls of the runs grouped by run and error text: ``run_id, error, n``."""
        with self.connect(read_only=True) as c:
            return c.execute(
                "SELECT run_id, error, count(*) AS n FROM predictions "
                "WHERE list_contains(?, run_id) AND coalesce(error, '') <> '' "
                "GROUP BY run_id, error ORDER BY n DESC, run_id, error",
                [list(run_ids)],
            ).df()

    def error_counts(self, run_id: str, limit: int = 3) -> list[tuple[str, int]]:
        """The most frequent errors of a run's failed calls, ``[(error, calls), ...]``."""
        with self.connect(read_only=True) as c:
            return [
                (str(e), int(n))
                for e, n in c.execute(
                    "SELECT error, count(*) AS n FROM predictions "
                    "WHERE run_id = ? AND coalesce(error, '') <> '' "
                    "GROUP BY error ORDER BY n DESC, error LIMIT ?",
                    [run_id, int(limit)],
                ).fetchall()
            ]

    @staticmethod
    def run_exists(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
        """True when a run of that id is stored."""
        row = con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return bool(row[0])

    @staticmethod
    def delete_run_results(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> None:
        """Delete the predictions, scores and judgments of the runs (the run rows stay).

        Judgments go both ways: a judge run's own and other judge runs' judgments of these
        runs' predictions (:func:`core.store.judgments.delete_judgments`).
        """
        bump_data_version(con, runs=run_ids)
        con.execute("DELETE FROM predictions WHERE list_contains(?, run_id)", [list(run_ids)])
        con.execute("DELETE FROM scores WHERE list_contains(?, run_id)", [list(run_ids)])
        delete_judgments(con, run_ids)

    @staticmethod
    def delete_scores(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> None:
        """Delete the score rows of the runs (before they are recomputed)."""
        bump_data_version(con, runs=run_ids)
        con.execute("DELETE FROM scores WHERE list_contains(?, run_id)", [list(run_ids)])

    def delete_run(self, run_id: str) -> int:
        """Delete a run, its predictions, scores and annotations; returns predictions deleted.

        Raises:
            StoreError: no such run.
        """
        with self.transaction() as con:
            if not self.run_exists(con, run_id):
                raise StoreError(f"no run '{run_id}' in {self.path}")
            return self.drop_run(con, run_id)

    def drop_run(self, con: duckdb.DuckDBPyConnection, run_id: str) -> int:
        """:meth:`delete_run` inside the caller's transaction; returns predictions deleted."""
        n = con.execute("SELECT count(*) FROM predictions WHERE run_id = ?", [run_id]).fetchone()[0]
        self.delete_run_results(con, [run_id])
        # its blind-annotation sample and the labels people gave it (issue 20)
        con.execute(
            "DELETE FROM annotations WHERE item_id IN "
            "(SELECT item_id FROM annotation_items WHERE run_id = ?)",
            [run_id],
        )
        con.execute("DELETE FROM annotation_items WHERE run_id = ?", [run_id])
        drop_batch_calls(con, run_id)  # the calls it exported for a batch (issue 21)
        drop_judge_calls(con, run_id)
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        return int(n)

    def discard_unstarted_run(self, run_id: str) -> bool:
        """Delete run ``run_id`` if it is still ``planned`` with no stored call; True if so.

        What a command that created the run and was then refused (a damaged store, a bad
        setting found while planning) undoes, so a refused command writes nothing.
        """
        with self.transaction() as con:
            row = con.execute(
                "SELECT status, (SELECT count(*) FROM predictions WHERE run_id = ?) "
                "FROM runs WHERE run_id = ?",
                [run_id, run_id],
            ).fetchall()
            if not row or row[0][0] != "planned" or row[0][1]:
                return False
            self.drop_run(con, run_id)
        return True

    def changed_runs(self, con: duckdb.DuckDBPyConnection | None = None) -> list[dict[str, Any]]:
        """Runs whose dataset changed (or is gone) since they ran (issue 35 item 1).

        Each run records its dataset's fingerprint when it is created
        (:data:`core.store.schema.DATASET_FINGERPRINT`); a dataset replaced with
        ``--with-runs keep-orphans`` has another one. Their stored predictions were made on
        other instances or gold, so their scores against the stored dataset mean little.

        Returns:
            ``{"run_id", "dataset_id", "why"}`` per such run, by run id.
        """
        with self._using(con) as c:
            rows = c.execute(
                "SELECT r.run_id, r.dataset_id, d.dataset_id IS NULL FROM runs r "
                "LEFT JOIN datasets d USING (dataset_id) "
                "WHERE r.dataset_fingerprint IS DISTINCT FROM d.fingerprint "
                "AND (r.dataset_fingerprint IS NOT NULL OR d.fingerprint IS NOT NULL) "
                "ORDER BY r.run_id"
            ).fetchall()
        return [
            {
                "run_id": r,
                "dataset_id": d,
                "why": "its dataset is gone" if gone else "its dataset changed since it ran",
            }
            for r, d, gone in rows
        ]

    def runs_frame(self, live: bool = True) -> pd.DataFrame:
        """Every run with its prediction count, newest first.

        ``status`` is the live one (``interrupted`` for a running run whose process is gone,
        :meth:`run_row`) unless ``live`` is False (the stored one, without looking at each
        run's lock: for callers that only need names, datasets and kinds); ``n_errors``
        counts its failed calls.
        """
        with self.connect(read_only=True) as con:
            frame = con.execute(
                """
                SELECT r.*, coalesce(p.n, 0) AS n_predictions
                FROM runs r LEFT JOIN (
                    SELECT run_id, count(*) AS n FROM predictions GROUP BY run_id
                ) p USING (run_id)
                ORDER BY r.created_at DESC, r.run_id
                """
            ).df()
        if live and not frame.empty:
            frame["status"] = [
                self.live_status(r, st)
                for r, st in zip(frame["run_id"], frame["status"], strict=True)
            ]
        return frame

    def resolve_runs(self, selector: str | None = None) -> list[str]:
        """Run ids matching ``selector`` (a run id or a dataset name); all runs when None."""
        with self.connect(read_only=True) as con:
            if selector is None:
                rows = con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()
            else:
                rows = con.execute(
                    "SELECT run_id FROM runs WHERE run_id = ? OR dataset_id = ? ORDER BY run_id",
                    [selector, selector],
                ).fetchall()
        if not rows:
            what = f"matching '{selector}'" if selector else "at all"
            raise StoreError(f"no runs {what} in {self.path}")
        return [r[0] for r in rows]


#: A run's stored calls and failed calls (parameters: the run id, twice). The calls of a
#: four-condition run are its plain rows: rows with a variant stored beside them are Case-view
#: reruns (:mod:`core.execution.rerun`), which never change the run's counts or status.
_COUNTS = (
    "SELECT count(*) AS n, count(*) FILTER (WHERE coalesce(error, '') <> '') AS n_errors "
    "FROM predictions WHERE run_id = ? AND (variant = '' OR coalesce("
    "(SELECT kind FROM runs WHERE run_id = ?), 'conditions') NOT IN ('conditions', 'imported'))"
)
#: A run whose counts are of its plain rows only (:data:`_COUNTS`), as SQL on its row.
_PLAIN_KIND = "coalesce(kind, 'conditions') IN ('conditions', 'imported')"
#: The status a finished execution leaves: ``done`` when no stored call failed, ``failed``
#: when every one did, ``partial`` otherwise (continues a ``CASE`` whose first branch keeps a
#: status other than ``done``: cancelled, failed).
_FINAL_STATUS = (
    "WHEN c.n_errors = 0 THEN 'done' WHEN c.n_errors >= c.n THEN 'failed' ELSE 'partial'"
)

#: Run kinds (``runs.kind``): what produced a run's predictions.
RUN_KINDS = (
    "conditions",
    "interventions",
    "probes",
    "judge",
    "imported",
    "rerun",
    "attribution",
)
#: Kinds whose runs are four-condition runs (the condition, ONCU and fan-in views).
CONDITION_KINDS = ("conditions", "imported")
#: Every run status: ``planned`` (created, no call stored yet), ``running``, ``done``,
#: ``partial`` (some calls failed), ``failed`` (every call failed, or the engine failed),
#: ``cancelled``, ``interrupted`` (stored ``running``, process gone: not stored, computed).
RUN_STATUSES = (
    "planned",
    "running",
    "waiting",
    "done",
    "partial",
    "failed",
    "cancelled",
    "interrupted",
)


def _encoded(run: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a run row with its JSON-valued fields serialised (text and None kept)."""
    row = dict(run)
    for key in RUN_JSON_COLUMNS:
        if key in row and not isinstance(row[key], str | None):
            row[key] = json.dumps(row[key], sort_keys=True, default=str)
    return row
