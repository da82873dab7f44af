"""Runs: launch (keeps going while you browse), live progress, cancel, resume, import, delete."""

import streamlit as st

from core.engine_limits import TIMEOUT
from core.jobs import RunRequest, run_request_from_row, save_upload
from core.params import CONCURRENCY
from core.retrieval import RERANK, TOP_K, rerank_unavailable, retriever_param
from core.types import CONDITIONS
from core.views.case import md_escape
from pages.common import (
    cached_call,
    clear_caches,
    get_store,
    import_file,
    jobs,
    live_runs,
    sidebar,
    store_path,
)
from pages.widgets import param_widget

selection = sidebar("runs", filters=False)
st.title("Runs")
store = get_store()
datasets = cached_call("datasets")

with st.expander("Launch a run", expanded=not jobs().all()):
    with st.form("runs.launch"):
        c = st.columns(3)
        dataset = c[0].selectbox("Dataset", datasets)
        name = c[1].text_input("Run name", "my-run", help="An existing name resumes that run.")
        backend = c[2].selectbox("Backend", ("embedded", "ollama", "openai"))
        d = st.columns(4)
        model = d[0].text_input("Model", "", help="e.g. qwen2.5:14b; empty for the embedded reader")
        retriever = param_widget(retriever_param(), "runs.retriever", d[1], label="Retriever")
        top_k = param_widget(TOP_K, "runs.top_k", d[2], label="top-k")
        concurrency = param_widget(CONCURRENCY, "runs.concurrency", d[3], label="Concurrency")
        e = st.columns([1, 1, 2])
        no_rerank = rerank_unavailable()  # why no cross-encoder can be used, or None
        rerank = e[0].number_input(
            "Rerank N", min_value=1, value=None, step=1, placeholder="off", key="runs.rerank",
            disabled=no_rerank is not None, help=no_rerank or RERANK.help,
        )  # fmt: skip
        timeout = e[1].number_input(
            "Timeout (s)", min_value=0.1, value=None, step=10.0, placeholder="600",
            key="runs.timeout", help=TIMEOUT.help + " (--timeout)",
        )  # fmt: skip
        if no_rerank is not None:
            e[2].caption(md_escape(f"Rerank (CE@N→k) is off: {no_rerank}"))
        conditions = st.multiselect("Conditions", CONDITIONS, default=list(CONDITIONS))
        launch = st.form_submit_button("Launch", type="primary")
    if launch:
        try:
            req = RunRequest(store_path(), dataset or "", name, tuple(conditions), backend,
                             model or None, retriever, int(top_k), int(concurrency),
                             rerank=None if rerank is None else int(rerank),
                             timeout_s=None if timeout is None else float(timeout))  # fmt: skip
            jobs().start(req)
            st.toast(f"run {md_escape(name)} started")
        except ValueError as exc:
            st.error(md_escape(exc))


@st.fragment(run_every=1.5)
def _progress() -> None:
    active = jobs().all()
    if not active:
        st.caption("No run launched from this dashboard yet.")
    for run_id, job in active.items():
        with st.container(border=True):
            c = st.columns([3, 6, 1])
            c[0].markdown(f"**{md_escape(run_id)}** · {md_escape(job.request.backend)} · "
                          f"{md_escape(job.status())}")  # fmt: skip
            c[1].code(job.last_line() or "starting ...", language=None)
            if job.running and c[2].button("Cancel", key=f"runs.cancel.{run_id}"):
                job.cancel()
                st.rerun()
    # no cache clearing here: a running job's writes bump the store's data version, which
    # refreshes the views of its dataset only (core.views.store_version)


_progress()

st.subheader("Stored runs")
runs = live_runs()
first = ["run_id", "kind", "status", "n_planned", "n_done", "n_errors", "dataset_id", "backend",
         "model"]  # fmt: skip
hidden = ("options", "retrieval", "backend_info")
cols = [c for c in first if c in runs.columns] + [
    c for c in runs.columns if c not in first and c not in hidden
]
st.dataframe(runs[cols], hide_index=True, column_config={
    "status": st.column_config.TextColumn(
        "status", help="planned · running · done · partial (some calls failed) · failed (every "
        "call failed) · cancelled · interrupted (its process ended mid-run: Resume continues "
        "it)"),
    "n_errors": st.column_config.NumberColumn(
        "n_errors", help="Failed calls (errors, not answers: no scores, missing in every "
        "number). Resume makes them again."),
})  # fmt: skip
if not runs.empty:
    c = st.columns([3, 1, 1])
    pick = c[0].selectbox("Run", list(runs["run_id"]), key="runs.pick")
    if c[1].button("Resume", help="Start the run again: stored calls are skipped."):
        row = store.run_row(pick) or {}
        if row.get("status") == "running":  # its process holds the run's lock: it goes on
            st.warning(f"{md_escape(pick)} is running (its process holds the run); Resume is "
                       "for a run that stopped.")  # fmt: skip
        elif row.get("backend") in ("embedded", "ollama", "openai"):
            jobs().start(run_request_from_row(store_path(), row))
            st.rerun()
        else:
            st.warning(f"{md_escape(pick)} was imported ({md_escape(row.get('backend'))}); "
                       "there is nothing to resume.")  # fmt: skip
    if c[2].button("Delete", type="secondary"):
        st.session_state["runs.confirm_delete"] = pick
    if st.session_state.get("runs.confirm_delete") == pick:
        st.warning(f"Delete run {md_escape(pick)} with all its predictions and scores?")
        if st.button("Yes, delete", type="primary"):
            n = store.delete_run(pick)
            st.session_state["runs.confirm_delete"] = None
            clear_caches()
            st.success(f"deleted {md_escape(pick)} ({n} predictions)")

st.subheader("Import")
c = st.columns(3)
kind = c[0].selectbox("What", ("results: oncu-release", "dataset: hotpotqa", "dataset: 2wiki",
                               "dataset: oncu-jsonl", "dataset: jsonl"))  # fmt: skip
iname = c[1].text_input("Name in the store", "", key="runs.import_name")
replace = c[2].checkbox("Replace existing", key="runs.import_replace")
upload = st.file_uploader("File (written under data/uploads/)", key="runs.upload")
if done := st.session_state.pop("runs.imported", None):
    st.success(md_escape(done))
if upload is not None and st.button("Import", type="primary", disabled=not iname):
    try:
        path = save_upload(upload.name, upload.getvalue())
        st.session_state["runs.imported"] = import_file(kind, path, iname, replace)
    except ValueError as exc:
        st.error(md_escape(str(exc).splitlines()[0]))
    else:  # rerun so every list on the page (the launch form's datasets) shows the import
        clear_caches()
        st.rerun()
