"""Publication export: static figures at the set size, CSV and LaTeX tables, the export CLI."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import build_release_store

from core.cli import main
from core.export.render import (
    ExportSettings,
    export_figure,
    export_table,
    figure_bytes,
    latex_escape,
    table_csv,
    table_latex,
)
from core.figures import Selection


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _fig() -> go.Figure:
    return go.Figure(go.Bar(x=["a", "b"], y=[0.25, 0.75]))


@pytest.fixture(scope="module")
def release_store(tmp_path_factory):
    return build_release_store(tmp_path_factory.mktemp("exp") / "s.duckdb")


# ------------------------------------------------------------------------------ figures
def test_png_has_the_set_size_times_scale():
    s = ExportSettings(width=640, height=400, scale=2.0)
    assert _png_size(figure_bytes(_fig(), "png", s)) == (1280, 800)
    s1 = ExportSettings(width=333, height=222, scale=1.0)
    assert _png_size(figure_bytes(_fig(), "png", s1)) == (333, 222)


def test_pdf_has_one_page_and_svg_parses_at_the_set_size():
    s = ExportSettings(width=500, height=300)
    pdf = figure_bytes(_fig(), "pdf", s)
    assert pdf.startswith(b"%PDF-")
    import re

    pages = re.findall(rb"/Type\s*/Page(?!s)", pdf)
    assert len(pages) == 1
    root = ET.fromstring(figure_bytes(_fig(), "svg", s))
    assert root.tag.endswith("svg")
    assert (root.get("width"), root.get("height")) == ("500", "300")


def test_bad_format_and_settings_are_value_errors():
    with pytest.raises(ValueError, match="unknown format 'gif'; choose one of: png, svg, pdf"):
        figure_bytes(_fig(), "gif")
    with pytest.raises(ValueError, match="width 50 must be an integer in"):
        ExportSettings(width=50).checked()
    with pytest.raises(ValueError, match="unknown template 'dark'"):
        ExportSettings(template="dark").checked()


# ------------------------------------------------------------------------------- tables
def test_latex_table_has_booktabs_rules_escaping_and_alignment():
    df = pd.DataFrame({"run": ["a_b", "c&d"], "oncu": [0.58315, float("nan")], "n": [134, 38]})
    tex = table_latex(df)
    lines = tex.strip().splitlines()
    assert lines[0] == r"\begin{tabular}{lrr}"
    assert lines[1] == r"\toprule"
    assert lines[2] == r"run & oncu & n \\"
    assert lines[3] == r"\midrule"
    assert lines[4] == r"a\_b & 0.583 & 134 \\"
    assert lines[5] == r"c\&d &  & 38 \\"
    assert lines[6:] == [r"\bottomrule", r"\end{tabular}"]
    wrapped = table_latex(df, caption="ONCU 100%", label="tab:oncu")
    assert r"\caption{ONCU 100\%}" in wrapped and r"\label{tab:oncu}" in wrapped
    assert latex_escape("x^2 ~ $5") == r"x\textasciicircum{}2 \textasciitilde{} \$5"


def test_csv_rounds_floats_blanks_nan_and_joins_lists():
    df = pd.DataFrame(
        {"a": [1.23456, float("nan")], "ids": [["p1", "p2"], []], "r": [{"x": 2}, None]}
    )
    assert table_csv(df, digits=2) == "a,ids,r\n1.23,p1; p2,x: 2\n,,\n"


# ----------------------------------------------------------------- registry + CLI export
def test_export_table_oncu_summary_latex_and_csv(release_store, tmp_path):
    sel = Selection(dataset="controlled")
    info = export_table(release_store, "oncu_summary", sel, tmp_path / "o.tex")
    tex = (tmp_path / "o.tex").read_text()
    assert info["format"] == "latex" and info["rows"] == 2
    assert r"\toprule" in tex and r"\bottomrule" in tex
    # published ONCU of the controlled release run (seed 000 Table 7): 0.583 / 0.981
    assert "full\\_context & 134 & 134 & 0.583" in tex
    assert "retrieved & 134 & 134 & 0.981" in tex
    export_table(release_store, "oncu_summary", sel, tmp_path / "o.csv", fmt="csv")
    df = pd.read_csv(tmp_path / "o.csv")
    assert df["oncu_clipped"].round(3).tolist() == [0.583, 0.981]


def test_export_figure_writes_png_of_the_set_size(release_store, tmp_path):
    s = ExportSettings(width=600, height=350, scale=1.0)
    out = tmp_path / "fig" / "audit.png"
    info = export_figure(release_store, "oncu_audit", Selection(dataset="controlled"), out, s)
    assert _png_size(out.read_bytes()) == (600, 350)
    assert info["rows"] == 268  # 134 valid groups x 2 contextual conditions
    assert not list(out.parent.glob("*.part"))


def test_cli_export_lists_names_and_writes_files(release_store, tmp_path, capsys):
    assert main(["export", "figure", "--list"]) == 0
    figs = capsys.readouterr().out.split()
    assert {"condition_matrix", "oncu_audit", "oncu_heatmap", "retrieval_curves"} <= set(figs)
    assert figs == sorted(figs)
    assert main(["export", "table", "--list"]) == 0
    assert "oncu_summary" in capsys.readouterr().out.split()
    db = str(release_store.path)
    out = tmp_path / "m.svg"
    rc = main(
        [
            "export",
            "figure",
            "condition_matrix",
            "--db",
            db,
            "--dataset",
            "controlled",
            "--runs",
            "controlled",
            "--score-field",
            "f1_relaxed",
            "--out",
            str(out),
            "--width",
            "800",
            "--height",
            "500",
        ]
    )
    assert rc == 0
    root = ET.fromstring(out.read_bytes())
    assert (root.get("width"), root.get("height")) == ("800", "500")
    rc = main(
        [
            "export",
            "table",
            "failure_breakdown",
            "--db",
            db,
            "--runs",
            "controlled",
            "--format",
            "csv",
            "--out",
            str(tmp_path / "f.csv"),
        ]
    )
    assert rc == 0
    fail = pd.read_csv(tmp_path / "f.csv").set_index("condition")
    # published failure labels, controlled run, full context (fixtures README)
    assert fail.loc[
        "full_context", ["localization", "selection", "integration", "conversion", "success"]
    ].tolist() == [36.0, 0.5, 10.0, 38.5, 15.0]


def test_cli_export_bad_input_is_one_line(release_store, tmp_path, capsys):
    db = str(release_store.path)
    assert main(["export", "figure", "nope", "--db", db, "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown figure 'nope'; choose one of:") and "\n" not in err
    assert (
        main(["export", "figure", "oncu_audit", "--db", db, "--out", str(tmp_path / "x.gif")]) == 1
    )
    assert "unknown format '.gif'" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                "table",
                "oncu_summary",
                "--db",
                db,
                "--runs",
                "missing-run",
                "--format",
                "csv",
                "--out",
                str(tmp_path / "x.csv"),
            ]
        )
        == 1
    )
    assert "unknown run(s) ['missing-run']" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["export", "table", "oncu_summary", "--format", "xlsx", "--out", "x"])
    assert exc.value.code == 2
    assert not Path(tmp_path / "x.png").exists()
