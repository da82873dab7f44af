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

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb
import numpy as np
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
        return self.group_pass(run_ids, columns, cells, plain)[0]

    def group_pass(
        self,
        run_ids: Sequence[str],
        columns: Sequence[str],
        cells: Sequence[str],
        plain: bool = False,
    ) -> tuple[pd.DataFrame, tuple[pd.DataFrame, bool] | None]:
        """``(group cells, census)``: :meth:`group_cells`, and when it can tell, the census.

        One pass over the score rows, joined to their instances by a group number (each
        distinct ``cells`` value of a dataset's instances numbered once), not by the cells.
        ``census``: what :meth:`group_census` returns, derived without a pass of its own
        where it follows from the counts: one row per instance and condition (``plain``, or
        no row of a variant), every score row of an instance of the run's dataset, and in
        every (run, group) some condition holding every instance of the group. Else None
        (ask :meth:`group_census`).
        """
        keys = _cells(cells)
        names = [_score(c) for c in columns]
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            runs = _run_table(con, run_ids)
            parts, groups, strays, varied = [], [], False, False
            for dataset, mine in runs.groupby("dataset", sort=True):
                ids = mine["run"].tolist()
                table = _instance_groups(con, dataset, keys)
                sums = _group_sums(con, dataset, ids, names, keys, only, odd=set())
                # a NaN among a column's values: read again with NaN as missing
                odd = {c for c in names if sums[f"odd_{c}"].fillna(False).any()}
                if odd:
                    sums = _group_sums(con, dataset, ids, names, keys, only, odd=odd)
                # score rows of instances the dataset does not hold: left out, as a join does
                stray = sums["g"].isna()
                strays = strays or bool(stray.any())
                if "varied" in sums.columns:  # rows of variants: not one per instance
                    varied = varied or bool(sums["varied"].sum())
                    sums = sums.drop(columns=["varied"])
                sums = sums.loc[~stray].astype({"g": table["g"].dtype})
                parts.append(sums.merge(table[["g", *keys]], on="g", how="left"))
                groups.append(table.assign(dataset=dataset))
        head = ["run", "model", "dataset", *keys, "condition", "rows"]
        if parts:
            sums = pd.concat(parts, ignore_index=True).merge(runs, on="run", how="left")
        else:
            extra = [f"{p}_{c}" for c in names for p in ("scored", "total", "odd")]
            sums = pd.DataFrame(columns=["g", *head, *extra])
        rest = [c for c in sums.columns if c not in head and c != "g"]
        out = sums[head + rest].reset_index(drop=True)
        census = None
        if parts and not strays and not varied:  # one row per instance and condition
            census = _derived_census(
                sums, pd.concat(groups, ignore_index=True), keys, len(set(run_ids))
            )
        return out.drop(columns=[f"odd_{c}" for c in names]), census

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
            return self._with_errors(con, scores, run_ids, only)

    def _with_errors(
        self, con, scores: pd.DataFrame, run_ids: Sequence[str], only: str
    ) -> pd.DataFrame:
        """``scores`` (per run and condition, ``n`` rows) with ``missing``, ``n_parse_error``."""
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

    def sample_pass(
        self, run_ids: Sequence[str], columns: Sequence[str], plain: bool, counted: int
    ) -> tuple[pd.DataFrame, dict[tuple[str, str], dict[str, dict[float, int]]]]:
        """``(cells, value counts)``: :meth:`sample_cells` with ``spread``, and counts.

        The cells as :meth:`sample_cells` gives them with ``spread``; ``value counts`` as
        :meth:`value_counts` gives them, of every column whose estimated distinct values are
        at most ``counted`` in every cell. Those columns' rows are counted per combination of
        their values (one pass for them all; a cell's sums, counts and extremes of them
        follow from its counts), the other columns' aggregates read beside. The estimates: of
        every row where the runs hold few (``d_c`` as :meth:`sample_cells` estimates it);
        else of a 2 % sample of the rows' vectors (which columns are counted: a column of
        many values shows thousands of them there), and ``d_c`` of a counted column its
        exact count of distinct finite values, of another the estimate over every row.
        """
        names = [_score(c) for c in columns]
        only = " AND s.variant = ''" if plain else ""
        with self.connect(read_only=True) as con:
            runs = _run_table(con, run_ids)
            finite = {c: f"CASE WHEN isfinite(s.{c}) THEN s.{c} END" for c in names}
            est = _estimates(con, run_ids, names, only, finite, sampled=True)
            sampled = int(est["n"].sum()) >= _SAMPLED_ROWS
            if not sampled:  # few rows: every row estimated (as cheap)
                est = _estimates(con, run_ids, names, only, finite, sampled=False)
            few = [c for c in names if (est[f"d_{c}"].fillna(0) <= counted).all()]
            many = [c for c in names if c not in few]
            combos, coarse = [], None
            together = sampled and few and _sampled_combos(con, run_ids, few, only) <= _SEEN
            for part in [few] if together else _parts(few, est):
                got = _combos(
                    con, run_ids, part, many if coarse is None else [], only, finite, sampled
                )
                if coarse is None:
                    coarse = got[1]
                combos.append((part, got[0]))
            cells = _cell_stats(None if sampled else est, combos, coarse, few, many)
            cells = runs.merge(cells, on="run", how="inner")
            order = ["run", "model", "dataset", "condition", "n"]
            per = [f"{p}_{c}" for c in names for p in ("sum", "n", "lo", "hi", "d")]
            out = self._with_errors(con, cells[order + per], run_ids, only)
        hists: dict[tuple[str, str], dict[str, dict[float, int]]] = {}
        for part, frame in combos:
            for c in part:
                by = frame.groupby(["run", "condition", c], sort=False)["k"].sum()
                for (run, cond, v), k in by.items():
                    if math.isfinite(v):
                        hists.setdefault((run, cond), {}).setdefault(c, {})[float(v)] = int(k)
        for key in zip(out["run"], out["condition"], strict=True):
            for c in few:
                hists.setdefault(key, {}).setdefault(c, {})
        return out, hists

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


