"""Retrieval: retriever family x top-k recall, chain coverage, distractor rate; CRUX views."""

import streamlit as st

from core.figures.fanin import CRUX_K_REQUIRED, ETA
from core.figures.retrieval import OFFERED_KS, missing_note
from core.retrieval.retrievers import list_retrievers
from core.views import selection_to_json
from core.views.catalog import figure_names, table_names
from core.views.judged import CRUX_COVERAGE_RUBRIC, METRIC_NAMES, crux_answer_tables, has_judge_runs
from screens.parts.common import HELP, cached_call, get_store, sidebar
from screens.parts.dense_progress import embeddings_ready
from screens.parts.display import show_figure, show_table, with_options
from screens.parts.judge_agreement_panel import show_human_agreement, show_judge_agreement
from screens.parts.markdown import md_escape
from screens.parts.widgets import param_widget

selection = sidebar("retrieval", runs=False)
st.title("Retrieval")
c = st.columns(2)
retrievers = c[0].multiselect(
    "Retriever families",
    list_retrievers(),
    key="retrieval.retrievers",
    help="dense and hybrid embed every question and chunk with all-MiniLM-L6-v2 once (with "
    "progress; the vectors are kept in the store and reused), then rank in seconds.",
)
ks = c[1].multiselect("top-k", list(OFFERED_KS), key="retrieval.ks")
if not selection.dataset:
    st.info("Choose a dataset in the sidebar.")
elif retrievers and ks:
    sel = with_options(selection, retrievers=sorted(retrievers), ks=sorted(ks))
    if embeddings_ready(sel):
        with st.spinner("Ranking chunks ..."):
            try:  # instances without passage text (imported results): said, with the count
                note = missing_note(
                    cached_call("table", name="retrieval_grid", sel=selection_to_json(sel))
                )
            except ValueError:  # said by the figure below
                note = None
            if note:
                st.warning(f"Missing: {md_escape(note)}")
            show_figure("retrieval_curves", sel, drill=False)
            show_table("retrieval_grid", sel)
has_crux = "crux_coverage" in figure_names() or "crux_table" in table_names()
if has_crux and st.toggle(
    "CRUX: coverage, ranked coverage, density",
    key="retrieval.crux",
    help="Computed over every instance of the dataset on demand.",
):
    judges = cached_call("crux_judges", dataset=selection.dataset) if selection.dataset else []
    if judges:
        judge = st.selectbox(
            "CRUX ratings", judges, key="retrieval.crux_judge", help=HELP["crux_judge"]
        )
        selection = with_options(selection, judge=judge)
    e = st.columns(2)
    selection = with_options(
        selection,
        eta=param_widget(ETA, "retrieval.crux_eta", e[0], label="CRUX answerability threshold η"),
        crux_k_required=param_widget(
            CRUX_K_REQUIRED,
            "retrieval.crux_k_required",
            e[1],
            label="Also k = |Z*| (size of the required subset)",
        ),
    )
    if "crux_coverage" in figure_names():
        show_figure("crux_coverage", selection, drill=False)
    if "crux_table" in table_names():
        show_table("crux_table", selection)
    # Cov(y) / Den(y) of generated answers (issue 20): only when crux-coverage judge runs
    # exist for the dataset (a check on the runs frame the sidebar already holds).
    if selection.dataset and has_judge_runs(
        cached_call("runs"), (CRUX_COVERAGE_RUBRIC,), dataset=selection.dataset
    ):
        try:
            answers = crux_answer_tables(get_store(), selection)
        except ValueError as exc:
            st.warning(f"Answer coverage: {md_escape(exc)}")
            answers = None
        if answers is not None:
            st.subheader(
                "Answer coverage Cov(y), Den(y) and Kendall τ-b (CRUX Table 3)",
                help=HELP["crux_answers"],
            )
            judges = "; ".join(f"{r} = {m}" for r, m in answers["judges"].items())
            st.caption(
                f"η = {answers['eta']:g}; coverage judges: {md_escape(judges)}. "
                + md_escape(" ".join(answers["notes"]))
            )
            num = st.column_config.NumberColumn
            st.dataframe(
                answers["pipelines"],
                key="retrieval.crux_answers",
                hide_index=True,
                column_config={
                    "judge_run": st.column_config.TextColumn("judge run"),
                    "n": num("n", help="Answers scored."),
                    "n_unscored": num(
                        "unscored",
                        help="Answers with a sub-question of Q_ans not "
                        "rated (a failed judge call): left out of the means.",
                    ),
                    "cov_y": num("Cov(y)", format="%.3f", help=HELP["crux_answers"]),
                    "den_y": num("Den(y)", format="%.3f", help=HELP["crux_answers"]),
                    **{m: num(METRIC_NAMES[m], format="%.3f") for m in METRIC_NAMES},
                },
            )
            st.markdown(
                "**Kendall τ-b with Cov(y)** (Den(Z) with Den(y)); n: points per cell",
                help=HELP["crux_answers"],
            )
            st.dataframe(
                answers["kendall"],
                key="retrieval.crux_kendall",
                hide_index=True,
                column_config={
                    **{m: num(METRIC_NAMES[m], format="%.3f") for m in METRIC_NAMES},
                    **{f"{m}_n": num(f"{METRIC_NAMES[m]} n") for m in METRIC_NAMES},
                },
            )
        show_judge_agreement(
            (CRUX_COVERAGE_RUBRIC, "crux-answerability"),
            dataset=selection.dataset,
            targets=None,
            key="retrieval.judge_agreement",
        )
        # people's labels against the CRUX judges (annotate export --rubric crux-coverage |
        # crux-answerability): runs of the dataset with labels, judge runs included
        frame = cached_call("runs")
        dataset_runs = list(frame.loc[frame["dataset_id"] == selection.dataset, "run_id"])
        for rubric in (CRUX_COVERAGE_RUBRIC, "crux-answerability"):
            show_human_agreement(get_store(), dataset_runs, rubric, key="retrieval")
