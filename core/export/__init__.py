"""Files for papers: figures, tables, case cards, numbers, checked output paths.

One concept per module:

- :mod:`core.export.case_card`
- :mod:`core.export.fit`
- :mod:`core.export.numbers`
- :mod:`core.export.outpaths`
- :mod:`core.export.render`
- :mod:`core.export.tables`

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
        ("CheckResult", "PaperNumber", "check_paper", "collect_numbers", "macro_part",
         "numbers_json", "numbers_tex", "provenance_comment", "read_numbers", "tool_version"),
        "numbers",
    ),
    **dict.fromkeys(
        ("check_out_path", "staged_file"),
        "outpaths",
    ),
    **dict.fromkeys(
        ("DEFAULT_ASPECT", "ExportSettings", "FIGURE_ASPECT", "FIGURE_FORMATS", "FONT_FAMILY",
         "PRESETS", "Preset", "TABLE_FORMATS", "TEMPLATES", "export_figure", "export_table",
         "figure_bytes", "figure_meta", "latex_escape", "layout_line", "mime_type",
         "neutralize_frame", "preset_settings", "safe_csv_cell", "start_renderer",
         "style_figure", "table_bytes", "table_csv", "table_latex"),
        "render",
    ),
    **dict.fromkeys(
        ("DEFAULT_COLUMNS", "HEADERS", "MISSING", "csv_text", "header", "latex_table",
         "p_as_text", "table_caption", "table_file_stem"),
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
