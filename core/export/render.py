"""Publication export: figures to PNG / SVG / PDF at a set size, tables to CSV / LaTeX (booktabs).

The dashboard's download menus and ``python -m core export`` call the same functions, so a
figure on a page and the file in a paper are built by the same registered view and plot
(:mod:`core.views.catalog`). Static images come from kaleido 1.x driving the system Chromium
(Debian package ``chromium``; ``python -m core setup`` installs it when missing). Sizes are
CSS pixels or a venue preset in inches (:data:`PRESETS`); every export sets one font family
(:data:`FONT_FAMILY`, Debian ``fonts-liberation``), embedded in the PDF.
"""

from __future__ import annotations

import copy
import html
import re
import threading
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from core.export.fit import fit_figure
from core.export.numbers import TOOL, provenance_comment, tool_version
from core.export.tables import (
    latex_escape,
    latex_table,
    neutralize_frame,
    safe_csv_cell,
    table_caption,
    table_csv,
    table_latex,
)
from core.figures import steady_axes
from core.selection import Selection
from core.store import Store

__all__ = [
    "FIGURE_FORMATS",
    "TABLE_FORMATS",
    "TEMPLATES",
    "DEFAULT_ASPECT",
    "FIGURE_ASPECT",
    "FONT_FAMILY",
    "PRESETS",
    "ExportSettings",
    "Preset",
    "export_figure",
    "export_table",
    "figure_bytes",
    "figure_meta",
    "layout_line",
    "latex_escape",
    "mime_type",
    "neutralize_frame",
    "preset_settings",
    "safe_csv_cell",
    "start_renderer",
    "style_figure",
    "table_bytes",
    "table_csv",
    "table_latex",
]

#: Static figure formats (file suffix = format).
FIGURE_FORMATS = ("png", "svg", "pdf")
#: Table formats.
TABLE_FORMATS = ("csv", "latex")
#: Plotly templates offered in the settings (built into plotly, so exports need no network).
TEMPLATES = ("simple_white", "plotly_white", "ggplot2", "seaborn", "presentation", "plotly")

_MIME = {
    "png": "image/png",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
    "csv": "text/csv",
    "latex": "application/x-tex",
}
#: CSS pixels per inch: plotly lays out and kaleido prints SVG / PDF at 96 px per inch.
PX_PER_IN = 96.0
#: PDF points per inch.
PT_PER_IN = 72.0
#: The one font family of every export: set on the layout, so the SVG's text declares it and
#: Chromium embeds this same font in the PDF. Debian ``fonts-liberation`` (``python -m core
#: setup`` installs it); metric-compatible with Times, the look of LaTeX papers.
FONT_FAMILY = "Liberation Serif"
#: Height / width of a preset export when the figure declares none (about the golden ratio).
DEFAULT_ASPECT = 0.62
#: Height / width per registered figure at a venue preset (figures not named: DEFAULT_ASPECT).
FIGURE_ASPECT: dict[str, float] = {
    "condition_matrix": 0.62,
    "cuer_duplicate_positions": 1.0,
    "cuer_hardness": 1.0,
    "cuer_paired_heatmap": 0.8,
    "dolce_lambda_k_map": 0.75,
    "fanin_scatter": 0.75,
    "oncu_heatmap": 0.8,
    "oncu_length_curves": 0.9,
}


@dataclass(frozen=True, slots=True)
class Preset:
    """A venue's figure width and font size in physical units.

    Attributes:
        name: preset name (``--preset NAME``).
        width_in: figure width in inches (the venue's column or text width).
        font_pt: base font size in points.
        venue: what the width is, in words.
    """

    name: str
    width_in: float
    font_pt: float
    venue: str


