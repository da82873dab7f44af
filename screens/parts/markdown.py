"""The one escaper of the dashboard: data enters Markdown only through md_escape / md_code.

The functions live in :mod:`core.views.markdown` (core code, the case card's Markdown, uses
them too, and core never imports screens); pages import them from here.
"""

from core.views.markdown import md_code, md_escape

__all__ = ["md_code", "md_escape"]
