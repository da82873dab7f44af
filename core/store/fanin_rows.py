"""The fan-in analysis's one read query: per-prediction codes and every answer score (SPEC §9).

:func:`fanin_rows` reads, in one DuckDB query, what :mod:`core.fanin.stats` needs to summarize
the fan-in views for *every* answer score field: the dashboard runs it once per selection of
runs and filters and picks the score field afterwards (issue 17 item 6). Per plain-condition
prediction (``variant = ''``) it returns small numeric columns only -- no strings, no lists:
the string keys are joined once in DuckDB and the rows come back as numpy arrays. The answer
scores are read apart (by position when the score rows pair up with the predictions, every
pair's key checked; else keyed by run, instance and condition) and each score column is
gathered on first use (:class:`ScoreColumns`).

At study scale (``scale=True``; issue 38: ten million predictions) the same rows come from
three cheaper reads, numbered and paired in numpy instead of joined on strings in DuckDB
(:func:`_scaled_rows`): the selected datasets' instances with their gold ids once (a
temporary table of the connection), the predictions and the score rows each joined to it
alone. The rows and scores are those of the one-query read (the tests compare them row by
row); only the way there differs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.store.connection import StoreBase

__all__ = ["CONDITION_CODES", "SCALE_ROWS", "ScoreColumns", "fanin_rows"]

#: Above this many predictions in the runs, the fan-in views read their rows as at study
#: scale (:func:`fanin_rows` with ``scale``; the dashboard's threshold is
#: :data:`core.views.fanin.STORE_ROWS`, this one's default).
SCALE_ROWS = 2_000_000

#: The four plain conditions, coded in the order their names sort (the systems' order).
CONDITION_CODES = ("full_context", "no_evidence", "oracle", "retrieved")
#: The answer score columns every row carries (:data:`core.scoring.rows.ANSWER_SCORES`).
_SCORES = ("em_strict", "f1_strict", "em_relaxed", "f1_relaxed", "soft_correct")
#: Every character ``str.isspace`` calls white space (a blank error is no error), written out:
#: finding them by testing all 1.1M code points cost 70 ms at every import of this module
#: (``tests/test_fanin_rows_sql.py`` checks the two agree).
_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)
#: Rows per Arrow batch of the reads: one chunk per DuckDB thread, so a column comes to numpy
#: without a copy (the default million-row batches made 10M rows 78 chunks, and their
#: concatenation cost about a second at study scale).
_BATCH = 1 << 30

# One statement. ``inst`` joins every instance of the selected datasets with its gold ids
# and fan-in once (250k rows rather than 1M); ``code`` numbers instance ids (equal ids, equal
# codes, across datasets too). Pairing (``pair``) keeps, with several runs of one dataset,
# the instances every run holds (any variant-'' prediction counts, as
# :func:`core.views.common.pair_runs`; ``_PAIRED``); the plain-condition filter comes after.
# Gold ids are distinct (the passages' key): |set(pack) ∩ gold| counts the gold ids in the
# pack; the pack's size counts each id at its first position only (NULL included, as a set).
# A retrieved / oracle call whose shown passages are not stored (NULL input_passage_ids: an
# imported release's retrieved calls) has no pack: ER / EP missing, never 0 (issue 36.1).
_SQL = """
WITH sel AS (
    SELECT run_id, dataset_id, list_position($runs, run_id) - 1 AS run_no FROM runs
    WHERE list_contains($runs, run_id)
),
gold AS (
    SELECT dataset_id, instance_id, gold_ids,
           len(list_filter(docs, lambda x, i: list_position(docs, x) = i)) AS fan_in
    FROM (SELECT dataset_id, instance_id, list(passage_id) AS gold_ids, list(doc_id) AS docs
          FROM passages WHERE is_gold AND dataset_id IN (SELECT dataset_id FROM sel)
          GROUP BY ALL)
),
inst AS (
    SELECT i.dataset_id, i.instance_id, i.ord, i.rowid AS inst_row,
           dense_rank() OVER (ORDER BY i.instance_id) - 1 AS code,
           coalesce(g.gold_ids, []) AS gold_ids, coalesce(g.fan_in, 0) AS fan_in
    FROM instances i LEFT JOIN gold g USING (dataset_id, instance_id)
    WHERE i.dataset_id IN (SELECT dataset_id FROM sel){only}
),
pred AS {materialized} (
    SELECT r.run_no, r.dataset_id AS dataset, i.code, i.ord, i.inst_row, i.fan_in, i.gold_ids,
           p.rowid AS prow, p.condition, p.input_passage_ids, p.cited_ids, p.error
    FROM predictions p
    JOIN sel r USING (run_id)
    JOIN inst i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
    WHERE p.variant = ''
),
paired AS ({paired}),
packed AS (
    SELECT *,
           CASE WHEN condition IN ('retrieved', 'oracle') THEN input_passage_ids
                WHEN condition = 'full_context' THEN coalesce(cited_ids, [])
           END AS pack
    FROM paired
    WHERE condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')
)
SELECT run_no,
       CASE condition WHEN 'full_context' THEN 0 WHEN 'no_evidence' THEN 1
                      WHEN 'oracle' THEN 2 ELSE 3 END::TINYINT AS cond,
       code::INTEGER AS code, ord, inst_row, prow, fan_in::INTEGER AS fan_in,
       (error IS NOT NULL AND length(trim(error, $ws)) > 0) AS err,
       pack IS NOT NULL AND len(gold_ids) > 0 AS has_pack,
       coalesce(len(list_filter(gold_ids, lambda g: list_contains(pack, g))), 0)::INTEGER
           AS n_hits,
       len(gold_ids)::INTEGER AS n_gold,
       coalesce(len(list_filter(pack, lambda x, i: list_position(pack, x) = i)), 0)::INTEGER
           AS n_pack
