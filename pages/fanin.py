"""Fan-in: AC vs fan-in degradation curves, ER-AC / EP-AC scatter, degradation table (SPEC §9)."""

import streamlit as st

from pages.common import show_figure, show_instances, show_table, sidebar

selection = sidebar("fanin")
st.title("Fan-in")
st.caption(
    "Fan-in = distinct source documents among an instance's gold evidence (single 1, low 2-3, "
    "high >= 4). Evidence pack = passages shown (retrieved, oracle) or cited (full context); "
    "ER = |pack ∩ gold| / |gold|, EP = |pack ∩ gold| / |pack|, AC = 100 x the score field. "
    "A failed call is not an answer: it is left out of n and counted in `missing`; an "
    "unparseable reply scores 0 and stays in n. "
    "Build a fan-in grid with `python -m core generate controlled --preset fanin-grid`.",
    help="AuthTrace (seed 003) §2-3 and §6; SPEC §9.",
)
cell = show_figure("fanin_degradation", selection)
if cell:
    fan = st.selectbox(
        "Fan-in of the instances to list", [None, 1, 2, 3, 4, 5, 6], key="fanin.level",
        format_func=lambda f: "(all)" if f is None else str(f),
        help="The clicked curve gives run and condition; choose the fan-in point here.",
    )  # fmt: skip
    if fan is not None:
        cell = dict(cell) | {"fan_in": fan}
show_instances(selection, cell, key="fanin.instances")
show_figure("fanin_scatter", selection, drill=False)
show_table("fanin_degradation", selection)
show_table("fanin_buckets", selection)
show_table("fanin_pairs", selection)
