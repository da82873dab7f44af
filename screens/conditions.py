"""Conditions & ONCU: the four-condition matrix, ONCU with its audit, contrasts, failures,
calibration. Every number comes from a registered figure/table (core/views/catalog.py, plots in
core/figures/oncu.py)."""

import contextlib

import streamlit as st

from core.selection import selection_to_json
from core.stats.inference import RESAMPLE_MAX
from core.views.oncu import rows_in_store
from screens.parts import url_state
from screens.parts.common import HELP, get_store, prefetch, sidebar
from screens.parts.display import show_figure, show_instances, show_table, with_options
from screens.parts.markdown import md_escape
from screens.parts.oncu_guard import oncu_group_guard

#: Largest selection (contextual predictions) whose per-instance ONCU table shows on load.
_PER_INSTANCE_AUTO = 20_000
#: The tabs below the summary, and the session-state key of the open one (its label).
TABS = ("Four-condition matrix", "ONCU audit", "Paired contrasts", "Failure labels", "Calibration")
TAB_KEY = "conditions.tab"
#: The open tab's name in the URL (``tab=``; the first, the default, is not written).
TAB_NAMES = dict(
    zip(("matrix", "audit", "contrasts", "failures", "calibration"), TABS, strict=True)
)
url = url_state.applying()  # before the sidebar writes its part of the URL
selection = sidebar("conditions")
if url:
    url_state.adopt_named("tab", TAB_KEY, TAB_NAMES)
st.title("Conditions & ONCU")
_ESTIMATORS = {
    "auto": f"auto (index resampling up to {RESAMPLE_MAX:,} examples a cell, else counts)",
    "resample": "index resampling (published; slow on large cells)",
    "multinomial": "multinomial counts of distinct values",
}
ci_choice = st.sidebar.selectbox(
    "Per-example bootstrap estimator",
    list(_ESTIMATORS),
    key="conditions.ci_method",
    format_func=_ESTIMATORS.get,
    help="CIs of the condition matrix and the paired contrasts (5,000 resamples, seed 42). "
    "Index resampling draws resamples x examples indices (the published estimator); the "
    "multinomial estimator draws how often each distinct value is drawn: the resampled mean "
    "has exactly the same distribution, at a cost of resamples x distinct values (above 256 "
    "distinct values, 64 bins with a normal within-bin term: 'multinomial-binned'). Each row "
    "names its estimator in ci_method. ONCU CIs resample valid groups.",
)
if ci_choice != "auto":
    selection = with_options(selection, ci=ci_choice)
_P_TESTS = {
    "normal": "normal approximation (published)",
    "bootstrap": "bootstrap (this tool before issue 34)",
}
p_choice = st.sidebar.selectbox(
    "Paired-contrast p",
    list(_P_TESTS),
    key="conditions.p_test",
    format_func=_P_TESTS.get,
    help="p of the paired contrasts. Normal approximation (seed 000 §7.6, the default): "
    "z = mean(d) / (sd(d) / sqrt n), p = erfc(|z| / sqrt 2). Bootstrap: 2 min(P(d* >= 0), "
    "P(d* <= 0)) over the resampled mean differences. Either is Holm adjusted across the "
    "table's condition contrasts of every run shown (Table 29's family). A p below 0.001 "
    "shows as < 0.001.",
)
if p_choice != "normal":
    selection = with_options(selection, p_test=p_choice)
if not selection.dataset and not selection.runs:
    st.info("Choose a dataset (or runs) in the sidebar.")
# at study scale the open matrix tab's sample means with CIs (seconds: a pass over the score
# rows, then the bootstrap) are computed on a background thread while the ONCU summary is
# computed on this one
if TAB_KEY not in st.session_state or st.session_state[TAB_KEY] == TABS[0]:
    with contextlib.suppress(ValueError):  # the page's own calls say what is wrong
        if (selection.dataset or selection.runs) and rows_in_store(get_store(), selection):
            prefetch("table", name="condition_matrix", sel=selection_to_json(selection))
# length cell control, group-size distribution, small-group warning + coarser key button
selection = oncu_group_guard(selection)

summary, _ = show_table(
    "oncu_summary",
    selection,
    columns=[
        "run",
        "condition",
        "valid_groups",
        "total_groups",
        "n",
        "missing",
        "oncu_clipped",
        "oncu_ci_low",
        "oncu_ci_high",
        "oncu_raw_mean",
        "oncu_weighted",
        "n_above_oracle",
        "n_below_baseline",
        "invalid_reasons",
        "group_sizes",
        "median_group_size",
        "small_groups",
        "length_cell",
    ],
    column_config={
        "oncu_clipped": st.column_config.NumberColumn(
            "ONCU (clipped)", format="%.3f", help=HELP["oncu_clipped"]
        ),
        "oncu_raw_mean": st.column_config.NumberColumn(
            "raw mean", format="%.3f", help=HELP["oncu_raw_mean"]
        ),
        "oncu_weighted": st.column_config.NumberColumn(
            "weighted", format="%.3f", help=HELP["oncu_weighted"]
        ),
        "oncu_ci_low": st.column_config.NumberColumn("CI low", format="%.3f", help=HELP["ci"]),
        "oncu_ci_high": st.column_config.NumberColumn("CI high", format="%.3f", help=HELP["ci"]),
        "valid_groups": st.column_config.NumberColumn("valid groups", help=HELP["valid_groups"]),
        "missing": st.column_config.NumberColumn(
            "missing",
            help="Predictions whose score is NaN (failed or unscored calls): "
            "skipped by every mean, never counted as 0.",
        ),
        "group_sizes": st.column_config.TextColumn(
            "valid group sizes", help="Valid groups by instances per group."
        ),
        "median_group_size": st.column_config.NumberColumn("median size", format="%g"),
        "small_groups": st.column_config.NumberColumn(
            "groups < 5", help="Valid groups with fewer than 5 instances."
        ),
    },
)
if not summary.empty:
    cols = st.columns(len(summary))
    for col, row in zip(cols, summary.itertuples(), strict=True):
        col.metric(
            f"{md_escape(row.run)} · {md_escape(row.condition)} ONCU",
            f"{row.oncu_clipped:.3f}",
            f"{row.valid_groups}/{row.total_groups} valid groups, median size "
            f"{row.median_group_size:g}" + (" ⚠ mostly < 5" if row.small_group_warning else ""),
            delta_color="off",
            delta_arrow="off",
            help=HELP["oncu_clipped"],
        )


