"""Every exported LaTeX table, and the case card, compiles with pdflatex (issue 39).

On the demo store with a CUE-R run, a few DOLCE probes and a small attribution run beside it,
each registered table with data is exported as ``export table`` writes it (provenance
comment, booktabs) and all of them are compiled in one minimal document; the case card too.
Skipped when pdflatex or booktabs is absent (``python -m core setup`` installs them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import demo_into, study_into

from core.export.render import export_table
from core.selection import Selection
from core.store import Store
from core.views import resolve_selection
from core.views.catalog import table_names

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _has_booktabs() -> bool:
    if shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None:
        return False
    found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
    return bool(found.stdout.strip())


@pytest.mark.skipif(not _has_booktabs(), reason="pdflatex / booktabs absent (core setup)")
def test_every_latex_table_compiles(tmp_path: Path) -> None:
    store = study_into(Store(tmp_path / "s.duckdb"))  # the demo, probes, CUE-R, attribution
    tables, empty = [], []
    for name in table_names():
        for sel in (
            Selection(dataset="controlled-200"),
            Selection(runs=("cuer",)),
            Selection(runs=("probes",)),
        ):
            out = tmp_path / f"{name}.tex"
            try:
                info = export_table(store, name, resolve_selection(store, sel), out)
            except ValueError:
                continue
            if info["rows"]:
                tables.append(out)
                break
        else:
            empty.append(name)
    assert len(tables) >= 15, f"only {len(tables)} tables had data; none: {empty}"
    head = tables[0].read_text().splitlines()
    assert head[0].startswith("% table ") and any(
        x.startswith("% recompute: python -m core export table") for x in head
    )
    body = "\n".join(f"\\input{{{t.stem}}}\n\\clearpage" for t in tables)
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{tabularx}\n"
        "\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
        f"\\begin{{document}}\n{body}\n\\end{{document}}\n"
    )
    res = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:]


@pytest.mark.skipif(not _has_booktabs(), reason="pdflatex / booktabs absent (core setup)")
def test_case_card_compiles_with_its_provenance(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    demo_into(Store(db))
    out = tmp_path / "card.tex"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "export",
            "case",
            "--dataset",
            "controlled-200",
            "--instance",
            "controlled_000001",
            "--out",
            str(out),
            "--db",
            str(db),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert text.startswith("% case card of instance controlled_000001 of controlled-200")
    assert "% run demo-embedded (dataset controlled-200" in text
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{tabularx}\n"
        "\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
        "\\begin{document}\n\\input{card}\n\\end{document}\n"
    )
    res = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout[-3000:]
