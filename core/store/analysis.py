"""Read queries for scoring and analysis: scoring, analysis, fan-in, probe and CRUX frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from core.store.connection import StoreBase
from core.store.frames import fetch_frame
from core.store.schema import SCORE_COLUMNS

__all__ = ["GROUP_CELLS", "AnalysisMixin"]

#: Instance cells :meth:`AnalysisMixin.analysis_frame` can match an instance on.
GROUP_CELLS = ("instance_id", "source", "reasoning_type", "answer_type", "context_length",
               "evidence_position", "evidence_density", "distractor_similarity", "fan_in",
               "oracle_applicable")  # fmt: skip


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
        """The rows of :meth:`scoring_frame` (unordered) as Arrow batches.

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
            return fetch_frame(
                con,
                f"""
                SELECT s.run_id AS run, r.model, r.dataset_id AS dataset, s.instance_id,
                       s.condition, s.variant, i.source, i.reasoning_type, i.answer_type,
                       i.context_length, i.evidence_position, i.evidence_density,
                       i.distractor_similarity, i.fan_in, i.oracle_applicable,
                       coalesce(g.n_gold, 0) AS n_gold, p.parse_error, p.error, p.confidence,
                       p.logprob_confidence, s.* EXCLUDE (run_id, instance_id, condition, variant)
                FROM scores s
                JOIN runs r USING (run_id)
                JOIN predictions p USING (run_id, instance_id, condition, variant)
                JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
                LEFT JOIN (
                    SELECT dataset_id, instance_id, count(*) AS n_gold FROM passages
                    WHERE is_gold GROUP BY ALL
                ) g ON g.dataset_id = r.dataset_id AND g.instance_id = s.instance_id
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

    def fanin_summaries(
        self,
        run_ids: Sequence[str],
        score_field: str,
        *,
        allowed: pd.DataFrame | None = None,
        pair: bool = False,
        bins: int = 256,
    ) -> dict[str, Any]:
        """Per-(system, fan-in) summaries of the fan-in analysis, aggregated in DuckDB.

        The rows are those of :meth:`fanin_frame` restricted to the four plain conditions
        (``allowed``: only these ``dataset, instance_id`` pairs; ``pair``: with several runs
        of one dataset, only the instances every run has, as
        :func:`core.views.common.pair_runs`). Per row, as :func:`core.fanin.per_instance`:
        ``missing`` (score NULL/NaN or a non-blank ``error``), AC = 100 x score, ER and EP
        over passage-id sets (NULL without a pack or when missing).

        Args:
            run_ids: the runs.
            score_field: the answer score AC is built from (a score column).
            allowed: ``dataset, instance_id`` pairs to keep (None: all).
            pair: restrict several runs of one dataset to their common instances.
            bins: equal-width value bins of the item summaries (AC over [0, 100], ER and EP
                over [0, 1]).

        Returns:
            ``systems`` (``sys, run, model, dataset, condition``, in the order of first
            appearance by run, instance order, condition; systems with fan-in > 0 rows only),
            ``cells`` (``sys, fan_in, n_rows, n_missing, n_fail, n_fail_packed, n_fail_low``:
            failures are AC < 33, packed ones have an ER, low ones ER < 0.5), ``items``
            (``sys, fan_in, metric, bin, count, sum, sumsq, vmin, vmax`` of answered rows;
            ``bin`` -1 holds NULL ER / EP), ``states`` (numpy ``inst, sys, state`` per row:
            0 missing, 1 answered, 2 failed) and ``n_no_gold`` (rows with fan-in 0).

        Raises:
            ValueError: a score field that is not a score column.
        """
        if score_field not in SCORE_COLUMNS or score_field == "failure_label":
            raise ValueError(f"unknown score field {score_field!r}")
        whitespace = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
        only = "" if allowed is None else (
            " AND (r.dataset_id, p.instance_id) IN "
            "(SELECT (unnest($ok_ds), unnest($ok_ids)))"
        )  # fmt: skip
        col = score_field  # a score column (checked above)
        base = f"""
            CREATE OR REPLACE TEMP TABLE fanin_rows AS
            WITH sel AS (SELECT run_id, model, dataset_id FROM runs
                         WHERE list_contains($runs, run_id)),
            gold AS (
                SELECT dataset_id, instance_id, gold_ids,
                       len(list_filter(docs, lambda x, i: list_position(docs, x) = i)) AS fan_in
                FROM (SELECT dataset_id, instance_id, list(passage_id) AS gold_ids,
                             list(doc_id) AS docs
                      FROM passages WHERE is_gold AND dataset_id IN (SELECT dataset_id FROM sel)
                      GROUP BY ALL)
            ),
            pred AS MATERIALIZED (
                SELECT p.run_id AS run, r.dataset_id AS dataset, p.instance_id, p.condition,
                       i.ord, p.input_passage_ids, p.cited_ids, p.error,
                       s.{col} AS score, coalesce(g.gold_ids, []) AS gold_ids,
                       coalesce(g.fan_in, 0) AS fan_in
                FROM predictions p
                JOIN sel r USING (run_id)
                JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
                LEFT JOIN scores s ON s.run_id = p.run_id AND s.instance_id = p.instance_id
                    AND s.condition = p.condition AND s.variant = p.variant
                LEFT JOIN gold g ON g.dataset_id = r.dataset_id AND g.instance_id = p.instance_id
                WHERE p.variant = ''{only}
            ),
            paired AS (
                SELECT * FROM pred
                WHERE NOT $pair OR (SELECT count(DISTINCT dataset) FROM pred) <> 1
                   OR instance_id IN (SELECT instance_id FROM pred GROUP BY instance_id
                                      HAVING count(DISTINCT run) =
                                             (SELECT count(DISTINCT run) FROM pred))
            ),
            packed AS (
                SELECT *,
                       CASE WHEN condition IN ('retrieved', 'oracle')
                            THEN coalesce(input_passage_ids, [])
                            WHEN condition = 'full_context' THEN coalesce(cited_ids, [])
                       END AS pack,
                       (score IS NULL OR isnan(score)
                        OR (error IS NOT NULL AND length(trim(error, $ws)) > 0)) AS missing
                FROM paired
                WHERE condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')
            )
            -- gold ids are distinct (the passages' key): |set(pack) ∩ gold| counts the gold
            -- ids in the pack; the pack's size counts each id at its first position only
            SELECT run, instance_id, condition, ord, fan_in, missing,
                   CASE WHEN NOT missing THEN 100.0::DOUBLE * score END AS ac,
                   CASE WHEN has_pack THEN n_hits::DOUBLE / len(gold_ids) END AS er,
                   CASE WHEN has_pack THEN CASE WHEN len(pack) = 0 THEN 0.0
                                                ELSE n_hits::DOUBLE / n_pack END END AS ep
            FROM (SELECT *, NOT missing AND pack IS NOT NULL AND len(gold_ids) > 0 AS has_pack,
                         len(list_filter(gold_ids, lambda g: list_contains(pack, g))) AS n_hits,
                         len(list_filter(pack, lambda x, i: list_position(pack, x) = i))
                             AS n_pack
                  FROM packed)
        """
        item = (
            "SELECT sys, fan_in, '{m}' AS metric, "
            "CASE WHEN {m} IS NULL THEN -1 ELSE greatest(0, least({top}, "
            "floor({m} * {bins} / {scale})))::INTEGER END AS bin, count(*) AS count, "
            "coalesce(fsum({m}), 0) AS sum, coalesce(fsum({m} * {m}), 0) AS sumsq, "
            "min({m}) AS vmin, max({m}) AS vmax FROM fr WHERE NOT missing GROUP BY ALL"
        )
        items = " UNION ALL ".join(
            item.format(m=m, top=int(bins) - 1, bins=int(bins), scale=s)
            for m, s in (("ac", "100.0"), ("er", "1.0"), ("ep", "1.0"))
        )
        with self.connect(read_only=True) as con:
            params = {"runs": list(run_ids), "pair": bool(pair), "ws": whitespace}
            if allowed is not None:
                params["ok_ds"] = [str(v) for v in allowed["dataset"]]
                params["ok_ids"] = [str(v) for v in allowed["instance_id"]]
            con.execute(base, params)
            (n_no_gold,) = con.execute(
                "SELECT count(*) FROM fanin_rows WHERE fan_in = 0"
            ).fetchone()
            con.execute(
                """
                CREATE OR REPLACE TEMP TABLE fanin_systems AS
                SELECT row_number() OVER (ORDER BY f.run, min(f.ord), f.condition) - 1 AS sys,
                       f.run, any_value(r.model) AS model, any_value(r.dataset_id) AS dataset,
                       f.condition
                FROM fanin_rows f JOIN runs r ON r.run_id = f.run
                WHERE f.fan_in > 0 GROUP BY f.run, f.condition
                """
            )
            systems = con.execute("SELECT * FROM fanin_systems ORDER BY sys").df()
            con.execute(
                "CREATE OR REPLACE TEMP TABLE fr AS SELECT s.sys, f.* FROM fanin_rows f "
                "JOIN fanin_systems s USING (run, condition) WHERE f.fan_in > 0"
            )
            cells = con.execute(
                """
                SELECT sys, fan_in, count(*) AS n_rows, count(*) FILTER (missing) AS n_missing,
                       count(*) FILTER (NOT missing AND ac < 33) AS n_fail,
                       count(*) FILTER (NOT missing AND ac < 33 AND er IS NOT NULL)
                           AS n_fail_packed,
                       count(*) FILTER (NOT missing AND ac < 33 AND er < 0.5) AS n_fail_low
                FROM fr GROUP BY ALL ORDER BY sys, fan_in
                """
            ).df()
            item_frame = con.execute(items + " ORDER BY sys, fan_in, metric, bin").df()
            states = con.execute(
                "SELECT dense_rank() OVER (ORDER BY instance_id) - 1 AS inst, sys, "
                "CASE WHEN missing THEN 0 WHEN ac < 33 THEN 2 ELSE 1 END AS state FROM fr"
            ).fetchnumpy()
        return {"systems": systems, "cells": cells, "items": item_frame, "states": states,
                "n_no_gold": int(n_no_gold)}  # fmt: skip

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
    sql = f"""
        WITH titles AS (
            SELECT dataset_id, instance_id, map(list(passage_id), list(title)) AS tmap,
                   list(title ORDER BY ord) FILTER (WHERE is_gold) AS gold_titles,
                   list(passage_id ORDER BY ord) FILTER (WHERE is_gold) AS gold_ids
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
               list_transform(coalesce(p.cited_ids, []), lambda x: t.tmap[x]) AS cited_titles
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
