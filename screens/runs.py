"""Runs: launch every method (keeps going while you browse), preflight, live progress, cancel,
resume, import, delete."""

import shlex

import streamlit as st

from core.backends.preflight import preflight
from core.datasets.release_files import group_release_files
from core.execution.jobs import (
    JUDGE_METHODS,
    METHODS,
    MethodRequest,
    RunRequest,
    command_for,
    longest_prompt_chars,
    run_request_from_row,
    save_upload,
)
from core.execution.limits import MAX_SERVER_CONCURRENCY, TIMEOUT
from core.params import CONCURRENCY
from core.retrieval.retrievers import RERANK, TOP_K, rerank_unavailable, retriever_param
from core.types import CONDITIONS
from screens.parts.common import (
    cached_call,
    clear_caches,
    get_store,
    import_file,
    jobs,
    live_runs,
    sidebar,
    store_path,
)
from screens.parts.markdown import md_escape
from screens.parts.widgets import method_widgets, param_widget

selection = sidebar("runs", filters=False)
st.title("Runs")
store = get_store()
datasets = cached_call("datasets")
LABELS = {"conditions": "four conditions", **METHODS, **JUDGE_METHODS}


def launch_checked(req, anyway: bool) -> bool:
    """The backend preflight of ``req``: its problems shown; True when the launch may go."""
    command_for(req)  # a bad value: ValueError, one line, before any server is asked
    if req.backend == "embedded" or req.kind == "fanin-grid":
        return True
    if req.dataset not in datasets:
        raise ValueError(f"no dataset named {req.dataset!r} in {store_path()}")
    chars = longest_prompt_chars(store.load_instances(req.dataset), req)
    ctx = getattr(req, "params", {}).get("num_ctx")
    problems = preflight(
        req.backend,
        req.model,
        hosts=req.hosts,
        base_url=req.base_url,
        prompt_chars=chars,
        num_ctx=ctx,
    )
    stop = [p for p in problems if p.check != "context" or not anyway]
    for p in problems:
        (st.error if p in stop else st.warning)(md_escape(f"preflight: {p}"))
    if not problems:
        st.success(
            md_escape(
                f"preflight: {req.backend} answers and serves {req.model}; the "
                f"longest prompt ({chars:,} characters) fits"
            )
        )
    return not stop


def _checked(errors: list[str], param, key: str, container, **kw):
    """:func:`screens.parts.widgets.param_widget`, a refused value appended to ``errors`` (None)."""
    try:
        return param_widget(param, key, container, **kw)
    except ValueError as exc:
        errors.append(str(exc))
        return None


