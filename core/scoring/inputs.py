"""The vectorized scorer's inputs: score columns read from a frame or from Arrow, coded."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.scoring.normalize import (
    list_cell,
    truthy_cell,
)

__all__ = [
    "EvidenceCodes",
    "ScoreInputs",
    "as_numpy",
    "column_codes",
    "inputs_from_arrow",
    "inputs_from_frame",
    "list_cells",
]


@dataclass(slots=True)
class EvidenceCodes:
    """Cited and gold passage ids and titles of ``n`` rows as integer codes.

    Each list is per-row lengths plus the flat codes of all rows in row order; equal
    strings have equal codes (ids and titles each in one code space), codes are >= 0, and a
    missing (null) title is -1. ``title_len``/``cited_title`` are the cited titles by
    position (None: not given); ``gold_title_len``/``gold_title`` the gold support titles
    (None: the titles of the cited gold ids).
    """

    cited_len: np.ndarray
    cited: np.ndarray
    gold_len: np.ndarray
    gold: np.ndarray
    title_len: np.ndarray | None = None
    cited_title: np.ndarray | None = None
    gold_title_len: np.ndarray | None = None
    gold_title: np.ndarray | None = None


def _evidence_codes(
    cited: pa.Array, gold: pa.Array, ctit: pa.Array | None, gtit: pa.Array | None
) -> EvidenceCodes:
    """The codes of list arrays of strings (a null list is empty; ids hold no null)."""
    c_len, c_flat = list_cells(cited)
    g_len, g_flat = list_cells(gold)
    codes, _ = column_codes(pa.concat_arrays([c_flat, g_flat]))
    ev = EvidenceCodes(c_len, codes[: len(c_flat)], g_len, codes[len(c_flat) :])
    if ctit is not None:
        t_len, t_flat = list_cells(ctit)
        gt_len, gt_flat = list_cells(gtit) if gtit is not None else (None, None)
        t_codes, _ = column_codes(
            _blank_to_null(pa.concat_arrays([t_flat] if gt_flat is None else [t_flat, gt_flat]))
        )
        ev.title_len, ev.cited_title = t_len, t_codes[: len(t_flat)]
        if gt_flat is not None:
            ev.gold_title_len, ev.gold_title = gt_len, t_codes[len(t_flat) :]
    return ev


def _blank_to_null(arr: Any) -> Any:
    """Titles with an empty or blank string as null: no title (imported passages have '')."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return arr
    blank = pc.equal(pc.utf8_trim_whitespace(arr), "")
    return pc.if_else(blank, pa.scalar(None, arr.type), arr)


def _list_codes(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row lengths and flat values of a list array of integers (no null list)."""
    arr = _one_chunk(arr)
    lengths = as_numpy(pc.list_value_length(arr)).astype(np.int64)
    return lengths, as_numpy(pc.list_flatten(arr)).astype(np.int64)


@dataclass(slots=True)
class ScoreInputs:
    """One column per scoring input, ``n`` rows (see :func:`core.scoring.rows.score_frame`).

    String columns are Arrow string arrays (null: not a string), the aliases an Arrow list
    array of strings (a null list is empty); passage ids and titles as integer codes.
    """

    n: int
    answer: pa.Array
    gold_answer: pa.Array
    aliases: pa.Array | None
    answer_type: pa.Array
    reasoning_type: pa.Array
    evidence: EvidenceCodes
    parse: np.ndarray  # bool: parse error (scored 0, label "parse")
    error: np.ndarray  # bool: failed call (not scored)
    labeled: np.ndarray  # bool: condition gets a failure label (not no_evidence)
    confidence: np.ndarray  # float64, NaN when unknown


# ---------------------------------------------------------------------------- building inputs
def _text(values: Any) -> pa.Array:
    return pa.array([x if isinstance(x, str) else None for x in values], type=pa.string())


def _list_column(values: Any, kind: str) -> pa.Array | None:
    """A list<string> array of ``list_cell`` of each value, or None (not representable).

    ``kind`` ``"ids"`` takes strings only, ``"titles"`` strings and None,
    ``"aliases"`` drops what is not a string (as the reference does).
    """
    lists = [list_cell(x) for x in values]
    if kind == "aliases":
        lists = [[v for v in x if isinstance(v, str)] for x in lists]
    flat = list(chain.from_iterable(lists))
    if kind == "ids" and not all(isinstance(v, str) for v in flat):
        return None
    if kind == "titles" and not all(v is None or isinstance(v, str) for v in flat):
        return None
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    if lists:
        np.cumsum([len(x) for x in lists], out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.string()))


def _confidence(col: pd.Series | None, n: int) -> np.ndarray | None:
    if col is None:
        return np.full(n, np.nan)
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        return np.array(
            [math.nan if x is None or x is pd.NA else float(x) for x in col], dtype=np.float64
        )
    except (TypeError, ValueError):
        return None


#: Cells a list column's fast conversion takes as they are (anything else: ``list_cell``).
_LIST_CELLS = frozenset({list, tuple, np.ndarray, type(None)})


def _arrow_of(col: pd.Series) -> pa.Array | None:
    """The column's own Arrow array (Arrow-backed text or ``pd.ArrowDtype``), else None."""
    if isinstance(col.array, pd.arrays.ArrowStringArray) or isinstance(col.dtype, pd.ArrowDtype):
        return _one_chunk(pa.array(col.array))
    return None


def _is_text(arr: pa.Array | None) -> bool:
    return arr is not None and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type))