FROM packed
"""

# The answer scores of the runs' plain-condition predictions, read apart and matched to the
# rows in numpy (several times cheaper than joining them on their four string keys above).
# First by position: the score writer stores a run's score rows in the order of its
# predictions, so the two filtered scans usually pair up row by row; ``same`` checks every
# pair's key (the keys are the primary keys, NOT NULL; a row without a partner has NULL keys),
# and the scores are used only when every pair holds, keyed by the prediction's rowid.
_SCORES_BY_POSITION_SQL = """
SELECT p.prow, coalesce(p.run_id = s.run_id AND p.instance_id = s.instance_id
                        AND p.condition = s.condition, false) AS same,
       s.em_strict, s.f1_strict, s.em_relaxed, s.f1_relaxed, s.soft_correct
FROM (SELECT rowid AS prow, run_id, instance_id, condition FROM predictions
      WHERE list_contains($runs, run_id) AND variant = ''
            AND condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')) p
POSITIONAL JOIN
     (SELECT run_id, instance_id, condition,
             em_strict, f1_strict, em_relaxed, f1_relaxed, soft_correct
      FROM scores WHERE list_contains($runs, run_id) AND variant = ''
            AND condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')) s
"""

# Otherwise (score rows in another order, or missing) keyed by run number, instance rowid
# and condition code (one row per key).
_SCORES_SQL = """
SELECT list_position($runs, s.run_id) - 1 AS run_no, i.rowid AS inst_row,
       CASE s.condition WHEN 'full_context' THEN 0 WHEN 'no_evidence' THEN 1
                        WHEN 'oracle' THEN 2 ELSE 3 END::TINYINT AS cond,
       s.em_strict, s.f1_strict, s.em_relaxed, s.f1_relaxed, s.soft_correct
FROM scores s
JOIN runs r ON r.run_id = s.run_id
JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
WHERE list_contains($runs, s.run_id) AND s.variant = ''
      AND s.condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')
"""


_PAIRED = """
    SELECT * FROM pred
    WHERE (SELECT count(DISTINCT dataset) FROM pred) <> 1
       OR code IN (SELECT code FROM pred GROUP BY code
                   HAVING count(DISTINCT run_no) = (SELECT count(DISTINCT run_no) FROM pred))
"""


# ---- study scale (issue 38): the instances once, predictions and score rows joined to them alone
#: The separator of the id lists the scaled read builds with ``string_agg`` (an id holding it
#: takes ``list()`` instead: :func:`_scaled_instances`).
_SEP = "chr(31)"
# The selected datasets' instances (``only``: the allowed ones), numbered 0 .. n-1 (``idx``:
# the row of the numpy arrays), with their code, order, gold ids and fan-in as ``_SQL``'s
# ``inst`` has them. ``variant`` is a join key of the two reads below (always ''): an
# equality on the predictions' own column would be pushed into their scan, where DuckDB's
# guess of its selectivity (1 / distinct variants) makes ten million rows look like ten
# thousand, and the predictions the side the join builds its table of.
_SCALE_INST_SQL = """
CREATE TEMP TABLE {table} AS
WITH gold AS (
    SELECT dataset_id, instance_id, {gold_ids} AS gold_ids, count(*) AS n_gold,
           {docs} AS docs, count(doc_id) AS n_docs
    FROM passages WHERE is_gold AND list_contains($datasets, dataset_id)
    GROUP BY ALL
)
SELECT i.dataset_id, i.instance_id, ''::VARCHAR AS variant,
       (row_number() OVER () - 1)::INTEGER AS idx,
       (dense_rank() OVER (ORDER BY i.instance_id) - 1)::INTEGER AS code, i.ord,
       coalesce(g.gold_ids, []) AS gold_ids, coalesce(g.n_gold, 0)::INTEGER AS n_gold,
       coalesce({fan_in} + (g.n_gold > g.n_docs)::INTEGER, 0)::INTEGER AS fan_in,
       coalesce({odd}, false) AS odd
FROM instances i LEFT JOIN gold g USING (dataset_id, instance_id)
WHERE list_contains($datasets, i.dataset_id){only}
"""
#: Gold ids, document ids, the distinct documents and whether an id held the separator: the
#: ids joined into one string per instance and split again (several times cheaper than
#: ``list()``; an id holding the separator splits into more pieces than there are ids, and
#: the ids are then listed as they are: ``_GOLD_LIST``).
_GOLD_SPLIT = {
    "gold_ids": "string_split(string_agg(passage_id, {sep}), {sep})",
    "docs": "string_split(string_agg(doc_id, {sep}), {sep})",
    "fan_in": "coalesce(len(list_distinct(g.docs)), 0)",
    "odd": "len(g.gold_ids) <> g.n_gold OR coalesce(len(g.docs), 0) <> g.n_docs",
}
_GOLD_LIST = {
    "gold_ids": "list(passage_id)",
    "docs": "count(DISTINCT doc_id)",
    "fan_in": "g.docs",
    "odd": "false",
}
#: The condition's code: the four plain conditions as :data:`CONDITION_CODES`, 4 any other
#: (kept for the pairing, which counts every variant-'' prediction; left out after it).
_COND = """CASE {t}.condition WHEN 'full_context' THEN 0 WHEN 'no_evidence' THEN 1
                            WHEN 'oracle' THEN 2 WHEN 'retrieved' THEN 3 ELSE 4 END"""
# Every variant-'' prediction of the runs whose instance is a selected one: what ``_SQL``
# gives of it, and ``at``, the number it is paired with its score row by (run, condition,
# instance: (run_no x 5 + condition) x instances + idx).
_SCALE_PRED_SQL = """
WITH p AS (
    SELECT r.run_no, {cond} AS cond, i.idx, i.code, i.ord, i.fan_in, i.n_gold, i.gold_ids,
           p.error,
           CASE WHEN p.condition IN ('retrieved', 'oracle') THEN p.input_passage_ids
                WHEN p.condition = 'full_context' THEN coalesce(p.cited_ids, [])
           END AS pack
    FROM predictions p
    JOIN ({runs}) r USING (run_id)
    JOIN {table} i ON {same_dataset}i.instance_id = p.instance_id AND i.variant = p.variant
)
SELECT run_no::INTEGER AS run_no, cond::TINYINT AS cond,
       ((run_no * 5 + cond) * $n + idx)::BIGINT AS at, code, ord, fan_in,
       (error IS NOT NULL AND length(trim(error, $ws)) > 0) AS err,
       pack IS NOT NULL AND n_gold > 0 AS has_pack,
       coalesce(len(list_filter(gold_ids, lambda g: list_contains(pack, g))), 0)::INTEGER
           AS n_hits,
       n_gold,
       coalesce(len(list_filter(pack, lambda x, i: list_position(pack, x) = i)), 0)::INTEGER
           AS n_pack
FROM p
"""
# The runs' variant-'' score rows of the selected instances: ``at`` and the scores.
_SCALE_SCORES_SQL = """
SELECT ((r.run_no * 5 + {cond}) * $n + i.idx)::BIGINT AS at,
       s.em_strict, s.f1_strict, s.em_relaxed, s.f1_relaxed, s.soft_correct
FROM scores s
JOIN ({runs}) r USING (run_id)
JOIN {table} i ON {same_dataset}i.instance_id = s.instance_id AND i.variant = s.variant
"""


def fanin_rows(
    store: StoreBase,
    run_ids: Sequence[str],
    *,
    allowed: pd.DataFrame | None = None,
    pair: bool = False,
    scale: bool = False,
) -> dict[str, Any]:
    """Per plain-condition prediction of the runs, the numbers the fan-in views need.

    The rows are those of :meth:`core.store.Store.fanin_frame` restricted to the four
    plain conditions (``allowed``: only these ``dataset, instance_id`` pairs; ``pair``:
    with several runs of one dataset, only the instances every run has, as
    :func:`core.views.common.pair_runs`), in no particular order.

    Args:
        store: the store.
        run_ids: the runs.
        allowed: ``dataset, instance_id`` pairs to keep (None: all).
        pair: restrict several runs of one dataset to their common instances.
        scale: read as at study scale (:func:`_scaled_rows`): the same rows and scores,
            seconds rather than tens of seconds at ten million predictions, a few
            milliseconds more on a small store.

    Returns:
        ``runs``: ``run_no, run_id, model, dataset_id`` per stored run of ``run_ids``
        (``run_no``: the run's position in ``run_ids`` without repeats); ``rows``: numpy
        arrays of equal length: ``run_no``, ``cond`` (index into
        :data:`CONDITION_CODES`), ``code`` (instance id number: equal ids, equal numbers),
        ``ord`` (instance order in its dataset), ``fan_in`` (distinct gold ``doc_id``; 0
        without gold), ``err`` (a non-blank ``error``), ``has_pack`` (a pack and gold ids),
        ``n_hits`` (|set(pack) ∩ gold|), ``n_gold``, ``n_pack`` (distinct pack ids);
        ``scores``: the answer score columns of those rows (:class:`ScoreColumns`, each
        gathered on first use; NaN where NULL or without a score row).
    """
    only = (
        ""
        if allowed is None
        else (" AND (i.dataset_id, i.instance_id) IN (SELECT (unnest($ok_ds), unnest($ok_ids)))")
    )
    ids = list(dict.fromkeys(str(r) for r in run_ids))
    params: dict[str, Any] = {"runs": ids, "ws": _WHITESPACE}
    if allowed is not None:
        params["ok_ds"] = [str(v) for v in allowed["dataset"]]
        params["ok_ids"] = [str(v) for v in allowed["instance_id"]]
    with store.connect(read_only=True) as con:
        runs = con.execute(
            "SELECT run_id, model, dataset_id FROM runs WHERE list_contains(?, run_id)", [ids]
        ).df()
        # one run: every instance it holds is common to "every run" (pairing is a no-op),
        # and the rows need not be materialized for the pairing's second look
        pair = bool(pair) and len(runs) > 1
        order = {r: i for i, r in enumerate(ids)}
        runs = runs.assign(run_no=runs["run_id"].map(order).astype(int)).sort_values("run_no")
        runs = runs.reset_index(drop=True)[["run_no", "run_id", "model", "dataset_id"]]
        if scale:
            rows, matched = _scaled_rows(con, runs, params, only, pair)
            return {"runs": runs, "rows": rows, "scores": matched}
        sql = _SQL.format(
            only=only,
            materialized="MATERIALIZED" if pair else "",
            paired=_PAIRED if pair else "SELECT * FROM pred",
        )
        raw = con.sql(sql, params=params).to_arrow_table(_BATCH)
        scores = _read_scores(con, ids)
    rows: dict[str, np.ndarray] = {}
    for name in raw.column_names:
        rows[name] = _numpy(raw.column(name))  # no NULL in these columns
    matched = ScoreColumns(rows, scores)
    del rows["inst_row"], rows["prow"]
    return {"runs": runs, "rows": rows, "scores": matched}


def _scaled_rows(
    con: duckdb.DuckDBPyConnection,
    runs: pd.DataFrame,
    params: dict[str, Any],
    only: str,
    pair: bool,
) -> tuple[dict[str, np.ndarray], ScoreColumns]:
    """:func:`fanin_rows`' rows and scores from three reads, paired in numpy.

    The selected datasets' instances go to a temporary table once (``_SCALE_INST_SQL``: 0.6
    million rows at study scale, with their gold ids); the predictions and the score rows
    are each joined to it alone (``_SCALE_PRED_SQL``, ``_SCALE_SCORES_SQL``), each row
    numbered by its run, condition and instance (``at``), and paired by that number in a
    dense table (no sort, no join of ten million rows with ten million). The pairing of
    several runs (``_PAIRED``) is counted on the same numbers (:func:`_paired`).
    """
    n_runs = int(runs["run_no"].max()) + 1 if len(runs) else 0
    table = "fanin_scale_instances"
    # the runs as a constant table: exact sizes for the planner (a list parameter's are not)
    values = ", ".join(f"($r{k}, $d{k}, {int(n)})" for k, n in enumerate(runs["run_no"]))
    run_sql = f"SELECT * FROM (VALUES {values}) v(run_id, dataset_id, run_no)"
    run_params = {f"r{k}": str(r) for k, r in enumerate(runs["run_id"])}
    run_params |= {f"d{k}": str(d) for k, d in enumerate(runs["dataset_id"])}
    inst_params = {"datasets": sorted({str(d) for d in runs["dataset_id"].dropna()})}
    inst_params |= {k: v for k, v in params.items() if k in ("ok_ds", "ok_ids")}
    if not inst_params["datasets"]:  # no stored run of a stored dataset: no rows
        return _no_rows(), ScoreColumns.matched(0, pa.table({}), np.zeros(0, bool), np.zeros(0))
    # runs of one dataset: its instances alone in the table, joined by id alone (a quarter
    # less work for the join than with the dataset as a key)
    one = bool(runs["dataset_id"].notna().all()) and runs["dataset_id"].nunique() == 1
    parts = {"runs": run_sql, "table": table, "same_dataset": ""}
    if not one:
        parts["same_dataset"] = "i.dataset_id = r.dataset_id AND "
    try:
        n_idx = _scaled_instances(con, table, only, inst_params)
        pred = con.sql(
            _SCALE_PRED_SQL.format(cond=_COND.format(t="p"), **parts),
            params={"ws": params["ws"], "n": n_idx, **run_params},
        ).to_arrow_table(_BATCH)
        scores = con.sql(
            _SCALE_SCORES_SQL.format(cond=_COND.format(t="s"), **parts),
            params={"n": n_idx, **run_params},
        ).to_arrow_table(_BATCH)
    finally:
        with suppress(duckdb.Error):  # the connection's own table: gone when it closes anyway
            con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
    cond = _numpy(pred.column("cond"))
    keep = cond < 4  # the four plain conditions
    if pair:
        keep &= _paired(_numpy(pred.column("run_no")), _numpy(pred.column("code")), runs)
    sel = None if keep.all() else np.flatnonzero(keep)
    names = ("run_no", "cond", "code", "ord", "fan_in", "err", "has_pack", "n_hits", "n_gold")
    rows = {}
    for name in (*names, "n_pack", "at"):
        col = cond if name == "cond" else _numpy(pred.column(name))
        rows[name] = col if sel is None else col[sel]
    p_at = rows.pop("at")
    # score rows of other conditions (code 4) are never asked for: no plain row has their at
    found, src = _match_dense(p_at, _numpy(scores.column("at")), 5 * n_runs * n_idx)
    return rows, ScoreColumns.matched(len(p_at), scores, found, src)


def _scaled_instances(
    con: duckdb.DuckDBPyConnection, table: str, only: str, params: dict[str, Any]
) -> int:
    """Create ``table`` (``_SCALE_INST_SQL``); its number of instances."""
    con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
    split = {k: v.format(sep=_SEP) for k, v in _GOLD_SPLIT.items()}
    sql = _SCALE_INST_SQL.format(table=table, only=only, **split)
    con.execute(sql, params).fetchall()
    n, odd = con.execute(f"SELECT count(*), bool_or(odd) FROM {table}").fetchall()[0]
    if odd:  # an id holding the separator: the ids listed as they are
        con.execute(f"DROP TABLE {table}").fetchall()
        sql = _SCALE_INST_SQL.format(table=table, only=only, **_GOLD_LIST)
        con.execute(sql, params).fetchall()
    return int(n)


def _paired(run_no: np.ndarray, code: np.ndarray, runs: pd.DataFrame) -> np.ndarray:
    """``_PAIRED`` on numbers: the rows of instances every run with rows holds.

    Every row is kept unless the runs with rows are of one dataset; then those whose
    instance code has a row of each of them.
    """
    if not len(code):
        return np.ones(0, dtype=bool)
    per_run = np.bincount(run_no)
    held = np.flatnonzero(per_run)
    datasets = runs.set_index("run_no").loc[held, "dataset_id"]
    if datasets.nunique(dropna=False) != 1:
        return np.ones(len(code), dtype=bool)
    n_code = int(code.max()) + 1
    pos = np.zeros(per_run.size, dtype=np.int32)
    pos[held] = np.arange(len(held))
    # per run, the instance codes it holds (a boolean table, not a count of every row): an
    # instance is kept when every run holds it; when all are, no gather
    holds = np.zeros((len(held), n_code), dtype=bool)
    holds[pos[run_no], code] = True
    full = holds.all(axis=0)
    return np.ones(len(code), dtype=bool) if full.all() else full[code]


def _match_dense(p_at: np.ndarray, s_at: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``p_at`` with an equal key in ``s_at`` (keys unique in each), and its index."""
    if space <= 4 * (len(p_at) + len(s_at)) + 1024:
        small = len(s_at) < np.iinfo(np.int32).max
        where = np.full(space, -1, dtype=np.int32 if small else np.int64)
        where[s_at] = np.arange(len(s_at), dtype=where.dtype)
        hit = where[p_at]
        found = hit >= 0
        return found, hit[found]
    order = np.argsort(s_at)
    s_sorted = s_at[order]
    at = np.minimum(np.searchsorted(s_sorted, p_at), max(len(s_sorted) - 1, 0))
    found = s_sorted[at] == p_at if len(s_sorted) else np.zeros(len(p_at), dtype=bool)
    return found, order[at[found]]


def _no_rows() -> dict[str, np.ndarray]:
    """The rows of :func:`fanin_rows` when there are none."""
    kinds = {"cond": np.int8, "err": bool, "has_pack": bool}
    names = ("run_no", "cond", "code", "ord", "fan_in", "err", "has_pack", "n_hits")
    return {k: np.zeros(0, dtype=kinds.get(k, np.int32)) for k in (*names, "n_gold", "n_pack")}


def _read_scores(con: duckdb.DuckDBPyConnection, ids: list[str]) -> pa.Table:
    """The runs' plain-condition score rows: paired by position when every pair's key holds.

    Returns:
        ``prow`` (the prediction's rowid) and the answer scores when the filtered scans of
        predictions and scores pair up row by row (``_SCORES_BY_POSITION_SQL``); else
        ``run_no, inst_row, cond`` and the answer scores (``_SCORES_SQL``).
    """
    scores = con.sql(_SCORES_BY_POSITION_SQL, params={"runs": ids}).to_arrow_table(_BATCH)
    if scores.num_rows and pc.all(scores.column("same")).as_py():
        return scores.drop_columns(["same"])
    return con.sql(_SCORES_SQL, params={"runs": ids}).to_arrow_table(_BATCH)


def _numpy(col: pa.ChunkedArray, fill: Any = None) -> np.ndarray:
    """A column as numpy (``fill`` in place of NULL, when given)."""
    if fill is not None:
        col = pc.fill_null(col, fill)
    return col.to_numpy()


class ScoreColumns(Mapping[str, np.ndarray]):
    """The rows' answer score columns, each gathered from the score rows on first use.

    A first page load summarizes one score field: the others stay in the Arrow table until
    asked for (each column costs a NaN-filled copy and a gather of every row). Values: the
    stored score, NaN where it is NULL or the row has no score row. Not thread-safe on its
    own (:class:`core.fanin.stats.StoreSummaries` reads it under its lock).
    """

    def __init__(self, rows: dict[str, np.ndarray], scores: pa.Table) -> None:
        """Match ``scores`` (as ``_read_scores`` gives them) to ``rows`` (``prow`` etc.)."""
        self._n = n = len(rows["run_no"])
        self._table: pa.Table | None = scores
        self._found = self._src = np.zeros(0, dtype=np.int64)
        self._whole = False
        if not scores.num_rows or not n:
            self._table = None
        elif "prow" in scores.column_names:  # paired by position: by the prediction's rowid
            s_row = _numpy(scores.column("prow"))
            where = np.full(int(max(s_row.max(), rows["prow"].max())) + 1, -1, dtype=np.int64)
            where[s_row] = np.arange(len(s_row))
            hit = where[rows["prow"]]
            self._found = hit >= 0
            self._src = hit[self._found]
        else:
            self._found, self._src = _match_keys(rows, scores)
        # every row has its score row: a gather, no NaN-filled copy
        self._whole = bool(self._found.all()) if self._table is not None else False
        self._done: dict[str, np.ndarray] = {}

    @classmethod
    def matched(cls, n: int, scores: pa.Table, found: np.ndarray, src: np.ndarray) -> ScoreColumns:
        """The score columns of ``n`` rows matched already.

        The found rows (``found``) take, in their order, the score rows ``src`` of ``scores``.
        """
        self = cls.__new__(cls)
        self._n = n
        self._table = scores if scores.num_rows and n else None
        self._found, self._src = found, src
        self._whole = bool(found.all()) if self._table is not None else False
        self._done = {}
        return self

    def __getitem__(self, field: str) -> np.ndarray:
        """The column of ``field`` (float64, one value per row)."""
        if field not in _SCORES:
            raise KeyError(field)
        if field not in self._done:
            if self._table is None:
                self._done[field] = np.full(self._n, np.nan)
            else:
                vals = _numpy(self._table.column(field), np.nan).astype(np.float64, copy=False)
                if self._whole:
                    self._done[field] = vals[self._src]
                else:
                    col = np.full(self._n, np.nan)
                    col[self._found] = vals[self._src]
                    self._done[field] = col
        return self._done[field]

    def __iter__(self) -> Iterator[str]:
        """The answer score fields."""
        return iter(_SCORES)

    def __len__(self) -> int:
        """How many answer score fields."""
        return len(_SCORES)


def _match_scores(rows: dict[str, np.ndarray], scores: pa.Table) -> dict[str, np.ndarray]:
    """Each answer score of ``rows`` from the stored score rows (NaN: NULL or no row)."""
    return dict(ScoreColumns(rows, scores))


def _match_keys(rows: dict[str, np.ndarray], scores: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a score row keyed by (run, instance rowid, condition), and its index."""
    n = len(rows["run_no"])
    s_run, s_inst = _numpy(scores.column("run_no")), _numpy(scores.column("inst_row"))
    s_cond = _numpy(scores.column("cond"))
    width = np.int64(max(int(s_inst.max()), int(rows["inst_row"].max())) + 1)
    s_key = (s_run.astype(np.int64) * width + s_inst) * 4 + s_cond
    p_key = (rows["run_no"].astype(np.int64) * width + rows["inst_row"]) * 4 + rows["cond"]
    space = int(max(s_key.max(), p_key.max())) + 1
    if space <= 4 * (len(s_key) + n) + 1024:  # a dense table: no sort
        where = np.full(space, -1, dtype=np.int64)
        where[s_key] = np.arange(len(s_key))
        hit = where[p_key]
        found = hit >= 0
        src = hit[found]
    else:
        order = np.argsort(s_key)
        s_sorted = s_key[order]
        at = np.minimum(np.searchsorted(s_sorted, p_key), len(s_sorted) - 1)
        found = s_sorted[at] == p_key
        src = order[at[found]]
    return found, src
