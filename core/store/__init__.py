"""The DuckDB store: schema, migrations, connections and every SQL statement of the project.

One DuckDB file holds datasets, instances, passages, runs, predictions and scores (SPEC §2).
DuckDB allows one read-write *process* or many read-only processes, never both, so writers
use short-lived connections and every open retries while another process holds the lock.
All values reach SQL as parameters; identifiers never come from users.

:class:`Store` is composed of one part per concern, each in its own module:
:mod:`~core.store.connection` (opening, locks, transactions), :mod:`~core.store.schema` (DDL,
migrations, column constants), :mod:`~core.store.datasets`, :mod:`~core.store.runs`,
:mod:`~core.store.records` (predictions, scores, response cache) and
:mod:`~core.store.analysis` (joined read queries; :mod:`~core.store.fanin_rows`, the fan-in
page's one query; :mod:`~core.store.rescore_rows`, the re-score's read) and
:mod:`~core.store.embeddings` (the dense retriever's vectors, kept for reuse);
:mod:`~core.store.failure_rows` holds the failure browser's filtered pages;
:mod:`~core.store.judgments` the judge runs' judgments (issue 20), CRUX ratings included.
:mod:`~core.store.merge` exports a store as Parquet and merges stores from several machines.
:mod:`~core.store.locks` keeps one process per run name (a lock file beside the store,
:meth:`Store.run_lock`).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.store.analysis import AnalysisMixin
from core.store.cell_rows import CellsMixin
from core.store.connection import DEFAULT_DB, StoreError, default_db_path
from core.store.datasets import DatasetInfo, DatasetsMixin
from core.store.embeddings import EmbeddingsMixin
from core.store.failure_rows import FailuresMixin
from core.store.judgments import JudgmentsMixin
from core.store.locks import RunBusyError
from core.store.records import RecordsMixin, Rows
from core.store.runs import CONDITION_KINDS, RUN_KINDS, RUN_STATUSES, RunsMixin
from core.store.schema import (
    CACHE_COLUMNS,
    CELL_COLUMNS,
    PREDICTION_COLUMNS,
    SCHEMA_VERSION,
    SCORE_COLUMNS,
    read_data_version,
)

__all__ = [
    "CACHE_COLUMNS",
    "CELL_COLUMNS",
    "DEFAULT_DB",
    "PREDICTION_COLUMNS",
    "SCHEMA_VERSION",
    "SCORE_COLUMNS",
    "CONDITION_KINDS",
    "RUN_KINDS",
    "RUN_STATUSES",
    "DatasetInfo",
    "Rows",
    "RunBusyError",
    "Store",
    "StoreError",
    "default_db_path",
]


class Store(
    # First: its CRUX rating writes (schema 8, judgments) replace the answerability-table
    # ones of DatasetsMixin (write_crux_judgments, _delete_dataset).
    JudgmentsMixin,
    DatasetsMixin,
    RunsMixin,
    RecordsMixin,
    AnalysisMixin,
    CellsMixin,
    EmbeddingsMixin,
    FailuresMixin,
):
    """A DuckDB store file. Cheap to create; connections are opened per operation.

    Args:
        path: the DuckDB file (created with its parent folder on the first write).
        lock_timeout: seconds to keep retrying while another process holds the file lock.
    """

    def data_version(self, scope: str | None = None, runs: Sequence[str] = ()) -> tuple[int, ...]:
        """What the dashboard's caches are keyed by: changes whenever what a view reads does.

        Every write that changes what a page reads (datasets, runs and their status or
        progress, predictions, scores, CRUX judgments) bumps counters in the same transaction
        (:func:`core.store.schema.bump_data_version`); the response cache, run lock files and
        reads do not. One read-only query on a connection attached to the process's in-memory
        DuckDB (a few ms).

        Args:
            scope: a dataset name (its counter: changes to that dataset and its runs), or None
                for the whole store (every change).
            runs: run ids the view reads besides; the counter of each one's dataset is added.

        Returns:
            ``(store id, scope counter, *run datasets' counters)``; ``(0, 0)`` for a store
            that no write of this version has touched yet.
        """
        with self.attached(read_only=True) as con:
            return read_data_version(con, scope, runs)
