"""Blind annotation in the store: the sampled items and the labels people gave them (issue 20).

``annotation_items`` maps an opaque item id to the prediction it stands for (run, instance,
condition, variant) under a rubric, with the seed of the export that drew it;
``annotations`` holds one label per (item, annotator) with the file it came from. The rule
labels are never stored here: they are read from ``scores.failure_label`` when agreement is
reported, so a re-scored run is compared with its current labels.

Functions over a :class:`~core.store.connection.StoreBase` (every value a parameter, no SQL
built from text). A store written before these tables existed reads as having no items
(read-only opens do not migrate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd

from core.store.connection import StoreBase
from core.store.runs import CONDITION_KINDS
from core.store.schema import bump_data_version

__all__ = [
    "annotation_labels",
    "annotation_pool",
    "export_fields",
    "record_items",
    "rule_labels",
    "sampled_items",
    "write_annotations",
]

#: The predictions of a run that a sample may draw from (parameters: run id, run id): plain
#: rows of a four-condition run (Case-view reruns have a variant), every row of other kinds.
_RUN_ROWS = (
    "p.run_id = ? AND (p.variant = '' OR coalesce((SELECT kind FROM runs WHERE run_id = ?), "
    "'conditions') NOT IN (SELECT unnest(?::VARCHAR[])))"
)


def annotation_pool(store: StoreBase, run_id: str) -> tuple[pd.DataFrame, int]:
    """The predictions of a run that have a rule label, and the run's failed calls.

    Args:
        store: the store.
        run_id: the run.

    Returns:
        ``(frame, n_failed)``: one row per prediction with a failure label and no ``error``
        (``instance_id, condition, variant, failure_label``, sorted by that key), and the
        number of its calls that failed (``error`` set: no answer, no label, never sampled).
    """
    kinds = list(CONDITION_KINDS)
    with store.connect(read_only=True) as con:
        frame = con.execute(
            "SELECT p.instance_id, p.condition, p.variant, s.failure_label "
            "FROM predictions p JOIN scores s USING (run_id, instance_id, condition, variant) "
            "WHERE " + _RUN_ROWS + " AND coalesce(p.error, '') = '' "
            "AND s.failure_label IS NOT NULL ORDER BY p.instance_id, p.condition, p.variant",
            [run_id, run_id, kinds],
        ).df()
        n_failed = con.execute(
            "SELECT count(*) FROM predictions p WHERE "
            + _RUN_ROWS
            + " AND coalesce(p.error, '') <> ''",
            [run_id, run_id, kinds],
        ).fetchall()[0][0]
    return frame, int(n_failed)


def export_fields(
    store: StoreBase, run_id: str, keys: Sequence[tuple[str, str, str]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What an annotator sees of each sampled prediction, and the passages it was shown.

    Args:
        store: the store.
        run_id: the run.
        keys: ``(instance_id, condition, variant)`` of the sampled predictions.

    Returns:
        ``(predictions, passages)``: ``instance_id, condition, variant, question,
        gold_answer, answer, cited_ids, input_passage_ids`` per key, and ``instance_id,
        passage_id, title, text`` of every passage of those instances (the caller keeps the
        ones shown).
    """
    packed = ["\x1f".join(k) for k in keys]
    with store.connect(read_only=True) as con:
        preds = con.execute(
            "SELECT p.instance_id, p.condition, p.variant, i.question, i.gold_answer, p.answer, "
            "p.cited_ids, p.input_passage_ids FROM predictions p "
            "JOIN runs r ON r.run_id = p.run_id "
            "LEFT JOIN instances i ON i.dataset_id = r.dataset_id "
            "AND i.instance_id = p.instance_id "
            "WHERE p.run_id = ? AND list_contains(?, p.instance_id || chr(31) || p.condition "
            "|| chr(31) || p.variant)",
            [run_id, packed],
        ).df()
        passages = con.execute(
            "SELECT g.instance_id, g.passage_id, g.title, g.text FROM passages g "
            "JOIN runs r ON r.dataset_id = g.dataset_id "
            "WHERE r.run_id = ? AND list_contains(?, g.instance_id) "
            "ORDER BY g.instance_id, g.ord",
            [run_id, sorted({k[0] for k in keys})],
        ).df()
    return preds, passages


