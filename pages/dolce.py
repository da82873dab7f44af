"""DOLCE: lambda-k map, focus categories per task, per-problem outcome curve (SPEC §8)."""

import streamlit as st

from pages.common import (
    instance_link,
    show_figure,
    show_instances,
    show_table,
    sidebar,
    tip,
    with_options,
)

selection = sidebar("dolce")
st.title("DOLCE: complexity and redundancy")
st.caption(
    "Each problem's context is split into L units (sentences, or passages); spans of C "
    "contiguous units (C = 0, 1, 2, 5, 10, ... , L) are shown to the model with the "
    "instruction to answer 'unanswerable' when the span lacks the answer. EM over a mixture "
    "of task-level background noise and a hybrid oracle estimates lambda (the length of the "
    "shortest sufficient span, or number of aspects) and k (its copies) per problem. Probe a "
    "dataset with `python -m core run-probes --dataset NAME --backend embedded --name RUN`.",
    help="Seed dolce_lambda_k §3 (model), App. A-C (closed forms, Algorithms 1-2), Figure 1 "
    "and §4 (categories and thresholds); SPEC §8.",
)

with st.expander("Settings: scenario and category thresholds", expanded=False):
    cols = st.columns(3)
    lam_p = cols[0].number_input(
        "lambda_p", min_value=0.0, value=None, key="dolce.lam_p", placeholder="auto",
        help="II/III vs IV boundary. Default per problem: the first tertile (p = floor(N/3)-th "
        "smallest) of the N observed lengths other than 0 and L (seed §4).",
    )  # fmt: skip
    k_p = cols[1].number_input(
        "k_p", min_value=-1.0, value=None, key="dolce.k_p", placeholder="auto",
        help="II (k > k_p) vs III (k <= k_p). Default: the same first tertile (seed §4).",
    )  # fmt: skip
    lam_q = cols[2].number_input(
        "lambda_q", min_value=0.0, value=None, key="dolce.lam_q", placeholder="auto",
        help="IV vs V boundary. Default: the longest observed span shorter than L (seed §4: "
        "max C; the full-context observation is not a span).",
    )  # fmt: skip
    cols = st.columns(3)
    scenario = cols[0].selectbox(
        "Scenario", ["auto", "COW", "PIG"], key="dolce.scenario",
        help="auto: Hartigan's dip test on each problem's scores (bins of 0.1) - COW when "
        "p < 0.5 (correct-or-wrong), else PIG (partial points). Seed §3.1.",
    )  # fmt: skip
    threshold = cols[1].slider(
        "COW threshold on relaxed F1", 0.0, 1.0, 0.5, 0.05, key="dolce.threshold",
        help="Scores >= threshold count as correct (1) under COW. Seed §6, App. K.4.",
    )  # fmt: skip
    task_by = cols[2].selectbox(
        "Task = problems sharing background noise", ["dataset", "reasoning_type", "source"],
        key="dolce.task_by", help="The background-noise component is shared per task (seed §4).",
    )  # fmt: skip

selection = with_options(
    selection, lam_p=lam_p, k_p=k_p, lam_q=lam_q, scenario=scenario, threshold=threshold,
    task_by=task_by,
)  # fmt: skip
cell = show_figure("dolce_lambda_k_map", selection)
show_instances(selection, cell, key="dolce.instances")
show_figure("dolce_categories", selection, drill=False)

st.subheader("One problem", help=tip("dolce_outcome_curve"))
problems, picked = show_table(
    "dolce_problems", selection, drill=False,
    columns=["problem", "task", "category", "lam", "k", "scenario", "p_oracle", "L",
             "reasoning_type", "question"],
)  # fmt: skip
if not problems.empty:
    problem = st.selectbox("Problem", problems["problem"].tolist(), key="dolce.problem")
    row = problems[problems["problem"] == problem].iloc[0]
    show_figure("dolce_outcome_curve", with_options(selection, problem=problem), drill=False)
    if "dataset" in problems.columns and "instance_id" in problems.columns:
        instance_link(str(row["dataset"]), str(row["instance_id"]))
show_table("dolce_tasks", selection)