def _run_table(con, run_ids: Sequence[str]) -> pd.DataFrame:
    """``run, model, dataset`` of the stored runs of ``run_ids``, by run id."""
    return con.execute(
        "SELECT run_id AS run, model, dataset_id AS dataset FROM runs "
        "WHERE list_contains(?, run_id) ORDER BY run_id",
        [list(run_ids)],
    ).df()


def _order(keys: list[str]) -> str:
    """A window's ORDER BY numbering each distinct value of the instance cells ``keys``."""
    return ", ".join(f"i.{k}" for k in keys) if keys else "NULL"


def _instance_groups(con, dataset: str, keys: list[str]) -> pd.DataFrame:
    """Per distinct ``keys`` value of a dataset's instances: its number and counts.

    Columns: ``g`` (the number, as :func:`_group_sums` numbers it), the cells, ``n``
    (instances) and ``app`` (every one of them oracle applicable with a gold passage).
    """
    cols = "".join(f", i.{k}" for k in keys)
    group = f"GROUP BY {', '.join(f'i.{k}' for k in keys)}" if keys else ""
    return fetch_frame(
        con,
        f"""
        SELECT dense_rank() OVER (ORDER BY {_order(keys)}) AS g{cols}, count(*) AS n,
               bool_and(coalesce(i.oracle_applicable, false)
                        AND coalesce(i.n_gold, 0) > 0) AS app
        FROM instances i WHERE i.dataset_id = ? {group}
        """,
        [dataset],
    )


