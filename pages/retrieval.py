"""Retrieval: retriever family x top-k recall, chain coverage, distractor rate; CRUX views."""

import streamlit as st

from core.catalog import figure_names, table_names
from core.figures.fanin import CRUX_K_REQUIRED, ETA
from core.figures.retrieval import OFFERED_KS
from core.retrieval import list_retrievers
from pages.common import HELP, cached_call, show_figure, show_table, sidebar, with_options
from pages.dense_progress import embeddings_ready
from pages.widgets import param_widget

selection = sidebar("retrieval", runs=False)
st.title("Retrieval")
c = st.columns(2)
retrievers = c[0].multiselect(
    "Retriever families", list_retrievers(), key="retrieval.retrievers",
    help="dense and hybrid embed every question and chunk with all-MiniLM-L6-v2 once (with "
    "progress; the vectors are kept in the store and reused), then rank in seconds.",
)  # fmt: skip
ks = c[1].multiselect("top-k", list(OFFERED_KS), key="retrieval.ks")
if not selection.dataset:
    st.info("Choose a dataset in the sidebar.")
elif retrievers and ks:
    sel = with_options(selection, retrievers=sorted(retrievers), ks=sorted(ks))
    if embeddings_ready(sel):
        with st.spinner("Ranking chunks ..."):
            show_figure("retrieval_curves", sel, drill=False)
            show_table("retrieval_grid", sel)
has_crux = "crux_coverage" in figure_names() or "crux_table" in table_names()
if has_crux and st.toggle("CRUX: coverage, ranked coverage, density", key="retrieval.crux",
                          help="Computed over every instance of the dataset on demand."):
    judges = cached_call("crux_judges", dataset=selection.dataset) if selection.dataset else []
    if judges:
        judge = st.selectbox("CRUX ratings", judges, key="retrieval.crux_judge",
                             help=HELP["crux_judge"])  # fmt: skip
        selection = with_options(selection, judge=judge)
    e = st.columns(2)
    selection = with_options(
        selection,
        eta=param_widget(ETA, "retrieval.crux_eta", e[0], label="CRUX answerability threshold η"),
        crux_k_required=param_widget(CRUX_K_REQUIRED, "retrieval.crux_k_required", e[1],
                                     label="Also k = |Z*| (size of the required subset)"),
    )  # fmt: skip
    if "crux_coverage" in figure_names():
        show_figure("crux_coverage", selection, drill=False)
    if "crux_table" in table_names():
        show_table("crux_table", selection)
