"""The re-parse's SQL: stored replies whose parse may be stale, and the write of new parses.

``python -m core score`` re-derives the parsed fields of stored replies
(:func:`core.scoring.reparse.reparse_runs`). Parsing in Python costs tens of microseconds a reply,
so
DuckDB first sets aside, in one vectorized pass, every row whose stored fields the current
parser is certain to give again (:data:`_CLEAN`): the reply is one whole strict JSON object
(DuckDB's reader also takes trailing commas and ``nan`` / ``inf``: such replies are parsed
again), its
``answer`` a string equal to the stored answer, with nothing to strip (it begins and
ends with a printable ASCII character) and not a passage name, its ``evidence_ids`` an
array of strings equal to the stored ``cited_ids``, each shown in the call, in the neutral form
``p`` + four digits (or more, without a leading zero), at most the run's cap, no parse error.
Only the other rows (:func:`reparse_candidates`) are parsed again. Rows not made by the engine
are never re-parsed: a failed call (``error``), no stored reply, no stored shown ids (imported
results), an imported run, or a reply stored cut (``meta.raw_response_truncated``: its parse
was made from the whole reply).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd
import pyarrow as pa

__all__ = ["parse_counts", "reparse_candidates", "write_reparsed"]

# Spellings of a bare NaN / infinity token (DuckDB's reader takes them in any case, Python's
# strict JSON only ``NaN`` and ``Infinity``): a cheap substring test first, the regular
# expression only on the rows that have one.
_NAN_WORDS = " OR ".join(
    f"contains(p.raw_response, '{w}')"
    for w in (
        "nan",
        "naN",
        "nAn",
        "nAN",
        "Nan",
        "NaN",
        "NAn",
        "NAN",
        "inf",
        "inF",
        "iNf",
        "iNF",
        "Inf",
        "InF",
        "INf",
        "INF",
    )
)
# Every condition must hold for the stored parse to stand (see the module docstring). The JSON
# functions run only on valid JSON (a CASE: AND does not stop at the first false).
_CLEAN = rf"""
    CASE WHEN p.ok THEN (
    prefix(ltrim(p.raw_response, E' \t\n\r'), '{{')
    -- what DuckDB's reader accepts and Python's strict JSON does not
    AND NOT regexp_matches(p.raw_response, ',\s*[}}\]]')
    AND (NOT ({_NAN_WORDS})
         OR NOT regexp_matches(p.raw_response, '[:,\[]\s*-?([nN][aA]|[iI][nN])'))
    -- the answer's text equal to the stored one (a non-string answer is parsed again unless
    -- it reads alike), with nothing to strip, not a passage name
    AND p.answer = json_extract_string(p.raw_response, '$.answer')
    AND (p.answer = '' OR regexp_full_match(p.answer, '(?s)[!-~](.*[!-~])?'))
    AND NOT regexp_full_match(p.answer, '(?i)(section|passage)_[0-9]+')
    -- the evidence ids: an array of printable ASCII strings without surrounding spaces
    -- (written alike as JSON text), every shown id canonical; read as the parser reads them
    -- (normalized, first occurrences, shown ones scored up to the cap, the rest set apart),
    -- they give the stored cited ids and the stored meta.parse record
    AND json_extract(p.raw_response, '$.evidence_ids')::VARCHAR = to_json(p.e)::VARCHAR
    AND len(list_filter(p.e, lambda i: i IS NULL
                        OR NOT regexp_full_match(i, '[!-~]([ -~]*[!-~])?'))) = 0
    AND len(list_filter(p.input_passage_ids, lambda i: i IS NULL
                        OR NOT regexp_full_match(i, 'p([0-9]{{4}}|[1-9][0-9]{{4,17}})'))) = 0
    AND coalesce(p.cited_ids, []) = list_slice(p.sh, 1, p.cap)
    AND coalesce(json_extract_string(p.meta, '$.parse.over_cap_ids[*]'), [])
        = list_slice(p.sh, p.cap + 1, len(p.sh))
    AND coalesce(json_extract_string(p.meta, '$.parse.unshown_ids[*]'), []) = p.un
    AND json_extract(p.meta, '$.parse.salvaged') IS NULL
    AND NOT contains(coalesce(p.meta, ''), 'unknown_ids')
    ) ELSE false END
"""
# A cited passage id's digits without leading zeros (``"p0012"`` -> ``"12"``; ``"p0"`` -> ``"0"``)
_DIGITS = "coalesce(nullif(ltrim(regexp_extract(i, '[0-9]+'), '0'), ''), '0')"
_CANDIDATES = f"""
    WITH p AS (
        SELECT p.rowid AS prow, p.run_id, p.raw_response, p.input_passage_ids, p.answer,
               p.cited_ids, p.parse_error, p.explanation, p.confidence, p.meta,
               coalesce(TRY_CAST(json_extract_string(r.options, '$.max_cited') AS INTEGER), 3)
                   AS cap
        FROM predictions p JOIN runs r USING (run_id)
        WHERE list_contains(?, p.run_id)
          AND coalesce(p.error, '') = '' AND p.raw_response IS NOT NULL
          AND p.input_passage_ids IS NOT NULL
          AND coalesce(r.kind, '') <> 'imported' AND coalesce(r.backend, '') <> 'imported'
          AND json_extract(p.meta, '$.raw_response_truncated') IS NULL
    )
    SELECT prow, run_id, raw_response, input_passage_ids, answer, cited_ids, parse_error,
           explanation, confidence, meta, cap
    FROM (
        SELECT *,
               [d.id FOR d IN ds IF d.pid AND list_contains(input_passage_ids, d.id)] AS sh,
               [d.id FOR d IN ds IF NOT (d.pid AND list_contains(input_passage_ids, d.id))]
                   AS un
        FROM (
            SELECT *, list_filter(nz, lambda d, i: list_position(nz, d) = i) AS ds
            FROM (
                SELECT *, list_transform(e, lambda i: CASE
                    WHEN regexp_full_match(i, '[pP]?[0-9]{{1,18}}') THEN {{
                        'id': 'p' || lpad({_DIGITS}, greatest(4, len({_DIGITS}))::INTEGER, '0'),
                        'pid': true}}
                    ELSE {{'id': i, 'pid': false}} END) AS nz
                FROM (
                    SELECT *, CASE WHEN ok THEN
                        json_extract_string(raw_response, '$.evidence_ids[*]') END AS e
                    FROM (SELECT *, parse_error IS NULL AND json_valid(raw_response)
                                    AND (meta IS NULL OR json_valid(meta)) AS ok FROM p)
                )
            )
        )
    ) p
    WHERE NOT coalesce(({_CLEAN}), false)
