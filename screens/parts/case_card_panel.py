"""The Case view's case-card downloads (issue 19 item 5): LaTeX and PDF/SVG/PNG of one instance.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from core.export.case_card import CARD_SETTINGS, case_card_figure, case_card_latex
from core.export.render import figure_bytes, mime_type, start_renderer

__all__ = ["show_card_downloads"]


def _name(*parts: str) -> str:
    """A file name from ``parts`` with only letters, digits, ``-``, ``_`` and ``.``."""
    text = "-".join(parts)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]


def show_card_downloads(case: Mapping[str, Any], dataset: str, iid: str, score: str) -> None:
    """A "Case card" download menu: the card as LaTeX (booktabs) and as a figure."""
    base = _name("case", dataset, iid)

    def latex() -> bytes:
        return case_card_latex(case, score).encode("utf-8")

    def drawn(fmt: str) -> Any:
        def render() -> bytes:
            start_renderer()
            return figure_bytes(case_card_figure(case, score), fmt, CARD_SETTINGS)

        return render

    with st.popover(
        "Case card",
        icon=":material/download:",
        help="This instance for a paper: question, gold answer, the passages shown "
        "(gold or distractor), each condition's answer, citations (* gold) and "
        f"{score}. LaTeX needs booktabs and tabularx.",
    ):  # text: score
        cols = st.columns(4)
        cols[0].download_button(
            "LaTeX", latex, f"{base}.tex", "text/x-tex", key="case.card.tex", on_click="ignore"
        )
        for col, fmt in zip(cols[1:], ("pdf", "svg", "png"), strict=True):
            col.download_button(
                fmt.upper(),
                drawn(fmt),
                f"{base}.{fmt}",
                mime_type(fmt),  # text:
                key=f"case.card.{fmt}",
                on_click="ignore",
            )
        st.caption("Figures are drawn by a headless Chromium: the first one takes a few seconds.")