def _group_sums(
    con,
    dataset: str,
    run_ids: list[str],
    names: list[str],
    keys: list[str],
    only: str,
    odd: set[str],
) -> pd.DataFrame:
    """Per (run, condition, group number ``g``) of one dataset's runs: ``rows`` and sums.

    Per column ``c``: ``scored_c``, ``total_c`` and ``odd_c`` (``c`` holds a NaN, the
    greatest value to DuckDB: its sums are right only when ``c`` is in ``odd``); without
    ``only`` (the plain filter) ``varied``, the rows that carry a variant.
    """
    value = {
        c: f"CASE WHEN isnan(s.{c}) THEN NULL ELSE s.{c} END" if c in odd else f"s.{c}"
        for c in names
    }
    columns = "".join(
        f", count({value[c]}) AS scored_{c}, fsum({value[c]}) AS total_{c}"
        f", isnan(max(s.{c})) AS odd_{c}"
        for c in names
    )
    # without the plain filter: whether a row carries a variant (else one row per instance)
    varied = ", count(*) FILTER (WHERE s.variant <> '') AS varied" if not only else ""
    with _instances_built(con):
        return fetch_frame(
            con,
            "WITH ig AS ("
            + _numbered(keys)
            + f""")
        SELECT s.run_id AS run, s.condition, ig.g, count(*) AS rows{columns}{varied}
        FROM scores s LEFT JOIN ig USING (instance_id)
        WHERE list_contains(?, s.run_id){only}
        GROUP BY ALL
        """,
            [dataset, *([dataset] if keys else []), run_ids],
        )


def _numbered(keys: list[str]) -> str:
    """SQL of a dataset's instances (``?``) with their group numbers: ``instance_id``, ``g``.

    ``g`` as :func:`_instance_groups` numbers the groups: the distinct ``keys`` values are
    numbered (a window over a few hundred rows, not over every instance: a window without a
    partition runs on one thread, 0.5 s for 625,000 instances), then joined back to the
    instances (a second ``?``, the dataset again, where there are ``keys``).
    """
    if not keys:
        return "SELECT i.instance_id, 1 AS g FROM instances i WHERE i.dataset_id = ?"
    cols = ", ".join(keys)
    return (
        f"SELECT i.instance_id, n.g FROM instances i JOIN ("
        f"SELECT {cols}, dense_rank() OVER (ORDER BY {cols}) AS g "
        f"FROM (SELECT DISTINCT {cols} FROM instances WHERE dataset_id = ?)) n ON "
        + " AND ".join(f"i.{k} IS NOT DISTINCT FROM n.{k}" for k in keys)
        + " WHERE i.dataset_id = ?"
    )


#: Held while a join runs with DuckDB's build-side optimizer off (a setting of the whole
#: database, which connections of this process to the same file share): one such join at a
#: time, each setting back what it found.
_PLAN_LOCK = threading.Lock()


@contextmanager
def _instances_built(con) -> Iterator[None]:
    """Joins of score rows to instances build their hash table on the instances.

    DuckDB estimates the score rows of a list of runs at a few thousand and builds on them
    (ten million rows: twice the time). Its optimizer that picks the build side is off
    meanwhile (where this DuckDB has it), then as before.
    """
    with _PLAN_LOCK:
        before = None
        try:
            found = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
            off = ",".join(x for x in (found, "build_side_probe_side") if x)
            con.execute(f"SET disabled_optimizers = '{off}'")
            before = found
        except duckdb.Error:  # a DuckDB without the setting or that optimizer: as it plans
            pass
        try:
            yield
        finally:
            if before is not None:
                con.execute(f"SET disabled_optimizers = '{before}'")


