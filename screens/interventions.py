"""Interventions (CUE-R): utility profile, paired deltas, divergence, roles, synergy, sweeps."""

import streamlit as st

from core.cuer.metrics import ROLE_FLAGS
from core.figures.cuer import COLUMN_HELP, CORRECTNESS_AXIS, EPS, SYNERGY_METRIC, TAU
from core.selection import selection_to_json
from screens.parts.common import cached_call, sidebar
from screens.parts.display import open_case, show_figure, show_table, with_options
from screens.parts.markdown import md_escape
from screens.parts.widgets import param_widget

#: Column tooltips: each column's definition and paper section.
HELP = {c: st.column_config.Column(help=h) for c, h in COLUMN_HELP.items()}

selection = sidebar("interventions")
st.title("Interventions (CUE-R)")
st.caption(
    "Which retrieved evidence item did the model depend on? Each instance's base trace is its "
    "retrieved prediction (BM25 top-5); the target passage is chosen by the paper's priority "
    "(cited with a gold title > cited > retrieved with a gold title > top-ranked) and removed, "
    "replaced by a whole non-support passage (easy: random; medium / hard: highest BM25 vs "
    "the question / the target) or duplicated (front / after / end). Deltas are "
    "original - intervention. A failed call (base or intervention) is not an answer: its pair "
    "is left out of n and counted in `missing`; an unparseable reply scores 0 and stays in "
    "n; an instance with no non-support passage besides the target gets no replace and is "
    "counted in `not_applicable` beside the Replace rows. Start a run with `python -m core "
    "run-interventions --dataset NAME --backend embedded --name RUN` (or from the Runs page, "
    "Method: CUE-R interventions).",
    help="CUE-R (seed 004) §3-6, App. A-D; SPEC §7.",
)
st.page_link(
    "screens/runs.py",
    label="Launch CUE-R interventions on the Runs page",
    icon=":material/play_circle:",
)
c = st.columns(4)
knobs = {
    param.name: param_widget(param, f"interventions.{param.name}", c[i], label=label)
    for i, (param, label) in enumerate(
        (
            (EPS, "eps (negligible change)"),
            (TAU, "tau (large divergence)"),
            (CORRECTNESS_AXIS, "Correctness axis"),
            (SYNERGY_METRIC, "Synergy axis"),
        )
    )
}
sel = with_options(selection, **knobs)
axis = knobs["correctness_axis"]
st.caption(
    f"Correctness axis: **{md_escape(axis)}** — "
    + (
        "soft correctness (normalized match, yes/no, numbers or token F1 >= 0.8; the paper's "
        "tables)"
        if axis == "soft"
        else "strict normalized exact match"
    )
    + "; confidence error, Δcorr and the roles follow it.",
    help=CORRECTNESS_AXIS.help,
)
st.subheader("Utility profile")
show_figure("cuer_profile", sel, drill=False)
show_table("cuer_profile", sel, column_config=HELP)

st.subheader("Paired deltas (original - intervention)")
show_figure("cuer_paired_heatmap", sel, drill=False)
show_table("cuer_paired", sel, column_config=HELP)

st.subheader("Trace divergence")
show_figure("cuer_divergence", sel, drill=False)

st.subheader("Evidence roles")
st.caption(
    "Each role rule of the paper is a flag of its own, so an item can carry several: every "
    "distractive item is also constructive (both need Δcorr > 0 or Δgrnd > 0). Counts are per "
    "flag; `several_flags` counts the items with two or more.",
    help="CUE-R (seed 004) §3.5; SPEC §7.",
)
show_figure("cuer_roles", sel, drill=False)
show_table("cuer_roles", sel, column_config=HELP)
show_table("cuer_role_combinations", sel, column_config=HELP)
f = st.columns(2)
flag = f[0].selectbox(
    "Role flag",
    [*ROLE_FLAGS, "unassigned"],
    key="interventions.role",
    help="Items carrying this flag (they may carry others too); "
    "unassigned: items carrying none. CUE-R §3.5.",
)
op = f[1].selectbox("Operator", ["remove", "replace", "duplicate"], key="interventions.op")
try:
    table = cached_call("table", name="cuer_role_examples", sel=selection_to_json(sel))
except ValueError as exc:
    table = None
    st.warning(md_escape(exc))
if table is not None:
    has = table["n_flags"] == 0 if flag == "unassigned" else table[f"is_{flag}"] == True  # noqa: E712
    rows = table[has & (table["operator"] == op)].reset_index(drop=True)
    also = int((rows["n_flags"] >= 2).sum())
    st.markdown(
        f"**{len(rows)} {md_escape(op)} interventions carry the flag {md_escape(flag)}** "
        f"({also} of them "
        "carry other flags too) — select one to open it in the Case view"
    )
    event = st.dataframe(
        rows,
        key="interventions.examples",
        hide_index=True,
        column_config=HELP,
        on_select="rerun",
        selection_mode="single-row",
    )
    picked = (event.get("selection") or {}).get("rows") or [] if event else []
    if picked:
        row = rows.iloc[picked[0]]
        open_case(str(row["dataset"]), str(row["instance_id"]), [str(row["run"])])

st.subheader("Two-support synergy")
show_table("cuer_synergy", sel, column_config=HELP)

st.subheader("Sweeps")
show_figure("cuer_hardness", sel, drill=False)
show_table("cuer_hardness", sel, column_config=HELP)
show_figure("cuer_duplicate_positions", sel, drill=False)
show_table("cuer_duplicate_positions", sel, column_config=HELP)
