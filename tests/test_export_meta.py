"""Figure files name themselves (issue 39 item 3): PDF Info, SVG title / desc, PNG text chunks.

Chromium prints every PDF with the renderer's page title ("Kaleido-fier"); an exported figure
carries its own title, the dataset and runs as the subject and this tool as the creator, read
back with poppler's ``pdfinfo`` (an independent PDF reader) and the PNG chunk layout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import plotly.graph_objects as go
import pytest
from conftest import demo_into

from core.export.numbers import tool_version
from core.export.render import (
    ExportSettings,
    figure_bytes,
    figure_meta,
    pdf_with_info,
    preset_settings,
)
from core.store import Store

ROOT = Path(__file__).resolve().parents[1]
META = figure_meta("ONCU – Δ by length (ü)", "hotpot-dev", ["qwen (a)", "r2"])


def _render_or_skip(fmt: str, settings: ExportSettings) -> bytes:
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    try:
        return figure_bytes(fig, fmt, settings, meta=META)
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"kaleido/Chromium cannot render here: {exc}")


def _pdfinfo(path: Path) -> dict[str, str]:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    return {
        k.strip(): v.strip()
        for k, _, v in (line.partition(":") for line in out.stdout.splitlines())
    }


def _png_text(png: bytes) -> dict[str, str]:
    """The iTXt chunks of a PNG, read by the PNG specification (each with a valid CRC)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    out, at = {}, 8
    while at < len(png):
        n = int.from_bytes(png[at : at + 4], "big")
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + n]
        assert int.from_bytes(png[at + 8 + n : at + 12 + n], "big") == zlib.crc32(kind + body)
        if kind == b"iTXt":
            key, _, rest = body.partition(b"\x00")
            # compression flag, method, language tag\0, translated keyword\0, text
            _, _, rest = rest[2:].partition(b"\x00")
            _, _, text = rest.partition(b"\x00")
            out[key.decode("latin-1")] = text.decode("utf-8")
        at += 12 + n
    return out


def test_meta_names_title_subject_creator() -> None:
    assert META == {
        "title": "ONCU – Δ by length (ü)",
        "subject": "dataset hotpot-dev; runs qwen (a), r2",
        "creator": f"evidence-diagnostics {tool_version()}",
    }


@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="poppler-utils absent (core setup)")
def test_pdf_info_is_the_figures_own(tmp_path: Path) -> None:
    pdf = _render_or_skip("pdf", preset_settings("acl-column"))
    path = tmp_path / "f.pdf"
    path.write_bytes(pdf)
    info = _pdfinfo(path)
    assert info["Title"] == META["title"]
    assert info["Subject"] == META["subject"]
    assert info["Creator"] == META["creator"]
    assert "Kaleido" not in pdf.decode("latin-1")
    assert info["Page size"].startswith("218.16 x")  # the page size edit still holds
    # the cross-reference table was moved with the edit: poppler renders without a repair
    res = subprocess.run(
        ["pdftoppm", "-png", "-r", "20", str(path), str(tmp_path / "p")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and "Error" not in res.stderr, res.stderr


def test_pdf_without_info_is_left_alone() -> None:
    assert pdf_with_info(b"%PDF-1.4 no info here", META) == b"%PDF-1.4 no info here"


def test_svg_and_png_carry_the_title() -> None:
    svg = _render_or_skip("svg", ExportSettings(width=300, height=200))
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.find(f"{ns}title").text == META["title"]
    assert root.find(f"{ns}desc").text == f"{META['subject']}; {META['creator']}"
    png = _render_or_skip("png", ExportSettings(width=300, height=200))
    info = _png_text(png)
    assert info["Title"] == META["title"]
    assert info["Description"] == META["subject"]
    assert info["Software"] == META["creator"]


@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="poppler-utils absent (core setup)")
def test_export_figure_names_dataset_and_runs(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    demo_into(Store(db))
    out = tmp_path / "m.pdf"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "export",
            "figure",
            "condition_matrix",
            "--dataset",
            "controlled-200",
            "--preset",
            "acl-column",
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
    if res.returncode != 0 and "Chromium" in res.stderr:
        pytest.skip(res.stderr)
    assert res.returncode == 0, res.stderr
    info = _pdfinfo(out)
    assert info["Title"] == "Answer and evidence scores by condition"
    assert info["Subject"] == "dataset controlled-200; runs demo-embedded"
    assert info["Creator"].startswith("evidence-diagnostics ")