def _derived_census(
    sums: pd.DataFrame, groups: pd.DataFrame, keys: list[str], n_runs: int
) -> tuple[pd.DataFrame, bool] | None:
    """:meth:`CellsMixin.group_census` from plain rows' group counts, or None.

    ``sums``: the group cells with ``g``, of runs whose every score row is of an instance
    of their dataset; ``groups``: every dataset's instance groups; ``n_runs``: how many
    runs were asked for. Where, in every (run, group), one condition holds as many rows as
    the group has instances, the run's instances of the group are all of them. Whether the
    runs hold the same instances follows where a run has no row (no) or every run holds
    every instance of one dataset (yes); else None.
    """
    most = sums.groupby(["run", "model", "dataset", "g"], dropna=False)["rows"].max()
    most = most.reset_index().merge(groups, on=["dataset", "g"], how="left")
    if not (most["rows"] == most["n"]).all():
        return None
    census = most[["run", "model", "dataset", *keys]].assign(
        n_instances=most["n"].astype("int64"), applicable=most["app"].astype(bool)
    )
    census = census.reset_index(drop=True)
    if most["run"].nunique() < n_runs:
        return census, False  # a run without a row: not the same instances as the others
    # every run holds every instance of its dataset: the same ones when the dataset is one
    whole = most.groupby("run")["g"].nunique().to_dict()
    total = groups.groupby("dataset")["g"].nunique()
    every = all(whole.get(r, 0) == total[d] for r, d in most[["run", "dataset"]].values)
    if not every or census["dataset"].nunique() != 1:
        return None
    return census, True


#: From this many rows in the 2 % sample on (about five million rows), which columns the
#: sample pass counts is told by the sample; below, by an estimate over every row.
_SAMPLED_ROWS = 100_000
#: The counted columns go in one pass where no cell shows more value combinations of them
#: in the 2 % sample (a cell of many combinations shows thousands there); else in passes
#: that :data:`_COMBOS` bounds by the product of their estimates.
_SEEN = 4096
#: Most value combinations one pass of :meth:`CellsMixin.sample_pass` counts in a cell (by
#: the estimates); more columns are counted in passes of their own.
_COMBOS = 1 << 16


def _estimates(
    con,
    run_ids: Sequence[str],
    names: list[str],
    only: str,
    finite: dict[str, str],
    sampled: bool,
) -> pd.DataFrame:
    """Per (run, condition): ``n`` rows and per column ``d_c``.

    ``d_c``: about how many distinct finite values (HyperLogLog); with ``sampled`` of the
    rows of a 2 % sample of the score table's vectors (``n`` of those too).
    """
    rows = "(SELECT * FROM scores TABLESAMPLE 2% (system, 38)) s" if sampled else "scores s"
    return con.execute(
        "SELECT s.run_id AS run, s.condition, count(*) AS n"
        + "".join(f", approx_count_distinct({finite[c]}) AS d_{c}" for c in names)
        + f" FROM {rows} WHERE list_contains(?, s.run_id){only} GROUP BY ALL",
        [list(run_ids)],
    ).df()


def _sampled_combos(con, run_ids: Sequence[str], few: list[str], only: str) -> int:
    """The most value combinations of ``few`` a cell shows in the 2 % sample (estimated)."""
    seen = con.execute(
        f"SELECT approx_count_distinct(hash({', '.join(f's.{c}' for c in few)})) "
        "FROM (SELECT * FROM scores TABLESAMPLE 2% (system, 38)) s "
        f"WHERE list_contains(?, s.run_id){only} GROUP BY s.run_id, s.condition",
        [list(run_ids)],
    ).fetchall()
    return max((int(d) for (d,) in seen), default=0)


def _parts(few: list[str], est: pd.DataFrame) -> list[list[str]]:
    """``few`` in runs of columns whose estimated value combinations stay under the cap."""
    parts: list[list[str]] = []
    size = None
    for c in few:
        d = est[f"d_{c}"].fillna(0).to_numpy(dtype=float) + 2  # NULL and NaN too
        if size is not None and np.max(size * d, initial=0) <= _COMBOS:
            parts[-1].append(c)
            size = size * d
        else:
            parts.append([c])
            size = d
    return parts or [[]]


