"""Length & position: ONCU heatmap (context length x evidence position), per-length curves."""

import streamlit as st

from pages.common import (
    oncu_group_guard,
    show_figure,
    show_instances,
    show_table,
    sidebar,
)

selection = sidebar("length")
st.title("Length & position")
st.caption(
    "Mean clipped ONCU over the valid groups of each context length and evidence position. "
    "Build the scaling grid with `python -m core generate controlled --preset scaling-3200`."
)
# the ONCU group key of the Conditions page, its length cell, sizes and the small-group warning
selection = oncu_group_guard(selection)
cell = show_figure("oncu_heatmap", selection)
show_figure("oncu_length_curves", selection, drill=False)
table, row = show_table("length_position", selection, drill=True)
bucketed = "length_cell" in table.columns and bool((table["length_cell"] == "bucket").any())
if bucketed:
    st.caption("Lengths are length buckets: nearest of 1K, 2K, 4K ... 128K tokens on a log2 "
               "scale (boundaries 1414, 2828, 5657 ...).")  # fmt: skip
show_instances(selection, row or cell, key="length.instances")
