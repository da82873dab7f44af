"""Files for papers: figures, tables, case cards, numbers, checked output paths.

One concept per module:

- :mod:`core.export.case_card`: the case card: one instance for a paper, as LaTeX and as a figure
  (issue 19 item 5);
- :mod:`core.export.fit`: fit a figure to a printed size: no text outside the page, no text over
  text (issue 19);
- :mod:`core.export.numbers`: numbers with provenance: one LaTeX macro per headline number, and a
  paper that checks itself;
- :mod:`core.export.outpaths`: output files of the commands that write one (exports, samples, batch
  files): checked first;
- :mod:`core.export.render`: publication export: figures to PNG / SVG / PDF at a set size, tables to
  CSV / LaTeX (booktabs);
- :mod:`core.export.tables`: table export: CSV for data, LaTeX (booktabs) a paper can use as it is;
- :mod:`core.export.text_boxes`: text measured as a figure draws it: widths in the embedded font,
  wrapping, SVG text boxes.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        ("CARD_SETTINGS", "CONDITION_ORDER", "card_rows", "case_card_figure", "case_card_latex"),
        "case_card",
    ),
    **dict.fromkeys(
        ("TextBox", "fit_figure", "layout_problems", "svg_text_boxes", "text_width", "wrap_text"),
        "fit",
    ),
    **dict.fromkeys(
        (
            "CheckResult",
            "PaperNumber",
            "check_paper",
            "collect_numbers",
            "macro_part",
            "numbers_json",
            "numbers_tex",
            "provenance_comment",
            "read_numbers",
            "tool_version",
        ),
        "numbers",
    ),
    **dict.fromkeys(
        ("check_out_path", "staged_file"),
        "outpaths",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_ASPECT",
            "ExportSettings",
            "FIGURE_ASPECT",
            "FIGURE_FORMATS",
            "FONT_FAMILY",
            "PRESETS",
            "Preset",
            "TABLE_FORMATS",
            "TEMPLATES",
            "export_figure",
            "export_table",
            "figure_bytes",
            "figure_meta",
            "latex_escape",
            "layout_line",
            "mime_type",
            "neutralize_frame",
            "preset_settings",
            "safe_csv_cell",
            "start_renderer",
            "style_figure",
            "table_bytes",
            "table_csv",
            "table_latex",
        ),
        "render",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_COLUMNS",
            "HEADERS",
            "MISSING",
            "csv_text",
            "header",
            "latex_table",
            "p_as_text",
            "table_caption",
            "table_file_stem",
        ),
        "tables",
    ),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
