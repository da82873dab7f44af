"""Interventions (CUE-R): utility profile, paired deltas, divergence, roles, synergy, sweeps."""

import streamlit as st

from core.interventions import EPS, SYNERGY_METRIC, TAU
from core.selection import selection_to_json
from pages.common import (
    cached_call,
    open_case,
    show_figure,
    show_table,
    sidebar,
    with_options,
)
from pages.widgets import param_widget

selection = sidebar("interventions")
st.title("Interventions (CUE-R)")
st.caption(
    "Which retrieved evidence item did the model depend on? Each instance's base trace is its "
    "retrieved prediction (BM25 top-5); the target passage is chosen by the paper's priority "
    "(cited with a gold title > cited > retrieved with a gold title > top-ranked) and removed, "
    "replaced (easy / medium / hard) or duplicated (front / after / end). Deltas are "
    "original - intervention. A failed call (base or intervention) is not an answer: its pair "
    "is left out of n and counted in `missing`; an unparseable reply scores 0 and stays in "
    "n. Start a run with `python -m core run-interventions --dataset "
    "NAME --backend embedded --name RUN` (or from the Runs page).",
    help="CUE-R (seed 004) §3-6, App. A-D; SPEC §7.",
)
c = st.columns(3)
knobs = {
    param.name: param_widget(param, f"interventions.{param.name}", c[i], label=label)
    for i, (param, label) in enumerate(((EPS, "eps (negligible change)"),
                                         (TAU, "tau (large divergence)"),
                                         (SYNERGY_METRIC, "Synergy axis")))
}  # fmt: skip
sel = with_options(selection, **knobs)
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
