"""Venue presets in inches and points, and one embedded font family in SVG and PDF exports.

The PDF checks read the file with poppler's ``pdfinfo`` / ``pdffonts`` (Debian
``poppler-utils``; ``python -m core setup`` installs it) and skip, giving the reason, without
them or without Chromium. ``test_preset_screenshots`` writes the user guide's preset images to
``test-results/screenshots/preset-<name>.png`` (copied to ``docs/img/``, see the guide's
"Regenerating the screenshots").
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import CHROMIUM, SHOTS, build_release_store, open_page

from core.cli import main
from core.export.render import (
    DEFAULT_ASPECT,
    FIGURE_ASPECT,
    FONT_FAMILY,
    PRESETS,
    ExportSettings,
    export_figure,
    preset_settings,
    start_renderer,
)
from core.figures import Selection

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"{CHROMIUM} is missing (python -m core setup installs Debian chromium)",
)
needs_poppler = pytest.mark.skipif(
    shutil.which("pdfinfo") is None or shutil.which("pdffonts") is None,
    reason="pdfinfo/pdffonts are missing (python -m core setup installs Debian poppler-utils)",
)
SEL = Selection(dataset="controlled", runs=("controlled",))
#: A preset's PDF page box is the preset's width (pdfinfo prints points to 2 decimals).
TOL_IN = 0.0002


@pytest.fixture(scope="module")
def release_store(tmp_path_factory):
    return build_release_store(tmp_path_factory.mktemp("presets") / "s.duckdb")


def _pdf_width_in(path: Path) -> float:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    match = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info.stdout)
    assert match, info.stdout
    return float(match.group(1)) / 72


def _pdf_fonts(path: Path) -> list[tuple[str, str]]:
    """``(font name, emb)`` per row of ``pdffonts``."""
    out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True)
    rows = out.stdout.splitlines()[2:]  # two header lines
    # name type... encoding emb sub uni object ID: emb is the 5th field from the end
    return [(r.split()[0], r.split()[-5]) for r in rows if r.strip()]


def _svg_families(data: bytes) -> set[str]:
    families = set(re.findall(rb"font-family:\s*([^;\"]+)", data))
    root = ET.fromstring(data)
    families |= {e.get("font-family").encode() for e in root.iter() if e.get("font-family")}
    return {f.decode().strip().strip("'\"") for f in families}


# ------------------------------------------------------------------------- pure settings
def test_presets_are_the_venue_widths_and_point_fonts():
    widths = {name: p.width_in for name, p in PRESETS.items()}
    assert widths == {
        "acl-column": 3.03,
        "acl-page": 6.30,
        "neurips": 5.50,
        "ieee-column": 3.50,
        "ieee-page": 7.16,
    }
    assert all(8 <= p.font_pt <= 9 for p in PRESETS.values() if p.width_in < 4)
    assert all(9 <= p.font_pt <= 10 for p in PRESETS.values() if p.width_in >= 4)
    # 3.03 in x 96 px/in = 290.88 px; x 0.62 = 180.35 px; 8 pt = 8 x 96/72 px
    w, h, f = ExportSettings(preset="acl-column").layout_size()
    assert (w, h) == pytest.approx((290.88, 180.35)) and f == pytest.approx(32 / 3)
    # a figure's own aspect, then an explicit one
    assert ExportSettings(preset="ieee-page").layout_size(0.5)[1] == pytest.approx(343.68)
    assert ExportSettings(preset="ieee-page", aspect=1.0).layout_size(0.5)[1] == pytest.approx(
        687.36
    )
    s = preset_settings("neurips").for_figure("oncu_heatmap")
    assert s.aspect == FIGURE_ASPECT["oncu_heatmap"]
    assert preset_settings("neurips").for_figure("no-such").aspect == DEFAULT_ASPECT


def test_pixel_sizes_stay_the_default():
    s = ExportSettings()
    assert s.preset is None and s.layout_size() == (700.0, 450.0, 14.0)
    assert s.for_figure("oncu_heatmap") is s
    assert s.describe().startswith("700x450 px, font 14 px, Liberation Serif")
    assert (
        preset_settings("acl-column")
        .describe()
        .startswith("acl-column: 3.03 x 1.88 in, font 8 pt, Liberation Serif")
    )


def test_bad_preset_and_aspect_are_value_errors():
    with pytest.raises(
        ValueError,
        match="unknown preset 'a4'; choose one of: acl-column, "
        "acl-page, neurips, ieee-column, ieee-page",
    ):
        preset_settings("a4")
    with pytest.raises(ValueError, match=r"aspect 5 must be a number in \[0.2, 3\]"):
        ExportSettings(preset="neurips", aspect=5).checked()


# ------------------------------------------------------------------------------- renders
@needs_chromium
@needs_poppler
@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_pdf_width_and_embedded_font(release_store, tmp_path, name):
    start_renderer()
    out = tmp_path / f"{name}.pdf"
    export_figure(release_store, "condition_matrix", SEL, out, preset_settings(name))
    assert _pdf_width_in(out) == pytest.approx(PRESETS[name].width_in, abs=TOL_IN)
    fonts = _pdf_fonts(out)
    assert fonts, "no font in the PDF"
    assert all(emb == "yes" for _, emb in fonts), fonts
    # subset fonts are named "ABCDEF+LiberationSerif"
    assert {font.split("+")[-1] for font, _ in fonts} == {FONT_FAMILY.replace(" ", "")}


@needs_chromium
def test_svg_declares_the_family_the_pdf_embeds(release_store, tmp_path):
    start_renderer()
    for settings in (preset_settings("acl-column"), ExportSettings()):
        out = tmp_path / "f.svg"
        export_figure(release_store, "condition_matrix", SEL, out, settings)
        assert _svg_families(out.read_bytes()) == {FONT_FAMILY}


@needs_chromium
@needs_poppler
def test_cli_preset_and_its_errors(release_store, tmp_path, capsys):
    db = str(release_store.path)
    out = tmp_path / "f.pdf"
    base = [
        "export",
        "figure",
        "condition_matrix",
        "--db",
        db,
        "--dataset",
        "controlled",
        "--runs",
        "controlled",
    ]
    assert main([*base, "--preset", "acl-column", "--out", str(out)]) == 0
    assert _pdf_width_in(out) == pytest.approx(3.03, abs=TOL_IN)
    assert all(emb == "yes" for _, emb in _pdf_fonts(out))
    capsys.readouterr()
    assert main([*base, "--preset", "a4", "--out", str(tmp_path / "x.pdf")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: unknown preset 'a4'; choose one of: acl-column, acl-page, neurips, "
        "ieee-column, ieee-page"
    )
    assert (
        main(
            [
                *base,
                "--preset",
                "neurips",
                "--width",
                "300",
                "--font-size",
                "9",
                "--out",
                str(tmp_path / "x.pdf"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --preset neurips sets the width, height and font size; drop --width, --font-size"
    )
    assert not (tmp_path / "x.pdf").exists()


@needs_chromium
def test_preset_screenshots(release_store):
    """The user guide's images: condition_matrix at every preset, PNG at scale 2."""
    start_renderer()
    for name, preset in PRESETS.items():
        out = SHOTS / f"preset-{name}.png"
        export_figure(release_store, "condition_matrix", SEL, out, preset_settings(name))
        data = out.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        px = preset.width_in * 96 * 2
        assert abs(width - px) <= 1, (name, width, px)
        assert abs(height - px * FIGURE_ASPECT["condition_matrix"]) <= 1, (name, height)


# ------------------------------------------------------------------------------ dashboard
def test_dashboard_venue_preset_sets_the_download_size(release_store, monkeypatch):
    at = open_page(monkeypatch, release_store.path, "screens/conditions.py", "controlled")
    captions = " ".join(c.value for c in at.caption)
    assert "700x450 px, font 14 px, Liberation Serif" in captions
    at.selectbox(key="global.preset").set_value("acl-column").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "acl-column: 3.03 x 1.88 in, font 8 pt, Liberation Serif" in captions
