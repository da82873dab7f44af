"""Numbers with provenance (issue 39 items 4-5): ``export numbers`` and ``report check-paper``.

The demo store (controlled-200, embedded reader, four conditions) plus the released HotpotQA
run: every macro compiles with pdflatex, the values are the reports' own, and check-paper
flags exactly the macros a re-score altered (the oracle: a second export's differing texts).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import demo_into

from core.datasets.controlled import build_controlled
from core.export.numbers import check_paper, macro_part, p_text, read_numbers
from core.store import Store

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT.parent / "shared" / "fixtures" / "oncu_release"
HOTPOT_CSV = RELEASE / "hotpotqa_qwen25_14b_200.per_sample_metrics.csv"


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_macro_names_are_letters_only() -> None:
    assert macro_part("hotpotqa_qwen25_14b_200") == "HotpotqaQwenTwoFiveOneFourBTwoZeroZero"
    assert macro_part("demo-embedded") == "DemoEmbedded"
    assert macro_part("full_context") == "FullContext"
    assert re.fullmatch(r"[A-Za-z]+", macro_part("a:b/c 9"))


def test_p_values_print_as_the_tables_do() -> None:
    assert p_text(1e-39) == "$<0.001$"
    assert p_text(0.0) == "$<0.001$"
    assert p_text(0.3518) == "0.352"
    assert p_text(None) == "--"
    assert p_text(float("nan")) == "--"


@pytest.fixture(scope="module")
def paper_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HOTPOT_CSV.is_file():
        pytest.skip(f"shared fixtures absent: {HOTPOT_CSV} (the released HotpotQA run)")
    db = tmp_path_factory.mktemp("paper") / "s.duckdb"
    demo_into(Store(db))
    res = _cli(db, "import", "results", "--format", "oncu-release", str(HOTPOT_CSV))
    assert res.returncode == 0, res.stderr
    return db


def test_export_numbers_are_the_reports_numbers(paper_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "numbers.tex"
    res = _cli(paper_store, "export", "numbers", "--out", str(out))
    assert res.returncode == 0, res.stderr
    side = json.loads(out.with_suffix(".json").read_text())
    macros = read_numbers(out)["macros"]
    assert len(macros) == len(side["numbers"]) > 0
    run = "hotpotqa_qwen25_14b_200"
    stem = macro_part(run)
    # the released run's published numbers (fixture README: ONCU full 0.906, retrieved 0.639;
    # sample relaxed F1 none / full / retrieved / oracle 0.241 / 0.733 / 0.590 / 0.767)
    assert macros[f"oncu{stem}FullContext"].startswith("0.906 [")
    assert macros[f"oncu{stem}Retrieved"].startswith("0.639 [")
    assert [
        macros[f"mean{stem}{c}"] for c in ("NoEvidence", "FullContext", "Retrieved", "Oracle")
    ] == ["0.241", "0.733", "0.590", "0.767"]
    # the paired contrast as report paired prints it (fixture README: -0.143)
    assert macros[f"contrast{stem}RetrievedMinusFullContext"].startswith("-0.143 [")
    assert macros[f"contrastP{stem}RetrievedMinusFullContext"] == "$<0.001$"
    # every number carries its provenance: what, definition, run digest, the command
    text = out.read_text()
    block = text.split(f"\\newcommand{{\\oncu{stem}Retrieved}}")[0].rsplit("\n\n", 1)[1]
    assert "definition: SPEC §6.5" in block
    assert f"run {run} (dataset {run}" in block and "digest " in block
    assert f"recompute: python -m core report oncu --run {run}" in block
    assert side["runs"][run]["n"] == 800
    assert side["store"] == str(paper_store.resolve())


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex absent (core setup)")
def test_numbers_compile_in_a_paper(paper_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "numbers.tex"
    assert _cli(paper_store, "export", "numbers", "--out", str(out)).returncode == 0
    names = list(read_numbers(out)["macros"])
    body = "\n\n".join(f"\\texttt{{{n}}}: \\{n}" for n in names)
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\n\\input{numbers}\n\\begin{document}\n"
        f"{body}\n\\end{{document}}\n"
    )
    res = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout[-2000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 0


def test_check_paper_flags_exactly_what_a_rescore_changed(tmp_path: Path) -> None:
    if not HOTPOT_CSV.is_file():
        pytest.skip(f"shared fixtures absent: {HOTPOT_CSV}")
    db = tmp_path / "s.duckdb"
    demo_into(Store(db))
    assert (
        _cli(db, "import", "results", "--format", "oncu-release", str(HOTPOT_CSV)).returncode == 0
    )
    old = tmp_path / "numbers.tex"
    assert _cli(db, "export", "numbers", "--out", str(old)).returncode == 0
    paper = tmp_path / "paper.tex"
    stem = macro_part("hotpotqa_qwen25_14b_200")
    macros = read_numbers(old)["macros"]
    typed = macros[f"mean{stem}Oracle"]
    paper.write_text(
        f"We reach \\oncu{stem}Retrieved.\n"
        f"The oracle mean is {typed}.  % a number typed by hand\n"
        f"An old name: \\oncu{stem}Gone.\n"
    )
    clean = _cli(db, "report", "check-paper", str(old), "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["changed"] == []
    # a changed scorer: the retrieved answers of the demo run scored differently, then the
    # stored scores re-derived for what it touches (as a scorer option change would)
    store = Store(db)
    with store.transaction() as con:
        con.execute(
            "UPDATE scores SET f1_relaxed = 0.0, em_relaxed = 0.0 WHERE run_id = 'demo-embedded' "
            "AND condition = 'retrieved' AND instance_id IN (SELECT instance_id FROM instances "
            "WHERE dataset_id = 'controlled-200' ORDER BY ord LIMIT 40)"
        )
    new = tmp_path / "numbers_new.tex"
    assert _cli(db, "export", "numbers", "--out", str(new)).returncode == 0
    after = read_numbers(new)["macros"]
    expected = {m for m in macros if after.get(m) != macros[m]}
    assert expected and all("DemoEmbedded" in m for m in expected)
    res = _cli(db, "report", "check-paper", str(old), str(paper), "--json")
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert {c["macro"] for c in out["changed"]} == expected
    assert all(c["why"].startswith("re-score: the scores of demo-embedded") for c in out["changed"])
    assert [(x["line"], x["literal"]) for x in out["literals"]] == [(2, typed)]
    assert [(x["line"], x["macro"]) for x in out["stale_uses"]] == [(3, f"oncu{stem}Gone")]
    text = _cli(db, "report", "check-paper", str(old))
    assert text.returncode == 1 and "out of date" in text.stderr


def test_check_paper_on_a_file_that_is_not_numbers(tmp_path: Path) -> None:
    bad = tmp_path / "paper.tex"
    bad.write_text("\\documentclass{article}\n")
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(build_controlled("controlled-200", limit=2, name="ds"))
    with pytest.raises(ValueError, match="defines no .newcommand"):
        check_paper(store, bad)
    res = _cli(tmp_path / "s.duckdb", "report", "check-paper", str(bad))
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "paper.tex" in res.stderr
