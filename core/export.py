"""Publication export: figures to PNG / SVG / PDF at a set size, tables to CSV / LaTeX (booktabs).

The dashboard's download menus and ``python -m core export`` call the same functions, so a
figure on a page and the file in a paper are built by the same registered view and plot
(:mod:`core.catalog`). Static images come from kaleido 1.x driving the system Chromium
(Debian package ``chromium``; ``python -m core setup`` installs it when missing).
"""

from __future__ import annotations

import copy
import io
import math
import re
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from core.selection import Selection
from core.store import Store

__all__ = [
    "FIGURE_FORMATS",
    "TABLE_FORMATS",
    "TEMPLATES",
    "ExportSettings",
    "export_figure",
    "export_table",
    "figure_bytes",
    "latex_escape",
    "mime_type",
    "neutralize_frame",
    "safe_csv_cell",
    "start_renderer",
    "style_figure",
    "table_bytes",
    "table_csv",
    "table_latex",
    "with_size",
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
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Publication size and style, chosen once in the dashboard's settings.

    Attributes:
        width: figure width in CSS pixels (the layout size).
        height: figure height in CSS pixels.
        font_size: base font size in points of the layout.
        template: a plotly template name (one of :data:`TEMPLATES`).
        scale: raster multiplier for PNG: the PNG is ``width*scale`` x ``height*scale`` pixels
            (vector formats keep the layout size).
        float_digits: decimals of floats in CSV / LaTeX tables.
    """

    width: int = 700
    height: int = 450
    font_size: int = 14
    template: str = "simple_white"
    scale: float = 2.0
    float_digits: int = 3

    def checked(self) -> ExportSettings:
        """The settings unchanged, or ValueError naming the bad value and the allowed ones."""
        for name, lo, hi in (("width", 100, 5000), ("height", 100, 5000), ("font_size", 4, 72)):
            value = getattr(self, name)
            if not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} {value!r} must be an integer in [{lo}, {hi}]")
        if self.template not in TEMPLATES:
            raise ValueError(f"unknown template {self.template!r}; choose one of: "
                             f"{', '.join(TEMPLATES)}")  # fmt: skip
        if not (isinstance(self.scale, int | float) and 0.25 <= float(self.scale) <= 8):
            raise ValueError(f"scale {self.scale!r} must be a number in [0.25, 8]")
        if not isinstance(self.float_digits, int) or not 0 <= self.float_digits <= 10:
            raise ValueError(f"float_digits {self.float_digits!r} must be an integer in [0, 10]")
        return self


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
def style_figure(fig: Any, settings: ExportSettings | None = None) -> Any:
    """A copy of ``fig`` laid out at the publication size, font and template.

    The page shows the builder's figure as is (responsive width); exports use this copy.
    """
    s = (settings or ExportSettings()).checked()
    out = go.Figure(copy.deepcopy(fig.to_dict()))
    out.update_layout(
        template=pio.templates[s.template],
        width=s.width,
        height=s.height,
        font={"size": s.font_size},
        autosize=False,
    )
    return out


_RENDERER_LOCK = threading.Lock()
_RENDERER_STARTED = False


def start_renderer() -> bool:
    """Keep one Chromium running for exports (each later export takes ~0.1 s instead of ~2 s).

    Safe to call many times; returns True when the persistent renderer is (now) running and
    False when kaleido could not start it (exports then start a browser per call).
    """
    global _RENDERER_STARTED
    with _RENDERER_LOCK:
        if _RENDERER_STARTED:
            return True
        try:
            import kaleido  # on first export: it starts a browser and is slow to import

            kaleido.start_sync_server(silence_warnings=True)
        except Exception:  # noqa: BLE001 - a missing browser surfaces on the export itself
            return False
        _RENDERER_STARTED = True
        return True


def figure_bytes(fig: Any, fmt: str, settings: ExportSettings | None = None) -> bytes:
    """Render ``fig`` to PNG / SVG / PDF bytes at the settings' size.

    Raises:
        ValueError: unknown format or bad settings.
        RuntimeError: no Chromium for kaleido (message says how to install it).
    """
    f = _check_format(fmt, FIGURE_FORMATS)
    s = (settings or ExportSettings()).checked()
    styled = style_figure(fig, s)
    scale = float(s.scale) if f == "png" else 1.0
    try:
        with warnings.catch_warnings():
            # plotly passes kaleido options that a running renderer ignores; harmless
            warnings.simplefilter("ignore", UserWarning)
            return styled.to_image(format=f, width=s.width, height=s.height, scale=scale)
    except (RuntimeError, OSError, ValueError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "chrom" in text.lower() or "browser" in text.lower():
            raise RuntimeError(
                f"static export needs Chromium: {text} (run: python -m core setup)"
            ) from exc
        raise


# ------------------------------------------------------------------------------- tables
def _cell(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.{digits}f}"
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        try:
            return _cell(value.item(), digits)
        except (ValueError, AttributeError):
            pass
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_cell(v, digits)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "; ".join(_cell(v, digits) for v in value)
    if value is pd.NA or value is pd.NaT:
        return ""
    return str(value)


def _plain_frame(df: pd.DataFrame, digits: int) -> pd.DataFrame:
    return pd.DataFrame(
        {str(c): [_cell(v, digits) for v in df[c].tolist()] for c in df.columns},
        columns=[str(c) for c in df.columns],
    )


#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")
#: A plain decimal number (sign, digits, point, exponent): left as it is, e.g. ``-0.25``.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_csv_cell(text: str) -> str:
    """``text`` made safe to open in a spreadsheet: ``'`` before a formula-leading cell.

    A cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
    formula by Excel, LibreOffice and Google Sheets (a model name ``=HYPERLINK(...)`` from an
    imported file would become a live link), so it gets a leading ``'``; a plain number such as
    ``-0.25`` or ``+1e-3`` is left as it is.

    Args:
        text: one cell as written.

    Returns:
        ``text``, or ``"'" + text`` when it starts like a formula and is not a number.
    """
    if text.startswith(_FORMULA_LEAD) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def neutralize_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of a text frame with :func:`safe_csv_cell` on every cell and column name.

    The frame is :func:`_plain_frame`'s (text cells).
    """
    out = df.map(lambda v: safe_csv_cell(v) if isinstance(v, str) else v)
    out.columns = [safe_csv_cell(str(c)) for c in df.columns]
    return out


def table_csv(df: pd.DataFrame, digits: int = 3) -> str:
    """CSV text of a table: floats rounded to ``digits``, NaN empty, lists ``;``-joined.

    Every cell and column name that would start a spreadsheet formula gets a leading ``'``
    (:func:`safe_csv_cell`); numbers are written as they are.
    """
    buf = io.StringIO()
    neutralize_frame(_plain_frame(df, digits)).to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in ``text``."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def table_latex(
    df: pd.DataFrame, digits: int = 3, caption: str | None = None, label: str | None = None
) -> str:
    r"""A LaTeX ``tabular`` with booktabs rules (``\toprule``, ``\midrule``, ``\bottomrule``).

    Numeric columns are right-aligned, others left-aligned; cells are escaped. With a caption
    or label the tabular is wrapped in a ``table`` float. Needs ``\usepackage{booktabs}``.
    """
    plain = _plain_frame(df, digits)
    align = "".join(
        "r" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        else "l"
        for c in df.columns
    )  # fmt: skip
    lines = [f"\\begin{{tabular}}{{{align or 'l'}}}", "\\toprule"]
    lines.append(" & ".join(latex_escape(c) for c in plain.columns) + r" \\")
    lines.append("\\midrule")
    for row in plain.itertuples(index=False):
        lines.append(" & ".join(latex_escape(v) for v in row) + r" \\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    if caption is None and label is None:
        return "\n".join(lines) + "\n"
    wrapped = ["\\begin{table}[t]", "\\centering"]
    if caption is not None:
        wrapped.append(f"\\caption{{{latex_escape(caption)}}}")
    if label is not None:
        wrapped.append(f"\\label{{{label}}}")
    return "\n".join(wrapped + lines + ["\\end{table}"]) + "\n"


def table_bytes(
    df: pd.DataFrame, fmt: str, digits: int = 3, caption: str | None = None
) -> bytes:
    """A table as UTF-8 CSV or LaTeX bytes (``fmt`` ``csv`` or ``latex``)."""
    f = _check_format(fmt, TABLE_FORMATS)
    text = table_csv(df, digits) if f == "csv" else table_latex(df, digits, caption=caption)
    return text.encode("utf-8")


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
        ``{"figure", "path", "format", "bytes", "rows"}``.

    Raises:
        ValueError: unknown figure name or suffix, or bad settings.
    """
    # The catalog imports every view and plot; ``python -m core`` builds its parser from this
    # module's settings on every call, so it is imported when an export runs.
    from core.catalog import get_figure

    path = Path(out)
    fmt = _check_format(path.suffix or "?", FIGURE_FORMATS + ("csv",))
    spec = get_figure(name)
    s = (settings or ExportSettings()).checked()
    fig, data = spec.build(store, selection)
    blob = table_bytes(data, "csv", s.float_digits) if fmt == "csv" else figure_bytes(fig, fmt, s)
    _write(path, blob)
    return {"figure": name, "path": str(path), "format": fmt, "bytes": len(blob),
            "rows": int(len(data))}  # fmt: skip


def export_table(
    store: Store,
    name: str,
    selection: Selection,
    out: str | Path,
    fmt: str | None = None,
    settings: ExportSettings | None = None,
) -> dict[str, Any]:
    """Build the registered table ``name`` and write it as CSV or LaTeX to ``out``.

    Args:
        store: the store.
        name: registered table name.
        selection: a :class:`core.selection.Selection`.
        out: output file.
        fmt: ``csv`` or ``latex``; None takes it from the suffix (``.tex`` = latex).
        settings: float digits come from here.

    Returns:
        ``{"table", "path", "format", "bytes", "rows"}``.
    """
    from core.catalog import get_table  # on use: see export_figure

    path = Path(out)
    f = _check_format(fmt if fmt is not None else (path.suffix or "?"), TABLE_FORMATS)
    spec = get_table(name)
    s = (settings or ExportSettings()).checked()
    df = spec.build(store, selection)
    blob = table_bytes(df, f, s.float_digits, caption=spec.title)
    _write(path, blob)
    return {"table": name, "path": str(path), "format": f, "bytes": len(blob),
            "rows": int(len(df))}  # fmt: skip


def with_size(settings: ExportSettings, **changes: Any) -> ExportSettings:
    """A checked copy of ``settings`` with ``changes`` applied."""
    return replace(settings, **changes).checked()