with st.expander("Launch a run", expanded=not jobs().all()):
    kind = st.selectbox(
        "Method",
        list(LABELS),
        format_func=LABELS.get,
        key="runs.method",
        help="What to launch; each has the same parameters, defaults and help as its command "
        "(`python -m core run`, `run-interventions`, `run-probes`, `generate controlled "
        "--preset fanin-grid`, `judge crux`, `judge RUBRIC` for a judge run).",
    )
    # Enter in a field never submits: a launch takes exactly what is on screen at the click
    with st.form("runs.launch", enter_to_submit=False):
        c = st.columns(3)
        grid = kind == "fanin-grid"
        dataset = "" if grid else c[0].selectbox("Dataset", datasets)
        name = (
            ""
            if kind == "judge"
            else c[1].text_input(  # the judge's name is a knob
                "Dataset name" if grid else "Run name",
                "fanin-grid" if grid else "my-run",
                key=f"runs.name.{kind}",
                help="The new dataset's name" if grid else "An existing name resumes that run.",
            )
        )
        backend = (
            "embedded" if grid else c[2].selectbox("Backend", ("embedded", "ollama", "openai"))
        )
        d = st.columns(4)
        errors: list[str] = []  # refused values: one line each when Launch is clicked
        model = url = ""
        concurrency, timeout = CONCURRENCY.default, None
        if not grid:
            model = d[0].text_input(
                "Model", "", help="e.g. qwen2.5:14b; empty for the embedded reader"
            )
            url = d[1].text_input(
                "Server URL",
                "",
                key="runs.url",
                placeholder="default",
                help="Ollama host (default $OLLAMA_HOST) or OpenAI-compatible "
                "base URL (default $OPENAI_BASE_URL)",
            )
            if kind != "judge":  # judge crux makes one call at a time
                concurrency = _checked(
                    errors,
                    CONCURRENCY,
                    f"runs.concurrency.{kind}",
                    d[2],
                    label="Concurrency",
                    maximum=MAX_SERVER_CONCURRENCY,
                )
            timeout = _checked(errors, TIMEOUT, "runs.timeout", d[3], label="Timeout (s)")
        target = None
        if kind in JUDGE_METHODS and kind != "judge-crux-answerability":
            runs = cached_call("runs")
            ok = runs["kind"] != "judge" if "kind" in runs.columns else runs.index == runs.index
            judged = sorted(runs.loc[ok, "run_id"]) if len(runs) else []
            target = st.selectbox(
                "Judged run",
                judged,
                key=f"runs.target.{kind}",
                help="The run whose answers are judged (--run).",
            )
        if kind == "conditions":
            e = st.columns([1, 1, 1, 2])
            retriever = param_widget(retriever_param(), "runs.retriever", e[0], label="Retriever")
            top_k = _checked(errors, TOP_K, "runs.top_k", e[1], label="top-k")
            no_rerank = rerank_unavailable()  # why no cross-encoder can be used, or None
            rerank = e[2].number_input(
                "Rerank N",
                min_value=1,
                value=None,
                step=1,
                placeholder="off",
                key="runs.rerank",
                disabled=no_rerank is not None,
                help=md_escape(no_rerank or RERANK.help),
            )
            if no_rerank is not None:
                e[3].caption(md_escape(f"Rerank (CE@N→k) is off: {no_rerank}"))
            conditions = st.multiselect("Conditions", CONDITIONS, default=list(CONDITIONS))
        else:
            params = method_widgets(kind, f"runs.{kind}", errors)
        anyway = st.checkbox(
            "Override the context check",
            key="runs.anyway",
            help="Overrides the preflight's context check only; an unreachable "
            "server or a missing model always stops the launch.",
        )
        launch = st.form_submit_button("Launch", type="primary")
    if launch:
        try:
            for err in errors:
                raise ValueError(err)
            hosts = (url,) if url and backend == "ollama" else ()
            base_url = url if url and backend == "openai" else None
            if kind == "conditions":
                req = RunRequest(
                    store_path(),
                    dataset or "",
                    name,
                    tuple(conditions),
                    backend,
                    model or None,
                    retriever,
                    int(top_k),
                    int(concurrency),
                    hosts,
                    base_url,
                    rerank=None if rerank is None else int(rerank),
                    timeout_s=None if timeout is None else float(timeout),
                )
            else:
                label = f"judge {params.get('judge') or dataset}" if kind == "judge" else name
                req = MethodRequest(
                    kind,
                    store_path(),
                    dataset or "",
                    label,
                    backend,
                    model or None,
                    hosts,
                    base_url,
                    int(concurrency),
                    None if timeout is None else float(timeout),
                    params,
                    target_run=target,
                )
            if launch_checked(req, anyway):
                jobs().start(req)
                st.toast(f"{md_escape(LABELS[kind])} {md_escape(req.name)} started")
        except ValueError as exc:
            st.error(md_escape((str(exc).splitlines() or ["error"])[0]))


def _running() -> frozenset:
    return frozenset(n for n, j in jobs().all().items() if j.running)


