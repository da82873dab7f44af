"""Length & position: ONCU heatmap (context length x evidence position), per-length curves,
and the scaling statistics of seed 000 §8.11 (Tables 10, 29, 30)."""

import streamlit as st

from core.oncu.metrics import SCALING_DEFINITIONS as DEF
from screens.parts.common import sidebar
from screens.parts.display import show_figure, show_instances, show_table, with_options
from screens.parts.markdown import md_escape
from screens.parts.oncu_guard import oncu_group_guard

selection = sidebar("length")
_P_TESTS = {
    "normal": "normal approximation (published)",
    "bootstrap": "bootstrap (this tool before issue 34)",
}
_OLS_P_TESTS = {
    "normal": "normal approximation (published)",
    "t": "t-test (this tool before issue 34)",
}
p_test = st.sidebar.selectbox(
    "Scaling-contrast p",
    list(_P_TESTS),
    key="length.p_test",
    format_func=_P_TESTS.get,
    help=DEF["p_contrast"],
)
ols_p_test = st.sidebar.selectbox(
    "Scaling-OLS p",
    list(_OLS_P_TESTS),
    key="length.ols_p_test",
    format_func=_OLS_P_TESTS.get,
    help=DEF["p_ols"],
)
if p_test != "normal" or ols_p_test != "normal":
    selection = with_options(selection, p_test=p_test, ols_p_test=ols_p_test)
_WORDS = {"normal": "normal", "bootstrap": "bootstrap", "t": "t-test"}
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
    st.caption(
        "Lengths are length buckets: nearest of 1K, 2K, 4K ... 128K tokens on a log2 "
        "scale (boundaries 1414, 2828, 5657 ...)."
    )
show_instances(selection, row or cell, key="length.instances")

# ------------------------------------------------------------------ scaling statistics
st.subheader("Scaling statistics", help=f"{DEF['cell']} {DEF['position_fraction']}")
_num = st.column_config.NumberColumn
by_length, _ = show_table(
    "scaling_by_length",
    selection,
    column_config={
        "note": st.column_config.TextColumn(
            "note", help="Lengths without a valid ONCU group (no number there)."
        )
    },
)
if len(by_length.columns) > 2:
    st.caption(f"Each number: {DEF['by_length']}")
contrasts, _ = show_table(
    "scaling_contrasts",
    selection,
    columns=[
        "run",
        "analysis",
        "label",
        "mean",
        "ci_low",
        "ci_high",
        "effect",
        "p",
        "p_holm",
        "n",
        "note",
    ],
    column_config={
        "label": st.column_config.TextColumn(
            "contrast", help=" ".join(DEF[k] for k in ("length", "final_decile", "retrieved_full"))
        ),
        "mean": _num("estimate", format="%.3f", help=DEF["contrast"]),
        "ci_low": _num("95% CI low", format="%.3f", help=DEF["contrast"]),
        "ci_high": _num("95% CI high", format="%.3f", help=DEF["contrast"]),
        "effect": _num(
            "effect",
            format="%.3f",
            help="mean(d) / sd(d), ddof 1; empty when "
            "sd(d) = 0 (the paper's dash). Seed 000 §7.6, Table 29.",
        ),
        "p": st.column_config.TextColumn(f"p ({_WORDS[p_test]})", help=DEF["p_contrast"]),
        "p_holm": st.column_config.TextColumn(
            f"p ({_WORDS[p_test]}, Holm across runs)", help=DEF["p_holm"]
        ),
        "n": _num("n", help="Matched cell pairs the contrast is paired over."),
    },
)
regression, _ = show_table(
    "scaling_regression",
    selection,
    columns=[
        "run",
        "condition",
        "term",
        "coefficient",
        "se",
        "t",
        "p",
        "p_bh",
        "r_squared",
        "n",
        "left_out",
        "note",
    ],
    column_config={
        "term": st.column_config.TextColumn(
            "term",
            help=" ".join(
                f"{k}: {DEF[k]}"
                for k in (
                    "log2_context_length_centered",
                    "position_fraction_centered",
                    "distance_from_middle_centered",
                )
            ),
        ),
        "coefficient": _num("estimate", format="%.3f", help=DEF["regression"]),
        "se": _num("SE", format="%.3f", help="Classical OLS standard error. Seed 000 Table 30."),
        "p": st.column_config.TextColumn(f"p ({_WORDS[ols_p_test]})", help=DEF["p_ols"]),
        "p_bh": st.column_config.TextColumn(
            f"p ({_WORDS[ols_p_test]}, BH across rows)", help=DEF["p_bh"]
        ),
        "r_squared": _num(
            "R²", format="%.3f", help="Share of the cells' ONCU variance the fit explains."
        ),
        "n": _num("cells", help="Length x position cells in the fit."),
        "left_out": _num("left out", help=DEF["left_out"]),
    },
)
# what the data cannot support, said once per statistic (never a silent empty cell)
notes = {}
for frame, stat, value in (
    (by_length, None, None),
    (contrasts, "label", "mean"),
    (regression, "condition", "coefficient"),
):
    if frame.empty or "note" not in frame.columns:
        continue
    for r in frame[frame["note"].notna()].to_dict("records"):
        name = (
            "ONCU by length"
            if stat is None
            else (r[stat] if stat == "label" else f"scaling OLS ({r[stat]})")
        )
        missing = value is None or r[value] != r[value]
        notes[(r["run"], name, r["note"])] = missing
for (run, name, note), missing in notes.items():
    text = md_escape(f"{run}: {name}: {note}")
    if missing:
        st.warning(text, icon=":material/warning:")
    else:
        st.caption(text)
