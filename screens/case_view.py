"""Case view: one instance end to end (transcripts, passages), and a rerun with a perturbation."""

import streamlit as st

from core.datasets.release_files import release_parse
from core.views.attribution import runs_with
from core.views.case import compare_predictions
from screens.parts import failure_trail
from screens.parts.case_card_panel import show_card_downloads
from screens.parts.common import (
    HELP,
    cached_call,
    get_store,
    init_page_state,
    prefetch,
    sidebar,
)
from screens.parts.markdown import md_escape
from screens.parts.rerun_panel import show_rerun
from screens.parts.selection_state import set_value
from screens.parts.transcript import (
    prediction_label,
    show_comparison,
    show_passages,
    show_transcript,
)
from screens.parts.url_state import set_param

qp = st.query_params
if qp.get("dataset") and st.session_state.get("case.last_ds") != qp["dataset"]:
    set_value("global.dataset", qp["dataset"])  # the sidebar follows a drill-down
    st.session_state["case.last_ds"] = qp["dataset"]
# no run-level banner: this instance's own failed calls are in its answers table
selection = sidebar("case", filters=False, banner=False)
dataset = qp.get("dataset") or selection.dataset
st.title("Case view")
if not dataset:
    st.info("Choose a dataset in the sidebar, or open an instance from any aggregate.")
    st.stop()
runs = tuple(r for r in (qp.get("runs") or "").split(",") if r) or selection.runs
index = cached_call("case_index", dataset=dataset, runs=list(runs))
# plain lists first: iterating the store's Arrow-backed columns value by value costs 0.1 s
# per page run at 5,000 instances (issue 36 item 9)
listed = [str(i) for i in index["instance_id"].tolist()]
questions = dict(zip(listed, index["question"].tolist(), strict=True))
failed = {i for i, n in zip(listed, index["n_failed"].tolist(), strict=True) if n and n > 0}
only_failed = st.toggle(
    "Failures only",
    key="case.only_failed",
    help="Instances with a "
    "failed call or a failure label other than success in the selected runs "
    f"({len(failed)} of {len(index)}).",
)
ids = [i for i in listed if not only_failed or i in failed]
if qp.get("instance") and qp.get("instance") not in ids:
    ids = [qp["instance"], *ids]
if not ids:
    st.info(
        f"Dataset {md_escape(dataset)} has no instances"
        + (" with failures in the selected runs." if only_failed else ".")
    )
    st.stop()
init_page_state("case", {"instance": qp.get("instance") or ids[0]})
if qp.get("instance") and st.session_state.get("case.last_qp") != qp.get("instance"):
    st.session_state["case.instance"] = qp["instance"]
    st.session_state["case.last_qp"] = qp["instance"]
if st.session_state.get("case.instance") not in ids:
    st.session_state["case.instance"] = ids[0]


def _step(by: int) -> None:
    """Move the picker ``by`` places in the (filtered) instance list."""
    here = ids.index(st.session_state["case.instance"])
    st.session_state["case.instance"] = ids[max(0, min(len(ids) - 1, here + by))]


def _label(i: str) -> str:
    q = " ".join(
        str(questions[i] or "(no question text)" if i in questions else "(opened by link)").split()
    )
    return f"{q[:100]}{'…' if len(q) > 100 else ''} · {i}"


pick = st.columns([6, 1.3, 1], vertical_alignment="bottom")
iid = pick[0].selectbox("Instance", ids, key="case.instance", format_func=_label)
at = ids.index(iid)
trail = failure_trail.steps(dataset, iid)  # opened from the failure browser: step its list
if trail is None:
    pick[1].button(
        "◀ Previous",
        key="case.prev",
        on_click=_step,
        args=(-1,),
        disabled=at == 0,
        use_container_width=True,
    )
    pick[2].button(
        "Next ▶",
        key="case.next",
        on_click=_step,
        args=(1,),
        disabled=at == len(ids) - 1,
        use_container_width=True,
    )
    st.caption(f"Instance {at + 1} of {len(ids)}")
else:
    failure_trail.step_buttons(pick[1], pick[2], trail)
    st.caption(f"Instance {trail['position']:,} of {trail['total']:,} (failure browser filter)")
    failure_trail.back_link()
failure_trail.step_keys()
st.session_state["case.last_qp"] = iid  # the URL holds the picked instance
set_param("instance", iid)
heading = st.empty()  # the question, drawn before the slower case data when the index has it
if questions.get(iid):
    heading.markdown("### " + md_escape(questions[iid]))
case = cached_call(
    "case",
    dataset=dataset,
    instance_id=iid,
    runs=list(runs),
    score_field=selection.score_field,
    group_key=list(selection.options.get("group_key") or ()),
)
inst, passages, preds = case["instance"], case["passages"], case["predictions"]

heading.markdown("### " + md_escape(inst["question"] or "(question not in the imported file)"))
if not inst["question"].strip() or not passages["text"].str.strip().any():
    st.info(
        "The store holds no question or passage text for this instance: it was built from "
        "a results file (ids, gold answer and metadata only). The answers, explanations and "
        "raw replies below are the release's; a rerun is refused (nothing to show a model)."
    )
