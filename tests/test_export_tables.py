"""Paper tables (issue 19 item 4): headers, CI cells, digits, escaping, caption/label, names."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import build_release_store

from core.cli import main
from core.export.render import table_bytes
from core.export.tables import latex_table, table_caption, table_csv, table_file_stem


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": ["r1", "50%_a&b{c}$"],
            "condition": ["full_context", "retrieved"],
            "oncu_clipped": [0.58315, float("nan")],
            "oncu_ci_low": [0.50621, float("nan")],
            "oncu_ci_high": [0.66349, float("nan")],
            "n": [134, 38],
            "invalid_reasons": [None, ""],
        }
    )


def test_small_frame_gives_the_hand_checked_latex():
    tex = latex_table(_frame(), caption="ONCU 100%", label="tab:oncu")
    assert tex == (
        "\\begin{table}[t]\n"
        "\\centering\n"
        "\\caption{ONCU 100\\%}\n"
        "\\label{tab:oncu}\n"
        "\\begin{tabular}{llrr}\n"
        "\\toprule\n"
        "run & condition & ONCU [CI] & $n$ \\\\\n"
        "\\midrule\n"
        "r1 & full\\_context & 0.583 [0.506, 0.663] & 134 \\\\\n"
        "50\\%\\_a\\&b\\{c\\}\\$ & retrieved & -- & 38 \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n"
        "\\end{table}\n"
    )
    assert "nan" not in tex and "invalid" not in tex  # the empty column is left out


def test_digits_columns_and_bare_ci_pairs():
    df = pd.DataFrame(
        {
            "contrast": ["a - b"],
            "mean": [0.123456],
            "ci_low": [-0.0449],
            "ci_high": [0.2551],
            "p": [0.00004],
            "small_groups": [3],
        }
    )
    tex = latex_table(df, digits=2, columns=["contrast", "mean", "p", "small_groups"])
    assert r"contrast & mean [CI] & $p$ & small groups \\" in tex
    # issue 34 item 4: a p below 0.001 prints as $<0.001$ (was $<$0.01 at 2 digits)
    assert r"a - b & 0.12 [-0.04, 0.26] & $<0.001$ & 3 \\" in tex
    # one that rounds to zero at 2 digits, but is not below 0.001
    tex = latex_table(df.assign(p=[0.004]), digits=2, columns=["contrast", "p"])
    assert r"a - b & $<0.01$ \\" in tex
    # a p_test column names the test in the p headers (and is not repeated as a column)
    named = df.assign(p_test="normal", p_holm=[0.0002])
    tex = latex_table(named[["contrast", "p", "p_test", "p_holm"]])
    assert r"contrast & $p$ (normal) & $p$ (normal, Holm across runs) \\" in tex
    assert r"a - b & $<0.001$ & $<0.001$ \\" in tex
    assert "\\caption" not in tex and "\\label" not in tex  # none asked for, no name given
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['nope'\]"):
        latex_table(df, columns=["nope"])
    with pytest.raises(ValueError, match="bad label"):
        latex_table(df, label="tab x")
    # an explicit empty column stays, shown as "--"
    explicit = latex_table(_frame(), columns=["run", "invalid_reasons"], name="oncu_summary")
    assert r"r1 & -- \\" in explicit and r"\label{tab:oncu_summary}" in explicit


def test_registered_default_columns_and_text_headers():
    df = _frame().assign(
        total_groups=[2, 2], valid_groups=[1, 2], missing=[0, 1], oncu_weighted=[0.5, 0.6]
    )
    tex = latex_table(df, name="oncu_summary")
    assert r"run & condition & valid groups & groups & ONCU [CI] & $n$ & missing \\" in tex
    assert "weighted" not in tex
    assert r"full\_context 4K" in latex_table(pd.DataFrame({"full_context 4K": [1.0]}))


def test_table_bytes_latex_is_the_paper_table_and_csv_keeps_every_column():
    tex = table_bytes(_frame(), "latex", 2, caption="T", name="oncu_summary").decode()
    assert r"0.58 [0.51, 0.66]" in tex and r"\label{tab:oncu_summary}" in tex
    csv = table_csv(_frame(), None)
    assert csv.splitlines()[0] == (
        "run,condition,oncu_clipped,oncu_ci_low,oncu_ci_high,n,invalid_reasons"
    )
    assert "0.58315,0.50621,0.66349" in csv  # full precision beside the rounded LaTeX


def test_caption_and_file_stem_carry_dataset_and_runs():
    assert table_caption("ONCU", "hotpot", ["demo-embedded"]) == (
        "ONCU. Dataset hotpot; run demo-embedded."
    )
    assert table_caption("ONCU", None, ["a", "b"]) == "ONCU. Runs a, b."
    assert table_file_stem("oncu_summary", "hotpot", ["demo-embedded"]) == (
        "oncu_summary-hotpot-demo-embedded"
    )
    assert table_file_stem("t", "my data/../x", ["r 1"]) == "t-my_data_.._x-r_1"
    many = table_file_stem("t", "d", ["a", "b", "c", "d"])
    assert many.startswith("t-d-4runs-") and many != table_file_stem("t", "d", list("abce"))


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "s.duckdb"
    build_release_store(path, demo=True)
    return path


def test_cli_writes_tex_and_csv_beside_named_after_dataset_and_run(demo_db, tmp_path, capsys):
    rc = main(
        [
            "export",
            "table",
            "oncu_summary",
            "--db",
            str(demo_db),
            "--dataset",
            "controlled-200",
            "--format",
            "latex",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    tex_path = tmp_path / "oncu_summary-controlled-200-demo-embedded.tex"
    csv_path = tmp_path / "oncu_summary-controlled-200-demo-embedded.csv"
    tex = tex_path.read_text()
    assert r"\caption{ONCU by run and condition. Dataset controlled-200; run demo-embedded.}" in tex
    assert r"\label{tab:oncu_summary}" in tex
    assert all(rule in tex for rule in (r"\toprule", r"\midrule", r"\bottomrule"))
    assert "oncu\\_ci\\_low" not in tex and "invalid" not in tex
    assert r"demo-embedded & full\_context & 167 & 192 & 0.913 [0.868, 0.952] & 200 & 0 \\" in tex
    data = pd.read_csv(csv_path)
    assert len(data.columns) == 26 and data["oncu_ci_low"].iloc[0] == pytest.approx(0.86826347)
    assert str(csv_path) in capsys.readouterr().out
    # --columns / --caption / --label, and a CSV that refuses them
    out = tmp_path / "pick.tex"
    assert (
        main(
            [
                "export",
                "table",
                "oncu_summary",
                "--db",
                str(demo_db),
                "--dataset",
                "controlled-200",
                "--out",
                str(out),
                "--columns",
                "condition,oncu_clipped",
                "--digits",
                "2",
                "--caption",
                "Mine & yours",
                "--label",
                "tab:mine",
            ]
        )
        == 0
    )
    picked = out.read_text()
    assert (
        r"condition & ONCU [CI] \\" in picked and r"full\_context & 0.91 [0.87, 0.95] \\" in picked
    )
    assert r"\caption{Mine \& yours}" in picked and r"\label{tab:mine}" in picked
    assert (tmp_path / "pick.csv").exists()
    assert (
        main(
            [
                "export",
                "table",
                "oncu_summary",
                "--db",
                str(demo_db),
                "--out",
                str(tmp_path / "x.csv"),
                "--columns",
                "n",
            ]
        )
        == 1
    )
    assert "CSV keeps every column" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
