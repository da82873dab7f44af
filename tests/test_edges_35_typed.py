"""Issue 35, Why 6: typed writes, no column type guessed from a sample of rows.

``import results`` of the release's own row order (four methods a sample, ``no_evidence``
first) failed on files of 4,000-4,999, 8,000-8,999 or 12,000+ rows: DuckDB typed the
DataFrame's list column ``cited_ids`` from a strided sample that saw only the no-evidence
rows' empty lists ("Unimplemented type for cast (VARCHAR -> NULL)"). Every frame handed to
DuckDB now goes as an Arrow table typed like the target columns.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest
from conftest import RELEASE_CONTROLLED, shared_fixture

from core.datasets.results import import_results
from core.store import Store
from core.store.schema import PREDICTION_COLUMNS


def release_file(tmp_path: Path, n_rows: int) -> Path:
    """A release-format file of ``n_rows`` rows: the controlled release repeated, in its own
    row order, each repeat's sample ids suffixed ``_rK`` (so every row is a new key)."""
    src = shared_fixture(RELEASE_CONTROLLED)
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = tmp_path / f"rows{n_rows}.per_sample_metrics.csv"
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for k in range(n_rows):
            row = dict(rows[k % len(rows)])
            row["sample_id"] += f"_r{k // len(rows)}"
            writer.writerow(row)
    return out


@pytest.mark.parametrize("n_rows", [3999, 4000, 8000, 12000])
def test_release_file_of_any_size_imports(tmp_path, n_rows):
    path = release_file(tmp_path, n_rows)
    store = Store(tmp_path / "s.duckdb")
    import_results(store, path, name="big")
    with store.connect(read_only=True) as con:
        n, cited = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE len(cited_ids) > 0) FROM predictions"
        ).fetchall()[0]
    assert n == n_rows
    assert cited > 0  # the later rows' evidence ids arrived, not only the empty lists


def _prediction_rows(n: int, empty_first: int) -> list[dict]:
    return [
        {
            "run_id": "r",
            "instance_id": f"i{k:05d}",
            "condition": "full",
            "variant": "",
            "input_passage_ids": ["p1", "p2"],
            "cited_ids": [] if k < empty_first else ["p1"],
            "answer": None if k < empty_first else "x",
            "parse_error": None,
            "error": None,
            "prompt_tokens": 10,
        }
        for k in range(n)
    ]


@pytest.mark.parametrize("as_frame", [False, True])
def test_engine_batch_with_4000_empty_citations_first(tmp_path, as_frame):
    """The engine's writer takes row dicts (an Arrow table) and falls back to a DataFrame
    when a row does not fit the Arrow types; both paths keep every row's citations."""
    store = Store(tmp_path / "s.duckdb")
    rows = _prediction_rows(8000, empty_first=4000)
    data = pd.DataFrame(rows) if as_frame else rows
    with store.write_batch() as con:
        store.write_predictions(con, data, replace=False)
    with store.connect(read_only=True) as con:
        got = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE cited_ids = ['p1']), "
            "count(answer) FROM predictions"
        ).fetchall()[0]
    assert got == (8000, 4000, 4000)


def test_frame_fallback_row_keeps_types(tmp_path):
    """A row Arrow cannot take as typed (a token count given as text) sends the batch down
    the DataFrame path, which is typed too: the text column of NULLs first still loads."""
    store = Store(tmp_path / "s.duckdb")
    rows = _prediction_rows(5000, empty_first=4500)
    rows[-1]["prompt_tokens"] = "12"
    with store.write_batch() as con:
        store.write_predictions(con, rows, replace=False)
    with store.connect(read_only=True) as con:
        got = con.execute(
            "SELECT count(*), sum(prompt_tokens), count(answer) FROM predictions"
        ).fetchall()[0]
    assert got == (5000, 4999 * 10 + 12, 500)
    assert "cited_ids" in PREDICTION_COLUMNS