st.markdown("**Gold answer** (never shown to a model)")
st.code(inst["gold_answer"], language=None, wrap_lines=True)
if inst["answer_aliases"]:
    st.text("Aliases: " + " | ".join(inst["answer_aliases"]))
st.caption(
    md_escape(
        " · ".join(
            f"{k.replace('_', ' ')}: {inst[k]}"
            for k in (
                "reasoning_type",
                "answer_type",
                "context_length",
                "evidence_position",
                "distractor_similarity",
                "fan_in",
                "source",
            )
        )
    )
)
stored = cached_call("runs")  # only a dataset with attribution runs asks the store which
attributed = "kind" in stored and bool(
    ((stored["kind"] == "attribution") & (stored["dataset_id"] == dataset)).any()
)
for att_run in runs_with(get_store(), dataset, iid) if attributed else ():  # issue 40
    st.page_link(
        "screens/attribution.py",
        label=f"Attribution: which passages this answer depended on (run {md_escape(att_run)})",
        icon=":material/hub:",
        query_params={"run": att_run, "instance": iid},
    )

st.subheader("Answers by condition")
if preds.empty:
    st.info("No predictions of the selected runs for this instance.")
else:
    cols = [
        "run",
        "condition",
        "variant",
        "answer",
        "cited_ids",
        "confidence",
        "em_strict",
        "f1_relaxed",
        "ev_f1",
        "failure_label",
        "parse_error",
        "error",
        "latency_ms",
        "cache_hit",
    ]
    st.dataframe(
        preds[[c for c in cols if c in preds.columns]],
        hide_index=True,
        column_config={"failure_label": st.column_config.TextColumn(help=HELP["failure_label"])},
    )
    show_card_downloads(case, dataset, iid, selection.score_field)
if not case["groups"].empty:
    st.markdown("**ONCU group of this instance**", help=HELP["oncu_clipped"])
    st.dataframe(case["groups"], hide_index=True)

if not preds.empty:
    rows = preds.to_dict("records")
    for key, default in (("case.transcript", 0), ("case.cmp_a", 0), ("case.cmp_b", 1)):
        if st.session_state.get(key, default) >= len(rows):  # another instance, fewer rows
            st.session_state[key] = min(default, len(rows) - 1)
    if qp.get("condition") and st.session_state.get("case.last_cond") != (iid, qp["condition"]):
        st.session_state["case.last_cond"] = (iid, qp["condition"])  # a row opened from a list
        hit = [i for i, r in enumerate(rows) if r["condition"] == qp["condition"]]
        st.session_state["case.transcript"] = hit[0] if hit else 0
    st.subheader("Transcript")
    k = st.selectbox(
        "Prediction",
        range(len(rows)),
        key="case.transcript",
        format_func=lambda i: prediction_label(rows[i]),
    )
    show_transcript(rows[k], case["transcripts"][k])
    if (parse := release_parse(rows[k].get("meta"))) is not None:  # an imported release
        st.markdown("**The release's parse and this tool's parse of the raw reply**")
        st.caption(
            "Scores use the release's parse (its answer and cited ids). "  # text: note
            + (
                "This tool's parser differs on: "
                + md_escape(", ".join(f.replace("_", " ") for f in parse["differs"]))
                + ". "
                + parse["note"]
                if parse["differs"]
                else "Both parsers agree."
            )
        )
        st.dataframe(parse["rows"], hide_index=True, key="case.release_parse")
    if len(rows) >= 2 and st.toggle(
        "Compare two predictions side by side",
        key="case.compare",
        help="Any two predictions of this instance (two runs, two "
        "conditions): answers, word diff and trace divergence D.",
    ):
        c = st.columns(2)
        a = c[0].selectbox(
            "First prediction (A)",
            range(len(rows)),
            key="case.cmp_a",
            format_func=lambda i: prediction_label(rows[i]),
        )
        b = c[1].selectbox(
            "Second prediction (B)",
            range(len(rows)),
            index=1,
            key="case.cmp_b",
            format_func=lambda i: prediction_label(rows[i]),
        )
        show_comparison(case, a, b, compare_predictions(case, a, b))

st.subheader("Passages")
show_passages(passages, preds)

show_rerun(dataset, iid, runs, preds, passages)

# the instances a j / k step shows next are read now, while this one is read (issue 36 item 9)
if trail is None:
    ahead = [(dataset, ids[j], runs) for j in (at + 1, at - 1) if 0 <= j < len(ids)]
else:
    kept_runs = (st.session_state.get("failures.trail") or {}).get("runs") or {}
    ahead = [
        (e["dataset"], e["instance_id"], tuple(kept_runs.get(e["dataset"]) or ()) or selection.runs)
        for e in (trail["next"], trail["previous"])
        if e
    ]
for ds, other, other_runs in ahead:
    prefetch(
        "case",
        dataset=ds,
        instance_id=other,
        runs=list(other_runs),
        score_field=selection.score_field,
        group_key=list(selection.options.get("group_key") or ()),
    )
