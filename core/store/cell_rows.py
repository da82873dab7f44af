"""Cell aggregates of stored scores, for ONCU and sample means at study scale (issue 38).

A study holds ten million predictions and more; a frame of them all costs seconds to read and
gigabytes to hold. The aggregates below are what ONCU and the sample-level means need of them,
computed where the data lives: per (run, condition) cell its counts, sums and value counts,
per (run, group cells) its distinct instances, per (run, group cells, condition) its scored
values' sum. :mod:`core.oncu.cells` turns them into the tables
:func:`core.oncu.metrics.oncu_summary` and :func:`core.oncu.metrics.sample_level_means` make
from :meth:`core.store.analysis.AnalysisMixin.analysis_frame`.

The rows are those of the analysis frame: every stored score row of the runs (a prediction
not yet scored has none), variants included unless ``plain``. NaN scores are missing, as in the
frame: means skip them. Sums are compensated (``fsum``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from core.store.analysis import GROUP_CELLS
from core.store.connection import StoreBase
from core.store.frames import fetch_frame
from core.store.schema import SCORE_COLUMNS

__all__ = ["CellsMixin"]

#: The rows of the analysis frame: score rows with their run and instance.
_ROWS = """FROM scores s JOIN runs r USING (run_id)
           JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
           WHERE list_contains(?, s.run_id)"""

#: Text that is set: what :func:`core.oncu.share.is_error` calls an error (not blank; blank is
#: what Python's ``str.isspace`` calls white space).
_SET = (
    "regexp_matches({0}, '[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{{85}}\\x{{a0}}\\x{{1680}}"
    "\\x{{2000}}-\\x{{200a}}\\x{{2028}}\\x{{2029}}\\x{{202f}}\\x{{205f}}\\x{{3000}}]')"
)


def _cells(cells: Sequence[str]) -> list[str]:
    bad = [c for c in cells if c not in GROUP_CELLS or c == "instance_id"]
    if bad:
        raise ValueError(f"not group cells: {bad}; choose from {list(GROUP_CELLS[1:])}")
    return list(dict.fromkeys(cells))


def _score(column: str) -> str:
    if column not in SCORE_COLUMNS or column == "failure_label":
        raise ValueError(f"not a numeric score column: {column!r}")
    return column


def _sums(c: str, odd: bool, spread: bool) -> str:
    """The aggregates of a score column ``c`` (``odd``: it holds NaN or infinite values)."""
    v = f"CASE WHEN isnan({c}) THEN NULL ELSE {c} END" if odd else c
    f = f"CASE WHEN isfinite({c}) THEN {c} END" if odd else c
    out = f", fsum({v}) AS sum_{c}, count({f}) AS n_{c}, bool_or(NOT isfinite({c})) AS odd_{c}"
    if spread:
        out += f", min({f}) AS lo_{c}, max({f}) AS hi_{c}, approx_count_distinct({f}) AS d_{c}"
    return out


class CellsMixin(StoreBase):
    """Aggregates of the analysis frame's rows, computed in the store."""

    def group_census(
        self, run_ids: Sequence[str], cells: Sequence[str], plain: bool = False
    ) -> tuple[pd.DataFrame, bool]:
        """``(census, same)``: instances per group, and whether every run has the same ones.

        ``census``: per (run, model, dataset, ``cells``): ``n_instances`` (distinct instances
        with a score row of the run, any condition) and ``applicable`` (every one of them
        oracle applicable with a gold passage). Lengths are exact (a coarser length cell sums
        them: an instance has one length). ``same``: every run holds a score row of the same
        set of instances (pairing the runs by instance keeps every row).
        """
        keys = _cells(cells)
        cols = "".join(f", i.{c}" for c in keys)
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE census_pairs AS SELECT DISTINCT run_id, instance_id "
                f"FROM scores s WHERE list_contains(?, s.run_id){only}",
                [list(run_ids)],
            )
            try:
                census = fetch_frame(
                    con,
                    f"""
                    SELECT s.run_id AS run, r.model, r.dataset_id AS dataset{cols},
                           count(*) AS n_instances,
                           bool_and(coalesce(i.oracle_applicable, false)
                                    AND coalesce(i.n_gold, 0) > 0) AS applicable
                    FROM census_pairs s
                    JOIN runs r USING (run_id)
                    JOIN instances i
                        ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
                    GROUP BY ALL
                    """,
                    [],
                    own=True,
                )
                pairs, distinct = con.execute(
                    "SELECT count(*), count(DISTINCT instance_id) FROM census_pairs"
                ).fetchone()
            finally:
                con.execute("DROP TABLE IF EXISTS census_pairs")
        return census, int(pairs) == len(set(run_ids)) * int(distinct)

    def group_cells(
        self,
        run_ids: Sequence[str],
        columns: Sequence[str],
        cells: Sequence[str],
        plain: bool = False,
    ) -> pd.DataFrame:
        """Per (run, model, dataset, ``cells``, condition): ``rows`` and per score column.

        Per column ``c``: ``scored_c`` (rows whose ``c`` is a number: not NULL, not NaN) and
        ``total_c`` (their compensated sum).
        """
        keys = _cells(cells)
        names = [_score(c) for c in columns]
        cols = "".join(f", i.{c}" for c in keys)
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            out = self._group_sums(con, run_ids, names, cols, only, odd=set())
            # a NaN among a column's values: read again with NaN as missing
            odd = {c for c in names if out[f"odd_{c}"].fillna(False).any()}
            if odd:
                out = self._group_sums(con, run_ids, names, cols, only, odd=odd)
        return out.drop(columns=[f"odd_{c}" for c in names])

    @staticmethod
    def _group_sums(
        con, run_ids: Sequence[str], names: list[str], cols: str, only: str, odd: set[str]
    ) -> pd.DataFrame:
        """:meth:`group_cells`' query, and per column ``c`` ``odd_c``.

        ``odd_c``: ``c`` holds a NaN; its sums are right only when ``c`` is in ``odd``.
        """
        values = "".join(
            f", CASE WHEN isnan({c}) THEN NULL ELSE {c} END AS v_{c}"
            if c in odd
            else f", {c} AS v_{c}"
            for c in names
        )
        columns = "".join(
            f", count(s.v_{c}) AS scored_{c}, fsum(s.v_{c}) AS total_{c}"
            f", bool_or(isnan(s.v_{c})) AS odd_{c}"
            for c in names
        )
        return fetch_frame(
            con,
            f"""
            SELECT s.run_id AS run, r.model, r.dataset_id AS dataset{cols}, s.condition,
                   count(*) AS rows{columns}
            FROM (SELECT run_id, instance_id, condition{values}
                  FROM scores s WHERE list_contains(?, s.run_id){only}) s
            JOIN runs r USING (run_id)
            JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
            GROUP BY ALL
            """,
            [list(run_ids)],
        )

    def length_grid(self, run_ids: Sequence[str], plain: bool = False) -> tuple[int, int]:
        """``(distinct context lengths, distinct (dataset, instance) with a length)``.

        Over the instances with a score row of the runs: what
        :func:`core.oncu.groups.on_length_grid` counts on the analysis frame.
        """
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            distinct, instances = con.execute(
                f"""
                SELECT count(DISTINCT i.context_length), count(*) FILTER (
                           WHERE i.context_length IS NOT NULL)
                FROM (SELECT DISTINCT r.dataset_id, s.instance_id FROM scores s
                      JOIN runs r USING (run_id)
                      WHERE list_contains(?, s.run_id){only}) s
                JOIN instances i ON i.dataset_id = s.dataset_id AND i.instance_id = s.instance_id
                """,
                [list(run_ids)],
            ).fetchone()
        return int(distinct), int(instances)

    def sample_cells(
        self,
        run_ids: Sequence[str],
        columns: Sequence[str],
        plain: bool = False,
        spread: bool = False,
    ) -> pd.DataFrame:
        """Per (run, model, dataset, condition): counts and each column's sums.

        Columns: ``n`` (rows), ``missing`` (failed calls: ``error`` set), ``n_parse_error``,
        and per score column ``c``: ``sum_c`` (compensated sum of its values that are not
        NaN) and ``n_c`` (its finite values); with ``spread`` also ``lo_c`` / ``hi_c`` (the
        least and greatest finite value) and ``d_c`` (about how many distinct finite values:
        HyperLogLog, a hint only).
        """
        names = [_score(c) for c in columns]
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            scores = self._sums(con, run_ids, names, only, spread, odd=set())
            # a NaN or an infinity among a column's values: read again, those skipped
            odd = {c for c in names if scores[f"odd_{c}"].fillna(False).any()}
            if odd:
                scores = self._sums(con, run_ids, names, only, spread, odd=odd)
            scores = scores.drop(columns=[f"odd_{c}" for c in names])
            errors = self._error_counts(con, run_ids, only, join=False)
            merged = scores.merge(errors, on=["run", "condition"], how="left")
            if not (merged["n_rows"] == merged["n"]).all():
                # predictions without a score row (a run being scored): only the scored ones
                errors = self._error_counts(con, run_ids, only, join=True)
                merged = scores.merge(errors, on=["run", "condition"], how="left")
        merged[["missing", "n_parse_error"]] = merged[["missing", "n_parse_error"]].fillna(0)
        out = merged.drop(columns=["n_rows"])
        head = ["run", "model", "dataset", "condition", "n", "missing", "n_parse_error"]
        return out[head + [c for c in out.columns if c not in head]]

    @staticmethod
    def _sums(
        con, run_ids: Sequence[str], names: list[str], only: str, spread: bool, odd: set[str]
    ) -> pd.DataFrame:
        """:meth:`sample_cells`' score aggregates and, per column ``c``, ``odd_c``.

        ``odd_c``: ``c`` holds a NaN or an infinity; its aggregates are right only when ``c``
        is in ``odd``.
        """
        columns = "".join(_sums(c, c in odd, spread) for c in names)
        return fetch_frame(
            con,
            f"""
            SELECT s.run_id AS run, r.model, r.dataset_id AS dataset, s.condition,
                   count(*) AS n{columns}
            FROM scores s JOIN runs r USING (run_id)
            WHERE list_contains(?, s.run_id){only}
            GROUP BY ALL
            """,
            [list(run_ids)],
        )

    @staticmethod
    def _error_counts(con, run_ids: Sequence[str], only: str, join: bool) -> pd.DataFrame:
        """Per (run, condition): prediction rows, failed calls, parse errors."""
        error, perr = _SET.format("p.error"), _SET.format("p.parse_error")
        if join:
            only = only.replace("s.", "p.") + (
                " AND EXISTS (SELECT 1 FROM scores s WHERE s.run_id = p.run_id AND "
                "s.instance_id = p.instance_id AND s.condition = p.condition AND "
                "s.variant = p.variant)"
            )
        else:
            only = only.replace("s.", "p.")
        return con.execute(
            f"""
            SELECT p.run_id AS run, p.condition, count(*) AS n_rows,
                   count(*) FILTER (WHERE {error}) AS missing,
                   count(*) FILTER (WHERE {perr}) AS n_parse_error
            FROM predictions p WHERE list_contains(?, p.run_id){only}
            GROUP BY ALL
            """,
            [list(run_ids)],
        ).df()

    def value_counts(
        self, run_ids: Sequence[str], columns: Sequence[str], plain: bool = False
    ) -> dict[tuple[str, str], dict[str, dict[float, int]]]:
        """(run, condition) -> column -> {finite value: count} (-0.0 counted as 0.0).

        One pass over the rows for every column: meant for columns of few distinct values.
        """
        names = [_score(c) for c in columns]
        columns = "".join(
            f", histogram(CASE WHEN isfinite({c}) THEN {c} + 0.0 END) AS {c}" for c in names
        )
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                f"""
                SELECT s.run_id, s.condition{columns}
                FROM scores s WHERE list_contains(?, s.run_id){only}
                GROUP BY ALL
                """,
                [list(run_ids)],
            ).fetchall()
        return {
            (run, cond): {c: dict(h or {}) for c, h in zip(names, hists, strict=True)}
            for run, cond, *hists in rows
        }

    def binned_counts(
        self,
        run_ids: Sequence[str],
        column: str,
        limits: Sequence[tuple[str, str, float, float]],
        n_bins: int,
        plain: bool = False,
    ) -> pd.DataFrame:
        """Per (run, condition, bin) of ``column``'s finite values: equal-width bins.

        ``limits``: ``(run, condition, lo, hi)`` of each cell to bin, its least and greatest
        finite value (``hi > lo``). The bin of a value ``x``:
        ``min(trunc((x - lo) / (hi - lo) * n_bins), n_bins - 1)``, as
        :func:`core.stats.inference.multinomial_means` bins. Columns: ``run``, ``condition``,
        ``bin``, ``count``, ``total`` (compensated sum) and ``spread`` (mean squared deviation
        from the bin's mean).
        """
        col = _score(column)
        only = " AND s.variant = ''" if plain else ""
        runs_, conds, los, his = (
            (list(x) for x in zip(*limits, strict=True)) if limits else ([],) * 4
        )
        with self.connect(read_only=True) as con:
            return con.execute(
                f"""
                WITH lim AS (
                    SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS condition,
                           unnest(?::DOUBLE[]) AS lo, unnest(?::DOUBLE[]) AS hi
                )
                SELECT s.run_id AS run, s.condition,
                       least(CAST(trunc(({col} - lo) / (hi - lo) * ?) AS BIGINT), ? - 1) AS bin,
                       count(*) AS count, fsum({col}) AS total, var_pop({col}) AS spread
                FROM scores s JOIN lim USING (run_id, condition)
                WHERE list_contains(?, s.run_id) AND isfinite({col}){only}
                GROUP BY ALL ORDER BY ALL
                """,
                [runs_, conds, los, his, int(n_bins), int(n_bins), list(run_ids)],
            ).df()

    def cell_scores(
        self,
        run_ids: Sequence[str],
        columns: Sequence[str],
        cells: Sequence[tuple[str, str]],
        plain: bool = False,
    ) -> pd.DataFrame:
        """The score rows of some (run, condition) cells, in the analysis frame's order.

        Columns: ``run``, ``condition`` and ``columns``; rows ordered as
        :meth:`core.store.analysis.AnalysisMixin.analysis_frame` orders them (run, the
        instance's import order, condition, variant): the order the bootstrap resamples.
        """
        col = ", ".join(f"s.{_score(c)}" for c in columns)
        only = " AND s.variant = ''" if plain else ""
        want = [f"{run}\x1f{cond}" for run, cond in cells]
        with self.connect(read_only=True) as con:
            return fetch_frame(
                con,
                f"""
                SELECT s.run_id AS run, s.condition, {col}
                {_ROWS}{only}
                AND list_contains(?, s.run_id || chr(31) || s.condition)
                ORDER BY s.run_id, i.ord, s.condition, s.variant
                """,
                [list(run_ids), want],
            )
