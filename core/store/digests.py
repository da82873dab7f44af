"""Content digests of runs: what changed under a number since it was exported (issue 39).

A paper's numbers (:mod:`core.export.numbers`) record, per run they come from, a digest of the
run's predictions and one of its scores. When a recomputed number differs, comparing the digests
says why: the predictions changed (a rerun or a resumed run), only the scores changed (a
re-score), or neither (the definition or the tool changed). Digests are order-free
(``bit_xor`` of row hashes), so they do not depend on how DuckDB scans the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["run_digests"]

_PREDICTIONS = (
    "SELECT run_id, count(*) AS n, bit_xor(hash(instance_id, condition, variant, answer, "
    "array_to_string(cited_ids, ';'), coalesce(error, ''), coalesce(parse_error, ''), "
    "coalesce(raw_response, ''))) AS h FROM predictions WHERE list_contains(?, run_id) "
    "GROUP BY run_id"
)
_SCORES = (
    "SELECT run_id, bit_xor(hash(instance_id, condition, variant, em_strict, f1_strict, "
    "em_relaxed, f1_relaxed, ev_precision, ev_recall, ev_f1, failure_label)) AS h "
    "FROM scores WHERE list_contains(?, run_id) GROUP BY run_id"
)


def run_digests(store: Any, run_ids: Sequence[str]) -> dict[str, dict[str, str | int]]:
    """Per run: ``{"predictions": hex, "scores": hex, "n": count}`` (absent runs left out).

    Args:
        store: a :class:`core.store.Store`.
        run_ids: the runs to digest.
    """
    ids = [str(r) for r in run_ids]
    if not ids:
        return {}
    with store.connect(read_only=True) as con:
        preds = con.execute(_PREDICTIONS, [ids]).fetchall()
        scores = dict(con.execute(_SCORES, [ids]).fetchall())
    return {
        str(run): {
            "n": int(n),
            "predictions": f"{int(h or 0):016x}",
            "scores": f"{int(scores.get(run) or 0):016x}",
        }
        for run, n, h in preds
    }
