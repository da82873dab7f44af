"""Case view: one instance end to end, and a rerun with a chosen perturbation."""

import streamlit as st

from core.rerun import OPERATORS, RERUN_CONDITIONS, RerunRequest, base_shown_ids, rerun
from core.views.case import md_escape
from pages.common import HELP, cached_call, clear_caches, get_store, init_page_state, sidebar

qp = st.query_params
if qp.get("dataset") and st.session_state.get("case.last_ds") != qp["dataset"]:
    st.session_state["global.dataset"] = qp["dataset"]  # the sidebar follows a drill-down
    st.session_state["case.last_ds"] = qp["dataset"]
selection = sidebar("case", filters=False)
dataset = qp.get("dataset") or selection.dataset
st.title("Case view")
if not dataset:
    st.info("Choose a dataset in the sidebar, or open an instance from any aggregate.")
    st.stop()
ids = cached_call("instance_ids", dataset=dataset)
if qp.get("instance") and qp.get("instance") not in ids:
    ids = [qp["instance"], *ids]
if not ids:
    st.info(f"Dataset {dataset} has no instances.")
    st.stop()
init_page_state("case", {"instance": qp.get("instance") or ids[0]})
if qp.get("instance") and st.session_state.get("case.last_qp") != qp.get("instance"):
    st.session_state["case.instance"] = qp["instance"]
    st.session_state["case.last_qp"] = qp["instance"]
iid = st.selectbox("Instance", ids, key="case.instance")
runs = tuple(r for r in (qp.get("runs") or "").split(",") if r) or selection.runs
case = cached_call("case", dataset=dataset, instance_id=iid, runs=list(runs),
                   score_field=selection.score_field,
                   group_key=list(selection.options.get("group_key") or ()))  # fmt: skip
inst, passages, preds = case["instance"], case["passages"], case["predictions"]

st.markdown(f"### {inst['question'] or '(question not in the imported file)'}")
gold = inst["gold_answer"] + (f"  (aliases: {', '.join(inst['answer_aliases'])})"
                              if inst["answer_aliases"] else "")  # fmt: skip
st.markdown(f"**Gold answer** (never shown to a model): :green-background[{gold}]")
st.caption(" · ".join(f"{k.replace('_', ' ')}: {inst[k]}" for k in (
    "reasoning_type", "answer_type", "context_length", "evidence_position",
    "distractor_similarity", "fan_in", "source")))  # fmt: skip

st.subheader("Answers by condition")
if preds.empty:
    st.info("No predictions of the selected runs for this instance.")
else:
    cols = ["run", "condition", "variant", "answer", "cited_ids", "confidence", "em_strict",
            "f1_relaxed", "ev_f1", "failure_label", "parse_error", "error", "latency_ms",
            "cache_hit"]  # fmt: skip
    st.dataframe(preds[[c for c in cols if c in preds.columns]], hide_index=True,
                 column_config={"failure_label": st.column_config.TextColumn(
                     help=HELP["failure_label"])})  # fmt: skip
if not case["groups"].empty:
    st.markdown("**ONCU group of this instance**", help=HELP["oncu_clipped"])
    st.dataframe(case["groups"], hide_index=True)

st.subheader("Passages")
cited: dict[str, list[str]] = {}
for row in preds.itertuples() if not preds.empty else []:
    for pid in list(row.cited_ids) if row.cited_ids is not None else []:
        tag = row.condition + (f":{row.variant}" if row.variant else "")
        cited.setdefault(pid, []).append(tag)
_ROLE = {"gold": "green", "distractor": "orange", "conflicting": "red", "filler": "gray"}
only_marked = st.toggle("Only gold / distractor / conflicting / cited passages", value=True,
                        key="case.only_marked")  # fmt: skip
for p in passages.itertuples():
    if only_marked and p.role == "filler" and p.passage_id not in cited:
        continue
    badge = f":{_ROLE.get(p.role, 'gray')}-badge[{p.role}]"
    by = (f" · cited by {', '.join(sorted(set(cited[p.passage_id])))}"
          if p.passage_id in cited else "")  # fmt: skip
    with st.container(border=True):
        st.markdown(f"{badge} **{p.passage_id}** {p.title}{by}")
        st.caption(p.text[:1200] + (" …" if len(p.text) > 1200 else ""))