def _matrix_tab() -> None:
    """The four-condition matrix: means with CIs per run and condition."""
    cell = show_figure("condition_matrix", selection)
    show_instances(selection, cell, key="conditions.matrix_instances")
    show_table("condition_matrix", selection, key="tab.condition_matrix")


def _audit_tab() -> None:
    """The ONCU audit: raw against clipped ONCU per group, the groups, per-instance ONCU."""
    cell = show_figure("oncu_audit", selection)
    groups, row = show_table(
        "oncu_groups",
        selection,
        drill=True,
        columns=[
            "run",
            "condition",
            "status",
            "reasoning_type",
            "context_length",
            "evidence_position",
            "evidence_density",
            "distractor_similarity",
            "n",
            "missing",
            "n_instances",
            "s_none",
            "s_oracle",
            "s_c",
            "oncu_raw",
            "oncu_clipped",
            "valid",
            "invalid_reason",
            "length_cell",
        ],
    )
    bucketed = "length_cell" in groups.columns and bool((groups["length_cell"] == "bucket").any())
    if not groups.empty:
        above = groups[groups["status"] == "above_oracle"]
        below = groups[groups["status"] == "below_baseline"]
        invalid = groups[~groups["valid"]]
        st.caption(
            f"{len(above)} group(s) above oracle (raw > 1), {len(below)} below baseline "
            f"(raw < 0), {len(invalid)} invalid; select a row to list its instances."
            + (
                " context_length is the length bucket (nearest of 1K..128K tokens)."
                if bucketed
                else ""
            )
        )
    show_instances(selection, row or cell, key="conditions.group_instances")
    with st.expander("Per-instance ONCU (one group per instance)"):
        st.caption(
            "ONCU with the group key instance_id: S_none, S_oracle and S_c of each "
            "instance alone (as `report oncu --group-key instance_id`); CSV above."
        )
        small = summary.empty or int(summary["n"].sum()) <= _PER_INSTANCE_AUTO
        if st.toggle(
            "Show per-instance ONCU",
            value=small,
            key="conditions.per_instance_on",
            help="One row per instance and condition: on by default up to "
            f"{_PER_INSTANCE_AUTO:,} predictions, else computed when switched on.",
        ):
            show_table(
                "oncu_groups",
                with_options(selection, group_key=["instance_id"]),
                key="conditions.per_instance",
                columns=[
                    "run",
                    "condition",
                    "instance_id",
                    "n",
                    "missing",
                    "s_none",
                    "s_oracle",
                    "s_c",
                    "oncu_raw",
                    "oncu_clipped",
                    "status",
                    "valid",
                    "invalid_reason",
                ],
            )


def _contrast_tab() -> None:
    """Paired contrasts between conditions, p named by its test and adjustment."""
    words = "normal" if p_choice == "normal" else "bootstrap"
    show_table(
        "paired_contrasts",
        selection,
        columns=[
            "run",
            "contrast",
            "score_field",
            "n",
            "mean",
            "ci_low",
            "ci_high",
            "effect",
            "p",
            "p_holm",
            "p_mcnemar",
            "ci_method",
        ],
        column_config={
            "p": st.column_config.TextColumn(
                f"p ({words})",
                help=(
                    "Two-sided p of the paired contrast: " + _P_TESTS[p_choice] + ". Seed 000 §7.6."
                ),
            ),
            "p_holm": st.column_config.TextColumn(
                f"p ({words}, Holm across runs)",
                help=(
                    "Holm step-down adjusted p across every condition contrast of every run in "
                    "the table (seed 000 Table 29's family: the contrast across the models "
                    "shown); run-vs-run rows are their own family."
                ),
            ),
            "p_mcnemar": st.column_config.TextColumn(
                "p (McNemar exact)",
                help=("McNemar's exact p on the discordant pairs (binary scores only)."),
            ),
        },
    )


def _failure_tab() -> None:
    """Failure labels per condition."""
    cell = show_figure("failure_breakdown", selection)
    show_instances(selection, cell, key="conditions.failure_instances")
    show_table("failure_breakdown", selection)


def _calibration_tab() -> None:
    """Calibration of the confidences."""
    cal, _ = show_table("calibration", selection)
    if cal.empty:
        st.info("These predictions carry no confidences (imported results may lack them).")
    else:
        show_figure("calibration", selection, drill=False)


# only the open tab is computed (issue 17 item 6: a tab takes up to a second at 1,000,000
# predictions); switching tabs reruns the page, with the frame and its ONCU grouping cached
tabs = st.tabs(list(TABS), key=TAB_KEY, on_change="rerun")
opened = "matrix"
_DRAW = (_matrix_tab, _audit_tab, _contrast_tab, _failure_tab, _calibration_tab)
for name, tab, draw in zip(TAB_NAMES, tabs, _DRAW, strict=True):
    with tab:
        if tab.open:
            opened = name
            draw()
# the open tab in the URL, so a link opens it (cleared when another page is opened)
url_state.set_param("tab", None if opened == "matrix" else opened)
