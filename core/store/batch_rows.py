"""The calls of a run exported to a batch file, kept until their answers are imported.

``python -m core batch export`` (:mod:`core.batch.runs`) plans a run's calls and writes them
to an OpenAI Batch input file; what the import needs of each call and the batch output does
not carry (its prompt hash, the passage ids shown, the planner's notes) is kept here, in the
table ``batch_calls`` keyed like a prediction, so ``batch import`` stores an answer exactly as
the live engine would without planning the run again. The table is created on the first
export (``CREATE TABLE IF NOT EXISTS``); a store that never exported a batch has none, and
reads of it are then empty.

A judge run's exported calls (``batch export judge``, :mod:`core.batch.judges`) are kept the
same way in ``batch_judge_calls``, keyed like a judgment: the rubric template whose parser
reads the reply, and the prompt hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from core.store.frames import insert_frame

__all__ = [
    "BATCH_CALL_COLUMNS",
    "JUDGE_CALL_COLUMNS",
    "batch_calls",
    "drop_batch_calls",
    "drop_judge_calls",
    "judge_calls",
    "save_batch_calls",
    "save_judge_calls",
]

#: The columns of ``batch_calls`` (its key first).
BATCH_CALL_COLUMNS = (
    "run_id",
    "instance_id",
    "condition",
    "variant",
    "prompt_hash",
    "input_passage_ids",
    "meta",
)

_DDL = """
CREATE TABLE IF NOT EXISTS batch_calls (
    run_id VARCHAR NOT NULL,
    instance_id VARCHAR NOT NULL,
    condition VARCHAR NOT NULL,
    variant VARCHAR NOT NULL,
    prompt_hash VARCHAR NOT NULL,
    input_passage_ids VARCHAR[],
    meta VARCHAR,                     -- JSON
    exported_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (run_id, instance_id, condition, variant)
)
"""

_ARROW = pa.schema(
    [
        (c, pa.list_(pa.string()) if c == "input_passage_ids" else pa.string())
        for c in BATCH_CALL_COLUMNS
    ]
)


def _exists(con: duckdb.DuckDBPyConnection, table: str = "batch_calls") -> bool:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE database_name = current_database() AND table_name = ?",
        [table],
    ).fetchall()
    return bool(rows and rows[0][0])


def save_batch_calls(con: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> int:
    """Keep exported calls (row dicts of :data:`BATCH_CALL_COLUMNS`); a stored key is replaced.

    Args:
        con: a read-write connection inside the caller's transaction.
        rows: one dict per call (``meta`` as JSON text).

    Returns:
        The rows written.
    """
    con.execute(_DDL)
    if not rows:
        return 0
    table = pa.Table.from_arrays(
        [pa.array([r.get(f.name) for r in rows], type=f.type) for f in _ARROW], schema=_ARROW
    )
    insert_frame(con, "batch_calls", table, BATCH_CALL_COLUMNS, "replace")
    return len(rows)


def drop_batch_calls(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Forget every exported call of a run (a new run of a deleted run's name starts clean)."""
    if _exists(con):
        con.execute("DELETE FROM batch_calls WHERE run_id = ?", [run_id])


def batch_calls(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> dict[tuple[str, str, str], tuple[str, list[str], str | None]]:
    """The exported calls of a run: ``(instance, condition, variant) -> (prompt hash, ids, meta)``.

    Empty when the run exported nothing (or the store never exported a batch).
    """
    if not _exists(con):
        return {}
    rows = con.execute(
        "SELECT instance_id, condition, variant, prompt_hash, input_passage_ids, meta "
        "FROM batch_calls WHERE run_id = ?",
        [run_id],
    ).fetchall()
    return {(r[0], r[1], r[2]): (r[3], list(r[4] or ()), r[5]) for r in rows}


#: The columns of ``batch_judge_calls`` (its key first).
JUDGE_CALL_COLUMNS = (
    "run_id",
    "target_run",
    "instance_id",
    "condition",
    "item",
    "template",
    "prompt_hash",
)

_JUDGE_DDL = """
CREATE TABLE IF NOT EXISTS batch_judge_calls (
    run_id VARCHAR NOT NULL,
    target_run VARCHAR NOT NULL,
    instance_id VARCHAR NOT NULL,
    condition VARCHAR NOT NULL,
    item VARCHAR NOT NULL,
    template VARCHAR NOT NULL,
    prompt_hash VARCHAR NOT NULL,
    exported_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (run_id, target_run, instance_id, condition, item)
)
"""

_JUDGE_ARROW = pa.schema([(c, pa.string()) for c in JUDGE_CALL_COLUMNS])


def save_judge_calls(con: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> int:
    """Keep a judge run's exported calls (dicts of :data:`JUDGE_CALL_COLUMNS`); a key replaces.

    Returns:
        The rows written.
    """
    con.execute(_JUDGE_DDL)
    if not rows:
        return 0
    table = pa.Table.from_arrays(
        [pa.array([r.get(f.name) for r in rows], type=f.type) for f in _JUDGE_ARROW],
        schema=_JUDGE_ARROW,
    )
    insert_frame(con, "batch_judge_calls", table, JUDGE_CALL_COLUMNS, "replace")
    return len(rows)


def drop_judge_calls(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Forget every exported call of a judge run."""
    if _exists(con, "batch_judge_calls"):
        con.execute("DELETE FROM batch_judge_calls WHERE run_id = ?", [run_id])


def judge_calls(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> dict[tuple[str, str, str, str], tuple[str, str]]:
    """A judge run's exported calls: ``(target, instance, condition, item) -> (template, hash)``.

    Empty when the run exported none (or the store never exported a judge batch).
    """
    if not _exists(con, "batch_judge_calls"):
        return {}
    rows = con.execute(
        "SELECT target_run, instance_id, condition, item, template, prompt_hash "
        "FROM batch_judge_calls WHERE run_id = ?",
        [run_id],
    ).fetchall()
    return {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in rows}
