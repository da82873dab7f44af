"""The re-score's read: the scoring rows of runs with their stored scores, as Arrow batches.

:func:`rescore_batches` gives the rows of :meth:`core.store.Store.scoring_batches` with
``stored=True`` (the same values; unordered) several times cheaper (issue 17 item 9): DuckDB
reads four narrow things -- the predictions with the rowids of their stored score row and
of their instance (streamed; a join on the key columns only), the stored score values, the
instances of the runs' datasets and their passages -- joined by integer codes with numpy
and Arrow ``take``, instead of a wide join and a list lambda per prediction in SQL. Passage
ids and titles go to the scorer as integer codes
(:func:`core.scoring.vector.inputs_from_arrow`), not strings.

The predictions and stored scores are read a part at a time (at most :data:`PART_ROWS`
predictions: whole runs grouped, a bigger run in slices of its instance ids), so only one
part's stored scores and key-join hash table are held beside the instances (issue 38: 10M
predictions re-scored in 2.5-3 GB, was 4.4 GB with all of them held at once).

The values are those of :func:`core.store.analysis._scoring_query` exactly:

* a prediction whose run has no dataset, or whose instance the dataset lacks, is left out
  (the SQL's inner joins);
* ``gold_ids`` / ``gold_titles``: the gold passages' ids and titles (a NULL title kept), in
  no particular order (every score treats them as sets); ``[]`` without gold passages;
* ``cited_titles``: per cited id (a NULL cited list counts as ``[]``), the title of the
  instance's passage with that id, NULL when there is none (or the id is NULL).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.store.schema import SCORE_COLUMNS

__all__ = ["rescore_batches"]

# Instances and passages carry the instance's ``rowid`` (its number, stable inside the
# transaction); the predictions get it by a join on the narrow key columns only.
_INSTANCES = """
    SELECT i.rowid AS inst_row, i.gold_answer, i.answer_aliases, i.answer_type,
           i.reasoning_type
    FROM instances i
    WHERE i.dataset_id IN (SELECT dataset_id FROM runs WHERE list_contains(?, run_id))
    ORDER BY i.rowid
"""
_PASSAGES = """
    SELECT i.rowid AS inst_row, p.passage_id, p.title, p.is_gold
    FROM passages p JOIN instances i USING (dataset_id, instance_id)
    WHERE p.dataset_id IN (SELECT dataset_id FROM runs WHERE list_contains(?, run_id))