st.subheader("Rerun with a perturbation")
if not runs and preds.empty:
    st.info("Select a run to perturb.")
    st.stop()
c = st.columns(2)
base_run = c[0].selectbox("Base run", sorted(set(preds["run"])) if not preds.empty else runs,
                          key="case.base_run")  # fmt: skip
condition = c[1].selectbox("Base condition", RERUN_CONDITIONS, key="case.base_condition")
shown = base_shown_ids(preds, base_run, condition) or list(passages["passage_id"])
with st.form("case.rerun_form"):
    c = st.columns(2)
    operator = c[0].selectbox("Operator", OPERATORS, help="remove / replace / duplicate a passage, "
                              "move a passage to a position, or change retriever / top-k")
    target = c[1].selectbox("Target passage (shown to the model)", shown)
    d = st.columns(5)
    hardness = d[0].selectbox("replace: hardness", ("hard", "medium", "easy"))
    position = d[1].selectbox("duplicate: position", ("end", "front", "after"))
    move_to = d[2].number_input("move: to index", 0, max(len(passages) - 1, 0), 0)
    retriever = d[3].selectbox("retriever", ("lexical", "hybrid", "dense", "iterative", "oracle"))
    top_k = d[4].number_input("top-k", 1, 50, 3)
    e = st.columns(3)
    backend = e[0].selectbox("Backend (for imported runs)", ("embedded", "ollama", "openai"))
    model = e[1].text_input("Model (for imported runs)", "") or None
    host = e[2].text_input("Server URL (ollama / openai)", "", help="Empty: OLLAMA_HOST or "
                           "OPENAI_BASE_URL, as for runs") or None  # fmt: skip
    go = st.form_submit_button("Run now", type="primary")
if go:
    params = {"hardness": hardness, "position": position, "move_to": int(move_to),
              "retriever": retriever, "top_k": int(top_k)}  # fmt: skip
    st.session_state["case.rerun_req"] = RerunRequest(
        dataset, iid, base_run, condition, operator, target, params, backend, model, host
    )
retry = st.session_state.pop("case.retry_now", False)  # set by the Retry button: same request
req = st.session_state.get("case.rerun_req") if go or retry else None
if req is not None:
    try:
        with st.spinner("Running ..."):
            st.session_state["case.rerun"] = rerun(get_store(), req)
        clear_caches()
    except (ValueError, RuntimeError) as exc:
        st.error(str(exc).splitlines()[0])
res = st.session_state.get("case.rerun")
if res and res["original"].get("instance_id") == iid:
    left, right = st.columns(2)
    sides = ((left, "Original", res["original"]), (right, "Perturbed", res["perturbed"]))
    for col, title, row in sides:
        with col, st.container(border=True):
            variant = md_escape(row.get("variant") or "")
            st.markdown(f"**{title}** · {row.get('condition')} {variant}")
            if row.get("error"):  # a failed call has no answer: its error stands in its place
                st.error(md_escape(str(row["error"]).strip().splitlines()[0]))
                continue
            st.text(f"Answer: {row.get('answer')}")
            st.caption(f"cited {md_escape(row.get('cited_ids'))} · confidence "
                       f"{row.get('confidence')} · relaxed F1 {row.get('f1_relaxed')} · "
                       f"{row.get('failure_label')} · "
                       f"shown {len(row.get('input_passage_ids') or [])} items")  # fmt: skip
    if res.get("error"):
        st.button("Retry", key="case.retry", type="primary",
                  on_click=lambda: st.session_state.update({"case.retry_now": True}))
        st.metric("Trace divergence D", "—", help=HELP["trace_divergence"])
        st.caption("not computed: the call failed")
    else:
        diff = " ".join({"=": md_escape(t), "-": f":red[~~{md_escape(t)}~~]",
                         "+": f":green[**{md_escape(t)}**]"}[op]
                        for op, t in res["diff"]) or "(both empty)"  # fmt: skip
        st.markdown(f"**Answer diff:** {diff}")
        st.metric("Trace divergence D", f"{res['divergence']:.3f}", help=HELP["trace_divergence"])
    if res.get("imported_original"):
        st.caption(f"Imported answer of {md_escape(base_run)}: "
                   f"{md_escape(res['imported_original'].get('answer'))}; the comparison above "
                   f"reruns both sides on {md_escape(res['run'])}.")  # fmt: skip
