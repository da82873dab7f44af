"""Attribution: which shown passages an answer causally depended on, and were they cited (issue 40).

One attribution run at a time (URL ``?run=``), one instance of it below (``?instance=``). The
numbers come from :mod:`core.views.attribution` (cached per store version); the definitions
are :data:`core.figures.attribution.HELP`.
"""

import streamlit as st

from core.figures.attribution import (
    HELP,
    cited_causal_table,
    gold_reliance_figure,
    gold_reliance_table,
    lds_figure,
    weights_figure,
)
from core.views.attribution import attribution_runs, instance_attribution, run_result
from screens.parts.common import get_store, sidebar
from screens.parts.markdown import md_escape
from screens.parts.url_state import set_param

sidebar("attribution", runs=False, filters=False)
st.title("Attribution")
st.caption(
    "Each instance's context was answered whole and under random ablations (each passage "
    "kept with probability keep); a sparse linear surrogate of the target on the masks "
    "gives each passage a weight (ContextCite: Cohen-Wang et al., NeurIPS 2024)."
)
store, ss, qp = get_store(), st.session_state, st.query_params
try:
    runs = attribution_runs(store)
except ValueError as exc:
    st.info(md_escape(exc))
    st.stop()
if qp.get("run") in runs and ss.get("attribution.last_run_qp") != qp["run"]:
    ss["attribution.run"] = ss["attribution.last_run_qp"] = qp["run"]
run = st.selectbox("Attribution run", runs, key="attribution.run")
set_param("run", run)
with st.spinner("Fitting the surrogates (Lasso, bootstrap CIs) ..."):
    rep = run_result(store, run)
s = rep["settings"]
st.caption(
    md_escape(
        f"condition {s.get('condition')} · target {s['target']} · "
        f"{s.get('ablations')} ablations · keep {s.get('keep')} · seed "
        f"{s.get('seed')}"
    ),
    help=HELP["retention"],
)

m = st.columns(6)
m[0].metric("Instances fitted", f"{rep['n_fitted']} / {rep['n_instances']}")
m[1].metric(
    "Failed ablated calls",
    rep["calls"]["failed"],
    help="Left out of the fit and counted; never a target of 0.",
)
lds = rep["lds"]
m[2].metric(
    "Median LDS", "—" if lds["median"] is None else f"{lds['median']:.3f}", help=HELP["lds"]
)
m[3].metric(
    f"LDS < {lds['threshold']:g}",
    lds["below"],
    help=HELP["lds"] + f" Undefined (constant targets or predictions): {lds['undefined']:,}.",
)
tg = rep["top_gold"]
m[4].metric(
    "Top passage is gold",
    "—" if tg["rate"] is None else f"{tg['rate']:.0%}",
    help=f"Among the {tg['n_correct']:,} instances answered correctly (unablated).",
)
m[5].metric(
    "Mean top-1 drop",
    "—" if rep["top_drop"]["1"] is None else f"{rep['top_drop']['1']:.3f}",
    help=HELP["topk"],
)
for reason, n in rep["not_fitted"].items():
    st.warning(md_escape(f"{n} instance(s) not fitted: {reason}"))

st.subheader("Cited vs causal", help=HELP["causal"] + " " + HELP["cited"])
cc = rep["cited_vs_causal"]
st.dataframe(cited_causal_table(rep), hide_index=True, key="attribution.cc")
st.caption(
    f"{cc['n']:,} shown passages; {cc['undetermined']:,} undetermined (always kept or "
    "dropped by the masks, or an instance not fitted)."
)
lists = st.columns(2)
for col, name, title in (
    (lists[0], "cited_not_causal", "Cited but not causal"),
    (lists[1], "causal_not_cited", "Causal but not cited"),
):
    with col.expander(f"{title} ({len(cc[name])})"):  # text: a constant title
        if cc[name]:
            st.dataframe(
                [
                    {"instance": i, "passage": p, "open": f"attribution?run={run}&instance={i}"}
                    for i, p in cc[name]
                ],
                hide_index=True,
                key=f"attribution.{name}",
                column_config={"open": st.column_config.LinkColumn(display_text="open")},
            )

st.subheader("Gold reliance", help=HELP["gold_reliance"])
fig, _ = gold_reliance_figure(rep)
st.plotly_chart(fig, key="attribution.gold_fig")
with st.expander("Gold reliance table"):
    st.dataframe(gold_reliance_table(rep), hide_index=True)
st.subheader("LDS per instance", help=HELP["lds"])
st.plotly_chart(lds_figure(rep)[0], key="attribution.lds_fig")

st.subheader("One instance")
ids = list(rep["instances"]["instance_id"]) if len(rep["instances"]) else []
if not ids:
    st.info("This run has no instance with an unablated call yet.")
    st.stop()
if qp.get("instance") in ids and ss.get("attribution.last_inst_qp") != qp["instance"]:
    ss["attribution.instance"] = ss["attribution.last_inst_qp"] = qp["instance"]
iid = st.selectbox("Instance", ids, key="attribution.instance")
set_param("instance", iid)
one = instance_attribution(store, run, iid)
row = one["instance"] or {}
st.markdown("**Unablated answer**")
st.code(row.get("full_answer") or "(no answer: the call failed)", language=None, wrap_lines=True)
info = st.columns(4)
info[0].metric(
    "LDS", "—" if row.get("lds") != row.get("lds") else f"{row['lds']:.3f}", help=HELP["lds"]
)
info[1].metric("Answered ablations", f"{row.get('n', 0)} (failed {row.get('n_failed', 0)})")
for k, col in ((1, info[2]), (2, info[3])):
    drop = row.get(f"top{k}_drop")
    col.metric(
        f"Top-{k} drop",
        "—" if drop is None or drop != drop else f"{drop:.3f}",  # text:
        help=HELP["topk"] + " Dropped: " + md_escape(row.get(f"top{k}") or "none"),
    )
if row.get("reason"):
    st.warning(md_escape(row["reason"]))
st.plotly_chart(weights_figure(one["passages"])[0], key="attribution.weights_fig")
text = st.column_config.TextColumn
st.dataframe(
    one["passages"][
        ["passage_id", "position", "weight", "ci_low", "ci_high", "causal", "gold", "cited", "note"]
    ],
    hide_index=True,
    key="attribution.weights",
    column_config={
        "weight": st.column_config.NumberColumn(format="%.4f", help=HELP["weight"]),
        "ci_low": st.column_config.NumberColumn(format="%.4f", help=HELP["ci"]),
        "ci_high": st.column_config.NumberColumn(format="%.4f", help=HELP["ci"]),
        "causal": st.column_config.CheckboxColumn(help=HELP["causal"]),
        "cited": st.column_config.CheckboxColumn(help=HELP["cited"]),
        "note": text(help="always kept / always dropped: the masks say nothing about it"),
    },
)
dataset = (store.run_row(run) or {}).get("dataset_id") or ""
st.page_link(
    "screens/case_view.py",
    label=f"Open {md_escape(iid)} in the Case view",
    query_params={"dataset": dataset, "instance": iid, "runs": run},
    icon=":material/search:",
)