"""


def reparse_candidates(
    con: duckdb.DuckDBPyConnection, runs: Sequence[str]
) -> tuple[int, pd.DataFrame]:
    """``(rows checked, candidates)``: the runs' engine-made replies, and those to parse again.

    The candidates' columns: ``prow`` (the prediction's rowid), ``run_id``, ``raw_response``,
    ``input_passage_ids``, the stored ``answer``, ``cited_ids``, ``parse_error``,
    ``explanation``, ``confidence``, ``meta`` and the run's ``cap`` (``max_cited``).
    """
    runs = list(runs)
    checked = con.execute(
        "SELECT count(*) FROM predictions p JOIN runs r USING (run_id) "
        "WHERE list_contains(?, p.run_id) AND coalesce(p.error, '') = '' "
        "AND p.raw_response IS NOT NULL AND p.input_passage_ids IS NOT NULL "
        "AND coalesce(r.kind, '') <> 'imported' AND coalesce(r.backend, '') <> 'imported'",
        [runs],
    ).fetchall()[0][0]  # fetched whole: a half-read result blocks the next statement
    if not checked:
        return 0, pd.DataFrame()
    return int(checked), con.execute(_CANDIDATES, [runs]).df()


#: The written columns, typed (no type is guessed from the values).
_SCHEMA = pa.schema(
    [
        ("prow", pa.int64()),
        ("answer", pa.string()),
        ("cited_ids", pa.list_(pa.string())),
        ("parse_error", pa.string()),
        ("explanation", pa.string()),
        ("confidence", pa.float64()),
        ("meta", pa.string()),
    ]
)


def write_reparsed(con: duckdb.DuckDBPyConnection, rows: Sequence[dict]) -> None:
    """Write new parsed fields by prediction rowid.

    Args:
        con: a connection inside the caller's transaction.
        rows: one mapping per prediction: ``prow`` (its rowid), ``answer``, ``cited_ids``,
            ``parse_error``, ``explanation``, ``confidence``, ``meta`` (JSON text).
    """
    if not rows:
        return
    table = pa.Table.from_pylist([{k: r[k] for k in _SCHEMA.names} for r in rows], _SCHEMA)
    con.register("_reparsed", table)
    con.execute(
        """
        UPDATE predictions SET answer = t.answer, cited_ids = t.cited_ids,
            parse_error = t.parse_error, explanation = t.explanation,
            confidence = t.confidence, meta = t.meta
        FROM _reparsed t WHERE predictions.rowid = t.prow
        """
    )
    con.unregister("_reparsed")


# The parse's side fields (SPEC §5.1) counted per run; meta is JSON the engine wrote.
_COUNTS = """
    SELECT run_id,
           count(*) FILTER (WHERE un > 0) AS replies_unshown, coalesce(sum(un), 0) AS ids_unshown,
           count(*) FILTER (WHERE oc > 0) AS replies_over_cap, coalesce(sum(oc), 0) AS ids_over_cap,
           count(*) FILTER (WHERE sal) AS salvaged,
           count(*) FILTER (WHERE parse_error = ?) AS reasoning_unclosed,
           count(*) FILTER (WHERE apart OR inline) AS with_reasoning
    FROM (
        SELECT run_id, parse_error,
               coalesce(json_array_length(m, '$.parse.unshown_ids'), 0) AS un,
               coalesce(json_array_length(m, '$.parse.over_cap_ids'), 0) AS oc,
               json_extract(m, '$.parse.salvaged') IS NOT NULL AS sal,
               json_extract(m, '$.reasoning') IS NOT NULL AS apart,
               -- NULL (no reply text) counts as no match: reading every reply's text once
               regexp_matches(raw_response,
                              '(?i)^\\s*<(think|thinking|reasoning)>|</(think|thinking|reasoning)>|<[|]channel[|]>')
                   AS inline
        FROM (SELECT run_id, parse_error, raw_response,
                     CASE WHEN json_valid(meta) THEN meta END AS m
              FROM predictions
              WHERE list_contains(?, run_id) AND coalesce(error, '') = '')
    )
    GROUP BY run_id ORDER BY run_id
"""


def parse_counts(
    con: duckdb.DuckDBPyConnection, runs: Sequence[str], unclosed: str
) -> pd.DataFrame:
    """The parse's side fields counted per run (runs without an answered call left out).

    Columns: ``run_id``, ``replies_unshown`` / ``ids_unshown`` (cited but not shown, or not
    passage ids), ``replies_over_cap`` / ``ids_over_cap``, ``salvaged`` (replies off the
    contract with something read leniently), ``reasoning_unclosed`` (``parse_error`` =
    ``unclosed``) and ``with_reasoning`` (returned apart or inline).
    """
    return con.execute(_COUNTS, [unclosed, list(runs)]).df()
