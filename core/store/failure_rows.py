"""The failure browser's queries: one filtered, sorted page of predictions, and its neighbours.

Predictions of the selected runs joined with their scores, instances and runs, filtered in
DuckDB (condition, failure label, outcome, metadata cells, free text over question and answer),
sorted by one of :data:`SORTS` and cut to one page with ``LIMIT``/``OFFSET`` (DuckDB keeps the
top rows of the order instead of sorting all of them), plus the counts of the whole filtered
list. Stepping through the list in the Case view reads only the instance before and after the
current one (:meth:`FailuresMixin.failure_neighbours`), never the whole list.

Every value from the user is a parameter; the only text put into the SQL is owned: the score
column (from :data:`SCORE_FIELDS`), the sort (from :data:`SORTS`) and metadata cell names
(from :data:`FILTER_CELLS`), each checked against its list first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from core.store.connection import StoreBase
from core.store.schema import CELL_COLUMNS, SCORE_COLUMNS

__all__ = [
    "FILTER_CELLS",
    "KINDS",
    "OUTCOMES",
    "SCORE_FIELDS",
    "SORTS",
    "FailureFilter",
    "FailuresMixin",
    "escape_like",
    "filter_from_json",
    "filter_to_json",
]

#: What a prediction's outcome can be. ``call failed``: the call raised (``error`` set; no
#: answer, no score, never "wrong"); ``correct``: failure label ``success`` (SPEC §6.4:
#: strict EM = 1), or for a prediction without a label (``no_evidence`` has none) strict EM
#: = 1; ``wrong``: any other label (``parse`` included) or strict EM < 1; ``unscored``: no
#: score row yet.
OUTCOMES = ("correct", "wrong", "call failed", "unscored")
#: What a listed prediction is (issue 36 item 6): ``answer`` (a question answered under one of
#: the four conditions, a CUE-R base trace included), ``intervention`` (a CUE-R intervention or
#: a Case-view rerun's perturbed call: condition ``intervention``), ``probe`` (a DOLCE probe:
#: condition ``probe``). The failure browser lists answers unless asked for the others.
KINDS = ("answer", "intervention", "probe")
_KIND = (
    "CASE p.condition WHEN 'probe' THEN 'probe' WHEN 'intervention' THEN 'intervention' "
    "ELSE 'answer' END"
)
# (the SQL fragments name the prediction ``p`` and its score row ``s``; a list read from the
# scores alone, :data:`_FROM_SCORED`, names both ``s``: see :func:`_as_scored`)
_KIND_OF_PAGE = _KIND.replace("p.", "pg.")
#: What "failures only" keeps, as the Case view's picker counts failures
#: (:meth:`core.store.Store.instance_outcomes`): a failed call, or a failure label other than
#: ``success`` (SPEC §6.4). The no-evidence baseline carries no label, so its wrong answers
#: are not failures here (the outcome filter ``wrong`` lists them).
_FAILED = "(coalesce(p.error, '') <> '' OR coalesce(s.failure_label, 'success') <> 'success')"
#: Numeric score columns the page's score column can show.
SCORE_FIELDS = tuple(c for c in SCORE_COLUMNS if c != "failure_label")
#: Instance cells a filter may name (the sidebar's metadata filters and ``source``).
FILTER_CELLS = (*CELL_COLUMNS, "source")
#: Most characters of question, answer and error text a page row carries.
TEXT_CHARS = 300

#: The list's total order (a unique key at the end, so pages never overlap or skip a row);
#: names of the filtered rows' columns (:func:`_rows_sql`).
_KEY = "run, ord, condition, variant, instance_id"
#: Sort name -> (label, ORDER BY text over the filtered rows).
SORTS: dict[str, tuple[str, str]] = {
    "list": ("run, instance, condition", _KEY),
    "score_asc": ("score, lowest first", "score ASC NULLS LAST, " + _KEY),
    "score_desc": ("score, highest first", "score DESC NULLS LAST, " + _KEY),
    "fan_in": ("fan-in, highest first", "fan_in DESC NULLS LAST, " + _KEY),
    "label": ("failure label", "failure_label ASC NULLS LAST, " + _KEY),
    "condition": ("condition, then run and instance", "condition, " + _KEY),
}

#: The largest offset or page size a query takes (a page past the list is empty).
_MAX_ROW = 2**62

#: The columns of a page's rows (after ``row``).
_PAGE_COLUMNS = (
    "run",
    "dataset",
    "condition",
    "variant",
    "kind",
    "instance_id",
    "question",
    "answer",
    "gold",
    "explanation",
    "score",
    "outcome",
    "failure_label",
    "error",
    "fan_in",
    "reasoning_type",
)
#: The columns of a window's keys (:meth:`FailuresMixin.failure_window`), with their SQL types.
_KEY_TYPES = {
    "run": "VARCHAR",
    "dataset": "VARCHAR",
    "instance_id": "VARCHAR",
    "condition": "VARCHAR",
    "variant": "VARCHAR",
    "ord": "INTEGER",
    "score": "DOUBLE",
    "fan_in": "INTEGER",
    "failure_label": "VARCHAR",
    "outcome": "VARCHAR",
    "kind": "VARCHAR",
}
_KEY_COLUMNS = tuple(_KEY_TYPES)
#: The keys a page's rows are read by (:meth:`FailuresMixin.failure_rows`), and the SQL that
#: turns them, passed as one list parameter each, back into rows (``pos``: their order).
_PAGE_KEY_TYPES = {k: v for k, v in _KEY_TYPES.items() if k != "ord"}
_UNNEST_KEYS = ", ".join(
    "unnest(?::" + kind + "[]) AS " + name
    for name, kind in {"pos": "BIGINT", **_PAGE_KEY_TYPES}.items()
)
_TEXT_COLUMNS = (
    "run",
    "dataset",
    "condition",
    "variant",
    "kind",
    "instance_id",
    "question",
    "answer",
    "gold",
    "explanation",
    "outcome",
    "failure_label",
    "error",
    "reasoning_type",
)
_OUTCOME = (
    "CASE WHEN coalesce(p.error, '') <> '' THEN 'call failed' "
    "WHEN s.failure_label IS NOT NULL THEN "
    "CASE WHEN s.failure_label = 'success' THEN 'correct' ELSE 'wrong' END "
    "WHEN s.em_strict IS NULL THEN 'unscored' "
    "WHEN s.em_strict >= 1 THEN 'correct' ELSE 'wrong' END"
)
_FROM = """
    FROM predictions p
    JOIN runs r USING (run_id)
    JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
    LEFT JOIN scores s ON s.run_id = p.run_id AND s.instance_id = p.instance_id
        AND s.condition = p.condition AND s.variant = p.variant
    WHERE list_contains(?, p.run_id)"""
#: The same rows when the runs' predictions and score rows have the same keys
#: (:meth:`FailuresMixin.failure_keysets`): every prediction has its score row, so the list is
#: read from the scores, with the error of the few failed calls joined to them, instead of
#: joining every prediction to its score row (the expensive half of the list at 10M
#: predictions). Its row is named ``s``; its parameters: the runs, twice.
_FROM_SCORED = """
    FROM (
        SELECT s0.*, e.error FROM scores s0
        LEFT JOIN (
            SELECT run_id, instance_id, condition, variant, error FROM predictions
            WHERE list_contains(?, run_id) AND coalesce(error, '') <> ''
        ) e ON e.run_id = s0.run_id AND e.instance_id = s0.instance_id
            AND e.condition = s0.condition AND e.variant = s0.variant
        WHERE list_contains(?, s0.run_id)
    ) s
    JOIN runs r ON r.run_id = s.run_id
    JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
    WHERE true"""
#: Per run, condition and variant: how many keys the runs' predictions and score rows have,
#: with the sum and the XOR of their instance ids' 64-bit hashes; the score rows per failure
#: label (the facets). Parameters: the runs, twice.
_KEYSETS = """
    WITH p AS (
        SELECT run_id, condition, variant, count(*) AS n,
               sum(hash(instance_id)::HUGEINT) AS h, bit_xor(hash(instance_id)) AS x
        FROM predictions WHERE list_contains(?, run_id) GROUP BY ALL
    ),
    s AS (
        SELECT run_id, condition, variant, failure_label, count(*) AS n,
               sum(hash(instance_id)::HUGEINT) AS h, bit_xor(hash(instance_id)) AS x
        FROM scores WHERE list_contains(?, run_id) GROUP BY ALL
    ),
    sk AS (
        SELECT run_id, condition, variant, sum(n) AS n, sum(h) AS h, bit_xor(x) AS x
        FROM s GROUP BY ALL
    )
    SELECT
        (SELECT list(DISTINCT condition ORDER BY condition) FROM p) AS conditions,
        (SELECT list(DISTINCT failure_label ORDER BY failure_label) FROM s
         WHERE failure_label IS NOT NULL) AS labels,
        (SELECT count(*) FROM p FULL JOIN sk USING (run_id, condition, variant)
         WHERE p.n IS DISTINCT FROM sk.n OR p.h IS DISTINCT FROM sk.h
            OR p.x IS DISTINCT FROM sk.x) AS differ