@st.fragment(run_every=1.5)
def _progress() -> None:
    active = jobs().all()
    if not active:
        st.caption("No run launched from this dashboard yet.")
    for run_id, job in active.items():
        with st.container(border=True, key=f"runs.job.{run_id}"):
            c = st.columns([3, 6, 1])
            what = LABELS[job.request.kind]
            head = f"{md_escape(job.request.backend)} · {md_escape(job.status())}"
            c[0].markdown(f"**{md_escape(run_id)}** · {head} · {md_escape(what)}")
            p = job.progress()
            if p is not None:
                unit = "judgments" if job.request.kind in JUDGE_METHODS else "calls"
                eta = f" · ETA {md_escape(p.eta)}" if job.running else ""  # none when stopped
                text = f"{p.done:,}/{p.total:,} {unit}{eta} · {p.errors:,} errors"
                c[1].progress(p.fraction, text=text)
            elif job.running:  # the child is starting (imports, planning): no count yet
                c[1].progress(0.0, text="starting ...")
            c[1].code(job.last_line() or "starting ...", language=None)
            c[1].caption("Launched as (the run stores these settings):")
            c[1].code(shlex.join(command_for(job.request)), language="bash", wrap_lines=True)
            if job.running and c[2].button("Cancel", key=f"runs.cancel.{run_id}"):
                job.cancel()
                st.rerun()
            again = job.status() in ("cancelled", "failed") and job.request.kind != "fanin-grid"
            if again and c[2].button(
                "Resume job",
                key=f"runs.resume.{run_id}",
                help="Start it again: stored calls are skipped.",
            ):
                try:
                    jobs().start(job.request)
                except ValueError as exc:
                    st.warning(md_escape(exc))
                st.rerun()
    # no cache clearing here: a running job's writes bump the store's data version, which
    # refreshes the views of its dataset only (core.views.store_version). When a job ends,
    # the whole page runs once more, so the runs table shows its final status and counts.
    running = _running()
    if st.session_state.get("runs.running", frozenset()) - running:
        st.session_state["runs.running"] = running
        st.rerun(scope="app")
    st.session_state["runs.running"] = running


_progress()

st.subheader("Stored runs")
first = [
    "run_id",
    "kind",
    "status",
    "n_planned",
    "n_done",
    "n_errors",
    "dataset_id",
    "backend",
    "model",
]
hidden = ("options", "retrieval", "backend_info")


@st.fragment(run_every=1.5 if _running() else None)
def _runs_table() -> None:
    runs = live_runs()
    cols = [c for c in first if c in runs.columns] + [
        c for c in runs.columns if c not in first and c not in hidden
    ]
    st.dataframe(
        runs[cols],
        hide_index=True,
        key="runs.table",
        column_config={
            "kind": st.column_config.TextColumn(
                "kind",
                help="What the run is: conditions (the four conditions), interventions "
                "(CUE-R), probes (DOLCE), judge, imported (released outputs), rerun (Case view)",
            ),
            "status": st.column_config.TextColumn(
                "status",
                help="planned · running · waiting (its calls were exported by `batch "
                "export`; `batch import` stores the answers) · done · partial (some calls failed, "
                "or a batch's answers are still missing) · failed (every call failed) · cancelled "
                "· "
                "interrupted (its process ended mid-run: Resume continues it)",
            ),
            "n_errors": st.column_config.NumberColumn(
                "errors",
                help="Failed calls (errors, not answers: no scores, missing in every "
                "number). Resume makes them again.",
            ),
        },
    )


