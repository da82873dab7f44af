"""DOLCE: lambda-k map, focus categories per task, per-problem outcome curve (SPEC §8)."""

import streamlit as st

from core.dolce.probes import K_P, LAM_P, LAM_Q, SCENARIO, TASK_BY, THRESHOLD
from core.figures.dolce import COLUMN_HELP, PIG_ESTIMATOR, fit_notes
from core.selection import selection_to_json
from screens.parts.common import cached_call, sidebar, tip
from screens.parts.display import (
    instance_link,
    show_figure,
    show_instances,
    show_table,
    with_options,
)
from screens.parts.markdown import md_escape
from screens.parts.widgets import param_widget

#: Column tooltips: each column's definition and paper section.
HELP = {c: st.column_config.Column(help=h) for c, h in COLUMN_HELP.items()}

selection = sidebar("dolce")
st.title("DOLCE: complexity and redundancy")
st.caption(
    "Each problem's context is split into L units (sentences, or passages); spans of C "
    "contiguous units (C = 0, 1, 2, 5, 10, ... , L) are shown to the model with the "
    "instruction to answer 'unanswerable' when the span lacks the answer. EM over a mixture "
    "of task-level background noise and a hybrid oracle estimates λ (the length of the "
    "shortest sufficient span, or number of aspects) and k (its copies) per problem. Probe a "
    "dataset with `python -m core run-probes --dataset NAME --backend embedded --name RUN` "
    "(or from the Runs page, Method: DOLCE probes). "
    "A probe whose call failed is missing, not a failed probe: the fit uses the answered "
    "probes (`n_obs`) and each problem and task shows how many are `missing`.",
    help="Seed dolce_lambda_k §3 (model), App. A-C (closed forms, Algorithms 1-2), App. H "
    "(COW / PIG per task), Figure 1 and §4 (categories and thresholds); SPEC §8; issue 16 "
    "(the PIG likelihood estimator).",
)
st.page_link(
    "screens/runs.py", label="Launch DOLCE probes on the Runs page", icon=":material/play_circle:"
)

with st.expander("Settings: scenario, PIG estimator and category thresholds", expanded=False):
    cols = st.columns(4) + st.columns(3)
    labels = {
        "lam_p": "λ_p",
        "k_p": "k_p",
        "lam_q": "λ_q",
        "scenario": "Scenario",
        "threshold": "COW threshold on relaxed F1",
        "task_by": "Task = problems sharing background noise",
        "pig_estimator": "PIG estimator",
    }
    offered = {"task_by": ("dataset", "reasoning_type", "source")}
    fit = {
        param.name: param_widget(
            param,
            f"dolce.{param.name}",
            col,
            label=labels[param.name],
            options=offered.get(param.name),
        )
        for param, col in zip(
            (LAM_P, K_P, LAM_Q, SCENARIO, THRESHOLD, TASK_BY, PIG_ESTIMATOR), cols, strict=True
        )
    }

selection = with_options(selection, **fit)

try:
    sel = selection_to_json(selection)
    notes = fit_notes(
        cached_call("table", name="dolce_problems", sel=sel),
        cached_call("table", name="dolce_tasks", sel=sel),
    )
except ValueError:
    notes = []  # the figures below say what is missing
for level, text in notes:
    # task names are data: shown as text, never as markdown
    if level == "warning":
        st.warning(md_escape(text), icon="⚠️")  # our own text (core.figures.dolce.fit_notes)
    elif level == "info":
        st.info(md_escape(text))
    else:
        st.text(text)

cell = show_figure("dolce_lambda_k_map", selection)
show_instances(selection, cell, key="dolce.instances")
show_figure("dolce_categories", selection, drill=False)

st.subheader("One problem", help=tip("dolce_outcome_curve"))
problems, picked = show_table(
    "dolce_problems",
    selection,
    drill=False,
    column_config=HELP,
    columns=[
        "problem",
        "task",
        "category",
        "identified",
        "lam",
        "k",
        "scenario",
        "dip_p",
        "dip_scenario",
        "estimator",
        "p_oracle",
        "L",
        "n_obs",
        "missing",
        "reasoning_type",
        "question",
    ],
)
if not problems.empty:
    problem = st.selectbox("Problem", problems["problem"].tolist(), key="dolce.problem")
    row = problems[problems["problem"] == problem].iloc[0]
    show_figure("dolce_outcome_curve", with_options(selection, problem=problem), drill=False)
    if "dataset" in problems.columns and "instance_id" in problems.columns:
        instance_link(str(row["dataset"]), str(row["instance_id"]))
show_table("dolce_tasks", selection, column_config=HELP)
