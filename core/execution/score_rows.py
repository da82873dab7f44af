"""Scores of the engine's write batches, computed from what the engine holds.

:func:`batch_scores` builds, for a batch of prediction rows, the score rows that
:func:`core.scoring.rows.score_frame` gives on the frame :meth:`core.store.Store.scoring_frame`
would read back for them; :class:`ScoringInputs` holds what that needs from the run's
instances (gold answers and ids, passage titles), read once for all of a run's batches.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from core.scoring.inputs import inputs_from_arrow
from core.scoring.normalize import list_cell, truthy_cell
from core.scoring.rows import (
    ANSWER_SCORES,
    EVIDENCE_SCORES,
    SCORE_COLUMNS,
    confidence_error,
    evidence_scores,
    failure_label,
    score_answer,
    score_frame,
)
from core.scoring.vector import score_table
from core.store import Store

__all__ = ["PREFETCH_MAX", "ScoringInputs", "batch_scores"]

#: Most passages whose titles the writer reads in its first write, with the rest of the
#: planned instances' scoring inputs (:class:`ScoringInputs`; a larger run's batches read
#: their own instances' as they come).
PREFETCH_MAX = 200_000

_KEY_COLUMNS = ("run_id", "instance_id", "condition", "variant")


class ScoringInputs:
    """What scoring needs from a run's instances, read once for all of the writer's batches.

    It also keeps what the writer's progress needs between batches (``scopes``, ``counted``:
    :func:`core.execution.write.write_rows`).

    :meth:`core.store.Store.scoring_inputs` per batch costs several milliseconds however
    small the batch; the writer instead reads the planned instances' inputs in its first
    write, every passage title included while they have at most :data:`PREFETCH_MAX`
    passages (about 40 ms for 35,000), and later batches read nothing more. A larger run
    reads its batches' instances as they come, and the titles of cited passages it has not
    read yet.
    """

    def __init__(self, dataset: str, planned: Collection[str] = ()):
        self.dataset = dataset
        self.info: dict[str, dict[str, Any]] = {}
        self._read: set[str] = set()  # instances asked for (stored or not)
        self._complete: set[str] = set()  # instances whose every title is read
        self._asked: set[tuple[str, str]] = set()  # (instance, cited passage) asked for
        self._prefetch = sorted(set(planned))
        # The writer's progress between its batches (core.execution.write): the data-version
        # scopes its first committed progress bumped, and whether the run row's counts are
        # exact (a progress of this writer committed: later batches add theirs to them).
        self.scopes: list[str] | None = None
        self.counted = False

    def get(
        self, store: Store, con: Any, cited: Sequence[tuple[str, Sequence[str] | None]]
    ) -> Mapping[str, dict[str, Any]]:
        """The inputs of every instance read so far, including those of ``cited``."""
        if self._prefetch:
            want, self._prefetch = self._prefetch, []
            if store.passage_count(con, self.dataset, want) <= PREFETCH_MAX:
                self.info.update(
                    store.scoring_inputs(
                        con, self.dataset, [(i, None) for i in want], all_titles=True
                    )
                )
                self._read.update(want)
                self._complete.update(want)
        need: dict[str, set[str]] = {}
        for iid, ids in cited:
            if iid in self._complete:
                continue
            known = self.info.get(iid, {}).get("titles", {})
            new = {p for p in ids or () if p not in known and (iid, p) not in self._asked}
            if new or iid not in self._read:
                need.setdefault(iid, set()).update(new)
        if not need:
            return self.info
        got = store.scoring_inputs(con, self.dataset, [(i, sorted(p)) for i, p in need.items()])
        self._read.update(need)
        self._asked.update((i, p) for i, ps in need.items() for p in ps)
        for iid, rec in got.items():
            if iid in self.info:
                self.info[iid]["titles"].update(rec["titles"])
            else:
                self.info[iid] = rec
        return self.info


def batch_scores(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> pa.Table | None:
    """The score rows of prediction rows, from the rows and their instances' inputs.

    The rows :func:`core.scoring.rows.score_frame` gives on the frame :meth:`core.store.Store.
    scoring_frame` would read back for these rows, built from what the engine holds: a failed
    call (``error`` set) gets NULL scores and no failure label, an unparseable reply scores 0
    and stays in every denominator (seed 000 §8.1). Rows whose instance is not stored are not
    scored (as the store's join leaves them out).

    Returns an Arrow table of the key and score columns (NaN as null, a NULL variant as
    ``''``), as :meth:`core.store.Store.write_scores` inserts it. The batch's columns go to
    the column scorer as typed Arrow arrays (:func:`core.scoring.rows.score_arrow`): no
    DataFrame, whose construction and conversion cost more than the scoring of a small batch
    (the engine writes about once a second, often a few rows). Values Arrow cannot take as
    typed (or that only the per-row reference scores) take the frame path (:func:`_frame_scores`).
    """
    rows = [r for r in rows if r["instance_id"] in info]
    if not rows:
        return None
    inst = [info[r["instance_id"]] for r in rows]
    keys = {
        c: pa.array([r[c] if c != "variant" else (r[c] or "") for r in rows], pa.string())
        for c in _KEY_COLUMNS
    }
    if len(rows) <= ROW_SCORING_MAX:
        scores = _row_scores(rows, inst)
        if scores is not None:
            return pa.table({**keys, **scores})
    try:
        table = _scoring_table(rows, inst)
        inputs = inputs_from_arrow(table)
    except ARROW_ERRORS:
        inputs = None
    if inputs is None:
        scores = pa.Table.from_pandas(_frame_scores(rows, inst), preserve_index=False)
    else:
        scores = score_table(inputs)
    return pa.table({**keys, **{c: scores.column(c) for c in SCORE_COLUMNS}})


#: Most rows a batch scores one by one (:func:`_row_scores`); a larger one takes the column
#: scorer, whose fixed cost (some hundred Arrow and numpy calls, ~3 ms) its rows share.
ROW_SCORING_MAX = 64


def _row_scores(
    rows: Sequence[Mapping[str, Any]], inst: Sequence[Mapping[str, Any]]
) -> dict[str, pa.Array] | None:
    """The score columns of a few rows, scored one by one with the per-row definitions.

    What :func:`core.scoring.rows.score_frame_rows` (the reference, which the column scorer
    equals on every row and field, bit for bit: ``tests/test_write_scores.py``) gives on the
    rows' scoring frame, without building the frame: the engine's batch of a second's
    answers costs a fraction of a millisecond instead of the column scorer's ~3 ms. None
    when a value is not of the type the engine gives (the column scorer takes the batch).
    """
    n = len(rows)
    out = {k: [math.nan] * n for k in _FLOAT_SCORES}
    labels: list[str | None] = [None] * n
    for i, (row, ins) in enumerate(zip(rows, inst, strict=True)):
        answer, cited, conf = row["answer"], row["cited_ids"], row["confidence"]
        if not (
            (answer is None or isinstance(answer, str))
            and (conf is None or type(conf) is float)
            and _str_list(cited)
            and _str_list(ins["gold_ids"])
        ):
            return None
        if truthy_cell(row["error"]):
            continue  # a failed call: no answer to score (NaN scores, no label)
        atype, rtype = ins["answer_type"], ins["reasoning_type"]
        is_parse = truthy_cell(row["parse_error"])
        golds = tuple(
            g for g in (ins["gold_answer"], *list_cell(ins["answer_aliases"])) if isinstance(g, str)
        ) or ("",)
        if is_parse:
            scores = dict.fromkeys(ANSWER_SCORES, 0.0)
            cited_l: list[str] = []
            titles: dict[str, Any] = {}
        else:
            scores = score_answer(answer or "", golds, atype, rtype)
            cited_l = list(cited or [])
            titles = {x: ins["titles"].get(x) for x in cited_l}
        ev = evidence_scores(cited_l, ins["gold_ids"] or [], titles, ins["gold_titles"] or [])
        for k in ANSWER_SCORES:
            out[k][i] = scores[k]
        for k in EVIDENCE_SCORES:
            out[k][i] = ev[k]
        if conf is not None:
            out["confidence_error"][i] = confidence_error(conf, scores["soft_correct"])
        if str(row["condition"]).split("|", 1)[0] != "no_evidence":
            labels[i] = failure_label(
                is_parse, scores["em_strict"] >= 1.0, cited_l, ins["gold_ids"] or [], rtype
            )
    cols = {k: pa.array(v, pa.float64(), from_pandas=True) for k, v in out.items()}
    cols["failure_label"] = pa.array(labels, pa.string())
    return {k: cols[k] for k in SCORE_COLUMNS}


_FLOAT_SCORES = tuple(c for c in SCORE_COLUMNS if c != "failure_label")


def _str_list(values: Any) -> bool:
    """Whether ``values`` is None or a list of strings (passage ids as the engine has them)."""
    return values is None or (type(values) is list and all(type(v) is str for v in values))


#: What the Arrow conversion of a batch's values may raise (the frame path takes them).
ARROW_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)

_TEXT = pa.string()
_LIST = pa.list_(pa.string())


def _scoring_table(
    rows: Sequence[Mapping[str, Any]], inst: Sequence[Mapping[str, Any]]
) -> pa.Table:
    """The scoring columns of :meth:`core.store.Store.scoring_frame` for the rows, typed.

    Alias lists keep their strings only (as the frame path reads them); every other value
    is taken as it is, and one Arrow cannot hold as its column's type raises.
    """

    def text(values: Sequence[Any]) -> pa.Array:
        return pa.array(values, _TEXT)

    def lists(values: Sequence[Any]) -> pa.Array:
        return pa.array(values, _LIST)

    return pa.table(
        {
            "condition": text([r["condition"] for r in rows]),
            "answer": text([r["answer"] for r in rows]),
            "cited_ids": lists([r["cited_ids"] for r in rows]),
            "parse_error": text([r["parse_error"] for r in rows]),
            "error": text([r["error"] for r in rows]),
            "confidence": pa.array([r["confidence"] for r in rows], pa.float64()),
            "gold_answer": text([i["gold_answer"] for i in inst]),
            "answer_aliases": lists(
                [
                    None if a is None else [x for x in a if isinstance(x, str)]
                    for a in (i["answer_aliases"] for i in inst)
                ]
            ),
            "answer_type": text([i["answer_type"] for i in inst]),
            "reasoning_type": text([i["reasoning_type"] for i in inst]),
            "gold_ids": lists([i["gold_ids"] for i in inst]),
            "gold_titles": lists([i["gold_titles"] for i in inst]),
            "cited_titles": lists(
                [
                    [i["titles"].get(x) for x in (r["cited_ids"] or [])]
                    for r, i in zip(rows, inst, strict=True)
                ]
            ),
        }
    )


def _frame_scores(
    rows: Sequence[Mapping[str, Any]], inst: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """:func:`core.scoring.rows.score_frame` of the rows' scoring frame (the values as given)."""
    frame = pd.DataFrame(
        {
            "condition": [r["condition"] for r in rows],
            "answer": [r["answer"] for r in rows],
            "cited_ids": [r["cited_ids"] for r in rows],
            "parse_error": [r["parse_error"] for r in rows],
            "error": [r["error"] for r in rows],
            "confidence": pd.Series([r["confidence"] for r in rows], dtype="float64"),
            **{
                col: [i[col] for i in inst]
                for col in (
                    "gold_answer",
                    "answer_aliases",
                    "answer_type",
                    "reasoning_type",
                    "gold_ids",
                    "gold_titles",
                )
            },
            "cited_titles": [
                [i["titles"].get(x) for x in (r["cited_ids"] or [])]
                for r, i in zip(rows, inst, strict=True)
            ],
        }
    )
    return score_frame(frame)