def record_items(
    store: StoreBase, rows: Sequence[Mapping[str, Any]], then: Callable[[], Any] | None = None
) -> int:
    """Store sampled items (an item already stored keeps its first record); returns new ones.

    Args:
        store: the store.
        rows: dicts with ``item_id, run_id, instance_id, condition, variant, rubric, seed``.
        then: called inside the transaction, after the items (the export puts its file in
            place): when it raises, no item is stored.
    """
    cols = ("item_id", "run_id", "instance_id", "condition", "variant", "rubric", "seed")
    values = [[r[c] for c in cols] for r in rows]
    with store.transaction() as con:
        before = con.execute("SELECT count(*) FROM annotation_items").fetchall()[0][0]
        if values:
            con.executemany(
                "INSERT INTO annotation_items (item_id, run_id, instance_id, condition, variant, "
                "rubric, seed) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                values,
            )
        after = con.execute("SELECT count(*) FROM annotation_items").fetchall()[0][0]
        if then is not None:
            then()
    return int(after - before)


def sampled_items(store: StoreBase, run_id: str, rubric: str) -> pd.DataFrame:
    """The items sampled from a run under a rubric.

    Returns:
        ``item_id, instance_id, condition, variant, seed`` sorted by item id (empty when
        none, or on a store older than these tables).
    """
    try:
        with store.connect(read_only=True) as con:
            return con.execute(
                "SELECT item_id, instance_id, condition, variant, seed FROM annotation_items "
                "WHERE run_id = ? AND rubric = ? ORDER BY item_id",
                [run_id, rubric],
            ).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=["item_id", "instance_id", "condition", "variant", "seed"])


def annotation_labels(store: StoreBase, run_id: str, rubric: str) -> pd.DataFrame:
    """People's labels of a run's sampled items under a rubric.

    Returns:
        ``item_id, annotator, label, source_file, imported_at`` sorted by annotator and item
        (empty when none, or on a store older than these tables).
    """
    try:
        with store.connect(read_only=True) as con:
            return con.execute(
                "SELECT a.item_id, a.annotator, a.label, a.source_file, a.imported_at "
                "FROM annotations a JOIN annotation_items i USING (item_id) "
                "WHERE i.run_id = ? AND i.rubric = ? ORDER BY a.annotator, a.item_id",
                [run_id, rubric],
            ).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=["item_id", "annotator", "label", "source_file", "imported_at"])


def rule_labels(store: StoreBase, run_id: str, rubric: str) -> dict[str, str]:
    """``item_id -> scores.failure_label`` of a run's sampled items (items without one left out).

    Args:
        store: the store.
        run_id: the run.
        rubric: the rubric the items were sampled under.
    """
    try:
        with store.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT i.item_id, s.failure_label FROM annotation_items i "
                "JOIN scores s ON s.run_id = i.run_id AND s.instance_id = i.instance_id "
                "AND s.condition = i.condition AND s.variant = i.variant "
                "WHERE i.run_id = ? AND i.rubric = ? AND s.failure_label IS NOT NULL",
                [run_id, rubric],
            ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {item: label for item, label in rows}


def write_annotations(
    store: StoreBase,
    run_id: str,
    annotator: str,
    new: Mapping[str, str],
    replaced: Mapping[str, str],
    source_file: str,
) -> None:
    """Store one annotator's labels in one transaction: all of them or, on any error, none.

    Args:
        store: the store.
        run_id: the run the items belong to (its data version is bumped).
        annotator: the annotator's name.
        new: ``item_id -> label`` for items this annotator has not labelled (a label stored
            meanwhile by another import fails the insert, and nothing is written).
        replaced: ``item_id -> label`` replacing this annotator's stored labels.
        source_file: the file the labels came from (as the user named it).
    """
    with store.transaction() as con:
        if new:
            con.executemany(
                "INSERT INTO annotations (item_id, annotator, label, source_file) "
                "VALUES (?, ?, ?, ?)",
                [[item, annotator, label, source_file] for item, label in new.items()],
            )
        if replaced:
            con.executemany(
                "UPDATE annotations SET label = ?, source_file = ?, "
                "imported_at = current_timestamp WHERE item_id = ? AND annotator = ?",
                [[label, source_file, item, annotator] for item, label in replaced.items()],
            )
        if new or replaced:
            bump_data_version(con, runs=[run_id])