"""
# The predictions with the rowid of their stored score row (NULL without one; a join on the
# key only, which is about half the cost of carrying the score columns through it) and of
# their instance; the stored score values are read apart (``_STORED``), by rowid.
_PREDICTIONS_HEAD = """
    SELECT p.run_id, p.instance_id, p.condition, p.variant, p.answer, p.cited_ids,
           p.parse_error, p.error, p.confidence, s.rowid AS stored_rowid, i.rowid AS inst_row
    FROM predictions p
    LEFT JOIN (SELECT rowid, run_id, instance_id, condition, variant FROM scores
               WHERE list_contains(?, run_id)"""
_PREDICTIONS_TAIL = """) s
        ON s.run_id = p.run_id AND s.instance_id = p.instance_id
        AND s.condition = p.condition AND s.variant = p.variant
    JOIN runs r ON r.run_id = p.run_id
    JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
    WHERE list_contains(?, p.run_id)"""
_PREDICTIONS = _PREDICTIONS_HEAD + _PREDICTIONS_TAIL
_STORED = (
    "SELECT rowid AS stored_rowid, "
    + ", ".join(SCORE_COLUMNS)
    + " FROM scores WHERE list_contains(?, run_id)"
)
# A slice of a run too big for one part: the keys whose instance id hashes into a range
# (both the predictions and their stored rows, so each key and its stored row meet in one
# slice; a range, not ``hash % k = j``, whose tiny estimate turns the key join around to
# build its hash table on the predictions); the two bounds follow each list of runs.
_SLICE = " AND hash(instance_id) BETWEEN ?::UBIGINT AND ?::UBIGINT"
_PREDICTIONS_SLICE = (
    _PREDICTIONS_HEAD
    + _SLICE
    + _PREDICTIONS_TAIL
    + " AND hash(p.instance_id) BETWEEN ?::UBIGINT AND ?::UBIGINT"
)
_STORED_SLICE = _STORED + _SLICE
_PREDICTION_COUNTS = (
    "SELECT run_id, count(*) FROM predictions WHERE list_contains(?, run_id) GROUP BY run_id"
)
#: Predictions read in one part (the runs' stored scores in numpy and the key join's hash
#: table scale with it): runs are grouped into parts of at most this many predictions, and a
#: bigger run is read in slices of its instances (issue 38: 10M predictions in < 4 GB).
PART_ROWS = 3_000_000
_HASHES = 2**64  # DuckDB's hash(): a UBIGINT
_INSTANCE_COLUMNS = ("gold_answer", "answer_aliases", "answer_type", "reasoning_type")
#: The (instance, passage id) -> passage lookup is a dense table when it has at most this
#: many slots per passage plus the slack, else sorted keys (many distinct ids per instance).
_DENSE_FACTOR, _DENSE_SLACK = 4, 1024


def _np(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _combined(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


class _Instances:
    """The instances of the runs' datasets, numbered 0..n-1, with what the rows need."""

    def __init__(self, con: duckdb.DuckDBPyConnection, runs: list[str]):
        inst = con.sql(_INSTANCES, params=[runs]).to_arrow_table()
        self.rows = _np(_combined(inst.column("inst_row"))).astype(np.int64)  # sorted
        self.columns = {k: _combined(inst.column(k)) for k in _INSTANCE_COLUMNS}
        pas = con.sql(_PASSAGES, params=[runs]).to_arrow_table()
        owner = self.number(pas.column("inst_row"))
        pid = _combined(pas.column("passage_id"))
        title = _combined(pas.column("title"))
        gold = _np(pc.fill_null(_combined(pas.column("is_gold")), False))
        n = len(self.rows)
        # codes: equal strings, equal codes (passage ids; titles, -1 for NULL)
        enc = pc.dictionary_encode(pid)
        self.pid_values = enc.dictionary
        pid_code = _np(enc.indices).astype(np.int64)
        # a blank title is no title (-1): imported passages carry '' (title grounding NaN)
        blank = pc.equal(pc.utf8_trim_whitespace(pc.cast(title, pa.string())), "")
        tenc = pc.dictionary_encode(pc.if_else(blank, pa.scalar(None, title.type), title))
        self.title_code = _np(pc.fill_null(tenc.indices, -1)).astype(np.int64)
        # gold ids and titles, one list per instance: as strings and as codes
        g = np.flatnonzero(gold)
        g = g[np.argsort(owner[g], kind="stable")]
        offsets = pa.array(
            np.concatenate(([0], np.cumsum(np.bincount(owner[g], minlength=n)))), pa.int32()
        )
        self._gold_strings = (offsets, pid, title, g)  # built when a batch needs them
        # as codes: each instance's ids, and its distinct non-NULL titles, ascending (sets,
        # so the scorer's keys come sorted and distinct)
        gi = g[np.lexsort((pid_code[g], owner[g]))]
        self.gold_id_codes = pa.ListArray.from_arrays(offsets, pa.array(pid_code[gi]))
        n_titles = np.int64(len(tenc.dictionary) + 1)
        gt = g[self.title_code[g] >= 0]
        key = np.sort(owner[gt] * n_titles + self.title_code[gt])
        key = key[np.concatenate(([True], key[1:] != key[:-1]))] if len(key) else key
        t_owner = key // n_titles
        t_off = np.concatenate(([0], np.cumsum(np.bincount(t_owner, minlength=n))))
        self.gold_title_codes = pa.ListArray.from_arrays(
            pa.array(t_off, pa.int32()), pa.array(key - t_owner * n_titles)
        )
        # (instance, passage id code) -> passage: a dense table when small, else sorted keys
        self.width = np.int64(max(len(self.pid_values), 1))
        key = owner * self.width + pid_code
        self.titles = title
        self.dense: np.ndarray | None = None
        if n * int(self.width) <= _DENSE_FACTOR * len(key) + _DENSE_SLACK:
            self.dense = np.full(n * int(self.width), -1, dtype=np.int64)
            self.dense[key] = np.arange(len(key))
        else:
            order = np.argsort(key)
            self.keys, self.order = key[order], order

    @functools.cached_property
    def gold_lists(self) -> tuple[pa.Array, pa.Array]:
        """Gold ids and gold titles as list arrays of strings, one list per instance."""
        offsets, pid, title, g = self._gold_strings
        take = pa.array(g)
        return (
            pa.ListArray.from_arrays(offsets, pid.take(take)),
            pa.ListArray.from_arrays(offsets, title.take(take)),
        )

    def number(self, inst_row: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The number of each instance ``rowid`` (every one is an instance of the datasets)."""
        rows = _np(_combined(inst_row)).astype(np.int64)
        n = len(self.rows)
        if n and self.rows[-1] - self.rows[0] == n - 1:  # consecutive rowids, the usual case
            return rows - self.rows[0]
        return np.searchsorted(self.rows, rows)

    def _passages(self, inst: np.ndarray, lengths: np.ndarray, flat: pa.Array) -> tuple:
        """Per cited id: its code in ``pid_values`` (-1: none) and its passage (-1: none)."""
        code = _np(pc.fill_null(pc.index_in(flat, value_set=self.pid_values), -1))
        code = code.astype(np.int64)
        ok = code >= 0
        key = np.repeat(inst, lengths) * self.width + np.maximum(code, 0)
        if self.dense is not None:
            pos = self.dense[key] if len(self.dense) else np.full(len(key), -1, dtype=np.int64)
        elif len(self.keys):
            at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
            pos = np.where(self.keys[at] == key, self.order[at], -1)
        else:
            pos = np.full(len(key), -1, dtype=np.int64)
        return code, np.where(ok, pos, -1)

    def cited_titles(self, inst: np.ndarray, cited: pa.Array) -> pa.Array:
        """Per row (instance ``inst``), the title of each cited id (``cited``: a list array)."""
        lengths = _np(pc.fill_null(pc.list_value_length(cited), 0)).astype(np.int64)
        _, pos = self._passages(inst, lengths, pc.list_flatten(cited))
        titles = self.titles.take(pa.array(np.maximum(pos, 0), mask=pos < 0))
        return pa.ListArray.from_arrays(_offsets(lengths), titles)

    def cited_codes(self, inst: np.ndarray, cited: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Per row, the codes of the cited ids and of their titles (list arrays).

        An id no passage of the datasets has gets a code past ``pid_values`` (equal ids,
        equal codes); a cited id with no passage in its instance has title code -1.
        """
        lengths = _np(pc.fill_null(pc.list_value_length(cited), 0)).astype(np.int64)
        flat = pc.list_flatten(cited)  # a NULL list contributes nothing
        code, pos = self._passages(inst, lengths, flat)
        other = code < 0
        if other.any():
            code[other] = len(self.pid_values) + _np(
                pc.dictionary_encode(flat.filter(pa.array(other))).indices
            ).astype(np.int64)
        title = np.where(pos >= 0, self.title_code[np.maximum(pos, 0)], -1)
        off = _offsets(lengths)
        return (
            pa.ListArray.from_arrays(off, pa.array(code)),
            pa.ListArray.from_arrays(off, pa.array(title)),
        )


def _offsets(lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


class _Stored:
    """The runs' stored score rows, by rowid: each column as numpy (values and nulls)."""

    def __init__(self, table: pa.Table):
        rowids = _np(_combined(table.column("stored_rowid"))).astype(np.int64)
        if len(rowids) > 1 and not bool(np.all(rowids[1:] > rowids[:-1])):  # scan order
            order = np.argsort(rowids)
            table, rowids = table.take(pa.array(order)), rowids[order]
        self.rowids = rowids  # ascending
        self.columns: dict[str, tuple[Any, np.ndarray | None]] = {}  # (values, NULL or None)
        for c in SCORE_COLUMNS:
            col = table.column(c)
            null = _np(col.is_null()) if col.null_count else None
            if pa.types.is_floating(col.type):
                self.columns[c] = (col.to_numpy(), null)  # NULL as NaN, masked by ``null``
            else:  # strings: codes into the distinct values
                values = pc.unique(col).drop_null()
                code = _np(pc.fill_null(pc.index_in(col, value_set=values), 0))
                self.columns[c] = ((values, code.astype(np.int64)), null)

    def rows(self, rowid: pa.Array) -> dict[str, pa.Array]:
        """``stored_`` (whether a row has a stored score row) and ``stored_<column>``."""
        had = _np(rowid.is_valid())
        want = _np(pc.fill_null(rowid, 0)).astype(np.int64)
        n = len(self.rowids)
        if n and self.rowids[-1] - self.rowids[0] == n - 1:  # consecutive: the usual case
            pos = np.clip(want - self.rowids[0], 0, n - 1)
        else:
            pos = np.minimum(np.searchsorted(self.rowids, want), max(n - 1, 0))
        pos = np.where(had, pos, 0)
        out = {"stored_": pa.array(had)}
        absent = ~had
        for c, (values, null) in self.columns.items():
            mask = absent if null is None else absent | null[pos]
            if isinstance(values, tuple):
                dictionary, code = values
                idx = code[pos] if len(code) else np.zeros(len(pos), dtype=np.int64)
                out[f"stored_{c}"] = dictionary.take(pa.array(idx, mask=mask))
            else:
                vals = values[pos] if len(values) else np.zeros(len(pos))
                out[f"stored_{c}"] = pa.array(vals, mask=mask)
        return out


def rescore_batches(
    con: duckdb.DuckDBPyConnection, run_ids: Sequence[str], batch_rows: int = 200_000
) -> Iterator[pa.RecordBatch]:
    """The scoring rows of the runs with their stored score rows, at most ``batch_rows`` a batch.

    The columns of :meth:`core.store.Store.scoring_batches` with ``stored=True``, in its
    order: the prediction, its instance's answers (``gold_answer`` dictionary-encoded, one
    dictionary for all batches, when the batch has codes) and types, ``gold_ids``,
    ``gold_titles``, ``cited_titles``, ``stored_`` and ``stored_<score column>``; then
    ``stored_rowid``, the
    stored row's ``rowid`` (valid in this transaction; NULL without). A batch whose cited
    ids hold no NULL has, instead of the three passage columns, their integer codes (what
    :func:`core.scoring.vector.inputs_from_arrow` takes): ``cited_id_codes``,
    ``cited_title_codes`` (the title of each cited id; -1: none), ``gold_id_codes`` and
    ``gold_title_codes`` (-1: a NULL title); equal strings have equal codes. The runs are
    read in parts (:func:`_parts`), each run once however often ``run_ids`` names it. Read
    the iterator to its end before running another statement on ``con``.
    """
    runs = list(dict.fromkeys(run_ids))
    inst = _Instances(con, runs)
    for part, k, j in _parts(con, runs):
        # one part at a time: its stored scores and the join's hash table, not all the runs'
        slices = [j * _HASHES // k, (j + 1) * _HASHES // k - 1] if k > 1 else []
        stored = _Stored(
            con.sql(_STORED_SLICE if k > 1 else _STORED, params=[part, *slices]).to_arrow_table()
        )
        query = _PREDICTIONS_SLICE if k > 1 else _PREDICTIONS
        params = [part, *slices, part, *slices]
        reader = con.sql(query, params=params).to_arrow_reader(batch_rows)
        yield from _batches(inst, stored, reader)
        del stored, reader


def _parts(con: duckdb.DuckDBPyConnection, runs: list[str]) -> list[tuple[list[str], int, int]]:
    """The runs in parts of at most :data:`PART_ROWS` predictions: (runs, k, j) each.

    Runs are grouped in their order; a run with more predictions is one part per slice
    ``j`` of ``k`` (its keys whose instance id hashes into the ``j``-th of ``k`` equal
    ranges; ``k`` = 1: all).
    """
    counts = dict(con.execute(_PREDICTION_COUNTS, [runs]).fetchall())
    parts: list[tuple[list[str], int, int]] = []
    group: list[str] = []
    held = 0
    for run in dict.fromkeys(runs):  # each run once
        n = int(counts.get(run, 0))
        if n == 0:
            continue
        if n > PART_ROWS:
            k = -(-n // PART_ROWS)
            parts.extend(([run], k, j) for j in range(k))
            continue
        if group and held + n > PART_ROWS:
            parts.append((group, 1, 0))
            group, held = [], 0
        group.append(run)
        held += n
    if group:
        parts.append((group, 1, 0))
    return parts


def _batches(inst: _Instances, stored: _Stored, reader: pa.RecordBatchReader) -> Iterator:
    """The rows of one part as :func:`rescore_batches` gives them."""
    for batch in reader:
        if batch.num_rows == 0:
            continue
        number = inst.number(batch.column("inst_row"))
        take = pa.array(number)
        names = list(batch.schema.names)[:-2]  # less stored_rowid, inst_row
        cols = list(batch.columns)[:-2]
        rowid = batch.column("stored_rowid")
        tail = stored.rows(rowid)
        tail["stored_rowid"] = rowid
        cited = batch.column("cited_ids")
        plain = pc.list_flatten(cited).null_count > 0  # a NULL id: the reference scores it
        # the gold answer dictionary-encoded by instance (one dictionary for every batch:
        # the scorer normalizes it once), as strings for the reference
        gold = inst.columns["gold_answer"]
        extra = {
            "gold_answer": gold.take(take) if plain else pa.DictionaryArray.from_arrays(take, gold)
        }
        extra.update({k: inst.columns[k].take(take) for k in _INSTANCE_COLUMNS[1:]})
        if plain:  # by strings
            extra["gold_ids"] = inst.gold_lists[0].take(take)
            extra["gold_titles"] = inst.gold_lists[1].take(take)
            extra["cited_titles"] = inst.cited_titles(number, cited)
        else:
            extra["cited_id_codes"], extra["cited_title_codes"] = inst.cited_codes(number, cited)
            extra["gold_id_codes"] = inst.gold_id_codes.take(take)
            extra["gold_title_codes"] = inst.gold_title_codes.take(take)
        yield pa.RecordBatch.from_arrays(
            cols + list(extra.values()) + list(tail.values()),
            names=names + list(extra) + list(tail),
        )
