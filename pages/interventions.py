"""Interventions (CUE-R): utility profile, paired deltas, divergence, roles, synergy, sweeps."""

import streamlit as st

from core.selection import selection_to_json
from pages.common import (
    cached_call,
    init_page_state,
    open_case,
    show_figure,
    show_table,
    sidebar,
    with_options,
)

selection = sidebar("interventions")
init_page_state("interventions", {"eps": 0.05, "tau": 0.5, "synergy_metric": "answer_f1"})
st.title("Interventions (CUE-R)")
st.caption(
    "Which retrieved evidence item did the model depend on? Each instance's base trace is its "
    "retrieved prediction (BM25 top-5); the target passage is chosen by the paper's priority "
    "(cited with a gold title > cited > retrieved with a gold title > top-ranked) and removed, "
    "replaced (easy / medium / hard) or duplicated (front / after / end). Deltas are "
    "original - intervention. Start a run with `python -m core run-interventions --dataset "
    "NAME --backend embedded --name RUN` (or from the Runs page).",
    help="CUE-R (seed 004) §3-6, App. A-D; SPEC §7.",
)
c = st.columns(3)
c[0].number_input(
    "eps (negligible change)", 0.0, 1.0, step=0.01, key="interventions.eps",
    help="Redundant: every |Δ| <= eps and D <= eps. Confidence-distorting: |Δcal| > eps and "
    "|Δcorr| <= eps. Strong complementary: both single drops <= eps, joint drop > eps. "
    "SPEC §7; CUE-R §3.5.",
)  # fmt: skip
c[1].number_input(
    "tau (large divergence)", 0.0, 1.0, step=0.05, key="interventions.tau",
    help="Distractive: D >= tau and a utility worsens. D = 0.5 (1 - Jaccard of cited ids) + "
    "0.3 [answer changed] + 0.2 |c - c'|. SPEC §7; CUE-R §3.4-3.5.",
)  # fmt: skip
c[2].selectbox(
    "Synergy axis", ["answer_f1", "correctness", "grounding"], key="interventions.synergy_metric",
    help="Axis of the two-support drops (the paper: answer F1, Table 9).",
)  # fmt: skip
ss = st.session_state
sel = with_options(selection, eps=float(ss["interventions.eps"]),
                   tau=float(ss["interventions.tau"]),
                   synergy_metric=ss["interventions.synergy_metric"])  # fmt: skip
st.subheader("Utility profile")
show_figure("cuer_profile", sel, drill=False)
show_table("cuer_profile", sel)

st.subheader("Paired deltas (original - intervention)")
show_figure("cuer_paired_heatmap", sel, drill=False)
show_table("cuer_paired", sel)

st.subheader("Trace divergence")
show_figure("cuer_divergence", sel, drill=False)

st.subheader("Evidence roles")
show_figure("cuer_roles", sel, drill=False)
f = st.columns(2)
role = f[0].selectbox("Role", ["constructive", "redundant", "distractive",
                               "confidence_distorting", "unassigned"],
                      key="interventions.role")  # fmt: skip
op = f[1].selectbox("Operator", ["remove", "replace", "duplicate"], key="interventions.op")
try:
    table = cached_call("table", name="cuer_role_examples", sel=selection_to_json(sel))
except ValueError as exc:
    table = None
    st.warning(str(exc))
if table is not None:
    rows = table[(table["role"] == role) & (table["operator"] == op)].reset_index(drop=True)
    st.markdown(f"**{len(rows)} {op} interventions with role {role}** — select one to open it "
                "in the Case view")  # fmt: skip
    event = st.dataframe(rows, key="interventions.examples", hide_index=True,
                         on_select="rerun", selection_mode="single-row")  # fmt: skip
    picked = (event.get("selection") or {}).get("rows") or [] if event else []
    if picked:
        row = rows.iloc[picked[0]]
        open_case(str(row["dataset"]), str(row["instance_id"]), [str(row["run"])])

st.subheader("Two-support synergy")
show_table("cuer_synergy", sel)

st.subheader("Sweeps")
show_figure("cuer_hardness", sel, drill=False)
show_figure("cuer_duplicate_positions", sel, drill=False)