_runs_table()
runs = live_runs()
if not runs.empty:
    c = st.columns([3, 1, 1])
    pick = c[0].selectbox("Run", list(runs["run_id"]), key="runs.pick")
    if c[1].button("Resume", help="Start the run again: stored calls are skipped."):
        row = store.run_row(pick) or {}
        launched = jobs().all().get(pick)
        if row.get("status") == "running":  # its process holds the run's lock: it goes on
            st.warning(
                f"{md_escape(pick)} is running (its process holds the run); Resume is "
                "for a run that stopped."
            )
        elif launched is not None and launched.request.kind != "conditions":
            jobs().start(launched.request)  # the same command as its launch
            st.rerun()
        elif row.get("kind") in ("interventions", "probes"):
            st.warning(
                f"{md_escape(pick)} was not launched from this dashboard: resume it with "
                "the command that started it (its row does not keep every planning "
                "setting, e.g. the operators or the probe limit)."
            )
        elif row.get("backend") in ("embedded", "ollama", "openai"):
            jobs().start(run_request_from_row(store_path(), row))
            st.rerun()
        else:
            st.warning(
                f"{md_escape(pick)} was imported ({md_escape(row.get('backend'))}); "
                "there is nothing to resume."
            )
    if c[2].button("Delete", type="secondary"):
        st.session_state["runs.confirm_delete"] = pick
    if st.session_state.get("runs.confirm_delete") == pick:
        st.warning(f"Delete run {md_escape(pick)} with all its predictions and scores?")
        if st.button("Yes, delete", type="primary"):
            n = store.delete_run(pick)
            st.session_state["runs.confirm_delete"] = None
            clear_caches()
            st.success(f"deleted {md_escape(pick)} ({n:,} predictions)")

st.subheader("Import")
#: The replace's choice for a dataset's runs (label -> ``--with-runs`` value).
_WITH_RUNS = {
    "refuse if it has runs": None,
    "drop them (delete with it)": "drop",
    "keep them (orphans)": "keep-orphans",
}
c = st.columns(3)
kind = c[0].selectbox(
    "What",
    (
        "results: oncu-release",
        "dataset: hotpotqa",
        "dataset: 2wiki",
        "dataset: oncu-jsonl",
        "dataset: jsonl",
    ),
)
iname = c[1].text_input("Name in the store", "", key="runs.import_name")
replace = c[2].checkbox("Replace existing", key="runs.import_replace")
with_runs = None
if replace:  # --with-runs: a replaced dataset's runs are never silently re-scored on new gold
    keep = c[2].selectbox(
        "Runs of the replaced dataset",
        _WITH_RUNS,
        key="runs.import_with_runs",
        help="Replacing a dataset that has runs: refuse (nothing written), drop its runs with "
        "it, or keep them as orphans (`score` lists them as run on a changed dataset). "
        "Same as --with-runs on the command line.",
    )
    with_runs = _WITH_RUNS[keep]
results = kind.startswith("results")
uploads = st.file_uploader(
    "Files (written under data/uploads/)" if results else "File (written under data/uploads/)",
    key="runs.upload",
    accept_multiple_files=results,
    help="Released results: each run's <run>.per_sample_metrics.csv, with its "
    "<run>.parsed_predictions.jsonl and <run>.raw_model_responses.jsonl to add the "
    "explanations and raw replies; several runs at once, grouped by the <run> prefix (each "
    "named after it unless a name is given for a single run)."
    if results
    else None,
)
uploads = [u for u in (uploads if isinstance(uploads, list) else [uploads]) if u is not None]
if done := st.session_state.pop("runs.imported", None):
    st.success(md_escape(done))
if uploads and st.button("Import", type="primary", disabled=not (iname or results)):
    try:
        paths = [save_upload(u.name, u.getvalue()) for u in uploads]
        lines = []
        if results:  # one import per run, all-or-nothing each (as the command line)
            groups = group_release_files(paths, beside=False)
            if iname and len(groups) > 1:
                raise ValueError(
                    f"the files hold {len(groups)} runs; leave the name empty and "
                    "each run is named after its files"
                )
            for g in groups:
                try:
                    lines.append(import_file(kind, g, iname or g.name, replace, with_runs))
                except ValueError as exc:
                    kept = f" (imported before it: {'; '.join(lines)})" if lines else ""
                    raise ValueError(str(exc).splitlines()[0] + kept) from None
        else:
            lines.append(import_file(kind, paths[0], iname, replace, with_runs))
        st.session_state["runs.imported"] = " · ".join(lines)
    except ValueError as exc:
        st.error(md_escape(str(exc).splitlines()[0]))
    else:  # rerun so every list on the page (the launch form's datasets) shows the import
        clear_caches()
        st.rerun()
