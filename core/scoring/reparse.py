"""Stored replies read again by the current parser, before a re-score (issue 34 item 1).

``python -m core score`` calls :func:`reparse_runs` first: the evidence ids and the other
parsed fields of every stored engine reply are re-derived from its raw text and its shown ids
(``input_passage_ids``) with :func:`core.scoring.parsing.parse_reply` and the run's ``max_cited``,
so a
store parsed by an older parser is scored as the ONCU protocol reads the replies. DuckDB sets
aside the rows whose stored fields the parser is certain to give again
(:mod:`core.store.reparse_rows`), so a re-score of a store already parsed this way parses
next to nothing; only rows whose fields change are written, inside the caller's transaction.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from core.scoring.parsing import parse_reply
from core.store.reparse_rows import reparse_candidates, write_reparsed

__all__ = ["ReparseSummary", "reparse_runs"]


@dataclass(frozen=True, slots=True)
class ReparseSummary:
    """What a re-parse did.

    Attributes:
        checked: engine replies of the runs (stored reply and shown ids, no failed call).
        parsed: those parsed again (the others provably parse to what is stored).
        changed: rows whose parsed fields changed (answer, cited ids, parse error,
            explanation, confidence or the ``meta["parse"]`` record), written.
        by_run: changed rows per run (runs without a change left out).
    """

    checked: int = 0
    parsed: int = 0
    changed: int = 0
    by_run: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the command's output."""
        runs = ", ".join(f"{r}: {n}" for r, n in sorted(self.by_run.items()))
        return (
            f"re-parsed {self.parsed} of {self.checked} stored replies (the others cannot "
            f"change): {self.changed} row(s) changed" + (f" ({runs})" if runs else "")
        )


def reparse_runs(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> ReparseSummary:
    """Parse the runs' stored replies again where the parse may differ; write the changes.

    Args:
        con: a read-write connection inside the caller's transaction.
        runs: the run ids.

    Returns:
        The counts (:class:`ReparseSummary`).
    """
    checked, rows = reparse_candidates(con, runs)
    if rows.empty:
        return ReparseSummary(checked=checked)
    out: list[dict[str, Any]] = []
    by_run: Counter[str] = Counter()
    for r in rows.itertuples(index=False):
        shown = [str(x) for x in _seq(r.input_passage_ids)]
        got = parse_reply(r.raw_response, shown, max_cited=int(r.cap))
        meta = _meta(r.meta)
        old_record = meta.get("parse") if isinstance(meta, dict) else None
        new = {
            "answer": got.answer,
            "cited_ids": list(got.evidence_ids),
            "parse_error": got.parse_error,
            "explanation": got.explanation,
            "confidence": got.confidence,
        }
        stored = {
            "answer": _none(r.answer),
            "cited_ids": [str(x) for x in _seq(r.cited_ids)],
            "parse_error": _none(r.parse_error),
            "explanation": _none(r.explanation),
            "confidence": _none(r.confidence),
        }
        record = got.record() or None
        if new == stored and record == old_record:
            continue
        text = _none(r.meta)
        if record != old_record:
            meta = meta or {}
            meta.pop("parse", None)
            if record:
                meta["parse"] = record
            dumped = json.dumps(meta, sort_keys=True, default=str, ensure_ascii=False)
            text = dumped if meta else None
        out.append({"prow": int(r.prow), **new, "meta": text})
        by_run[str(r.run_id)] += 1
    write_reparsed(con, out)
    return ReparseSummary(checked=checked, parsed=len(rows), changed=len(out), by_run=dict(by_run))


def _seq(value: Any) -> list[Any]:
    if value is None or isinstance(value, (str, float)):
        return []
    return list(value)


def _none(value: Any) -> Any:
    """A stored NULL as None (pandas gives NaN for a NULL double)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _meta(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        out = json.loads(value)
    except ValueError:
        return None
    return out if isinstance(out, dict) else None