"""


@dataclass(frozen=True, slots=True)
class FailureFilter:
    """What the failure browser lists: the same record for the page, its cache and the Case view.

    Attributes:
        runs: the runs whose predictions are listed (resolved: never empty for a list).
        conditions: only these conditions (empty: every condition, variants included).
        labels: only these failure labels (empty: any label or none).
        outcomes: only these outcomes of :data:`OUTCOMES` (empty: any).
        kinds: only these prediction kinds of :data:`KINDS` (empty: any; the page asks for
            ``answer`` unless told otherwise).
        failures_only: only failed calls and predictions with a failure label other than
            ``success`` (the no-evidence baseline's wrong answers carry no label).
        cells: ``(cell, values)`` pairs: the instance's cell (one of :data:`FILTER_CELLS`),
            compared as text, is one of the values; every pair must hold.
        text: free text found, case-insensitively and literally (``%`` and ``_`` too), in the
            question or the answer; blank: no text filter.
        score_field: the score column shown and sorted by (one of :data:`SCORE_FIELDS`).
        sort: one of :data:`SORTS`.
    """

    runs: tuple[str, ...]
    conditions: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    failures_only: bool = True
    cells: tuple[tuple[str, tuple[str, ...]], ...] = ()
    text: str = ""
    score_field: str = "f1_relaxed"
    sort: str = "list"

    def check(self) -> None:
        """Raise ValueError naming a bad value and the allowed ones (score, sort, cell, outcome)."""
        if self.score_field not in SCORE_FIELDS:
            raise ValueError(
                f"unknown score field {self.score_field!r}; choose one of {list(SCORE_FIELDS)}"
            )
        if self.sort not in SORTS:
            raise ValueError(f"unknown sort {self.sort!r}; choose one of {list(SORTS)}")
        bad = [c for c, _ in self.cells if c not in FILTER_CELLS]
        if bad:
            raise ValueError(f"not instance cells: {bad}; choose from {list(FILTER_CELLS)}")
        bad = [o for o in self.outcomes if o not in OUTCOMES]
        if bad:
            raise ValueError(f"unknown outcome(s) {bad}; choose from {list(OUTCOMES)}")
        bad = [k for k in self.kinds if k not in KINDS]
        if bad:
            raise ValueError(f"unknown prediction kind(s) {bad}; choose from {list(KINDS)}")


def filter_to_json(filt: FailureFilter) -> str:
    """Canonical JSON of a filter (a cache key; what the Case view keeps to step the list)."""
    return json.dumps(asdict(filt), sort_keys=True)


def filter_from_json(text: str) -> FailureFilter:
    """The filter of :func:`filter_to_json`'s text."""
    data: dict[str, Any] = json.loads(text)
    return FailureFilter(
        runs=tuple(data["runs"]),
        conditions=tuple(data.get("conditions") or ()),
        labels=tuple(data.get("labels") or ()),
        outcomes=tuple(data.get("outcomes") or ()),
        kinds=tuple(data.get("kinds") or ()),
        failures_only=bool(data.get("failures_only", True)),
        cells=tuple((str(c), tuple(str(v) for v in vals)) for c, vals in data.get("cells") or ()),
        text=str(data.get("text") or ""),
        score_field=str(data.get("score_field") or "f1_relaxed"),
        sort=str(data.get("sort") or "list"),
    )


def escape_like(text: str) -> str:
    r"""``text`` as a literal ``LIKE`` pattern body: ``\``, ``%`` and ``_`` escaped with ``\``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _one_dataset(sql: str, row: str) -> str:
    """``sql`` with its instances joined by id alone (one dataset, filtered in the WHERE)."""
    two = "JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = "
    assert sql.count(two + row + ".instance_id") == 1
    return sql.replace(two, "JOIN instances i ON i.instance_id = ")


def _as_scored(text: str) -> str:
    """An owned SQL fragment over ``p`` and ``s`` rewritten for :data:`_FROM_SCORED` (``s``)."""
    return text.replace("p.", "s.")


def _where(
    filt: FailureFilter, scored: bool = False, dataset: str | None = None
) -> tuple[str, list[Any]]:
    """The filter's FROM and WHERE text (:data:`_FROM`) and its parameters, runs first.

    ``scored``: the rows are read from the scores alone (:data:`_FROM_SCORED`; the caller
    checked that the runs' predictions and score rows have the same keys, and there is no
    text filter: the answer is the prediction's). ``dataset``: the one dataset of all the
    runs (the caller checked): instances are joined by id alone, those of the dataset.
    """
    filt.check()
    if scored or dataset:
        only, params = _where(filt)
        if scored:
            only, params = _FROM_SCORED + _as_scored(only[len(_FROM) :]), [params[0], *params]
        if dataset:
            only = _one_dataset(only, "s" if scored else "p") + " AND i.dataset_id = ?"
            params.append(str(dataset))
        return only, params
    only, params = "", [list(filt.runs)]
    if filt.conditions:
        only += " AND list_contains(?, p.condition)"
        params.append(list(filt.conditions))
    if filt.labels:
        only += " AND list_contains(?, s.failure_label)"
        params.append(list(filt.labels))
    if filt.outcomes:
        only += " AND list_contains(?, " + _OUTCOME + ")"
        params.append(list(filt.outcomes))
    if filt.kinds:
        only += " AND list_contains(?, " + _KIND + ")"
        params.append(list(filt.kinds))
    if filt.failures_only:
        only += " AND " + _FAILED
    for col, values in filt.cells:
        # ``col`` is one of FILTER_CELLS (checked above): an owned identifier
        only += f" AND list_contains(?, CAST(i.{col} AS VARCHAR))"
        params.append([str(v) for v in values])
    text = filt.text.strip()
    if text:
        only += " AND (i.question ILIKE ? ESCAPE '\\' OR p.answer ILIKE ? ESCAPE '\\')"
        pattern = f"%{escape_like(text)}%"
        params += [pattern, pattern]
    return _FROM + only, params


def _plain(value: Any, kind: str) -> Any:
    """A key cell as a Python value of its SQL type (numpy scalars and NaN made plain)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if kind == "INTEGER":
        return int(value)
    if kind == "DOUBLE":
        return float(value)
    return str(value)


def _order(filt: FailureFilter) -> str:
    """The ORDER BY text of the filter's sort (owned text: a :data:`SORTS` entry)."""
    return SORTS[filt.sort][1]


def _rows_sql(
    filt: FailureFilter,
    scored: bool = False,
    dataset: str | None = None,
    narrow: bool = False,
) -> tuple[str, list[Any]]:
    """The filtered rows, narrow (keys, sort columns, outcome), and their parameters.

    Columns: ``run, dataset, instance_id, condition, variant, ord, score, fan_in,
    failure_label, outcome, kind``; the wide text columns are joined to one page only.
    ``scored``, ``dataset``: see :func:`_where` (the same rows). ``narrow``: without
    ``dataset`` and ``kind`` (the run's and the condition's: added to the rows kept).
    """
    scored = scored and not filt.text.strip()
    only, params = _where(filt, scored, dataset)
    # owned text only: the score column is one of SCORE_FIELDS (checked by _where)
    sql = (
        "SELECT p.run_id AS run, "
        + ("" if narrow else "r.dataset_id AS dataset, ")
        + "p.instance_id, p.condition, p.variant, i.ord, s."
        + filt.score_field
        + " AS score, i.fan_in, s.failure_label, "
        + _OUTCOME
        + " AS outcome"
        + ("" if narrow else ", " + _KIND + " AS kind")
    )
    return (_as_scored(sql) if scored else sql) + only, params


class FailuresMixin(StoreBase):
    """The failure browser's reads (:mod:`core.store.failure_rows`)."""

    def failure_facets(self, run_ids: Sequence[str]) -> dict[str, list[str]]:
        """What the failure browser's filters offer for the runs: stored values, sorted.

        Returns:
            ``{"conditions": [...], "labels": [...]}``: the conditions of the runs'
            predictions and the failure labels of their scores.
        """
        got = self.failure_keysets(run_ids)
        return {"conditions": got["conditions"], "labels": got["labels"]}

    def failure_keysets(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """The runs' facets (:meth:`failure_facets`), and whether every prediction is scored.

        Returns:
            ``{"conditions": [...], "labels": [...], "scored_alike": bool}``.
            ``scored_alike``: the runs' predictions and score rows have the same keys, so the
            list can be read from the scores (:data:`_FROM_SCORED`). Told by per run,
            condition and variant key counts and the sum and XOR of the instance ids' 64-bit
            hashes on both sides (a scan of the key columns, no join): sets that differ pass
            only if their hashes cancel in both (odds of about 2**-64); a store with unscored
            predictions or stray score rows differs and takes the join.
        """
        runs = [str(r) for r in run_ids]
        with self.connect(read_only=True) as con:
            conds, labels, differ = con.execute(_KEYSETS, [runs, runs]).fetchone()
        return {
            "conditions": [str(c) for c in conds or []],
            "labels": [str(c) for c in labels or []],
            "scored_alike": not differ,
        }

    def failure_page(
        self,
        filt: FailureFilter,
        offset: int = 0,
        limit: int = 50,
        scored_alike: bool | None = None,
    ) -> tuple[pd.DataFrame, dict[str, int]]:
        """One page of the filtered, sorted list of predictions, and the list's counts.

        :meth:`failure_window` (the page's keys and the list's counts) and
        :meth:`failure_rows` (the page's text) in one call.

        Args:
            filt: what to list (:class:`FailureFilter`).
            offset: rows of the list skipped before the page (0-based).
            limit: most rows on the page.
            scored_alike: :meth:`failure_keysets`' word for the filter's runs (None: asked
                here).

        Returns:
            ``(rows, counts)``. ``rows``: ``row`` (1-based place in the list), ``run``,
            ``dataset``, ``condition``, ``variant``, ``instance_id``, ``question``,
            ``answer`` (text cut to :data:`TEXT_CHARS` characters), ``gold`` (the gold answer,
            cut), ``kind`` (:data:`KINDS`), ``explanation`` (the
            model's own explanation, cut; a released run's from its side files), ``score`` (the
            filter's
            score field), ``outcome`` (:data:`OUTCOMES`), ``failure_label``, ``error`` (cut),
            ``fan_in``, ``reasoning_type``. ``counts``: ``total`` and one count per outcome of
            the whole filtered list.

        Raises:
            ValueError: a bad score field, sort, cell or outcome in ``filt``.
        """
        offset = min(max(0, int(offset)), _MAX_ROW)
        keys, counts = self.failure_window(filt, offset, limit, scored_alike)
        return self.failure_rows(keys, offset), counts

    def failure_window(
        self,
        filt: FailureFilter,
        offset: int = 0,
        limit: int = 50,
        scored_alike: bool | None = None,
    ) -> tuple[pd.DataFrame, dict[str, int]]:
        """The keys of ``limit`` rows of the sorted list from ``offset``, and the list's counts.

        The expensive half of a page: the filtered list is made once (predictions joined with
        their scores, instances and runs), counted, and cut to its top rows in the sort's order
        (DuckDB keeps those rows instead of sorting all of them). A caller that reads a window
        of several pages at once shows each of them with :meth:`failure_rows` alone. When the
        runs' predictions all have their score rows (``scored_alike``, :meth:`failure_keysets`;
        None: asked here) the list is read from the scores, the same rows.

        Returns:
            ``(keys, counts)``. ``keys``: one row per listed prediction in list order, columns
            ``run, dataset, instance_id, condition, variant, ord, score, fan_in,
            failure_label, outcome, kind`` (:func:`_rows_sql`); ``counts``: as
            :meth:`failure_page`'s.

        Raises:
            ValueError: a bad score field, sort, cell or outcome in ``filt``.
        """
        # a page number from a URL (?page=<huge>) is clamped: DuckDB's OFFSET is a BIGINT
        offset, limit = min(max(0, int(offset)), _MAX_ROW), min(max(1, int(limit)), _MAX_ROW)
        filt.check()
        if scored_alike is None:
            scored_alike = self.failure_keysets(filt.runs)["scored_alike"]
        order = _order(filt)
        counts = ", ".join(f"count(*) FILTER (WHERE outcome = ?) AS n{k}" for k in range(4))
        with self.connect(read_only=True) as con:
            datasets = con.execute(
                "SELECT DISTINCT dataset_id FROM runs WHERE list_contains(?, run_id)",
                [list(filt.runs)],
            ).fetchall()
            one = str(datasets[0][0]) if len(datasets) == 1 and datasets[0][0] else None
            rows_sql, params = _rows_sql(filt, scored_alike, one, narrow=True)
            # one statement: the filtered rows are made once (MATERIALIZED, without the
            # columns the run and the condition tell), counted, and cut to the window's top
            # rows; the wide text columns are read for one page at a time
            sql = (
                "WITH f AS MATERIALIZED (" + rows_sql + "), "
                "c AS (SELECT " + counts + ", count(*) AS total FROM f), "
                "pg AS (SELECT * FROM f ORDER BY " + order + " LIMIT ? OFFSET ?) "
                "SELECT c.*, pg.run, r.dataset_id AS dataset, pg.instance_id, pg.condition, "
                "pg.variant, pg.ord, pg.score, pg.fan_in, pg.failure_label, pg.outcome, "
                + _KIND_OF_PAGE
                + " AS kind FROM c LEFT JOIN (pg JOIN runs r ON r.run_id = pg.run) ON true "
                "ORDER BY " + order
            )
            got = con.execute(sql, [*params, *OUTCOMES, int(limit), int(offset)]).df()
        first = got.iloc[0]
        counts = {o: int(first[f"n{k}"]) for k, o in enumerate(OUTCOMES)}
        counts["total"] = int(first["total"])
        keys = got[got["run"].notna()][list(_KEY_COLUMNS)].reset_index(drop=True)
        return keys, counts

    def failure_rows(self, keys: pd.DataFrame, offset: int = 0) -> pd.DataFrame:
        """The page of the list whose keys are ``keys`` (rows of :meth:`failure_window`).

        Reads the wide text columns of these predictions and instances only (a page's worth
        of keys: the scans skip what their zone maps rule out).

        Args:
            keys: the page's rows of :meth:`failure_window`, in list order.
            offset: the list's place of the first of them (0-based): ``row`` counts on from it.

        Returns:
            The page as :meth:`failure_page` describes it.
        """
        cut = str(int(TEXT_CHARS))
        lists: list[list[Any]] = [list(range(len(keys)))]
        for name, kind in _PAGE_KEY_TYPES.items():
            values = keys[name].astype(object).where(keys[name].notna(), None).tolist()
            lists.append([_plain(v, kind) for v in values])
        sql = (
            "WITH pg AS (SELECT " + _UNNEST_KEYS + ") "
            "SELECT pg.* EXCLUDE (pos), left(i.question, " + cut + ") AS question, "
            "left(p.answer, " + cut + ") AS answer, left(p.error, " + cut + ") AS error, "
            "left(p.explanation, " + cut + ") AS explanation, "
            "left(i.gold_answer, " + cut + ") AS gold, i.reasoning_type FROM pg "
            "LEFT JOIN instances i ON i.dataset_id = pg.dataset "
            "AND i.instance_id = pg.instance_id "
            "LEFT JOIN predictions p ON p.run_id = pg.run AND p.instance_id = pg.instance_id "
            "AND p.condition = pg.condition AND p.variant = pg.variant ORDER BY pg.pos"
        )
        with self.connect(read_only=True) as con:
            got = con.execute(sql, lists).df()
        rows = got[list(_PAGE_COLUMNS)].reset_index(drop=True)
        for name in _TEXT_COLUMNS:  # missing text is None
            rows[name] = rows[name].astype(object).where(rows[name].notna(), None)
        start = int(offset) + 1
        rows.insert(0, "row", range(start, start + len(rows)))
        return rows

    def failure_neighbours(
        self, filt: FailureFilter, dataset: str, instance_id: str, around: int = 1
    ) -> dict[str, Any] | None:
        """Where an instance stands in the filtered list's instances, and the ones around it.

        The list's instances are its distinct instances in the order of their first row (a
        list sorted by run shows an instance once per condition; the Case view shows them all
        at once). Only a window around the instance is read, never the whole list.

        Args:
            filt: the list (:class:`FailureFilter`).
            dataset: the instance's dataset.
            instance_id: the instance.
            around: how many instances before and after it to return.

        Returns:
            None when the instance is not in the list, else ``{"position": its 1-based place,
            "total": instances in the list, "window": [...]}``: the instances from ``position
            - around`` to ``position + around`` (those that exist), in list order, each
            ``{"position", "dataset", "instance_id", "run", "condition"}`` (the run and
            condition of its first row).
        """
        rows_sql, params = _rows_sql(filt)
        order = _order(filt)
        sql = (
            "WITH f AS (" + rows_sql + "), "
            "ranked AS (SELECT dataset, instance_id, run, condition, "
            "row_number() OVER (ORDER BY " + order + ") AS rn FROM f), "
            """
            firsts AS (
                SELECT dataset, instance_id, min(rn) AS first, arg_min(run, rn) AS run,
                       arg_min(condition, rn) AS condition
                FROM ranked GROUP BY dataset, instance_id
            ),
            listed AS (SELECT *, row_number() OVER (ORDER BY first) AS pos FROM firsts),
            me AS (SELECT pos FROM listed WHERE dataset = ? AND instance_id = ?)
            SELECT l.pos, l.dataset, l.instance_id, l.run, l.condition,
                   (SELECT count(*) FROM listed) AS total
            FROM listed l, me WHERE l.pos BETWEEN me.pos - ? AND me.pos + ? ORDER BY l.pos
            """
        )
        k = max(0, int(around))
        with self.connect(read_only=True) as con:
            rows = con.execute(sql, [*params, dataset, instance_id, k, k]).fetchall()
        window = [
            {
                "position": int(pos),
                "dataset": ds,
                "instance_id": iid,
                "run": run,
                "condition": cond,
            }
            for pos, ds, iid, run, cond, _ in rows
        ]
        me = (dataset, instance_id)
        here = next((w["position"] for w in window if (w["dataset"], w["instance_id"]) == me), None)
        if here is None:
            return None
        return {"position": here, "total": int(rows[0][-1]), "window": window}