def _combos(
    con,
    run_ids: Sequence[str],
    few: list[str],
    many: list[str],
    only: str,
    finite: dict,
    estimate: bool,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(counts per value combination of few, the many columns' aggregates per cell)``.

    The second is None without ``many``; with ``estimate`` it holds each many column's
    ``d_c`` too. Values counted as ``c + 0.0`` (-0.0 as 0.0).
    """
    keys = ["s.run_id", "s.condition", *(f"(s.{c} + 0.0)" for c in few)]
    aggs = "".join(
        f", count({finite[c]}) AS n_{c}"
        f", fsum(CASE WHEN isnan(s.{c}) THEN NULL ELSE s.{c} END) AS sum_{c}"
        f", min({finite[c]}) AS lo_{c}, max({finite[c]}) AS hi_{c}"
        + (f", approx_count_distinct({finite[c]}) AS d_{c}" if estimate else "")
        for c in many
    )
    sets = (
        f"GROUPING SETS (({', '.join(keys)}), (s.run_id, s.condition))"
        if many and few
        else (f"{', '.join(keys)}")
    )
    marker = f", grouping(s.{few[0]} + 0.0) AS coarse" if many and few else ""
    frame = fetch_frame(
        con,
        f"""
        SELECT s.run_id AS run, s.condition{"".join(f", (s.{c} + 0.0) AS {c}" for c in few)},
               count(*) AS k{aggs}{marker}
        FROM scores s WHERE list_contains(?, s.run_id){only}
        GROUP BY {sets}
        """,
        [list(run_ids)],
    )
    if not many:
        return frame, None
    if not few:
        return frame.iloc[:0][["run", "condition", "k"]], frame
    coarse = frame["coarse"] == 1
    return frame.loc[~coarse, ["run", "condition", *few, "k"]], frame.loc[coarse]


def _cell_stats(
    est: pd.DataFrame | None,
    combos: list[tuple[list[str], pd.DataFrame]],
    coarse: pd.DataFrame | None,
    few: list[str],
    many: list[str],
) -> pd.DataFrame:
    """Per (run, condition): ``n`` and per column ``sum``, ``n``, ``lo``, ``hi``, ``d``.

    ``est``: the cells' rows and estimates; None: ``n`` from the counts, ``d_c`` of a few
    column its distinct finite values, of another from ``coarse``.
    """
    keys = ["run", "condition"]
    if est is not None:
        out = est.copy()
    elif few:
        out = combos[0][1].groupby(keys, sort=False)["k"].sum().rename("n").reset_index()
    else:
        out = coarse[keys].assign(n=coarse["k"].to_numpy())
    for part, frame in combos:
        for c in part:
            by = frame.groupby([*keys, c], sort=False)["k"].sum().reset_index()
            stats = {}
            for key, rows in by.groupby(keys, sort=False):
                v, k = rows[c].to_numpy(dtype=float), rows["k"].to_numpy(dtype=np.int64)
                fin = np.isfinite(v)
                num = ~np.isnan(v)
                terms = v[num] * k[num]
                total = math.fsum(terms) if np.isfinite(terms).all() else float(np.sum(terms))
                stats[key] = (
                    total if num.any() else math.nan,
                    int(k[fin].sum()),
                    float(v[fin].min()) if fin.any() else math.nan,
                    float(v[fin].max()) if fin.any() else math.nan,
                    int(fin.sum()),
                )
            cols = [
                stats.get(key, (math.nan, 0, math.nan, math.nan, 0))
                for key in zip(out["run"], out["condition"], strict=True)
            ]
            for i, p in enumerate(("sum", "n", "lo", "hi", "d")):
                if p != "d" or est is None:
                    out[f"{p}_{c}"] = [x[i] for x in cols]
    if coarse is not None:
        wanted = ("n", "sum", "lo", "hi") if est is not None else ("n", "sum", "lo", "hi", "d")
        out = out.merge(
            coarse[[*keys, *(f"{p}_{c}" for c in many for p in wanted)]], on=keys, how="left"
        )
    return out
