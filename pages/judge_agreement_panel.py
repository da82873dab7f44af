"""Agreement of judge runs that rated the same things, under a page's judged numbers (issue 20).

Shown on the Fan-in page (AuthTrace judges) and in the Retrieval page's CRUX section (CRUX
judges) when two or more judge runs of one rubric judged the same run (or dataset): the table
``report agreement --judges`` prints (:func:`core.views.judged.judge_agreement_table`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import streamlit as st

from core.views.judged import judge_agreement_table
from pages.common import HELP, cached_call, get_store, md_escape

__all__ = ["show_judge_agreement"]


def show_judge_agreement(
    rubrics: Iterable[str], *, dataset: str | None, targets: Sequence[str] | None, key: str
) -> None:
    """The pairwise agreement table of the judge runs, or nothing with fewer than two."""
    try:
        table = judge_agreement_table(get_store(), cached_call("runs"), tuple(rubrics),
                                      dataset=dataset, targets=targets)  # fmt: skip
    except ValueError as exc:
        st.warning(f"Judge agreement: {md_escape(exc)}")
        return
    if table is None:
        return
    num = st.column_config.NumberColumn
    st.markdown("**Agreement between judge runs**", help=HELP["judge_agreement"])
    st.dataframe(table, key=key, hide_index=True, column_config={
        "judge_a": st.column_config.TextColumn("judge run A"),
        "judge_b": st.column_config.TextColumn("judge run B"),
        "n": num("n", help="Items both judges rated (failed calls left out)."),
        "raw_agreement": num("raw agreement", format="%.3f"),
        "kappa": num("Cohen's κ", format="%.3f"),
        "weighted_kappa": num("weighted κ (quadratic)", format="%.3f"),
        "note": st.column_config.TextColumn("note", help="Why a κ is empty."),
    })  # fmt: skip
