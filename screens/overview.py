"""Overview: what is in the store, runs with progress, backend status, quick start."""

import streamlit as st

from screens.parts.common import backend_status, cached_call, get_store, sidebar, store_path
from screens.parts.markdown import md_escape

selection = sidebar("overview", filters=False)
st.title("Evidence-utilization diagnostics")
st.caption(
    "How much of the advantage that evidence makes possible does a model recover (ONCU), "
    "which evidence did it depend on (CUE-R), and where does it fail?"
)
info = cached_call("overview")
n_runs = len(info["runs"])
c = st.columns(4)
c[0].metric("Datasets", len(info["datasets"]))
c[1].metric("Runs", n_runs)
c[2].metric("Predictions", f"{info['n_predictions']:,}")
c[3].metric("Store", store_path().rsplit("/", 1)[-1], help=md_escape(info["path"]))

if info["empty"]:
    st.info("The store is empty. Quick start:")
    st.code(
        "python -m core generate controlled --preset controlled-200\n"
        "python -m core run --dataset controlled-200 --backend embedded "
        "--conditions no_evidence,full_context,retrieved,oracle --name demo-embedded\n"
        "# or import released outputs:\n"
        "python -m core import results --format oncu-release FILE.per_sample_metrics.csv "
        "--name NAME",
        language="bash",
    )
    st.page_link(
        "screens/runs.py", label="Launch a run or import a file", icon=":material/play_circle:"
    )

st.subheader("Datasets")
st.dataframe(info["datasets"], hide_index=True)

st.subheader("Runs")
runs = info["runs"].copy()
if not runs.empty:
    store = get_store()
    runs["status"] = [
        store.live_status(r, s) for r, s in zip(runs["run_id"], runs["status"], strict=True)
    ]
    runs["backend"] = [
        f"{b} (baseline)" if b == "embedded" else b for b in runs["backend"].astype(str)
    ]
st.dataframe(
    runs,
    hide_index=True,
    column_config={
        "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0),
    },
)
if not runs.empty and (runs["status"] == "running").any():
    st.caption("Runs in progress update when you reload; the Runs page shows live progress.")
if not runs.empty and runs["status"].isin(["interrupted", "partial", "failed"]).any():
    st.caption(
        "interrupted: its process ended before the run finished (resume it on the Runs page); "
        "partial: some calls failed (n_errors); failed: every call failed. Failed calls are "
        "errors, not answers: no scores, left out of every number as missing."
    )

st.subheader("Model backends")
b = st.columns(2)
with b[0]:
    st.markdown("**Embedded baseline reader** · always available")
    st.caption(
        "A deterministic extractive reader (BM25 over sentences, one bridge hop, typed span). "
        "It is a baseline, not a language model: use it to check the pipeline, not to rank models."
    )
with b[1]:
    for host in backend_status():
        if host.get("reachable"):
            models = ", ".join(host.get("models") or []) or "no models pulled"
            st.success(md_escape(f"Ollama {host.get('version') or ''} at {host['host']}: {models}"))
        else:
            st.warning(
                md_escape(
                    f"Ollama at {host['host']}: not reachable. {host.get('error') or ''}".strip()
                )
            )

st.subheader("Next steps")
n = st.columns(3)
n[0].page_link("screens/conditions.py", label="Conditions & ONCU", icon=":material/table_chart:")
n[1].page_link("screens/case_view.py", label="Browse a failure case", icon=":material/search:")
n[2].page_link("screens/runs.py", label="Run a model", icon=":material/play_circle:")