def _text_series(col: pd.Series | None, n: int) -> pa.Array:
    """:func:`_text` of a column: Arrow text and categories converted without a Python loop."""
    if col is None:
        return pa.nulls(n, pa.string())
    arrow = _arrow_of(col)
    if _is_text(arrow):
        return arrow.cast(pa.string())
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        cats = _text_series(pd.Series(col.cat.categories), len(col.cat.categories))
        return cats.take(pa.array(codes, mask=codes < 0))
    return _text(col.tolist())


def _flag_series(col: pd.Series | None, n: int) -> np.ndarray:
    """``truthy_cell`` of each cell of a column: Arrow text by kernels, categories once each."""
    if col is None:
        return np.zeros(n, dtype=bool)
    arrow = _arrow_of(col)
    if _is_text(arrow):
        return _arrow_flags(arrow.cast(pa.string()))
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        per = np.array([truthy_cell(x) for x in col.cat.categories.tolist()] + [False], dtype=bool)
        return per[codes]  # code -1 (missing) -> the appended False
    return np.array([truthy_cell(x) for x in col.tolist()], dtype=bool)


def _list_series(col: pd.Series | None, n: int, kind: str) -> pa.Array | None:
    """:func:`_list_column` of a column, converted in bulk where that is the same.

    An Arrow list column is taken as it is; an object column whose cells are all lists,
    tuples, arrays or None is converted by Arrow when it infers lists of strings (Arrow
    reads a string cell as its characters and bytes as text, ``list_cell`` does not: such
    columns, and a None inside an id or alias list, take the per-cell conversion).
    """
    if col is None:
        return _list_column([None] * n, kind)
    arrow = _arrow_of(col)
    if arrow is None and col.dtype == object:
        values = col.tolist()
        if set(map(type, values)) <= _LIST_CELLS:
            try:
                arrow = pa.array(values)
            except (pa.ArrowException, TypeError, ValueError):
                arrow = None
    if arrow is not None and (pa.types.is_list(arrow.type) or pa.types.is_large_list(arrow.type)):
        item = arrow.type.value_type
        nulls = pc.list_flatten(arrow).null_count
        text = pa.types.is_string(item) or pa.types.is_large_string(item) or pa.types.is_null(item)
        if text and not (nulls and kind != "titles"):
            return arrow.cast(pa.list_(pa.string()))
    return _list_column(col.tolist(), kind)


def _labeled(col: pd.Series | None, n: int) -> np.ndarray:
    """Whether each row's condition gets a failure label.

    ``str(c).split("|", 1)[0]`` is not ``no_evidence`` (a missing condition is labeled).
    """
    if col is None:
        return np.ones(n, dtype=bool)
    arrow = _arrow_of(col)
    if _is_text(arrow):
        no_ev = pc.or_(pc.equal(arrow, "no_evidence"), pc.starts_with(arrow, "no_evidence|"))
        return ~as_numpy(pc.fill_null(no_ev, False))
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = col.cat.categories.tolist()
        per = np.array([str(c).split("|", 1)[0] != "no_evidence" for c in cats] + [True])
        return per[col.cat.codes.to_numpy()]  # code -1 (missing: str(nan)) -> True
    return np.array([str(c).split("|", 1)[0] != "no_evidence" for c in col.tolist()], dtype=bool)


def inputs_from_frame(df: pd.DataFrame) -> ScoreInputs | None:
    """The inputs of a scoring frame, or None when only the per-row reference scores it."""
    n = len(df)

    def col(name: str) -> pd.Series | None:
        return df[name] if name in df.columns else None

    cited = _list_series(col("cited_ids"), n, "ids")
    gold = _list_series(col("gold_ids"), n, "ids")
    ctit = _list_series(col("cited_titles"), n, "titles") if "cited_titles" in df.columns else None
    gtit = _list_series(col("gold_titles"), n, "titles") if "gold_titles" in df.columns else None
    conf = _confidence(col("confidence"), n)
    if cited is None or gold is None or conf is None:
        return None
    if ("cited_titles" in df.columns and ctit is None) or (
        "gold_titles" in df.columns and gtit is None
    ):
        return None
    return ScoreInputs(
        n=n,
        answer=_text_series(col("answer"), n),
        gold_answer=_text_series(col("gold_answer"), n),
        aliases=_list_series(col("answer_aliases"), n, "aliases"),
        answer_type=_text_series(col("answer_type"), n),
        reasoning_type=_text_series(col("reasoning_type"), n),
        evidence=_evidence_codes(cited, gold, ctit, gtit),
        parse=_flag_series(col("parse_error"), n),
        error=_flag_series(col("error"), n),
        labeled=_labeled(col("condition"), n),
        confidence=conf,
    )


