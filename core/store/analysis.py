"""Read queries for scoring and analysis: scoring, analysis, fan-in, probe and CRUX frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from core.store.connection import StoreBase
from core.store.frames import fetch_frame
from core.store.schema import N_GOLD_VERSION, SCORE_COLUMNS, stored_version

__all__ = ["GROUP_CELLS", "AnalysisMixin"]

#: The gold passages of each instance counted from the passages (stores before schema 6).
_GOLD_COUNT_JOIN = """LEFT JOIN (
                    SELECT dataset_id, instance_id, count(*) AS n_gold FROM passages
                    WHERE is_gold GROUP BY ALL
                ) g ON g.dataset_id = r.dataset_id AND g.instance_id = s.instance_id"""

#: Instance cells :meth:`AnalysisMixin.analysis_frame` can match an instance on.
GROUP_CELLS = (
    "instance_id",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "fan_in",
    "oracle_applicable",
)


class AnalysisMixin(StoreBase):
    """Frames joined across tables for scoring, the methods and the dashboard."""

    @staticmethod
    def passage_count(
        con: duckdb.DuckDBPyConnection, dataset: str, instance_ids: Sequence[str]
    ) -> int:
        """How many passages the given instances of a dataset have, together."""
        (n,) = con.execute(
            "SELECT count(*) FROM passages WHERE dataset_id = ? "
            "AND instance_id IN (SELECT unnest(?::VARCHAR[]))",
            [dataset, list(instance_ids)],
        ).fetchone()
        return int(n)

    @staticmethod
    def scoring_inputs(
        con: duckdb.DuckDBPyConnection,
        dataset: str,
        cited: Sequence[tuple[str, Sequence[str] | None]],
        all_titles: bool = False,
    ) -> dict[str, dict[str, Any]]:
        """What scoring needs from the instances of some predictions (the engine's batches).

        Args:
            con: an open connection.
            dataset: the dataset of the predictions.
            cited: ``(instance_id, cited passage ids)`` of each prediction.

        Returns:
            ``{instance_id: {...}}`` for the instances stored in the dataset: ``gold_answer``,
            ``answer_aliases``, ``answer_type``, ``reasoning_type``, ``gold_ids`` and
            ``gold_titles`` (gold passages in stored order) and ``titles`` (passage id ->
            title of the gold and cited passages): the values :meth:`scoring_frame` joins to
            those predictions. Only gold and cited passages are read, not every title,
            unless ``all_titles`` (then ``titles`` holds every passage of the instances).
        """
        want = sorted({iid for iid, _ in cited})
        if not want:
            return {}
        keys = sorted({f"{iid}\x1f{pid}" for iid, ids in cited for pid in (ids or ())})
        # Two flat queries: list aggregates and a join of the two cost twice as much.
        out: dict[str, dict[str, Any]] = {}
        for iid, gold_answer, aliases, atype, rtype in con.execute(
            "SELECT instance_id, gold_answer, answer_aliases, answer_type, reasoning_type "
            "FROM instances WHERE dataset_id = ? "
            "AND instance_id IN (SELECT unnest(?::VARCHAR[]))",
            [dataset, want],
        ).fetchall():
            out[iid] = {
                "gold_answer": gold_answer,
                "answer_aliases": aliases,
                "answer_type": atype,
                "reasoning_type": rtype,
                "gold_ids": [],
                "gold_titles": [],
                "titles": {},
            }
        passages = con.execute(
            "SELECT instance_id, passage_id, title, is_gold FROM passages "
            "WHERE dataset_id = ? AND instance_id IN (SELECT unnest(?::VARCHAR[])) "
            "AND (? OR is_gold OR instance_id || chr(31) || passage_id IN "
            "(SELECT unnest(?::VARCHAR[]))) ORDER BY instance_id, ord",
            [dataset, want, bool(all_titles), keys],
        ).fetchall()
        for iid, pid, title, is_gold in passages:
            inst = out.get(iid)
            if inst is None:
                continue
            inst["titles"][pid] = title
            if is_gold:
                inst["gold_ids"].append(pid)
                inst["gold_titles"].append(title)
        return out

    def scoring_frame(
        self,
        run_ids: Sequence[str],
        con: duckdb.DuckDBPyConnection | None = None,
        instance_ids: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """Predictions of the runs joined with what scoring needs from their instances.

        Columns: the prediction key, ``answer``, ``cited_ids``, ``parse_error``, ``error``,
        ``confidence``, ``gold_answer``, ``answer_aliases``, ``answer_type``,
        ``reasoning_type``, ``gold_ids``, ``cited_titles`` (title of each cited id, None when
        unknown) and ``gold_titles``.

        Args:
            run_ids: the runs.
            con: an open connection (inside the caller's transaction); None opens one.
            instance_ids: only these instances' predictions (the engine scores each written
                batch this way); None for all.
        """
        sql, params = _scoring_query(run_ids, instance_ids, ordered=True)
        if con is not None:
            return con.execute(sql, params).df()
        with self.connect(read_only=True) as rcon:
            return rcon.execute(sql, params).df()

    @staticmethod
    def scoring_batches(
        con: duckdb.DuckDBPyConnection,
        run_ids: Sequence[str],
        batch_rows: int = 200_000,
        stored: bool = False,
    ) -> pa.RecordBatchReader:
        """The rows of :meth:`scoring_frame` (unordered, gold lists too) as Arrow batches.

        At most ``batch_rows`` rows a batch, no Python object per value. The reader
        streams from ``con``: read it to the end before the next statement on ``con``.
        With ``stored``, each row also carries its stored score row: ``stored_`` (whether
        one exists) and ``stored_<column>`` for each of ``SCORE_COLUMNS`` (NULL without).
        """
        sql, params = _scoring_query(run_ids, None, ordered=False, stored=stored)
        return con.sql(sql, params=params).to_arrow_reader(batch_rows)

    def analysis_frame(
        self,
        run_ids: Sequence[str],
        same_cells: tuple[str, str, Sequence[str]] | None = None,
    ) -> pd.DataFrame:
        """Scores of the runs with run, model, dataset and every instance metadata cell.

        One row per prediction: the inputs of ONCU, failure breakdowns and paired contrasts.
        A failed call (``error`` set) is a row with NULL scores: aggregates count it as
        missing.

        Args:
            run_ids: the runs.
            same_cells: ``(dataset, instance_id, columns)``: only the rows of instances whose
                ``columns`` (instance cells of :data:`GROUP_CELLS`) equal that instance's,
                compared as text with missing equal to missing (the Case view's ONCU group,
                read without loading every prediction).

        Raises:
            ValueError: a ``same_cells`` column that is not an instance cell.
        """
        only, params = "", []  # a fragment of owned identifiers and placeholders
        if same_cells is not None:
            dataset, instance_id, columns = same_cells
            bad = [c for c in columns if c not in GROUP_CELLS]
            if bad:
                raise ValueError(f"not instance cells: {bad}; choose from {list(GROUP_CELLS)}")
            # identifiers from the fixed list above only; values as parameters
            only = "".join(
                f" AND CAST(i.{c} AS VARCHAR) IS NOT DISTINCT FROM "
                f"(SELECT CAST({c} AS VARCHAR) FROM instances WHERE dataset_id = ? "
                "AND instance_id = ?)"
                for c in columns
            )
            params = [v for _ in columns for v in (dataset, instance_id)]
        with self.connect(read_only=True) as con:
            # n_gold: kept with each instance since schema 6; an older store opened read-only
            # (never migrated) counts its gold passages here
            kept = stored_version(con) >= N_GOLD_VERSION
            n_gold, gold = ("i.n_gold", "") if kept else ("g.n_gold", _GOLD_COUNT_JOIN)
            return fetch_frame(
                con,
                f"""
                SELECT s.run_id AS run, r.model, r.dataset_id AS dataset, s.instance_id,
                       s.condition, s.variant, i.source, i.reasoning_type, i.answer_type,
                       i.context_length, i.evidence_position, i.evidence_density,
                       i.distractor_similarity, i.fan_in, i.oracle_applicable,
                       coalesce({n_gold}, 0) AS n_gold, p.parse_error, p.error, p.confidence,
                       p.logprob_confidence, s.* EXCLUDE (run_id, instance_id, condition, variant)
                FROM scores s
                JOIN runs r USING (run_id)
                JOIN predictions p USING (run_id, instance_id, condition, variant)
                JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
                {gold}
                WHERE list_contains(?, s.run_id){only}
                ORDER BY s.run_id, i.ord, s.condition, s.variant
                """,
                [list(run_ids), *params],
            )

    def fanin_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Plain-condition predictions of the runs with what fan-in analysis needs.

        One row per prediction with ``variant = ''``: ``run``, ``model``, ``dataset``,
        ``instance_id``, ``condition``, ``input_passage_ids``, ``cited_ids``, ``parse_error``,
        ``error``, the answer scores, ``gold_ids`` (in context order), ``fan_in`` (distinct
        ``doc_id`` among gold passages, from the passages) and ``fan_in_stored`` (the instance
        column).
        """
        with self.connect(read_only=True) as con:
            return con.execute(
                """
                WITH gold AS (
                    SELECT dataset_id, instance_id,
                           list(passage_id ORDER BY ord) AS gold_ids,
                           count(DISTINCT doc_id) AS fan_in
                    FROM passages WHERE is_gold GROUP BY ALL
                )
                SELECT p.run_id AS run, r.model, r.dataset_id AS dataset, p.instance_id,
                       p.condition, p.input_passage_ids, p.cited_ids, p.parse_error, p.error,
                       s.em_strict, s.f1_strict, s.em_relaxed, s.f1_relaxed, s.soft_correct,
                       coalesce(g.gold_ids, []) AS gold_ids, coalesce(g.fan_in, 0) AS fan_in,
                       i.fan_in AS fan_in_stored
                FROM predictions p
                JOIN runs r USING (run_id)
                JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
                LEFT JOIN scores s ON s.run_id = p.run_id AND s.instance_id = p.instance_id
                    AND s.condition = p.condition AND s.variant = p.variant
                LEFT JOIN gold g ON g.dataset_id = r.dataset_id AND g.instance_id = p.instance_id
                WHERE list_contains(?, p.run_id) AND p.variant = ''
                ORDER BY p.run_id, i.ord, p.condition
                """,
                [list(run_ids)],
            ).df()

    def crux_judges(self, dataset: str) -> list[str]:
        """Names of the judges whose ratings of a dataset are stored, sorted."""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT DISTINCT judge FROM answerability WHERE dataset_id = ? ORDER BY judge",
                [dataset],
            ).fetchall()
        return [str(r[0]) for r in rows]

    def crux_judgments(self, dataset: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Sub-questions and answerability ratings of a dataset (CRUX).

        Returns:
            ``(sub_questions, ratings)``: ``instance_id, sq_id, text`` and
            ``instance_id, sq_id, passage_id, rating, judge`` (both empty when none stored).
        """
        sq_sql = (
            "SELECT instance_id, sq_id, text FROM sub_questions WHERE dataset_id = ? "
            "ORDER BY instance_id, sq_id"
        )
        ratings_sql = (
            "SELECT instance_id, sq_id, passage_id, rating, judge FROM answerability "
            "WHERE dataset_id = ? ORDER BY instance_id, sq_id, passage_id, judge"
        )
        with self.connect(read_only=True) as con:
            return con.execute(sq_sql, [dataset]).df(), con.execute(ratings_sql, [dataset]).df()

    def instance_predictions(self, run_ids: Sequence[str], instance_id: str) -> pd.DataFrame:
        """Every prediction of one instance in the runs, with its scores (the Case view).

        Columns: ``run`` plus the prediction and score columns, ordered by run, condition,
        variant.
        """
        with self.connect(read_only=True) as con:
            return con.execute(
                "SELECT p.run_id AS run, p.* EXCLUDE (run_id), "
                "s.* EXCLUDE (run_id, instance_id, condition, variant) "
                "FROM predictions p LEFT JOIN scores s "
                "USING (run_id, instance_id, condition, variant) "
                "WHERE list_contains(?, p.run_id) AND p.instance_id = ? "
                "ORDER BY p.run_id, p.condition, p.variant",
                [list(run_ids), instance_id],
            ).df()

    def condition_means(self, run_ids: Sequence[str], score_field: str) -> pd.DataFrame:
        """Mean and count of one score per (run, condition), aggregated in DuckDB.

        Raises:
            ValueError: ``score_field`` is not a numeric score column.
        """
        numeric = [c for c in SCORE_COLUMNS if c != "failure_label"]
        if score_field not in numeric:
            raise ValueError(f"unknown score field {score_field!r}; choose one of {numeric}")
        col = score_field
        with self.connect(read_only=True) as con:
            return con.execute(
                f"SELECT run_id AS run, condition, count(*) AS n, avg({col}) AS mean "
                "FROM scores WHERE list_contains(?, run_id) AND variant = '' "
                "GROUP BY ALL ORDER BY ALL",
                [list(run_ids)],
            ).df()

    def probe_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Probe predictions of the runs with their relaxed F1 and the instance cells.

        One row per ``probe`` prediction: ``run, dataset, instance_id, variant, meta`` (JSON
        text), ``answer, error, parse_error, f1_relaxed`` and the instance's ``question,
        source, reasoning_type, distractor_similarity, context_length, evidence_position,
        fan_in`` (what the DOLCE report and page show per problem).
        """
        with self.connect(read_only=True) as con:
            return con.execute(
                """
                SELECT p.run_id AS run, r.dataset_id AS dataset, p.instance_id, p.variant,
                       p.meta, p.answer, p.error, p.parse_error, s.f1_relaxed, i.question,
                       i.source, i.reasoning_type, i.distractor_similarity, i.context_length,
                       i.evidence_position, i.fan_in
                FROM predictions p
                JOIN runs r USING (run_id)
                JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
                LEFT JOIN scores s ON s.run_id = p.run_id AND s.instance_id = p.instance_id
                    AND s.condition = p.condition AND s.variant = p.variant
                WHERE list_contains(?, p.run_id) AND p.condition = 'probe'
                ORDER BY p.run_id, i.ord, p.variant
                """,
                [list(run_ids)],
            ).df()


#: The stored score row of each scoring row (:meth:`AnalysisMixin.scoring_batches`): the
#: predictions read joined with the runs' scores first (a narrow join, several times cheaper
#: than joining the scores to the wide scoring rows), then as the rows' ``p``.
_STORED_PREDICTIONS = (
    "(SELECT p.run_id, p.instance_id, p.condition, p.variant, p.answer, p.cited_ids, "
    "p.parse_error, p.error, p.confidence, s.run_id IS NOT NULL AS stored_"
    + "".join(f", s.{c} AS stored_{c}" for c in SCORE_COLUMNS)
    + """
        FROM predictions p
        LEFT JOIN (SELECT * FROM scores WHERE list_contains(?, run_id)) s
            ON s.run_id = p.run_id AND s.instance_id = p.instance_id
            AND s.condition = p.condition AND s.variant = p.variant
        WHERE list_contains(?, p.run_id)) p"""
)
_STORED_COLUMNS = ", p.stored_" + "".join(f", p.stored_{c}" for c in SCORE_COLUMNS)


def _scoring_query(
    run_ids: Sequence[str],
    instance_ids: Sequence[str] | None,
    ordered: bool,
    stored: bool = False,
) -> tuple[str, list[Any]]:
    """The SQL and parameters of the scoring rows (see :meth:`AnalysisMixin.scoring_frame`).

    With ``stored``, each row's stored score columns too (:meth:`scoring_batches`).
    """
    only = "" if instance_ids is None else " AND list_contains(?, instance_id)"
    # Unordered (the re-score's batches): the gold lists in any order -- every score treats
    # them as sets -- which spares DuckDB an ordered aggregate per instance.
    order = " ORDER BY ord" if ordered else ""
    sql = f"""
        WITH titles AS (
            -- passage ids are distinct per instance (the key): a cited id's title is the
            -- title at its position (NULL when the instance has no such passage); cheaper
            -- than building a MAP per instance
            SELECT dataset_id, instance_id, list(passage_id) AS pids, list(title) AS ptitles,
                   list(title{order}) FILTER (WHERE is_gold) AS gold_titles,
                   list(passage_id{order}) FILTER (WHERE is_gold) AS gold_ids
            FROM passages
            WHERE dataset_id IN (SELECT dataset_id FROM runs WHERE list_contains(?, run_id))
                  {only}
            GROUP BY ALL
        )
        SELECT p.run_id, p.instance_id, p.condition, p.variant, p.answer, p.cited_ids,
               p.parse_error, p.error, p.confidence, i.gold_answer, i.answer_aliases,
               i.answer_type, i.reasoning_type,
               coalesce(t.gold_ids, []) AS gold_ids,
               coalesce(t.gold_titles, []) AS gold_titles,
               list_transform(coalesce(p.cited_ids, []),
                              lambda x: t.ptitles[list_position(t.pids, x)]) AS cited_titles
    """
    if stored:
        sql += _STORED_COLUMNS + "\n        FROM " + _STORED_PREDICTIONS
    else:
        sql += "FROM predictions p"
    sql += """
        JOIN runs r USING (run_id)
        JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
        LEFT JOIN titles t ON t.dataset_id = r.dataset_id AND t.instance_id = p.instance_id
    """
    sql += f"""
        WHERE list_contains(?, p.run_id) {only.replace("instance_id", "p.instance_id")}
    """
    runs = list(run_ids)
    params: list[Any] = [runs] if instance_ids is None else [runs, list(instance_ids)]
    params = params + ([runs, runs] if stored else []) + params
    if ordered:
        sql += " ORDER BY p.run_id, i.ord, p.condition, p.variant"
    return sql, params
