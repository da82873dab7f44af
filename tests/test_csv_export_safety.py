"""CSV exports neutralize cells a spreadsheet would read as a formula (issue 17, item 4).

A cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading
``'``; a number (``-0.25``) is written as it is. Every CSV the tool writes goes through
:func:`core.export.render.table_csv` (``export table``, ``export figure --out X.csv`` and the pages'
download buttons via :func:`core.export.render.table_bytes`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
import pytest

from core.cli import main
from core.export.render import safe_csv_cell, table_bytes, table_csv

_EVIL = '=HYPERLINK("http://evil.example","click")'


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        (_EVIL, "'" + _EVIL),
        ("+SUM(A1:A2)", "'+SUM(A1:A2)"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-", "'-"),
        ("-inf", "'-inf"),
        ("-0.25", "-0.25"),
        ("+3", "+3"),
        ("-1e-05", "-1e-05"),
        ("-.5", "-.5"),
        ("qwen2.5:14b", "qwen2.5:14b"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_safe_csv_cell(cell, written):
    assert safe_csv_cell(cell) == written


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_a_frame_with_a_formula_model_name_and_negative_numbers():
    df = pd.DataFrame({"model": [_EVIL, "m2"], "delta": [-0.25, 0.5], "@col": ["x", "-y"]})
    rows = _rows(table_csv(df, digits=2))
    assert rows == [
        ["model", "delta", "'@col"],
        ["'" + _EVIL, "-0.25", "x"],
        ["m2", "0.50", "'-y"],
    ]
    assert table_bytes(df, "csv", 2) == table_csv(df, 2).encode("utf-8")


def test_latex_is_not_prefixed():
    df = pd.DataFrame({"model": ["=x"], "delta": [-0.25]})
    assert "=x & -0.250" in table_bytes(df, "latex").decode("utf-8")


def _import_evil(tmp_path: Path) -> Path:
    header = (
        "sample_id,model_name,method,source,reasoning_type,answer_type,context_length,"
        "evidence_position,evidence_density,distractor_similarity,gold_answer,"
        "predicted_answer,gold_evidence_ids,predicted_evidence_ids"
    )
    model = '"' + _EVIL.replace('"', '""') + '"'
    lines = [header]
    for sid, pred in (("s1", "Lyon"), ("s2", "Paris")):
        for method in ("no_evidence", "direct"):
            lines.append(
                f"{sid},{model},{method},controlled,single_hop,entity,4000,front,low,"
                f"none,Paris,{pred if method == 'direct' else 'Paris'},p1,p1"
            )
    src = tmp_path / "evil.per_sample_metrics.csv"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    assert (
        main(
            [
                "import",
                "results",
                "--format",
                "oncu-release",
                str(src),
                "--name",
                "=r1",
                "--db",
                str(db),
            ]
        )
        == 0
    )
    return db


def test_exported_table_and_figure_data_neutralize_an_imported_model_name(tmp_path):
    """A model name and a run name from an imported file, exported as a table and as the data
    of a figure: both cells carry the ``'``; the scores beside them are numbers."""
    db = _import_evil(tmp_path)
    table, data = tmp_path / "t.csv", tmp_path / "f.csv"
    assert (
        main(
            [
                "export",
                "table",
                "condition_matrix",
                "--runs",
                "=r1",
                "--out",
                str(table),
                "--db",
                str(db),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "export",
                "figure",
                "condition_matrix",
                "--runs",
                "=r1",
                "--out",
                str(data),
                "--db",
                str(db),
            ]
        )
        == 0
    )
    rows = _rows(table.read_text(encoding="utf-8"))
    assert {r[rows[0].index("model")] for r in rows[1:]} == {"'" + _EVIL}
    assert {r[rows[0].index("run")] for r in rows[1:]} == {"'=r1"}
    by_cond = {r[rows[0].index("condition")]: r for r in rows[1:]}
    # hand-checked: full context answers Lyon for s1, Paris for s2 -> EM 0.5; question-only 1.0
    em = rows[0].index("em_strict")
    assert by_cond["full_context"][em] == "0.500" and by_cond["no_evidence"][em] == "1.000"
    fig_rows = _rows(data.read_text(encoding="utf-8"))
    assert {r[fig_rows[0].index("run")] for r in fig_rows[1:]} == {"'=r1"}
    for r in rows + fig_rows:
        assert not any(cell.startswith(("=", "@", "+")) for cell in r), r