def _one_chunk(arr: Any) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _arrow_text(arr: Any) -> pa.Array:
    arr = _one_chunk(arr)
    return arr if arr.type == pa.string() else arr.cast(pa.string())


def _arrow_gold(arr: Any) -> pa.Array:
    """Text, or dictionary-encoded text as it is (the re-score read: one entry per instance)."""
    arr = _one_chunk(arr)
    if pa.types.is_dictionary(arr.type) and arr.type.value_type == pa.string():
        return arr
    return _arrow_text(arr)


def _arrow_list(arr: Any) -> pa.Array:
    arr = _one_chunk(arr)
    # a list of strings whatever its field is named (DuckDB's "l", Arrow's "item")
    if pa.types.is_list(arr.type) and arr.type.value_type == pa.string():
        return arr
    return arr.cast(pa.list_(pa.string()))


def _arrow_flags(arr: pa.Array) -> np.ndarray:
    """``truthy_cell`` of each string: set and not only whitespace (Python's ``str.strip``)."""
    out = np.zeros(len(arr), dtype=bool)
    if arr.null_count == len(arr):
        return out
    where = np.flatnonzero(as_numpy(arr.is_valid()))
    sub = arr.take(pa.array(where))
    flag = as_numpy(pc.match_substring_regex(sub, "[0-9A-Za-z]")).copy()
    rest = np.flatnonzero(~flag)  # no ASCII letter or digit: Python decides
    if len(rest):
        flag[rest] = [truthy_cell(x) for x in sub.take(pa.array(rest)).to_pylist()]
    out[where] = flag
    return out


def inputs_from_arrow(batch: pa.RecordBatch | pa.Table) -> ScoreInputs | None:
    """The inputs of the store's scoring columns (:meth:`core.store.Store.scoring_batches`).

    Passage ids and titles as list columns (``cited_ids``, ``gold_ids``, ``cited_titles``,
    ``gold_titles``) or already coded (``cited_id_codes``, ``gold_id_codes``,
    ``cited_title_codes`` aligned with the cited ids, ``gold_title_codes``: lists of
    integers, :class:`EvidenceCodes`). None when only the per-row reference scores them (a
    NULL passage id in a list).
    """
    if "cited_id_codes" in batch.schema.names:  # coded by the read (core.store.rescore_rows)
        c_len, c = _list_codes(batch.column("cited_id_codes"))
        g_len, g = _list_codes(batch.column("gold_id_codes"))
        gt_len, gt = _list_codes(batch.column("gold_title_codes"))
        evidence = EvidenceCodes(
            c_len, c, g_len, g, c_len, _list_codes(batch.column("cited_title_codes"))[1], gt_len, gt
        )
    else:
        cited = _arrow_list(batch.column("cited_ids"))
        gold = _arrow_list(batch.column("gold_ids"))
        if pc.list_flatten(cited).null_count or pc.list_flatten(gold).null_count:
            return None
        evidence = _evidence_codes(
            cited,
            gold,
            _arrow_list(batch.column("cited_titles")),
            _arrow_list(batch.column("gold_titles")),
        )
    cond = _arrow_text(batch.column("condition"))
    no_ev = pc.or_(pc.equal(cond, "no_evidence"), pc.starts_with(cond, "no_evidence|"))
    conf = _one_chunk(batch.column("confidence"))
    return ScoreInputs(
        n=batch.num_rows,
        answer=_arrow_text(batch.column("answer")),
        gold_answer=_arrow_gold(batch.column("gold_answer")),
        aliases=_arrow_list(batch.column("answer_aliases")),
        answer_type=_arrow_text(batch.column("answer_type")),
        reasoning_type=_arrow_text(batch.column("reasoning_type")),
        evidence=evidence,
        parse=_arrow_flags(_arrow_text(batch.column("parse_error"))),
        error=_arrow_flags(_arrow_text(batch.column("error"))),
        labeled=~pc.fill_null(no_ev, False).to_numpy(zero_copy_only=False),
        confidence=pc.fill_null(conf.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False),
    )


# ---------------------------------------------------------------------------- array helpers
def as_numpy(arr: pa.Array) -> np.ndarray:
    """An Arrow array as numpy (copied where it must be)."""
    return arr.to_numpy(zero_copy_only=False)


def column_codes(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Integer codes of a string array (null -> -1) and the distinct values."""
    enc = pc.dictionary_encode(arr)
    idx = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, enc.dictionary


def list_cells(arr: pa.Array, rows: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
    """Per-row lengths (a null list is empty) and the flat values of a list array."""
    if rows is not None:
        arr = arr.take(pa.array(rows))
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    return lengths.astype(np.int64), pc.list_flatten(arr)
