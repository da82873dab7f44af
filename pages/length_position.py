"""Length & position: ONCU heatmap (context length x evidence position), per-length curves."""

import streamlit as st

from pages.common import show_figure, show_instances, show_table, sidebar

selection = sidebar("length")
st.title("Length & position")
st.caption(
    "Mean clipped ONCU over the valid groups of each context length and evidence position. "
    "Build the scaling grid with `python -m core generate controlled --preset scaling-3200`."
)
cell = show_figure("oncu_heatmap", selection)
show_figure("oncu_length_curves", selection, drill=False)
table, row = show_table("length_position", selection, drill=True)
show_instances(selection, row or cell, key="length.instances")