#: Venue presets by name: column and page widths of the common NLP / ML templates.
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("acl-column", 3.03, 8.0, "ACL / ARR one column"),
        Preset("acl-page", 6.30, 9.0, "ACL / ARR full text width (both columns)"),
        Preset("neurips", 5.50, 9.0, "NeurIPS / ICLR / ICML text width"),
        Preset("ieee-column", 3.50, 8.0, "IEEE one column"),
        Preset("ieee-page", 7.16, 9.0, "IEEE full text width (both columns)"),
    )
}


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Publication size and style, chosen once in the dashboard's settings.

    Sizes are CSS pixels (96 per inch in SVG / PDF) unless ``preset`` names a venue preset;
    then the preset's width in inches and font in points replace ``width``, ``height`` and
    ``font_size`` (:meth:`layout_size`), and the height is the width times the aspect.

    Attributes:
        width: figure width in CSS pixels (the layout size); unused with a preset.
        height: figure height in CSS pixels; unused with a preset.
        font_size: base font size in CSS pixels of the layout; unused with a preset.
        template: a plotly template name (one of :data:`TEMPLATES`).
        scale: raster multiplier for PNG: the PNG is ``width*scale`` x ``height*scale`` pixels
            (vector formats keep the layout size).
        float_digits: decimals of floats in CSV / LaTeX tables.
        preset: a venue preset name (one of :data:`PRESETS`), or None for the pixel sizes.
        aspect: height / width with a preset; None = the figure's own
            (:data:`FIGURE_ASPECT`, else :data:`DEFAULT_ASPECT`).
        font_family: the font family of every text (:data:`FONT_FAMILY`).
    """

    width: int = 700
    height: int = 450
    font_size: int = 14
    template: str = "simple_white"
    scale: float = 2.0
    float_digits: int = 3
    preset: str | None = None
    aspect: float | None = None
    font_family: str = FONT_FAMILY

    def checked(self) -> ExportSettings:
        """The settings unchanged, or ValueError naming the bad value and the allowed ones."""
        for name, lo, hi in (("width", 100, 5000), ("height", 100, 5000), ("font_size", 4, 72)):
            value = getattr(self, name)
            if not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} {value!r} must be an integer in [{lo}, {hi}]")
        if self.template not in TEMPLATES:
            raise ValueError(
                f"unknown template {self.template!r}; choose one of: {', '.join(TEMPLATES)}"
            )
        if not (isinstance(self.scale, int | float) and 0.25 <= float(self.scale) <= 8):
            raise ValueError(f"scale {self.scale!r} must be a number in [0.25, 8]")
        if not isinstance(self.float_digits, int) or not 0 <= self.float_digits <= 10:
            raise ValueError(f"float_digits {self.float_digits!r} must be an integer in [0, 10]")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of: {', '.join(PRESETS)}")
        if self.aspect is not None and not (
            isinstance(self.aspect, int | float) and 0.2 <= float(self.aspect) <= 3
        ):
            raise ValueError(f"aspect {self.aspect!r} must be a number in [0.2, 3]")
        if not isinstance(self.font_family, str) or not self.font_family.strip():
            raise ValueError(f"font_family {self.font_family!r} must be a font family name")
        return self

    def layout_size(self, aspect: float | None = None) -> tuple[float, float, float]:
        """``(width, height, font_size)`` in CSS pixels, as the layout gets them.

        Args:
            aspect: the figure's height / width, used with a preset when ``self.aspect`` is
                None (then :data:`DEFAULT_ASPECT` when this is None too).

        Returns:
            The pixel settings as they are, or with a preset: width = inches x 96, height =
            width x aspect, font = points x 96 / 72 (so a PDF page is the preset's inches wide).
        """
        if self.preset is None:
            return float(self.width), float(self.height), float(self.font_size)
        p = PRESETS[self.preset]
        ratio = self.aspect if self.aspect is not None else aspect
        width = p.width_in * PX_PER_IN
        height = width * float(ratio if ratio is not None else DEFAULT_ASPECT)
        return width, round(height, 2), p.font_pt * PX_PER_IN / PT_PER_IN

    def for_figure(self, name: str) -> ExportSettings:
        """These settings with the registered figure ``name``'s aspect (:data:`FIGURE_ASPECT`).

        Pixel settings and an explicit ``aspect`` are returned unchanged.
        """
        if self.preset is None or self.aspect is not None:
            return self
        return replace(self, aspect=FIGURE_ASPECT.get(name, DEFAULT_ASPECT))

    def describe(self, aspect: float | None = None) -> str:
        """A short text of the size and style, e.g. for the dashboard's download menu."""
        w, h, f = self.layout_size(aspect)
        if self.preset is None:
            size = f"{self.width}x{self.height} px, font {self.font_size} px"
        else:
            size = (
                f"{self.preset}: {w / PX_PER_IN:.2f} x {h / PX_PER_IN:.2f} in, "
                f"font {PRESETS[self.preset].font_pt:g} pt"
            )
        return f"{size}, {self.font_family}, {self.template}; PNG x{float(self.scale):g}"


def preset_settings(name: str, **changes: Any) -> ExportSettings:
    """Checked settings at the venue preset ``name`` (other fields from ``changes``).

    Raises:
        ValueError: unknown preset (the message lists the names) or bad ``changes``.
    """
    return ExportSettings(preset=name, **changes).checked()


def mime_type(fmt: str) -> str:
    """MIME type of an export format (``png``, ``svg``, ``pdf``, ``csv``, ``latex``)."""
    return _MIME[_check_format(fmt, FIGURE_FORMATS + TABLE_FORMATS)]


def _check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    f = str(fmt).lower().lstrip(".")
    if f == "tex":
        f = "latex"
    if f not in allowed:
        raise ValueError(f"unknown format {fmt!r}; choose one of: {', '.join(allowed)}")
    return f


# ------------------------------------------------------------------------------ figures
def style_figure(
    fig: Any, settings: ExportSettings | None = None, aspect: float | None = None
) -> Any:
    """A copy of ``fig`` laid out at the publication size, font family and template.

    The page shows the builder's figure as is (responsive width); exports use this copy. The
    layout's font family is always set (:data:`FONT_FAMILY` by default), so the SVG declares
    the family that Chromium embeds in the PDF.

    Args:
        fig: a plotly figure.
        settings: size and style (default :class:`ExportSettings`).
        aspect: the figure's height / width, used with a preset
            (:meth:`ExportSettings.layout_size`).
    """
    s = (settings or ExportSettings()).checked()
    width, height, font_size = s.layout_size(aspect)
    out = go.Figure(copy.deepcopy(fig.to_dict()))
    out.update_layout(
        template=pio.templates[s.template],
        width=width,
        height=height,
        font={"size": font_size, "family": s.font_family},
        autosize=False,
    )
    steady_axes(out)  # no "300n" ticks for a metric that is 0 up to float noise
    if s.preset is not None:
        _fit_to_preset(out, font_size)
    return out


#: Plotly's base font size in px: explicit annotation sizes are relative to it.
_PLOTLY_FONT_PX = 12.0


def _fit_to_preset(fig: Any, font_px: float) -> None:
    """At a column or page width: tight margins that grow to fit, annotations at the font.

    Plotly's default margins (80 px a side) take half a 3 in column; sides the figure leaves
    unset get a few points and every axis grows its margin to fit its ticks and title. Subplot
    titles come with an explicit 16 px: they are scaled with the preset font, at most 1.25x it.
    """
    margin = fig.layout.margin
    pad = round(font_px / 2)
    fig.update_layout(margin={k: pad for k in ("l", "r", "t", "b") if margin[k] is None})
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    for ann in fig.layout.annotations:
        if ann.font.size is not None:
            ann.font.size = min(ann.font.size * font_px / _PLOTLY_FONT_PX, 1.25 * font_px)


_RENDERER_LOCK = threading.Lock()
_RENDERER_STARTED = False


def start_renderer() -> bool:
    """Keep one Chromium running for exports (each later export takes ~0.1 s instead of ~2 s).

    Safe to call many times; returns True when the persistent renderer is (now) running and
    False when kaleido could not start it (exports then start a browser per call).
    """
    global _RENDERER_STARTED
    with _RENDERER_LOCK:
        if _RENDERER_STARTED and _renderer_alive():
            return True
        try:
            import kaleido  # on first export: it starts a browser and is slow to import

            _keep_tabs_loaded()
            kaleido.start_sync_server(silence_warnings=True)
        except Exception:
            return False
        _RENDERER_STARTED = _renderer_alive()
        return _RENDERER_STARTED


#: Renderings a kaleido tab serves before it is reloaded (:func:`_keep_tabs_loaded`).
RELOAD_EVERY = 64


def _keep_tabs_loaded() -> None:
    """Reload kaleido's tab every :data:`RELOAD_EVERY` renderings instead of after each one.

    Kaleido 1.x reloads its page (plotly.js, ~4 MB of script) after every figure, before the
    call returns: 0.12 s of the 0.13 s a small SVG takes, and the fitting of a preset export
    renders two or three times. A figure is drawn into a fresh element that plotly purges
    (``Plotly.toImage`` on the figure object), so nothing of one figure reaches the next: the
    bytes are the same with or without the reload (``tests/test_export_renderer.py``). The
    periodic reload bounds what the page may keep. Kaleido internals (1.x); another kaleido
    keeps its own behaviour.
    """
    try:
        from kaleido.kaleido import Kaleido
    except ImportError:  # pragma: no cover - another kaleido
        return
    reload_tab = getattr(Kaleido, "_return_kaleido_tab", None)
    if reload_tab is None or getattr(reload_tab, "_served", False):
        return

    async def return_tab(self: Any, tab: Any) -> None:
        served = getattr(tab, "_evidence_served", 0) + 1
        if served >= RELOAD_EVERY or not hasattr(self, "tabs_ready"):
            tab._evidence_served = 0
            await reload_tab(self, tab)
            return
        tab._evidence_served = served
        await self.tabs_ready.put(tab)

    return_tab._served = True  # type: ignore[attr-defined]
    Kaleido._return_kaleido_tab = return_tab


def _renderer_alive() -> bool:
    """Whether kaleido's background renderer thread still runs; a dead one is closed.

    Kaleido marks its server open when it starts the thread and never notices the thread's
    end (its browser failed to start, or died): a call then waits forever on its queue. A
    dead server is closed here, so exports fall back to a browser per call (or restart it).
    """
    global _RENDERER_STARTED
    try:
        from kaleido._sync_server import GlobalKaleidoServer  # kaleido internals (1.x)
    except ImportError:  # pragma: no cover - another kaleido: trust its own state
        return True
    server = GlobalKaleidoServer()
    if not server.is_running():
        _RENDERER_STARTED = False
        return False
    thread = getattr(server, "_thread", None)
    if thread is not None and thread.is_alive():
        return True
    server.close(silence_warnings=True)  # the thread has ended: the join returns at once
    _RENDERER_STARTED = False
    return False


def figure_meta(title: str, dataset: str | None = None, runs: Sequence[str] = ()) -> dict:
    """A figure file's metadata: its title, the dataset and runs (subject), this tool."""
    subject = "; ".join(
        part
        for part in (
            f"dataset {dataset}" if dataset else "",
            f"runs {', '.join(runs)}" if runs else "",
        )
        if part
    )
    return {"title": str(title), "subject": subject, "creator": f"{TOOL} {tool_version()}"}


def figure_bytes(
    fig: Any,
    fmt: str,
    settings: ExportSettings | None = None,
    aspect: float | None = None,
    meta: Mapping[str, str] | None = None,
    said: list[str] | None = None,
) -> bytes:
    """Render ``fig`` to PNG / SVG / PDF bytes at the settings' size.

    With a venue preset the PDF page is the preset's width in inches (Chromium prints 96 CSS
    px per inch; it rounds the page to within 0.01 in) and ``aspect`` (the figure's height /
    width) sets the height. The file names itself (:func:`figure_meta`; default: the
    figure's own title): PDF Info ``/Title`` ``/Subject`` ``/Creator``, SVG ``<title>`` and
    ``<desc>``, PNG ``iTXt`` Title / Description / Software. ``said``, when given, gets a line
    per thing the layout could not keep at this size (:func:`core.export.fit.fit_figure`).

    Raises:
        ValueError: unknown format or bad settings.
        RuntimeError: no Chromium for kaleido (message says how to install it).
    """
    f = _check_format(fmt, FIGURE_FORMATS)
    s = (settings or ExportSettings()).checked()
    styled = style_figure(fig, s, aspect)
    width, height, font_px = s.layout_size(aspect)
    last: dict[str, Any] = {}  # the last SVG rendering and the figure state it is of

    def render_svg(g: Any, w: float, h: float) -> bytes:
        state = (g.to_json(), w, h)
        if last.get("state") != state:  # the layout changed since: render again
            last["state"], last["svg"] = state, _to_image(g, "svg", w, h, 1.0)
        return last["svg"]

    height = fit_figure(
        styled,
        width,
        height,
        font_px,
        render_svg,
        s.font_family,
        grow=s.preset is not None,
        said=said,
    )
    if f == "svg":
        data = render_svg(styled, width, height)
    else:
        data = _to_image(styled, f, width, height, float(s.scale) if f == "png" else 1.0)
    if meta is None:
        title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
        meta = figure_meta(_plain_title(title) or "Figure")
    if f == "pdf":
        data = exact_page_size(data, width * PT_PER_IN / PX_PER_IN, height * PT_PER_IN / PX_PER_IN)
        return pdf_with_info(data, meta)
    return svg_with_meta(data, meta) if f == "svg" else png_with_text(data, meta)


def _plain_title(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", str(text)).split())


def _to_image(fig: Any, fmt: str, width: float, height: float, scale: float) -> bytes:
    """Kaleido's rendering of ``fig``; a missing Chromium becomes a RuntimeError saying so."""
    if _RENDERER_STARTED:
        with _RENDERER_LOCK:
            _renderer_alive()  # a renderer that died is closed, never waited on
    try:
        with warnings.catch_warnings():
            # plotly passes kaleido options that a running renderer ignores; harmless
            warnings.simplefilter("ignore", UserWarning)
            return fig.to_image(format=fmt, width=width, height=height, scale=scale)
    except (RuntimeError, OSError, ValueError) as exc:
        text = next(
            (ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__
        )  # kaleido's messages may start with a blank line
        if "chrom" in text.lower() or "browser" in text.lower():
            raise RuntimeError(
                f"static export needs Chromium: {text} (run: python -m core setup)"
            ) from exc
        raise


_MEDIA_BOX = re.compile(rb"/MediaBox\s*\[([^\]]*)\]")
_XREF = re.compile(rb"\nxref\n(\d+) (\d+)\n((?:\d{10} \d{5} [nf] ?\r?\n)+)")
_STARTXREF = re.compile(rb"startxref\s+(\d+)")


def exact_page_size(pdf: bytes, width_pt: float, height_pt: float) -> bytes:
    """``pdf`` with its one page's MediaBox set to ``width_pt`` x ``height_pt`` points.

    Chromium prints the page in steps of 1/75 in (3.03 in comes out 3.0267 in, 217.92 pt), so
    the MediaBox is rewritten to the size asked for (218.16 pt): the drawing keeps its place
    at the lower left and the page grows or shrinks by less than one step (at most 0.96 pt,
    white). The cross-reference offsets after the edit are moved by the change in length.
    A PDF that is not one page with a plain MediaBox and one xref table is returned unchanged.
    """
    boxes = list(_MEDIA_BOX.finditer(pdf))
    if len(boxes) != 1:
        return pdf
    box = boxes[0]
    try:
        old = [float(v) for v in box.group(1).split()]
    except ValueError:
        return pdf
    if (
        len(old) != 4
        or abs(old[2] - old[0] - width_pt) > 1.0
        or abs(old[3] - old[1] - height_pt) > 1.0
    ):
        return pdf  # not the page we printed: leave it as Chromium wrote it
    new = f"/MediaBox [0 0 {width_pt:.2f} {height_pt:.2f}]".encode("ascii")
    out = _splice(pdf, box.start(), box.end(), new)
    return pdf if out is None else out


def _splice(pdf: bytes, at: int, end: int, new: bytes) -> bytes | None:
    """``pdf`` with ``pdf[at:end]`` replaced by ``new``, its one xref table moved to match.

    None when the file is not one plain xref table after the edit (left as it was then).
    """
    xrefs = list(_XREF.finditer(pdf))
    starts = list(_STARTXREF.finditer(pdf))
    if len(xrefs) != 1 or len(starts) != 1:
        return None
    xref, start = xrefs[0], starts[0]
    if not end <= xref.start() <= start.start():
        return None
    delta = len(new) - (end - at)

    def moved(offset: int) -> int:
        return offset + delta if offset > at else offset

    rows = []
    for line in xref.group(3).splitlines():
        off, gen, kind = line.split()[:3]
        rows.append(b"%010d %s %s \n" % (moved(int(off)) if kind == b"n" else int(off), gen, kind))
    table = b"\nxref\n%d %d\n" % (int(xref.group(1)), len(rows)) + b"".join(rows)
    return (
        pdf[:at]
        + new
        + pdf[end : xref.start()]
        + table
        + pdf[xref.end() : start.start()]
        + b"startxref\n%d" % moved(int(start.group(1)))
        + pdf[start.end() :]
    )


_INFO = re.compile(rb"<<\s*/Title\s*\((?:[^()\\]|\\.)*\)(?:(?!>>).)*>>", re.DOTALL)


def _pdf_text(text: str) -> bytes:
    """A PDF text string of any Unicode text: UTF-16BE with its byte-order mark, in hex."""
    return b"<FEFF" + str(text).encode("utf-16-be").hex().upper().encode("ascii") + b">"


def pdf_with_info(pdf: bytes, meta: Mapping[str, str]) -> bytes:
    """``pdf`` with its Info dictionary's Title, Subject and Creator set from ``meta``.

    Chromium writes ``/Title (Kaleido-fier)`` (the renderer's page title) and its own
    creator; the Producer is kept. A PDF without that dictionary is returned unchanged.
    """
    found = list(_INFO.finditer(pdf))
    if len(found) != 1:
        return pdf
    m = found[0]
    producer = re.search(rb"/Producer\s*(\((?:[^()\\]|\\.)*\))", m.group(0))
    fields = b"".join(
        b"/%s %s\n" % (key, _pdf_text(meta.get(name, "")))
        for key, name in ((b"Title", "title"), (b"Subject", "subject"), (b"Creator", "creator"))
    )
    new = b"<<" + fields + (b"/Producer " + producer.group(1) if producer else b"") + b">>"
    out = _splice(pdf, m.start(), m.end(), new)
    return pdf if out is None else out


def svg_with_meta(svg: bytes, meta: Mapping[str, str]) -> bytes:
    """``svg`` with ``<title>`` (the title) and ``<desc>`` (subject; creator) first inside."""
    m = re.search(rb"<svg\b[^>]*>", svg)
    if m is None:
        return svg
    desc = "; ".join(v for v in (meta.get("subject", ""), meta.get("creator", "")) if v)
    extra = (
        f"<title>{html.escape(meta.get('title', ''))}</title><desc>{html.escape(desc)}</desc>"
    ).encode("utf-8")
    return svg[: m.end()] + extra + svg[m.end() :]


def png_with_text(png: bytes, meta: Mapping[str, str]) -> bytes:
    """``png`` with ``iTXt`` chunks Title, Description (subject) and Software (creator)."""
    if not png.startswith(b"\x89PNG\r\n\x1a\n") or png[12:16] != b"IHDR":
        return png
    after_ihdr = 8 + 8 + int.from_bytes(png[8:12], "big") + 4
    chunks = b""
    for key, field_ in (("Title", "title"), ("Description", "subject"), ("Software", "creator")):
        text = meta.get(field_, "")
        if not text:
            continue
        body = key.encode("latin-1") + b"\x00\x00\x00\x00\x00" + text.encode("utf-8")
        chunks += (
            len(body).to_bytes(4, "big")
            + b"iTXt"
            + body
            + zlib.crc32(b"iTXt" + body).to_bytes(4, "big")
        )
    return png[:after_ihdr] + chunks + png[after_ihdr:]


# ------------------------------------------------------------------------------- tables
def table_bytes(
    df: pd.DataFrame,
    fmt: str,
    digits: int = 3,
    caption: str | None = None,
    **latex: Any,
) -> bytes:
    """A table as UTF-8 CSV or LaTeX bytes (``fmt`` ``csv`` or ``latex``).

    CSV keeps every column; LaTeX is :func:`core.export.tables.latex_table` (``latex`` takes
    its ``columns``, ``label`` and ``name``).
    """
    f = _check_format(fmt, TABLE_FORMATS)
    if f == "csv":
        return table_csv(df, digits).encode("utf-8")
    return latex_table(df, digits=digits, caption=caption, **latex).encode("utf-8")


# ------------------------------------------------------------------ registry-level exports
def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)


def export_figure(
    store: Store,
    name: str,
    selection: Selection,
    out: str | Path,
    settings: ExportSettings | None = None,
) -> dict[str, Any]:
    """Build the registered figure ``name`` for ``selection`` and write it to ``out``.

    The format is the file suffix (``.png``, ``.svg``, ``.pdf``); ``.csv`` writes the data
    behind the figure instead. The file appears only when complete.

    Returns:
        ``{"figure", "path", "format", "bytes", "rows"}``, and ``"layout"``: one line saying
        what the layout could not keep at this size (:func:`layout_line`), when anything.

    Raises:
        ValueError: unknown figure name or suffix, or bad settings.
    """
    # The catalog imports every view and plot; ``python -m core`` builds its parser from this
    # module's settings on every call, so it is imported when an export runs.
    from core.views.catalog import get_figure

    path = Path(out)
    fmt = _check_format(path.suffix or "?", FIGURE_FORMATS + ("csv",))
    spec = get_figure(name)
    s = (settings or ExportSettings()).checked()
    fig, data = spec.build(store, selection)
    said: list[str] = []
    if fmt == "csv":
        blob = table_bytes(data, "csv", s.float_digits)
    else:
        meta = figure_meta(spec.title, selection.dataset, selection.runs)
        blob = figure_bytes(fig, fmt, s.for_figure(name), meta=meta, said=said)
    _write(path, blob)
    info = {
        "figure": name,
        "path": str(path),
        "format": fmt,
        "bytes": len(blob),
        "rows": int(len(data)),
    }
    if said:
        info["layout"] = layout_line(name, s, said)
    return info


def layout_line(name: str, settings: ExportSettings, said: Sequence[str]) -> str:
    """One line saying what a figure's layout could not keep at ``settings``' size.

    ``said`` is what :func:`figure_bytes` collected; the line names the nearest size that
    gives the figure more room (a page-wide preset for a column one).
    """
    size = settings.preset or f"{settings.width}x{settings.height} px"
    wider = {
        "acl-column": "acl-page",
        "ieee-column": "ieee-page",
        "neurips": "ieee-page",
        "acl-page": "ieee-page",
    }.get(settings.preset or "")
    hint = f"; try --preset {wider}" if wider else ""
    return f"{name} at {size}: {'; '.join(dict.fromkeys(said))}{hint}"


def export_table(
    store: Store,
    name: str,
    selection: Selection,
    out: str | Path,
    fmt: str | None = None,
    settings: ExportSettings | None = None,
    *,
    columns: list[str] | None = None,
    caption: str | None = None,
    label: str | None = None,
    csv_beside: bool = False,
) -> dict[str, Any]:
    """Build the registered table ``name`` and write it as CSV or LaTeX to ``out``.

    Args:
        store: the store.
        name: registered table name.
        selection: a :class:`core.selection.Selection`.
        out: output file.
        fmt: ``csv`` or ``latex``; None takes it from the suffix (``.tex`` = latex).
        settings: float digits come from here.
        columns: LaTeX columns (None: the table's default choice).
        caption: LaTeX caption (None: the table's title with the dataset and runs).
        label: LaTeX label (None: ``tab:<name>``).
        csv_beside: with LaTeX, also write every column at full precision to the same name
            with ``.csv``.

    Returns:
        ``{"table", "path", "format", "bytes", "rows"}``, and ``"csv"`` (its path) when one
        was written beside.
    """
    from core.views.catalog import get_table  # on use: see export_figure

    path = Path(out)
    f = _check_format(fmt if fmt is not None else (path.suffix or "?"), TABLE_FORMATS)
    spec = get_table(name)
    s = (settings or ExportSettings()).checked()
    df = spec.build(store, selection)
    if f == "csv":
        blob = table_bytes(df, f, s.float_digits)
    else:
        cap = table_caption(spec.title, selection.dataset, selection.runs)
        blob = table_bytes(
            df,
            f,
            s.float_digits,
            caption=cap if caption is None else caption,
            label=label,
            columns=columns,
            name=name,
        )
        blob = _table_provenance(store, name, spec, selection, path).encode("utf-8") + blob
    _write(path, blob)
    info = {"table": name, "path": str(path), "format": f, "bytes": len(blob), "rows": int(len(df))}
    if csv_beside and f == "latex":
        side = path.with_suffix(".csv")
        _write(side, table_csv(df, None).encode("utf-8"))
        info["csv"] = str(side)
    return info


def _table_provenance(store: Store, name: str, spec: Any, selection: Selection, path: Path) -> str:
    """The LaTeX table's provenance comment: store, runs, definition, the command."""
    from core.views.common import selected_runs  # on use, as the catalog (see export_figure)

    runs = selected_runs(store, selection)
    cmd = ["python -m core export table", name]
    if selection.dataset:
        cmd.append(f"--dataset {selection.dataset}")
    if selection.runs:
        cmd.append(f"--runs {','.join(selection.runs)}")
    cmd += [f"--score-field {selection.score_field}", f"--out {path.name}"]
    definition = getattr(spec, "reference", None) or getattr(spec, "description", "") or ""
    return provenance_comment(
        store, runs, f"table {name} ({spec.title})", definition, " ".join(cmd)
    )
