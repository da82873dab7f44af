"""Agreement panels under a page's judged numbers (issue 20).

* :func:`show_judge_agreement`: on the Fan-in page (AuthTrace judges) and in the Retrieval
  page's CRUX section (CRUX judges) when two or more judge runs of one rubric judged the same
  run (or dataset): the table ``report agreement --judges`` prints
  (:func:`core.views.judged.judge_agreement_table`).
* :func:`show_human_agreement`: people's labels of a blind sample against the other raters
  (the rule labels, or the judge runs of a judge rubric), as ``report agreement --run R
  --rubric NAME`` gives it; on the Failure browser (failure taxonomy) and the Fan-in page
  (AuthTrace rubrics), only for runs with imported labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import streamlit as st

from core.store import Store
from core.views.judged import agreement_tables, annotated_runs, judge_agreement_table
from screens.parts.common import HELP, cached_call, get_store
from screens.parts.markdown import md_escape

__all__ = ["show_human_agreement", "show_judge_agreement"]


def show_judge_agreement(
    rubrics: Iterable[str], *, dataset: str | None, targets: Sequence[str] | None, key: str
) -> None:
    """The pairwise agreement table of the judge runs, or nothing with fewer than two."""
    try:
        table = judge_agreement_table(
            get_store(), cached_call("runs"), tuple(rubrics), dataset=dataset, targets=targets
        )
    except ValueError as exc:
        st.warning(f"Judge agreement: {md_escape(exc)}")
        return
    if table is None:
        return
    num = st.column_config.NumberColumn
    st.markdown("**Agreement between judge runs**", help=HELP["judge_agreement"])
    st.dataframe(
        table,
        key=key,
        hide_index=True,
        column_config={
            "judge_a": st.column_config.TextColumn("judge run A"),
            "judge_b": st.column_config.TextColumn("judge run B"),
            "n": num("n", help="Items both judges rated (failed calls left out)."),
            "raw_agreement": num("raw agreement", format="%.3f"),
            "kappa": num("Cohen's κ", format="%.3f"),
            "weighted_kappa": num("weighted κ (quadratic)", format="%.3f"),
            "note": st.column_config.TextColumn("note", help="Why a κ is empty."),
        },
    )


def show_human_agreement(store: Store, runs: Sequence[str], rubric: str, *, key: str) -> None:
    """One expander per run with people's labels under ``rubric``: ``report agreement``."""
    for run in annotated_runs(store, runs, rubric):
        with st.expander(f"Human labels and agreement: run {md_escape(run)} ({md_escape(rubric)})"):
            agree = agreement_tables(store, run, rubric)
            rep = agree["report"]
            raters = ", ".join(f"{r} ({n})" for r, n in rep["raters"].items())
            st.markdown(
                f"{rep['n_items']:,} sampled items; raters (items rated): {md_escape(raters)}",
                help=HELP["agreement"],
            )
            num = st.column_config.NumberColumn
            st.dataframe(
                agree["pairs"],
                key=f"{key}.agreement.{run}.{rubric}",
                hide_index=True,
                column_config={
                    "n": num("n", help="Items both raters labelled."),
                    "agreed": num("agreed", help="Items with the same label from both."),
                    "raw_agreement": num("raw agreement", format="%.3f", help="agreed / n"),
                    "kappa": num("Cohen's κ", format="%.3f", help=HELP["agreement"]),
                    "kappa_note": st.column_config.TextColumn("note", help="Why κ is undefined."),
                },
            )
            for (a, b), table in agree["confusion"].items():
                if table is not None:
                    st.caption(f"Confusion: rows {md_escape(a)}, columns {md_escape(b)}")
                    st.dataframe(table, key=f"{key}.confusion.{run}.{rubric}.{a}.{b}")
            multi = rep["all_raters"]
            if multi is not None:
                fk, ka = multi["fleiss_kappa"], multi["krippendorff_alpha"]
                notes = "".join(f"; {x}" for x in (multi["fleiss_note"], multi["alpha_note"]) if x)
                st.caption(
                    f"All {len(multi['raters'])} raters, n {multi['n']}: Fleiss' κ "  # text:
                    f"{'n/a' if fk is None else f'{fk:.3f}'}, Krippendorff's α "
                    f"({multi['alpha_level']}) {'n/a' if ka is None else f'{ka:.3f}'}"
                    + md_escape(notes)
                )
